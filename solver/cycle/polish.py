"""Locality polish: a plan with each spread gang re-placed, where that gathers it.

Locality ranks below every priority class's fairness and throughput (``docs/design.md``,
the objective), so a search cut short by the cycle's budget may end before its locality
tier gets time, and the gangs it admitted stay spread over more domains than they need;
a baseline's plan, returned when CP-SAT did not run or found nothing better, is polished
the same way. The polish takes the plan's admitted gangs one at a time, in the snapshot's
order, those with more than one pod and a locality share below zero
(:func:`~gangplan.solver.judges.score.gang_locality`). First by exchanges with one-pod gangs
(:meth:`_Plan.exchange_in`) into a leaf holding some of its pods; failing that, it takes
the gang's pods off and places the same pods again by topology-fit (Kueue's BestFit,
lowest level first: :func:`~gangplan.solver.placers.topology_fit.place_counts`) on what the rest
of the plan leaves. The gangs still spread then get a second pass, dearer: exchanges into
a leaf holding none of their pods whose nodes exchanges can free
(:meth:`_Plan.exchange_open`). A new placement is kept only when the gang's own locality
share is lexicographically higher; otherwise the old one is put back, devices and all.

What it cannot change: the same gangs are admitted with the same pods per role, so every
entry above locality (fairness, GPUs and pods per class) is unchanged; the other gangs'
pods do not move, or are one-pod gangs moved by an exchange, whose locality share is zero
wherever they are (here a *one-pod gang* is one with one pod in the plan: an elastic gang
admitted at one pod counts), so the others' shares are unchanged; the score's locality entries,
each a sum over gangs, therefore rise. The entries below (fragmentation, stability) may
fall: they rank lower. The cycle still scores and verifies the polished plan.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gangplan.models import GPU_MILLI, Gang, PodPlacement, Role, Snapshot, growing_nodes
from gangplan.solver.context import CycleContext
from gangplan.solver.judges.score import gang_locality
from gangplan.solver.placers.queue_order import QueueOrder
from gangplan.solver.placers.state import ClusterState, DeviceChoice
from gangplan.solver.placers.topology_fit import place_counts
from gangplan.topology import NODE_LEVEL, Domain, Topology

__all__ = ["Polished", "polish_applies", "polish_locality"]

_MAX_EXCHANGED = 8
"""At most this many of the plan's pods on a node for it to take part in an exchange."""
_MAX_OPEN_LEAVES = 8
"""At most this many leaves holding none of a gang's pods are tried for its exchanges."""


def polish_applies(ctx: CycleContext) -> bool:
    """Whether the polish can gather anything in this cycle: a pending gang has more than
    one pod, the topology has a leaf level, and no gang holds a reservation."""
    if ctx.snapshot.reservations or ctx.topo.leaf_level is None:
        return False
    return any(g.size > 1 for g in ctx.snapshot.gangs)


def polish_locality(
    ctx: CycleContext,
    pods: list[PodPlacement],
    *,
    out_of_time: Callable[[], bool] = lambda: False,
) -> Polished:
    """``pods`` with spread gangs gathered (module docstring).

    Args:
        ctx: the cycle's context (its state: what running pods leave).
        pods: a plan's placed pods without evictions or reservations, each naming its
            devices (CP-SAT's, after disaggregation); the plan must fit ``ctx``'s state.
        out_of_time: asked before each gang; True stops the polish there (the gangs done
            so far are kept).

    Returns:
        The pods, in the order given with each gathered gang's pods in place of its old
        ones, the gangs gathered and the locality entries' rise (:class:`Polished`);
        ``pods`` unchanged when no gang was gathered, or when a pod does not fit the state
        (which a verified plan always does).
    """
    snapshot = ctx.snapshot
    gangs = snapshot.gang_by_key
    by_gang: dict[str, list[PodPlacement]] = {}
    for p in pods:
        by_gang.setdefault(p.gang_key, []).append(p)
    unchanged = Polished(pods, (), (0,) * (1 + len(ctx.topo.all_levels)))
    if not _well_formed(snapshot, by_gang):
        return unchanged
    growing = growing_nodes(snapshot)
    spread = [
        gangs[key]
        for key, placed in by_gang.items()
        if len(placed) > 1
        and key not in growing
        and min(gang_locality(ctx.topo, gangs[key], _roles_nodes(placed)), default=0) < 0
    ]
    unchanged = dataclasses.replace(unchanged, spread=len(spread))
    if not spread:
        return unchanged
    plan = _Plan.of(ctx, pods, by_gang, growing)
    if plan is None:
        return unchanged
    gathered: list[str] = []
    rise = [0] * (1 + len(ctx.topo.all_levels))
    # two passes: the cheap moves for every gang first (into its own leaves, or placed
    # again), then exchanges into leaves holding none of its pods for those left spread,
    # whose search of the cluster's leaves costs most
    passes: tuple[Callable[[Gang], bool], ...] = (
        lambda g: plan.exchange_in(g) or plan.place_again(g),
        lambda g: plan.exchange_open(g, out_of_time),
    )
    for attempt in passes:
        for gang in spread:
            if out_of_time():
                break
            if gang.key in gathered:
                continue
            before = plan.locality(gang)
            if attempt(gang):
                gathered.append(gang.key)
                for i, (a, b) in enumerate(zip(before, plan.locality(gang), strict=True)):
                    rise[i] += b - a
    if not gathered:
        return unchanged
    out: list[PodPlacement] = []
    done: set[str] = set()
    for p in pods:
        if p.gang_key not in done:
            done.add(p.gang_key)
            out.extend(plan.by_gang[p.gang_key])
    return Polished(out, tuple(gathered), tuple(rise), spread=len(spread))


