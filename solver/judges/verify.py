"""The independent plan verifier: every hard constraint of ``docs/design.md``, checked on
any plan.

It imports only :mod:`gangplan.models` and :mod:`gangplan.topology` — no OR-Tools, no placer,
no model builder — so a bug in the solver cannot hide itself here. One ``check_*`` per
rule; :func:`verify` runs them all and returns every violation found (empty: the plan is
valid).

Free amounts are the snapshot's: allocatable minus running pods, clamped at zero (an
overfull node is the snapshot's warning, not the plan's violation); the running pods a plan
evicts hold nothing (:meth:`Snapshot.free_after <gangplan.models.Snapshot.free_after>`).
The checks of evictions themselves live in :mod:`gangplan.solver.judges.verify_evictions`, those of
held capacity in :mod:`gangplan.solver.judges.verify_reservations`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gangplan.models import (
    GPU_MILLI,
    Gang,
    NodeFree,
    Plan,
    PodPlacement,
    Role,
    Snapshot,
    format_quantity,
)
from gangplan.solver.judges.verify_evictions import EVICTION_CHECKS
from gangplan.solver.judges.verify_reservations import RESERVATION_CHECKS
from gangplan.topology import NODE_LEVEL, Topology, build_topology

__all__ = [
    "CHECKS",
    "Violation",
    "check_capacity",
    "check_node_readiness",
    "check_outcomes",
    "check_selectors",
    "verify",
    "wave_context",
]


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``rule`` (e.g. ``capacity``), and a message naming the objects."""

    rule: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


@dataclass
class _Ctx:
    snapshot: Snapshot
    plan: Plan
    _topo: Topology | None
    pods: list[tuple[PodPlacement, Gang, Role]]  # pods whose gang and role exist
    _gone: dict[str, set[tuple[str, str]]] | None = None

    @property
    def topo(self) -> Topology:
        """The snapshot's topology (built when a check first asks)."""
        if self._topo is None:
            self._topo = build_topology(self.snapshot)
        return self._topo

    def free(self, node: str) -> NodeFree:
        """What the running pods the plan keeps leave on ``node``."""
        if self._gone is None:
            evicted = self.plan.evicted
            self._gone = defaultdict(set)
            for pod in self.snapshot.running:
                if (pod.namespace, pod.name) in evicted:
                    self._gone[pod.node].add((pod.namespace, pod.name))
        return self.snapshot.free_after(node, self._gone.get(node, set()))


def verify(snapshot: Snapshot, plan: Plan, *, topology: Topology | None = None) -> list[Violation]:
    """Check ``plan`` against every hard constraint; returns all violations (empty if valid)."""
    topo = topology or build_topology(snapshot)
    gangs = snapshot.gang_by_key
    pods: list[tuple[PodPlacement, Gang, Role]] = []
    for p in plan.pods:
        gang = gangs.get(p.gang_key)
        if gang is None:
            continue
        role = next((r for r in gang.roles if r.name == p.role), None)
        if role is not None:
            pods.append((p, gang, role))
    ctx = _Ctx(snapshot, plan, topo, pods)
    out: list[Violation] = []
    for check in CHECKS:
        out.extend(check(ctx))
    return out


def wave_context(snapshot: Snapshot, pods: list[tuple[PodPlacement, Gang, Role]]) -> _Ctx:
    """A context for checking placements that are no plan's pods, each with the gang and
    role it is judged as: what the move verifier runs :func:`check_node_readiness`,
    :func:`check_selectors` and :func:`check_capacity` on, for one wave's placements on the
    state the earlier waves left (:mod:`gangplan.solver.judges.verify_moves`)."""
    return _Ctx(snapshot, Plan(), None, list(pods))


