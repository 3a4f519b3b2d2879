"""The verifier's checks of held capacity (:mod:`gangplan.models.reservation`), run by
:func:`gangplan.solver.judges.verify.verify` with the others.

Like the rest of the verifier it imports only :mod:`gangplan.models`, whose
:class:`~gangplan.models.ReservationRules` define what a reservation allows — no OR-Tools,
no placer, no reservation step. The reservations checked are the snapshot's and the plan's
(a plan carries the reservations it was made under; a plan cannot drop one the snapshot
has). The rules:

* ``reservation`` — a plan's reservation names a pending gang of the snapshot and nodes of
  the snapshot, and no node is held by two reservations;
* ``held_capacity`` — on each node a reservation holds, the pods the plan places there of
  gangs that may not backfill it (not its own gang, and not expected to end before its
  start) take at most ``room`` in each resource it holds: what running pods leave now, plus
  what those expected to end by its start request, minus what it holds, never below 0.
  Counted in node totals (milli-GPU, not device ids), from the snapshot alone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Protocol

from gangplan.models import (
    Gang,
    Plan,
    PodPlacement,
    Reservation,
    ReservationRules,
    Role,
    Snapshot,
    format_quantity,
)

__all__ = ["RESERVATION_CHECKS", "check_held_capacity", "check_reservations"]


class _Ctx(Protocol):
    snapshot: Snapshot
    plan: Plan
    pods: list[tuple[PodPlacement, Gang, Role]]


def _in_force(ctx: _Ctx) -> tuple[Reservation, ...]:
    """The snapshot's reservations, then the plan's for gangs the snapshot has none for."""
    own = {r.key for r in ctx.snapshot.reservations}
    return (*ctx.snapshot.reservations, *(r for r in ctx.plan.reservations if r.key not in own))


def check_reservations(ctx: _Ctx) -> Iterator[tuple[str, str]]:
    """A plan's reservations name pending gangs and nodes of the snapshot; one per node."""
    s = ctx.snapshot
    held_by: dict[str, str] = {}
    for res in _in_force(ctx):
        if res.key not in s.gang_by_key:
            yield ("reservation", f"reservation for {res.key!r}: no such pending gang")
        for h in res.held:
            if h.node not in s.node_by_name:
                yield ("reservation", f"reservation for {res.key!r}: unknown node {h.node!r}")
            elif held_by.setdefault(h.node, res.key) != res.key:
                yield (
                    "reservation",
                    f"node {h.node!r} is held for both {held_by[h.node]!r} and {res.key!r}",
                )


def check_held_capacity(ctx: _Ctx) -> Iterator[tuple[str, str]]:
    """No pod of a gang that may not backfill a reservation takes its held capacity."""
    s = ctx.snapshot
    reservations = _in_force(ctx)
    if not reservations:
        return
    rules = ReservationRules(s, reservations)
    on_node: dict[str, list[tuple[PodPlacement, Gang, Role]]] = defaultdict(list)
    for p, gang, role in ctx.pods:
        on_node[p.node].append((p, gang, role))
    for res in reservations:
        for h in res.held:
            if h.node not in s.node_by_name:
                continue
            took: Counter[str] = Counter()
            who: list[str] = []
            for p, gang, role in on_node.get(h.node, ()):
                if not rules.may_backfill(gang, res):
                    took.update(role.requests)
                    who.append(p.pod)
            if not who:
                continue
            for r, room in rules.room(res, h).items():
                if took.get(r, 0) > room:
                    when = "an unknown time" if res.start is None else f"t={res.start:g} s"
                    yield (
                        "held_capacity",
                        f"node {h.node!r} is held for {res.key!r} from {when}: pods "
                        f"{', '.join(repr(x) for x in who[:5])} of gangs that may not backfill "
                        f"it take {format_quantity(r, took[r])} of {r}, above the "
                        f"{format_quantity(r, room)} it leaves",
                    )


RESERVATION_CHECKS = (check_reservations, check_held_capacity)
"""The reservation checks, in the order :func:`~gangplan.solver.judges.verify.verify` runs them;
each yields ``(rule, message)`` pairs."""