@dataclass(frozen=True)
class Polished:
    """What :func:`polish_locality` returns."""

    pods: list[PodPlacement]
    """the plan's pods, gathered gangs' pods in place of their old ones"""
    gathered: tuple[str, ...]
    """the keys of the gangs gathered, in the order done"""
    rise: tuple[int, ...]
    """how much each locality entry rose (``locality.preferred``, then each level of
    ``topo.all_levels``): the first nonzero one is positive, a later one may be negative
    (a gang gathered into one leaf may take more nodes)"""
    spread: int = 0
    """the admitted gangs found spread (the ones the polish tried)"""

    @property
    def first_raised(self) -> int | None:
        """The index among the locality entries of the first that rose, None if none."""
        return next((i for i, v in enumerate(self.rise) if v), None)


class _Plan:
    """The plan being polished: its pods by gang and by node, and the state they leave."""

    def __init__(
        self,
        ctx: CycleContext,
        state: ClusterState,
        by_gang: dict[str, list[PodPlacement]],
        growing: Mapping[str, object],
    ):
        self.ctx, self.state, self.by_gang = ctx, state, by_gang
        self._order: QueueOrder | None = None
        self._start: ClusterState | None = None
        """the state the running pods leave, without the plan's (built when first needed)"""
        self._fitting: dict[tuple[object, ...], list[str]] = {}
        """per candidate list and pod shape, the nodes where one pod fits ``_start``"""
        self.growing = growing
        self.gangs = ctx.snapshot.gang_by_key
        self.on_node: dict[str, list[PodPlacement]] = {}
        for placed in by_gang.values():
            for p in placed:
                self.on_node.setdefault(p.node, []).append(p)

    @classmethod
    def of(
        cls,
        ctx: CycleContext,
        pods: list[PodPlacement],
        by_gang: dict[str, list[PodPlacement]],
        growing: Mapping[str, object],
    ) -> _Plan | None:
        state = ctx.state()
        gangs = ctx.snapshot.gang_by_key
        for p in pods:
            gang = gangs[p.gang_key]
            role = gang.role(p.role)
            if not _fits(state, role, p):
                return None
            state.place(gang, role, p.node, p.pod, DeviceChoice.of(p))
        return cls(ctx, state, by_gang, growing)

    @property
    def order(self) -> QueueOrder:
        """The queues' usage with the plan's pods counted (built when first needed: only
        :meth:`place_again` checks a queue's max)."""
        if self._order is None:
            self._order = QueueOrder(self.ctx)
            for placed in self.by_gang.values():
                for p in placed:
                    gang = self.gangs[p.gang_key]
                    self._order.charge(gang, gang.role(p.role))
        return self._order

    def locality(self, gang: Gang) -> tuple[int, ...]:
        """``gang``'s locality share now (:func:`~gangplan.solver.judges.score.gang_locality`)."""
        return gang_locality(self.ctx.topo, gang, _roles_nodes(self.by_gang[gang.key]))

    def _set(self, gang: Gang, pods: list[PodPlacement]) -> None:
        for p in self.by_gang[gang.key]:
            self.on_node[p.node].remove(p)
        self.by_gang[gang.key] = pods
        for p in pods:
            self.on_node.setdefault(p.node, []).append(p)

    # ------------------------------------------------------------------ exchanges

    def exchange_in(self, gang: Gang) -> bool:
        """Gather ``gang`` into one leaf by exchanges: each of its pods outside the leaf
        moves to a node of the leaf, the plan's other pods there (each of a one-pod gang)
        moving to the node it leaves, when every moved pod's node admits it and it fits
        (:meth:`_exchange`; nodes with the fewest of the plan's pods first). The leaves
        holding its pods are tried, the one holding most first (then topology order); the
        first whose exchanges raise the gang's locality share is kept, the others undone."""
        topo = self.ctx.topo
        leaf_level = topo.leaf_level
        if leaf_level is None or _needs_one_node(gang):
            return False
        before = self.locality(gang)
        count = self._held(gang)
        index = {d: i for i, d in enumerate(topo.domains_at(leaf_level))}
        leaves = sorted((d for d in count if d is not None), key=lambda d: (-count[d], index[d]))
        return any(self._gather(gang, leaf, before) for leaf in leaves)

    def exchange_open(self, gang: Gang, out_of_time: Callable[[], bool]) -> bool:
        """Gather ``gang`` by exchanges (as :meth:`exchange_in`) into a leaf holding none of
        its pods: up to :data:`_MAX_OPEN_LEAVES` leaves that exchanges could open for all
        of them (:meth:`_open_leaves`), in topology order, until ``out_of_time``."""
        if self.ctx.topo.leaf_level is None or _needs_one_node(gang):
            return False
        before = self.locality(gang)
        for leaf in self._open_leaves(gang, self._held(gang)):
            if out_of_time():
                return False
            if self._gather(gang, leaf, before):
                return True
        return False

    def _held(self, gang: Gang) -> Counter[Domain | None]:
        """The leaves holding ``gang``'s pods, with how many each."""
        topo = self.ctx.topo
        return Counter(
            topo.domain_of(p.node, topo.leaf_level or "") for p in self.by_gang[gang.key]
        )

    def _open_leaves(self, gang: Gang, held: Mapping[Domain | None, int]) -> list[Domain]:
        """The leaves not in ``held`` (those holding ``gang``'s pods) where each of its
        roles has room for its pods on nodes an exchange can take: nodes that admit the
        role, whose plan pods are each of a one-pod gang (at most :data:`_MAX_EXCHANGED`),
        counting what fits there on the free amounts the running pods leave; at most
        :data:`_MAX_OPEN_LEAVES`, in topology order."""
        topo = self.ctx.topo
        leaf_level = topo.leaf_level or ""
        if self._start is None:
            self._start = self.ctx.state()
        start = self._start
        need = Counter(p.role for p in self.by_gang[gang.key])
        room: dict[Domain | None, dict[str, int]] = {}
        for name, k in need.items():
            role = gang.role(name)
            # the nodes where a pod of the role fits on what the running pods leave
            # (cached per class of nodes), then only those an exchange can take
            cands = start.candidates(gang, role)
            key = (id(cands), gang.joint, tuple(sorted(role.requests.items())))
            fitting = self._fitting.get(key)
            if fitting is None:
                fitting = self._fitting[key] = start.fitting(gang, role, cands)
            for n in fitting:
                leaf = topo.domain_of(n, leaf_level)
                if leaf in held or not self._exchangeable(n):
                    continue
                per = room.setdefault(leaf, {})
                per[name] = per.get(name, 0) + start.pod_capacity(gang, role, n, k)
        index = {d: i for i, d in enumerate(topo.domains_at(leaf_level))}
        open_ = [
            d
            for d, per in room.items()
            if d is not None and all(per.get(name, 0) >= k for name, k in need.items())
        ]
        return sorted(open_, key=index.__getitem__)[:_MAX_OPEN_LEAVES]

    def _others(self, node: str, gang_key: str = "") -> list[PodPlacement] | None:
        """The plan's pods on ``node`` but ``gang_key``'s, if an exchange can move them all
        off it: at most :data:`_MAX_EXCHANGED`, each of a one-pod gang that is not a growth
        gang; else None."""
        others = [q for q in self.on_node.get(node, ()) if q.gang_key != gang_key]
        if len(others) > _MAX_EXCHANGED or any(
            q.gang_key in self.growing or len(self.by_gang[q.gang_key]) != 1 for q in others
        ):
            return None
        return others

    def _exchangeable(self, node: str) -> bool:
        """Whether an exchange can move every plan pod off ``node`` (:meth:`_others`)."""
        return self._others(node) is not None

    def _gather(self, gang: Gang, leaf: Domain, before: tuple[int, ...]) -> bool:
        topo = self.ctx.topo
        old = self.by_gang[gang.key]
        members = sorted(
            topo.nodes_in(leaf),
            key=lambda n: (len(self.on_node.get(n, ())), self.ctx.node_index[n]),
        )
        journal: list[tuple[list[PodPlacement], list[PodPlacement]]] = []
        new = list(old)
        for i, p in enumerate(old):
            if topo.domain_of(p.node, topo.leaf_level or "") == leaf:
                continue
            for n in members:
                got = self._exchange(gang, p, n)
                if got is not None:
                    journal.append(got)
                    new[i] = got[1][0]
                    break
        if (
            journal
            and _required_hold(topo, gang, new)
            and gang_locality(topo, gang, _roles_nodes(new)) > before
        ):
            self.by_gang[gang.key] = new
            return True
        for taken, added in reversed(journal):
            self._apply(added, taken)
        return False

    def _exchange(
        self, gang: Gang, p: PodPlacement, node: str
    ) -> tuple[list[PodPlacement], list[PodPlacement]] | None:
        """Move ``gang``'s pod ``p`` to ``node`` and the plan's other pods on ``node``
        (each of a one-pod gang, not a growth gang; the gang's own stay) to ``p``'s node,
        devices chosen again; the pods taken off and the pods placed (``p``'s first), or
        None with nothing changed."""
        state = self.state
        others = self._others(node, gang.key)
        if node == p.node or others is None:
            return None
        role = gang.role(p.role)
        if node not in state.candidate_set(gang, role):
            return None
        moving: list[tuple[Gang, Role, PodPlacement, str]] = [(gang, role, p, node)]
        for q in others:
            other = self.gangs[q.gang_key]
            other_role = other.role(q.role)
            if p.node not in state.candidate_set(other, other_role):
                return None
            moving.append((other, other_role, q, p.node))
        taken = [q for _g, _r, q, _to in moving]
        self._replace(taken, [])
        added: list[PodPlacement] = []
        for g, r, q, to in moving:
            placed = state.place(g, r, to, q.pod) if state.fits(g, r, to) else None
            if placed is None:
                self._replace(added, taken)
                return None
            added.append(placed)
        self._record(taken, added)
        return taken, added

    def _record(self, taken: list[PodPlacement], added: list[PodPlacement]) -> None:
        """The plan's lists after ``taken`` became ``added`` (the state already changed);
        a one-pod gang's list is its new pod."""
        for q in taken:
            self.on_node[q.node].remove(q)
        for a in added:
            self.on_node.setdefault(a.node, []).append(a)
            if len(self.by_gang[a.gang_key]) == 1:
                self.by_gang[a.gang_key] = [a]

    def _apply(self, taken: list[PodPlacement], added: list[PodPlacement]) -> None:
        """Undo an exchange: ``taken`` (its placed pods) off, ``added`` (its pods taken off)
        back with their devices."""
        self._replace(taken, added)
        self._record(taken, added)

    def _replace(self, off: list[PodPlacement], on: list[PodPlacement]) -> None:
        """On the state only: ``off``'s pods taken off, then ``on``'s placed with the devices
        they name (pods the state held before, so they fit)."""
        state = self.state
        for q in off:
            state.remove(q, self.gangs[q.gang_key].role(q.role))
        for a in on:
            g = self.gangs[a.gang_key]
            back = state.place(g, g.role(a.role), a.node, a.pod, DeviceChoice.of(a))
            if back is None:  # pragma: no cover
                raise AssertionError(f"pod {a.pod!r} no longer fits node {a.node!r}")

    # ------------------------------------------------------------------ placed again

    def place_again(self, gang: Gang) -> bool:
        """Take ``gang``'s pods off and place as many per role again by topology-fit; kept
        when its locality share rises, else the old pods are put back, devices and all."""
        order = self.order
        old = self.by_gang[gang.key]
        before = self.locality(gang)
        self._replace(old, [])
        for p in old:
            order.charge(gang, gang.role(p.role), -1)
        per_role = Counter(p.role for p in old)
        counts = {r.name: per_role[r.name] for r in gang.roles}
        new = place_counts(self.ctx, self.state, order, gang, counts)
        if new is not None and gang_locality(self.ctx.topo, gang, _roles_nodes(new)) > before:
            self._set(gang, _named_as(new, old))
            return True
        if new is None:
            # nothing placed: the queue's usage is back with the old pods; placed, it counts
            # the same pods per role as the old ones already
            for p in old:
                order.charge(gang, gang.role(p.role))
        self._replace(new or [], old)
        return False


