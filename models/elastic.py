"""Elastic gangs across cycles: how a snapshot says that a running elastic gang may grow.

An elastic gang admitted below its full size (``Gang.min_member`` <= pods placed < full
size) keeps its pods as **running pods** of the snapshot (``RunningPod.gang`` its name,
``RunningPod.min_member`` its minimum: the pods above it are what a shrink may take back,
through preemption's elastic victims, :mod:`gangplan.models.preemption`). Its **room to
grow** is a pending gang of the *same* namespace and name — a **growth gang** — whose roles
count the pods still missing (full size minus running, per role), with ``min_member`` 1 and
no role minimum, so any number of them from 0 (not admitted) to all may be placed: the
snapshot's ordinary rules then give growth its meaning — new pods only, the running ones
untouched; never past the full size (the growth gang's counts); never past the queue's
max (its usage counts the running pods). Its pods need their own names (``Role.pod_names``),
unique beside the running ones.

A judge keeps the gang whole where it matters: the score's and the model's locality count
the domains a growth gang's new pods add to those its running pods use
(:func:`growing_nodes`); the reservation step gives a growth gang no reservation (it is
running already).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from gangplan.models.base import gang_key

if TYPE_CHECKING:
    from gangplan.models.snapshot import Gang, Role, Snapshot

__all__ = ["growing_nodes", "growth_gang"]


def growing_nodes(snapshot: Snapshot) -> dict[str, list[str]]:
    """Pending gangs that are growth gangs (running pods share their key) -> the nodes of
    those running pods, in snapshot order (a node once per pod)."""
    pending = snapshot.gang_by_key
    out: dict[str, list[str]] = defaultdict(list)
    for pod in snapshot.running:
        if pod.gang is not None:
            key = gang_key(pod.namespace, pod.gang)
            if key in pending:
                out[key].append(pod.node)
    return dict(out)


def growth_gang(gang: Gang, running: dict[str, int], names: dict[str, list[str]]) -> Gang | None:
    """The growth gang of elastic ``gang`` with ``running`` pods per role (module docstring);
    ``names``: per role, the names its new pods take (at least as many as missing). None
    when nothing is missing.

    Raises:
        ValueError: too few names for a role.
    """
    roles: list[Role] = []
    for r in gang.roles:
        missing = r.count - running.get(r.name, 0)
        if missing <= 0:
            continue
        pods = names.get(r.name, [])
        if len(pods) < missing:
            raise ValueError(f"gang {gang.key}: role {r.name!r} needs {missing} pod names")
        roles.append(
            r.model_copy(
                update={"count": missing, "min_member": 0, "pod_names": tuple(pods[:missing])}
            )
        )
    if not roles:
        return None
    return gang.model_copy(update={"roles": tuple(roles), "min_member": 1})
