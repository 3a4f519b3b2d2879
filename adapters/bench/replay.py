"""The Alibaba replay: the FGD paper's protocol on its trace (docs/replay.md).

Protocol (Weng et al., "Beware of Fragmentation", USENIX ATC '23, §6; its simulator
github.com/hkust-adsl/kubernetes-scheduler-simulator):

1. **Cluster.** Every node of the node list (``openb_node_list_all_node.csv``: 1,523 nodes,
   6,212 GPUs), empty at the start. Pods never leave.
2. **Arrivals.** The pods of the pod list in ``creation_time`` order (ties in file order;
   ``order="shuffle"``: a seeded shuffle, as the paper's runs do with ``--shuffle-pod``).
   Then further pods drawn at random (seeded, with replacement) from the same list until
   the next one would take the *arrived* GPU demand past ``target`` (1.3) times the
   cluster's GPUs. The arrived demand counts every pod that arrived, placed or not:
   ``gpu_milli`` for a share, 1000 per GPU otherwise, 0 for a CPU-only pod. (If the list
   alone asked more than the target, it would be cut at the first pod past it.)
3. **Placement.** Each pod is placed as it arrives, on one cluster state for the whole
   replay (:class:`~gangplan.solver.placers.state.ClusterState`; placing a pod changes one node,
   nothing is rebuilt); a pod that fits nowhere is counted and dropped. Capacity counts
   CPU, memory, GPUs and GPU models (``gpu_spec``), as the simulator's filters do.
4. **Measure.** GPUs allocated = allocated milli-GPU / 1000; the report gives the share of
   the cluster's GPUs allocated when the arrived demand first reaches 100% of them, and at
   the end (130%), and the curve of allocated against arrived (one point per percent).

Placers, one pod at a time (:mod:`gangplan.solver.placers.one_pod`, the code each baseline runs for
a gang of one pod; ``tests/adapters/bench/test_replay.py`` checks each against the baseline
run on a snapshot):

``greedy``
    Volcano binpack: the node with the highest binpack score (mean over the resources the pod
    asks of (used + request) / allocatable), ties to the first in node order; the share goes
    to the device with the least free milli-GPU that holds it.
``topology-fit``
    Kueue BestFit as :func:`~gangplan.solver.placers.topology_fit.topology_fit` implements it: for
    one
    pod the lowest level is the node, and the node with the least room (pods of this shape
    it can still hold, counted up to 64) that holds it, ties by name.
``fgd``
    :mod:`gangplan.solver.placers.fgd`, measured against the pod list's distribution of shapes
    (every pod of the list, CPU-only pods included, the most frequent shapes covering
    ``popularity`` = 95% of them, as the paper's runs set ``podPopularityThreshold``).
``cpsat``
    A different setting, reported apart: arrivals in cycles of ``batch`` (100) pods, each
    cycle a :func:`~gangplan.solver.cycle.solve_cycle_in` (CP-SAT, ``time_limit_s`` = 1 s) on a
    snapshot of the batch with everything placed so far as running pods. Batching reorders
    the arrivals of a cycle; the FGD baseline of its incumbent pool uses the trace's
    distribution; the statuses of the cycles (optimal / feasible / incumbent / fallback)
    are counted.

The paper's runs differ from this protocol in ways the report names (see ``docs`` and the
replay's closing note): they use only the 1,213 GPU nodes (``openb_node_list_gpu_node``),
shuffle the pod order, and break score ties at random.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from gangplan.adapters.files import write_output
from gangplan.adapters.traces.alibaba import (
    QUEUE,
    OpenbNode,
    OpenbPod,
    openb_instance,
    read_openb_nodes,
    read_openb_pods,
)
from gangplan.adapters.traces.common import snapshot_of
from gangplan.models import (
    GPU_MILLI,
    Gang,
    Role,
    RunningPod,
    Snapshot,
    format_quantity,
)
from gangplan.models.quantity import CPU, MEMORY
from gangplan.solver.judges.fragmentation import PodShape, Workload
from gangplan.solver.placers.one_pod import one_pod_placer
from gangplan.solver.placers.state import ClusterState, DeviceChoice
from gangplan.topology import build_topology

__all__ = [
    "REPLAY_PLACERS",
    "Arrival",
    "ReplayCluster",
    "ReplayConfig",
    "ReplayResult",
    "ReplaySummary",
    "arrivals",
    "cycles_text",
    "plan_source",
    "replay",
    "replay_pods",
    "result_data",
    "run_line",
    "summarize",
    "summary_rows",
    "summary_text",
    "trace_workload",
    "write_plot",
]

REPLAY_PLACERS = ("greedy", "fgd", "topology-fit", "cpsat")
"""Placers the replay knows; ``cpsat`` runs in batches (a different setting)."""

MIB = 2**20
Order = Literal["creation", "shuffle"]


@dataclass(frozen=True)
class ReplayConfig:
    """How a replay runs.

    ``target``: arrived GPU demand to reach, as a share of the cluster's GPUs (1.3).
    ``order``: ``creation`` (the pod list by ``creation_time``) or ``shuffle`` (seeded).
    ``checkpoints``: arrived shares at which the allocated share is reported (1.0).
    ``node_order``: ``file`` (the node list's order) or ``shuffle`` (a seeded permutation,
    as the paper's runs): score ties go to the first node in this order.
    ``popularity``: share of the list's pods whose shapes make FGD's workload (0.95).
    ``quantize``: FGD compares the simulator's integer score (:mod:`gangplan.solver.placers.fgd`).
    ``limit``: only the first ``limit`` pods of the list (by arrival order), for short runs.
    ``batch`` / ``time_limit_s`` / ``workers``: the CP-SAT cycles (pods per cycle, CP-SAT
    seconds per cycle, search workers).
    """

    target: float = 1.3
    order: Order = "creation"
    checkpoints: tuple[float, ...] = (1.0,)
    node_order: Literal["file", "shuffle"] = "file"
    popularity: float = 0.95
    quantize: bool = False
    limit: int | None = None
    batch: int = 100
    time_limit_s: float = 1.0
    workers: int = 2


@dataclass(frozen=True)
class Arrival:
    """One arriving pod: the trace row it copies and its own name (``<name>-x<i>`` for the
    pods drawn after the list)."""

    pod: OpenbPod
    name: str
    extra: bool = False

    @property
    def gpu_milli(self) -> int:
        """Its GPU demand in milli-GPU (0 for a CPU-only pod)."""
        return self.pod.gpu_request_milli if self.pod.num_gpu else 0


@dataclass(frozen=True)
class ReplayResult:
    """One replay run. Shares are of the cluster's GPUs (``capacity_gpus``), 0..1.

    ``allocated_at``: arrived share -> allocated share right after the first arrival that
    reached it (for the checkpoints, e.g. 1.0), and ``final`` the allocated share at the
    end (the target, 1.3). ``curve``: ``(arrived share, allocated share)`` each time the
    arrived demand passes a whole percent, and at the end. ``statuses``: CP-SAT cycle
    statuses (empty for the one-pod placers); ``cycle_times_s`` the wall time of each cycle
    (snapshot, baselines, model, solve, reasons).
    """

    placer: str
    seed: int
    config: ReplayConfig
    nodes: int
    capacity_gpus: int
    trace_pods: int
    extra_pods: int
    placed_pods: int
    failed_pods: int
    failed_gpu_milli: int
    arrived_gpu_milli: int
    allocated_gpu_milli: int
    allocated_at: dict[float, float]
    curve: tuple[tuple[float, float], ...]
    wall_time_s: float
    cycles: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    cycle_times_s: tuple[float, ...] = ()
    plans: dict[str, int] = field(default_factory=dict)
    """CP-SAT cycles by the plan they returned (:func:`plan_source`): ``cpsat`` for CP-SAT's
    own, else the incumbent's source (``fgd``, ``fgd restarts``, ...)"""

    @property
    def final(self) -> float:
        """Allocated share at the end."""
        return self.allocated_gpu_milli / (GPU_MILLI * self.capacity_gpus)

    @property
    def arrived(self) -> float:
        """Arrived demand at the end, as a share of the cluster's GPUs."""
        return self.arrived_gpu_milli / (GPU_MILLI * self.capacity_gpus)

    @property
    def unallocated_gpus(self) -> float:
        """GPUs left unallocated at the end."""
        return self.capacity_gpus - self.allocated_gpu_milli / GPU_MILLI


# --------------------------------------------------------------------------- the arrivals


def trace_workload(pods: Sequence[OpenbPod], popularity: float = 0.95) -> Workload:
    """FGD's target workload from a pod list: one count per pod (CPU-only pods included),
    its GPU models from ``gpu_spec``, the most frequent shapes covering ``popularity``."""
    return Workload.from_pods((_shape(p) for p in pods), popularity)


def _shape(pod: OpenbPod) -> PodShape:
    if pod.num_gpu == 0:
        return PodShape(pod.cpu_milli, 0, 0)
    if pod.is_share:
        return PodShape(pod.cpu_milli, 1, pod.gpu_milli, tuple(sorted(pod.gpu_spec)))
    return PodShape(pod.cpu_milli, pod.num_gpu, GPU_MILLI, tuple(sorted(pod.gpu_spec)))


def arrivals(
    pods: Sequence[OpenbPod],
    capacity_gpus: int,
    seed: int,
    *,
    target: float = 1.3,
    order: Order = "creation",
    limit: int | None = None,
) -> list[Arrival]:
    """The arrival sequence of the protocol (module docstring, step 2).

    Args:
        pods: the pod list.
        capacity_gpus: the cluster's GPUs (the demand target is ``target`` x this x 1000).
        seed: seeds the shuffle (``order="shuffle"``) and the draws after the list.
        target: arrived demand to reach, a share of the cluster's GPUs.
        order: ``creation`` or ``shuffle``.
        limit: keep only the first ``limit`` pods of the list (after ordering).
    """
    rng = random.Random(seed)
    if order == "creation":
        listed = sorted(pods, key=lambda p: p.arrival)
    elif order == "shuffle":
        listed = sorted(pods, key=lambda p: p.name)
        rng.shuffle(listed)
    else:
        raise ValueError(f"unknown order {order!r} (accepted: creation, shuffle)")
    if limit is not None:
        listed = listed[:limit]
    goal = target * capacity_gpus * GPU_MILLI
    out: list[Arrival] = []
    arrived = 0
    for p in listed:
        a = Arrival(p, p.name)
        if arrived + a.gpu_milli > goal:
            return out
        out.append(a)
        arrived += a.gpu_milli
    pool = sorted(listed, key=lambda p: p.name)
    if not pool or not any(p.num_gpu for p in pool):
        return out
    i = 0
    while True:
        p = pool[rng.randrange(len(pool))]
        a = Arrival(p, f"{p.name}-x{i}", extra=True)
        if arrived + a.gpu_milli > goal:
            return out
        out.append(a)
        arrived += a.gpu_milli
        i += 1


# --------------------------------------------------------------------------- the cluster


class ReplayCluster:
    """One snapshot of the nodes (no pods), its topology, and one
    :class:`~gangplan.solver.placers.state.ClusterState` for the whole replay.

    Each distinct pod (requests and accepted GPU models) becomes one gang of one pod, built
    once and reused; placing a pod updates only its node.
    """

    def __init__(self, nodes: Sequence[OpenbNode], *, leaf_size: int = 16):
        data = openb_instance(nodes, [], leaf_size=leaf_size, use_qos=False, name="alibaba-replay")
        self.snapshot, _ = snapshot_of("alibaba replay", data)
        self.topo = build_topology(self.snapshot)
        self.state = ClusterState(self.snapshot, self.topo)
        self.capacity_gpus = sum(n.gpus for n in nodes)
        self._gangs: dict[tuple[object, ...], Gang] = {}
        self.by_name = tuple(sorted(n.name for n in self.snapshot.nodes))

    def requests(self, pod: OpenbPod) -> dict[str, int]:
        """The pod's requests in base units (milli-CPU, bytes, milli-GPU)."""
        req = {CPU: pod.cpu_milli, MEMORY: pod.memory_mib * MIB}
        if pod.num_gpu:
            req[self.snapshot.gpu] = pod.gpu_request_milli
        return req

    def gang_of(self, pod: OpenbPod) -> Gang:
        """The (shared) one-pod gang for pods that ask what ``pod`` asks."""
        req = self.requests(pod)
        models = tuple(pod.gpu_spec) if pod.num_gpu else ()
        key = (tuple(sorted(req.items())), models)
        gang = self._gangs.get(key)
        if gang is None:
            gang = Gang(
                name=f"shape-{len(self._gangs)}",
                queue=QUEUE,
                roles=(Role(name="main", count=1, requests=_quantities(req)),),
                gpu_models=models,
            )
            self._gangs[key] = gang
        return gang


# --------------------------------------------------------------------------- the replay


class _Meter:
    """Arrived and allocated milli-GPU, the checkpoints and the curve."""

    def __init__(self, capacity_gpus: int, checkpoints: Sequence[float]):
        self.capacity = capacity_gpus * GPU_MILLI
        self.arrived = 0
        self.allocated = 0
        self.placed = 0
        self.failed = 0
        self.failed_milli = 0
        self.pending = sorted(checkpoints)
        self.at: dict[float, float] = {}
        self.curve: list[tuple[float, float]] = []
        self._percent = 0

    def arrive(self, milli: int) -> None:
        self.arrived += milli

    def outcome(self, milli: int, placed: bool) -> None:
        if placed:
            self.placed += 1
            self.allocated += milli
        else:
            self.failed += 1
            self.failed_milli += milli

    def mark(self) -> None:
        """Record checkpoints and curve points reached by the arrivals so far."""
        if not self.capacity:
            return
        a, x = self.arrived / self.capacity, self.allocated / self.capacity
        while self.pending and a >= self.pending[0] - 1e-12:
            self.at[self.pending.pop(0)] = x
        percent = math.floor(a * 100 + 1e-9)
        if percent > self._percent:
            self._percent = percent
            self.curve.append((a, x))

    def finish(self) -> tuple[tuple[float, float], ...]:
        if self.capacity:
            point = (self.arrived / self.capacity, self.allocated / self.capacity)
            if not self.curve or self.curve[-1] != point:
                self.curve.append(point)
        return tuple(self.curve)


def replay_pods(
    nodes: Sequence[OpenbNode],
    pods: Sequence[OpenbPod],
    placer: str,
    seed: int = 0,
    config: ReplayConfig | None = None,
    *,
    cluster: ReplayCluster | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replay a pod list on a node list (module docstring) with one placer.

    Args:
        nodes: the node list (e.g. :func:`read_openb_nodes`).
        pods: the pod list (e.g. :func:`read_openb_pods`); its distribution is FGD's workload.
        placer: one of :data:`REPLAY_PLACERS`.
        seed: seeds the arrivals (and the node order when ``node_order="shuffle"``).
        config: options (:class:`ReplayConfig`).
        cluster: a fresh :class:`ReplayCluster` of ``nodes`` to use (tests); built if None
            (in ``config.node_order``).
        progress: called with (arrivals done, arrivals in all) after each CP-SAT cycle.

    Raises:
        ValueError: an unknown placer or order.
    """
    cfg = config or ReplayConfig()
    if placer not in REPLAY_PLACERS:
        raise ValueError(f"unknown placer {placer!r} (accepted: {', '.join(REPLAY_PLACERS)})")
    started = time.monotonic()
    if cluster is None:
        ordered = list(nodes)
        if cfg.node_order == "shuffle":
            random.Random(f"nodes-{seed}").shuffle(ordered)
        elif cfg.node_order != "file":
            raise ValueError(f"unknown node order {cfg.node_order!r} (accepted: file, shuffle)")
        cluster = ReplayCluster(ordered)
    seq = arrivals(
        pods, cluster.capacity_gpus, seed, target=cfg.target, order=cfg.order, limit=cfg.limit
    )
    workload = trace_workload(pods, cfg.popularity)
    meter = _Meter(cluster.capacity_gpus, cfg.checkpoints)
    statuses: Counter[str] = Counter()
    plans: Counter[str] = Counter()
    times: list[float] = []
    if placer == "cpsat":
        times = _run_batched(
            cluster, seq, workload, cfg, seed, meter, statuses, progress, plans=plans
        )
    else:
        place = one_pod_placer(cluster.state, placer, workload, quantize=cfg.quantize)
        for a in seq:
            meter.arrive(a.gpu_milli)
            meter.outcome(a.gpu_milli, place(cluster.gang_of(a.pod), a.name) is not None)
            meter.mark()
    return ReplayResult(
        placer=placer,
        seed=seed,
        config=cfg,
        nodes=len(cluster.snapshot.nodes),
        capacity_gpus=cluster.capacity_gpus,
        trace_pods=sum(1 for a in seq if not a.extra),
        extra_pods=sum(1 for a in seq if a.extra),
        placed_pods=meter.placed,
        failed_pods=meter.failed,
        failed_gpu_milli=meter.failed_milli,
        arrived_gpu_milli=meter.arrived,
        allocated_gpu_milli=meter.allocated,
        allocated_at=dict(meter.at),
        curve=meter.finish(),
        wall_time_s=time.monotonic() - started,
        cycles=len(times),
        statuses=dict(statuses),
        cycle_times_s=tuple(times),
        plans=dict(plans),
    )


def _run_batched(
    cluster: ReplayCluster,
    seq: Sequence[Arrival],
    workload: Workload,
    cfg: ReplayConfig,
    seed: int,
    meter: _Meter,
    statuses: Counter[str],
    progress: Callable[[int, int], None] | None,
    *,
    plans: Counter[str] | None = None,
) -> list[float]:
    """CP-SAT cycles of ``cfg.batch`` arrivals; returns their wall times (``statuses`` and
    ``plans`` count the cycles by status and by the plan returned)."""
    from gangplan.solver.context import CycleContext
    from gangplan.solver.cycle import solve_cycle_in
    from gangplan.solver.result import SolverConfig, cpsat_seed

    base = cluster.snapshot
    state = cluster.state
    running: list[RunningPod] = []
    solver = SolverConfig(
        time_limit_s=cfg.time_limit_s, num_workers=cfg.workers, seed=cpsat_seed(seed)
    )
    times: list[float] = []
    for start in range(0, len(seq), cfg.batch):
        began = time.monotonic()
        chunk = seq[start : start + cfg.batch]
        gangs: list[Gang] = []
        for i, a in enumerate(chunk):
            shared = cluster.gang_of(a.pod)
            role = shared.roles[0]
            gangs.append(
                Gang(
                    name=a.name,
                    queue=QUEUE,
                    creation_time=float(start + i),
                    roles=(role.model_copy(update={"pod_names": (a.name,)}),),
                    gpu_models=shared.gpu_models,
                )
            )
        snapshot = Snapshot(
            resources=base.resources,
            levels=base.levels,
            nodes=base.nodes,
            queues=base.queues,
            gangs=tuple(gangs),
            running=tuple(running),
            metadata={"name": f"alibaba-replay-cycle-{len(times)}"},
        )
        result = solve_cycle_in(CycleContext.of(snapshot, workload=workload), None, solver)
        statuses[result.status.value] += 1
        if plans is not None and result.plan.summary is not None:
            plans[plan_source(result.plan.summary.placer)] += 1
        by_name = {g.name: g for g in gangs}
        quantities = {g.name: _quantities(g.roles[0].requests) for g in gangs}
        placed = set()
        for p in result.plan.pods:
            gang = by_name[p.gang]
            role = gang.roles[0]
            state.place(gang, role, p.node, p.pod, DeviceChoice.of(p))
            _check_node(state, p.node)
            running.append(
                RunningPod(
                    name=p.pod,
                    gang=p.gang,
                    queue=QUEUE,
                    node=p.node,
                    requests=quantities[gang.name],
                    devices=(*p.gpus, *p.nics),
                )
            )
            placed.add(p.gang)
        for a in chunk:
            meter.arrive(a.gpu_milli)
            meter.outcome(a.gpu_milli, a.name in placed)
        meter.mark()
        times.append(time.monotonic() - began)
        if progress is not None:
            progress(start + len(chunk), len(seq))
    return times


def plan_source(placer: str) -> str:
    """Whose plan a CP-SAT cycle returned, from its summary's placer: ``cpsat`` for CP-SAT's
    own (``cpsat``), else the incumbent named in ``cpsat (incumbent: NAME[, polished])``."""
    _, sep, rest = placer.partition("(incumbent: ")
    if not sep:
        return placer
    return rest.rstrip(")").split(",")[0].strip()


def _quantities(requests: dict[str, int]) -> dict[str, str]:
    """Base units back to quantity strings (the models read a bare number as whole units:
    ``cpu: 2`` is two cores)."""
    return {r: format_quantity(r, v) for r, v in requests.items()}


def _check_node(state: ClusterState, node: str) -> None:
    st = state.nodes[node]
    if any(v < 0 for v in st.resources.values()) or any(v < 0 for v in st.gpu_milli.values()):
        raise RuntimeError(f"replay: node {node!r} over capacity after a cycle's plan (a bug)")


def replay(
    nodes_csv: str | Path,
    pods_csv: str | Path,
    placer: str,
    seed: int = 0,
    config: ReplayConfig | None = None,
) -> ReplayResult:
    """Read the two CSV files and replay (:func:`replay_pods`).

    Raises:
        InputError: a bad CSV file (naming the file, row and column).
        ValueError: an unknown placer or order.
    """
    return replay_pods(read_openb_nodes(nodes_csv), read_openb_pods(pods_csv), placer, seed, config)


# --------------------------------------------------------------------------- summaries


@dataclass(frozen=True)
class ReplaySummary:
    """Mean and standard deviation (sample, 0 for one run) over the seeds of one placer.
    Shares 0..1; ``at`` per checkpoint; ``final`` at the end; wall time in seconds."""

    placer: str
    runs: int
    at: dict[float, tuple[float, float]]
    final: tuple[float, float]
    unallocated_gpus: tuple[float, float]
    failed_pods: tuple[float, float]
    wall_time_s: tuple[float, float]
    statuses: dict[str, int]
    plans: dict[str, int] = field(default_factory=dict)
    cycle_s: tuple[float, float] | None = None
    """CP-SAT: the mean and the largest wall seconds of a cycle, over every run's cycles"""


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return (math.nan, math.nan)
    return (statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0)


def summarize(results: Sequence[ReplayResult]) -> list[ReplaySummary]:
    """One :class:`ReplaySummary` per placer, in the order placers first appear."""
    groups: dict[str, list[ReplayResult]] = {}
    for r in results:
        groups.setdefault(r.placer, []).append(r)
    out = []
    for placer, rs in groups.items():
        # every checkpoint asked for, reached or not (a mean of nothing is nan: "not reached")
        points = sorted({k for r in rs for k in (*r.allocated_at, *r.config.checkpoints)})
        statuses: Counter[str] = Counter()
        plans: Counter[str] = Counter()
        for r in rs:
            statuses.update(r.statuses)
            plans.update(r.plans)
        out.append(
            ReplaySummary(
                placer=placer,
                runs=len(rs),
                at={
                    k: _mean_std([r.allocated_at[k] for r in rs if k in r.allocated_at])
                    for k in points
                },
                final=_mean_std([r.final for r in rs]),
                unallocated_gpus=_mean_std([r.unallocated_gpus for r in rs]),
                failed_pods=_mean_std([float(r.failed_pods) for r in rs]),
                wall_time_s=_mean_std([r.wall_time_s for r in rs]),
                statuses=dict(statuses),
                plans=dict(plans),
                cycle_s=_cycle_s([t for r in rs for t in r.cycle_times_s]),
            )
        )
    return out


def _cycle_s(times: Sequence[float]) -> tuple[float, float] | None:
    return (statistics.fmean(times), max(times)) if times else None


def _pm(ms: tuple[float, float], unit: str, scale: float = 100.0, digits: int = 2) -> str:
    """``mean ± std`` with its unit (``%`` right after the numbers, a word after a space);
    ``not reached`` when no run has the value."""
    mean, std = ms
    if math.isnan(mean):
        return "not reached"
    sep = "" if unit == "%" else " "
    return f"{mean * scale:.{digits}f} ± {std * scale:.{digits}f}{sep}{unit}"


def run_line(result: ReplayResult) -> str:
    """One run in a line, every figure with its unit: the allocated share at each checkpoint
    reached (or that it was not reached), at the end, the GPUs left free, the pods dropped
    and the run's seconds."""
    r = result
    at = {k: f"{v * 100:.2f}% allocated" for k, v in r.allocated_at.items()}
    at.update({k: "never reached" for k in r.config.checkpoints if k not in r.allocated_at})
    points = "".join(f"at {k * 100:g}% arrived: {v}; " for k, v in sorted(at.items()))
    return (
        f"{r.placer} seed {r.seed}: {points}at the end ({r.arrived * 100:.1f}% arrived): "
        f"{r.final * 100:.2f}% allocated, {r.unallocated_gpus:.1f} GPUs free; "
        f"{r.failed_pods} pod{'' if r.failed_pods == 1 else 's'} dropped; {r.wall_time_s:.1f} s"
    )


def summary_rows(summaries: Sequence[ReplaySummary]) -> tuple[list[str], list[list[str]]]:
    """A table of the summaries (header, rows): allocated % at each checkpoint and at the
    end (mean ± std over the seeds), unallocated GPUs, dropped pods, seconds per run (and,
    for CP-SAT, a cycle's mean and longest), and the CP-SAT cycle statuses and plans; every
    cell with its unit, ``not reached`` for a checkpoint no run reached."""
    points = sorted({k for s in summaries for k in s.at})
    header = [
        "placer",
        "runs",
        *[f"allocated at {k * 100:.0f}% arrived" for k in points],
        "allocated at the end",
        "unallocated GPUs",
        "dropped pods",
        "time per run",
        "cycle statuses",
    ]
    rows = []
    for s in summaries:
        rows.append(
            [
                s.placer,
                str(s.runs),
                *[_pm(s.at[k], "%") if k in s.at else "not reached" for k in points],
                _pm(s.final, "%"),
                _pm(s.unallocated_gpus, "GPUs", 1.0, 1),
                _pm(s.failed_pods, "pods", 1.0, 0),
                _pm(s.wall_time_s, "s", 1.0, 1)
                + (
                    f" ({s.cycle_s[0]:.2f} s a cycle, the longest {s.cycle_s[1]:.2f} s)"
                    if s.cycle_s is not None
                    else ""
                ),
                cycles_text(s.statuses, s.plans) or "none (one pod at a time)",
            ]
        )
    return header, rows


def cycles_text(statuses: dict[str, int], plans: dict[str, int]) -> str:
    """CP-SAT cycles by status, then by the plan returned (most first), e.g. ``incumbent
    108; plans: fgd restarts 79, fgd 29``; empty for none."""
    text = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
    if plans:
        ranked = sorted(plans.items(), key=lambda kv: (-kv[1], kv[0]))
        text += "; plans: " + ", ".join(f"{k} {v}" for k, v in ranked)
    return text


def summary_text(header: Sequence[str], rows: Sequence[Sequence[str]], title: str) -> list[str]:
    """:func:`summary_rows` as plain text for a pipe or a file (no box characters): the
    title, then per placer its name and runs, and one ``  column  value`` line per column,
    the titles aligned. At most 80 columns unless a cell alone is longer."""
    width = max(len(h) for h in header[2:]) if len(header) > 2 else 0
    out = [title]
    for row in rows:
        out.append("")
        out.append(f"{row[0]} ({row[1]} {'run' if row[1] == '1' else 'runs'})")
        out += [f"  {h.ljust(width)}  {c}" for h, c in zip(header[2:], row[2:], strict=True)]
    return out


def result_data(result: ReplayResult) -> dict[str, object]:
    """One run as plain data (JSON-ready): every field, the shares at the checkpoints keyed
    by their percent (``"100"``), ``final``, ``arrived`` and ``unallocated_gpus``."""
    data = asdict(result)
    data["config"] = {
        k: list(v) if isinstance(v, tuple) else v for k, v in asdict(result.config).items()
    }
    data["allocated_at"] = {f"{k * 100:g}": v for k, v in result.allocated_at.items()}
    data["curve"] = [list(p) for p in result.curve]
    data["final"] = result.final
    data["arrived"] = result.arrived
    data["unallocated_gpus"] = result.unallocated_gpus
    return data


def write_plot(results: Sequence[ReplayResult], path: str | Path, title: str = "") -> None:
    """Allocated against arrived GPU demand (shares of the cluster's GPUs), one line per
    placer (the mean over its seeds, per percent of arrived demand), as a PNG, written by
    :func:`gangplan.adapters.files.write_output` (atomically; a device or FIFO as a stream).

    Raises:
        InputError: the file cannot be written.
    """
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    groups: dict[str, list[ReplayResult]] = {}
    for r in results:
        groups.setdefault(r.placer, []).append(r)
    for placer, rs in groups.items():
        buckets: dict[int, list[float]] = {}
        for r in rs:
            for a, x in r.curve:
                buckets.setdefault(round(a * 100), []).append(x)
        xs = sorted(buckets)
        ax.plot(xs, [100 * statistics.fmean(buckets[k]) for k in xs], label=f"{placer} ({len(rs)})")
    ax.plot([0, 130], [0, 130], color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlim(0, 135)
    ax.set_ylim(0, 105)
    ax.set_xlabel("arrived GPU demand (% of the cluster's GPUs)")
    ax.set_ylabel("GPUs allocated (%)")
    ax.set_title(title or "Alibaba openb replay")
    ax.legend(loc="lower right")
    ax.grid(True, linewidth=0.3)
    fig.tight_layout()
    image = io.BytesIO()
    suffix = Path(path).suffix.lstrip(".").lower()
    fmt = suffix if suffix in fig.canvas.get_supported_filetypes() else "png"
    fig.savefig(image, dpi=120, format=fmt)  # .svg, .pdf, ... by the suffix, as savefig(path)
    plt.close(fig)
    write_output(path, image.getvalue())