def check_references(ctx: _Ctx) -> Iterator[Violation]:
    """Pods name existing gangs, roles and nodes; each pod is one of its role's pods (the
    role's ``pod_names``, else ``{gang}-{role}-{i}`` for i below its count), placed once;
    each outcome agrees with its pods (in all and per role it names); every gang has exactly
    one outcome."""
    s, plan = ctx.snapshot, ctx.plan
    gangs = s.gang_by_key
    pod_names: dict[tuple[str, str], dict[str, None]] = {}  # ordered sets, per role
    for p in plan.pods:
        gang = gangs.get(p.gang_key)
        if gang is None:
            yield Violation(
                "references", f"pod {p.pod!r} names unknown gang {p.namespace}/{p.gang}"
            )
        elif all(r.name != p.role for r in gang.roles):
            yield Violation(
                "references", f"pod {p.pod!r} names unknown role {p.role!r} of {gang.key}"
            )
        else:
            role = gang.role(p.role)
            names = pod_names.get((gang.key, role.name))
            if names is None:
                names = {role.pod_name(gang.name, i): None for i in range(role.count)}
                pod_names[(gang.key, role.name)] = names
            if p.pod not in names:
                first = [repr(n) for n in list(names)[:8]]
                shown = ", ".join(first) + (", ..." if len(names) > 8 else "")
                yield Violation(
                    "references",
                    f"pod {p.pod!r} is not a pod of {gang.key} role {role.name!r} (its pods: "
                    f"{shown})",
                )
        if p.node not in s.node_by_name:
            yield Violation("references", f"pod {p.pod!r} is placed on unknown node {p.node!r}")
    for (ns, name), n in Counter((p.namespace, p.pod) for p in plan.pods).items():
        if n > 1:
            yield Violation("references", f"pod {ns}/{name} is placed {n} times")
    outcomes = Counter(o.key for o in plan.gangs)
    for key, n in outcomes.items():
        if key not in gangs:
            yield Violation("references", f"outcome for unknown gang {key}")
        elif n > 1:
            yield Violation("references", f"gang {key} has {n} outcomes")
    for key in gangs:
        if key not in outcomes:
            yield Violation("references", f"gang {key} has no outcome in the plan")
    placed = Counter(p.gang_key for p in plan.pods)
    per_role = Counter((p.gang_key, p.role) for p in plan.pods)
    for o in plan.gangs:
        if o.placed != placed.get(o.key, 0):
            yield Violation(
                "references",
                f"gang {o.key}: outcome says {o.placed} pods placed, the plan has "
                f"{placed.get(o.key, 0)}",
            )
        if o.admitted != (o.placed > 0):
            yield Violation(
                "references", f"gang {o.key}: admitted={o.admitted} with {o.placed} pods"
            )
        if not o.admitted and o.reason is None:
            yield Violation("references", f"gang {o.key} is pending without a reason")
        if o.admitted and o.reason is not None:
            yield Violation("references", f"gang {o.key} is admitted but carries a pending reason")
        gang = gangs.get(o.key)
        for role_name, n in sorted(o.roles.items()):
            if gang is None:
                break
            if all(r.name != role_name for r in gang.roles):
                yield Violation(
                    "references", f"gang {o.key}: outcome names unknown role {role_name!r}"
                )
            elif n != per_role.get((o.key, role_name), 0):
                yield Violation(
                    "references",
                    f"gang {o.key}: outcome says role {role_name} has {n} pods, "
                    f"the plan has {per_role.get((o.key, role_name), 0)}",
                )


def check_gang_minimums(ctx: _Ctx) -> Iterator[Violation]:
    """Gang atomicity: 0 pods, or between the gang's and each role's min_member and the full
    size."""
    per_role: dict[str, Counter[str]] = defaultdict(Counter)
    for _p, gang, role in ctx.pods:
        per_role[gang.key][role.name] += 1
    for key, counts in per_role.items():
        gang = ctx.snapshot.gang_by_key[key]
        total = sum(counts.values())
        if total < gang.min_size:
            yield Violation(
                "gang",
                f"gang {key}: {total} pods placed, below its minimum {gang.min_size} (all or "
                "nothing)",
            )
        for role in gang.roles:
            n = counts.get(role.name, 0)
            if n > role.count:
                yield Violation(
                    "gang", f"gang {key} role {role.name}: {n} pods, more than its {role.count}"
                )
            if n < gang.role_min(role):
                yield Violation(
                    "gang",
                    f"gang {key} role {role.name}: {n} pods, below its min_member "
                    f"{gang.role_min(role)}",
                )


def check_node_readiness(ctx: _Ctx) -> Iterator[Violation]:
    """No pod on a node that is not Ready, is unschedulable, or has an untolerated
    NoSchedule / NoExecute taint."""
    for p, _gang, role in ctx.pods:
        node = ctx.snapshot.node_by_name.get(p.node)
        if node is None:
            continue
        if not node.ready:
            yield Violation("readiness", f"pod {p.pod!r} on node {node.name!r}, which is not Ready")
        if node.unschedulable:
            yield Violation(
                "readiness", f"pod {p.pod!r} on node {node.name!r}, which is unschedulable"
            )
        for taint in node.taints:
            if taint.effect == "PreferNoSchedule":
                continue
            if not any(t.tolerates(taint) for t in role.tolerations):
                yield Violation(
                    "readiness",
                    f"pod {p.pod!r} on node {node.name!r} does not tolerate taint "
                    f"{taint.key}={taint.value}:{taint.effect}",
                )