def _well_formed(snapshot: Snapshot, by_gang: Mapping[str, list[PodPlacement]]) -> bool:
    """Whether every pod names a gang, role and node of the snapshot, once, and no role has
    more pods than its count (a verified plan always does; the polish also gets the
    incumbent before its verification, and re-placing a role beyond its count fails)."""
    gangs, nodes = snapshot.gang_by_key, snapshot.node_by_name
    seen: set[tuple[str, str]] = set()
    for key, placed in by_gang.items():
        gang = gangs.get(key)
        if gang is None:
            return False
        per_role = Counter(p.role for p in placed)
        for name, n in per_role.items():
            role = next((r for r in gang.roles if r.name == name), None)
            if role is None or n > role.count:
                return False
        for p in placed:
            if p.node not in nodes or (p.namespace, p.pod) in seen:
                return False
            seen.add((p.namespace, p.pod))
    return True


def _required_hold(topo: Topology, gang: Gang, pods: list[PodPlacement]) -> bool:
    """Whether ``pods`` keep the gang's required level and each role's in one domain (a
    partial gather can move some of a role's pods and not the others)."""
    levels = [(gang.topology.required if gang.topology else None, pods)]
    for role in gang.roles:
        if role.topology and role.topology.required:
            levels.append((role.topology.required, [p for p in pods if p.role == role.name]))
    for level, members in levels:
        if level is None or not members:
            continue
        if level == NODE_LEVEL:
            domains: set[object] = {p.node for p in members}
        else:
            domains = {topo.domain_of(p.node, level) for p in members}
        if len(domains) > 1 or None in domains:
            return False
    return True


