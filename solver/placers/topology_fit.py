"""The ``topology-fit`` baseline: Kueue's topology-aware scheduling (KEP-2724, BestFit;
github.com/kubernetes-sigs/kueue) with its partial admission (KEP-420).

Per gang, the lowest level whose best-fitting domain can hold all its pods (never above a
required level); inside it, children taken largest first and the last one best-fit, down to
the nodes. Gangs come in :class:`~gangplan.solver.placers.queue_order.QueueOrder`, as for
``greedy``. It counts pods per node by shape and ignores which GPUs or NICs, and it places
one gang at a time in arrival order, so it cannot see that one placement strands the next
gang (``instances/cases/04-packing-order.yaml``).

**Elastic gangs** (partial admission, KEP-420 ``keps/420-partial-admission``; Kueue's
``PodSetReducer`` in ``pkg/scheduler/flavorassigner/podset_reducer.go``): when the full size
does not fit — the queue's max or the topology — the sizes between the full size and the
minimum are searched as Kueue does: a budget of pods to give up, cut from the last role first
down to its own minimum, then from the role before it (``order-based``), is binary-searched
(Go's ``sort.Search``) for the smallest cut that fits; when the cut reduced two roles or
more, each reduced role, first to last, is grown back as far as still fits (the full count
first, else a binary search). Here a cut never takes the gang below its ``min_member``.

Speed: capacities per node and per domain, and BestFit's node, come from node classes kept
up to date (:mod:`gangplan.solver.placers.ranking`), and a one-pod gang identical to one that found
no node is skipped: the same choices as a scan of every node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from gangplan.models import Gang, PodPlacement, Role
from gangplan.solver.context import CycleContext
from gangplan.solver.placers.one_pod import ROOM_LIMIT, topology_fit_node
from gangplan.solver.placers.queue_order import QueueOrder, place_in_order, pod_names
from gangplan.solver.placers.ranking import DomainCounts, domain_counts
from gangplan.solver.placers.state import ClusterState
from gangplan.topology import NODE_LEVEL

__all__ = ["partial_admission_counts", "place_counts", "topology_fit"]


def _capacity(
    state: ClusterState, gang: Gang, role: Role, nodes: tuple[str, ...], limit: int
) -> dict[str, int]:
    return dict(zip(nodes, state.capacities(gang, role, nodes, limit), strict=True))


def _descend(
    ctx: CycleContext,
    caps: dict[str, int],
    domain_nodes: frozenset[str],
    level_index: int,
    need: int,
) -> list[tuple[str, int]]:
    """Kueue BestFit descent: children by capacity, largest first, the last one best-fit."""
    levels = ctx.topo.all_levels
    if level_index >= len(levels):
        return []
    level = levels[level_index]
    if level == NODE_LEVEL:
        children = [(n, frozenset([n])) for n in domain_nodes]
    else:
        children = _children(ctx, level, domain_nodes)
    cap = {name: sum(caps.get(n, 0) for n in members) for name, members in children}
    children = [c for c in children if cap[c[0]] > 0]
    children.sort(key=lambda c: (-cap[c[0]], c[0]))
    chosen: list[tuple[str, frozenset[str]]] = []
    left = need
    for i, c in enumerate(children):
        if left <= 0:
            break
        # best fit for the last child: the smallest remaining child that covers what is left
        fitting = [d for d in children[i:] if cap[d[0]] >= left]
        if fitting:
            last = min(fitting, key=lambda d: (cap[d[0]], d[0]))
            chosen.append(last)
            left = 0
            break
        chosen.append(c)
        left -= cap[c[0]]
    out: list[tuple[str, int]] = []
    remaining = need
    for name, members in chosen:
        take = min(remaining, cap[name])
        if level == NODE_LEVEL:
            out.append((name, take))
        else:
            out.extend(_descend(ctx, caps, members, level_index + 1, take))
        remaining -= take
    return out


def _children(
    ctx: CycleContext, level: str, domain_nodes: frozenset[str]
) -> list[tuple[str, frozenset[str]]]:
    """The domains of ``level`` that meet ``domain_nodes``, each with the nodes they share:
    computed once per domain of the cycle (the topology does not change), from the nodes'
    own domains, not from every domain of the level."""
    cache: dict[tuple[str, frozenset[str]], list[tuple[str, frozenset[str]]]]
    cache = ctx.derived.setdefault("topology-fit.children", {})
    key = (level, domain_nodes)
    hit = cache.get(key)
    if hit is None:
        met = {d for n in domain_nodes if (d := ctx.topo.domain_of(n, level)) is not None}
        hit = cache[key] = [(d.name, ctx.topo.nodes_in(d) & domain_nodes) for d in sorted(met)]
    return hit


# --------------------------------------------------------------------------- partial admission


def partial_admission_counts(
    gang: Gang, fits: Callable[[dict[str, int]], bool]
) -> dict[str, int] | None:
    """Kueue's partial admission for an elastic gang whose full size does not fit (module
    docstring): the pods per role it admits, or None if not even its minimum fits.

    ``fits(counts)`` says whether these pods per role can be admitted now; it is called for
    the sizes Kueue's ``PodSetReducer`` tries, in its order.
    """
    full = [r.count for r in gang.roles]
    deltas = [r.count - gang.role_min(r) for r in gang.roles]
    budget = min(sum(deltas), gang.size - gang.min_size)
    if budget <= 0:
        return None

    def counts_for(amount: int) -> list[int]:
        # order-based: cut from the last role first, each down to its own minimum
        out = list(full)
        remaining = amount
        for i in range(len(deltas) - 1, -1, -1):
            cut = min(deltas[i], remaining)
            out[i] = full[i] - cut
            remaining -= cut
        return out

    def as_dict(counts: list[int]) -> dict[str, int]:
        return {r.name: c for r, c in zip(gang.roles, counts, strict=True)}

    best: list[int] | None = None
    lo, hi = 0, budget + 1  # sort.Search(budget + 1, fits): the smallest cut that fits
    while lo < hi:
        mid = lo + (hi - lo) // 2
        trial = counts_for(mid)
        if fits(as_dict(trial)):
            best, hi = trial, mid
        else:
            lo = mid + 1
    if lo > budget or best is None:
        return None
    reduced = sum(1 for c, f in zip(best, full, strict=True) if c < f)
    if reduced >= 2:
        best = _give_back(best, full, lambda c: fits(as_dict(c)))
    return as_dict(best)


def _give_back(counts: list[int], full: list[int], fits: Callable[[list[int]], bool]) -> list[int]:
    """Grow each reduced role back, first to last, as far as still fits: the full count in
    one call, else the largest count between the cut one and the full one (binary search)."""
    counts = list(counts)
    for i in range(len(counts)):
        if counts[i] == full[i]:
            continue
        trial = list(counts)
        trial[i] = full[i]
        if fits(trial):
            counts[i] = full[i]
            continue
        lo, hi = counts[i] + 1, full[i] - 1
        grown = counts[i]
        a, b = 0, hi - lo + 1  # sort.Search over k: the first k whose count does not fit
        while a < b:
            k = a + (b - a) // 2
            trial[i] = lo + k
            if fits(trial):
                grown = trial[i]
                a = k + 1
            else:
                b = k
        counts[i] = grown
    return counts


# --------------------------------------------------------------------------- one gang


class _Gang:
    """One gang's placement by topology-fit on a state (rolled back when it fails)."""

    def __init__(self, ctx: CycleContext, state: ClusterState, order: QueueOrder, gang: Gang):
        self.ctx, self.state, self.order, self.gang = ctx, state, order, gang
        self.names = pod_names(gang)
        levels = ctx.topo.all_levels
        required = gang.topology.required if gang.topology else None
        self.top = levels.index(required) if required is not None else -1  # -1: the cluster

    def undo(self, pods: list[PodPlacement]) -> None:
        for p in reversed(pods):
            role = self.gang.role(p.role)
            self.state.remove(p, role)
            self.order.charge(self.gang, role, -1)

    def place(self, counts: dict[str, int]) -> list[PodPlacement] | None:
        """Place these pods per role (within the queue's max), lowest level first."""
        gang, state = self.gang, self.state
        if not self.order.headroom_ok_counts(gang, counts):
            return None
        caps = {
            r.name: domain_counts(state, gang, r, max(counts[r.name], ROOM_LIMIT))
            for r in gang.roles
        }
        levels = self.ctx.topo.all_levels
        # lowest level first, up to the required level (or the root)
        for li in range(len(levels) - 1, self.top - 1, -1):
            for members in self._holding(caps, counts, li):
                pods = _place_roles(
                    self.ctx, state, self.order, gang, counts, members, li, self.names
                )
                if pods is not None:
                    return pods
        return None

    def fits(self, counts: dict[str, int]) -> bool:
        """Would these pods per role be placed now? (tried, then taken back)"""
        pods = self.place(counts)
        if pods is None:
            return False
        self.undo(pods)
        return True

    def _holding(
        self, caps: dict[str, DomainCounts], counts: dict[str, int], li: int
    ) -> Iterator[frozenset[str]]:
        """The domains of level ``li`` (-1: the cluster) whose capacity holds every role's
        count, least capacity first (then by name): BestFit's order."""
        topo = self.ctx.topo
        if li == -1:
            if all(caps[r].total >= counts[r] for r in counts):
                yield self.state.all_nodes
            return
        level = topo.all_levels[li]
        if level == NODE_LEVEL:
            yield from self._holding_nodes(caps, counts)
            return
        if len(caps) == 1:
            # one role: the domains that hold its count, in BestFit's order, by bisection
            ((name, counted),) = caps.items()
            by_name = {d.name: d for d in topo.domains_at(level)}
            for dname in counted.holding(level, counts[name]):
                yield topo.nodes_in(by_name[dname])
            return
        holding = []
        for d in topo.domains_at(level):
            dcap = {r: caps[r].of(d) for r in caps}
            if all(dcap[r] >= counts[r] for r in counts):
                holding.append((sum(dcap.values()), d.name, topo.nodes_in(d)))
        holding.sort(key=lambda h: (h[0], h[1]))
        for _cap, _name, members in holding:
            yield members

    def _holding_nodes(
        self, caps: dict[str, DomainCounts], counts: dict[str, int]
    ) -> Iterator[frozenset[str]]:
        tried = None
        if len(caps) == 1:
            # one role: the node with the least room that holds its count, by buckets of
            # room; placing its count there cannot fail (the room was counted by the same
            # device rules), but should it, the full order below follows
            ((name, counted),) = caps.items()
            if counts[name] >= 1:
                tried = counted.best_node(counts[name])
                if tried is None:
                    return
                yield frozenset([tried])
        holding = []
        for n in self.ctx.node_names:
            dcap = {r: caps[r].per_node.get(n, 0) for r in caps}
            if n != tried and all(dcap[r] >= counts[r] for r in counts):
                holding.append((sum(dcap.values()), n))
        holding.sort()
        for _cap, n in holding:
            yield frozenset([n])


