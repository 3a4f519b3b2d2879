"""Why a gang stays pending: the three classes of ``docs/design.md``, with the binding
constraint and numbers.

``never_fits``
    not even on the empty cluster (allocatable, no running pods) within its queue's max;
``blocked``
    it would fit the empty cluster and its queue's max, but not what running pods leave,
    or not its queue's headroom (max minus running usage);
``lost``
    it fits what running pods leave, but gangs placed this cycle took the room.

Reasons come from capacity bounds, which are cheap: per role, how many pods fit each
candidate node (by trial with the same device rules as the baselines), summed per domain.
For a gang of one role these bounds are exact. For gangs of several roles sharing nodes
the sum over roles is a relaxation: when it says "fits", :func:`explain_pending` may ask an
exact check (a callback, the CP-SAT model of the gang alone, spending at most its budget);
without one, such a gang is reported as ``lost`` and the message says the check was a bound.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from gangplan.models import GPU_MILLI, Gang, PendingReason, PodPlacement, Role, Snapshot
from gangplan.models.quantity import format_quantity
from gangplan.solver.context import CycleContext
from gangplan.solver.queue_order import pod_charge, running_charge
from gangplan.solver.state import ClusterState
from gangplan.topology import NODE_LEVEL

__all__ = ["ExactCheck", "explain_pending"]

ExactCheck = Callable[[Gang, bool, float], bool | None]
"""``check(gang, empty, seconds)``: True if the gang alone fits (the empty cluster when
``empty``, else what running pods leave), False if not, None if undecided in time."""


def _describe_pod(snapshot: Snapshot, role: Role) -> str:
    gpu = role.requests.get(snapshot.gpu, 0)
    if gpu >= GPU_MILLI:
        return f"{gpu // GPU_MILLI} GPU{'s' if gpu > GPU_MILLI else ''}"
    if gpu:
        return f"{gpu} milli-GPU"
    parts = [f"{format_quantity(r, v)} {r}" for r, v in sorted(role.requests.items()) if v]
    return ", ".join(parts[:2]) or "no resources"


def _describe_gang(snapshot: Snapshot, gang: Gang, pods: int) -> str:
    gpus = sum(r.requests.get(snapshot.gpu, 0) * r.count for r in gang.roles)
    shapes = ", ".join(f"{r.count} x {_describe_pod(snapshot, r)}" for r in gang.roles)
    models = f" {'/'.join(gang.gpu_models)}" if gang.gpu_models else ""
    noun = "pod" if pods == 1 else "pods"
    if gpus >= GPU_MILLI:
        return f"{pods} {noun} ({shapes}; {gpus / GPU_MILLI:g}{models} GPUs at full size)"
    return f"{pods} {noun} ({shapes})"


@dataclass
class _Fit:
    ok: bool
    message: str


class _Capacity:
    """Per-node pod capacity of role shapes in one cluster state, cached by shape."""

    def __init__(self, ctx: CycleContext, state: ClusterState):
        self.ctx = ctx
        self.state = state
        self._cache: dict[tuple[object, ...], dict[str, int]] = {}

    def per_node(self, gang: Gang, role: Role) -> dict[str, int]:
        key = (
            tuple(sorted(role.requests.items())),
            gang.joint,
            tuple(sorted(role.node_selector.items())),
            role.node_affinity,
            role.tolerations,
            gang.gpu_models,
            gang.topology,
            role.topology,
        )
        if key not in self._cache:
            cands = self.state.candidates(gang, role)
            caps = {n: self.state.pod_capacity(gang, role, n, role.count) for n in cands}
            self._cache[key] = {n: c for n, c in caps.items() if c > 0}
        return self._cache[key]


def _why_no_candidates(ctx: CycleContext, gang: Gang, role: Role) -> str:
    s = ctx.snapshot
    counts: Counter[str] = Counter()
    for node in s.nodes:
        if not node.ready or node.unschedulable:
            counts["not Ready or unschedulable"] += 1
        elif not role.admits(node):
            counts["its node selector, affinity or taints"] += 1
        elif (
            gang.gpu_models
            and role.requests.get(s.gpu, 0)
            and node.gpu_model not in gang.gpu_models
        ):
            counts[f"GPU model (accepts {'/'.join(gang.gpu_models)})"] += 1
        elif gang.joint != "none" and role.requests.get(s.nic, 0) and not node.has_device_topology:
            counts["no declared PCIe layout for joint allocation"] += 1
        else:
            counts["no domain at its required level"] += 1
    if not s.nodes:
        return "the cluster has no nodes"
    parts = ", ".join(f"{n} by {why}" for why, n in counts.most_common())
    return f"no node can take role {role.name!r}: of {len(s.nodes)} nodes, {parts}"


def _fit_alone(ctx: CycleContext, cap: _Capacity, gang: Gang, where: str) -> _Fit:
    """Does the gang alone fit this state? Exact for one role; a bound for several."""
    s = ctx.snapshot
    per_role = {r.name: cap.per_node(gang, r) for r in gang.roles}
    for r in gang.roles:
        if gang.role_min(r) > 0 and not cap.state.candidates(gang, r):
            return _Fit(False, _why_no_candidates(ctx, gang, r))
    need = gang.min_size
    level = gang.topology.required if gang.topology else None
    domains: list[tuple[str, frozenset[str]]]
    if level is None:
        domains = [("the cluster", frozenset(s.node_by_name))]
    elif level == NODE_LEVEL:
        domains = [(n, frozenset([n])) for n in s.node_by_name]
    else:
        domains = [(d.name, ctx.topo.nodes_in(d)) for d in ctx.topo.domains_at(level)]
    best_total, best_name = -1, ""
    for name, members in domains:
        total = 0
        ok = True
        for r in gang.roles:
            n_r = min(r.count, sum(c for n, c in per_role[r.name].items() if n in members))
            n_r = _role_level_cap(ctx, r, per_role[r.name], members, n_r)
            if n_r < gang.role_min(r):
                ok = False
            total += n_r
        if ok and total >= need:
            return _Fit(True, "")
        if total > best_total:
            best_total, best_name = total, name
    what = _describe_gang(s, gang, need)
    if level is not None:
        unit = "node" if level == NODE_LEVEL else level
        even = " even with no pods running" if where == "empty" else ""
        return _Fit(
            False,
            f"needs {what} inside one {unit}; the largest free {unit} ({best_name}) holds "
            f"{max(best_total, 0)} of them{even}",
        )
    # not a topology limit: a resource no node has enough of, or capacity, or fragmentation
    scarce = _scarce_resource(cap, gang)
    if scarce is not None:
        return _Fit(False, f"needs {what}; {scarce}")
    gpu_pod = max((r.requests.get(s.gpu, 0) for r in gang.roles), default=0)
    if gpu_pod >= GPU_MILLI:
        free_gpus = sum(
            sum(1 for m in cap.state.nodes[n].gpu_milli.values() if m == GPU_MILLI)
            for n in {n for r in gang.roles for n in cap.state.candidates(gang, r)}
        )
        gpus_needed = (
            sum(r.requests.get(s.gpu, 0) * gang.role_min(r) for r in gang.roles) // GPU_MILLI
        )
        nodes_ok = len({n for caps in per_role.values() for n in caps})
        if free_gpus >= max(gpus_needed, need * gpu_pod // GPU_MILLI // max(1, len(gang.roles))):
            return _Fit(
                False,
                f"needs {what}; {where} nodes have {free_gpus} whole GPUs but they are split: "
                f"only {nodes_ok} node{'s' if nodes_ok != 1 else ''} can hold a "
                f"{gpu_pod // GPU_MILLI}-GPU pod, room for {max(best_total, 0)} of its pods "
                "(per-node fragmentation)",
            )
        return _Fit(
            False,
            f"needs {what}; {where} nodes it may use have {free_gpus} whole GPUs, room for "
            f"{max(best_total, 0)} of its pods",
        )
    return _Fit(False, f"needs {what}; {where} nodes have room for {max(best_total, 0)} of them")


def _scarce_resource(cap: _Capacity, gang: Gang) -> str | None:
    """A resource (other than GPUs and NICs) that no candidate node has enough of for one
    pod of a role that must have pods, e.g. 'no node it may use has 100 cpu free (the most
    is 64)'. None if every such resource fits some node."""
    state = cap.state
    for role in gang.roles:
        if gang.role_min(role) == 0 and gang.min_size <= sum(
            r.count for r in gang.roles if r is not role
        ):
            continue
        cands = state.candidates(gang, role)
        if not cands:
            continue
        for res, amount in sorted(role.requests.items()):
            if amount <= 0 or res in (state.gpu, state.nic):
                continue
            most = max(state.nodes[n].resources.get(res, 0) for n in cands)
            if amount > most:
                return (
                    f"no node it may use has {format_quantity(res, amount)} {res} free for one "
                    f"{role.name} pod (the most any has: {format_quantity(res, most)})"
                )
    return None


