"""The ``greedy`` baseline: Volcano's ``allocate`` action with the ``gang``,
``proportion``/``drf`` and ``binpack`` plugins (github.com/volcano-sh/volcano).

Gangs come in :class:`~gangplan.solver.placers.queue_order.QueueOrder`; each is placed pod by pod on
the node with the best binpack score (:func:`~gangplan.solver.placers.one_pod.greedy_node`, the
one-pod rule), all or nothing (rolled back below ``min_member``); an
elastic gang keeps the pods beyond its minimum that fit. A required level is honoured by
trying its domains one by one, fullest first (Volcano network-topology-aware allocation). It
does not look at preferred levels, and pod-by-pod choice can strand GPUs — faults kept on
purpose: they are what gangplan improves on.

Speed: the best node over the cluster comes from a ranking over classes of interchangeable
nodes (:mod:`gangplan.solver.placers.ranking`), a one-pod gang identical to one that found no node
is
skipped, and domains are ordered by an exact fullness kept up to date — each the same
choice as a scan of every node, at the cost of what changed.
"""

from __future__ import annotations

from collections import defaultdict

from gangplan.models import Gang, PodPlacement, Role
from gangplan.solver.context import CycleContext
from gangplan.solver.placers.one_pod import best_greedy_node, greedy_node
from gangplan.solver.placers.queue_order import QueueOrder, place_in_order, pod_names
from gangplan.solver.placers.ranking import domain_fullness, may_hold
from gangplan.solver.placers.state import ClusterState
from gangplan.topology import NODE_LEVEL, Domain

__all__ = ["greedy", "place_gang"]


def _role_nodes(
    state: ClusterState, gang: Gang, role: Role, within: frozenset[str] | None
) -> tuple[str, ...]:
    """The role's candidate nodes inside ``within`` (all of them for None), in order."""
    if within is None:
        return state.candidates(gang, role)
    return state.candidates_within(gang, role, within)


def _place_gang_greedy(
    ctx: CycleContext,
    state: ClusterState,
    order: QueueOrder,
    gang: Gang,
    within: frozenset[str] | None,
) -> list[PodPlacement] | None:
    names = pod_names(gang)
    placed: list[tuple[PodPlacement, Role]] = []

    def rollback() -> None:
        for p, r in reversed(placed):
            state.remove(p, r)
            order.charge(gang, r, -1)

    for role in gang.roles:
        allowed = within
        req = role.topology.required if role.topology else None
        if req is not None and req != NODE_LEVEL:
            # pick the role's domain: the fullest one that can hold its minimum
            best = _fullest_domain(ctx, state, gang, role, req, within)
            if best is None:
                if gang.role_min(role) > 0:
                    rollback()
                    return None
                continue
            allowed = best if within is None else (best & within)
        first: str | None = None  # a required node level: the node of the role's first pod
        for i in range(role.count):
            if not order.headroom_ok(gang, role):
                break
            if first is not None:
                ok = first in state.candidate_set(gang, role) and (
                    allowed is None or first in allowed
                )
                best_node = greedy_node(state, gang, role, [first] if ok else [])
            elif allowed is None:
                # the best of every candidate, from the ranking over classes of nodes
                best_node = best_greedy_node(state, gang, role)
            else:
                best_node = greedy_node(state, gang, role, _role_nodes(state, gang, role, allowed))
            if best_node is None:
                break
            p = state.place(gang, role, best_node, names[role.name][i])
            assert p is not None
            placed.append((p, role))
            order.charge(gang, role)
            if req == NODE_LEVEL:
                first = best_node
    counts: dict[str, int] = defaultdict(int)
    for p, _ in placed:
        counts[p.role] += 1
    ok = len(placed) >= gang.min_size and all(
        counts[r.name] >= gang.role_min(r) for r in gang.roles
    )
    if not ok:
        rollback()
        return None
    return [p for p, _ in placed]


def _fullest_domain(
    ctx: CycleContext,
    state: ClusterState,
    gang: Gang,
    role: Role,
    level: str,
    within: frozenset[str] | None,
) -> frozenset[str] | None:
    best: tuple[float, Domain] | None = None
    for dom in ctx.topo.domains_at(level):
        nodes = ctx.topo.nodes_in(dom)
        if within is not None:
            nodes = nodes & within
        cands = state.candidates_within(gang, role, nodes)
        cap = sum(state.pod_capacity(gang, role, n, gang.role_min(role) or 1) for n in cands)
        if cap < max(1, gang.role_min(role)):
            continue
        used = sum(state.gpu_used_fraction(n) for n in nodes) / max(1, len(nodes))
        key = (-used, dom)
        if best is None or key < (best[0], best[1]):
            best = (-used, dom)
    return (
        None
        if best is None
        else ctx.topo.nodes_in(best[1])
        if within is None
        else ctx.topo.nodes_in(best[1]) & within
    )


def place_gang(
    ctx: CycleContext, state: ClusterState, order: QueueOrder, gang: Gang
) -> list[PodPlacement] | None:
    """Place one gang as the ``greedy`` baseline does (a required level: its domains fullest
    first; a required node: nodes fullest first; either skipping those that cannot hold it),
    or None (nothing changed)."""
    level = gang.topology.required if gang.topology else None
    if level is None:
        return _place_gang_greedy(ctx, state, order, gang, None)
    holds = may_hold(state, gang)
    if level == NODE_LEVEL:
        for node in sorted(
            ctx.snapshot.node_by_name, key=lambda n: (-state.gpu_used_fraction(n), n)
        ):
            if not holds(ctx.topo.domain_of(node, NODE_LEVEL)):
                continue
            pods = _place_gang_greedy(ctx, state, order, gang, frozenset([node]))
            if pods:
                return pods
        return None
    # fullest first: the mean share of GPU milli taken over the domain's nodes
    full = domain_fullness(state, level)
    # the domains that could not hold it are left out: it would fail there
    domains = sorted(
        (d for d in ctx.topo.domains_at(level) if holds(d)), key=lambda d: (-full.key(d), d)
    )
    for dom in domains:
        pods = _place_gang_greedy(ctx, state, order, gang, ctx.topo.nodes_in(dom))
        if pods:
            return pods
    return None


def greedy(ctx: CycleContext) -> list[PodPlacement]:
    """Volcano-like allocate (see the module docstring). Returns placed pods."""
    return place_in_order(ctx, place_gang)