def _topology_fit_gang(
    ctx: CycleContext, state: ClusterState, order: QueueOrder, gang: Gang
) -> list[PodPlacement] | None:
    names = pod_names(gang)
    if gang.size == 1:
        # one pod: the lowest level is the node; BestFit = the node with the least room that
        # still holds it (the one-pod rule, without building every domain)
        role = gang.roles[0]
        if not order.headroom_ok_counts(gang, {role.name: 1}):
            return None
        node = topology_fit_node(state, gang, role)
        if node is None:
            return None
        placed = state.place(gang, role, node, names[role.name][0])
        if placed is None:
            return None
        order.charge(gang, role)
        return [placed]
    one = _Gang(ctx, state, order, gang)
    pods = one.place({r.name: r.count for r in gang.roles})
    if pods is not None or not gang.elastic:
        return pods
    counts = partial_admission_counts(gang, one.fits)
    return None if counts is None else one.place(counts)


def place_counts(
    ctx: CycleContext, state: ClusterState, order: QueueOrder, gang: Gang, counts: dict[str, int]
) -> list[PodPlacement] | None:
    """Place ``counts`` pods per role of ``gang`` on ``state`` by topology-fit (the lowest
    level whose best-fitting domain holds them all, never above a required level; module
    docstring), within its queue's max as ``order`` counts it; None (state unchanged) when
    they do not fit. The pods are named by index, ``0..counts[role]-1``."""
    return _Gang(ctx, state, order, gang).place(counts)


