"""The lexicographic search: one CP-SAT solve per score entry, best first, each later entry
optimised with the ones before it fixed at their value.

:class:`LexicographicSearch` takes a built model (:class:`~gangplan.solver.model.build.
BuiltModel`), a hint and its time (:class:`SearchLimits`), and

1. completes the hint — the incumbent (best baseline plan) as values of every decision
   variable (:meth:`~gangplan.solver.model.variables.Variables.hint`) — into a full solution
   of the model (:func:`complete_hint`; CP-SAT may drop an incomplete or infeasible hint);
2. for each term in order: hints the best solution so far that meets every tier fixed
   before, maximises the term within its share of the time left (its weight over the
   weights left), and fixes ``term >= value`` (Gurobi's and CP-SAT's usual lexicographic
   scheme: maximise, fix, next). A term that the best solution already takes to its ceiling
   is fixed without a solve; out of time, a term is fixed where the best solution has it.
3. On a model of at least :data:`~gangplan.solver.model.neighbourhood.MIN_DECISIONS`
   decision variables, a tier's time goes partly (:data:`LNS_WHOLE_SHARE`) to one solve of
   the whole model and the rest to neighbourhood steps around the best solution
   (:func:`~gangplan.solver.model.neighbourhood.improve`).

Every solution kept is a solution of the whole model, so a tier never ends below what the
incumbent had. The result (:class:`SearchResult`) is the last solution that meets every
tier, with a report per tier; turning it into pods is the read-back's
(:mod:`gangplan.solver.model.readback`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from gangplan.models import TierReport
from gangplan.solver.budget import SearchStop
from gangplan.solver.model.build import BuiltModel
from gangplan.solver.model.neighbourhood import MIN_DECISIONS as LNS_MIN_DECISIONS
from gangplan.solver.model.neighbourhood import Neighbourhoods, Pace, StepLimits, improve
from gangplan.solver.model.objective import ObjectiveTerm
from gangplan.solver.result import SolverConfig

__all__ = [
    "LexicographicSearch",
    "SearchLimits",
    "SearchResult",
    "complete_hint",
    "solver_params",
    "step_limits",
]

PRESOLVE_MIN_S = 1.0
"""Tiers given less time than this are solved without CP-SAT's presolve (measured, see
:func:`solver_params`)."""
PRESOLVE_MIN_VARIABLES = 2_500
"""Models of fewer variables are solved without CP-SAT's presolve, whatever the time: on the
generated 64-node fat-trees (832 and 1,664 variables) and the embedded default instance
(2,159) a tier with presolve ended unproven after its whole slice (``p10.gpu_milli`` at a
50% and 25% gap; ``locality.node`` and ``fragmentation.gpu_nodes`` on the default), which
without it were proven, the first in 0.02 s; at 512 nodes (3,530 and 7,207 variables) the
plan with presolve scored higher at ``p100.fairness`` (5 s, one run each)."""
LNS_WHOLE_SHARE = 0.3
"""With neighbourhood search on (a model of at least
:data:`~gangplan.solver.model.neighbourhood.MIN_DECISIONS` decision variables), the share of
a tier's time given to one solve of the whole model first (its bound is the tier's); the
rest goes to neighbourhood steps."""
STEP_MARGIN_S = 0.05
"""Wall seconds kept at the end of a tier for CP-SAT to end its last neighbourhood step (a
step runs on a little past its limit)."""
MIN_STEP_SHARE = 0.3
"""A neighbourhood step is not started with less than this share of the pace's step length
left in its tier (wall-clock mode)."""
WHOLE_OVERRUN_S = 0.05
"""Wall seconds a tier's slice allows for its solve of the whole model to run past its
limit, so that the one step the slice was made for still gets its full length."""
MIN_SLICE_S = 0.1
"""The least time a tier is given while time is left; below it, tiers are kept as they are."""
MIN_DET_LEFT = 0.002
"""Deterministic seconds below which no tier is solved (deterministic mode)."""


def run_solver(solver: cp_model.CpSolver, model: cp_model.CpModel, stop: SearchStop | None) -> Any:
    """``solver.solve(model)``, stoppable through ``stop`` when given."""
    return solver.solve(model) if stop is None else stop.run(solver, model)


def complete_hint(
    model: cp_model.CpModel,
    hint: dict[int, int],
    cfg: SolverConfig,
    seconds: float,
    stop: SearchStop | None = None,
) -> cp_model.CpSolver | None:
    """Fix the decision variables to ``hint``'s values (proto index -> value) in a copy of
    the model and let CP-SAT fill in every auxiliary variable: a complete, feasible hint (the
    CP-SAT primer, d-krupke, on hints: CP-SAT may drop an incomplete or infeasible one).

    ``seconds``: wall seconds; in deterministic mode a fifth of the deterministic budget
    (0.005 to 5 deterministic seconds). Returns the solver holding the completed solution,
    or None when CP-SAT found none in time (or the hint is infeasible)."""
    trial = model.clone()
    for idx, val in hint.items():
        var = trial.get_int_var_from_proto_index(idx)
        trial.add(var == val)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = cfg.seed
    solver.parameters.max_time_in_seconds = seconds
    if cfg.deterministic:
        det = cfg.deterministic_time or cfg.time_limit_s
        solver.parameters.max_deterministic_time = max(0.005, min(5.0, 0.2 * det))
        solver.parameters.max_time_in_seconds = max(60.0, seconds * 20)
    st = run_solver(solver, trial, stop)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return solver


def solver_params(
    solver: cp_model.CpSolver,
    cfg: SolverConfig,
    seconds: float,
    det_share: float,
    variables: int = PRESOLVE_MIN_VARIABLES,
) -> None:
    """Set one tier's solve of the whole model: ``seconds`` wall seconds, or in deterministic
    mode ``det_share`` deterministic seconds on one worker (wall time capped at 20 times
    ``seconds``, at least a minute, as a safety net). Wall-clock mode turns CP-SAT's presolve
    on only for a tier of at least :data:`PRESOLVE_MIN_S` on a model of at least
    :data:`PRESOLVE_MIN_VARIABLES` ``variables``."""
    p = solver.parameters
    p.random_seed = cfg.seed
    if cfg.deterministic:
        p.num_workers = 1
        p.max_deterministic_time = max(0.001, det_share)
        p.max_time_in_seconds = max(60.0, seconds * 20)
    else:
        p.num_workers = max(1, cfg.num_workers)
        p.max_time_in_seconds = max(0.01, seconds)
        # presolve pays off only with time to spare: on a 512-node cycle it alone takes
        # longer than a 0.3 s slice, and without it the hinted search improves at once;
        # on small models it loses proofs (PRESOLVE_MIN_VARIABLES)
        p.cp_model_presolve = seconds >= PRESOLVE_MIN_S and variables >= PRESOLVE_MIN_VARIABLES
    if cfg.relative_gap > 0:
        p.relative_gap_limit = cfg.relative_gap


def step_limits(
    cfg: SolverConfig, stop: SearchStop | None, until: float, det_left: float
) -> Callable[[float, float], StepLimits | None]:
    """The limits of each neighbourhood step of a tier whose time ends at ``until``
    (``time.monotonic()``), or in deterministic mode after ``det_left`` deterministic
    seconds; None once the time is up or a stop is requested."""

    def limits(det_spent: float, step: float) -> StepLimits | None:
        if stop is not None and stop.requested:
            return None
        if cfg.deterministic:
            left = det_left - det_spent
            if left < 0.002:
                return None
            return StepLimits(3600.0, min(step, left), 1, cfg.seed)
        # CP-SAT ends a step a little after its limit (loading, stopping the workers):
        # keep that margin inside the tier's time
        left = until - time.monotonic() - STEP_MARGIN_S
        if left < max(0.02, MIN_STEP_SHARE * step):
            return None  # a step this short would end before its presolve does
        return StepLimits(min(step, left), None, max(1, cfg.num_workers), cfg.seed)

    return limits


@dataclass(frozen=True)
class SearchLimits:
    """The search's time: the model's wall-clock time ends ``budget_s`` seconds after
    ``started`` (``time.monotonic()``, the build included); in deterministic mode the search
    has ``deterministic`` deterministic seconds (the hint's completion included)."""

    started: float
    budget_s: float
    deterministic: float

    def left(self) -> float:
        """Wall seconds left."""
        return self.budget_s - (time.monotonic() - self.started)


@dataclass
class SearchResult:
    """What the search found: ``solution`` the last solution that meets every tier (None:
    no model solution to use, the incumbent is returned), a report per term (in the terms'
    order; the values are the tiers' as fixed, the read-back restates them at ``solution``),
    whether every tier was proven, CP-SAT's deterministic time summed over every solve, the
    notes, and whether a stop was requested."""

    solution: cp_model.CpSolver | None
    reports: list[TierReport] = field(default_factory=list)
    optimal: bool = False
    deterministic_time: float = 0.0
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False


@dataclass
class _Slice:
    """One tier's time: wall seconds, deterministic seconds, and the share of it given to a
    solve of the whole model (the rest to neighbourhood steps; 1.0 without them)."""

    seconds: float
    deterministic: float
    whole: float


@dataclass
class _Solved:
    """What one tier's solves found: CP-SAT's status on the whole model (``UNKNOWN`` when it
    was not solved), its solver, the neighbourhood steps' best value (None: no improvement),
    whether the steps proved their value the tier's optimum, and whether they stalled."""

    status: Any
    solver: cp_model.CpSolver
    lns_value: int | None
    proven: bool
    stalled: bool

    @property
    def solved(self) -> bool:
        return bool(self.status in (cp_model.OPTIMAL, cp_model.FEASIBLE))


class _Incumbent(Exception):
    """A tier found no solution at all, and there was none before: the incumbent is returned."""


class LexicographicSearch:
    """The tier-by-tier search on a built model (module docstring).

    ``hint``: decision variables' proto index -> value (the incumbent's,
    :meth:`~gangplan.solver.model.variables.Variables.hint`); it also decides whether the
    neighbourhood search is on (at least
    :data:`~gangplan.solver.model.neighbourhood.MIN_DECISIONS` decisions). ``stop``: a
    request to stop (Ctrl-C) ends the search; the best solution so far is used.
    """

    def __init__(
        self,
        built: BuiltModel,
        cfg: SolverConfig,
        hint: dict[int, int],
        limits: SearchLimits,
        stop: SearchStop | None = None,
    ) -> None:
        self.built, self.model, self.cfg, self.limits, self.stop = (
            built,
            built.model,
            cfg,
            limits,
            stop,
        )
        self.hint = hint
        self.hood = Neighbourhoods.of(built.ix, built.v) if len(hint) >= LNS_MIN_DECISIONS else None
        self.pace = Pace.of(self.hood) if self.hood is not None else None
        self.whole_failed: float | None = None
        """LNS on: the length of the last solve of the whole model that returned no solution
        at all; a later tier solves the whole model again only when it can give it twice as
        long, else all its time goes to the steps"""
        self.rng = random.Random(cfg.seed)
        self.pool: list[cp_model.CpSolver] = []
        """every full solution found so far (the completed incumbent first), kept as solvers
        holding their last response: before each tier the best of them that meets every
        tier fixed so far is the hint, so a tier never ends below what the incumbent had"""
        self.fixed: list[tuple[cp_model.LinearExprT, int]] = []
        self.det_used = 0.0
        self.notes: list[str] = []
        self.reports: list[TierReport] = []
        self.optimal = True

    @property
    def interrupted(self) -> bool:
        return self.stop is not None and self.stop.requested

    def start(self) -> None:
        """Complete the hint into the first solution of the pool (within half the wall
        time left); where it cannot be completed, hint the model with it as it is."""
        seconds = max(0.05, self.limits.left() * 0.5)
        first = complete_hint(self.model, self.hint, self.cfg, seconds, self.stop)
        if first is None:
            self.notes.append(
                "the incumbent could not be completed into a model solution; partial hint used"
            )
            for idx, val in self.hint.items():
                self.model.add_hint(self.model.get_int_var_from_proto_index(idx), val)
            return
        self.det_used += first.response_proto.deterministic_time
        self.pool.append(first)

    def run(self) -> SearchResult:
        """Every tier in order (after :meth:`start`)."""
        terms = self.built.terms
        remaining_w = sum(t.weight for t in terms if t.expr is not None)
        try:
            for term in terms:
                if term.expr is None:
                    status = "constant" if term.modelled else "derived (not in the model)"
                    self.reports.append(TierReport(name=term.name, value=term.const, status=status))
                    continue
                remaining_w -= term.weight
                self._tier(term, term.expr, remaining_w)
        except _Incumbent:
            return self._result(None)
        final = [sol for sol in self.pool if self._meets(sol)]
        return self._result(final[-1] if final else None)

    def _result(self, solution: cp_model.CpSolver | None) -> SearchResult:
        return SearchResult(
            solution,
            self.reports,
            self.optimal,
            self.det_used,
            self.notes,
            interrupted=self.interrupted,
        )

    # ------------------------------------------------------------------ one tier

    def _tier(self, term: ObjectiveTerm, expr: cp_model.LinearExprT, remaining_w: float) -> None:
        """Optimise ``term`` (``remaining_w``: the weights of the terms after it) and fix it."""
        candidates = [sol for sol in self.pool if self._meets(sol)]
        best = max(candidates, key=lambda sol: sol.value(expr), default=None)
        current = int(best.value(expr)) if best is not None else None
        if current is not None and term.upper is not None and current >= term.upper:
            # the best solution reaches a bound this term can never exceed
            self._report(
                TierReport(
                    name=term.name,
                    value=current + term.const,
                    bound=term.upper + term.const,
                    gap=0.0,
                    status="optimal",
                ),
                expr,
                current,
            )
            return
        left = self.limits.left()
        interrupted = self.interrupted
        if self.cfg.deterministic:
            out_of_time = self.limits.deterministic - self.det_used < MIN_DET_LEFT
        else:
            out_of_time = left < MIN_SLICE_S
        if (out_of_time or interrupted) and current is not None:
            # out of time: keep this tier where it is, so lower tiers cannot undo it
            why = "interrupted" if interrupted else "time"
            report = TierReport(
                name=term.name, value=current + term.const, status=f"not optimised ({why})"
            )
            self._report(report, expr, current, optimal=False)
            return
        if best is not None:
            self._use_hint(best)
        share = term.weight / (term.weight + remaining_w)
        slice_ = self._slice(left, share, lns=self._lns_on(best))
        got = self._solve(term, expr, best, slice_)
        if got.solved:
            self._report_solved(term, expr, got, current)
        else:
            self._report_unsolved(term, expr, got, current)

    def _lns_on(self, best: cp_model.CpSolver | None) -> bool:
        return self.hood is not None and self.pace is not None and best is not None

    def _slice(self, left: float, share: float, *, lns: bool) -> _Slice:
        """The tier's time: its ``share`` of what is ``left``, at least :data:`MIN_SLICE_S`.
        With neighbourhood steps, a slice too short for one step is wasted (the step ends
        with nothing): the tier gets one full step if the time left allows (with the step's
        margin and room for the whole model's solve to overrun a little); the tiers after
        it get less."""
        det_left = self.limits.deterministic - self.det_used
        slice_s = max(min(left, MIN_SLICE_S), left * share)
        det_slice = det_left * share
        if not lns or self.pace is None:
            return _Slice(slice_s, det_slice, 1.0)
        guess = LNS_WHOLE_SHARE if self.whole_failed is None else 0.0
        need = self.pace.step / (1 - guess)
        slice_s = max(slice_s, min(left, need + STEP_MARGIN_S + WHOLE_OVERRUN_S))
        det_slice = max(det_slice, min(det_left, need))
        span = det_slice if self.cfg.deterministic else slice_s
        retry = self.whole_failed is None or span * LNS_WHOLE_SHARE >= 2 * self.whole_failed
        return _Slice(slice_s, det_slice, LNS_WHOLE_SHARE if retry else 0.0)

    def _solve(
        self,
        term: ObjectiveTerm,
        expr: cp_model.LinearExprT,
        best: cp_model.CpSolver | None,
        slice_: _Slice,
    ) -> _Solved:
        """The tier's solve of the whole model (unless its slice gives it none), then its
        neighbourhood steps from the better of that solution and ``best``."""
        cfg, model, whole = self.cfg, self.model, slice_.whole
        lns = self._lns_on(best)
        tier_started = time.monotonic()
        solver = cp_model.CpSolver()
        model.maximize(expr)
        if whole > 0:
            variables = len(model.proto.variables)
            solver_params(
                solver, cfg, slice_.seconds * whole, slice_.deterministic * whole, variables
            )
            st = run_solver(solver, model, self.stop)
        else:
            st = cp_model.UNKNOWN
        whole_det = solver.response_proto.deterministic_time if whole > 0 else 0.0
        self.det_used += whole_det
        got = _Solved(st, solver, None, proven=False, stalled=False)
        if got.solved:
            self.pool.append(solver)
        elif lns and whole > 0 and st == cp_model.UNKNOWN:
            self.whole_failed = (
                slice_.deterministic if cfg.deterministic else slice_.seconds
            ) * whole
        hood, pace = self.hood, self.pace
        if lns and st != cp_model.OPTIMAL and best is not None and hood and pace:
            start = solver if got.solved and solver.value(expr) > best.value(expr) else best
            pace.kind = term.name.rsplit(".", 1)[-1]
            improved, lns_det, got.proven, got.stalled = improve(
                model,
                expr,
                start,
                hood,
                pace,
                limits=step_limits(
                    cfg, self.stop, tier_started + slice_.seconds, slice_.deterministic - whole_det
                ),
                run=lambda sv, m: run_solver(sv, m, self.stop),
                rng=self.rng,
            )
            self.det_used += lns_det
            self.pool.extend(improved)
            got.lns_value = int(improved[-1].value(expr)) if improved else None
        return got

    def _report_unsolved(
        self, term: ObjectiveTerm, expr: cp_model.LinearExprT, got: _Solved, current: int | None
    ) -> None:
        """The tier where the whole model gave no solution: the steps' value or the best
        solution's, bounded by the term's ceiling (or the steps' proof)."""
        lns_value = got.lns_value
        if got.status == cp_model.MODEL_INVALID:
            self.notes.append(f"model invalid: {self.model.validate()}")
        elif got.status == cp_model.INFEASIBLE:
            self.notes.append(f"tier {term.name}: infeasible (a bug: the empty plan is feasible)")
        elif lns_value is None and got.stalled:
            self.notes.append(
                f"tier {term.name}: neighbourhood steps in a row proved nothing better "
                "there; its time went to the next tiers"
            )
        elif lns_value is None:
            self.notes.append(f"tier {term.name}: no better solution within its time share")
        if current is None and lns_value is None:
            raise _Incumbent
        value = max(x for x in (current, lns_value) if x is not None)
        # no bound from the whole model: the term's own ceiling, or the steps' proof
        ceiling = value if got.proven else term.upper
        status = (
            "feasible (neighbourhood search)"
            if lns_value is not None
            else "not improved (neighbourhood search)"
            if got.stalled
            else "not improved (time)"
        )
        report = TierReport(
            name=term.name,
            value=value + term.const,
            bound=None if ceiling is None else ceiling + term.const,
            status=status,
        ).revalued(value + term.const)  # the gap, and optimal when it reaches the ceiling
        self._report(report, expr, value)

    def _report_solved(
        self, term: ObjectiveTerm, expr: cp_model.LinearExprT, got: _Solved, current: int | None
    ) -> None:
        """The tier where the whole model gave a solution: the best value found, bounded by
        CP-SAT's bound, the term's ceiling and the steps' proof."""
        solver = got.solver
        found = round(solver.objective_value)
        value = max(x for x in (found, current, got.lns_value) if x is not None)
        bound = round(solver.best_objective_bound)
        if term.upper is not None:
            bound = min(bound, term.upper)  # a bound the term can never pass is a valid one
        if got.proven:
            bound = min(bound, value)
        # proven only when the value reaches the whole model's bound: CP-SAT also says
        # OPTIMAL when it stops at ``relative_gap``
        report = TierReport(
            name=term.name, value=value + term.const, bound=bound + term.const, status="feasible"
        ).revalued(value + term.const)
        self._report(report, expr, value)

    # ------------------------------------------------------------------ bookkeeping

    def _report(
        self,
        report: TierReport,
        expr: cp_model.LinearExprT,
        value: int,
        *,
        optimal: bool | None = None,
    ) -> None:
        """Record the tier's ``report`` (it counts as proven when its status says so, or as
        ``optimal`` says) and fix ``expr >= value`` for the tiers after it."""
        self.optimal &= report.status == "optimal" if optimal is None else optimal
        self.reports.append(report)
        self.fixed.append((expr, value))
        self.model.add(expr >= value)

    def _meets(self, sol: cp_model.CpSolver) -> bool:
        return all(sol.value(e) >= lb for e, lb in self.fixed)

    def _use_hint(self, sol: cp_model.CpSolver) -> None:
        """Hint the model with ``sol``'s full solution."""
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        values = sol.response_proto.solution
        hint = self.model.proto.solution_hint
        hint.vars.extend(range(len(values)))
        hint.values.extend(values)
