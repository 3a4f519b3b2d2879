"""The benchmark's replan section (``gangplan bench --replan``): what moving a few running
gangs buys, per move budget (:mod:`gangplan.solver.replan`). Not a test: it reports numbers.

**Fat-tree.** A generated fat-tree (``gangplan generate fat-tree``) at 80% load, its running
jobs scattered as a locality-unaware scheduler left them. Its pending gangs are replaced by
one **probe**: an elastic gang of whole-node pods (8 GPUs each, ``min_member`` 1, as many as
a leaf has nodes) required in one leaf, so the replan's throughput entry is the size of the
largest 8-GPU-pod gang one leaf can take. Per budget ``0, 1, 2, 4, ...`` up to 2% of the
running gangs: the GPUs of the largest placeable 8-GPU-pod gang and the stranded GPUs once
the moves are made (before the probe is placed), and the moved gangs and GPUs. The target:
at most 2% of running gangs moved to make the largest placeable gang at least 4x larger,
where the free GPUs allow it (``free whole GPUs of the best leaf ≥ 4x before``: the
cluster's free GPUs in whole nodes of one leaf could hold it) — reported met or not.

**openb.** The Alibaba trace's nodes and pods (``../shared/data``), replayed with FGD one pod
at a time until the arrived demand reaches 100% of the GPUs (the replay's protocol,
:mod:`gangplan.adapters.bench.replay`); the placed pods become running single-pod gangs and
the replan may move up to a budget of them, with a probe of one-GPU pods (an elastic gang
of up to 1,000) pending so that its score counts whole GPUs: the whole GPUs recovered
(fully free GPU devices gained once the moves are made) per moved pod.

The model sees only the ``candidates`` running gangs on the emptiest leaves
(:func:`~gangplan.solver.replan.movable_gangs`), so a 512-node cycle stays solvable.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

from gangplan.models import GPU_MILLI, Gang, Role, RunningPod, Snapshot, TopologyConstraint
from gangplan.solver.replan import ReplanResult, ReplanSettings, replan
from gangplan.solver.result import SolverConfig

__all__ = [
    "SECTIONS",
    "ReplanRow",
    "ReplanSpec",
    "openb_rows",
    "probe_snapshot",
    "render_rows",
    "run_section",
]

POD_GPUS = 8


@dataclass(frozen=True)
class ReplanRow:
    """One budget of one instance."""

    instance: str
    running_gangs: int
    budget: int
    moved_gangs: int
    moved_pods: int
    moved_gpus: int
    largest_gpus: int
    stranded_gpus: int
    whole_free_gpus: int
    status: str
    waves: int
    valid: bool
    wall_s: float


@dataclass(frozen=True)
class ReplanSpec:
    """One fat-tree instance: shape, load, seed, the model's candidates and time limit."""

    spines: int
    leaves_per_spine: int
    nodes_per_leaf: int
    load: float
    seed: int
    candidates: int
    time_limit_s: float

    @property
    def name(self) -> str:
        nodes = self.spines * self.leaves_per_spine * self.nodes_per_leaf
        return f"ft{nodes}-{round(self.load * 100)}%-s{self.seed}"


SECTIONS: dict[str, tuple[ReplanSpec, ...]] = {
    "small": (ReplanSpec(1, 4, 16, 0.8, 0, 40, 20.0),),
    "standard": tuple(ReplanSpec(4, 8, 16, 0.8, s, 60, 60.0) for s in range(3)),
    "large": tuple(ReplanSpec(4, 8, 16, 0.8, s, 100, 120.0) for s in range(5)),
}
"""Per suite: the fat-tree instances of the replan section (512 nodes beyond ``small``)."""


def probe_snapshot(snapshot: Snapshot, nodes_per_leaf: int, pod_gpus: int = POD_GPUS) -> Snapshot:
    """``snapshot`` with its pending gangs replaced by the probe (module docstring)."""
    probe = Gang(
        name="probe",
        queue=snapshot.queues[0].name,
        min_member=1,
        topology=TopologyConstraint(required=snapshot.levels[-1].name),
        # model_construct: requests in base units already
        roles=(
            Role.model_construct(
                name="w", count=nodes_per_leaf, requests={snapshot.gpu: pod_gpus * GPU_MILLI}
            ),
        ),
    )
    return _with(snapshot, gangs=(probe,))


def _with(s: Snapshot, **parts: object) -> Snapshot:
    fields = {
        k: getattr(s, k)
        for k in (
            "resources",
            "levels",
            "device_layouts",
            "nodes",
            "queues",
            "gangs",
            "running",
            "preemption",
            "metadata",
        )
    }
    return Snapshot(**{**fields, **parts})


def _whole_free(view: dict[str, dict[str, int]]) -> int:
    return sum(1 for devs in view.values() for m in devs.values() if m >= GPU_MILLI)


def _rows(name: str, s: Snapshot, result: ReplanResult, wall: float) -> list[ReplanRow]:
    valid = not result.violations and not result.plan_violations
    rows = []
    for p in result.frontier:
        rows.append(
            ReplanRow(
                instance=name,
                running_gangs=len(s.preemption_rules.gangs),
                budget=p.budget,
                moved_gangs=p.moved_gangs,
                moved_pods=-p.score["preemption.evicted_pods"],
                moved_gpus=p.moved_gpus,
                largest_gpus=p.largest_gang_gpus,
                stranded_gpus=p.stranded_gpus,
                whole_free_gpus=p.whole_free_gpus,
                status=p.status,
                waves=len(result.move_plan.waves) if p is result.frontier[-1] else 0,
                valid=valid,
                wall_s=round(wall, 1),
            )
        )
    return rows


