"""Quality metrics of a plan, beside :func:`~gangplan.solver.judges.score.score`: what ``gangplan
bench`` reports per placer and instance.

The score orders plans; these numbers say how good a plan is in units a person reads
(GPUs, gangs, leaves, shares). Like the score and the verifier, they import no OR-Tools
and no placer: any plan — CP-SAT's, a baseline's, one written by hand — is measured the
same way. :func:`plan_metrics` computes them all; each field of :class:`PlanMetrics`
states its unit and source.

**Throughput.** ``gpus_placed``: GPUs asked by the plan's pods (milli-GPU / 1000, so a
500m share counts 0.5). ``gpus_demand``: GPUs of every pending gang at full size.
``gpus_free``: free GPUs at the cycle start (milli-GPU that running pods leave, every node).
``placed_of_demand`` = placed / demand, ``placed_of_free`` = placed / free (shares, 0..1).
``gangs`` per priority class: (priority, admitted, pending at the cycle start).

**Locality** (admitted gangs of more than one pod only). A gang's *leaves used* count the
leaf domains (the lowest topology level above the node) holding its pods; a node in no
leaf is a leaf of its own. Its *minimum* is the fewest leaves that could hold its placed
pods by size: the smallest k such that the k leaves with the most GPUs (allocatable, the
empty cluster) have at least the gang's placed GPUs (1 for a gang asking no GPU). *Spread
over the minimum* = leaves used - minimum (>= 0; in leaves). A gang *fits one leaf* when,
by free capacity at the cycle start, some leaf alone could hold its placed pods (each pod
checked by the placement rules of :class:`~gangplan.solver.placers.state.ClusterState`: GPU model,
devices and joint GPU/NIC allocation, selectors, taints; ignoring the plan's other gangs and
queue limits); ``one_leaf_share`` = gangs that fit one leaf and got one / gangs that fit.

**Fairness** (:mod:`gangplan.solver.judges.fairness`; Dominant Resource Fairness, Ghodsi et al.,
NSDI'11). Per priority class and queue with a fair target there: the queue's *allocation*
— its dominant share (ppm) with its running usage and the plan's pods of that class, as the
score counts it — against its *fair target* (ppm). ``jain`` is Jain's fairness index
(Jain, Chiu and Hawe, "A Quantitative Measure of Fairness and Discrimination for Resource
Allocation in Shared Computer Systems", DEC-TR-301, 1984) over the (class, queue) pairs of
positive target of x = allocation / target:

    J(x) = (sum x)^2 / (n * sum x^2),   1/n <= J <= 1, 1 when every x is equal

(so 1 = every queue at the same fraction of its target; a queue above its target lowers it
as a queue below does). ``min_fair_ratio`` is the smallest x, ``queues_below_target`` the
pairs with allocation < target.

**Fragmentation** (after the plan; FGD, Weng et al., USENIX ATC'23). ``stranded_gpus``:
free GPUs (milli-GPU / 1000) on GPU nodes partly used (some but not all milli-GPU taken),
every node. ``largest_8gpu_gang_leaf`` / ``_any``: the most pods of 8 whole GPUs (a probe
asking nothing else) that still fit on ready, schedulable nodes — inside one leaf (a node
in no leaf is a leaf of its own), and anywhere: the sum over those nodes of
floor(whole free GPUs / 8). In pods of 8 GPUs.

**Solve** (from ``plan.summary``, when the placer wrote one). Wall time (s), model size
(CP-SAT variables and constraints), and per score entry the value, bound and gap CP-SAT
reported (gap = |bound - value| / max(1, |bound|, |value|)); ``throughput_gap`` is the
largest gap of the ``p{c}.gpu_milli`` entries, ``max_gap`` the largest of all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from gangplan.models import GPU_MILLI, Gang, Plan, Role, Snapshot, open_status
from gangplan.solver.judges.fairness import FairShares, fair_shares
from gangplan.solver.judges.score import score
from gangplan.solver.placers.state import ClusterState
from gangplan.topology import Domain, Topology, build_topology

__all__ = [
    "PROBE_GPUS",
    "GangLocality",
    "PlanMetrics",
    "QueueFairness",
    "SolveStats",
    "TierGap",
    "jain_index",
    "plan_metrics",
]

PROBE_GPUS = 8
"""GPUs per pod of the probe gang of the ``largest_8gpu_gang_*`` metrics."""


def jain_index(xs: Sequence[float]) -> float | None:
    """Jain's fairness index of ``xs`` (Jain, Chiu and Hawe, DEC-TR-301, 1984):
    ``(sum x)^2 / (n * sum x^2)``; None for no values or all zero."""
    sq = sum(x * x for x in xs)
    if not xs or sq == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class QueueFairness:
    """One queue in one priority class: allocation and fair target, dominant share in ppm."""

    priority: int
    queue: str
    allocation_ppm: int
    target_ppm: int

    @property
    def ratio(self) -> float | None:
        """allocation / target (None for a zero target)."""
        return self.allocation_ppm / self.target_ppm if self.target_ppm > 0 else None


@dataclass(frozen=True)
class GangLocality:
    """One admitted multi-pod gang: leaves used, the minimum by size, and whether it fits
    one leaf by free capacity at the cycle start."""

    gang: str
    pods: int
    leaves_used: int
    min_leaves: int
    fits_one_leaf: bool

    @property
    def spread_over_min(self) -> int:
        return self.leaves_used - self.min_leaves


@dataclass(frozen=True)
class TierGap:
    """A score entry as the placer reported it (CP-SAT: with bound and gap)."""

    name: str
    value: int
    bound: int | None
    gap: float | None
    status: str


@dataclass(frozen=True)
class SolveStats:
    """How the plan was found (``plan.summary``): placer, status, wall time (s), model size."""

    placer: str
    status: str
    wall_time_s: float
    variables: int | None
    constraints: int | None
    tiers: tuple[TierGap, ...] = ()

    @property
    def throughput_gap(self) -> float | None:
        """Largest gap among the ``p{c}.gpu_milli`` entries (None: none reported)."""
        gaps = [t.gap for t in self.tiers if t.name.endswith(".gpu_milli") and t.gap is not None]
        return max(gaps) if gaps else None

    @property
    def max_gap(self) -> float | None:
        """Largest gap of any entry (None: none reported)."""
        gaps = [t.gap for t in self.tiers if t.gap is not None]
        return max(gaps) if gaps else None

    @property
    def open_tiers(self) -> int:
        """Entries optimised but not proven optimal (``TierReport.open``: ``feasible``,
        ``not improved (time)``, ``not optimised (time)``, ...), as the CLI's status line
        counts them."""
        return sum(1 for t in self.tiers if open_status(t.status))


@dataclass(frozen=True)
class PlanMetrics:
    """Every metric of one plan (see the module docstring for definitions and units)."""

    score: tuple[tuple[str, int], ...]
    gpus_placed: float
    """GPUs (milli-GPU / 1000) asked by the plan's pods"""
    gpus_demand: float
    """GPUs of every pending gang at full size"""
    gpus_free: float
    """free GPUs at the cycle start (what running pods leave)"""
    gangs: tuple[tuple[int, int, int], ...]
    """(priority, admitted, pending) per class, highest first"""
    locality: tuple[GangLocality, ...]
    queues: tuple[QueueFairness, ...]
    stranded_gpus: float
    """free GPUs on partly used GPU nodes after the plan"""
    partly_used_nodes: int
    largest_8gpu_gang_leaf: int
    """pods of 8 whole GPUs that still fit inside one leaf"""
    largest_8gpu_gang_any: int
    """pods of 8 whole GPUs that still fit anywhere"""
    solve: SolveStats | None = None
    notes: tuple[str, ...] = field(default=())

    # ------------------------------------------------------------------ derived

    @property
    def placed_of_demand(self) -> float | None:
        return self.gpus_placed / self.gpus_demand if self.gpus_demand > 0 else None

    @property
    def placed_of_free(self) -> float | None:
        return self.gpus_placed / self.gpus_free if self.gpus_free > 0 else None

    @property
    def gangs_admitted(self) -> int:
        return sum(a for _, a, _ in self.gangs)

    @property
    def gangs_pending(self) -> int:
        return sum(t for _, _, t in self.gangs)

    @property
    def multi_pod_gangs(self) -> int:
        return len(self.locality)

    @property
    def spread_over_min(self) -> int:
        """Sum over admitted multi-pod gangs of leaves used - minimum (leaves)."""
        return sum(g.spread_over_min for g in self.locality)

    @property
    def mean_spread_over_min(self) -> float | None:
        return self.spread_over_min / len(self.locality) if self.locality else None

    @property
    def spread_gangs(self) -> int:
        """Admitted multi-pod gangs on more leaves than their minimum."""
        return sum(1 for g in self.locality if g.spread_over_min > 0)

    @property
    def one_leaf_fit(self) -> int:
        return sum(1 for g in self.locality if g.fits_one_leaf)

    @property
    def one_leaf_got(self) -> int:
        return sum(1 for g in self.locality if g.fits_one_leaf and g.leaves_used == 1)

    @property
    def one_leaf_share(self) -> float | None:
        fit = self.one_leaf_fit
        return self.one_leaf_got / fit if fit else None

    @property
    def jain(self) -> float | None:
        return jain_index([q.ratio for q in self.queues if q.ratio is not None])

    @property
    def min_fair_ratio(self) -> float | None:
        ratios = [q.ratio for q in self.queues if q.ratio is not None]
        return min(ratios) if ratios else None

    @property
    def queues_below_target(self) -> int:
        return sum(1 for q in self.queues if q.allocation_ppm < q.target_ppm)


