"""The queue order every baseline places gangs in, and each queue's usage against its max.

Queues by weighted dominant share, lowest first (DRF, Ghodsi et al., NSDI'11; Volcano's
``drf`` / ``proportion`` plugins; Kueue's fair sharing), weight 0 after every queue of
positive weight (Kueue's meaning); the highest priority at the head of any queue goes
first (Volcano orders jobs by priority before queue share within a session).

**Queue max** (the rule the model, the baselines and the reasons share; the verifier checks
it on its own): a pod is held to its queue's max only for the resources it asks —
``running(q, r) + admitted(q, r) <= max(q, r)`` for every resource ``r`` that an admitted pod
of ``q`` asks (``charge[r] > 0``). So a GPU-only gang is not blocked by a queue already over
its CPU max. That is Volcano's and Kueue's rule: Volcano's capacity plugin admits a task when
``allocated + request <= capability`` in the dimensions the task requests
(``queueAllocatable`` in ``pkg/scheduler/plugins/capacity/capacity.go``, comparing with
``LessEqualWithDimensionAndResourcesName``, which skips dimensions the request does not
have); Kueue's flavor assigner checks quota (``fitsResourceQuota``) for each resource a
PodSet requests (``pkg/scheduler/flavorassigner/flavorassigner.go``).

A max named with a model-specific GPU resource (``nvidia.com/a100`` mapped to model ``A100``
by ``resources.gpu_model_resources``) caps the GPUs of that model: a pending pod asks it (its
GPU request, in milli-GPU) when its gang accepts that model only — which a request of
``nvidia.com/a100`` becomes when the snapshot is read — and a running pod holds it when it
holds GPUs on a node of that model (:func:`pod_charge`, :func:`running_charge`).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Mapping

from gangplan.models import (
    Gang,
    PodPlacement,
    Role,
    RunningPod,
    Snapshot,
    growing_nodes,
    minimum_gang,
)
from gangplan.solver.context import CycleContext
from gangplan.solver.placers.ranking import FailedPods
from gangplan.solver.placers.state import ClusterState, DeviceChoice

__all__ = [
    "QueueOrder",
    "admit_then_grow",
    "place_in_order",
    "pod_charge",
    "pod_names",
    "running_charge",
]


def _with_models(snapshot: Snapshot, requests: dict[str, int], model: str | None) -> dict[str, int]:
    out = dict(requests)
    gpu = requests.get(snapshot.gpu, 0)
    if gpu <= 0 or model is None:
        return out
    for res, m in snapshot.resources.gpu_model_resources.items():
        if m == model:
            out[res] = out.get(res, 0) + gpu
    return out


def pod_charge(snapshot: Snapshot, gang: Gang, role: Role) -> dict[str, int]:
    """What one pending pod of ``role`` counts against its queue's max, per resource (base
    units): its requests, plus its GPU request (milli-GPU) under each model-specific GPU
    resource of the one model its gang accepts (module docstring)."""
    model = gang.gpu_models[0] if len(gang.gpu_models) == 1 else None
    return _with_models(snapshot, dict(role.requests), model)


def running_charge(snapshot: Snapshot, pod: RunningPod) -> dict[str, int]:
    """What a running pod counts against its queue's max, per resource: its requests, plus
    its GPUs (milli-GPU) under each model-specific GPU resource of its node's model."""
    node = snapshot.node_by_name.get(pod.node)
    return _with_models(snapshot, dict(pod.requests), node.gpu_model if node else None)


