"""Node classes at work for the baselines: the best candidate node by a placer's rule, and
pods of one shape per node and per domain, kept up to date as a cluster state changes — so a
placer's cost per pod grows with the nodes that change, not with the cluster.

Two nodes with the same :meth:`~gangplan.solver.placers.state.ClusterState.signature` (free amounts,
devices' free state, allocatable and GPU model) answer every question a placer asks about
one more pod alike: whether it fits, how many fit, its binpack score, FGD's ``Δ``. So a value
is computed once per signature and shared by every node that has it (a class of nodes);
static rules (selectors, taints, GPU models, domains at a required level) are settled by the
candidate list the structure is built on.

:class:`NodeRanking` keeps a heap of (value, tie, node) over the candidates; between two
queries only the nodes in the state's change log are ranked again, and entries of a node
that changed since they were pushed are dropped when they come up. The tie is a node's
position in snapshot order (``greedy``'s and ``fgd``'s first of equals) or its name
(``topology-fit``'s BestFit), so the answer is exactly a scan's: the least (value, tie) over
every candidate node whose value is not None.

:class:`DomainCounts` keeps, for one pod shape and a limit, the pods that fit each candidate
node and their sums per domain of every level and over the cluster (``topology-fit``'s
capacities), updated by differences as nodes change.

A state built with ``indexed=False`` answers each query by scanning every candidate node
instead: the reference the tests compare the placers' plans with.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import Generic, TypeVar

from gangplan.models import GPU_MILLI, Gang, Role
from gangplan.solver.placers.state import ClusterState
from gangplan.topology import NODE_LEVEL, Domain

__all__ = [
    "DomainCounts",
    "DomainFullness",
    "FailedPods",
    "NodeRanking",
    "domain_counts",
    "domain_fullness",
    "may_hold",
    "node_ranking",
]

V = TypeVar("V", int, float)


class NodeRanking(Generic[V]):
    """The candidate node with the least ``(value(node), tie(node))`` (module docstring).

    ``value(node)`` must depend only on the node's signature and return None where the
    rule's pod does not fit; ``by_name``: ties go to the smallest name, else to the first in
    snapshot order.
    """

    def __init__(
        self,
        state: ClusterState,
        nodes: tuple[str, ...],
        value: Callable[[str], V | None],
        *,
        by_name: bool = False,
        joint: bool = True,
    ):
        self.state = state
        self.nodes = nodes
        self.value: Callable[[str], V | None] = value
        self._by_name = by_name
        self._joint = joint
        self._memo: dict[Hashable, V | None] = {}
        self._heap: list[tuple[V, object, str, int]] = []
        self._members = frozenset(nodes) if state.indexed else frozenset()
        self._mark = state.mark
        if state.indexed:
            # one value per class of alike nodes (the state keeps the classes of a candidate
            # list up to date), then an entry per node
            pos, version = state.position, state.version
            heap = self._heap
            for members in state.classes(nodes):
                v = self.value_of(members[0])
                if v is not None:
                    heap.extend((v, n if by_name else pos[n], n, version(n)) for n in members)
            heapq.heapify(heap)

    def _tie(self, node: str) -> object:
        return node if self._by_name else self.state.position[node]

    def value_of(self, node: str) -> V | None:
        """``value(node)``, once per signature (every scan in reference mode)."""
        if not self.state.indexed:
            return self.value(node)
        sig = self.state.signature(node, self._joint)
        if sig in self._memo:
            return self._memo[sig]
        v: V | None = self.value(node)
        self._memo[sig] = v
        return v

    def _push(self, node: str) -> None:
        v = self.value_of(node)
        if v is not None:
            heapq.heappush(self._heap, (v, self._tie(node), node, self.state.version(node)))

    def best(self) -> str | None:
        """The best candidate node now, or None if the rule's pod fits none."""
        state = self.state
        if not state.indexed:
            best: tuple[V, object, str] | None = None
            for n in self.nodes:
                v = self.value(n)
                if v is not None and (best is None or (v, self._tie(n)) < best[:2]):
                    best = (v, self._tie(n), n)
            state.meter.add(len(self.nodes))
            return None if best is None else best[2]
        changed, self._mark = state.changes_since(self._mark)
        for n in changed:
            if n in self._members:
                self._push(n)
        heap = self._heap
        while heap:
            _v, _t, node, version = heap[0]
            if version == state.version(node):
                return node
            heapq.heappop(heap)
        return None