def check_selectors(ctx: _Ctx) -> Iterator[Violation]:
    """Node selector, required node affinity and accepted GPU models hold."""
    for p, gang, role in ctx.pods:
        node = ctx.snapshot.node_by_name.get(p.node)
        if node is None:
            continue
        for k, v in role.node_selector.items():
            if node.labels.get(k) != v:
                yield Violation(
                    "selector",
                    f"pod {p.pod!r} needs label {k}={v}; node {node.name!r} has "
                    f"{node.labels.get(k)!r}",
                )
        if role.node_affinity and not any(t.matches(node.labels) for t in role.node_affinity):
            yield Violation(
                "affinity", f"pod {p.pod!r}: node {node.name!r} matches no required affinity term"
            )
        if (
            gang.gpu_models
            and role.requests.get(ctx.snapshot.gpu, 0) > 0
            and node.gpu_model not in gang.gpu_models
        ):
            yield Violation(
                "gpu_model",
                f"pod {p.pod!r} accepts GPU models {list(gang.gpu_models)}; node "
                f"{node.name!r} has {node.gpu_model!r}",
            )


def check_capacity(ctx: _Ctx) -> Iterator[Violation]:
    """Per node and resource, placed requests fit the free amount; per GPU device, the
    milli-GPU given fit its free milli; whole GPUs and NICs go to one pod each; each pod gets
    as many devices as it asks, and only devices of its node."""
    s = ctx.snapshot
    used: dict[str, Counter[str]] = defaultdict(Counter)
    gpu_given: dict[tuple[str, str], int] = defaultdict(int)
    whole_owner: dict[tuple[str, str], str] = {}
    nic_owner: dict[tuple[str, str], str] = {}
    for p, _gang, role in ctx.pods:
        node = s.node_by_name.get(p.node)
        if node is None:
            continue
        used[p.node].update(role.requests)
        layout = s.layout_of(node)
        want_gpu = role.requests.get(s.gpu, 0)
        want_nic = role.requests.get(s.nic, 0) // GPU_MILLI
        if want_gpu == 0 and p.gpus:
            yield Violation("devices", f"pod {p.pod!r} asks no GPU but is given {list(p.gpus)}")
        elif want_gpu and want_gpu < GPU_MILLI:
            if len(p.gpus) != 1 or p.gpu_milli != want_gpu:
                yield Violation(
                    "devices",
                    f"pod {p.pod!r} asks a {want_gpu} milli-GPU share: it needs one GPU with "
                    f"gpu_milli={want_gpu}, got gpus={list(p.gpus)} gpu_milli={p.gpu_milli}",
                )
        elif want_gpu and len(p.gpus) != want_gpu // GPU_MILLI:
            yield Violation(
                "devices",
                f"pod {p.pod!r} asks {want_gpu // GPU_MILLI} GPUs, is given {len(p.gpus)}",
            )
        if want_gpu >= GPU_MILLI and p.gpu_milli is not None:
            yield Violation(
                "devices",
                f"pod {p.pod!r} asks whole GPUs but carries a share (gpu_milli={p.gpu_milli})",
            )
        if len(p.nics) != want_nic:
            yield Violation(
                "devices", f"pod {p.pod!r} asks {want_nic} NICs, is given {len(p.nics)}"
            )
        share = 0 < want_gpu < GPU_MILLI
        for dev in p.gpus:
            if dev not in layout.gpu_ids:
                yield Violation(
                    "devices", f"pod {p.pod!r}: GPU {dev!r} does not exist on node {node.name!r}"
                )
                continue
            gpu_given[(node.name, dev)] += want_gpu if share else GPU_MILLI
            if not share:
                prev = whole_owner.get((node.name, dev))
                if prev is not None:
                    yield Violation(
                        "devices", f"GPU {dev!r} on {node.name!r} given to {prev!r} and {p.pod!r}"
                    )
                whole_owner[(node.name, dev)] = p.pod
        free = ctx.free(node.name)
        for dev in p.nics:
            if dev not in layout.nic_ids:
                yield Violation(
                    "devices", f"pod {p.pod!r}: NIC {dev!r} does not exist on node {node.name!r}"
                )
                continue
            if dev not in free.nics:
                yield Violation(
                    "devices",
                    f"pod {p.pod!r}: NIC {dev!r} on {node.name!r} is held by a running pod",
                )
            prev = nic_owner.get((node.name, dev))
            if prev is not None:
                yield Violation(
                    "devices", f"NIC {dev!r} on {node.name!r} given to {prev!r} and {p.pod!r}"
                )
            nic_owner[(node.name, dev)] = p.pod
    for (node_name, dev), given in gpu_given.items():
        have = ctx.free(node_name).gpu_milli.get(dev, 0)
        if given > have:
            yield Violation(
                "capacity",
                f"GPU {dev!r} on {node_name!r}: {given} milli-GPU given, {have} free",
            )
    for node_name, req in used.items():
        left = ctx.free(node_name).resources
        for res, amount in sorted(req.items()):
            if amount > left.get(res, 0):
                yield Violation(
                    "capacity",
                    f"node {node_name!r}: {res} placed {format_quantity(res, amount)} > free "
                    f"{format_quantity(res, left.get(res, 0))}",
                )


