"""Who may evict whom: the rules of preemption, as data of one snapshot.

Every judge of a plan reads them here — the verifier (``solver/judges/verify_evictions.py``), the
score, the CP-SAT model and the baselines' greedy preemption — as every judge reads what a
toleration tolerates from :class:`~gangplan.models.snapshot.Toleration`: they are the
definition, not a placer's choice (``docs/solver.md``, "Preemption").

A **running gang** is the unit of eviction: the running pods that share a gang key (a pod of
no gang is a gang of its own). Its priority is the highest of its pods'; its queue its first
pod's; its minimum the largest ``min_member`` its pods give (none: its size, so it is evicted
whole or not at all); its admission the latest ``admitted`` (none: long ago); it is
preemptible only if all its pods are.

A pending gang **may preempt** a running gang (:meth:`PreemptionRules.kind`) when preemption
is enabled, the gang's PriorityClass does not say ``preemptionPolicy: Never``, the victim is
preemptible and outside its grace period, and one of (Kueue's ClusterQueue
``spec.preemption``, github.com/kubernetes-sigs/kueue, "Preemption"):

* ``priority`` — same queue, the queue's ``within_queue`` is ``lower_priority`` and the
  victim's priority is strictly lower (Kueue ``withinClusterQueue: LowerPriority``);
* ``reclaim`` — another queue, the gang's queue has ``reclaim`` ``lower_priority`` (victim
  strictly lower) or ``any``; the gang's queue is **within its guaranteed amount** with the
  gang (its running usage plus the gang's full request stays within ``guaranteed`` in every
  resource the gang asks that the queue guarantees, and it guarantees at least one), and
  the victim's queue is **borrowing** (its running usage exceeds its ``guaranteed`` in some
  resource the gang asks; a resource it does not guarantee counts as 0) and
  ``reclaimable`` — Kueue ``reclaimWithinCohort``, with every queue in one cohort; Volcano's
  ``reclaim`` action and Queue ``reclaimable``. Usage is the snapshot's running
  usage: the rule is decided before the cycle, not by its own evictions.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from gangplan.models.base import gang_key

if TYPE_CHECKING:
    from gangplan.models.snapshot import Gang, RunningPod, Snapshot

__all__ = ["PreemptionKind", "PreemptionRules", "RunningGang"]

PreemptionKind = Literal["priority", "reclaim"]
"""Why a victim may be evicted for a gang: a lower priority in the same queue, or a queue
reclaiming its guaranteed amount from one that borrows."""


@dataclass(frozen=True)
class RunningGang:
    """The running pods of one gang, as a unit of eviction (module docstring).

    ``key``: the gang key ``namespace/gang``, or ``namespace/pod`` for a pod of no gang
    (``gang`` None); ``pods`` in snapshot order; ``min_member``: the fewest pods it may keep
    running if any (its size unless elastic); ``admitted``: seconds, None for long ago.
    """

    key: str
    namespace: str
    gang: str | None
    queue: str | None
    priority: int
    pods: tuple[RunningPod, ...]
    min_member: int
    admitted: float | None
    preemptible: bool

    @property
    def size(self) -> int:
        """Pods running now."""
        return len(self.pods)

    @property
    def elastic(self) -> bool:
        """May it lose some pods (those above ``min_member``) and keep the others?"""
        return self.min_member < self.size

    @property
    def name(self) -> str:
        """Its gang's name, or its pod's for a pod of no gang."""
        return self.gang if self.gang is not None else self.pods[0].name


class PreemptionRules:
    """The running gangs of a snapshot and who may evict them (module docstring).

    Built once per snapshot (:attr:`Snapshot.preemption_rules
    <gangplan.models.snapshot.Snapshot.preemption_rules>`); every answer is a function of the
    snapshot alone.
    """

    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot

    @property
    def enabled(self) -> bool:
        return self.snapshot.preemption.enabled

    @cached_property
    def gangs(self) -> dict[str, RunningGang]:
        """Every running gang by key, in the order of its first pod."""
        pods: dict[str, list[RunningPod]] = defaultdict(list)
        for pod in self.snapshot.running:
            pods[self.key_of(pod)].append(pod)
        out = {}
        for key, members in pods.items():
            mins = [p.min_member for p in members if p.min_member is not None]
            times = [p.admitted for p in members if p.admitted is not None]
            first = members[0]
            out[key] = RunningGang(
                key=key,
                namespace=first.namespace,
                gang=first.gang,
                queue=first.queue,
                priority=max(p.priority for p in members),
                pods=tuple(members),
                min_member=min(len(members), max(mins)) if mins else len(members),
                admitted=max(times) if times else None,
                preemptible=all(p.preemptible for p in members),
            )
        return out

    @staticmethod
    def key_of(pod: RunningPod) -> str:
        """The key of the running gang ``pod`` belongs to."""
        return pod.gang_key if pod.gang_key is not None else gang_key(pod.namespace, pod.name)

    def gang_of(self, pod: RunningPod) -> RunningGang:
        return self.gangs[self.key_of(pod)]

    # ------------------------------------------------------------------ time

    @cached_property
    def now(self) -> float:
        """The cycle's clock: :attr:`PreemptionSettings.now`, else the latest creation or
        admission time the snapshot names (0 if none)."""
        s = self.snapshot
        if s.preemption.now is not None:
            return s.preemption.now
        times = [g.creation_time for g in s.gangs]
        times += [p.admitted for p in s.running if p.admitted is not None]
        return max(times, default=0.0)

    def in_grace(self, victim: RunningGang) -> bool:
        """Was ``victim`` admitted less than ``grace_s`` before :attr:`now`?"""
        if victim.admitted is None:
            return False
        return self.now - victim.admitted < self.snapshot.preemption.grace_s

    @cached_property
    def _recency(self) -> dict[str, int]:
        times = sorted({g.admitted for g in self.gangs.values() if g.admitted is not None})
        rank = {t: i + 1 for i, t in enumerate(times)}
        return {k: rank[g.admitted] if g.admitted is not None else 0 for k, g in self.gangs.items()}

    def recency(self, victim: RunningGang) -> int:
        """The rank of ``victim``'s admission among the running gangs': 0 for a gang admitted
        long ago (no time known), then 1, 2, ... from the oldest known time to the latest
        (equal times share a rank). Kueue evicts the most recently admitted first among
        equals; the score prefers plans whose victims have higher ranks."""
        return self._recency[victim.key]

    # ------------------------------------------------------------------ who may be evicted

    def evictable(self, victim: RunningGang) -> bool:
        """Could any gang evict ``victim`` this cycle: preemption on, the victim preemptible
        and outside its grace period?"""
        return self.enabled and victim.preemptible and not self.in_grace(victim)

    def why_not(self, victim: RunningGang) -> str | None:
        """Why ``victim`` can be no one's victim (None: it can be, for some gang)."""
        if not self.enabled:
            return "preemption is off"
        if not victim.preemptible:
            return "it does not tolerate disruption (preemptible: false)"
        if self.in_grace(victim):
            assert victim.admitted is not None
            age = self.now - victim.admitted
            grace = self.snapshot.preemption.grace_s
            return f"it was admitted {age:g} s ago, within the grace period of {grace:g} s"
        return None

    def kind(self, gang: Gang, victim: RunningGang) -> PreemptionKind | None:
        """May pending ``gang`` evict ``victim``, and why (module docstring); None: it may
        not."""
        if not self.evictable(victim) or gang.preemption_policy == "Never":
            return None
        queue = self.snapshot.queue_by_name.get(gang.queue)
        if queue is None:
            return None
        policy = queue.preemption
        if victim.queue == gang.queue:
            if policy.within_queue == "lower_priority" and gang.priority > victim.priority:
                return "priority"
            return None
        if victim.queue is None or policy.reclaim == "never":
            return None
        if policy.reclaim == "lower_priority" and gang.priority <= victim.priority:
            return None
        if not self.within_guaranteed(gang) or not self.borrowing(victim.queue, gang):
            return None
        return "reclaim"

    def reason(self, gang: Gang, victim: RunningGang) -> str:
        """A sentence saying why ``gang`` may evict ``victim`` (for a plan's eviction)."""
        kind = self.kind(gang, victim)
        if kind == "priority":
            return (
                f"priority {victim.priority} below {gang.key}'s {gang.priority} in queue "
                f"{gang.queue!r} (within_queue: lower_priority)"
            )
        if kind == "reclaim":
            return (
                f"queue {gang.queue!r} reclaims its guaranteed amount from queue "
                f"{victim.queue!r}, which uses more than its own"
            )
        return "not allowed"

    # ------------------------------------------------------------------ reclaim

    @cached_property
    def usage(self) -> dict[str, dict[str, int]]:
        """Running usage per queue and resource (base units)."""
        out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for pod in self.snapshot.running:
            if pod.queue is not None:
                for r, v in pod.requests.items():
                    out[pod.queue][r] += v
        return out

    @staticmethod
    def _asks(gang: Gang) -> dict[str, int]:
        total: dict[str, int] = defaultdict(int)
        for role in gang.roles:
            for r, v in role.requests.items():
                total[r] += role.count * v
        return {r: v for r, v in total.items() if v > 0}

    def within_guaranteed(self, gang: Gang) -> bool:
        """Does ``gang``'s queue stay within its guaranteed amount with the whole gang added,
        in every resource the gang asks that the queue guarantees (at least one)?"""
        queue = self.snapshot.queue_by_name[gang.queue]
        asks = self._asks(gang)
        shared = [r for r in asks if r in queue.guaranteed]
        if not shared:
            return False
        use = self.usage[gang.queue]
        return all(use.get(r, 0) + asks[r] <= queue.guaranteed[r] for r in shared)

    def borrowing(self, queue_name: str, gang: Gang) -> bool:
        """Is queue ``queue_name`` reclaimable, using more than its guaranteed amount in a
        resource that ``gang`` asks?"""
        queue = self.snapshot.queue_by_name.get(queue_name)
        if queue is None or not queue.preemption.reclaimable:
            return False
        use = self.usage[queue_name]
        return any(use.get(r, 0) > queue.guaranteed.get(r, 0) for r in self._asks(gang))