class DomainCounts:
    """Pods of one role's shape that fit each candidate node (counted up to ``limit``), and
    their sums per domain of every level and over all candidates (module docstring)."""

    def __init__(self, state: ClusterState, gang: Gang, role: Role, limit: int):
        self.state = state
        self._gang, self._role, self.limit = gang, role, limit
        self.candidates = state.candidates(gang, role)
        self._joint = state.joint_pairs(gang, role)
        self._domains = _node_domains(state)
        self._memo: dict[Hashable, int] = {}
        self.per_node: dict[str, int] = {}
        self.per_domain: dict[str, dict[str, int]] = {}
        """level -> domain name -> pods that fit there"""
        self.total = 0
        self._ordered: dict[str, list[tuple[int, str]]] = {}
        """level -> its domains as (pods that fit, name), in order; built on first use"""
        self._buckets: dict[int, list[str]] | None = None
        """pods that fit -> a heap of the names of nodes that hold that many (stale entries
        are dropped when they come up); built on first use"""
        self._mark = state.mark
        self._fill()

    def _cap(self, node: str) -> int:
        state = self.state
        if not state.indexed:
            return state.pod_capacity(self._gang, self._role, node, self.limit)
        sig = state.signature(node, self._joint)
        hit = self._memo.get(sig)
        if hit is None:
            hit = self._memo[sig] = state.pod_capacity(self._gang, self._role, node, self.limit)
        return hit

    def _fill(self) -> None:
        self.per_node = {n: self._cap(n) for n in self.candidates}
        self.per_domain = {lv: {} for lv in self.state.topo.levels}
        for n, c in self.per_node.items():
            if c:
                for lv, name in self._domains[n]:
                    level = self.per_domain[lv]
                    level[name] = level.get(name, 0) + c
        self.total = sum(self.per_node.values())
        self._ordered = {}
        self._buckets = None
        self.state.meter.add(len(self.candidates))

    def sync(self) -> DomainCounts:
        """Catch up with the state's changes (a full recount in reference mode); returns
        itself."""
        state = self.state
        changed, self._mark = state.changes_since(self._mark)
        if not state.indexed:
            self._fill()
            return self
        for n in changed:
            old = self.per_node.get(n)
            if old is None:
                continue
            new = self._cap(n)
            if new == old:
                continue
            self.per_node[n] = new
            self.total += new - old
            if self._buckets is not None:
                heapq.heappush(self._buckets.setdefault(new, []), n)
            for lv, name in self._domains[n]:
                level = self.per_domain[lv]
                was = level.get(name, 0)
                level[name] = was + new - old
                ordered = self._ordered.get(lv)
                if ordered is not None:
                    ordered.pop(bisect.bisect_left(ordered, (was, name)))
                    bisect.insort(ordered, (was + new - old, name))
        return self

    def holding(self, level: str, need: int) -> list[str]:
        """The names of the domains of ``level`` where at least ``need`` pods fit, fewest
        first, then by name (BestFit's order), at the cost of a bisection."""
        ordered = self._ordered.get(level)
        if ordered is None:
            counts = self.per_domain.get(level, {})
            ordered = self._ordered[level] = sorted(
                (counts.get(d.name, 0), d.name) for d in self.state.topo.domains_at(level)
            )
        return [name for _c, name in ordered[bisect.bisect_left(ordered, (need, "")) :]]

    def best_node(self, need: int) -> str | None:
        """The node that holds at least ``need`` pods and the fewest such, then the smallest
        name (BestFit for one node); None if none holds ``need``. By buckets of pods that
        fit, so at the cost of ``limit``, not of the nodes."""
        if need < 1:
            raise ValueError("need must be at least 1")
        per_node = self.per_node
        if not self.state.indexed:
            fit = [(c, n) for n, c in per_node.items() if c >= need]
            return min(fit)[1] if fit else None
        if self._buckets is None:
            buckets: dict[int, list[str]] = {}
            for n, c in per_node.items():
                buckets.setdefault(c, []).append(n)
            for names in buckets.values():
                heapq.heapify(names)
            self._buckets = buckets
        for room in range(need, self.limit + 1):
            heap = self._buckets.get(room)
            while heap and per_node[heap[0]] != room:
                heapq.heappop(heap)
            if heap:
                return heap[0]
        return None

    def of(self, domain: Domain | None) -> int:
        """Pods that fit inside ``domain`` (None: the whole cluster; a ``node`` domain: its
        node)."""
        if domain is None:
            return self.total
        if domain.level == NODE_LEVEL:
            return self.per_node.get(domain.path[-1], 0)
        return self.per_domain.get(domain.level, {}).get(domain.name, 0)