def check_required_topology(ctx: _Ctx) -> Iterator[Violation]:
    """A gang's (and a role's) required level: all its pods inside one domain of that level."""
    groups: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for p, gang, role in ctx.pods:
        groups[(gang.key, None)].append(p.node)
        groups[(gang.key, role.name)].append(p.node)
    for (key, role_name), nodes in groups.items():
        gang = ctx.snapshot.gang_by_key[key]
        tc = gang.topology if role_name is None else gang.role(role_name).topology
        level = tc.required if tc else None
        if level is None:
            continue
        doms = set()
        for n in nodes:
            if n not in ctx.snapshot.node_by_name:
                continue
            d = n if level == NODE_LEVEL else ctx.topo.domain_of(n, level)
            if d is None:
                yield Violation(
                    "topology",
                    f"{key}: node {n!r} joins no {level} domain, but {level} is required",
                )
            doms.add(d)
        doms.discard(None)
        if len(doms) > 1:
            what = key if role_name is None else f"{key} role {role_name}"
            yield Violation("topology", f"{what} requires one {level} but spans {len(doms)}")


def check_joint_allocation(ctx: _Ctx) -> Iterator[Violation]:
    """Joint allocation: a pod's NICs come only from the PCIe switches (``pcie``) or NUMA
    nodes (``numa``) holding its GPUs; asking as many NICs as GPUs, each group gives exactly
    as many NICs as the pod has GPUs there (Koordinator SamePCIe / SameNUMA)."""
    s = ctx.snapshot
    for p, gang, _role in ctx.pods:
        if gang.joint == "none" or not p.nics:
            continue
        node = s.node_by_name.get(p.node)
        if node is None:
            continue
        if not node.has_device_topology:
            yield Violation(
                "joint", f"pod {p.pod!r}: node {node.name!r} declares no PCIe/NUMA layout"
            )
            continue
        layout = s.layout_of(node)
        group_of_gpu: dict[str, str] = {}
        group_of_nic: dict[str, str] = {}
        for numa, sw in layout.switches():
            g = sw.name if gang.joint == "pcie" else numa.name
            for d in sw.gpus:
                group_of_gpu[d] = g
            for d in sw.nics:
                group_of_nic[d] = g
        gpus = Counter(group_of_gpu.get(d) for d in p.gpus)
        nics = Counter(group_of_nic.get(d) for d in p.nics)
        for grp in nics:
            if grp not in gpus:
                yield Violation(
                    "joint",
                    f"pod {p.pod!r}: NIC from {gang.joint} group {grp!r} holding none of its GPUs",
                )
        if len(p.nics) == len(p.gpus):
            for grp, n in gpus.items():
                if nics.get(grp, 0) != n:
                    yield Violation(
                        "joint",
                        f"pod {p.pod!r}: {gang.joint} group {grp!r} gives {n} GPUs but "
                        f"{nics.get(grp, 0)} NICs",
                    )


