"""``gangplan replan``: the cycle with running gangs allowed to move, under a move budget,
and the move plan that gets there (``docs/solver.md``, "Replan: moves in waves").

Overview (:func:`replan`):

1. :func:`movable_gangs`: the running gangs that may move — every pod tolerates disruption
   (``preemptible``) and has an owner that creates it again once evicted, where it can be
   followed (:func:`~gangplan.models.why_not_recreated`), the gang is charged to a queue, a
   wave's budgets (the settings' and the snapshot's PodDisruptionBudgets) let it move whole
   (:func:`why_not_movable`); optionally only the ``max_candidates`` most promising (those
   on the emptiest leaves first);
2. :func:`move_snapshot`: the snapshot with each movable gang a victim of the preemption
   model and a pending **copy** of it (same pods by name, same queue and priority, roles by
   identical requests and the pods' own nodeSelector, affinity and tolerations, a multi-pod
   gang's required to stay within the lowest topology
   domain that holds all its pods now (a single-pod gang's may go anywhere: moving it out
   is what frees a leaf), on its GPU model, never preempting anyone, charged to
   :data:`MOVES_QUEUE`); other running pods stay put;
3. per move budget ``0, 1, 2, 4, 8, ...`` up to ``max_moved_gangs``: CP-SAT on that
   snapshot (:mod:`gangplan.solver.model.moves`), hinted with the previous budget's
   solution (the first with the best baseline plan, no move); each solve gets an equal
   share of the time limit; the **frontier** records per budget the score, the GPUs of the
   largest gang of ``pod_gpus``-GPU pods that would then fit in one leaf, the stranded GPUs;
4. the best budget's solution: its moves become targets, :func:`~gangplan.solver.replan.waves.
   plan_waves` orders them into waves, and :func:`~gangplan.solver.judges.verify_moves.
   verify_moves` and :func:`~gangplan.solver.judges.verify.verify` (the pending gangs' plan in the
   state after the moves) check the result.

The **replan score** of a solution is :func:`~gangplan.solver.judges.score.score` of the move
snapshot and the plan (copies placed, moved pods evicted), with the fair shares of the
original snapshot (a copy is no new demand). A move counts as an eviction and its copy as
an admission of the same class, so the entries above ``preemption.*`` see only what moves
make possible; ``preemption.evicted_gpu_milli`` and ``preemption.evicted_pods`` then count
the moved GPUs and pods, fewer first.

**What replan shares with the cycle** (:mod:`gangplan.solver.cycle.pipeline`), and why not
more. It shares the cycle's context (:class:`~gangplan.solver.context.CycleContext`: the
original snapshot's for the baselines, the move snapshot's for the model, with the original's
fair shares and workload), the baselines as the cycle runs them
(:func:`~gangplan.solver.cycle.run_baseline_in`: reservations, greedy preemption, reasons),
the model and its tier-by-tier search (:func:`~gangplan.solver.model.builder.solve_model`,
the cycle's step 4, with the moves on the context: :class:`~gangplan.solver.model.moves.
MoveSpec`) and the judges (:func:`~gangplan.solver.judges.score.score`,
:func:`~gangplan.solver.judges.verify.verify`). It does not run
:func:`~gangplan.solver.cycle.solve_cycle` per move budget, because each of the cycle's
other steps means something else here: the budget is a frontier of solves, each an equal
share of the time limit, not one cycle's parts; a solve's hint is the previous budget's
solution (a larger budget admits every plan of a smaller one), not the baselines' incumbent,
so there are no restarts and no polish; the choice is across budgets by the replan score,
and what is verified is the move plan (:func:`~gangplan.solver.judges.verify_moves.
verify_moves`) and the final plan in the state after the waves, which the cycle's verifier
does not see; a pending gang gets one reason (not placed within the move budget); and the
result is a :class:`~gangplan.models.MovePlan` in waves (:func:`_move_result`), not a
cycle's plan.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from gangplan.models import (
    GPU_MILLI,
    Eviction,
    Gang,
    GangOutcome,
    MovePlan,
    PendingReason,
    Plan,
    PodPlacement,
    PreemptionSettings,
    Queue,
    Role,
    RunningGang,
    RunningPod,
    Snapshot,
    TopologyConstraint,
    WaveLimits,
    why_not_recreated,
)
from gangplan.solver.context import CycleContext
from gangplan.solver.cycle import run_baseline_in
from gangplan.solver.judges.fairness import FairShares, fair_shares
from gangplan.solver.judges.fragmentation import Workload
from gangplan.solver.judges.score import Score, score
from gangplan.solver.judges.verify import verify
from gangplan.solver.judges.verify_moves import MoveViolation, after_waves, verify_moves
from gangplan.solver.model.builder import solve_model
from gangplan.solver.model.moves import MoveSpec
from gangplan.solver.placers.baselines import BASELINES
from gangplan.solver.replan.waves import plan_waves
from gangplan.solver.result import SolverConfig
from gangplan.topology import Topology, build_topology

__all__ = [
    "FrontierPoint",
    "ReplanResult",
    "ReplanSettings",
    "budgets",
    "free_gpu_view",
    "largest_leaf_gang",
    "movable_gangs",
    "move_snapshot",
    "replan",
    "stranded_gpus",
    "why_not_movable",
]

COPY_SUFFIX = ".mv"
MOVES_QUEUE = "gangplan-moves"
"""The queue copies are charged to: one without a fair target or a max, so a move neither
counts twice in its queue's dominant share (the running gang's usage stays in the fair
shares' base) nor changes the targets. Against a queue's max a copy counts as its running
gang's queue (family ``queue_max``): a move never frees quota."""
"""Appended to a moving gang's name and to each of its pods' for its copy (``.mv`` names
the copy apart from any real gang: dots are allowed in object names)."""


