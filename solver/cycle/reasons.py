"""Why a gang stays pending: the three classes of ``docs/design.md``, with the constraint
that binds, its culprit and its numbers.

``never_fits``
    not even on the empty cluster (allocatable, no running pods) within its queue's max;
``blocked``
    it would fit the empty cluster and its queue's max, but not what running pods leave,
    or not its queue's headroom (max minus running usage);
``lost``
    it fits what running pods leave, but gangs placed this cycle took the room.

Each reason names the culprit, not a count: the node-selector label no node has, the taint
no toleration matches, the role whose pod fits no node and by which resource ("role
'giant': no node has more than 8 GPUs (each pod asks 40)"), the largest domain of a required
level, the gangs that took the room. It is structured too (:class:`~gangplan.models.PendingReason`:
``family``, ``role``, ``resource``, ``needed``, ``available``, ``level``, ``domain``,
``queue``, ``label``, ``lost_to``), so a controller can act on it.

The order of the checks, per state (the empty cluster, then what running pods leave):

1. the queue's max (or headroom) against the least the gang can ask;
2. per role that must have pods, the nodes it may use at all: readiness, then the node
   selector's labels, the required node affinity, taints, GPU models, a device layout for
   joint allocation, a domain at its required level — the first filter that leaves no node
   is the culprit;
3. per such role and resource, the most any node it may use has, against one pod's ask;
4. per role, how many of its pods fit (each node's room by trial with the same device rules
   as the placers), summed per domain of a required level: every role must reach its own
   minimum in one domain, the gang its minimum size. Rooms are per role and never mixed.
   For one role this bound is exact. For several roles sharing nodes the sum is a
   relaxation: when it says "fits", an exact check (a callback, the CP-SAT model of the gang
   alone, within a budget) may say it does not.

Scale: gangs that agree on everything the checks read (shape, queue, priority, constraints;
not the name) form one class, explained once; rooms are cached per pod shape and candidate
set, the maxima per candidate set, and the gangs that took a class's nodes per shape. No
check runs per gang and per node.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gangplan.models import GPU_MILLI, Gang, PendingReason, PodPlacement, Role, Snapshot
from gangplan.models.quantity import format_quantity
from gangplan.solver.context import CycleContext
from gangplan.solver.placers.queue_order import pod_charge, running_charge
from gangplan.solver.placers.state import ClusterState
from gangplan.topology import NODE_LEVEL, Domain

__all__ = ["LOST_TO_LISTED", "ExactCheck", "class_key", "explain_pending"]

ExactCheck = Callable[[Gang, bool, float], bool | None]
"""``check(gang, empty, seconds)``: True if the gang alone fits (the empty cluster when
``empty``, else what running pods leave), False if not, None if undecided in time."""

LOST_TO_LISTED = 10
"""``lost_to`` names at most this many gangs (highest priority first, then by name)."""


# --------------------------------------------------------------------------- words


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _amount(s: Snapshot, res: str, amount: int) -> str:
    """An amount in a person's unit: ``8 GPUs``, ``0.5 GPU`` (a share, as the solve table's
    GPUs asked shows it), ``2 NICs``, ``4Gi memory``."""
    if res == s.gpu:
        if amount % GPU_MILLI == 0:
            return _plural(amount // GPU_MILLI, "GPU")
        gpus = amount / GPU_MILLI
        return f"{gpus:g} GPU{'s' if gpus > 1 else ''}"
    if res == s.nic:
        return _plural(amount // GPU_MILLI, "NIC")
    return f"{format_quantity(res, amount)} {res}"


def _describe_pod(s: Snapshot, role: Role) -> str:
    gpu = role.requests.get(s.gpu, 0)
    if gpu:
        return _amount(s, s.gpu, gpu)
    parts = [_amount(s, r, v) for r, v in sorted(role.requests.items()) if v and r != "pods"]
    return ", ".join(parts[:2]) or "no resources"


def _describe_gang(s: Snapshot, gang: Gang) -> str:
    """``3 pods (1 x 2 cpu, 4Gi memory, 2 x 40 GPUs; 80 GPUs at full size)``: its minimum,
    then its roles at full size; an elastic gang names both sizes, ``1 of 2 pods (2 x 4
    GPUs; 8 GPUs at full size)``; a gang of one pod says only its shape, ``1 pod (1 x 0.5
    GPU)``."""
    need = gang.min_size
    gpus = sum(r.requests.get(s.gpu, 0) * r.count for r in gang.roles) / GPU_MILLI
    shapes = ", ".join(f"{r.count} x {_describe_pod(s, r)}" for r in gang.roles)
    models = f" {'/'.join(gang.gpu_models)}" if gang.gpu_models else ""
    tail = (
        f"; {gpus:g}{models} GPU{'' if gpus == 1 else 's'} at full size"
        if gpus >= 1 and gang.size > 1
        else ""
    )
    size = _plural(need, "pod") if need == gang.size else f"{need} of {_plural(gang.size, 'pod')}"
    return f"{size} ({shapes}{tail})"


def _names(keys: list[str]) -> str:
    shown = ", ".join(k.removeprefix("default/") for k in keys[:3])
    return shown + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


# --------------------------------------------------------------------------- classes


def class_key(gang: Gang) -> tuple[object, ...]:
    """Everything the checks read of a gang, not its name: gangs with one key get one
    reason (computed once)."""
    roles = tuple(
        (
            r.name,
            r.count,
            r.min_member,
            tuple(sorted(r.requests.items())),
            tuple(sorted(r.node_selector.items())),
            r.node_affinity,
            r.tolerations,
            r.topology,
        )
        for r in gang.roles
    )
    return (
        gang.queue,
        gang.priority,
        gang.min_member,
        gang.topology,
        gang.joint,
        gang.gpu_models,
        roles,
    )


def _static_key(s: Snapshot, gang: Gang, role: Role) -> tuple[object, ...]:
    """What decides which nodes a role may use (as ``ClusterState.candidates``)."""
    return (
        tuple(sorted(role.node_selector.items())),
        role.node_affinity,
        role.tolerations,
        gang.gpu_models if role.requests.get(s.gpu, 0) else (),
        gang.joint != "none" and bool(role.requests.get(s.nic, 0)),
        gang.topology.required if gang.topology else None,
        role.topology.required if role.topology else None,
    )


def _shape_key(s: Snapshot, gang: Gang, role: Role) -> tuple[object, ...]:
    """What decides a role's room on each node: its candidates, its requests, the joint
    policy."""
    return (_static_key(s, gang, role), tuple(sorted(role.requests.items())), gang.joint)


@dataclass(frozen=True)
class _Why:
    """A failed check: the message and the structured fields of :class:`PendingReason`."""

    message: str
    family: str
    fields: dict[str, Any] = field(default_factory=dict)

    def reason(self, kind: str) -> PendingReason:
        data: dict[str, Any] = {"kind": kind, "message": self.message, "family": self.family}
        return PendingReason.model_validate({**data, **self.fields})


# --------------------------------------------------------------------------- where a role may go


def _label_hint(nodes: list[Any], key: str) -> str:
    values = Counter(n.labels[key] for n in nodes if key in n.labels)
    if not values:
        return f"no node has the key {key}"
    shown = ", ".join(f"{key}={v} ({c})" for v, c in values.most_common(3))
    return f"nodes have {shown}" + (" and others" if len(values) > 3 else "")


def _affinity_text(role: Role) -> str:
    def expr(e: Any) -> str:
        vals = f" {list(e.values)}" if e.values else ""
        return f"{e.key} {e.operator}{vals}"

    return " or ".join(
        " and ".join(expr(e) for e in t.match_expressions) for t in role.node_affinity
    )


def _no_candidates(s: Snapshot, ctx: CycleContext, gang: Gang, role: Role) -> _Why:
    """Why no node may take a pod of ``role``: the first filter (readiness, node selector,
    affinity, taints, GPU model, joint layout, required level) that leaves no node."""
    who = f"role {role.name!r}"
    base = {"role": role.name}
    if not s.nodes:
        return _Why("the cluster has no nodes", "no_nodes", base)
    kept = [n for n in s.nodes if n.ready and not n.unschedulable]
    if not kept:
        down = sum(1 for n in s.nodes if not n.ready)
        return _Why(
            f"none of the {_plural(len(s.nodes), 'node')} is Ready and schedulable ({down} not "
            f"Ready, {len(s.nodes) - down} cordoned)",
            "not_ready",
            base,
        )
    for key, value in sorted(role.node_selector.items()):
        having = [n for n in kept if n.labels.get(key) == value]
        if not having:
            down = sum(1 for n in s.nodes if n.labels.get(key) == value)
            held = (
                f"{_plural(down, 'node')} with it {'is' if down == 1 else 'are'} not Ready or "
                "cordoned; the schedulable ones: "
                if down
                else ""
            )
            where = "schedulable node" if down else "node"
            return _Why(
                f"{who}: no {where} has the label {key}={value} (its node selector); "
                f"{held}{_label_hint(kept, key)}",
                "selector",
                {**base, "label": f"{key}={value}"},
            )
    selected = [n for n in kept if all(n.labels.get(k) == v for k, v in role.node_selector.items())]
    if not selected:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(role.node_selector.items()))
        return _Why(
            f"{who}: no node has all the labels of its node selector ({labels})",
            "selector",
            {**base, "label": labels},
        )
    if role.node_affinity:
        selected = [n for n in selected if any(t.matches(n.labels) for t in role.node_affinity)]
        if not selected:
            return _Why(
                f"{who}: no node matches its required node affinity ({_affinity_text(role)})",
                "affinity",
                base,
            )
    blocking: Counter[str] = Counter()
    tolerated = []
    for n in selected:
        bad = [
            t
            for t in n.taints
            if t.effect != "PreferNoSchedule" and not any(x.tolerates(t) for x in role.tolerations)
        ]
        if bad:
            blocking[f"{bad[0].key}={bad[0].value}:{bad[0].effect}".replace("=:", ":")] += 1
        else:
            tolerated.append(n)
    if not tolerated:
        taint, count = blocking.most_common(1)[0]
        others = f"; {_plural(len(blocking) - 1, 'other taint')} too" if len(blocking) > 1 else ""
        return _Why(
            f"{who}: every node it selects has a taint its pods do not tolerate: {taint} "
            f"({_plural(count, 'node')}){others}",
            "taint",
            {**base, "label": taint},
        )
    gpu = role.requests.get(s.gpu, 0)
    if gpu and gang.gpu_models:
        models = [n for n in tolerated if n.gpu_model in gang.gpu_models]
        if not models:
            have = Counter(
                n.gpu_model or "no GPU model known" for n in tolerated if n.allocatable.get(s.gpu)
            )
            shown = ", ".join(f"{m} ({c})" for m, c in have.most_common(3)) or "no GPUs"
            return _Why(
                f"{who}: no node it may use has a GPU of the models it accepts "
                f"({'/'.join(gang.gpu_models)}); they have {shown}",
                "gpu_model",
                {**base, "label": "/".join(gang.gpu_models)},
            )
        tolerated = models
    if gang.joint != "none" and role.requests.get(s.nic, 0):
        laid_out = [n for n in tolerated if n.has_device_topology]
        if not laid_out:
            return _Why(
                f"{who}: joint GPU/NIC allocation ({gang.joint}) needs a declared device layout "
                f"(PCIe switches and NUMA nodes), and none of the "
                f"{_plural(len(tolerated), 'node')} it may use has one",
                "joint",
                base,
            )
        tolerated = laid_out
    for tc in (gang.topology, role.topology):
        level = tc.required if tc is not None else None
        if (
            level is not None
            and level != NODE_LEVEL
            and not any(ctx.topo.domain_of(n.name, level) is not None for n in tolerated)
        ):
            return _Why(
                f"{who}: none of the {_plural(len(tolerated), 'node')} it may use belongs "
                f"to a domain of level {level!r}, which it requires",
                "topology",
                {**base, "level": level},
            )
    return _Why(f"{who}: no node can take its pods", "selector", base)


# --------------------------------------------------------------------------- one state


class _State:
    """One cluster state (the empty cluster, or what running pods leave) and what the
    checks read of it, cached: candidates and each node's room per role shape, the most any
    candidate has per resource, per-domain sums."""

    def __init__(self, ctx: CycleContext, state: ClusterState, empty: bool):
        self.ctx = ctx
        self.s = ctx.snapshot
        self.state = state
        self.empty = empty
        self._rooms: dict[tuple[object, ...], dict[str, int]] = {}
        self._most: dict[tuple[object, ...], dict[str, int]] = {}
        self._totals: dict[tuple[object, ...], int] = {}
        self._sums: dict[tuple[object, ...], dict[Domain | None, int]] = {}
        self._kinds: dict[str, object] = {
            n.name: (tuple(sorted(n.allocatable.items())), n.device_layout)
            for n in self.s.nodes
            if empty and n.devices is None
        }
        """node -> its kind, where nodes of one kind offer the same room when empty (a node
        with its own device list has none: it is tried alone)"""

    def candidates(self, gang: Gang, role: Role) -> tuple[str, ...]:
        return self.state.candidates(gang, role)

    def rooms(self, gang: Gang, role: Role) -> dict[str, int]:
        """Node -> pods of ``role`` that fit it (only nodes with room), up to its count. On
        the empty cluster, nodes of one kind (allocatable and device layout) are tried once."""
        key = (*_shape_key(self.s, gang, role), role.count)
        if key not in self._rooms:
            cap = self.state.pod_capacity
            seen: dict[object, int] = {}
            out: dict[str, int] = {}
            for n in self.candidates(gang, role):
                kind = self._kinds.get(n) if self.empty else None
                if kind is None:
                    c = cap(gang, role, n, role.count)
                elif kind in seen:
                    c = seen[kind]
                else:
                    c = seen[kind] = cap(gang, role, n, role.count)
                if c > 0:
                    out[n] = c
            self._rooms[key] = out
        return self._rooms[key]

    def most(self, gang: Gang, role: Role, res: str) -> int:
        """The most of ``res`` one node ``role`` may use offers one pod: whole free GPUs
        (x 1000), or the largest free share of one GPU for a share; free NICs; else the free
        amount. One pass over the candidates gives every resource the role asks."""
        share = 0 < role.requests.get(self.s.gpu, 0) < GPU_MILLI
        asked = tuple(sorted(role.requests))
        key = (_static_key(self.s, gang, role), asked, share)
        if key not in self._most:
            gpu, nic = self.s.gpu, self.s.nic
            best = dict.fromkeys(asked, 0)
            others = [r for r in asked if r not in (gpu, nic)]
            for n in self.candidates(gang, role):
                st = self.state.nodes[n]
                if gpu in best:
                    milli = st.gpu_milli.values()
                    v = (
                        max(milli, default=0)
                        if share
                        else GPU_MILLI * sum(1 for m in milli if m == GPU_MILLI)
                    )
                    best[gpu] = max(best[gpu], v)
                if nic in best:
                    best[nic] = max(best[nic], GPU_MILLI * len(st.nics))
                free = st.resources
                for r in others:
                    v = free.get(r, 0)
                    if v > best[r]:
                        best[r] = v
            self._most[key] = best
        return self._most[key][res]

    def total(self, gang: Gang, role: Role, res: str) -> int:
        """The free amount of ``res`` over the nodes ``role`` may use (GPUs and NICs in
        milli-units: every GPU's free milli-GPU, 1000 per free NIC)."""
        key = (_static_key(self.s, gang, role), res)
        if key not in self._totals:
            total = 0
            for n in self.candidates(gang, role):
                st = self.state.nodes[n]
                if res == self.s.gpu:
                    total += sum(st.gpu_milli.values())
                elif res == self.s.nic:
                    total += GPU_MILLI * len(st.nics)
                else:
                    total += st.resources.get(res, 0)
            self._totals[key] = total
        return self._totals[key]

    def sums(self, gang: Gang, role: Role, level: str | None) -> dict[Domain | None, int]:
        """Pods of ``role`` that fit each domain of ``level`` (None: the whole cluster, key
        None), each domain's sum capped by the role's own required level."""
        key = (*_shape_key(self.s, gang, role), role.count, level)
        if key in self._sums:
            return self._sums[key]
        rooms = self.rooms(gang, role)
        topo = self.ctx.topo
        own = role.topology.required if role.topology else None
        out: dict[Domain | None, int] = defaultdict(int)
        inner: dict[tuple[Domain | None, object], int] = defaultdict(int)
        for n, c in rooms.items():
            d = (
                None
                if level is None
                else (Domain(NODE_LEVEL, (n,)) if level == NODE_LEVEL else topo.domain_of(n, level))
            )
            if level is not None and d is None:
                continue
            if own is None:
                out[d] += c
            else:
                sub = n if own == NODE_LEVEL else topo.domain_of(n, own)
                inner[(d, sub)] += c
        for (d, _sub), c in inner.items():
            out[d] = max(out[d], c)
        self._sums[key] = {d: min(v, role.count) for d, v in out.items()}
        return self._sums[key]


# --------------------------------------------------------------------------- the checks


def _must_have(gang: Gang) -> list[Role]:
    """The roles the gang cannot be admitted without: a minimum of their own, or the others
    too few for the gang's minimum size."""
    total = gang.size
    return [r for r in gang.roles if gang.role_min(r) > 0 or total - r.count < gang.min_size]


def _min_charge(snapshot: Snapshot, gang: Gang) -> dict[str, int]:
    """The least a gang counts against its queue's max per resource when admitted at its
    minimum size (:func:`~gangplan.solver.placers.queue_order.pod_charge` per pod)."""
    demand: dict[str, int] = defaultdict(int)
    extra = gang.min_size - sum(gang.role_min(r) for r in gang.roles)
    charge = {r.name: pod_charge(snapshot, gang, r) for r in gang.roles}
    for r in gang.roles:
        for res, v in charge[r.name].items():
            demand[res] += gang.role_min(r) * v
    if extra > 0:
        for r in sorted(gang.roles, key=lambda r: sum(r.requests.values())):
            take = min(extra, r.count - gang.role_min(r))
            for res, v in charge[r.name].items():
                demand[res] += take * v
            extra -= take
    return dict(demand)


def _scarce(st: _State, gang: Gang, roles: list[Role]) -> _Why | None:
    """A resource one pod of a role asks more of than any node it may use offers."""
    s = st.s
    for role in roles:
        everywhere = len(st.candidates(gang, role)) == len(s.nodes)
        for res, ask in sorted(role.requests.items()):
            if ask <= 0 or res == "pods":
                continue
            most = st.most(gang, role, res)
            if ask <= most:
                continue
            nodes = "no node" if everywhere else "no node it may use"
            if st.empty:
                ask_text = _amount(s, res, ask).split(" ")[0]  # the unit was just said
                text = f"{nodes} has more than {_amount(s, res, most)} (each pod asks {ask_text})"
            else:
                text = (
                    f"{nodes} has {_amount(s, res, ask)} free for a pod (the most any has free: "
                    f"{_amount(s, res, most)}; running pods hold the rest)"
                )
            return _Why(
                f"role {role.name!r}: {text}",
                "resource",
                {"role": role.name, "resource": res, "needed": ask, "available": most},
            )
    return None


def _capacity(st: _State, gang: Gang) -> _Why | None:
    """Do the roles' pods fit, each role its own minimum and the gang its minimum size, in
    one domain of its required level (or the cluster)? None if so (by the bound). Only the
    domains where some role has room are looked at."""
    s = st.s
    level = gang.topology.required if gang.topology else None
    sums = {r.name: st.sums(gang, r, level) for r in gang.roles}
    need = gang.min_size
    domains: set[Domain | None] = {None} if level is None else set()
    for per_domain in sums.values():
        domains.update(per_domain)
    best: tuple[int, Domain | None, dict[str, int]] = (-1, None, {})
    for d in sorted(domains, key=lambda d: (d is None, d.path if d else ())):
        got = {r.name: sums[r.name].get(d, 0) for r in gang.roles}
        if all(got[r.name] >= gang.role_min(r) for r in gang.roles) and sum(got.values()) >= need:
            return None
        if sum(got.values()) > best[0]:
            best = (sum(got.values()), d, got)
    total, domain, got = best
    if level is not None:
        return _topology(st, gang, level, domain, got)
    short = next((r for r in gang.roles if got.get(r.name, 0) < gang.role_min(r)), None)
    if short is None and len(gang.roles) == 1:  # an elastic gang of one role
        return _short_role(st, gang, gang.roles[0], got.get(gang.roles[0].name, 0), need)
    if short is None:  # an elastic gang: enough of each role, too few in all
        parts = ", ".join(f"{got.get(r.name, 0)} of role {r.name!r}" for r in gang.roles)
        where = "on the empty cluster" if st.empty else "in what running pods leave"
        return _Why(
            f"needs at least {_describe_gang(s, gang)}; {where} there is room for {parts}",
            "capacity",
            {"needed": need, "available": max(total, 0)},
        )
    return _short_role(st, gang, short, got.get(short.name, 0), gang.role_min(short))


def _topology(
    st: _State, gang: Gang, level: str, domain: Domain | None, got: dict[str, int]
) -> _Why:
    unit = "node" if level == NODE_LEVEL else level
    even = " even with no pods running" if st.empty else ""
    need = f"needs {_describe_gang(st.s, gang)} inside one {unit}"
    fields: dict[str, Any] = {"level": level, "needed": gang.min_size, "available": 0}
    if domain is None:
        return _Why(f"{need}; no {unit} has room for any of them{even}", "topology", fields)
    held = sum(got.values())
    if len(gang.roles) == 1:
        holds = f"holds {held} of them"
    else:
        holds = "holds " + ", ".join(
            f"role {r.name!r}: {got.get(r.name, 0)} of {gang.role_min(r)}" for r in gang.roles
        )
    fields.update(domain=domain.name, available=held)
    rest = even or " (running pods hold the rest)"
    return _Why(
        f"{need}; the largest free {unit} ({domain.name}) {holds}{rest}", "topology", fields
    )


def _short_role(st: _State, gang: Gang, role: Role, room: int, need: int) -> _Why:
    """A role with room for fewer than the ``need`` pods it must have: fragmentation
    (enough whole GPUs in all, but not together on enough nodes) or capacity (the resource
    that runs out)."""
    s = st.s
    pod = _describe_pod(s, role)
    where = "the empty nodes" if st.empty else "the free nodes"
    base = {"role": role.name, "needed": need, "available": room}
    gpu = role.requests.get(s.gpu, 0)
    cands = st.candidates(gang, role)
    if gpu >= GPU_MILLI:
        free = sum(
            sum(1 for m in st.state.nodes[n].gpu_milli.values() if m == GPU_MILLI) for n in cands
        )
        if free * GPU_MILLI >= need * gpu:
            holders = len(st.rooms(gang, role))
            return _Why(
                f"role {role.name!r}: {where} it may use have {free} whole GPUs, but split: "
                f"only {_plural(holders, 'node')} can hold a pod of {pod}, room for {room} of the "
                f"{need} it needs (per-node fragmentation)",
                "fragmentation",
                {**base, "resource": s.gpu},
            )
    res = _runs_out(st, gang, role)
    return _Why(
        f"role {role.name!r} needs {_plural(need, 'pod')} of {pod}; {where} it may use have "
        f"room for {room} ({res} runs out first)",
        "capacity",
        {**base, "resource": res},
    )


def _runs_out(st: _State, gang: Gang, role: Role) -> str:
    """The resource whose free total over the nodes the role may use, divided by one pod's
    ask, is the smallest."""
    best: tuple[float, str] = (float("inf"), "")
    for res, ask in sorted(role.requests.items()):
        if ask > 0 and res != "pods":
            best = min(best, (st.total(gang, role, res) / ask, res))
    return best[1] or "room"


# --------------------------------------------------------------------------- the cycle


@dataclass
class _AfterPlan:
    """What the plan's own placements add up to (computed once per cycle)."""

    queue_use: dict[str, Counter[str]]
    on_node: dict[str, set[str]]
    """node -> keys of the gangs the plan puts pods on"""
    rank: dict[str, int]
    """gang key -> its place among the admitted gangs, highest priority first, then name"""


def _after_plan(s: Snapshot, placed: list[PodPlacement]) -> _AfterPlan:
    gangs = s.gang_by_key
    use: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in s.running:
        if pod.queue is not None:
            use[pod.queue].update(running_charge(s, pod))
    on_node: dict[str, set[str]] = defaultdict(set)
    per_role: Counter[tuple[str, str]] = Counter()
    for p in placed:
        key = p.gang_key
        on_node[p.node].add(key)
        per_role[(key, p.role)] += 1
    for (key, role), n in per_role.items():
        g = gangs[key]
        q = use[g.queue]
        for res, v in pod_charge(s, g, g.role(role)).items():
            q[res] += v * n
    keys = {key for key, _ in per_role}
    order = sorted(keys, key=lambda k: (-gangs[k].priority, gangs[k].name, k))
    return _AfterPlan(use, dict(on_node), {k: i for i, k in enumerate(order)})


class _Explainer:
    def __init__(
        self,
        ctx: CycleContext,
        placed: list[PodPlacement],
        exact_check: ExactCheck | None,
        budget_s: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.ctx = ctx
        self.s = ctx.snapshot
        self.states = {
            True: _State(ctx, ctx.state(empty=True), True),
            False: _State(ctx, ctx.state(), False),
        }
        self.running_use: dict[str, Counter[str]] = defaultdict(Counter)
        for pod in self.s.running:
            if pod.queue is not None:
                self.running_use[pod.queue].update(running_charge(self.s, pod))
        self.after = _after_plan(self.s, placed)
        self.exact_check = exact_check
        self.clock = clock
        self.deadline = clock() + budget_s
        self._static: dict[tuple[object, ...], _Why] = {}
        self._bounds: dict[tuple[object, ...], _Why | None] = {}
        self._takers: dict[tuple[object, ...], list[str]] = {}

    def explain(self, gang: Gang) -> PendingReason:
        s = self.s
        queue = s.queue_by_name[gang.queue]
        demand = _min_charge(s, gang)
        for res, cap in sorted(queue.max.items()):
            if demand.get(res, 0) > cap:
                return _Why(
                    f"queue {queue.name} has a max of {_amount(s, res, cap)}; the gang needs at "
                    f"least {_amount(s, res, demand[res])}",
                    "queue_max",
                    {"queue": queue.name, "resource": res, "needed": demand[res], "available": cap},
                ).reason("never_fits")
        why = self._fit(gang, empty=True)
        if why is not None:
            return why.reason("never_fits")
        for res, cap in sorted(queue.max.items()):
            used = self.running_use[queue.name].get(res, 0)
            # only the resources it asks bind it (solver/placers/queue_order.py)
            if demand.get(res, 0) > 0 and used + demand[res] > cap:
                return _Why(
                    f"queue {queue.name} would exceed its max of {_amount(s, res, cap)}: running "
                    f"pods use {_amount(s, res, used)}, the gang needs at least "
                    f"{_amount(s, res, demand.get(res, 0))}",
                    "queue_max",
                    {
                        "queue": queue.name,
                        "resource": res,
                        "needed": demand.get(res, 0),
                        "available": max(0, cap - used),
                    },
                ).reason("blocked")
        why = self._fit(gang, empty=False)
        if why is not None:
            return why.reason("blocked")
        return self._lost(gang, demand)

    def _fit(self, gang: Gang, empty: bool) -> _Why | None:
        """The first check the gang fails in this state, or None if it fits alone."""
        key = (class_key(gang)[2:], empty)  # the bounds read neither queue nor priority
        if key not in self._bounds:
            self._bounds[key] = self._bound(gang, empty)
        why = self._bounds[key]
        if why is None and len(gang.roles) > 1 and self.exact_check is not None:
            left = self.deadline - self.clock()
            if left > 0 and self.exact_check(gang, empty, left) is False:
                where = "even on the empty cluster" if empty else "in what running pods leave"
                why = _Why(
                    f"needs {_describe_gang(self.s, gang)}; each role fits on its own, but an "
                    f"exact check finds no placement of them together {where}",
                    "exact_check",
                    {"needed": gang.min_size},
                )
        return why

    def _bound(self, gang: Gang, empty: bool) -> _Why | None:
        """The first check of the bounds the gang fails in this state (None: it fits)."""
        st = self.states[empty]
        must = _must_have(gang)
        for role in must:
            if not st.candidates(gang, role):
                key = (*_static_key(self.s, gang, role), role.name)
                if key not in self._static:
                    self._static[key] = _no_candidates(self.s, self.ctx, gang, role)
                return self._static[key]
        return _scarce(st, gang, must) or _capacity(st, gang)

    def _lost(self, gang: Gang, demand: dict[str, int]) -> PendingReason:
        s = self.s
        what = _describe_gang(s, gang)
        queue = s.queue_by_name[gang.queue]
        use = self.after.queue_use.get(queue.name, Counter())
        for res, cap in sorted(queue.max.items()):
            if demand.get(res, 0) > 0 and use.get(res, 0) + demand[res] > cap:
                return _Why(
                    f"needs {what}; queue {queue.name} would exceed its max of "
                    f"{_amount(s, res, cap)}: gangs placed this cycle bring its use to "
                    f"{_amount(s, res, use.get(res, 0))}",
                    "queue_max",
                    {
                        "queue": queue.name,
                        "resource": res,
                        "needed": demand.get(res, 0),
                        "available": max(0, cap - use.get(res, 0)),
                    },
                ).reason("lost")
        takers = self.takers(gang)
        gangs = s.gang_by_key
        higher = [k for k in takers if gangs[k].priority > gang.priority]
        fields: dict[str, Any] = {"lost_to": tuple((higher or takers)[:LOST_TO_LISTED])}
        if higher:
            message = (
                f"needs {what}; the nodes that could hold its pods went to gangs of higher "
                f"priority than its {gang.priority}: {_names(higher)}"
            )
        elif takers:
            message = (
                f"needs {what}; the nodes that could hold its pods went to {_names(takers)} "
                "(this cycle ranks priority, then fair share between queues, then GPUs placed)"
            )
        else:
            message = (
                f"needs {what}; it fits what running pods leave, but this plan does not place "
                "it (the placer's order, or the solver's time limit, left it out)"
            )
        return _Why(message, "lost", fields).reason("lost")

    def takers(self, gang: Gang) -> list[str]:
        """The admitted gangs on nodes where a pod of one of its roles fit at the cycle's
        start, highest priority first (cached per set of role shapes)."""
        st = self.states[False]
        key = tuple((*_shape_key(self.s, gang, r), r.count) for r in gang.roles)
        if key not in self._takers:
            on_node = self.after.on_node
            found: set[str] = set()
            for r in gang.roles:
                for n in st.rooms(gang, r):
                    found.update(on_node.get(n, ()))
            rank = self.after.rank
            self._takers[key] = sorted(found, key=rank.__getitem__)
        return self._takers[key]


def explain_pending(
    ctx: CycleContext,
    placed: list[PodPlacement],
    pending: list[Gang],
    *,
    exact_check: ExactCheck | None = None,
    budget_s: float = 0.0,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, PendingReason]:
    """A reason for every gang of ``pending`` (keys ``namespace/name``), one computed per
    class of gangs (:func:`class_key`).

    ``placed``: the plan's pods (to say who took the room). ``exact_check`` is asked only
    for multi-role gangs the bounds call fitting, within ``budget_s`` seconds in all, read
    on ``clock`` (wall seconds; in deterministic mode the deterministic seconds the checks
    took, so the reasons repeat from run to run).
    """
    if not pending:
        return {}
    explainer = _Explainer(ctx, placed, exact_check, budget_s, clock)
    memo: dict[tuple[object, ...], PendingReason] = {}
    out: dict[str, PendingReason] = {}
    for gang in pending:
        key = class_key(gang)
        if key not in memo:
            memo[key] = explainer.explain(gang)
        out[gang.key] = memo[key]
    return out
