"""The independent plan score: the objective of ``docs/design.md`` as a flat tuple, higher
is better.

``score(snapshot, plan, previous=None)`` judges any plan (CP-SAT's, a baseline's, one
written by hand) without OR-Tools and without any placer's code; every comparison in
gangplan — baselines, exhaustive search in tests, CP-SAT's incumbent check, the
benchmark — goes through it. Entries, in order:

1. for each priority class of the pending gangs, highest first (``docs/design.md``, objective 1):

   ``p{c}.fairness``
       minus the weighted shortfall of the class's queues of positive weight below their
       fair targets: ``-sum_q weight_milli(q) * max(0, target(q) - dominant(q))``, shares
       in ppm (:mod:`gangplan.solver.judges.fairness`), ``dominant(q)`` over the queue's running
       usage plus what the plan admits for it in this class;
   ``p{c}.fairness_w0``
       the same, unweighted, for queues of weight 0 (served last);
   ``p{c}.gpu_milli``, ``p{c}.pods``
       milli-GPUs, then pods, admitted in the class at gangs' minimums (throughput);
   ``p{c}.growth_gpu_milli``, ``p{c}.growth_pods``
       the same for the pods beyond gangs' minimums (growth), which rank below every
       minimum of the class: **admission before growth** (``docs/design.md``). A gang's
       minimum is :func:`~gangplan.models.minimum_counts` (per role ``r``, ``M_r``); an
       admitted gang's pods of role ``r`` count ``min(placed_r, M_r)`` in the minimum and the
       rest as growth; a growth gang's (``models/elastic.py``) are all growth. Fairness
       counts the minimums only, so no growth is bought with fairness either;

2. locality (objective 2), for gangs admitted with more than one pod:
   ``locality.preferred`` minus the sum, over gangs (and roles) with a ``preferred`` level,
   of domains of that level used minus one; then ``locality.{level}`` for each level top
   down and ``locality.node``: minus the sum over the other gangs of domains used minus one.
   A node that joins no domain of a level counts as a domain of its own there. A growth
   gang (a running elastic gang's room to grow, ``models/elastic.py``) counts the domains
   its new pods add to those of its running pods, from its first new pod;

3. fragmentation (objective 3):
   ``fragmentation.expected`` minus FGD's expected fragmentation after the plan (Weng et
   al., "Beware of Fragmentation", USENIX ATC '23, §3-§4), summed over nodes:
   ``-sum_n sum_m w_m * F_n(m)``, ``F_n(m)`` the free milli-GPU of node ``n`` that pods of
   shape ``m`` cannot use (:func:`~gangplan.solver.judges.fragmentation.shape_fragmentation`: all of
   it when ``m`` does not fit ``n``, else the free milli of the devices too small for one of
   its GPUs), ``w_m`` the workload's integer weights divided by their greatest common
   divisor (:meth:`~gangplan.solver.judges.fragmentation.Workload.reduced`; the workload:
   ``Snapshot.workload`` if declared, else the pending and running pods, one count per pod).
   The unit is milli-GPU x weight, exact: divide by ``sum_m w_m`` for milli-GPU. Devices are
   those the pods name (running pods and the plan's), the lowest-listed free ones when a pod
   names none; free CPU is what running pods and the plan leave;
   ``fragmentation.gpu_nodes`` minus the GPU nodes partly used after the plan (some but not
   all milli-GPUs taken, running pods included), ``fragmentation.leaves`` the same for
   leaf domains (the lowest level);

4. with preemption on (``Snapshot.preemption.enabled``) only, among plans equal on every
   tier above (``docs/design.md``, "Evictions"):
   ``preemption.evicted_gpu_milli`` minus the milli-GPU the evicted pods request;
   ``preemption.evicted_pods`` minus the evicted pods;
   ``preemption.recency`` the sum over evicted pods of their gang's recency rank
   (:meth:`~gangplan.models.PreemptionRules.recency`: the most recently admitted gangs are
   evicted first, Kueue's order among equals);

5. ``stability``: minus the pods of ``previous`` whose node differs now (0 without one).

With preemption on, an evicted pod is lost throughput of its own class: it counts minus its
milli-GPU and minus one pod in its running gang's priority class (the classes of evictable
running gangs join those of pending gangs), in ``p{c}.growth_gpu_milli`` /
``p{c}.growth_pods`` while its gang keeps running (an elastic victim's pods above its
minimum), and, for a gang evicted whole, its ``min_member`` pods asking the fewest GPUs
(:func:`~gangplan.models.running_minimum_gpu`) in ``p{c}.gpu_milli`` / ``p{c}.pods``, the
rest in growth. So a higher class is never given up for a lower one, and a victim's pods
above its minimum go before any whole victim. Fairness is measured on the cycle's starting
usage, evictions left out: a queue that evicts its own lower-priority gangs for a higher one
does not lose share by it (its lower class pays, in throughput).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import total_ordering

from gangplan.models import (
    GPU_MILLI,
    Gang,
    Plan,
    RunningPod,
    Snapshot,
    growing_nodes,
    minimum_counts,
    running_minimum_gpu,
)
from gangplan.models.quantity import CPU
from gangplan.solver.judges.fairness import FairShares, fair_shares
from gangplan.solver.judges.fragmentation import Workload, shape_fragmentation
from gangplan.topology import NODE_LEVEL, Topology, build_topology

__all__ = [
    "CLASS_ENTRIES",
    "EVICTION_ENTRIES",
    "Score",
    "expected_fragmentation",
    "gang_locality",
    "score",
    "score_classes",
    "score_names",
]


@total_ordering
@dataclass(frozen=True)
class Score:
    """A lexicographic score: ``entries`` are ``(name, value)`` pairs, compared by value in
    order. Two scores of one snapshot always have the same names."""

    entries: tuple[tuple[str, int], ...]

    @property
    def values(self) -> tuple[int, ...]:
        return tuple(v for _, v in self.entries)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.entries)

    def __getitem__(self, name: str) -> int:
        for n, v in self.entries:
            if n == name:
                return v
        raise KeyError(name)

    def _check(self, other: object) -> Score:
        if not isinstance(other, Score):
            raise TypeError(f"cannot compare Score with {type(other).__name__}")
        if other.names != self.names:
            raise ValueError("scores of different snapshots (entry names differ)")
        return other

    def __lt__(self, other: object) -> bool:
        return self.values < self._check(other).values

    def first_difference(self, other: Score) -> str | None:
        """The name of the first entry whose value differs from ``other``'s (the one that
        decides the comparison), None if the scores are equal.

        Raises:
            ValueError: ``other`` is a score of another snapshot (other entry names).
        """
        theirs = self._check(other).values
        return next((n for (n, a), b in zip(self.entries, theirs, strict=True) if a != b), None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Score):
            return NotImplemented
        return self.entries == other.entries

    def __hash__(self) -> int:
        return hash(self.entries)

    def __str__(self) -> str:
        return ", ".join(f"{n}={v}" for n, v in self.entries)


CLASS_ENTRIES = ("fairness", "fairness_w0", "gpu_milli", "pods", "growth_gpu_milli", "growth_pods")
"""The entries of each priority class, in order (``p{c}.`` before each)."""

EVICTION_ENTRIES = (
    "preemption.evicted_gpu_milli",
    "preemption.evicted_pods",
    "preemption.recency",
)
"""The entries only a score with preemption on has, just above ``stability``."""


def score_classes(snapshot: Snapshot) -> tuple[int, ...]:
    """The priority classes with score entries, highest first: those of pending gangs, and,
    with preemption on, those of running gangs that may be evicted."""
    classes = {g.priority for g in snapshot.gangs}
    if snapshot.preemption.enabled:
        rules = snapshot.preemption_rules
        classes |= {rg.priority for rg in rules.gangs.values() if rules.evictable(rg)}
    return tuple(sorted(classes, reverse=True))


def score_names(snapshot: Snapshot, topology: Topology | None = None) -> tuple[str, ...]:
    """The entry names of every score of ``snapshot``, in order."""
    topo = topology or build_topology(snapshot)
    names: list[str] = []
    for c in score_classes(snapshot):
        names += [f"p{c}.{e}" for e in CLASS_ENTRIES]
    names.append("locality.preferred")
    names += [f"locality.{lv}" for lv in topo.all_levels]
    names += [
        "fragmentation.expected",
        "fragmentation.gpu_nodes",
        "fragmentation.leaves",
    ]
    if snapshot.preemption.enabled:
        names += EVICTION_ENTRIES
    names.append("stability")
    return tuple(names)


@dataclass
class _Evicted:
    """What a plan's evictions take away, by class and queue (preemption on only)."""

    pods: list[RunningPod]
    gpu: dict[int, int]
    count: dict[int, int]
    recency: int
    min_gpu: dict[int, int]
    """per class, the milli-GPU of the minimums of the gangs evicted whole (of ``gpu``)"""
    min_count: dict[int, int]
    """per class, the ``min_member`` pods of the gangs evicted whole (of ``count``)"""

    @classmethod
    def of(cls, snapshot: Snapshot, plan: Plan) -> _Evicted:
        gpu: dict[int, int] = defaultdict(int)
        count: dict[int, int] = defaultdict(int)
        min_gpu: dict[int, int] = defaultdict(int)
        min_count: dict[int, int] = defaultdict(int)
        pods: list[RunningPod] = []
        recency = 0
        if snapshot.preemption.enabled and plan.evictions:
            rules = snapshot.preemption_rules
            evicted = plan.evicted
            gone: dict[str, int] = defaultdict(int)
            for pod in snapshot.running:
                if (pod.namespace, pod.name) not in evicted:
                    continue
                pods.append(pod)
                victim = rules.gang_of(pod)
                gone[victim.key] += 1
                gpu[victim.priority] += pod.requests.get(snapshot.gpu, 0)
                count[victim.priority] += 1
                recency += rules.recency(victim)
            for key, n in gone.items():
                victim = rules.gangs[key]
                if n == victim.size:  # evicted whole: its minimum is lost too
                    m = min(victim.min_member, victim.size)
                    min_count[victim.priority] += m
                    min_gpu[victim.priority] += running_minimum_gpu(victim.pods, m, snapshot.gpu)
        return cls(pods, gpu, count, recency, min_gpu, min_count)