def _node_domains(state: ClusterState) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each node's (level, domain name) at every level it has a domain at (once per cycle)."""
    table: dict[str, tuple[tuple[str, str], ...]] | None = state.shared.get("node-domains")
    if table is None:
        topo = state.topo
        table = state.shared["node-domains"] = {
            n: tuple((lv, d.name) for lv in topo.levels if (d := topo.domain_of(n, lv)) is not None)
            for n in state.position
        }
    return table


def _shape(state: ClusterState, gang: Gang, role: Role) -> tuple[object, ...]:
    return state._shape_key(gang, role)


def node_ranking(
    state: ClusterState,
    rule: Hashable,
    gang: Gang,
    role: Role,
    value: Callable[[str], V | None],
    *,
    by_name: bool = False,
) -> NodeRanking[V]:
    """The state's ranking of ``role``'s candidates under ``rule`` (one per rule, pod shape
    and candidate list: gangs that agree on them share it)."""
    cands = state.candidates(gang, role)
    key = ("ranking", rule, _shape(state, gang, role), id(cands))
    joint = state.joint_pairs(gang, role)
    ranking: NodeRanking[V] = state.ranking(
        key, lambda: NodeRanking(state, cands, value, by_name=by_name, joint=joint)
    )
    return ranking


def domain_counts(state: ClusterState, gang: Gang, role: Role, limit: int) -> DomainCounts:
    """The state's :class:`DomainCounts` of ``role`` up to ``limit``, caught up (one per pod
    shape, candidate list and limit)."""
    cands = state.candidates(gang, role)
    key = ("counts", _shape(state, gang, role), id(cands), limit)
    counts: DomainCounts = state.ranking(key, lambda: DomainCounts(state, gang, role, limit))
    return counts.sync()


