"""The plan a cycle returns: per gang admitted (with its size) or pending with a reason; per
pod its node and device ids; per running pod it evicts, the gang it makes room for and why;
a summary of how it was found.

A plan refers to gangs by namespace and name and to pods by name, never by index, so it can
be written to a file (``kind: Plan``), read back and checked by ``gangplan verify`` against
the instance it was made for.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, NonNegativeInt

from gangplan.models.base import Frozen, gang_key
from gangplan.models.reservation import Reservation

__all__ = [
    "NOT_OPTIMISED",
    "Eviction",
    "GangOutcome",
    "PendingKind",
    "PendingReason",
    "Plan",
    "PlanSummary",
    "PodPlacement",
    "ReasonFamily",
    "TierReport",
    "open_status",
]

PendingKind = Literal["never_fits", "blocked", "lost"]

ReasonFamily = Literal[
    "no_nodes",
    "not_ready",
    "selector",
    "affinity",
    "taint",
    "gpu_model",
    "joint",
    "resource",
    "capacity",
    "topology",
    "fragmentation",
    "queue_max",
    "exact_check",
    "lost",
]
"""The constraint family that keeps a gang pending (see :class:`PendingReason`)."""


class PendingReason(Frozen):
    """Why a gang stays pending, in one of the three classes of docs/design.md, with the constraint
    that binds and its numbers, for a person (``message``) and for a program (the fields).

    ``kind`` — ``never_fits``: not even on the empty cluster within its queue's max;
    ``blocked``: it would fit the empty cluster, but not what running pods leave, or its
    queue's headroom; ``lost``: it could fit now, but other gangs took the room this cycle.

    ``family`` — the constraint:

    - ``no_nodes``: the cluster has none; ``not_ready``: every node not Ready or cordoned;
    - ``selector``: no node has the label ``label`` (``key=value``) its node selector asks;
      ``affinity``: no node matches its required node affinity; ``taint``: every node it
      selects has the taint ``label`` (``key=value:Effect``) no toleration matches;
      ``gpu_model``: no node of the GPU models ``label`` accepts; ``joint``: no node with a
      device layout for joint GPU/NIC allocation;
    - ``resource``: no node has ``needed`` of ``resource`` for one pod of ``role``
      (``available``: the most any node has);
    - ``capacity``: ``role`` has room for ``available`` of the ``needed`` pods it must have
      (``resource`` runs out first); without ``role``, an elastic gang's pods in all;
    - ``fragmentation``: enough whole GPUs in all, but too few together on one node: room for
      ``available`` of the ``needed`` pods of ``role``;
    - ``topology``: no domain of ``level`` holds the gang; the largest, ``domain``, holds
      ``available`` of its ``needed`` pods;
    - ``queue_max``: its queue ``queue`` caps ``resource``; the gang needs ``needed``,
      ``available`` is left;
    - ``exact_check``: every role fits on its own, an exact check of the gang alone says
      they do not fit together;
    - ``lost``: others took the room; ``lost_to``: the gangs that took it (at most 10,
      highest priority first).

    Amounts are in base units (milli-CPU, bytes, milli-GPU), as in the snapshot.
    ``message`` names the binding constraint and the numbers in words, e.g. "role
    'giant': no node has more than 8 GPUs (each pod asks 40)".
    """

    kind: PendingKind
    message: str
    family: ReasonFamily | None = None
    role: str | None = None
    resource: str | None = None
    needed: int | None = None
    available: int | None = None
    level: str | None = None
    domain: str | None = None
    queue: str | None = None
    label: str | None = None
    lost_to: tuple[str, ...] | None = None


class GangOutcome(Frozen):
    """One gang's result: ``placed`` pods (0 when pending), per role, and a reason if pending."""

    gang: str
    namespace: str = "default"
    admitted: bool
    placed: NonNegativeInt = 0
    roles: dict[str, NonNegativeInt] = Field(default_factory=dict)
    reason: PendingReason | None = None

    @property
    def key(self) -> str:
        """The gang's key, ``namespace/gang`` (as :attr:`Gang.key <gangplan.models.Gang.key>`)."""
        return gang_key(self.namespace, self.gang)


class PodPlacement(Frozen):
    """One pod bound to ``node``, with the device ids it is given.

    ``gpus``: GPU device ids; each whole, or, when ``gpu_milli`` is set (< 1000), a share of
    that many milli-GPU of the single listed GPU. ``nics``: RDMA NIC ids.
    """

    pod: str
    gang: str
    namespace: str = "default"
    role: str
    node: str
    gpus: tuple[str, ...] = ()
    gpu_milli: NonNegativeInt | None = None
    nics: tuple[str, ...] = ()

    @property
    def gang_key(self) -> str:
        """The key of the pod's gang, ``namespace/gang`` (as :attr:`Gang.key
        <gangplan.models.Gang.key>`)."""
        return gang_key(self.namespace, self.gang)