class QueueOrder:
    """Queues by weighted dominant share, lowest first (Volcano ``drf``/``proportion``,
    Kueue fair sharing); weight 0 queues after all others; ties by name. Gangs of a queue
    by priority (higher first), then creation time, then name — or, given ``tie`` (gang key
    -> rank), by priority then that rank (FGD's restarts, :mod:`gangplan.solver.placers.restarts`,
    try other orders of a queue's gangs of one priority). Tracks queue usage and headroom
    under ``max`` as gangs are placed."""

    def __init__(
        self,
        ctx: CycleContext,
        gangs: list[Gang] | None = None,
        *,
        tie: Mapping[str, int] | None = None,
    ):
        self.ctx = ctx
        self.usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        """queue -> resource -> what its running and placed pods count against its max"""
        s = ctx.snapshot
        for pod in s.running:
            if pod.queue is not None:
                for r, v in running_charge(s, pod).items():
                    self.usage[pod.queue][r] += v
        self._charges: dict[tuple[str, str], dict[str, int]] = {}
        self.added: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        by_queue: dict[str, list[Gang]] = defaultdict(list)
        for g in gangs if gangs is not None else ctx.snapshot.gangs:
            by_queue[g.queue].append(g)

        def key(g: Gang) -> tuple[float, float, str]:
            if tie is None:
                return (-g.priority, g.creation_time, g.name)
            rank = tie.get(g.key)
            if rank is None:
                raise ValueError(f"the tie order has no rank for gang {g.key!r}")
            return (-g.priority, rank, g.name)

        self.pending: dict[str, deque[Gang]] = {
            q: deque(sorted(gs, key=key)) for q, gs in by_queue.items()
        }
        self._contribution: dict[int, tuple[Role, dict[str, int]]] = {}
        """each role's share per pod (:meth:`FairShares.contribution`), by the role's id"""
        self._shares: dict[str, tuple[int, float, str]] = {}
        """each queue's :meth:`share`, until its usage changes"""

    def share(self, queue: str) -> tuple[int, float, str]:
        """The sort key of a queue: (weight 0 last, dominant share / weight, name)."""
        hit = self._shares.get(queue)
        if hit is not None:
            return hit
        hit = self._shares[queue] = self._share(queue)
        return hit

    def _share(self, queue: str) -> tuple[int, float, str]:
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
        return self.pending[q].popleft()

    def _charge(self, gang: Gang, role: Role) -> dict[str, int]:
        key = (gang.key, role.name)
        hit = self._charges.get(key)
        if hit is None:
            hit = self._charges[key] = pod_charge(self.ctx.snapshot, gang, role)
        return hit

    def headroom_ok(self, gang: Gang, role: Role, pods: int = 1) -> bool:
        """Would ``pods`` more pods of ``role`` keep the queue within its max (in the
        resources they ask; module docstring)?"""
        return self.headroom_ok_counts(gang, {role.name: pods})

    def headroom_ok_counts(self, gang: Gang, counts: dict[str, int]) -> bool:
        """Would these pods per role, together, keep the queue within its max (in the
        resources they ask; module docstring)?"""
        q = self.ctx.snapshot.queue_by_name[gang.queue]
        if not q.max:
            return True
        charges = {role: self._charge(gang, gang.role(role)) for role in counts}
        for r, cap in q.max.items():
            add = sum(n * charges[role].get(r, 0) for role, n in counts.items())
            if add > 0 and self.usage[gang.queue][r] + add > cap:
                return False
        return True

    def within_max(self, gang: Gang) -> bool:
        """Is ``gang``'s queue within its max, as its usage stands, in every resource a pod
        of ``gang`` asks (the verifier's ``queue_max`` rule: a queue already over its max in
        a resource no admitted pod asks is not held to it)?"""
        q = self.ctx.snapshot.queue_by_name[gang.queue]
        asked = {r for role in gang.roles for r, v in self._charge(gang, role).items() if v > 0}
        usage = self.usage[gang.queue]
        return all(usage[r] <= cap for r, cap in q.max.items() if r in asked)

    def charge(self, gang: Gang, role: Role, sign: int = 1) -> None:
        """Count one pod of ``role`` placed (``sign`` -1: taken back) in its queue's usage."""
        for r, v in self._charge(gang, role).items():
            self.usage[gang.queue][r] += sign * v
        hit = self._contribution.get(id(role))
        if hit is None or hit[0] is not role:
            hit = self._contribution[id(role)] = (role, self.ctx.shares.contribution(role.requests))
        for r, v in hit[1].items():
            self.added[gang.queue][r] += sign * v
        self._shares.pop(gang.queue, None)