def _role_level_cap(
    ctx: CycleContext, role: Role, caps: dict[str, int], members: frozenset[str], n_r: int
) -> int:
    level = role.topology.required if role.topology else None
    if level is None:
        return n_r
    if level == NODE_LEVEL:
        return min(n_r, max((c for n, c in caps.items() if n in members), default=0))
    best = 0
    for d in ctx.topo.domains_at(level):
        inside = ctx.topo.nodes_in(d) & members
        best = max(best, sum(c for n, c in caps.items() if n in inside))
    return min(n_r, best)


def _min_charge(snapshot: Snapshot, gang: Gang) -> dict[str, int]:
    """The least a gang counts against its queue's max per resource when admitted at its
    minimum size (:func:`~gangplan.solver.queue_order.pod_charge` per pod)."""
    demand: dict[str, int] = defaultdict(int)
    extra = gang.min_size - sum(gang.role_min(r) for r in gang.roles)
    charge = {r.name: pod_charge(snapshot, gang, r) for r in gang.roles}
    for r in gang.roles:
        for res, v in charge[r.name].items():
            demand[res] += gang.role_min(r) * v
    if extra > 0:
        spare = sorted(gang.roles, key=lambda r: sum(r.requests.values()))
        for r in spare:
            take = min(extra, r.count - gang.role_min(r))
            for res, v in charge[r.name].items():
                demand[res] += take * v
            extra -= take
    return dict(demand)