def score(
    snapshot: Snapshot,
    plan: Plan,
    previous: Plan | None = None,
    *,
    topology: Topology | None = None,
    shares: FairShares | None = None,
) -> Score:
    """Score ``plan`` for ``snapshot`` (see the module docstring for every entry).

    ``topology`` and ``shares`` may be passed to avoid recomputing them. Pods of the plan
    that name no known gang, role or node are ignored here (the verifier reports them).
    """
    topo = topology or build_topology(snapshot)
    fs = shares or fair_shares(snapshot)
    gangs = snapshot.gang_by_key
    pods_by_gang: dict[str, list[tuple[str, str]]] = defaultdict(list)  # key -> (role, node)
    for p in plan.pods:
        key = p.gang_key
        gang = gangs.get(key)
        if gang is None or p.node not in snapshot.node_by_name:
            continue
        if any(r.name == p.role for r in gang.roles):
            pods_by_gang[key].append((p.role, p.node))

    lost = _Evicted.of(snapshot, plan)
    growing = growing_nodes(snapshot)
    entries: list[tuple[str, int]] = []
    for c in score_classes(snapshot):
        added: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        gpu = -lost.min_gpu.get(c, 0)
        pods = -lost.min_count.get(c, 0)
        grown_gpu = -(lost.gpu.get(c, 0) - lost.min_gpu.get(c, 0))
        grown = -(lost.count.get(c, 0) - lost.min_count.get(c, 0))
        for key, placed in pods_by_gang.items():
            gang = gangs[key]
            if gang.priority != c:
                continue
            minimum = minimum_counts(gang, snapshot.gpu, growth=key in growing)
            seen: dict[str, int] = defaultdict(int)
            for role_name, _node in placed:
                req = gang.role(role_name).requests
                seen[role_name] += 1
                if seen[role_name] > minimum[role_name]:  # beyond the minimum: growth
                    grown_gpu += req.get(snapshot.gpu, 0)
                    grown += 1
                    continue
                gpu += req.get(snapshot.gpu, 0)
                pods += 1
                for r, v in fs.contribution(req).items():
                    added[gang.queue][r] += v
        fair = fair0 = 0
        for qname, t in fs.targets.get(c, {}).items():
            shortfall = max(0, t.target - fs.dominant(qname, added[qname]))
            if t.weight_milli > 0:
                fair -= t.weight_milli * shortfall
            else:
                fair0 -= shortfall
        entries += [
            (f"p{c}.fairness", fair),
            (f"p{c}.fairness_w0", fair0),
            (f"p{c}.gpu_milli", gpu),
            (f"p{c}.pods", pods),
            (f"p{c}.growth_gpu_milli", grown_gpu),
            (f"p{c}.growth_pods", grown),
        ]

    locality = [0] * (1 + len(topo.all_levels))
    for key, placed in pods_by_gang.items():
        for i, v in enumerate(gang_locality(topo, gangs[key], placed, growing.get(key, []))):
            locality[i] += v
    entries.append(("locality.preferred", locality[0]))
    entries += [(f"locality.{lv}", v) for lv, v in zip(topo.all_levels, locality[1:], strict=True)]

    taken = _gpu_taken(snapshot, plan, lost.pods)
    partly_nodes = 0
    leaf_taken: dict[object, int] = defaultdict(int)
    leaf_total: dict[object, int] = defaultdict(int)
    for node in snapshot.nodes:
        total = GPU_MILLI * topo.gpu_count(node.name)
        if total == 0:
            continue
        used = min(total, taken.get(node.name, 0))
        if 0 < used < total:
            partly_nodes += 1
        if topo.leaf_level is not None:
            leaf = topo.domain_of(node.name, topo.leaf_level)
            if leaf is not None:
                leaf_taken[leaf] += used
                leaf_total[leaf] += total
    partly_leaves = sum(1 for d, tot in leaf_total.items() if 0 < leaf_taken[d] < tot)
    entries += [
        ("fragmentation.expected", -expected_fragmentation(snapshot, plan, lost.pods)),
        ("fragmentation.gpu_nodes", -partly_nodes),
        ("fragmentation.leaves", -partly_leaves),
    ]

    if snapshot.preemption.enabled:
        entries += [
            ("preemption.evicted_gpu_milli", -sum(lost.gpu.values())),
            ("preemption.evicted_pods", -sum(lost.count.values())),
            ("preemption.recency", lost.recency),
        ]

    moved = 0
    if previous is not None:
        now = {(p.namespace, p.pod): p.node for p in plan.pods}
        moved = sum(1 for p in previous.pods if now.get((p.namespace, p.pod)) != p.node)
    entries.append(("stability", -moved))
    return Score(tuple(entries))