def pod_names(gang: Gang) -> dict[str, list[str]]:
    """The names of a gang's pods, per role, in index order."""
    return {r.name: [r.pod_name(gang.name, i) for i in range(r.count)] for r in gang.roles}


def admit_then_grow(
    ctx: CycleContext,
    order: QueueOrder,
    state: ClusterState,
    place: Callable[[Gang], list[PodPlacement] | None],
) -> list[PodPlacement]:
    """Admission before growth (``docs/design.md``, objective 1), for every baseline: the
    gangs in ``order``, one priority class at a time; within a class, first every gang at
    its minimum (an elastic gang cut to :func:`~gangplan.models.minimum_gang`; a growth gang,
    ``models/elastic.py``, waits), then growth, in the same order: a growth gang is placed
    (its pods use only the room the class's minimums left), and an elastic gang admitted at
    its minimum is taken back and placed whole by ``place`` (which keeps the pods beyond its
    minimum that fit), or, where that fails, put back exactly as it was. So freed GPUs start
    a waiting gang before they enlarge another, as Volcano schedules every job's
    ``minAvailable`` before any elastic pod.

    ``place(gang)``: places one gang on ``state``, charging ``order`` (None: nothing
    placed, nothing changed). Returns the placed pods, gang by gang in admission order."""
    gpu = ctx.snapshot.gpu
    growing = growing_nodes(ctx.snapshot)
    placed: dict[str, list[PodPlacement]] = {}
    later: list[Gang] = []

    def take_back(gang: Gang, pods: list[PodPlacement]) -> None:
        for p in reversed(pods):
            role = gang.role(p.role)
            state.remove(p, role)
            order.charge(gang, role, -1)

    def put_back(gang: Gang, pods: list[PodPlacement]) -> None:
        for p in pods:
            role = gang.role(p.role)
            again = state.place(gang, role, p.node, p.pod, DeviceChoice.of(p))
            assert again is not None, f"{p.pod} no longer fits where it was just placed"
            order.charge(gang, role)

    def grow() -> None:
        for gang in later:
            before = placed.pop(gang.key, None)
            if before is not None:
                take_back(gang, before)
            pods = place(gang)
            if pods:
                placed[gang.key] = pods
            elif before is not None:
                put_back(gang, before)
                placed[gang.key] = before
        later.clear()

    cls: int | None = None
    for gang in order:
        if cls is not None and gang.priority != cls:
            grow()
        cls = gang.priority
        if gang.key in growing:
            later.append(gang)
            continue
        if not gang.elastic:
            pods = place(gang)
        else:
            pods = place(minimum_gang(gang, gpu))
            if pods:
                later.append(gang)
        if pods:
            placed[gang.key] = pods
    grow()
    return [p for pods in placed.values() for p in pods]


def place_in_order(
    ctx: CycleContext,
    place: Callable[[CycleContext, ClusterState, QueueOrder, Gang], list[PodPlacement] | None],
) -> list[PodPlacement]:
    """The baselines' cycle: the gangs in :class:`QueueOrder`, minimums before growth
    (:func:`admit_then_grow`), each placed by ``place`` on one copy of the cycle's state (a
    gang ``place`` cannot place leaves no pod); a one-pod gang alike to one that already
    found no node is skipped (:class:`~gangplan.solver.placers.ranking.FailedPods`). Returns
    the placed pods."""
    state = ctx.state()
    order = QueueOrder(ctx)
    failed = FailedPods(state)

    def one(gang: Gang) -> list[PodPlacement] | None:
        if failed.known(gang):
            return None
        pods = place(ctx, state, order, gang)
        if not pods:
            failed.failed(gang)
            return None
        return pods

    return admit_then_grow(ctx, order, state, one)