class DomainFullness:
    """The mean, over the nodes of each domain of one level, of the share of their GPU milli
    taken (running pods and placed ones; 0 for a node without GPUs), exact — integers over
    one common denominator, so that equal domains tie and the order never depends on the
    order of a float sum — kept up to date from the state's change log."""

    def __init__(self, state: ClusterState, level: str):
        self.state = state
        self.level = level
        topo = state.topo
        self.domains = topo.domains_at(level)
        totals = {GPU_MILLI * len(st.gpu_order) for st in state.nodes.values()} - {0}
        self._scale = math.lcm(*totals) if totals else 1
        """one denominator for every node's share: share = used * (scale / total) / scale"""
        sizes = {len(topo.nodes_in(d)) for d in self.domains} or {1}
        self._sizes = math.lcm(*sizes)
        self._mark = state.mark
        self.per_node: dict[str, int] = {}
        self.sums: dict[Domain, int] = {}
        self._fill()

    def _used(self, node: str) -> int:
        st = self.state.nodes[node]
        total = GPU_MILLI * len(st.gpu_order)
        if total == 0:
            return 0
        return (total - sum(st.gpu_milli.values())) * (self._scale // total)

    def _fill(self) -> None:
        topo = self.state.topo
        self.per_node = {}
        self.sums = {}
        for d in self.domains:
            total = 0
            for n in topo.nodes_in(d):
                self.per_node[n] = f = self._used(n)
                total += f
            self.sums[d] = total
        self.state.meter.add(len(self.per_node))

    def sync(self) -> DomainFullness:
        """Catch up with the state's changes (a full recount in reference mode)."""
        state = self.state
        changed, self._mark = state.changes_since(self._mark)
        if not state.indexed:
            self._fill()
            return self
        for n in changed:
            old = self.per_node.get(n)
            if old is None:
                continue
            new = self._used(n)
            if new != old:
                self.per_node[n] = new
                d = state.topo.domain_of(n, self.level)
                if d is not None:
                    self.sums[d] += new - old
        return self

    def mean(self, domain: Domain) -> Fraction:
        """The domain's mean share of GPU milli taken, in [0, 1]."""
        size = max(1, len(self.state.topo.nodes_in(domain)))
        return Fraction(self.sums.get(domain, 0), self._scale * size)

    def key(self, domain: Domain) -> int:
        """An integer ordered as :meth:`mean` (for sorting many domains)."""
        size = max(1, len(self.state.topo.nodes_in(domain)))
        return self.sums.get(domain, 0) * (self._sizes // size)


def domain_fullness(state: ClusterState, level: str) -> DomainFullness:
    """The state's :class:`DomainFullness` of ``level``, caught up."""
    full: DomainFullness = state.ranking(("fullness", level), lambda: DomainFullness(state, level))
    return full.sync()


class FailedPods:
    """One-pod gangs known to find no node this cycle, by class.

    Between two gangs a placer's state only loses room (a gang's rollback gives back only
    what the gang itself took) and each queue's usage only grows, so a one-pod gang that
    found no node, or no headroom in its queue, finds none later in the cycle either: an
    identical one — same queue, pod shape and candidate list — is skipped at once. Shapes
    whose room is found by trial placement (fewer NICs than GPUs under a joint policy) are
    not remembered, their fit not being monotone in free amounts. Off in reference mode.
    """

    def __init__(self, state: ClusterState):
        self.state = state
        self._failed: set[Hashable] = set()
        self._keys: dict[int, tuple[Gang, Hashable | None]] = {}

    def _key(self, gang: Gang) -> Hashable | None:
        hit = self._keys.get(id(gang))
        if hit is None or hit[0] is not gang:
            hit = self._keys[id(gang)] = (gang, self._class(gang))
        return hit[1]

    def _class(self, gang: Gang) -> Hashable | None:
        if not self.state.indexed or gang.size != 1 or gang.min_size != 1:
            return None
        role = gang.roles[0]
        if not self.state.exact_room(gang, role):
            return None
        return (gang.queue, _shape(self.state, gang, role), id(self.state.candidates(gang, role)))

    def known(self, gang: Gang) -> bool:
        """Did an identical one-pod gang already fail this cycle?"""
        key = self._key(gang)
        return key is not None and key in self._failed

    def failed(self, gang: Gang) -> None:
        """Remember that ``gang`` found no node."""
        key = self._key(gang)
        if key is not None:
            self._failed.add(key)


def may_hold(state: ClusterState, gang: Gang) -> Callable[[Domain | None], bool]:
    """A necessary condition for placing ``gang`` inside a domain (None: the cluster), as a
    function of the domain: each role's pods that fit there alone reach the role's minimum,
    and together the gang's minimum. Pods of other roles only take room, so where it fails
    no placer can place the gang; placers skip such domains without changing a choice. Roles
    whose room is found by trial placement are not counted against (their count is not
    monotone). Always True in reference mode (every domain is tried)."""
    if not state.indexed:
        return lambda _domain: True
    counted = [
        (role.count, gang.role_min(role), domain_counts(state, gang, role, role.count))
        for role in gang.roles
        if state.exact_room(gang, role)
    ]
    rest = sum(role.count for role in gang.roles if not state.exact_room(gang, role))
    need = gang.min_size

    def holds(domain: Domain | None) -> bool:
        total = rest
        for count, least, counts in counted:
            fit = min(count, counts.of(domain))
            if fit < least:
                return False
            total += fit
        return total >= need

    return holds