# --------------------------------------------------------------------------- computation


def plan_metrics(
    snapshot: Snapshot,
    plan: Plan,
    previous: Plan | None = None,
    *,
    topology: Topology | None = None,
    shares: FairShares | None = None,
) -> PlanMetrics:
    """Measure ``plan`` for ``snapshot`` (see the module docstring for every metric).

    ``topology`` and ``shares`` may be passed to avoid recomputing them. Pods that name no
    known gang, role or node are ignored (the verifier reports them).
    """
    topo = topology or build_topology(snapshot)
    fs = shares or fair_shares(snapshot)
    gpu = snapshot.gpu
    gangs = snapshot.gang_by_key
    by_gang: dict[str, list[tuple[Role, str]]] = defaultdict(list)
    for p in plan.pods:
        g = gangs.get(p.gang_key)
        if g is None or p.node not in snapshot.node_by_name:
            continue
        role = next((r for r in g.roles if r.name == p.role), None)
        if role is not None:
            by_gang[g.key].append((role, p.node))

    placed = sum(r.requests.get(gpu, 0) for pods in by_gang.values() for r, _ in pods)
    demand = sum(r.requests.get(gpu, 0) * r.count for g in snapshot.gangs for r in g.roles)
    free = sum(sum(snapshot.free(n.name).gpu_milli.values()) for n in snapshot.nodes)
    sc = score(snapshot, plan, previous, topology=topo, shares=fs)
    taken = _gpu_taken(snapshot, plan)
    stranded, partly = _stranded(snapshot, topo, taken)
    leaf_probe, any_probe = _probe_8gpu(snapshot, topo, plan)
    return PlanMetrics(
        score=sc.entries,
        gpus_placed=placed / GPU_MILLI,
        gpus_demand=demand / GPU_MILLI,
        gpus_free=free / GPU_MILLI,
        gangs=_gangs_by_priority(snapshot, by_gang),
        locality=_locality(snapshot, topo, by_gang),
        queues=_fairness(snapshot, fs, by_gang),
        stranded_gpus=stranded / GPU_MILLI,
        partly_used_nodes=partly,
        largest_8gpu_gang_leaf=leaf_probe,
        largest_8gpu_gang_any=any_probe,
        solve=_solve_stats(plan),
    )


