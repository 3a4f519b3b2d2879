"""Recovered flights are claims: each is checked against the API's own objects and by the
independent verifier before the loop continues it.

After a restart or a leader change the ledger is rebuilt from the pods' plan annotations
(:func:`~gangplan.adapters.serve.ledger.recover`, which already reads each annotation only for
the pod carrying it, in its own namespace, with its time clamped to now). Anyone who may
edit a pod may write that annotation, so before a recovered flight is continued — its pods
held and counted where it says, the rest of them bound there, or the gang taken back when
it breaks — :func:`vet_recovered` asks, on a snapshot of the cache in which the recovered
gangs are pending again:

* is the flight's gang one gangplan plans now (pending pods of a namespace it serves, its
  group read from the PodGroup and the pods' own labels and annotations, as for every
  cycle)?
* is every pod of the flight a member of that gang by those objects — a pending pod of it,
  or one of its running pods bound to the node the flight names?
* does the plan "the flight's pods not bound yet, where it says" pass the verifier on that
  snapshot (with the flights kept before it placed too: two claims on one GPU cannot both
  stand)? The verifier checks nodes, taints and tolerations, selectors, capacity, devices,
  the gang whole, queues (:func:`gangplan.solver.judges.verify.verify`).

A flight that fails is **dropped**: not held, not continued, never taken back — nothing is
written to its pods but a ``RecoveredPlanRefused`` Event on those carrying its annotation.
Its gang is planned again by the next cycles like any pending gang.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gangplan.adapters.serve.ledger import InFlight
from gangplan.models import PodPlacement, RunningPod, Snapshot
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import assemble_plan

__all__ = ["vet_recovered"]


def vet_recovered(
    flights: Iterable[InFlight], snapshot: Snapshot
) -> tuple[list[InFlight], list[tuple[InFlight, str]]]:
    """``(kept, dropped)`` of ``flights`` on ``snapshot`` (the cache with none of them held:
    their gangs pending, their bound pods running); ``dropped`` pairs each refused flight
    with why (module docstring). Flights are judged oldest first, each with those kept
    before it placed; a kept flight's placements get their role from the snapshot's gang.
    Never raises."""
    running = {(rp.namespace, rp.name): rp for rp in snapshot.running}
    kept: list[InFlight] = []
    dropped: list[tuple[InFlight, str]] = []
    placed: list[PodPlacement] = []
    for flight in sorted(flights, key=lambda f: (f.started, f.key)):
        why, pods = _members(flight, snapshot, running)
        if not why:
            violations = verify(snapshot, assemble_plan(snapshot, [*placed, *pods], {}))
            if violations:
                why = f"the verifier refuses it on the cluster now: {violations[0]}"
        if why:
            dropped.append((flight, why))
            continue
        for p in pods:
            flight.placements[p.pod] = p
        placed += pods
        kept.append(flight)
    return kept, dropped


def _members(
    flight: InFlight, snapshot: Snapshot, running: Mapping[tuple[str, str], RunningPod]
) -> tuple[str, list[PodPlacement]]:
    """Why ``flight`` is not its gang's by the snapshot ("" if it is), and its pods not
    bound yet as placements of the gang's roles."""
    gang = snapshot.gang_by_key.get(flight.key)
    if gang is None:
        return (
            f"gang {flight.key} is not one gangplan plans now (no pending pods of it in a "
            "namespace it serves, or its group is incomplete)",
            [],
        )
    role_of = {
        name: role.name
        for role in gang.roles
        for name in (role.pod_names or [role.pod_name(gang.name, i) for i in range(role.count)])
    }
    out = []
    for name, p in sorted(flight.placements.items()):
        who = f"pod {flight.namespace}/{name}"
        if name in flight.confirmed:
            rp = running.get((flight.namespace, name))
            if rp is None or rp.gang != gang.name:
                return f"{who} is not a member of gang {flight.key}", []
            continue
        if name not in role_of:
            return f"{who} is not a pending member of gang {flight.key}", []
        out.append(p.model_copy(update={"role": role_of[name], "gang": gang.name}))
    return "", out