def expected_fragmentation(
    snapshot: Snapshot, plan: Plan, evicted: Sequence[RunningPod] = ()
) -> int:
    """``sum_n sum_m w_m * F_n(m)`` after ``plan`` (the ``fragmentation.expected`` entry is
    its negation; module docstring): milli-GPU x weight, 0 for an empty workload.
    ``evicted``: the running pods the plan evicts (their devices and CPU are free).

    Pods of the plan that name no known gang, role or node are ignored, as everywhere in the
    score; a device given more than it has counts as 0 free.
    """
    weights = Workload.of_snapshot(snapshot).reduced()
    if not weights:
        return 0
    gangs = snapshot.gang_by_key
    gone: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for pod in evicted:
        gone[pod.node].add((pod.namespace, pod.name))
    frees: dict[str, dict[str, int]] = {}
    cpu: dict[str, int] = {}
    for p in plan.pods:
        gang = gangs.get(p.gang_key)
        if gang is None or p.node not in snapshot.node_by_name:
            continue
        try:
            req = gang.role(p.role).requests
        except KeyError:
            continue
        if p.node not in frees:
            free = snapshot.free_after(p.node, gone.get(p.node, ()))
            frees[p.node] = dict(free.gpu_milli)
            cpu[p.node] = free.resources.get(CPU, 0)
        cpu[p.node] -= req.get(CPU, 0)
        _take_gpus(frees[p.node], req.get(snapshot.gpu, 0), p.gpus)
    memo: dict[tuple[object, ...], int] = {}
    total = 0
    for node in snapshot.nodes:
        if node.name in frees:
            values, cpu_free = frees[node.name].values(), cpu[node.name]
        else:
            free = snapshot.free_after(node.name, gone.get(node.name, ()))
            values, cpu_free = free.gpu_milli.values(), free.resources.get(CPU, 0)
        frees_after = tuple(sorted(max(0, f) for f in values))
        key = (node.gpu_model, cpu_free, frees_after)
        got = memo.get(key)
        if got is None:
            got = memo[key] = sum(
                w * shape_fragmentation(frees_after, cpu_free, node.gpu_model, shape)
                for shape, w in weights
            )
        total += got
    return total


