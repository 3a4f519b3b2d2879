"""What one run of the model returns to the cycle (:class:`ModelOutcome`), whichever step
ended it: the build (nothing to place, or stopped past its bounds), the search (no solution
to use) or the read-back (pods and evictions)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gangplan.models import Eviction, PodPlacement, TierReport
from gangplan.solver.result import CycleStatus

__all__ = ["ModelOutcome"]


@dataclass
class ModelOutcome:
    """What :func:`~gangplan.solver.model.builder.solve_model` found: the pods (None: no
    model solution to use), a report per score entry, the model's size and notes for the
    cycle's result."""

    status: CycleStatus
    pods: list[PodPlacement] | None
    evictions: list[Eviction] = field(default_factory=list)
    tiers: tuple[TierReport, ...] = ()
    model_size: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    parts: dict[str, float] = field(default_factory=dict)
    """wall seconds of ``model`` (index, variables, constraints, objective, hint), ``search``
    (every tier) and ``plan`` (counts to pods)"""
    deterministic_time: float = 0.0
    """CP-SAT's deterministic time, summed over every solve (the hint's completion included)"""
    interrupted: bool = False
    """the search was stopped on request (Ctrl-C) before its time was up"""