def _gangs_by_priority(
    snapshot: Snapshot, by_gang: dict[str, list[tuple[Role, str]]]
) -> tuple[tuple[int, int, int], ...]:
    total: dict[int, int] = defaultdict(int)
    admitted: dict[int, int] = defaultdict(int)
    for g in snapshot.gangs:
        total[g.priority] += 1
        if by_gang.get(g.key):
            admitted[g.priority] += 1
    return tuple((c, admitted[c], total[c]) for c in sorted(total, reverse=True))


def _fairness(
    snapshot: Snapshot, fs: FairShares, by_gang: dict[str, list[tuple[Role, str]]]
) -> tuple[QueueFairness, ...]:
    out: list[QueueFairness] = []
    for c in fs.classes:
        added: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for key, pods in by_gang.items():
            g = snapshot.gang_by_key[key]
            if g.priority != c:
                continue
            for role, _node in pods:
                for r, v in fs.contribution(role.requests).items():
                    added[g.queue][r] += v
        for qname, t in sorted(fs.targets.get(c, {}).items()):
            out.append(QueueFairness(c, qname, fs.dominant(qname, added[qname]), t.target))
    return tuple(out)


# ------------------------------------------------------------------ locality


def _leaf_of(topo: Topology, node: str) -> Domain | tuple[str, str]:
    leaf = topo.leaf_level
    d = topo.domain_of(node, leaf) if leaf is not None else None
    return d if d is not None else ("alone", node)