def explain_pending(
    ctx: CycleContext,
    placed: list[PodPlacement],
    pending: list[Gang],
    *,
    exact_check: ExactCheck | None = None,
    budget_s: float = 0.0,
) -> dict[str, PendingReason]:
    """A reason for every gang of ``pending`` (keys ``namespace/name``).

    ``placed``: the plan's pods (to say who took the room). ``exact_check`` is asked only
    for multi-role gangs the bounds call fitting, within ``budget_s`` seconds in all.
    """
    s = ctx.snapshot
    out: dict[str, PendingReason] = {}
    if not pending:
        return out
    capacity = {
        True: _Capacity(ctx, ctx.state(empty=True)),
        False: _Capacity(ctx, ctx.state()),
    }
    running_use: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in s.running:
        if pod.queue is not None:
            running_use[pod.queue].update(running_charge(s, pod))
    deadline = time.monotonic() + budget_s

    def checked_fit(gang: Gang, empty: bool) -> _Fit:
        """The capacity bound, and for a multi-role gang it calls fitting, the exact check."""
        fit = _fit_alone(ctx, capacity[empty], gang, "empty" if empty else "free")
        if fit.ok and len(gang.roles) > 1 and exact_check is not None:
            left = deadline - time.monotonic()
            if left > 0 and exact_check(gang, empty, left) is False:
                where = "even on the empty cluster" if empty else "in what running pods leave"
                fit = _Fit(
                    False,
                    f"needs {_describe_gang(s, gang, gang.min_size)}; an exact check finds "
                    f"no placement {where}",
                )
        return fit

    after = _after_plan(ctx, placed)
    for gang in pending:
        queue = s.queue_by_name[gang.queue]
        demand = _min_charge(s, gang)
        reason = None
        for res, cap in sorted(queue.max.items()):
            if demand.get(res, 0) > cap:
                reason = PendingReason(
                    kind="never_fits",
                    message=f"queue {queue.name} has a max of {format_quantity(res, cap)} {res}; "
                    f"the gang needs at least {format_quantity(res, demand[res])}",
                )
                break
        if reason is None:
            fit = checked_fit(gang, empty=True)
            if not fit.ok:
                reason = PendingReason(kind="never_fits", message=fit.message)
        if reason is None:
            for res, cap in sorted(queue.max.items()):
                used = running_use[queue.name].get(res, 0)
                # only the resources it asks bind it (solver/queue_order.py)
                if demand.get(res, 0) > 0 and used + demand[res] > cap:
                    reason = PendingReason(
                        kind="blocked",
                        message=f"queue {queue.name} would exceed its max of "
                        f"{format_quantity(res, cap)} {res}: running pods use "
                        f"{format_quantity(res, used)}, the gang needs at least "
                        f"{format_quantity(res, demand.get(res, 0))}",
                    )
                    break
        if reason is None:
            fit = checked_fit(gang, empty=False)
            if not fit.ok:
                reason = PendingReason(
                    kind="blocked", message=fit.message + " (running pods hold the rest)"
                )
        if reason is None:
            reason = _lost(ctx, gang, after, capacity[False])
        out[gang.key] = reason
    return out