def _take_gpus(frees: dict[str, int], gpu: int, named: tuple[str, ...]) -> None:
    """Take one pod's GPUs (``gpu`` milli-GPU in all) from a node's free milli per device:
    the devices it names, else the lowest-listed that hold them."""
    if gpu <= 0:
        return
    if gpu < GPU_MILLI:
        dev = next((d for d in named if d in frees), None)
        if dev is None:
            dev = next((d for d, f in frees.items() if f >= gpu), None)
        if dev is not None:
            frees[dev] -= gpu
        return
    devices = [d for d in named if d in frees]
    if not devices:
        devices = [d for d, f in frees.items() if f == GPU_MILLI][: gpu // GPU_MILLI]
    for d in devices:
        frees[d] -= GPU_MILLI


def gang_locality(
    topo: Topology, gang: Gang, placed: Sequence[tuple[str, str]], base: Sequence[str] = ()
) -> tuple[int, ...]:
    """One gang's share of the locality entries (module docstring, entry 2), in their order
    (``locality.preferred``, then each of ``topo.all_levels``): the entries are these summed
    over the admitted gangs, so a gang whose own tuple grows (lexicographically) raises the
    entries, the others' unchanged.

    Args:
        topo: the cluster's topology.
        gang: the gang.
        placed: its admitted pods in the plan, as (role name, node name).
        base: a growth gang's running pods' nodes (``models/elastic.py``), else empty.

    Returns:
        ``1 + len(topo.all_levels)`` integers, each zero or negative (domains used beyond
        the first, per entry); all zero for a gang of fewer than two pods.
    """
    out = [0] * (1 + len(topo.all_levels))
    if len(placed) < 2 and not base:
        return tuple(out)
    pref = gang.topology.preferred if gang.topology else None
    for i, lv in enumerate(topo.all_levels):
        # a growth gang: the domains its new pods add to its running pods' (the whole
        # gang's count less a constant no plan changes; models/elastic.py)
        spread = _domains_used(topo, [*base, *(n for _, n in placed)], lv) - (
            _domains_used(topo, list(base), lv) if base else 1
        )
        out[0 if lv == pref else 1 + i] -= spread
    for role in gang.roles:
        rpref = role.topology.preferred if role.topology else None
        nodes = [n for r, n in placed if r == role.name]
        if rpref is not None and len(nodes) > 1:
            out[0] -= _domains_used(topo, nodes, rpref) - 1
    return tuple(out)


def _domains_used(topo: Topology, nodes: list[str], level: str) -> int:
    seen: set[object] = set()
    for n in nodes:
        d = topo.domain_of(n, level) if level != NODE_LEVEL else n
        seen.add(d if d is not None else ("alone", n))
    return len(seen)


def _gpu_taken(snapshot: Snapshot, plan: Plan, evicted: list[RunningPod]) -> dict[str, int]:
    """Milli-GPU taken per node after the plan: running pods that stay (device view) plus
    the plan."""
    gone: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for pod in evicted:
        gone[pod.node].add((pod.namespace, pod.name))
    taken: dict[str, int] = {}
    for node in snapshot.nodes:
        free = snapshot.free_after(node.name, gone.get(node.name, ()))
        taken[node.name] = sum(GPU_MILLI - m for m in free.gpu_milli.values())
    gangs = snapshot.gang_by_key
    for p in plan.pods:
        gang = gangs.get(p.gang_key)
        if gang is None or p.node not in taken:
            continue
        try:
            taken[p.node] += gang.role(p.role).requests.get(snapshot.gpu, 0)
        except KeyError:
            continue
    return taken
