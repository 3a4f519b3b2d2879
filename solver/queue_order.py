"""The queue order every baseline places gangs in, and each queue's usage against its max.

Queues by weighted dominant share, lowest first (DRF, Ghodsi et al., NSDI'11; Volcano's
``drf`` / ``proportion`` plugins; Kueue's fair sharing), weight 0 after every queue of
positive weight (Kueue's meaning); the highest priority at the head of any queue goes
first (Volcano orders jobs by priority before queue share within a session).
"""

from __future__ import annotations

from collections import defaultdict, deque

from gangplan.models import Gang, Role
from gangplan.solver.context import CycleContext

__all__ = ["QueueOrder", "pod_names"]


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
        by_queue: dict[str, list[Gang]] = defaultdict(list)
        for g in gangs if gangs is not None else ctx.snapshot.gangs:
            by_queue[g.queue].append(g)
        self.pending: dict[str, deque[Gang]] = {
            q: deque(sorted(gs, key=lambda g: (-g.priority, g.creation_time, g.name)))
            for q, gs in by_queue.items()
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
        """Count one pod of ``role`` placed (``sign`` -1: taken back) in its queue's usage."""
        for r, v in role.requests.items():
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
