"""Running gangs the cycle may evict, as the CP-SAT model counts them (``docs/solver.md``,
"Preemption").

Only with preemption on (``Snapshot.preemption.enabled``); otherwise there are no victims
and the model is the one without preemption, term for term.

* A **victim** is a running gang some pending gang of the cycle may evict
  (:meth:`~gangplan.models.PreemptionRules.kind`). Its pods are split into **units** of
  interchangeable pods: the pods of one node with the same requests that hold no GPU or
  NIC device; a pod holding devices is a unit of its own (its devices are its own).
* Its capacity is **free in the model's state** (the index's ``ClusterState``: what the
  pods that are no one's victim leave), and every capacity row of the model carries the
  pods a victim keeps: ``running(u)`` pods of unit *u* hold ``running(u)`` times its requests
  (its devices, for a device unit). A whole victim keeps ``size(u) * stay[v]`` pods per
  unit (``stay`` a boolean); an elastic one ``keep[u]`` (an integer 0..size(u)) with
  ``min_member * stay <= sum_u keep[u] <= size * stay``.
* A node *channel* (a resource, the GPU devices, the NICs) where the running pods already
  hold more than the node has (a lost GPU, an overfull node) is not released: an eviction
  there frees nothing the model counts (the verifier's totals, clamped at zero, agree that
  it frees at most that).

The rule "no eviction for nothing" is the verifier's
(:mod:`gangplan.solver.judges.verify_evictions`), written as constraints by
:meth:`~gangplan.solver.model.constraints.Constraints` (family ``evictions_needed``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from gangplan.models import Eviction, Gang, PodPlacement, RunningGang, RunningPod, Snapshot
from gangplan.solver.context import CycleContext
from gangplan.solver.placers.state import ClusterState

__all__ = [
    "Unit",
    "Victim",
    "Victims",
    "after_state",
    "evicted_pods",
    "find_victims",
    "plan_evictions",
]

GPU_CHANNEL = "gpu devices"
NIC_CHANNEL = "nic devices"


@dataclass(frozen=True)
class Unit:
    """Interchangeable running pods of one victim on one node (module docstring)."""

    id: int
    victim: int
    node: int
    pods: tuple[RunningPod, ...]
    requests: tuple[tuple[str, int], ...]
    """per pod, base units"""
    gpu: tuple[tuple[str, int], ...] = ()
    """milli-GPU held per GPU device id (a device unit: one pod)"""
    nics: tuple[str, ...] = ()
    """NIC ids held (a device unit: one pod)"""

    @property
    def size(self) -> int:
        return len(self.pods)

    def req(self, resource: str) -> int:
        """One pod's request of ``resource`` (0 if not asked)."""
        for r, v in self.requests:
            if r == resource:
                return v
        return 0


@dataclass
class Victim:
    """A running gang the cycle may evict: its units, the items whose gangs may evict it,
    and its recency rank (:meth:`~gangplan.models.PreemptionRules.recency`)."""

    id: int
    gang: RunningGang
    units: list[int]
    recency: int
    eligible: list[int] = field(default_factory=list)
    """item ids whose gangs may evict it (set by the index once items exist)"""

    @property
    def elastic(self) -> bool:
        return self.gang.elastic

    @property
    def name(self) -> str:
        return self.gang.key


