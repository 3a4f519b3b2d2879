"""A move plan: running gangs moved to new places in waves, so that the cluster ends in a
better state (``gangplan replan``; ``docs/solver.md``, "Replan: moves in waves").

A **move** evicts every running pod of one gang (policy/v1 ``Eviction``) and places the
same pods anew. Moves run in **waves**; wave *k* starts from the state the waves before it
left and

1. holds its targets (capacity kept in the ledger, or the re-created pods gated and pinned
   to their nodes), so nothing else takes the room;
2. evicts the pods of its gangs (``evict``), each gang whole;
3. places them (``place``), each gang whole, on the held targets.

So a wave's placements must fit what the earlier waves left once this wave's own evictions
are gone, and no state between two steps overcommits a node or leaves a gang partly placed.
Per wave, :class:`WaveLimits` caps the pods that move off one node and the pods of one
namespace, and every :class:`DisruptionBudget` its disruptions. After the last wave, the
pending gangs of ``final`` are placed; the running pods then stand where ``final`` says.

Names, never indices: a plan refers to gangs by ``namespace/name``, pods by name, so it can
be written to a file (``kind: MovePlan``), read back and checked by
:func:`gangplan.solver.judges.verify_moves.verify_moves` against the instance it was made for.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, NonNegativeInt, PositiveInt

from gangplan.models.base import Frozen
from gangplan.models.plan import Plan, PodPlacement

__all__ = [
    "DEFAULT_MAX_MOVING_PER_NODE",
    "DisruptionBudget",
    "GangMove",
    "LeftOut",
    "MovePlan",
    "MovedPod",
    "Wave",
    "WaveLimits",
]

DEFAULT_MAX_MOVING_PER_NODE = 2
"""Pods that may move off one node in one wave: Koordinator's descheduler default
(``defaultMaxMigratingPerNode = 2`` in ``pkg/descheduler/apis/config/v1alpha2/defaults.go``,
github.com/koordinator-sh/koordinator; its ``MigrationControllerArgs.maxMigratingPerNode``)."""


class DisruptionBudget(Frozen):
    """A policy/v1 PodDisruptionBudget as the wave planner counts it: the running pods it
    selects (``pods``, names in ``namespace``) and how many of them may be unavailable at
    once (``disruptions_allowed``, its ``status.disruptionsAllowed``). A moving pod is
    unavailable from its eviction until it runs again, i.e. within its wave."""

    name: str
    namespace: str = "default"
    pods: tuple[str, ...]
    disruptions_allowed: NonNegativeInt


class WaveLimits(Frozen):
    """Per-wave budgets (Koordinator's ``MigrationControllerArgs``, same meaning).

    ``max_moving_per_node``: pods that move off one node in one wave (default 2, Koordinator's
    ``maxMigratingPerNode``; None: no cap). ``max_moving_per_namespace``: pods of one
    namespace that move in one wave (Koordinator's ``maxMigratingPerNamespace``; unset by
    default there, None here: no cap). ``max_waves``: None, no cap. ``budgets``: the
    PodDisruptionBudgets every wave respects. A gang is evicted whole in one wave, so a
    gang with more pods on one node (or in one namespace) than a cap allows cannot move.
    """

    max_moving_per_node: PositiveInt | None = DEFAULT_MAX_MOVING_PER_NODE
    max_moving_per_namespace: PositiveInt | None = None
    max_waves: PositiveInt | None = None
    budgets: tuple[DisruptionBudget, ...] = ()


class MovedPod(Frozen):
    """One running pod of a move: where it runs now (``node``) and where it goes
    (``to``, with the device ids it gets there)."""

    pod: str
    namespace: str = "default"
    node: str
    to: PodPlacement


class GangMove(Frozen):
    """A whole running gang moved: ``gang`` is its running gang key (``namespace/name``, or
    ``namespace/pod`` for a pod of no gang) and ``pods`` every pod of it."""

    gang: str
    pods: tuple[MovedPod, ...] = Field(min_length=1)
    gpus: NonNegativeInt = 0
    """milli-GPU the gang's pods request in all"""


class Wave(Frozen):
    """One wave: hold the targets, evict ``moves``' pods, place them (module docstring)."""

    index: NonNegativeInt
    moves: tuple[GangMove, ...] = Field(min_length=1)

    @property
    def evict(self) -> tuple[MovedPod, ...]:
        """The pods this wave evicts (each with its target)."""
        return tuple(p for m in self.moves for p in m.pods)

    @property
    def place(self) -> tuple[PodPlacement, ...]:
        """The placements this wave makes."""
        return tuple(p.to for m in self.moves for p in m.pods)


class LeftOut(Frozen):
    """A move of the target plan that the waves do not make, and why."""

    gang: str
    reason: str


class MovePlan(Frozen):
    """The waves that take the cluster to ``final`` (``kind: MovePlan`` in a file).

    ``final``: the plan of the pending gangs in the state the waves leave (its pods are
    placed after the last wave); ``left_out``: moves of the target the waves could not make
    (budgets, or a cycle of moves that each need the others' room); ``limits``: the
    per-wave budgets the waves keep.
    """

    api_version: Literal["gangplan.io/v1alpha1"] = Field("gangplan.io/v1alpha1", alias="apiVersion")
    kind: Literal["MovePlan"] = "MovePlan"
    waves: tuple[Wave, ...] = ()
    final: Plan = Field(default_factory=Plan)
    left_out: tuple[LeftOut, ...] = ()
    limits: WaveLimits = Field(default_factory=WaveLimits)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @property
    def moves(self) -> tuple[GangMove, ...]:
        """Every move, wave by wave."""
        return tuple(m for w in self.waves for m in w.moves)

    @property
    def moved_gangs(self) -> int:
        return len({m.gang for m in self.moves})

    @property
    def moved_pods(self) -> int:
        return sum(len(m.pods) for m in self.moves)