def _place_roles(
    ctx: CycleContext,
    state: ClusterState,
    order: QueueOrder,
    gang: Gang,
    counts: dict[str, int],
    members: frozenset[str],
    level_index: int,
    names: dict[str, list[str]],
) -> list[PodPlacement] | None:
    placed: list[tuple[PodPlacement, Role]] = []
    for role in gang.roles:
        need = counts[role.name]
        if need == 0:
            continue
        role_members = members
        cands = state.candidates_within(gang, role, members)
        caps = _capacity(state, gang, role, cands, need)
        rreq = role.topology.required if role.topology else None
        if rreq is not None:
            # a role's own required level: the best-fitting single domain of that level
            doms = [(d.name, ctx.topo.nodes_in(d) & members) for d in ctx.topo.domains_at(rreq)]
            fit = [
                (sum(caps.get(n, 0) for n in m), name, m)
                for name, m in doms
                if sum(caps.get(n, 0) for n in m) >= need
            ]
            if not fit:
                for p, r in reversed(placed):
                    state.remove(p, r)
                    order.charge(gang, r, -1)
                return None
            _c, _n, dom_members = min(fit, key=lambda f: (f[0], f[1]))
            caps = {n: c for n, c in caps.items() if n in dom_members}
            role_members = dom_members
        plan = _descend(ctx, caps, role_members, max(level_index + 1, 0), need)
        if sum(k for _, k in plan) < need:
            plan = sorted(caps.items(), key=lambda kv: (-kv[1], kv[0]))
        i = 0
        for node, k in plan:
            for _ in range(k):
                if i >= need:
                    break
                placement = state.place(gang, role, node, names[role.name][i])
                if placement is None:
                    break
                placed.append((placement, role))
                order.charge(gang, role)
                i += 1
        if i < need:
            for p, r in reversed(placed):
                state.remove(p, r)
                order.charge(gang, r, -1)
            return None
    return [p for p, _ in placed]


def topology_fit(ctx: CycleContext) -> list[PodPlacement]:
    """Kueue-TAS-like placement (see the module docstring). Returns placed pods."""
    return place_in_order(ctx, _topology_fit_gang)