def _leaf_groups(snapshot: Snapshot, topo: Topology) -> dict[object, frozenset[str]]:
    """Nodes per leaf (a node in no leaf: a leaf of its own), in snapshot order."""
    groups: dict[object, set[str]] = defaultdict(set)
    for n in snapshot.nodes:
        groups[_leaf_of(topo, n.name)].add(n.name)
    return {k: frozenset(v) for k, v in groups.items()}


def _leaf_sizes(snapshot: Snapshot, topo: Topology) -> list[int]:
    """Milli-GPU allocatable per leaf (a node in no leaf: a leaf of its own), largest first."""
    sizes: dict[object, int] = defaultdict(int)
    for n in snapshot.nodes:
        sizes[_leaf_of(topo, n.name)] += n.allocatable.get(snapshot.gpu, 0)
    return sorted(sizes.values(), reverse=True)


def _min_leaves(sizes: list[int], gpu_milli: int) -> int:
    """The fewest leaves (largest first) whose GPUs add up to ``gpu_milli`` (at least 1)."""
    if gpu_milli <= 0:
        return 1
    total = 0
    for k, s in enumerate(sizes, start=1):
        total += s
        if total >= gpu_milli:
            return k
    return max(1, len(sizes))


def _locality(
    snapshot: Snapshot, topo: Topology, by_gang: dict[str, list[tuple[Role, str]]]
) -> tuple[GangLocality, ...]:
    sizes = _leaf_sizes(snapshot, topo)
    fit = _OneLeafFit(snapshot, topo)
    out: list[GangLocality] = []
    for g in snapshot.gangs:
        pods = by_gang.get(g.key, [])
        if len(pods) < 2:
            continue
        counts: dict[str, int] = defaultdict(int)
        for role, _ in pods:
            counts[role.name] += 1
        gpus = sum(role.requests.get(snapshot.gpu, 0) for role, _ in pods)
        out.append(
            GangLocality(
                gang=g.key,
                pods=len(pods),
                leaves_used=len({_leaf_of(topo, n) for _, n in pods}),
                min_leaves=_min_leaves(sizes, gpus),
                fits_one_leaf=fit(g, dict(counts)),
            )
        )
    return tuple(out)


class _OneLeafFit:
    """Could one leaf alone hold these pods of a gang, on the free capacity at the cycle
    start? Single-role: the sum of per-node pod capacities (exact, nodes are independent).
    Several roles: a trial placement, largest pods first, fullest node first, rolled back."""

    def __init__(self, snapshot: Snapshot, topo: Topology):
        self.snapshot = snapshot
        self.topo = topo
        self.state = ClusterState(snapshot, topo)
        self.leaves = list(_leaf_groups(snapshot, topo).values())
        self._cache: dict[tuple[object, ...], bool] = {}

    def __call__(self, gang: Gang, counts: dict[str, int]) -> bool:
        roles = [(gang.role(name), n) for name, n in counts.items() if n > 0]
        key = (
            gang.joint,
            gang.gpu_models,
            gang.topology,
            tuple(
                (
                    r.requests.get(self.snapshot.gpu, 0),
                    tuple(sorted(r.requests.items())),
                    tuple(sorted(r.node_selector.items())),
                    r.node_affinity,
                    r.tolerations,
                    r.topology,
                    n,
                )
                for r, n in roles
            ),
        )
        if key not in self._cache:
            allowed = {r.name: frozenset(self.state.candidates(gang, r)) for r, _ in roles}
            self._cache[key] = any(
                self._fits(gang, roles, {name: sorted(c & leaf) for name, c in allowed.items()})
                for leaf in self.leaves
            )
        return self._cache[key]

    def _fits(self, gang: Gang, roles: list[tuple[Role, int]], cands: dict[str, list[str]]) -> bool:
        st = self.state
        for r, n in roles:
            if sum(st.pod_capacity(gang, r, node, n) for node in cands[r.name]) < n:
                return False
        if len(roles) == 1:
            return True
        placed = []
        ok = True
        order = sorted(roles, key=lambda rn: -rn[0].requests.get(self.snapshot.gpu, 0))
        for role, n in order:
            for i in range(n):
                nodes = sorted(cands[role.name], key=lambda x: (-st.gpu_used_fraction(x), x))
                node = next((x for x in nodes if st.fits(gang, role, x)), None)
                p = None if node is None else st.place(gang, role, node, f"probe-{role.name}-{i}")
                if p is None:
                    ok = False
                    break
                placed.append((p, role))
            if not ok:
                break
        for p, role in reversed(placed):
            st.remove(p, role)
        return ok