@dataclass
class _AfterPlan:
    """What the plan's own placements add up to (computed once per cycle)."""

    gpu_taken: int
    queue_use: dict[str, Counter[str]]
    admitted: list[Gang]
    """admitted gangs, highest priority first, then by name"""
    on_node: dict[str, set[str]]
    """node -> keys of the gangs the plan puts pods on"""


def _after_plan(ctx: CycleContext, placed: list[PodPlacement]) -> _AfterPlan:
    s = ctx.snapshot
    gangs = s.gang_by_key
    use: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in s.running:
        if pod.queue is not None:
            use[pod.queue].update(running_charge(s, pod))
    taken = 0
    keys: set[str] = set()
    on_node: dict[str, set[str]] = defaultdict(set)
    for p in placed:
        g = gangs[p.gang_key]
        role = g.role(p.role)
        use[g.queue].update(pod_charge(s, g, role))
        taken += role.requests.get(s.gpu, 0)
        keys.add(g.key)
        on_node[p.node].add(g.key)
    admitted = sorted((gangs[k] for k in keys), key=lambda g: (-g.priority, g.name))
    return _AfterPlan(taken, use, admitted, dict(on_node))


def _lost(ctx: CycleContext, gang: Gang, after: _AfterPlan, free: _Capacity) -> PendingReason:
    s = ctx.snapshot
    what = _describe_gang(s, gang, gang.min_size)
    queue = s.queue_by_name[gang.queue]
    if queue.max:
        use = after.queue_use.get(queue.name, Counter())
        demand = _min_charge(s, gang)
        for res, cap in sorted(queue.max.items()):
            if demand.get(res, 0) > 0 and use.get(res, 0) + demand[res] > cap:
                return PendingReason(
                    kind="lost",
                    message=f"needs {what}; queue {queue.name} would exceed its max of "
                    f"{format_quantity(res, cap)} {res}: gangs placed this cycle bring its use "
                    f"to {format_quantity(res, use.get(res, 0))}",
                )
    # who took the nodes that could hold its pods (room for one at the cycle's start)?
    gangs = s.gang_by_key
    usable = {n for r in gang.roles for n in free.per_node(gang, r)}
    takers = sorted(
        (gangs[k] for k in {k for n in usable for k in after.on_node.get(n, ())} - {gang.key}),
        key=lambda g: (-g.priority, g.name),
    )

    def names(gs: list[Gang]) -> str:
        return ", ".join(g.name for g in gs[:3]) + (
            f" and {len(gs) - 3} more" if len(gs) > 3 else ""
        )

    higher = [g for g in takers if g.priority > gang.priority]
    if higher:
        return PendingReason(
            kind="lost",
            message=f"needs {what}; the nodes that could hold its pods went to gangs of higher "
            f"priority than its {gang.priority}: {names(higher)}",
        )
    if takers:
        return PendingReason(
            kind="lost",
            message=f"needs {what}; the nodes that could hold its pods went to {names(takers)} "
            "(this cycle ranks priority, then fair share between queues, then GPUs placed)",
        )
    return PendingReason(
        kind="lost",
        message=f"needs {what}; it fits what running pods leave, but this plan does not place it "
        "(the placer's order, or the solver's time limit, left it out)",
    )
