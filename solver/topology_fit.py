"""The ``topology-fit`` baseline: Kueue's topology-aware scheduling (KEP-2724, BestFit;
github.com/kubernetes-sigs/kueue).

Per gang, the lowest level whose best-fitting domain can hold all its pods (never above a
required level); inside it, children taken largest first and the last one best-fit, down to
the nodes. Gangs come in :class:`~gangplan.solver.queue_order.QueueOrder`, as for
``greedy``. It counts pods per node by shape and ignores which GPUs or NICs, and it places
one gang at a time in arrival order, so it cannot see that one placement strands the next
gang (``instances/cases/04-packing-order.yaml``).
"""

from __future__ import annotations

from gangplan.models import Gang, PodPlacement, Role
from gangplan.solver.context import CycleContext
from gangplan.solver.one_pod import ROOM_LIMIT, topology_fit_node
from gangplan.solver.queue_order import QueueOrder, pod_names
from gangplan.solver.state import ClusterState
from gangplan.topology import NODE_LEVEL

__all__ = ["topology_fit"]


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


def _topology_fit_gang(
    ctx: CycleContext, state: ClusterState, order: QueueOrder, gang: Gang
) -> list[PodPlacement] | None:
    levels = ctx.topo.all_levels
    required = gang.topology.required if gang.topology else None
    top = levels.index(required) if required is not None else -1  # -1: the whole cluster
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
                state, gang, r, list(state.candidates(gang, r)), max(counts[r.name], ROOM_LIMIT)
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
