"""Reservations: capacity held for a gang that has waited too long, and who may use it.

A pending gang that has waited longer than ``reserve_after_s``
(:class:`ReservationSettings`) gets a **reservation**: a domain where it can start earliest
given the running pods' expected end times, and, on some nodes of that domain, the amounts
it will take there when it starts (``held``). Other gangs may use held capacity only if they
are expected to finish before the reservation's start — EASY backfilling (Lifka, "The ANL/IBM
SP scheduling system", JSSPP 1995; Mu'alem and Feitelson, "Utilization, predictability,
workloads, and user runtime estimates in scheduling the IBM SP2 with backfilling", IEEE
TPDS 12(6), 2001), as Slurm's backfill scheduler does. Which domain, and the held amounts,
are chosen by :mod:`gangplan.solver.cycle.reservations`; this module only says what a reservation
is and what it allows, so that every judge of a plan — the verifier
(``solver/judges/verify_reservations.py``), the CP-SAT model and the baselines — reads the same
rule, as they read who may evict whom from :mod:`gangplan.models.preemption`.

**The rule.** For a reservation R starting at T (None: unknown) and a node n it holds
``held[n]`` on, the pods a plan places on n of gangs that **may not backfill** R take, in
each resource R holds there, at most

    room(R, n, r) = max(0, free(n, r) + released(n, T, r) - held(n, r))

where ``free`` is what running pods leave now (:meth:`Snapshot.free
<gangplan.models.Snapshot.free>`) and ``released`` what the running pods of n expected to
end by T request (``RunningPod.expected_end`` <= T; nothing when T is unknown). A gang may
backfill R when it is R's own gang, or when T is known and the gang declares an expected
duration d (``Gang.expected_duration_s``) with now + d <= T. Without declared durations
nothing is backfilled onto held capacity: the held nodes drain until the gang fits. Amounts
are node totals (milli-CPU, bytes, milli-GPU, NIC milli-units), not device ids.

Reservations never share a node (:mod:`gangplan.solver.cycle.reservations` gives each node to one
reservation), so each node's rule stands alone.
"""

from __future__ import annotations

from collections import Counter
from functools import cached_property
from typing import TYPE_CHECKING

from pydantic import Field, NonNegativeInt, PositiveInt

from gangplan.models.base import Frozen, K8sName, Name, gang_key

if TYPE_CHECKING:
    from gangplan.models.snapshot import Gang, Snapshot

__all__ = ["HeldNode", "Reservation", "ReservationRules", "ReservationSettings"]


class ReservationSettings(Frozen):
    """Whether starving gangs get reservations this cycle.

    ``enabled``: a pending gang pending longer than ``reserve_after_s`` (seconds since its
    ``creation_time``, on the cycle's clock :attr:`PreemptionSettings.now
    <gangplan.models.PreemptionSettings.now>`) gets one; ``max_reservations``: at most this
    many gangs at once, the first in queue order (priority, then the longest waiting): 1 is
    EASY backfilling (only the head of the queue is protected), more is closer to
    conservative backfilling (Mu'alem and Feitelson, 2001).
    """

    enabled: bool = False
    reserve_after_s: float = Field(600.0, ge=0, allow_inf_nan=False)
    max_reservations: PositiveInt = 1


class HeldNode(Frozen):
    """What a reservation holds on one node: the amounts its gang will take there
    (base units: milli-CPU, bytes, milli-GPU)."""

    node: Name
    resources: dict[Name, NonNegativeInt]


class Reservation(Frozen):
    """Capacity held for the pending gang ``namespace/gang`` (module docstring).

    ``level`` and ``domain``: the domain chosen (``domain`` its path joined by ``/``;
    level ``cluster`` for the whole cluster, ``node`` for one node); ``start``: when the
    gang is expected to be able to start there (s, the cycle's clock), None when unknown
    (some of the capacity it needs is held by running pods with no expected end);
    ``held``: per node, what it holds.
    """

    gang: K8sName
    namespace: K8sName = "default"
    level: Name
    domain: str
    start: float | None = Field(None, allow_inf_nan=False)
    held: tuple[HeldNode, ...] = ()

    @property
    def key(self) -> str:
        """The reserved gang's key, ``namespace/gang``."""
        return gang_key(self.namespace, self.gang)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(h.node for h in self.held)

    def describe(self, now: float) -> str:
        """``leaf s0/r3 from t=1200 s (in 600 s)``, or ``... from an unknown time``."""
        where = "the cluster" if self.level == "cluster" else f"{self.level} {self.domain}"
        if self.start is None:
            when = "from an unknown time (running pods there declare no end)"
        elif self.start <= now:
            when = "from now"
        else:
            when = f"from t={self.start:g} s (in {self.start - now:g} s)"
        return f"{where}, {len(self.held)} node(s) held, {when}"


class ReservationRules:
    """The reservations a plan must respect (the snapshot's) and what they allow (module
    docstring); every answer is a function of the snapshot alone."""

    def __init__(self, snapshot: Snapshot, reservations: tuple[Reservation, ...] | None = None):
        self.snapshot = snapshot
        self.reservations = snapshot.reservations if reservations is None else reservations

    @property
    def now(self) -> float:
        return self.snapshot.preemption_rules.now

    def may_backfill(self, gang: Gang, res: Reservation) -> bool:
        """May ``gang``'s pods use ``res``'s held capacity? Its own gang, or a gang expected
        to end (now + ``expected_duration_s``) by the reservation's known start."""
        if gang.key == res.key:
            return True
        d = gang.expected_duration_s
        return res.start is not None and d is not None and self.now + d <= res.start

    def released(self, node: str, start: float | None) -> Counter[str]:
        """What the running pods of ``node`` expected to end by ``start`` request (nothing
        when ``start`` is None)."""
        out: Counter[str] = Counter()
        if start is None:
            return out
        for pod in self.snapshot.running_on(node):
            if pod.expected_end is not None and pod.expected_end <= start:
                out.update(pod.requests)
        return out

    def room(self, res: Reservation, held: HeldNode) -> dict[str, int]:
        """Per resource ``res`` holds on ``held.node``: what pods of gangs that may not
        backfill it may take there (module docstring)."""
        free = self.snapshot.free(held.node).resources
        released = self.released(held.node, res.start)
        return {
            r: max(0, free.get(r, 0) + released.get(r, 0) - amount)
            for r, amount in held.resources.items()
        }

    @cached_property
    def by_node(self) -> dict[str, tuple[Reservation, HeldNode]]:
        """node -> the reservation holding it and what it holds there."""
        out: dict[str, tuple[Reservation, HeldNode]] = {}
        for res in self.reservations:
            for h in res.held:
                out.setdefault(h.node, (res, h))
        return out
