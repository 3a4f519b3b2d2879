"""Baseline placers: faithful references to the greedy schedulers in use, and the fallback.

``greedy``
    Volcano's ``allocate`` action with the ``gang``, ``proportion``/``drf`` and ``binpack``
    plugins: the queue with the lowest weighted dominant share goes first; within a queue,
    gangs by priority, then creation time; each gang placed pod by pod on the node with the
    best binpack score, all or nothing (rolled back below ``min_member``); an elastic gang
    keeps the pods beyond its minimum that fit. A required level is honoured by trying its
    domains one by one, fullest first (Volcano network-topology-aware allocation). It does
    not look at preferred levels, and pod-by-pod choice can strand GPUs — faults kept on
    purpose: they are what gangplan improves on.
``topology-fit``
    Kueue's topology-aware scheduling (KEP-2724, BestFit): per gang, the lowest level
    whose best-fitting domain can hold all its pods (never above a required level); inside
    it, children taken largest first and the last one best-fit, down to the nodes. Same
    queue order as ``greedy``. It counts pods per node by shape and ignores which GPUs or
    NICs, and it places one gang at a time in arrival order, so it cannot see that one
    placement strands the next gang (the field case 04).
``fgd``
    (when present) fragmentation gradient descent, in :mod:`gangplan.solver.fgd`.

Every baseline returns pod placements that pass the verifier; :data:`BASELINES` lists them
all, and the cycle keeps the best by :func:`~gangplan.solver.score.score` as CP-SAT's
incumbent and hint.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from gangplan.models import Gang, PodPlacement, Role
from gangplan.solver.context import CycleContext
from gangplan.solver.state import ClusterState
from gangplan.topology import NODE_LEVEL, Domain

__all__ = ["BASELINES", "QueueOrder", "greedy", "topology_fit"]


class QueueOrder:
    """Queues by weighted dominant share, lowest first (Volcano ``drf``/``proportion``,
    Kueue fair sharing); weight 0 queues after all others; ties by name. Gangs of a queue
    by priority (higher first), then creation time, then name. Tracks queue usage and
    headroom under ``max`` as gangs are placed."""

    def __init__(self, ctx: CycleContext, gangs: list[Gang] | None = None):
        self.ctx = ctx
        self.usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for pod in ctx.snapshot.running:
            if pod.queue is not None:
                for r, v in pod.requests.items():
                    self.usage[pod.queue][r] += v
        self.added: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.pending: dict[str, list[Gang]] = defaultdict(list)
        for g in gangs if gangs is not None else ctx.snapshot.gangs:
            self.pending[g.queue].append(g)
        for q in self.pending.values():
            q.sort(key=lambda g: (-g.priority, g.creation_time, g.name))

    def share(self, queue: str) -> tuple[int, float, str]:
        q = self.ctx.snapshot.queue_by_name[queue]
        dom = self.ctx.shares.dominant(queue, self.added[queue])
        if q.weight_milli == 0:
            return (1, float(dom), queue)
        return (0, dom / q.weight_milli, queue)

    def __iter__(self) -> QueueOrder:
        return self

    def __next__(self) -> Gang:
        live = [q for q, gs in self.pending.items() if gs]
        if not live:
            raise StopIteration
        # the highest priority at the head of any queue goes first (Volcano orders jobs by
        # priority before queue share within a session), then the lowest share
        top = max(self.pending[q][0].priority for q in live)
        q = min((q for q in live if self.pending[q][0].priority == top), key=self.share)
        return self.pending[q].pop(0)

    def headroom_ok(self, gang: Gang, role: Role, pods: int = 1) -> bool:
        """Would ``pods`` more pods of ``role`` keep the queue within its max?"""
        q = self.ctx.snapshot.queue_by_name[gang.queue]
        for r, cap in q.max.items():
            if self.usage[gang.queue][r] + pods * role.requests.get(r, 0) > cap:
                return False
        return True

    def headroom_ok_counts(self, gang: Gang, counts: dict[str, int]) -> bool:
        """Would these pods per role, together, keep the queue within its max?"""
        q = self.ctx.snapshot.queue_by_name[gang.queue]
        for r, cap in q.max.items():
            add = sum(n * gang.role(role).requests.get(r, 0) for role, n in counts.items())
            if self.usage[gang.queue][r] + add > cap:
                return False
        return True

    def charge(self, gang: Gang, role: Role, sign: int = 1) -> None:
        for r, v in role.requests.items():
            self.usage[gang.queue][r] += sign * v
        for r, v in self.ctx.shares.contribution(role.requests).items():
            self.added[gang.queue][r] += sign * v


def _pod_names(gang: Gang) -> dict[str, list[str]]:
    return {r.name: [r.pod_name(gang.name, i) for i in range(r.count)] for r in gang.roles}


def _binpack_score(state: ClusterState, role: Role, node: str) -> float:
    """Volcano binpack: mean over the resources the pod asks of (used + request) / allocatable."""
    st = state.nodes[node]
    alloc = state.snapshot.node_by_name[node].allocatable
    total = 0.0
    n = 0
    for r, req in role.requests.items():
        cap = alloc.get(r, 0)
        if req <= 0 or cap <= 0:
            continue
        used = cap - st.resources.get(r, 0)
        total += (used + req) / cap
        n += 1
    return total / n if n else 0.0


def _role_nodes(
    ctx: CycleContext, state: ClusterState, gang: Gang, role: Role, within: frozenset[str] | None
) -> list[str]:
    cands = state.candidates(gang, role)
    return [n for n in cands if within is None or n in within]


def _place_gang_greedy(
    ctx: CycleContext,
    state: ClusterState,
    order: QueueOrder,
    gang: Gang,
    within: frozenset[str] | None,
) -> list[PodPlacement] | None:
    names = _pod_names(gang)
    placed: list[tuple[PodPlacement, Role]] = []
    role_domain: dict[str, frozenset[str]] = {}

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
            role_domain[role.name] = allowed
        for i in range(role.count):
            if not order.headroom_ok(gang, role):
                break
            if allowed is None and req != NODE_LEVEL:
                # one representative per class of interchangeable nodes: same choice as a
                # scan of every node (equal scores inside a class; the first node wins ties)
                nodes = [m[0] for m in state.classes(state.candidates(gang, role))]
            else:
                nodes = _role_nodes(ctx, state, gang, role, allowed)
            if req == NODE_LEVEL and any(p.role == role.name for p, _ in placed):
                first = next(p.node for p, _ in placed if p.role == role.name)
                nodes = [n for n in nodes if n == first]
            best_node = None
            best_score = -1.0
            for n in state.fitting(gang, role, nodes):
                s = _binpack_score(state, role, n)
                if s > best_score:
                    best_node, best_score = n, s
            if best_node is None:
                break
            p = state.place(gang, role, best_node, names[role.name][i])
            assert p is not None
            placed.append((p, role))
            order.charge(gang, role)
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
        cands = [n for n in state.candidates(gang, role) if n in nodes]
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


def greedy(ctx: CycleContext) -> list[PodPlacement]:
    """Volcano-like allocate (see the module docstring). Returns placed pods."""
    state = ctx.state()
    order = QueueOrder(ctx)
    out: list[PodPlacement] = []
    for gang in order:
        level = gang.topology.required if gang.topology else None
        if level is None or level == NODE_LEVEL:
            within = None
            if level == NODE_LEVEL:
                # one node: try nodes fullest first
                pods = None
                for node in sorted(
                    ctx.snapshot.node_by_name, key=lambda n: (-state.gpu_used_fraction(n), n)
                ):
                    pods = _place_gang_greedy(ctx, state, order, gang, frozenset([node]))
                    if pods:
                        break
            else:
                pods = _place_gang_greedy(ctx, state, order, gang, within)
        else:
            pods = None
            domains = sorted(
                ctx.topo.domains_at(level),
                key=lambda d: (
                    -sum(state.gpu_used_fraction(n) for n in ctx.topo.nodes_in(d))
                    / max(1, len(ctx.topo.nodes_in(d))),
                    d,
                ),
            )
            for dom in domains:
                pods = _place_gang_greedy(ctx, state, order, gang, ctx.topo.nodes_in(dom))
                if pods:
                    break
        if pods:
            out.extend(pods)
    return out


# --------------------------------------------------------------------------- topology-fit


def _capacity(
    state: ClusterState, gang: Gang, role: Role, nodes: list[str], limit: int
) -> dict[str, int]:
    return {n: state.pod_capacity(gang, role, n, limit) for n in nodes}


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
        children = []
        for d in ctx.topo.domains_at(level):
            members = ctx.topo.nodes_in(d) & domain_nodes
            if members:
                children.append((d.name, members))
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


_ROOM_LIMIT = 64
"""How far pod capacities are counted when comparing rooms (BestFit needs only the order)."""


def _topology_fit_gang(
    ctx: CycleContext, state: ClusterState, order: QueueOrder, gang: Gang
) -> list[PodPlacement] | None:
    levels = ctx.topo.all_levels
    required = gang.topology.required if gang.topology else None
    top = levels.index(required) if required is not None else -1  # -1: the whole cluster
    names = _pod_names(gang)
    if gang.size == 1:
        # one pod: the lowest level is the node; BestFit = the node with the least room that
        # still holds it (ties by name). Same rule as below, without building every domain.
        role = gang.roles[0]
        if not order.headroom_ok_counts(gang, {role.name: 1}):
            return None
        best: tuple[int, str] | None = None
        for alike in state.classes(state.candidates(gang, role)):
            # interchangeable nodes have the same room; the smallest name breaks ties
            room = state.pod_capacity(gang, role, alike[0], _ROOM_LIMIT)
            if room >= 1 and (best is None or (room, min(alike)) < best):
                best = (room, min(alike))
        if best is None:
            return None
        placed = state.place(gang, role, best[1], names[role.name][0])
        if placed is None:
            return None
        order.charge(gang, role)
        return [placed]
    for size_target in ("full", "min"):
        counts = {
            r.name: (r.count if size_target == "full" else gang.role_min(r)) for r in gang.roles
        }
        if size_target == "min":
            # fill up to the gang minimum with the first roles' extra pods
            extra = gang.min_size - sum(counts.values())
            for r in gang.roles:
                add = min(extra, r.count - counts[r.name])
                counts[r.name] += add
                extra -= add
        if size_target == "min" and not gang.elastic:
            break
        if not order.headroom_ok_counts(gang, counts):
            return None
        caps = {
            r.name: _capacity(
                state, gang, r, list(state.candidates(gang, r)), max(counts[r.name], _ROOM_LIMIT)
            )
            for r in gang.roles
        }
        # lowest level first, up to the required level (or the root)
        for li in range(len(levels) - 1, top - 1, -1):
            if li == -1:
                domains: list[tuple[str, frozenset[str]]] = [
                    ("<root>", frozenset(ctx.snapshot.node_by_name))
                ]
            else:
                lv = levels[li]
                if lv == NODE_LEVEL:
                    domains = [(n, frozenset([n])) for n in ctx.snapshot.node_by_name]
                else:
                    domains = [(d.name, ctx.topo.nodes_in(d)) for d in ctx.topo.domains_at(lv)]
            holding = []
            if li == -1 or levels[li] == NODE_LEVEL:
                per_domain = {
                    name: {r: sum(caps[r].get(n, 0) for n in members) for r in caps}
                    for name, members in domains
                }
            else:
                per_domain = {name: dict.fromkeys(caps, 0) for name, _m in domains}
                for rname, rc in caps.items():
                    for n, c in rc.items():
                        dom = ctx.topo.domain_of(n, levels[li])
                        if dom is not None and dom.name in per_domain:
                            per_domain[dom.name][rname] += c
            for name, members in domains:
                dcap = per_domain[name]
                if all(dcap[r] >= counts[r] for r in counts):
                    holding.append((sum(dcap.values()), name, members))
            if not holding:
                continue
            holding.sort(key=lambda h: (h[0], h[1]))
            for _cap, _name, members in holding:
                pods = _place_roles(ctx, state, order, gang, counts, members, li, names)
                if pods is not None:
                    return pods
        # try the elastic minimum next
    return None


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
        cands = [n for n in state.candidates(gang, role) if n in members]
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
    state = ctx.state()
    order = QueueOrder(ctx)
    out: list[PodPlacement] = []
    for gang in order:
        pods = _topology_fit_gang(ctx, state, order, gang)
        if pods:
            out.extend(pods)
    return out


Placer = Callable[[CycleContext], list[PodPlacement]]

BASELINES: dict[str, Placer] = {
    "greedy": greedy,
    "topology-fit": topology_fit,
}
"""Every baseline by name; the cycle keeps the best of all as CP-SAT's incumbent."""

import gangplan.solver.fgd  # noqa: E402, F401  (registers "fgd" in BASELINES)
