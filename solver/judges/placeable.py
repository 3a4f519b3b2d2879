"""GPUs still placeable per queue after a plan: what ``gangplan serve`` exports as
``gangplan_queue_placeable_gpus{queue}``, the room an autoscaler or an elastic job's workers
could still be given.

For each queue of the snapshot, the smallest of three amounts (milli-GPU, then divided by
:data:`~gangplan.models.GPU_MILLI`):

1. **free room**: the GPUs the plan leaves free on the ready, schedulable nodes the queue's
   pending gangs may use (a node some role of one of its gangs admits:
   :meth:`~gangplan.models.Role.admits`; every ready, schedulable node when it has no pending
   gang);
2. **its max**: ``max[gpu]`` less the GPUs its running pods and the plan's pods of its gangs
   hold (no bound without a max);
3. **its fair room**: the dominant share it would be filled to if it asked for all the GPUs
   besides its pending demand (:func:`~gangplan.solver.judges.fairness.fair_ceiling`), less
   the GPU share it holds after the plan (running pods plus the plan's, each pod's share
   rounded as :meth:`~gangplan.solver.judges.fairness.FairShares.contribution` rounds it),
   turned back into GPUs of the shared total. 0 when the cluster shares no GPU.

Pure: reads the snapshot and the plan, writes nothing; imports no OR-Tools and no placer.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gangplan.models import GPU_MILLI, Plan, Queue, Snapshot
from gangplan.solver.judges.fairness import PPM, FairShares, fair_ceiling, fair_shares

__all__ = ["placeable_gpus"]


@dataclass
class _Added:
    """What the plan's pods add: GPUs (milli) per node and per queue, GPU share (ppm) per
    queue."""

    per_node: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    per_queue: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    share: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def placeable_gpus(snapshot: Snapshot, plan: Plan | None) -> dict[str, float]:
    """Per queue name, the GPUs still placeable after ``plan`` (module docstring); ``plan``
    None: nothing placed this cycle. Every queue of ``snapshot`` has an entry (>= 0)."""
    fs = fair_shares(snapshot)
    added = _added(snapshot, fs, plan)
    free = _free_after(snapshot, added)
    used: dict[str, int] = defaultdict(int, added.per_queue)
    for r in snapshot.running:
        if r.queue:
            used[r.queue] += r.requests.get(snapshot.gpu, 0)
    out: dict[str, float] = {}
    for q in snapshot.queues:
        room = min(_free_room(snapshot, q, free), _fair_room(snapshot, fs, q, added))
        cap = q.max.get(snapshot.gpu)
        if cap is not None:
            room = min(room, max(0, cap - used[q.name]))
        out[q.name] = room / GPU_MILLI
    return out


def _added(snapshot: Snapshot, fs: FairShares, plan: Plan | None) -> _Added:
    gpu, out = snapshot.gpu, _Added()
    for p in plan.pods if plan is not None else ():
        gang = snapshot.gang_by_key.get(p.gang_key)
        if gang is None:
            continue
        want = gang.role(p.role).requests.get(gpu, 0)
        out.per_node[p.node] += want
        out.per_queue[gang.queue] += want
        if gpu in fs.resources:
            out.share[gang.queue] += fs.contribution(gang.role(p.role).requests)[gpu]
    return out


def _free_after(snapshot: Snapshot, added: _Added) -> dict[str, int]:
    """Free GPUs (milli) per ready, schedulable node once the plan's pods are on it."""
    return {
        n.name: max(
            0, snapshot.free(n.name).resources.get(snapshot.gpu, 0) - added.per_node[n.name]
        )
        for n in snapshot.nodes
        if n.ready and not n.unschedulable
    }


def _free_room(snapshot: Snapshot, q: Queue, free: dict[str, int]) -> int:
    gangs = [g for g in snapshot.gangs if g.queue == q.name]
    return sum(
        free[n.name]
        for n in snapshot.nodes
        if n.name in free and (not gangs or any(r.admits(n) for g in gangs for r in g.roles))
    )


def _fair_room(snapshot: Snapshot, fs: FairShares, q: Queue, added: _Added) -> int:
    gpu = snapshot.gpu
    if gpu not in fs.resources:
        return 0
    share = fs.base.get(q.name, {}).get(gpu, 0) + added.share[q.name]
    fair = max(0, fair_ceiling(snapshot, fs, q.name, gpu) - share)
    return fair * fs.totals[gpu] // PPM
