"""The model's build: index, variables, constraint families and objective terms, under a
guard that stops a build past its bounds.

:func:`build_model` runs the steps in order —
:func:`~gangplan.solver.model.indexing.build_index` (items, shapes, candidates, blocks),
:class:`~gangplan.solver.model.variables.Variables`, every family of
:class:`~gangplan.solver.model.constraints.Constraints` (the hard rules), then
:func:`~gangplan.solver.model.objective.build_terms` (one term per score entry) — and checks
after each step, and inside the steps built node by node, that the model is still worth
building (:class:`BuildGuard`): at most :data:`MAX_VARIABLES` variables, and the build alone
within :data:`BUILD_SHARE` of the model's time. A large cycle must not spend its time
building a model it cannot solve; a stopped build returns the incumbent.

The build's clock (:class:`BuildClock`) is the wall clock, or in deterministic mode the
deterministic seconds the build is charged (:func:`build_units`), so that a deterministic
cycle stops its build at the same point on any machine.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from gangplan.models import Plan, PodPlacement
from gangplan.solver.budget import WORK_UNITS_PER_SECOND
from gangplan.solver.context import CycleContext
from gangplan.solver.model.constraints import Constraints
from gangplan.solver.model.indexing import Index, build_index
from gangplan.solver.model.objective import PROJECT_FROM, BuildStopped, ObjectiveTerm, build_terms
from gangplan.solver.model.outcome import ModelOutcome
from gangplan.solver.model.variables import Variables
from gangplan.solver.result import CycleStatus, SolverConfig

__all__ = [
    "BUILD_SHARE",
    "MAX_VARIABLES",
    "BuildClock",
    "BuildGuard",
    "BuiltModel",
    "build_model",
    "build_units",
]

MAX_VARIABLES = 400_000
"""Above this many variables the built model is not solved; the incumbent is returned."""
BUILD_SHARE = 0.7
"""The share of the model's time (what the cycle leaves it) its build may take: the rest
completes the incumbent into a hint and searches. A build past it stops, and the incumbent
is returned (on openb at 11-12 s a build that took all of it overran the cycle by 1.3 s)."""


def build_units(meter_units: int, size: Mapping[str, int]) -> int:
    """The work units a model's build is charged on the deterministic clock
    (:mod:`gangplan.solver.budget`): the cluster states' node evaluations made during it
    (``meter_units``) and the model's variables and constraints (``size``, a
    :attr:`~gangplan.solver.model.outcome.ModelOutcome.model_size`)."""
    return meter_units + size.get("variables", 0) + size.get("constraints", 0)


@dataclass
class BuildClock:
    """The build's own clock, started at ``started`` (``time.monotonic()``): wall seconds,
    or with ``deterministic`` the deterministic seconds the build is charged
    (:func:`build_units`: the node evaluations of ``ctx``'s meter since the clock was made,
    the model's variables and constraints)."""

    ctx: CycleContext
    deterministic: bool
    started: float
    units0: int = field(init=False)

    def __post_init__(self) -> None:
        self.units0 = self.ctx.meter.units

    def charged(self, size: Mapping[str, int]) -> float:
        """Deterministic seconds charged for a model of ``size`` (variables, constraints)."""
        return build_units(self.ctx.meter.units - self.units0, size) / WORK_UNITS_PER_SECOND

    def read(self, model: cp_model.CpModel) -> float:
        """The time ``model``'s build has taken so far, on this clock."""
        if not self.deterministic:
            return time.monotonic() - self.started
        proto = model.proto
        return self.charged(
            {"variables": len(proto.variables), "constraints": len(proto.constraints)}
        )


class BuildGuard:
    """Stops a build past its bounds: more than :data:`MAX_VARIABLES` variables, or the
    build's time (:class:`BuildClock`) past :data:`BUILD_SHARE` of the model's time
    (``budget_s`` wall seconds; in deterministic mode ``cfg.deterministic_time``, or the
    time limit, deterministic seconds).

    A group built in steps reports the share of it built: 0.0 when its work begins, 1.0 when
    it is built. From :data:`~gangplan.solver.model.objective.PROJECT_FROM` of it on, its time
    is projected to its end (``since + (now - since) / share``), so a group that cannot fit
    stops early. :meth:`check` raises
    :class:`~gangplan.solver.model.objective.BuildStopped` carrying the
    :class:`~gangplan.solver.model.outcome.ModelOutcome` to return (the incumbent's), with
    ``projection`` true when the time is not yet spent (leaving the group out can still save
    the build: the expected-fragmentation term does, ``objective.py``).
    """

    def __init__(
        self,
        clock: BuildClock,
        model: cp_model.CpModel,
        ix: Index,
        cfg: SolverConfig,
        budget_s: float,
    ) -> None:
        self.clock, self.model, self.ix = clock, model, ix
        self.model_s = (
            (cfg.deterministic_time or cfg.time_limit_s) if cfg.deterministic else budget_s
        )
        self.build_s = BUILD_SHARE * self.model_s
        self.unit = "deterministic s" if cfg.deterministic else "s"
        self.group_start = 0.0
        """when (on the build's clock) the group being built began"""

    def check(self, after: str, share: float = 1.0) -> None:
        """Raise :class:`~gangplan.solver.model.objective.BuildStopped` if the build, ``share``
        into ``after`` (a family or a group of terms), is past its bounds or on course to be."""
        n = len(self.model.proto.variables)
        took = self.clock.read(self.model)
        since = self.group_start
        if share >= 1.0 or share == 0.0:
            self.group_start = took
        projected = share < 1.0 and share >= PROJECT_FROM
        took_end = since + (took - since) / share if projected else took
        if n <= MAX_VARIABLES and took_end <= self.build_s:
            return
        ahead = "on course for " if projected else ""
        why = (
            f"{n:,} variables, over {MAX_VARIABLES:,}"
            if n > MAX_VARIABLES
            else f"{ahead}{took_end:.2f} {self.unit}, over the {self.build_s:.2f} {self.unit} "
            f"the build may take of the model's {self.model_s:.2f} {self.unit}"
        )
        where = f"after {after}" if share >= 1.0 else f"{int(100 * share)}% into {after}"
        ix = self.ix
        outcome = ModelOutcome(
            CycleStatus.INCUMBENT,
            None,
            model_size={"variables": n, "items": len(ix.items), "blocks": len(ix.blocks)},
            notes=[*ix.notes, f"model build stopped {where} ({why}); incumbent returned"],
            parts={"model": time.monotonic() - self.clock.started},
        )
        projection = projected and n <= MAX_VARIABLES and took <= self.build_s
        raise BuildStopped(why, outcome, projection=projection)


@dataclass
class BuiltModel:
    """A model built whole: what the search and the read-back need."""

    model: cp_model.CpModel
    ix: Index
    v: Variables
    terms: list[ObjectiveTerm]
    """one per score entry, in the score's order"""
    size: dict[str, int]
    """variables, constraints, items, shapes, blocks and gangs left out"""
    notes: list[str]
    """the index's notes and the terms'"""
    search_budget: float
    """deterministic seconds left for the search (``cfg.deterministic_time`` or the time
    limit, less the build's charge in deterministic mode)"""


def build_model(
    ctx: CycleContext,
    cfg: SolverConfig,
    previous: Plan | None,
    incumbent: list[PodPlacement],
    budget_s: float,
    started: float,
) -> BuiltModel | ModelOutcome:
    """Build the cycle's model (module docstring) within its share of ``budget_s`` seconds
    counted from ``started`` (``time.monotonic()``).

    Returns the :class:`BuiltModel`, or the :class:`~gangplan.solver.model.outcome.ModelOutcome`
    to return at once: ``OPTIMAL`` with no pods when nothing can be placed, ``INCUMBENT``
    when the build stopped (its note says where and why)."""
    clock = BuildClock(ctx, cfg.deterministic, started)
    ix = build_index(ctx, cfg, previous, incumbent)
    if not ix.items:
        return ModelOutcome(CycleStatus.OPTIMAL, [], notes=[*ix.notes, "nothing can be placed"])
    model = cp_model.CpModel()
    v = Variables(model, ix)
    guard = BuildGuard(clock, model, ix, cfg, budget_s)
    try:
        _add_constraints(Constraints(model, ix, v), guard)
        terms = _add_terms(model, ix, v, ctx, previous, guard)
    except BuildStopped as stopped:
        assert isinstance(stopped.outcome, ModelOutcome)
        return stopped.outcome
    proto = model.proto
    size = {
        "variables": len(proto.variables),
        "constraints": len(proto.constraints),
        "items": len(ix.items),
        "shapes": len(ix.shapes),
        "blocks": len(ix.blocks),
        "gangs_left_out": len(ix.left_out),
    }
    search_budget = cfg.deterministic_time or cfg.time_limit_s
    if cfg.deterministic:
        # the build is charged as the cycle charges it (build_units): the search gets the rest
        search_budget -= clock.charged(size)
    notes = [*ix.notes, *(t.note for t in terms if t.note)]
    return BuiltModel(model, ix, v, terms, size, notes, search_budget)


def _add_constraints(constraints: Constraints, guard: BuildGuard) -> None:
    """Every family, checked after each. A family built node by node reports its progress,
    so one that alone would take the build past its time stops inside it (on openb's 1,523
    nodes gpu_devices alone took up to a second of a 1 s cycle before the check after it)."""
    constraints.progress = lambda family, share: guard.check(f"family {family}", share)
    for family in Constraints.FAMILIES:
        constraints.add(family)
        guard.check(f"family {family}", 1.0)


def _add_terms(
    model: cp_model.CpModel,
    ix: Index,
    v: Variables,
    ctx: CycleContext,
    previous: Plan | None,
    guard: BuildGuard,
) -> list[ObjectiveTerm]:
    """The objective's terms, checked after each group (the expected-fragmentation term,
    which may be left out rather than stop the build, handles its own size: objective.py)."""
    prev_pods = len(previous.pods) if previous is not None else 0
    terms = build_terms(
        model,
        ix,
        v,
        ctx.shares,
        prev_pods,
        after_each=lambda after, share: guard.check(f"the objective's {after}", share),
        max_variables=MAX_VARIABLES,
    )
    guard.check("the objective's last terms", 1.0)
    return terms
