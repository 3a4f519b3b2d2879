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

**Admission before growth** (``docs/design.md``, objective 1): within a priority class, the
pods that make up gangs' minimums rank above every pod beyond a minimum. A gang's
**minimum** is :func:`minimum_counts`: each role's own minimum, then the rest of the
gang's ``min_size`` from the roles whose pods ask the fewest GPUs (the cheapest way to
admit it; ties in role order). Every pod an admitted gang has beyond that — a pending
elastic gang's optional pods, all of a growth gang's pods (its minimum is empty: it is
running already) — is **growth**. A running elastic gang's pods beyond its
``min_member`` are growth too (:func:`running_minimum_gpu`): evicting them costs growth,
evicting the gang whole costs its minimum as well.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gangplan.models.base import gang_key

if TYPE_CHECKING:
    from gangplan.models.snapshot import Gang, Role, RunningPod, Snapshot

__all__ = ["growing_nodes", "growth_gang", "minimum_counts", "minimum_gang", "running_minimum_gpu"]


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


def minimum_counts(gang: Gang, gpu: str, growth: bool = False) -> dict[str, int]:
    """The pods per role of ``gang``'s minimum (module docstring): each role's
    :meth:`~gangplan.models.Gang.role_min`, then the rest of :attr:`~gangplan.models.Gang.
    min_size` from the roles asking the fewest of resource ``gpu`` per pod (ties in role
    order), never past a role's count. ``growth``: ``gang`` is a growth gang (its minimum
    is empty: every pod it gets is growth). Every role has an entry (0 where none)."""
    if growth:
        return {r.name: 0 for r in gang.roles}
    out = {r.name: min(r.count, gang.role_min(r)) for r in gang.roles}
    rest = gang.min_size - sum(out.values())
    for r in sorted(gang.roles, key=lambda r: r.requests.get(gpu, 0)):  # stable: role order
        if rest <= 0:
            break
        more = min(rest, r.count - out[r.name])
        out[r.name] += more
        rest -= more
    return out


def minimum_gang(gang: Gang, gpu: str) -> Gang:
    """``gang`` cut to its minimum (:func:`minimum_counts`), not elastic: what a placer
    admits before any growth. Roles of minimum 0 are left out; pod names are the first of
    each role's (``Role.pod_name``), so its pods keep their names in the whole gang."""
    counts = minimum_counts(gang, gpu)
    roles: list[Role] = []
    for r in gang.roles:
        n = counts[r.name]
        if n == 0:
            continue
        names = tuple(r.pod_name(gang.name, i) for i in range(n))
        roles.append(r.model_copy(update={"count": n, "min_member": n, "pod_names": names}))
    return gang.model_copy(update={"roles": tuple(roles), "min_member": None})


def running_minimum_gpu(pods: Sequence[RunningPod], min_member: int, gpu: str) -> int:
    """The milli-GPU of a running gang's minimum: its ``min_member`` pods asking the
    fewest of ``gpu`` (what evicting the gang whole costs beyond its growth; module
    docstring)."""
    asks = sorted(p.requests.get(gpu, 0) for p in pods)
    return sum(asks[:min_member])