@dataclass(frozen=True)
class ReplanSettings:
    """What ``gangplan replan`` may do.

    ``max_moved_gangs``: the largest move budget of the frontier (None: every movable gang);
    ``max_moved_gpus``: GPUs moved at most, at every budget (None: no cap); ``pod_gpus``: the
    pod size of the frontier's "largest gang" (GPUs per pod, 8: whole-node pods);
    ``max_candidates``: running gangs offered to the model (None: every movable one);
    ``limits``: the waves' budgets; ``config``: the solver's (its ``time_limit_s`` is the
    total for the whole frontier).
    """

    max_moved_gangs: int | None = None
    max_moved_gpus: int | None = None
    pod_gpus: int = 8
    max_candidates: int | None = None
    limits: WaveLimits = field(default_factory=WaveLimits)
    config: SolverConfig = field(default_factory=SolverConfig)


@dataclass(frozen=True)
class FrontierPoint:
    """One move budget's result: ``budget`` gangs allowed, ``moved_gangs`` / ``moved_gpus``
    used (GPUs), the replan score, ``largest_gang_gpus`` (GPUs of the largest gang of
    ``pod_gpus``-GPU pods that fits in one leaf once the moves are made, before the pending
    gangs are placed: the room the moves make), ``stranded_gpus`` (free whole GPUs then that
    no ``pod_gpus``-GPU pod can use: per node, free GPUs modulo the pod size) and the
    pending gangs the plan admits."""

    budget: int
    moved_gangs: int
    moved_gpus: int
    score: Score
    largest_gang_gpus: int
    stranded_gpus: int
    whole_free_gpus: int
    """GPU devices fully free once the moves are made"""
    admitted: int
    status: str


@dataclass
class ReplanResult:
    """The frontier (budget 0 first), the chosen budget's target plan on the move snapshot,
    its move plan and what the verifiers said (both empty: valid)."""

    frontier: list[FrontierPoint]
    move_snapshot: Snapshot
    target: Plan
    move_plan: MovePlan
    violations: list[MoveViolation]
    plan_violations: list[str]
    notes: list[str] = field(default_factory=list)
    wall_time_s: float = 0.0
    movable: int = 0
    """running gangs offered to the model"""
    not_movable: dict[str, str] = field(default_factory=dict)
    """running gang key -> why it may not move (:func:`why_not_movable`)"""
    final_score: Score | None = None
    """the final plan's score in the state after the waves (None: not computed)"""
    base_score: Score | None = None
    """the same for budget 0 (no move): what the move plan is compared with"""
    leaf_level: str | None = None
    """the lowest topology level (the frontier's "largest gang" fits in one of its domains)"""
    workload_weight: tuple[int, int] = (1, 1)
    """``Σ_m w_m`` of the frontier's and of the final score's workloads: divides
    ``fragmentation.expected`` into milli-GPU (:mod:`gangplan.solver.judges.score`)"""


# --------------------------------------------------------------------------- candidates