@dataclass
class Victims:
    """Every victim and unit of a cycle, with what each node releases (module docstring)."""

    victims: list[Victim]
    units: list[Unit]
    by_node: dict[int, list[int]]
    """node index -> its unit ids"""
    released: dict[int, set[str]]
    """node index -> channels where kept pods are counted by the model (a resource name,
    :data:`GPU_CHANNEL`, :data:`NIC_CHANNEL`)"""
    fixed: dict[int, Counter[str]]
    """node index -> what running pods that are no one's victim request there"""
    gpu_nodes: set[int] = field(default_factory=set)
    """nodes where a unit holds GPU devices that the model counts device by device"""

    def on(self, node: int) -> list[Unit]:
        """The units on ``node``."""
        return [self.units[u] for u in self.by_node.get(node, [])]

    def channel(self, snapshot: Snapshot, resource: str) -> str:
        """The channel a resource belongs to."""
        if resource == snapshot.gpu:
            return GPU_CHANNEL
        if resource == snapshot.nic:
            return NIC_CHANNEL
        return resource

    def counts(self, node: int, channel: str) -> bool:
        """Are kept pods counted on ``node`` for ``channel`` (it was released)?"""
        return channel in self.released.get(node, set())

    def resource_terms(self, snapshot: Snapshot, node: int, resource: str) -> list[tuple[int, int]]:
        """``(request per pod, unit)`` of the units on ``node`` asking ``resource``, where
        the node releases it (else none: the state keeps their hold)."""
        if not self.counts(node, self.channel(snapshot, resource)):
            return []
        return [(u.req(resource), u.id) for u in self.on(node) if u.req(resource) > 0]

    def device_terms(self, node: int, device: str) -> list[tuple[int, int]]:
        """``(milli-GPU held, unit)`` of the units holding GPU ``device`` of ``node``."""
        if not self.counts(node, GPU_CHANNEL):
            return []
        return [(m, u.id) for u in self.on(node) for d, m in u.gpu if d == device and m > 0]

    def nic_terms(self, node: int, ids: Iterable[str] | None = None) -> list[tuple[int, int]]:
        """``(NICs held among ids, unit)`` of the units on ``node`` (all NICs for None)."""
        if not self.counts(node, NIC_CHANNEL):
            return []
        want = None if ids is None else set(ids)
        out = []
        for u in self.on(node):
            k = sum(1 for x in u.nics if want is None or x in want)
            if k:
                out.append((k, u.id))
        return out

    def gpu_terms(self, snapshot: Snapshot, node: int) -> list[tuple[int, int]]:
        """``(milli-GPU per pod, unit)`` of the units on ``node`` taking GPUs (the device
        view the fragmentation entries count), where the node releases its GPUs."""
        if not self.counts(node, GPU_CHANNEL):
            return []
        return [(sum(m for _d, m in u.gpu), u.id) for u in self.on(node) if u.gpu]

    def queue_terms(self, queue: str, resource: str) -> list[tuple[int, int]]:
        """``(request per pod, unit)`` of the units of victims in ``queue`` asking
        ``resource``."""
        return [
            (u.req(resource), u.id)
            for u in self.units
            if self.victims[u.victim].gang.queue == queue and u.req(resource) > 0
        ]


def find_victims(ctx: CycleContext, gangs: list[Gang], state: ClusterState) -> Victims | None:
    """The victims of this cycle: running gangs that some gang of ``gangs`` may evict; their
    capacity is released in ``state`` (None: preemption is off or there is no victim)."""
    s = ctx.snapshot
    rules = s.preemption_rules
    if ctx.moves is not None:  # replan: the gangs that may move, and only they
        chosen = [rules.gangs[k] for k in ctx.moves.copies if k in rules.gangs]
    elif not rules.enabled:
        return None
    else:
        chosen = [
            rg
            for rg in rules.gangs.values()
            if rules.evictable(rg) and any(rules.kind(g, rg) is not None for g in gangs)
        ]
    if not chosen:
        return None
    victims: list[Victim] = []
    units: list[Unit] = []
    by_node: dict[int, list[int]] = defaultdict(list)
    for rg in chosen:
        vic = Victim(len(victims), rg, [], rules.recency(rg))
        victims.append(vic)
        groups: dict[tuple[object, ...], list[RunningPod]] = defaultdict(list)
        for pod in rg.pods:
            hold = s.free(pod.node).holds.get((pod.namespace, pod.name))
            if hold is not None and (hold.gpu_milli or hold.nics):
                groups[("device", pod.namespace, pod.name)].append(pod)
            else:
                groups[("pods", pod.node, tuple(sorted(pod.requests.items())))].append(pod)
        for key, members in groups.items():
            pod = members[0]
            hold = s.free(pod.node).holds.get((pod.namespace, pod.name))
            device = key[0] == "device" and hold is not None
            unit = Unit(
                id=len(units),
                victim=vic.id,
                node=ctx.node_index[pod.node],
                pods=tuple(members),
                requests=tuple(sorted(pod.requests.items())),
                gpu=tuple(sorted(hold.gpu_milli.items())) if device and hold else (),
                nics=hold.nics if device and hold else (),
            )
            units.append(unit)
            vic.units.append(unit.id)
            by_node[unit.node].append(unit.id)
    out = Victims(victims, units, dict(by_node), {}, {})
    _release(ctx, out, state)
    return out