def _needs_one_node(gang: Gang) -> bool:
    """Whether the gang, or one of its roles, requires the ``node`` level (its pods then
    stay together: a swap would split them)."""
    levels = [gang.topology.required if gang.topology else None]
    levels += [r.topology.required if r.topology else None for r in gang.roles]
    return NODE_LEVEL in levels


def _fits(state: ClusterState, role: Role, p: PodPlacement) -> bool:
    """Whether pod ``p`` of ``role`` fits its node on ``state`` as it is placed: every
    amount it asks, the milli-GPU of each device it names, each NIC it names free."""
    st = state.nodes.get(p.node)
    if st is None:
        return False
    if any(st.resources.get(r, 0) < amount for r, amount in role.requests.items()):
        return False
    per = p.gpu_milli if p.gpu_milli is not None else GPU_MILLI
    return all(st.gpu_milli.get(d, -1) >= per for d in p.gpus) and all(n in st.nics for n in p.nics)


def _moved(p: PodPlacement, to: PodPlacement) -> PodPlacement:
    """``p`` on ``to``'s node with ``to``'s devices."""
    return p.model_copy(
        update={"node": to.node, "gpus": to.gpus, "gpu_milli": to.gpu_milli, "nics": to.nics}
    )


def _roles_nodes(pods: list[PodPlacement]) -> list[tuple[str, str]]:
    return [(p.role, p.node) for p in pods]


def _named_as(new: list[PodPlacement], old: list[PodPlacement]) -> list[PodPlacement]:
    """``new`` with the pod names of ``old``, role by role (a placer names an elastic gang's
    pods by index; the plan's own names are kept)."""
    names: dict[str, list[str]] = {}
    for p in old:
        names.setdefault(p.role, []).append(p.pod)
    taken: Counter[str] = Counter()
    out = []
    for p in new:
        name = names[p.role][taken[p.role]]
        taken[p.role] += 1
        out.append(p if p.pod == name else p.model_copy(update={"pod": name}))
    return out