class Eviction(Frozen):
    """One running pod the plan evicts (policy/v1 ``Eviction``) to make room.

    ``pod``, ``namespace``, ``node``: the running pod; ``gang``: its running gang (None for
    a pod of no gang). ``for_gang``: the key (``namespace/name``) of the pending gang the
    plan admits in the room it frees; ``kind``: ``priority`` (a lower priority in the same
    queue), ``reclaim`` (a queue taking back its guaranteed amount) or ``move``
    (``gangplan replan``: the pod is placed anew, as gang ``for_gang``); ``reason``: a
    sentence with the numbers.
    """

    pod: str
    namespace: str = "default"
    gang: str | None = None
    node: str
    for_gang: str
    kind: Literal["priority", "reclaim", "move"]
    reason: str = ""


NOT_OPTIMISED = ("not optimised", "constant", "derived (not in the model)")
"""Tier statuses of entries no placer optimised: a baseline's, an entry the model holds as a
constant, one derived after the solve."""


def open_status(status: str) -> bool:
    """Whether a tier of this status was optimised but not proven optimal."""
    return status not in NOT_OPTIMISED and status != "optimal"


class TierReport(Frozen):
    """One score entry as a placer optimised it: value, and (for CP-SAT) bound and gap.

    ``gap`` is |bound - value| / max(1, |bound|); ``status`` says whether this entry was
    proven optimal, improved within the time limit, or not optimised (a baseline).
    """

    name: str
    value: int
    bound: int | None = None
    gap: float | None = None
    status: str = "not optimised"

    @property
    def optimised(self) -> bool:
        """Whether a placer optimised this entry (any status but :data:`NOT_OPTIMISED`:
        ``not optimised (time)`` counts, as an entry the model holds that got no time)."""
        return self.status not in NOT_OPTIMISED

    @property
    def open(self) -> bool:
        """Optimised but not proven optimal (:func:`open_status`)."""
        return open_status(self.status)

    def revalued(self, value: int) -> TierReport:
        """This entry with another ``value`` (e.g. the returned plan's own score entry): the
        gap recomputed against the bound, and the status ``optimal`` exactly when the value
        reaches the bound (a value below it is no longer called optimal). Without a bound
        only the value changes."""
        if self.bound is None:
            return self.model_copy(update={"value": value})
        gap = max(0, self.bound - value) / max(1, abs(value), abs(self.bound))
        if value >= self.bound:
            status = "optimal"
        elif self.status == "optimal":
            status = "feasible"
        else:
            status = self.status
        return self.model_copy(update={"value": value, "gap": round(gap, 6), "status": status})


class PlanSummary(Frozen):
    """How the plan was found: placer, status, score entries, time and model size."""

    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=())

    placer: str
    status: str
    tiers: tuple[TierReport, ...] = ()
    wall_time_s: float = 0.0
    parts: dict[str, float] = Field(
        default_factory=dict,
        description="wall seconds per part of the cycle (context, baseline.NAME, check, "
        "model, search, plan, reasons)",
    )
    model_size: dict[str, int] = Field(default_factory=dict)
    notes: tuple[str, ...] = ()


class Plan(Frozen):
    """A placement for one snapshot (``kind: Plan`` in a file)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    api_version: Literal["gangplan.io/v1alpha1"] = Field("gangplan.io/v1alpha1", alias="apiVersion")
    kind: Literal["Plan"] = "Plan"
    gangs: tuple[GangOutcome, ...] = ()
    pods: tuple[PodPlacement, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    """the capacity the plan held for starving gangs (:mod:`gangplan.models.reservation`)"""
    summary: PlanSummary | None = None

    def outcome(self, key: str) -> GangOutcome | None:
        """The outcome of gang ``namespace/name``, or None."""
        for g in self.gangs:
            if g.key == key:
                return g
        return None

    def pods_of(self, key: str) -> list[PodPlacement]:
        """The placements of gang ``key`` (``namespace/name``), in plan order."""
        return [p for p in self.pods if p.gang_key == key]

    def placed(self, name: str, namespace: str = "default") -> int:
        """Pods of gang ``namespace/name`` in the plan."""
        return len(self.pods_of(gang_key(namespace, name)))

    @property
    def evicted(self) -> frozenset[tuple[str, str]]:
        """The running pods the plan evicts, as ``(namespace, name)`` pairs."""
        return frozenset((e.namespace, e.pod) for e in self.evictions)