def _release(ctx: CycleContext, vs: Victims, state: ClusterState) -> None:
    """Free the victims' capacity in ``state``, channel by channel where the node does not
    already hold more than it has (module docstring); fill ``released``, ``fixed`` and
    ``gpu_nodes``."""
    s = ctx.snapshot
    for n, unit_ids in vs.by_node.items():
        name = ctx.node_names[n]
        node = s.node_by_name[name]
        pods = s.running_on(name)
        victim_pods = {(p.namespace, p.name) for u in unit_ids for p in vs.units[u].pods}
        orig = s.free(name)
        after = s.free_after(name, victim_pods)
        held: Counter[str] = Counter()
        fixed: Counter[str] = Counter()
        for pod in pods:
            held.update(pod.requests)
            if (pod.namespace, pod.name) not in victim_pods:
                fixed.update(pod.requests)
        vs.fixed[n] = fixed
        released: set[str] = set()
        resources = dict(orig.resources)
        for r in node.allocatable:
            if r in (s.gpu, s.nic):
                continue
            if held.get(r, 0) <= node.allocatable[r]:
                released.add(r)
                resources[r] = after.resources[r]
        dev_held: Counter[str] = Counter()
        for hold in orig.holds.values():
            dev_held.update(hold.gpu_milli)
        gpu_ok = (
            held.get(s.gpu, 0) <= node.allocatable.get(s.gpu, 0)
            and all(m <= 1000 for m in dev_held.values())
            and sum(dev_held.values()) == held.get(s.gpu, 0)
        )
        gpu_milli = orig.gpu_milli
        if gpu_ok:
            released.add(GPU_CHANNEL)
            gpu_milli = after.gpu_milli
            if s.gpu in node.allocatable:
                resources[s.gpu] = after.resources[s.gpu]
                released.add(s.gpu)
            if any(vs.units[u].gpu for u in unit_ids):
                vs.gpu_nodes.add(n)
        nic_held = sum(len(h.nics) for h in orig.holds.values())
        nics = orig.nics
        if nic_held * 1000 == held.get(s.nic, 0):
            released.add(NIC_CHANNEL)
            nics = after.nics
            if s.nic in node.allocatable:
                resources[s.nic] = after.resources[s.nic]
                released.add(s.nic)
        vs.released[n] = released
        state.set_free(name, resources, gpu_milli, nics)


def evicted_pods(vs: Victims, kept: dict[int, int]) -> dict[int, list[RunningPod]]:
    """Per victim, the pods a solution evicts: ``kept`` pods per unit stay; of a unit
    keeping fewer than all, the pods last by name go."""
    out: dict[int, list[RunningPod]] = {}
    for vic in vs.victims:
        gone: list[RunningPod] = []
        for u in vic.units:
            unit = vs.units[u]
            k = kept.get(u, unit.size)
            if k < unit.size:
                gone += sorted(unit.pods, key=lambda p: p.name)[k:]
        if gone:
            out[vic.id] = gone
    return out


def plan_evictions(
    ctx: CycleContext, vs: Victims, evicted: dict[int, list[RunningPod]], pods: list[PodPlacement]
) -> list[Eviction]:
    """The evictions of a solution (``evicted``: :func:`evicted_pods`), each naming the gang
    it makes room for: of the gangs the plan admits that may evict the victim, one with a
    pod on a node the victim held (the highest priority, then the most pods there, then the
    name)."""
    s = ctx.snapshot
    rules = s.preemption_rules
    on_node: dict[str, Counter[str]] = defaultdict(Counter)
    for p in pods:
        on_node[p.node][p.gang_key] += 1
    out: list[Eviction] = []
    for vid, gone in evicted.items():
        vic = vs.victims[vid]
        if ctx.moves is not None and vic.gang.key in ctx.moves.copies:
            copy = ctx.moves.copies[vic.gang.key]
            out += [
                Eviction(
                    pod=p.name,
                    namespace=p.namespace,
                    gang=p.gang,
                    node=p.node,
                    for_gang=copy,
                    kind="move",
                    reason=f"moved: placed anew as {copy}",
                )
                for p in sorted(gone, key=lambda p: (p.node, p.name))
            ]
            continue
        nodes = {p.node for p in vic.gang.pods}
        best: tuple[tuple[int, int, str], Gang] | None = None
        for node in nodes:
            for key, n in on_node.get(node, Counter()).items():
                gang = s.gang_by_key[key]
                if rules.kind(gang, vic.gang) is None:
                    continue
                rank = (-gang.priority, -n, key)
                if best is None or rank < best[0]:
                    best = (rank, gang)
        if best is None:
            continue  # no gang to name: the verifier refuses the plan, the cycle falls back
        gang = best[1]
        kind = rules.kind(gang, vic.gang)
        assert kind is not None
        reason = rules.reason(gang, vic.gang)
        for pod in sorted(gone, key=lambda p: (p.node, p.name)):
            out.append(
                Eviction(
                    pod=pod.name,
                    namespace=pod.namespace,
                    gang=pod.gang,
                    node=pod.node,
                    for_gang=gang.key,
                    kind=kind,
                    reason=reason,
                )
            )
    return out


def after_state(ctx: CycleContext, evicted: Iterable[RunningPod]) -> ClusterState:
    """The cluster state the plan's pods go into: what the running pods the plan keeps
    leave (each kept pod holding its own devices)."""
    state = ctx.state()
    gone: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for pod in evicted:
        gone[pod.node].add((pod.namespace, pod.name))
    for node, pods in gone.items():
        free = ctx.snapshot.free_after(node, pods)
        state.set_free(node, free.resources, free.gpu_milli, free.nics)
    return state