# ------------------------------------------------------------------ fragmentation


def _gpu_taken(snapshot: Snapshot, plan: Plan) -> dict[str, int]:
    """Milli-GPU taken per node after the plan: running pods plus the plan's pods."""
    taken = {
        n.name: sum(GPU_MILLI - m for m in snapshot.free(n.name).gpu_milli.values())
        for n in snapshot.nodes
    }
    gangs = snapshot.gang_by_key
    for p in plan.pods:
        g = gangs.get(p.gang_key)
        if g is None or p.node not in taken:
            continue
        role = next((r for r in g.roles if r.name == p.role), None)
        if role is not None:
            taken[p.node] += role.requests.get(snapshot.gpu, 0)
    return taken


def _stranded(snapshot: Snapshot, topo: Topology, taken: dict[str, int]) -> tuple[int, int]:
    """(milli-GPU free on partly used GPU nodes, how many such nodes)."""
    stranded = partly = 0
    for n in snapshot.nodes:
        total = GPU_MILLI * topo.gpu_count(n.name)
        t = min(total, taken[n.name])
        if 0 < t < total:
            stranded += total - t
            partly += 1
    return stranded, partly


def _whole_free_after(snapshot: Snapshot, plan: Plan) -> dict[str, int]:
    """Whole free GPU devices per node after the plan. Pods name their devices; a pod that
    asks GPUs but names none takes the lowest-listed devices with room (as the snapshot
    does for running pods)."""
    free = {n.name: dict(snapshot.free(n.name).gpu_milli) for n in snapshot.nodes}
    gangs = snapshot.gang_by_key
    for p in plan.pods:
        g = gangs.get(p.gang_key)
        devs = free.get(p.node)
        role = None if g is None else next((r for r in g.roles if r.name == p.role), None)
        if role is None or devs is None:
            continue
        want = role.requests.get(snapshot.gpu, 0)
        if want <= 0:
            continue
        if want < GPU_MILLI:
            dev = p.gpus[0] if p.gpus else next((d for d, m in devs.items() if m >= want), None)
            if dev in devs:
                devs[dev] = max(0, devs[dev] - (p.gpu_milli or want))
            continue
        named = [d for d in p.gpus if d in devs]
        need = want // GPU_MILLI - len(named)
        spare = [d for d, m in devs.items() if m == GPU_MILLI and d not in named][: max(0, need)]
        for d in (*named, *spare):
            devs[d] = 0
    return {n: sum(1 for m in devs.values() if m == GPU_MILLI) for n, devs in free.items()}


def _probe_8gpu(snapshot: Snapshot, topo: Topology, plan: Plan) -> tuple[int, int]:
    whole = _whole_free_after(snapshot, plan)
    per_node = {
        n.name: whole[n.name] // PROBE_GPUS
        for n in snapshot.nodes
        if n.ready and not n.unschedulable
    }
    in_leaf = max(
        (sum(per_node.get(n, 0) for n in nodes) for nodes in _leaf_groups(snapshot, topo).values()),
        default=0,
    )
    return in_leaf, sum(per_node.values())


# ------------------------------------------------------------------ solve


def _solve_stats(plan: Plan) -> SolveStats | None:
    s = plan.summary
    if s is None:
        return None
    return SolveStats(
        placer=s.placer,
        status=s.status,
        wall_time_s=s.wall_time_s,
        variables=s.model_size.get("variables"),
        constraints=s.model_size.get("constraints"),
        tiers=tuple(TierGap(t.name, t.value, t.bound, t.gap, t.status) for t in s.tiers),
    )