def check_queue_max(ctx: _Ctx) -> Iterator[Violation]:
    """A queue's running usage (less what the plan evicts) plus what the plan admits stays
    within its max, in every resource that a pod the plan admits for it asks (Volcano's
    capacity plugin and Kueue check quota only in the resources requested: a GPU-only gang
    is not held to a CPU max the queue is already over). A max on a model-specific GPU
    resource (``nvidia.com/a100`` mapped to ``A100`` by ``resources.gpu_model_resources``)
    counts the GPUs of running pods on nodes of that model and of admitted pods whose gang
    accepts only that model."""
    s = ctx.snapshot
    capped = {q.name for q in s.queues if q.max}
    if not capped:
        return
    by_model: dict[str, list[str]] = defaultdict(list)
    for res, model in s.resources.gpu_model_resources.items():
        by_model[model].append(res)

    def add(
        counter: Counter[str], requests: dict[str, int], model: str | None, n: int = 1
    ) -> set[str]:
        for r, v in requests.items():
            counter[r] += n * v
        asked = {r for r, v in requests.items() if v > 0}
        gpu = requests.get(s.gpu, 0)
        if gpu > 0 and model is not None:
            for res in by_model.get(model, ()):
                counter[res] += n * gpu
                asked.add(res)
        return asked

    usage: dict[str, Counter[str]] = defaultdict(Counter)
    asked: dict[str, set[str]] = defaultdict(set)
    evicted = ctx.plan.evicted
    for pod in s.running:
        if pod.queue in capped and (pod.namespace, pod.name) not in evicted:
            node = s.node_by_name.get(pod.node)
            add(usage[pod.queue], dict(pod.requests), node.gpu_model if node else None)
    # the plan's pods counted per gang and role (alike pods charge alike)
    per_role: dict[tuple[str, str], tuple[Gang, Role, int]] = {}
    for _p, gang, role in ctx.pods:
        if gang.queue in capped:
            key = (gang.key, role.name)
            hit = per_role.get(key)
            per_role[key] = (gang, role, 1 if hit is None else hit[2] + 1)
    for gang, role, n in per_role.values():
        only = gang.gpu_models[0] if len(gang.gpu_models) == 1 else None
        asked[gang.queue] |= add(usage[gang.queue], dict(role.requests), only, n)
    for q in s.queues:
        for res, cap in q.max.items():
            if res in asked[q.name] and usage[q.name].get(res, 0) > cap:
                yield Violation(
                    "queue_max",
                    f"queue {q.name!r}: {res} use {_amount(s, res, usage[q.name][res])} "
                    f"exceeds its max {_amount(s, res, cap)}",
                )


def _amount(s: Snapshot, res: str, value: int) -> str:
    """An amount of ``res`` as a person reads it: GPUs as a count (``27.5``, not the
    quantity ``27500m``), anything else as a Kubernetes quantity."""
    if res == s.gpu:
        return f"{value / GPU_MILLI:g}"
    return format_quantity(res, value)


def _violations(
    check: Callable[[_Ctx], Iterator[tuple[str, str]]],
) -> Callable[[_Ctx], Iterator[Violation]]:
    """One check of :mod:`~gangplan.solver.judges.verify_evictions` yielding :class:`Violation`
    s."""

    def run(ctx: _Ctx) -> Iterator[Violation]:
        for rule, message in check(ctx):
            yield Violation(rule, message)

    run.__name__ = check.__name__
    run.__doc__ = check.__doc__
    return run


CHECKS: tuple[Callable[[_Ctx], Iterator[Violation]], ...] = (
    check_references,
    check_gang_minimums,
    check_node_readiness,
    check_selectors,
    check_capacity,
    check_required_topology,
    check_joint_allocation,
    check_queue_max,
    *(_violations(check) for check in EVICTION_CHECKS),
    *(_violations(check) for check in RESERVATION_CHECKS),
)


def check_outcomes(plan: Plan) -> list[Violation]:
    """The plan's own consistency, without a snapshot (what :func:`check_references` says of
    outcomes and pods): every pod's gang has exactly one outcome, each pod is placed once,
    and each outcome's ``placed``, ``admitted`` and ``reason`` agree with its pods — so a
    plan edited by hand or cut short is caught before anything reads its pods alone (as
    ``gangplan apply`` does). Returns the violations (rule ``references``), empty if none."""
    out: list[Violation] = []
    outcomes = Counter(o.key for o in plan.gangs)
    placed = Counter(p.gang_key for p in plan.pods)
    for key, n in sorted(outcomes.items()):
        if n > 1:
            out.append(Violation("references", f"gang {key} has {n} outcomes"))
    for key in sorted(set(placed) - set(outcomes)):
        out.append(Violation("references", f"gang {key}: {placed[key]} pods placed but no outcome"))
    for (ns, name), n in Counter((p.namespace, p.pod) for p in plan.pods).items():
        if n > 1:
            out.append(Violation("references", f"pod {ns}/{name} is placed {n} times"))
    for o in plan.gangs:
        if o.placed != placed.get(o.key, 0):
            out.append(
                Violation(
                    "references",
                    f"gang {o.key}: outcome says {o.placed} pods placed, the plan has "
                    f"{placed.get(o.key, 0)}",
                )
            )
        if o.admitted != (o.placed > 0):
            out.append(
                Violation("references", f"gang {o.key}: admitted={o.admitted} with {o.placed} pods")
            )
    return out