def run_section(suite: str, workers: int = 2) -> list[ReplanRow]:
    """Every fat-tree instance of the suite's replan section."""
    from gangplan.adapters.traces.generate import generate_fat_tree

    rows: list[ReplanRow] = []
    for spec in SECTIONS[suite]:
        base = generate_fat_tree(
            spines=spec.spines,
            leaves_per_spine=spec.leaves_per_spine,
            nodes_per_leaf=spec.nodes_per_leaf,
            load=spec.load,
            seed=spec.seed,
        )
        s = probe_snapshot(base, spec.nodes_per_leaf)
        top = max(1, math.floor(0.02 * len(s.preemption_rules.gangs)))
        settings = ReplanSettings(
            max_moved_gangs=top,
            max_candidates=spec.candidates,
            config=SolverConfig(time_limit_s=spec.time_limit_s, num_workers=workers),
        )
        started = time.monotonic()
        result = replan(s, settings)
        rows += _rows(spec.name, s, result, time.monotonic() - started)
    return rows


def openb_rows(
    data: Path, budget: int = 64, candidates: int = 200, time_limit_s: float = 120.0
) -> tuple[list[ReplanRow], str | None]:
    """The openb part (module docstring): rows, or none and a note why (trace absent)."""
    from gangplan.adapters.bench.replay import (
        ReplayCluster,
        _quantities,
        arrivals,
        trace_workload,
    )
    from gangplan.adapters.bench.suites import OPENB_NODES, OPENB_PODS
    from gangplan.adapters.traces.alibaba import QUEUE, read_openb_nodes, read_openb_pods
    from gangplan.solver.placers.one_pod import one_pod_placer

    nodes_csv, pods_csv = data / OPENB_NODES, data / OPENB_PODS
    if not nodes_csv.is_file() or not pods_csv.is_file():
        return [], f"{nodes_csv.parent} is absent (the openb trace lives in ../shared/data)"
    nodes, pods = read_openb_nodes(nodes_csv), read_openb_pods(pods_csv)
    cluster = ReplayCluster(nodes)
    seq = arrivals(pods, cluster.capacity_gpus, 0, target=1.0)
    place = one_pod_placer(cluster.state, "fgd", trace_workload(pods))
    running: list[RunningPod] = []
    for a in seq:
        gang = cluster.gang_of(a.pod)
        p = place(gang, a.name)
        if p is None:
            continue
        running.append(
            RunningPod(
                name=p.pod,
                gang=p.pod,
                queue=QUEUE,
                node=p.node,
                requests=_quantities(dict(gang.roles[0].requests)),
                devices=(*p.gpus, *p.nics),
            )
        )
    # the probe: up to 1,000 one-GPU pods (an elastic gang of any placement), so the score's
    # throughput entry counts the whole GPUs the moves make free
    probe = Gang(
        name="probe",
        queue=QUEUE,
        min_member=1,
        roles=(
            Role.model_construct(name="w", count=1000, requests={cluster.snapshot.gpu: GPU_MILLI}),
        ),
    )
    s = _with(cluster.snapshot, gangs=(probe,), running=tuple(running))
    settings = ReplanSettings(
        max_moved_gangs=budget,
        max_candidates=candidates,
        config=SolverConfig(time_limit_s=time_limit_s),
    )
    started = time.monotonic()
    result = replan(s, settings)
    return _rows("openb-100%", s, result, time.monotonic() - started), None


def render_rows(rows: list[ReplanRow]) -> str:
    """The rows as a Markdown table, then per instance the 2%-target line (fat-trees) or
    the whole GPUs recovered per moved pod (openb)."""
    lines = [
        "| instance | running gangs | budget | moved gangs | moved pods | moved GPUs | "
        "largest 8-GPU-pod gang (GPUs) | stranded GPUs | whole free GPUs | status | valid |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.instance} | {r.running_gangs} | {r.budget} | {r.moved_gangs} | "
            f"{r.moved_pods} | {r.moved_gpus} | {r.largest_gpus} | {r.stranded_gpus} | "
            f"{r.whole_free_gpus} | {r.status} | {'yes' if r.valid else 'NO'} |"
        )
    lines.append("")
    for inst in dict.fromkeys(r.instance for r in rows):
        mine = [r for r in rows if r.instance == inst]
        first, last = mine[0], mine[-1]
        if inst.startswith("openb"):
            gained = last.whole_free_gpus - first.whole_free_gpus
            per = gained / last.moved_pods if last.moved_pods else 0.0
            lines.append(
                f"- {inst}: {last.moved_pods} pods moved recover {gained} whole GPUs "
                f"({per:.2f} per moved pod); stranded {first.stranded_gpus} -> "
                f"{last.stranded_gpus}"
            )
            continue
        share = last.moved_gangs / last.running_gangs if last.running_gangs else 0.0
        ratio = last.largest_gpus / first.largest_gpus if first.largest_gpus else math.inf
        room = first.whole_free_gpus >= 4 * first.largest_gpus
        met = share <= 0.02 and ratio >= 4
        verdict = "met" if met else ("not met" if room else "not met (free GPUs do not allow 4x)")
        lines.append(
            f"- {inst}: {last.moved_gangs} of {last.running_gangs} running gangs moved "
            f"({100 * share:.1f}%): largest 8-GPU-pod gang {first.largest_gpus} -> "
            f"{last.largest_gpus} GPUs ({ratio:.1f}x), stranded {first.stranded_gpus} -> "
            f"{last.stranded_gpus}; target (<= 2% moved, >= 4x): {verdict}"
        )
    return "\n".join(lines) + "\n"
