"""The plan a cycle returns: per gang admitted (with its size) or pending with a reason; per
pod its node and device ids; a summary of how it was found.

A plan refers to gangs by namespace and name and to pods by name, never by index, so it can
be written to a file (``kind: Plan``), read back and checked by ``gangplan verify`` against
the instance it was made for.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, NonNegativeInt

from gangplan.models.base import Frozen, gang_key

__all__ = [
    "GangOutcome",
    "PendingKind",
    "PendingReason",
    "Plan",
    "PlanSummary",
    "PodPlacement",
    "TierReport",
]

PendingKind = Literal["never_fits", "blocked", "lost"]


class PendingReason(Frozen):
    """Why a gang stays pending, in one of DESIGN.md's three classes.

    ``never_fits``: not even on the empty cluster within its queue's max.
    ``blocked``: it would fit the empty cluster, but not what running pods leave, or its
    queue's headroom. ``lost``: it could fit now, but other gangs took the room this cycle.
    ``message`` names the binding constraint and the numbers, e.g. "needs 16 H100 GPUs
    inside one leaf; the largest free leaf has 12".
    """

    kind: PendingKind
    message: str


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