def free_gpu_view(
    snapshot: Snapshot,
    pods: Sequence[PodPlacement] = (),
    evicted: Collection[tuple[str, str]] = frozenset(),
) -> dict[str, dict[str, int]]:
    """Free milli-GPU per device per node after ``evicted`` running pods leave and ``pods``
    take their devices."""
    out: dict[str, dict[str, int]] = {}
    gone: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for rp in snapshot.running:
        if (rp.namespace, rp.name) in evicted:
            gone[rp.node].add((rp.namespace, rp.name))
    for node in snapshot.nodes:
        free = snapshot.free_after(node.name, gone.get(node.name, set()))
        out[node.name] = dict(free.gpu_milli)
    gangs = snapshot.gang_by_key
    for p in pods:
        gang = gangs.get(p.gang_key)
        want = gang.role(p.role).requests.get(snapshot.gpu, 0) if gang is not None else 0
        for d in p.gpus:
            share = p.gpu_milli if (p.gpu_milli is not None and 0 < want < GPU_MILLI) else GPU_MILLI
            out[p.node][d] = out[p.node].get(d, 0) - share
    return out


def _whole_free(view: dict[str, int]) -> int:
    return sum(1 for m in view.values() if m >= GPU_MILLI)


def largest_leaf_gang(topo: Topology, view: dict[str, dict[str, int]], pod_gpus: int) -> int:
    """GPUs of the largest gang of ``pod_gpus``-GPU pods that fits in one leaf (the whole
    cluster without levels): ``max_leaf Σ_n pod_gpus · ⌊whole free GPUs(n) / pod_gpus⌋``."""
    leaf = topo.leaf_level
    groups: dict[object, int] = defaultdict(int)
    for node, devs in view.items():
        dom = topo.domain_of(node, leaf) if leaf is not None else None
        key: object = dom if dom is not None else ("alone", node) if leaf else "cluster"
        groups[key] += pod_gpus * (_whole_free(devs) // pod_gpus)
    return max(groups.values(), default=0)


def stranded_gpus(view: dict[str, dict[str, int]], pod_gpus: int) -> int:
    """Free whole GPUs no ``pod_gpus``-GPU pod can use: Σ_n (whole free GPUs(n) mod
    ``pod_gpus``)."""
    return sum(_whole_free(devs) % pod_gpus for devs in view.values())


def why_not_movable(rg: RunningGang, limits: WaveLimits | None = None) -> str | None:
    """Why running gang ``rg`` may not move (None: it may): a pod that tolerates no
    disruption, a pod that nothing recreates where it can be followed once evicted
    (:func:`~gangplan.models.why_not_recreated`: a bare pod, a Deployment's, an owner kind
    not known to recreate its pods), no queue, a pod without requests, or — a gang is
    evicted whole in one wave (:class:`~gangplan.models.WaveLimits`) — more pods on one
    node, in one namespace or under one PodDisruptionBudget than a wave may move (the
    ``limits``' budgets: :func:`replan` adds the snapshot's)."""
    if not rg.preemptible:
        return "not preemptible"
    for p in rg.pods:
        why = why_not_recreated(p.owner)
        if why is not None:
            return f"not recreated: pod {p.name} is {why}"
    if rg.queue is None:
        return "of no queue"
    if not all(p.requests for p in rg.pods):
        return "a pod without requests"
    if limits is None:
        return None
    per_node = Counter(p.node for p in rg.pods)
    if limits.max_moving_per_node is not None and max(per_node.values()) > (
        limits.max_moving_per_node
    ):
        return "over the per-node budget"
    ns = Counter(p.namespace for p in rg.pods)
    if limits.max_moving_per_namespace is not None and max(ns.values()) > (
        limits.max_moving_per_namespace
    ):
        return "over the per-namespace budget"
    for b in limits.budgets:
        covered = sum(1 for p in rg.pods if p.namespace == b.namespace and p.name in b.pods)
        if covered > b.disruptions_allowed:
            return "over a PodDisruptionBudget"
    return None


def movable_gangs(
    snapshot: Snapshot, max_candidates: int | None = None, limits: WaveLimits | None = None
) -> list[RunningGang]:
    """Running gangs that may move (module docstring; :func:`why_not_movable` gives None,
    the waves' ``limits`` counted when given); with ``max_candidates``, those whose leaves
    have the most free GPUs first (moving them out frees a leaf), then the fewest GPUs."""
    rules = snapshot.preemption_rules
    out = [rg for rg in rules.gangs.values() if why_not_movable(rg, limits) is None]
    if max_candidates is None or len(out) <= max_candidates:
        return out
    topo = build_topology(snapshot)
    leaf = topo.leaf_level
    view = free_gpu_view(snapshot)
    leaf_free: dict[object, int] = defaultdict(int)
    for node, devs in view.items():
        leaf_free[topo.domain_of(node, leaf) if leaf else "cluster"] += _whole_free(devs)

    def rank(rg: RunningGang) -> tuple[int, int, str]:
        best = max(leaf_free[topo.domain_of(p.node, leaf) if leaf else "cluster"] for p in rg.pods)
        gpus = sum(p.requests.get(snapshot.gpu, 0) for p in rg.pods)
        return (-best, gpus, rg.key)

    return sorted(out, key=rank)[:max_candidates]


# --------------------------------------------------------------------------- the snapshot


def _copy_gang(snapshot: Snapshot, topo: Topology, rg: RunningGang, name: str) -> Gang:
    """The pending copy of running gang ``rg`` (module docstring, step 2): one role per
    set of its pods alike in requests, nodeSelector, required affinity and tolerations (a
    moved pod goes only where its own rules let it)."""
    by_req: dict[tuple[object, ...], list[RunningPod]] = defaultdict(list)
    for p in rg.pods:
        alike = (
            tuple(sorted(p.requests.items())),
            tuple(sorted(p.node_selector.items())),
            p.node_affinity,
            p.tolerations,
        )
        by_req[alike].append(p)
    # model_construct: the requests are in base units already (validating would parse them
    # again as quantities, e.g. 1000 milli-CPU as 1000 CPUs)
    roles = tuple(
        Role.model_construct(
            name=f"r{j}",
            count=len(pods),
            requests=dict(pods[0].requests),
            node_selector=dict(pods[0].node_selector),
            node_affinity=pods[0].node_affinity,
            tolerations=pods[0].tolerations,
            pod_names=tuple(p.name + COPY_SUFFIX for p in pods),
        )
        for j, pods in enumerate(by_req.values())
    )
    required = None
    if rg.size > 1:
        for level in reversed(topo.levels):
            domains = {topo.domain_of(p.node, level) for p in rg.pods}
            if len(domains) == 1 and None not in domains:
                required = level
                break
    models = {
        snapshot.node_by_name[p.node].gpu_model
        for p in rg.pods
        if p.requests.get(snapshot.gpu, 0) > 0
    }
    gpu_models = tuple(sorted(m for m in models if m is not None)) if None not in models else ()
    return Gang(
        name=name,
        namespace=rg.namespace,
        queue=MOVES_QUEUE,
        priority=rg.priority,
        creation_time=rg.admitted or 0.0,
        roles=roles,
        topology=TopologyConstraint(required=required) if required else None,
        gpu_models=gpu_models,
        preemption_policy="Never",
    )


def move_snapshot(
    snapshot: Snapshot, movable: list[RunningGang], topo: Topology | None = None
) -> tuple[Snapshot, dict[str, str]]:
    """The snapshot the replan model solves (module docstring, step 2) and the copy of
    each movable gang (running gang key -> copy gang key)."""
    topo = topo or build_topology(snapshot)
    taken = {g.key for g in snapshot.gangs}
    copies: dict[str, str] = {}
    new: list[Gang] = []
    for rg in movable:
        base = rg.name[: 253 - len(COPY_SUFFIX) - 4] + COPY_SUFFIX
        name, k = base, 1
        while f"{rg.namespace}/{name}" in taken:
            name, k = f"{base}{k}", k + 1
        gang = _copy_gang(snapshot, topo, rg, name)
        taken.add(gang.key)
        copies[rg.key] = gang.key
        new.append(gang)
    moving = {(p.namespace, p.name) for rg in movable for p in rg.pods}
    running = tuple(
        p.model_copy(update={"preemptible": (p.namespace, p.name) in moving, "min_member": None})
        for p in snapshot.running
    )
    queue = Queue(name=MOVES_QUEUE)
    out = Snapshot(
        resources=snapshot.resources,
        levels=snapshot.levels,
        device_layouts=snapshot.device_layouts,
        nodes=snapshot.nodes,
        queues=(*snapshot.queues, queue) if new else snapshot.queues,
        gangs=(*snapshot.gangs, *new),
        running=running,
        preemption=PreemptionSettings(enabled=True, grace_s=0.0, now=snapshot.preemption.now),
        metadata=snapshot.metadata,
    )
    return out, copies


def _shares(snapshot: Snapshot, s2: Snapshot) -> FairShares:
    """The original snapshot's fair shares (targets, base), over the classes of the move
    snapshot's pending gangs (copies included, so their admission is throughput)."""
    fs = fair_shares(snapshot)
    classes = {g.priority for g in s2.gangs} | set(fs.classes)
    return dataclasses.replace(fs, classes=tuple(sorted(classes, reverse=True)))


def budgets(top: int) -> list[int]:
    """``0, 1, 2, 4, 8, ...`` below ``top``, then ``top``."""
    out, k = [0], 1
    while k < top:
        out.append(k)
        k *= 2
    if top > 0:
        out.append(top)
    return out


# --------------------------------------------------------------------------- solving


def _best_baseline(ctx: CycleContext) -> list[PodPlacement]:
    best: tuple[Score, list[PodPlacement]] | None = None
    for name in BASELINES:
        res = run_baseline_in(ctx, name)
        if not res.plan.evictions and (best is None or best[0] < res.score):
            best = (res.score, list(res.plan.pods))
    return best[1] if best is not None else []


def _assign_single_copies(
    s2: Snapshot, pods: list[PodPlacement], evictions: list[Eviction], copies: dict[str, str]
) -> list[PodPlacement]:
    """Identical single-pod copies are one item in the model: give the placed copy pods to
    the copies of the gangs actually evicted (same requests and GPU models)."""
    rules = s2.preemption_rules
    copy_of = {v: k for k, v in copies.items()}
    evicted_gangs = {
        rules.key_of(p)
        for p in s2.running
        if (p.namespace, p.name) in {(e.namespace, e.pod) for e in evictions}
    }
    gangs = s2.gang_by_key

    def sig(g: Gang) -> tuple[object, ...]:
        return (
            g.namespace,
            g.queue,
            g.priority,
            tuple(sorted(g.roles[0].requests.items())),
            g.gpu_models,
        )

    placed: dict[tuple[object, ...], list[PodPlacement]] = defaultdict(list)
    keep: list[PodPlacement] = []
    for p in pods:
        g = gangs[p.gang_key]
        if p.gang_key in copy_of and g.size == 1:
            placed[sig(g)].append(p)
        else:
            keep.append(p)
    want: dict[tuple[object, ...], list[Gang]] = defaultdict(list)
    for key in sorted(evicted_gangs):
        copy = copies.get(key)
        if copy is not None and gangs[copy].size == 1:
            want[sig(gangs[copy])].append(gangs[copy])
    for k, ps in placed.items():
        for p, g in zip(ps, want.get(k, []), strict=False):
            keep.append(
                p.model_copy(
                    update={
                        "pod": g.roles[0].pod_name(g.name, 0),
                        "gang": g.name,
                        "role": g.roles[0].name,
                    }
                )
            )
    return keep


_NOT_PLACED = PendingReason(
    kind="lost",
    family="lost",
    message="not placed by the replan: no room for it within the move budget",
)


@dataclass
class _Solved:
    pods: list[PodPlacement]
    evictions: list[Eviction]
    status: str


def _solve(
    ctx2: CycleContext,
    spec: MoveSpec,
    hint: _Solved,
    cfg: SolverConfig,
    seconds: float,
) -> _Solved:
    """CP-SAT on the move snapshot under ``spec`` (the cycle's model and search, with the
    moves), hinted with ``hint``; the hint kept where it found no solution."""
    ctx2.moves = spec
    out = solve_model(ctx2, hint.pods, None, cfg, seconds, hint.evictions)
    if out.pods is None:
        return _Solved(hint.pods, hint.evictions, f"{out.status.value}: hint kept")
    return _Solved(list(out.pods), list(out.evictions), out.status.value)


def _normalized(s2: Snapshot, copies: dict[str, str], sol: _Solved) -> _Solved:
    """``sol`` with its single-pod copies given to the gangs actually evicted
    (:func:`_assign_single_copies`) and without its **null moves**: a gang whose copy's
    pods all land on the node and devices its pods hold now stays (its evictions and its
    copy's pods dropped)."""
    pods = _assign_single_copies(s2, sol.pods, sol.evictions, copies)
    copy_to_running = {v: k for k, v in copies.items()}
    running = {(p.namespace, p.name): p for p in s2.running}
    same: dict[str, bool] = {}
    for p in pods:
        key = copy_to_running.get(p.gang_key)
        if key is None:
            continue
        rp = running.get((p.namespace, p.pod[: -len(COPY_SUFFIX)]))
        hold = s2.free(rp.node).holds.get((rp.namespace, rp.name)) if rp is not None else None
        here = (
            rp is not None
            and hold is not None
            and p.node == rp.node
            and set(p.gpus) == set(hold.gpu_milli)
            and set(p.nics) == set(hold.nics)
        )
        same[key] = same.get(key, True) and here
    null = {key for key, here in same.items() if here}
    if not null:
        return _Solved(pods, sol.evictions, sol.status)
    rules = s2.preemption_rules
    null_copies = {copies[k] for k in null}
    return _Solved(
        [p for p in pods if p.gang_key not in null_copies],
        [e for e in sol.evictions if rules.key_of(running[(e.namespace, e.pod)]) not in null],
        sol.status,
    )


def _point(
    s2: Snapshot,
    topo: Topology,
    shares: FairShares,
    copies: dict[str, str],
    sol: _Solved,
    budget: int,
    pod_gpus: int,
) -> FrontierPoint:
    sol = _normalized(s2, copies, sol)
    plan = Plan(pods=tuple(sol.pods), evictions=tuple(sol.evictions))
    sc = score(s2, plan, topology=topo, shares=shares)
    evicted = {(e.namespace, e.pod) for e in sol.evictions}
    copy_keys = set(copies.values())
    view = free_gpu_view(s2, [p for p in sol.pods if p.gang_key in copy_keys], evicted)
    moved = {e.for_gang for e in sol.evictions}
    gpus = sum(p.requests.get(s2.gpu, 0) for p in s2.running if (p.namespace, p.name) in evicted)
    admitted = {p.gang_key for p in sol.pods} - set(copies.values())
    return FrontierPoint(
        budget=budget,
        moved_gangs=len(moved),
        moved_gpus=gpus // GPU_MILLI,
        score=sc,
        largest_gang_gpus=largest_leaf_gang(topo, view, pod_gpus),
        stranded_gpus=stranded_gpus(view, pod_gpus),
        whole_free_gpus=sum(_whole_free(devs) for devs in view.values()),
        admitted=len(admitted),
        status=sol.status,
    )


def replan(snapshot: Snapshot, settings: ReplanSettings | None = None) -> ReplanResult:
    """The frontier and the move plan (module docstring). Never raises for "nothing to
    move": the frontier then has budget 0 only."""
    st = settings or ReplanSettings()
    if snapshot.disruption_budgets:  # the cluster's budgets bind every wave
        pdbs = (*snapshot.disruption_budgets, *st.limits.budgets)
        st = dataclasses.replace(st, limits=st.limits.model_copy(update={"budgets": pdbs}))
    started = time.monotonic()
    topo = build_topology(snapshot)
    movable = movable_gangs(snapshot, st.max_candidates, st.limits)
    not_movable = {
        key: why
        for key, rg in sorted(snapshot.preemption_rules.gangs.items())
        if (why := why_not_movable(rg, st.limits)) is not None
    }
    s2, copies = move_snapshot(snapshot, movable, topo)
    shares = _shares(snapshot, s2)
    ctx = CycleContext.of(snapshot, topology=topo)
    ctx2 = CycleContext.of(s2, topology=build_topology(s2), workload=Workload.of_snapshot(snapshot))
    ctx2.shares = shares
    top = len(movable) if st.max_moved_gangs is None else min(st.max_moved_gangs, len(movable))
    steps = budgets(top)
    milli = None if st.max_moved_gpus is None else st.max_moved_gpus * GPU_MILLI
    sol = _Solved(_best_baseline(ctx), [], "baseline (no move)")
    frontier: list[FrontierPoint] = []
    sols: list[_Solved] = []
    cfg = st.config
    for k, budget in enumerate(steps):
        left = cfg.time_limit_s - (time.monotonic() - started)
        seconds = max(0.2, left / (len(steps) - k))
        spec = MoveSpec(copies=copies, max_gangs=budget, max_gpu_milli=milli)
        share = cfg
        if cfg.deterministic:
            det = (cfg.deterministic_time or cfg.time_limit_s) / len(steps)
            share = dataclasses.replace(cfg, deterministic_time=det)
        found = _solve(ctx2, spec, sol, share, seconds)
        point = _point(s2, ctx2.topo, shares, copies, found, budget, st.pod_gpus)
        if frontier and point.score < frontier[-1].score:
            # a larger budget admits every plan of a smaller one: a worse solution is a
            # search cut short by its time, so the smaller budget's plan stands
            found = dataclasses.replace(sol, status=f"{found.status}: previous budget's kept")
            point = dataclasses.replace(frontier[-1], budget=budget, status=found.status)
        sol = found
        sols.append(sol)
        frontier.append(point)
    result = _first_verified(snapshot, s2, copies, sols, frontier, st, started)
    result.not_movable = not_movable
    if result.move_plan.left_out:
        result = _without_left_out(snapshot, topo, movable, result, sols[0], st, started)
    base = _move_result(snapshot, s2, copies, sols[0], frontier, st, started)
    result.base_score = _final_score(snapshot, base.move_plan)
    result.final_score = _final_score(snapshot, result.move_plan)
    if result.move_plan.moves and result.final_score <= result.base_score:
        # the moves gain nothing once the waves are made: make none
        base.notes = [*result.notes, "the moves gain nothing over budget 0's plan: none made"]
        base.not_movable, base.base_score = not_movable, result.base_score
        base.final_score = result.base_score
        result = base
    result.leaf_level = topo.leaf_level
    result.movable = len(movable)
    result.workload_weight = (_weight(result.move_snapshot), _weight(snapshot))
    result.wall_time_s = time.monotonic() - started
    return result


def _weight(snapshot: Snapshot) -> int:
    return max(1, sum(w for _shape, w in Workload.of_snapshot(snapshot).reduced()))


def _final_score(snapshot: Snapshot, mp: MovePlan) -> Score:
    """The score of the move plan's final plan in the state after its waves."""
    return score(_after_moves(snapshot, mp), mp.final)


def _without_left_out(
    snapshot: Snapshot,
    topo: Topology,
    movable: list[RunningGang],
    result: ReplanResult,
    base: _Solved,
    st: ReplanSettings,
    started: float,
) -> ReplanResult:
    """Solve once more, at the chosen budget, without the gangs the waves left out (their
    room was never freed); keep whichever final plan scores higher in the state after its
    waves."""
    gone = {x.gang for x in result.move_plan.left_out}
    keep = [rg for rg in movable if rg.key not in gone]
    s2, copies = move_snapshot(snapshot, keep, topo)
    ctx2 = CycleContext.of(s2, topology=build_topology(s2), workload=Workload.of_snapshot(snapshot))
    ctx2.shares = _shares(snapshot, s2)
    milli = None if st.max_moved_gpus is None else st.max_moved_gpus * GPU_MILLI
    budget = max(0, result.move_plan.moved_gangs + len(gone))
    spec = MoveSpec(copies=copies, max_gangs=min(budget, len(keep)), max_gpu_milli=milli)
    cfg = st.config
    seconds = max(0.2, cfg.time_limit_s / 4)
    if cfg.deterministic:
        det = (cfg.deterministic_time or cfg.time_limit_s) / 4
        cfg = dataclasses.replace(cfg, deterministic_time=det)
    sol = _solve(ctx2, spec, base, cfg, seconds)
    again = _move_result(snapshot, s2, copies, sol, result.frontier, st, started)
    what = "1 move" if len(gone) == 1 else f"{len(gone)} moves"
    note = f"{what} left out by the waves ({', '.join(sorted(gone))}): re-solved without"
    problems = [str(v) for v in again.violations] + again.plan_violations
    if problems or _final_score(snapshot, again.move_plan) <= _final_score(
        snapshot, result.move_plan
    ):
        result.notes.append(note + "; the first plan stands")
        return result
    again.notes = [*result.notes, note + " them"]
    again.not_movable = result.not_movable
    return again


def _first_verified(
    snapshot: Snapshot,
    s2: Snapshot,
    copies: dict[str, str],
    sols: list[_Solved],
    frontier: list[FrontierPoint],
    st: ReplanSettings,
    started: float,
) -> ReplanResult:
    """The move plan of the best budget (the smallest among equals) whose move plan and
    final plan pass their verifiers; the budgets before it that failed are named in the
    notes. Budget 0 moves nothing, so it passes unless the snapshot's own plan fails."""
    order = sorted(range(len(frontier)), key=lambda i: (frontier[i].score, -i), reverse=True)
    notes: list[str] = []
    first: ReplanResult | None = None
    for i in order:
        result = _move_result(snapshot, s2, copies, sols[i], frontier, st, started)
        first = first or result
        problems = [str(v) for v in result.violations] + result.plan_violations
        if not problems:
            if notes:
                notes.append(f"falling back to budget {frontier[i].budget}'s move plan")
            result.notes = notes + result.notes
            return result
        notes.append(
            f"budget {frontier[i].budget}'s move plan fails its verifier: " + "; ".join(problems)
        )
    assert first is not None  # the frontier always has budget 0
    first.notes = notes + first.notes
    return first


def _move_result(
    snapshot: Snapshot,
    s2: Snapshot,
    copies: dict[str, str],
    sol: _Solved,
    frontier: list[FrontierPoint],
    st: ReplanSettings,
    started: float,
) -> ReplanResult:
    """The move plan of ``sol`` (one budget's solution on the move snapshot ``s2``): its
    moved gangs' targets ordered into waves (:func:`~gangplan.solver.replan.waves.
    plan_waves`), the pending gangs' final plan, and what :func:`~gangplan.solver.judges.
    verify_moves.verify_moves` and :func:`~gangplan.solver.judges.verify.verify` (the final
    plan in the state after the waves) say of them."""
    sol = _normalized(s2, copies, sol)
    pods = sol.pods
    copy_to_running = {v: k for k, v in copies.items()}
    rules = snapshot.preemption_rules
    targets: dict[str, list[PodPlacement]] = defaultdict(list)
    pending: list[PodPlacement] = []
    for p in pods:
        key = copy_to_running.get(p.gang_key)
        if key is None:
            pending.append(p)
            continue
        rg = rules.gangs[key]
        pod = p.pod[: -len(COPY_SUFFIX)]
        targets[key].append(p.model_copy(update={"gang": rg.name, "pod": pod}))
    gangs = []
    admitted = Counter(p.gang_key for p in pending)
    for g in snapshot.gangs:
        roles = Counter(p.role for p in pending if p.gang_key == g.key)
        gangs.append(
            GangOutcome(
                gang=g.name,
                namespace=g.namespace,
                admitted=admitted[g.key] > 0,
                placed=admitted[g.key],
                roles=dict(roles),
                reason=None if admitted[g.key] else _NOT_PLACED,
            )
        )
    final = Plan(gangs=tuple(gangs), pods=tuple(pending))
    mp = plan_waves(snapshot, dict(targets), final, st.limits)
    where = {(p.namespace, p.pod): p.to.node for m in mp.moves for p in m.pods}
    violations = verify_moves(snapshot, mp, target=where, limits=st.limits, final=False)
    plan_violations = [str(v) for v in verify(after_waves(snapshot, mp), mp.final)]
    return ReplanResult(
        frontier=frontier,
        move_snapshot=s2,
        target=Plan(pods=tuple(pods), evictions=tuple(sol.evictions)),
        move_plan=mp,
        violations=violations,
        plan_violations=plan_violations,
        wall_time_s=time.monotonic() - started,
    )


def _after_moves(snapshot: Snapshot, mp: MovePlan) -> Snapshot:
    """The snapshot after the waves: every moved pod running at its last target, holding
    the devices it was given there; every other pod holding the devices it holds now."""
    last: dict[tuple[str, str], PodPlacement] = {}
    for m in mp.moves:
        for mp_ in m.pods:
            last[(mp_.namespace, mp_.pod)] = mp_.to
    running = []
    for p in snapshot.running:
        t = last.get((p.namespace, p.name))
        if t is None:  # its devices named, as it holds them now (none left implicit)
            hold = snapshot.free(p.node).holds.get((p.namespace, p.name))
            devices = (*hold.gpu_milli, *hold.nics) if hold is not None else p.devices
            running.append(p.model_copy(update={"devices": tuple(devices)}))
        else:
            running.append(p.model_copy(update={"node": t.node, "devices": (*t.gpus, *t.nics)}))
    return Snapshot(
        resources=snapshot.resources,
        levels=snapshot.levels,
        device_layouts=snapshot.device_layouts,
        nodes=snapshot.nodes,
        queues=snapshot.queues,
        gangs=snapshot.gangs,
        running=tuple(running),
        preemption=snapshot.preemption,
        metadata=snapshot.metadata,
    )
