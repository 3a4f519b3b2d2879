"""Build the CP-SAT model, solve it tier by tier, and turn counts back into pods and devices.

Overview (``solve_model``):

1. :func:`~gangplan.solver.model.indexing.build_index`: items, shapes, candidates, blocks;
2. :class:`~gangplan.solver.model.variables.Variables` and
   :class:`~gangplan.solver.model.constraints.Constraints` (the hard rules);
3. :func:`~gangplan.solver.model.objective.build_terms` (one term per score entry);
4. hint: the incumbent (best baseline plan) as values of every decision variable
   (:meth:`~gangplan.solver.model.variables.Variables.hint`), completed by CP-SAT into a
   full solution; each later tier is hinted with the best solution found so far;
5. lexicographic loop: maximise a term, fix ``term >= value``, next term;
6. :meth:`~gangplan.solver.model.variables.Variables.read` and :func:`disaggregate`:
   counts per node, per joint group and per GPU device become pods
   with node and device ids. The per-device and per-group counts are exact, so this step
   cannot fail for a solution of the model; the cycle still verifies the result and returns
   the incumbent if it ever does fail.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from gangplan.models import GPU_MILLI, Eviction, Gang, Plan, PodPlacement, TierReport
from gangplan.solver.budget import WORK_UNITS_PER_SECOND, SearchStop
from gangplan.solver.context import CycleContext
from gangplan.solver.model.constraints import Constraints
from gangplan.solver.model.indexing import Index, build_index
from gangplan.solver.model.neighbourhood import MIN_DECISIONS as LNS_MIN_DECISIONS
from gangplan.solver.model.neighbourhood import Neighbourhoods, Pace, StepLimits, improve
from gangplan.solver.model.objective import PROJECT_FROM, BuildStopped, build_terms
from gangplan.solver.model.variables import Solution, Variables
from gangplan.solver.model.victims import after_state, evicted_pods, plan_evictions
from gangplan.solver.placers.state import ClusterState
from gangplan.solver.result import CycleStatus, SolverConfig

__all__ = ["ModelOutcome", "build_units", "disaggregate", "solution_plan", "solve_model"]

MAX_VARIABLES = 400_000
"""Above this many variables the built model is not solved; the incumbent is returned."""
BUILD_SHARE = 0.7
"""The share of the model's time (what the cycle leaves it) its build may take: the rest
completes the incumbent into a hint and searches. A build past it stops, and the incumbent
is returned (on openb at 11-12 s a build that took all of it overran the cycle by 1.3 s)."""
PRESOLVE_MIN_S = 1.0
"""Tiers given less time than this are solved without CP-SAT's presolve (measured, see
``_params``)."""
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


@dataclass
class ModelOutcome:
    """What :func:`solve_model` found: the pods (None: no model solution to use), a report
    per score entry, the model's size and notes for the cycle's result."""

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


def build_units(meter_units: int, size: Mapping[str, int]) -> int:
    """The work units a model's build is charged on the deterministic clock
    (:mod:`gangplan.solver.budget`): the cluster states' node evaluations made during it
    (``meter_units``) and the model's variables and constraints (``size``, a
    :attr:`ModelOutcome.model_size`)."""
    return meter_units + size.get("variables", 0) + size.get("constraints", 0)


def _run(solver: cp_model.CpSolver, model: cp_model.CpModel, stop: SearchStop | None) -> Any:
    """``solver.solve(model)``, stoppable through ``stop`` when given."""
    return solver.solve(model) if stop is None else stop.run(solver, model)


def _complete_hint(
    model: cp_model.CpModel,
    hint: dict[int, int],
    cfg: SolverConfig,
    seconds: float,
    stop: SearchStop | None = None,
) -> cp_model.CpSolver | None:
    """Fix the decision variables to the incumbent's values in a copy of the model and let
    CP-SAT fill in every auxiliary variable: a complete, feasible hint (the CP-SAT primer,
    d-krupke, on hints: CP-SAT may drop an incomplete or infeasible one)."""
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
    st = _run(solver, trial, stop)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return solver


def _params(
    solver: cp_model.CpSolver,
    cfg: SolverConfig,
    seconds: float,
    det_share: float,
    variables: int = PRESOLVE_MIN_VARIABLES,
) -> None:
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


def _step_limits(
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


def solve_model(
    ctx: CycleContext,
    incumbent: list[PodPlacement],
    previous: Plan | None,
    cfg: SolverConfig,
    budget_s: float,
    incumbent_evictions: list[Eviction] | None = None,
    *,
    stop: SearchStop | None = None,
) -> ModelOutcome:
    """Optimise the cycle with CP-SAT within ``budget_s`` seconds, building included (see the
    module docstring). In deterministic mode the search gets ``cfg.deterministic_time``
    deterministic seconds in all (the completion of the hint included), shared by the tiers.
    ``stop``: a request to stop (Ctrl-C) ends the search; the best solution so far is used.

    ``incumbent_evictions``: the incumbent plan's evictions (preemption on), part of its
    hint. Returns pods and evictions (pods None when CP-SAT found no solution in time),
    tier reports, model size and the time of each part.
    """
    started = time.monotonic()
    det_budget = cfg.deterministic_time or cfg.time_limit_s
    det_used = 0.0
    units0 = ctx.meter.units
    ix = build_index(ctx, cfg, previous, incumbent)
    notes = list(ix.notes)
    if not ix.items:
        return ModelOutcome(CycleStatus.OPTIMAL, [], notes=[*notes, "nothing can be placed"])
    model = cp_model.CpModel()
    v = Variables(model, ix)
    constraints = Constraints(model, ix, v)

    def clock() -> float:
        # the build's own clock: wall seconds, or in deterministic mode the deterministic
        # seconds it is charged (build_units: node evaluations, variables, constraints)
        if not cfg.deterministic:
            return time.monotonic() - started
        proto = model.proto
        size = {"variables": len(proto.variables), "constraints": len(proto.constraints)}
        return build_units(ctx.meter.units - units0, size) / WORK_UNITS_PER_SECOND

    group_start = [0.0]  # when (on the build's clock) the group being built began
    model_s = det_budget if cfg.deterministic else budget_s
    build_s = BUILD_SHARE * model_s
    unit = "deterministic s" if cfg.deterministic else "s"

    def too_big(after: str, share: float = 1.0) -> tuple[ModelOutcome, str, bool] | None:
        # the build stops as soon as the model passes MAX_VARIABLES or the build alone has
        # used its share of the budget (wall or deterministic): a large cycle must not spend
        # its time building a model it cannot solve. A group built in steps is projected to
        # its end from the share built (PROJECT_FROM), so a build that cannot fit stops
        # early; a group reports share 0.0 when its work begins, 1.0 when it is built (the
        # expected-fragmentation term handles its own size: objective.py)
        n = len(model.proto.variables)
        took = clock()
        since = group_start[0]
        if share >= 1.0 or share == 0.0:
            group_start[0] = took
        projected = share < 1.0 and share >= PROJECT_FROM
        took_end = since + (took - since) / share if projected else took
        if n <= MAX_VARIABLES and took_end <= build_s:
            return None
        ahead = "on course for " if projected else ""
        why = (
            f"{n:,} variables, over {MAX_VARIABLES:,}"
            if n > MAX_VARIABLES
            else f"{ahead}{took_end:.2f} {unit}, over the {build_s:.2f} {unit} the build may "
            f"take of the model's {model_s:.2f} {unit}"
        )
        where = f"after {after}" if share >= 1.0 else f"{int(100 * share)}% into {after}"
        outcome = ModelOutcome(
            CycleStatus.INCUMBENT,
            None,
            model_size={"variables": n, "items": len(ix.items), "blocks": len(ix.blocks)},
            notes=[*notes, f"model build stopped {where} ({why}); incumbent returned"],
            parts={"model": time.monotonic() - started},
        )
        return outcome, why, projected and n <= MAX_VARIABLES and took <= build_s

    def check(after: str, share: float) -> None:
        out = too_big(after, share)
        if out is not None:
            raise BuildStopped(out[1], out[0], projection=out[2])

    # a family built node by node reports its progress, so one that alone would take the
    # build past its time stops inside it (on openb's 1,523 nodes gpu_devices alone took up
    # to a second of a 1 s cycle before the check after it)
    constraints.progress = lambda family, share: check(f"family {family}", share)
    try:
        for family in Constraints.FAMILIES:
            constraints.add(family)
            check(f"family {family}", 1.0)
    except BuildStopped as stop_build:
        assert isinstance(stop_build.outcome, ModelOutcome)
        return stop_build.outcome
    prev_pods = len(previous.pods) if previous is not None else 0
    try:
        terms = build_terms(
            model,
            ix,
            v,
            ctx.shares,
            prev_pods,
            after_each=lambda after, share: check(f"the objective's {after}", share),
            max_variables=MAX_VARIABLES,
        )
        check("the objective's last terms", 1.0)
    except BuildStopped as stop_build:
        assert isinstance(stop_build.outcome, ModelOutcome)
        return stop_build.outcome
    notes += [t.note for t in terms if t.note]
    proto = model.proto
    size = {
        "variables": len(proto.variables),
        "constraints": len(proto.constraints),
        "items": len(ix.items),
        "shapes": len(ix.shapes),
        "blocks": len(ix.blocks),
        "gangs_left_out": len(ix.left_out),
    }
    if cfg.deterministic:
        # the build is charged as the cycle charges it (build_units): the search gets the rest
        det_budget -= build_units(ctx.meter.units - units0, size) / WORK_UNITS_PER_SECOND
    hint = v.hint(incumbent, incumbent_evictions)
    hood = Neighbourhoods.of(ix, v) if len(hint) >= LNS_MIN_DECISIONS else None
    pace = Pace.of(hood) if hood is not None else None
    whole_failed: float | None = None
    """LNS on: the length of the last solve of the whole model that returned no solution at
    all; a later tier solves the whole model again only when it can give it twice as long,
    else all its time goes to the steps"""
    rng = random.Random(cfg.seed)
    built = time.monotonic()
    first = _complete_hint(model, hint, cfg, max(0.05, (budget_s - (built - started)) * 0.5), stop)
    if first is not None:
        det_used += first.response_proto.deterministic_time
    search_started = time.monotonic()
    parts = {"model": search_started - started}
    # every full solution found so far (the completed incumbent first), kept as solvers
    # holding their last response: before each tier the best of them that meets every tier
    # fixed so far is the hint, so a tier never ends below what the incumbent had
    pool: list[cp_model.CpSolver] = []
    if first is None:
        notes.append(
            "the incumbent could not be completed into a model solution; partial hint used"
        )
        for idx, val in hint.items():
            model.add_hint(model.get_int_var_from_proto_index(idx), val)
    else:
        pool.append(first)
    fixed: list[tuple[cp_model.LinearExprT, int]] = []

    def meets(sol: cp_model.CpSolver) -> bool:
        return all(sol.value(e) >= lb for e, lb in fixed)

    def use_hint(sol: cp_model.CpSolver) -> None:
        model.clear_hints()  # type: ignore[no-untyped-call]
        values = sol.response_proto.solution
        hint = model.proto.solution_hint
        hint.vars.extend(range(len(values)))
        hint.values.extend(values)

    def fix(expr: cp_model.LinearExprT, value: int) -> None:
        fixed.append((expr, value))
        model.add(expr >= value)

    active = [t for t in terms if t.expr is not None]
    reports: list[TierReport] = []
    all_optimal = True
    remaining_w = sum(t.weight for t in active)
    for term in terms:
        if term.expr is None:
            status = "constant" if term.modelled else "derived (not in the model)"
            reports.append(TierReport(name=term.name, value=term.const, status=status))
            continue
        expr = term.expr
        weight = term.weight
        remaining_w -= weight
        candidates = [sol for sol in pool if meets(sol)]
        best = max(candidates, key=lambda sol: sol.value(expr), default=None)
        current = int(best.value(expr)) if best is not None else None
        if current is not None and term.upper is not None and current >= term.upper:
            # the best solution reaches a bound this term can never exceed
            reports.append(
                TierReport(
                    name=term.name,
                    value=current + term.const,
                    bound=term.upper + term.const,
                    gap=0.0,
                    status="optimal",
                )
            )
            fix(expr, current)
            continue
        left = budget_s - (time.monotonic() - started)
        interrupted = stop is not None and stop.requested
        out_of_time = det_budget - det_used < 0.002 if cfg.deterministic else left < MIN_SLICE_S
        if (out_of_time or interrupted) and current is not None:
            # out of time: keep this tier where it is, so lower tiers cannot undo it
            all_optimal = False
            why = "interrupted" if interrupted else "time"
            reports.append(
                TierReport(
                    name=term.name, value=current + term.const, status=f"not optimised ({why})"
                )
            )
            fix(expr, current)
            continue
        if best is not None:
            use_hint(best)
        share = weight / (weight + remaining_w)
        slice_s = max(min(left, MIN_SLICE_S), left * share)
        det_slice = (det_budget - det_used) * share
        lns = hood is not None and pace is not None and best is not None
        whole = 1.0
        if lns and pace is not None:
            # a slice too short for one step is wasted (the step ends with nothing): give
            # the tier one full step if the time left allows (with the step's margin and
            # room for the whole model's solve to overrun a little); the tiers after it
            # get less
            guess = LNS_WHOLE_SHARE if whole_failed is None else 0.0
            need = pace.step / (1 - guess)
            slice_s = max(slice_s, min(left, need + STEP_MARGIN_S + WHOLE_OVERRUN_S))
            det_slice = max(det_slice, min(det_budget - det_used, need))
            span = det_slice if cfg.deterministic else slice_s
            retry = whole_failed is None or span * LNS_WHOLE_SHARE >= 2 * whole_failed
            whole = LNS_WHOLE_SHARE if retry else 0.0
        tier_started = time.monotonic()
        solver = cp_model.CpSolver()
        model.maximize(expr)
        if whole > 0:
            _params(solver, cfg, slice_s * whole, det_slice * whole, len(model.proto.variables))
            st = _run(solver, model, stop)
        else:
            st = cp_model.UNKNOWN
        whole_det = solver.response_proto.deterministic_time if whole > 0 else 0.0
        det_used += whole_det
        solved = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        if solved:
            pool.append(solver)
        elif lns and whole > 0 and st == cp_model.UNKNOWN:
            whole_failed = (det_slice if cfg.deterministic else slice_s) * whole
        improved: list[cp_model.CpSolver] = []
        proven = stalled = False
        if lns and st != cp_model.OPTIMAL and best is not None and hood and pace:
            start = solver if solved and solver.value(expr) > best.value(expr) else best
            pace.kind = term.name.rsplit(".", 1)[-1]
            improved, lns_det, proven, stalled = improve(
                model,
                expr,
                start,
                hood,
                pace,
                limits=_step_limits(cfg, stop, tier_started + slice_s, det_slice - whole_det),
                run=lambda sv, m: _run(sv, m, stop),
                rng=rng,
            )
            det_used += lns_det
            pool.extend(improved)
        lns_value = int(improved[-1].value(expr)) if improved else None
        if not solved:
            if st == cp_model.MODEL_INVALID:
                notes.append(f"model invalid: {model.validate()}")
            elif st == cp_model.INFEASIBLE:
                notes.append(f"tier {term.name}: infeasible (a bug: the empty plan is feasible)")
            elif lns_value is None and stalled:
                notes.append(
                    f"tier {term.name}: neighbourhood steps in a row proved nothing better "
                    "there; its time went to the next tiers"
                )
            elif lns_value is None:
                notes.append(f"tier {term.name}: no better solution within its time share")
            if current is None and lns_value is None:
                parts["search"] = time.monotonic() - search_started
                return ModelOutcome(
                    CycleStatus.INCUMBENT,
                    None,
                    model_size=size,
                    notes=notes,
                    parts=parts,
                    deterministic_time=det_used,
                    interrupted=stop is not None and stop.requested,
                )
            value = max(x for x in (current, lns_value) if x is not None)
            # no bound from the whole model: the term's own ceiling, or the steps' proof
            ceiling = value if proven else term.upper
            report = TierReport(
                name=term.name,
                value=value + term.const,
                bound=None if ceiling is None else ceiling + term.const,
                status="feasible (neighbourhood search)"
                if lns_value is not None
                else "not improved (neighbourhood search)"
                if stalled
                else "not improved (time)",
            ).revalued(value + term.const)  # the gap, and optimal when it reaches the ceiling
            all_optimal &= report.status == "optimal"
            reports.append(report)
            fix(expr, value)
            continue
        found = round(solver.objective_value)
        value = max(x for x in (found, current, lns_value) if x is not None)
        bound = round(solver.best_objective_bound)
        if term.upper is not None:
            bound = min(bound, term.upper)  # a bound the term can never pass is a valid one
        if proven:
            bound = min(bound, value)
        # proven only when the value reaches the whole model's bound: CP-SAT also says
        # OPTIMAL when it stops at ``relative_gap``
        report = TierReport(
            name=term.name, value=value + term.const, bound=bound + term.const, status="feasible"
        ).revalued(value + term.const)
        all_optimal &= report.status == "optimal"
        reports.append(report)
        fix(expr, value)
    parts["search"] = time.monotonic() - search_started
    interrupted = stop is not None and stop.requested
    final = [sol for sol in pool if meets(sol)]
    if not final:
        return ModelOutcome(
            CycleStatus.INCUMBENT,
            None,
            model_size=size,
            notes=notes,
            parts=parts,
            deterministic_time=det_used,
            interrupted=interrupted,
        )
    plan_started = time.monotonic()
    chosen = final[-1]
    solution = v.read(chosen)
    exprs = {t.name: t for t in terms if t.expr is not None}
    for k, r in enumerate(reports):
        t = exprs.get(r.name)
        if t is not None and t.expr is not None:
            reports[k] = r.revalued(int(chosen.value(t.expr)) + t.const)
    pods, evictions = solution_plan(ctx, ix, solution, previous)
    parts["plan"] = time.monotonic() - plan_started
    return ModelOutcome(
        CycleStatus.OPTIMAL if all_optimal and not interrupted else CycleStatus.FEASIBLE,
        pods,
        evictions,
        tiers=tuple(reports),
        model_size=size,
        notes=notes,
        parts=parts,
        deterministic_time=det_used,
        interrupted=interrupted,
    )


def solution_plan(
    ctx: CycleContext, ix: Index, solution: Solution, previous: Plan | None
) -> tuple[list[PodPlacement], list[Eviction]]:
    """A model solution as pods with devices and, with victims, the evictions: the pods
    victims keep stay (``stay``, ``keep``), the plan's pods go into what they leave."""
    if ix.victims is None:
        return disaggregate(ix, solution, previous), []
    kept = {
        u.id: solution.get("keep", u.id)
        if ix.victims.victims[u.victim].elastic
        else u.size * solution.get("stay", u.victim)
        for u in ix.victims.units
    }
    gone = evicted_pods(ix.victims, kept)
    state = after_state(ctx, [p for pods_ in gone.values() for p in pods_])
    pods = disaggregate(ix, solution, previous, state)
    return pods, plan_evictions(ctx, ix.victims, gone, pods)


def gang_fits(
    ctx: CycleContext,
    gang: Gang,
    empty: bool,
    seconds: float,
    seed: int = 0,
    *,
    deterministic: bool = False,
    spent: list[float] | None = None,
) -> bool | None:
    """Exact check for the reasons: can ``gang`` alone be admitted (on the empty cluster
    when ``empty``, else in what running pods leave), within its queue's max?

    ``seconds``: wall seconds, or with ``deterministic`` CP-SAT's deterministic seconds (so
    the answer repeats from run to run); ``spent[0]``, if given, is increased by the
    deterministic seconds the check took.

    Returns True / False, or None when CP-SAT cannot tell within ``seconds``.
    """
    ix = build_index(ctx, SolverConfig(max_pairs=0), None, gangs=[gang], empty=empty)
    if gang.key in ix.left_out or not ix.items:
        return False
    model = cp_model.CpModel()
    v = Variables(model, ix)
    Constraints(model, ix, v).add_all()
    group = ix.groups[0]
    if group.multi:
        model.add(v.admit(group.id) == 1)
    else:
        model.add(v.placed(group.items[0]) >= 1)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    if deterministic:
        solver.parameters.max_deterministic_time = max(0.01, seconds)
    else:
        solver.parameters.max_time_in_seconds = max(0.01, seconds)
    st = solver.solve(model)
    if spent is not None:
        spent[0] += solver.response_proto.deterministic_time
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return True
    if st == cp_model.INFEASIBLE:
        return False
    return None


# --------------------------------------------------------------------------- counts -> pods


@dataclass
class _Slot:
    node: str
    gpus: tuple[str, ...]
    gpu_milli: int | None
    nics: tuple[str, ...]


@dataclass
class _NodeCounts:
    """What a solution puts on one node: pods per shape, the GPUs ``whole`` gives to
    whole-GPU pods (None: the node has no ``whole`` variables) and the ``share`` counts."""

    pods: dict[int, int] = field(default_factory=dict)
    """shape -> pods (only counts above 0)"""
    whole: set[str] | None = None
    shares: list[tuple[int, str, int]] = field(default_factory=list)
    """(shape, device, pods), in key order"""


def _counts_by_node(sol: Solution) -> dict[int, _NodeCounts]:
    """The solution's per-node counts, grouped by node in one pass over each kind (per node,
    a scan of every count would make turning counts into pods quadratic in the nodes)."""
    out: dict[int, _NodeCounts] = defaultdict(_NodeCounts)
    for (s, n), c in sol.z.items():
        if c > 0:
            out[n].pods[s] = c
    for (n, d), val in sol.items("whole"):
        nc = out[n]
        if nc.whole is None:
            nc.whole = set()
        if val:
            nc.whole.add(d)
    for (s, n, d), c in sorted(sol.items("share")):
        if c > 0:
            out[n].shares.append((s, d, c))
    return out


def _node_slots(
    ix: Index, sol: Solution, n: int, state: ClusterState, here: _NodeCounts
) -> dict[int, list[_Slot]]:
    """Device choices for every pod the solution puts on node ``n`` (``here``: its counts,
    :func:`_counts_by_node`), by shape."""
    name = ix.node_names[n]
    st = state.nodes[name]
    slots: dict[int, list[_Slot]] = defaultdict(list)
    counts = here.pods
    if not counts:
        return slots
    taken_gpu: set[str] = set()
    taken_nic: set[str] = set()
    whole_ok = here.whole

    def free_whole(ids: tuple[str, ...] | list[str]) -> list[str]:
        out = [d for d in ids if st.gpu_milli[d] == GPU_MILLI and d not in taken_gpu]
        if whole_ok is not None:
            out = [d for d in out if d in whole_ok]
        return out

    # 1. joint shapes, group by group
    for s, c in sorted(counts.items()):
        shape = ix.shapes[s]
        if shape.joint == "none":
            continue
        groups = st.groups.get(shape.joint, {})
        gpu_pool: list[str] = []
        nic_pool: list[str] = []
        pairs: list[tuple[list[str], list[str]]] = []
        for gname, (gpus, nics) in groups.items():
            a = sol.get("joint", (s, n, gname))
            b = a if shape.nics == shape.whole else sol.get("joint_nic", (s, n, gname))
            if a == 0 and b == 0:
                continue
            g_ids = free_whole(gpus)[:a]
            n_ids = [x for x in nics if x in st.nics and x not in taken_nic][:b]
            taken_gpu.update(g_ids)
            taken_nic.update(n_ids)
            pairs.append((g_ids, n_ids))
        # hand GPUs (and, with equal counts, their NICs) to pods in group order
        if shape.nics == shape.whole:
            flat = [(g, nn) for g_ids, n_ids in pairs for g, nn in zip(g_ids, n_ids, strict=False)]
            for k in range(c):
                chunk = flat[k * shape.whole : (k + 1) * shape.whole]
                slots[s].append(
                    _Slot(name, tuple(g for g, _ in chunk), None, tuple(x for _, x in chunk))
                )
        else:
            for g_ids, n_ids in pairs:
                gpu_pool += g_ids
                nic_pool += n_ids
            for k in range(c):
                slots[s].append(
                    _Slot(
                        name,
                        tuple(gpu_pool[k * shape.whole : (k + 1) * shape.whole]),
                        None,
                        tuple(nic_pool[k * shape.nics : (k + 1) * shape.nics]),
                    )
                )
    # 2. GPU shares, device by device
    for s, d, c in here.shares:
        shape = ix.shapes[s]
        for _ in range(c):
            nic_ids = [x for x in st.nic_order if x in st.nics and x not in taken_nic][: shape.nics]
            taken_nic.update(nic_ids)
            slots[s].append(_Slot(name, (d,), shape.share, tuple(nic_ids)))
    # 3. whole GPUs without a joint policy, and pods without GPUs
    for s, c in sorted(counts.items()):
        shape = ix.shapes[s]
        if shape.joint != "none" or shape.share:
            continue
        for _ in range(c):
            g_ids = free_whole(list(st.gpu_order))[: shape.whole]
            taken_gpu.update(g_ids)
            nic_ids = [x for x in st.nic_order if x in st.nics and x not in taken_nic][: shape.nics]
            taken_nic.update(nic_ids)
            slots[s].append(_Slot(name, tuple(g_ids), None, tuple(nic_ids)))
    return slots


def disaggregate(
    ix: Index, sol: Solution, previous: Plan | None, state: ClusterState | None = None
) -> list[PodPlacement]:
    """Pods with node and device ids from a solution's counts (see the module docstring).

    ``state``: what the pods go into (with preemption, what the running pods the solution
    keeps leave); default the index's state."""
    # the free amounts the model counted against (the index's trials leave them as found)
    state = state or ix.state
    assert state is not None and not ix.empty
    by_node = _counts_by_node(sol)
    nodes_used = sorted(n for n, here in by_node.items() if here.pods)
    slots: dict[tuple[int, int], list[_Slot]] = {}
    for n in nodes_used:
        for s, lst in _node_slots(ix, sol, n, state, by_node[n]).items():
            slots[(s, n)] = lst

    # which nodes each item's pods go to
    assign: dict[int, list[int]] = defaultdict(list)  # item -> node per pod
    if ix.exact:
        for (i, b), c in sorted(sol.items("x")):
            assign[i] += [b] * c
    else:
        # every item may use every node of its block (indexing), so any slot of its shape
        # there will do; items counted per node take their own node's slots first
        left = {key: len(v) for key, v in slots.items()}
        counted = [(i, b, c) for (i, b), c in sol.items("x") if c > 0]
        for i, b, c in counted:
            if ix.items[i].node_level:
                n = ix.blocks[b].nodes[0]
                s = ix.items[i].shape
                if left.get((s, n), 0) < c:
                    raise RuntimeError(f"disaggregation: no slot left for item {ix.items[i].name}")
                assign[i] += [n] * c
                left[(s, n)] -= c
        order = sorted(
            (t for t in counted if not ix.items[t[0]].node_level),
            key=lambda t: (not ix.groups[ix.items[t[0]].group].multi, -t[2], t[0], t[1]),
        )
        for i, b, c in order:
            s = ix.items[i].shape
            need = c
            while need > 0:
                cands = [n for n in ix.blocks[b].nodes if left.get((s, n), 0) > 0]
                if not cands:
                    raise RuntimeError(f"disaggregation: no slot left for item {ix.items[i].name}")
                n = max(cands, key=lambda n: (left[(s, n)], -n))
                take = min(need, left[(s, n)])
                assign[i] += [n] * take
                left[(s, n)] -= take
                need -= take
    used: dict[tuple[int, int], int] = defaultdict(int)
    pods: list[PodPlacement] = []
    prev_node: dict[tuple[str, str], str] = {}
    if previous is not None:
        prev_node = {(p.namespace, p.pod): p.node for p in previous.pods}
    for i in sorted(assign):
        item = ix.items[i]
        nodes = assign[i]
        if len(item.gangs) > 1 or ix.groups[item.group].multi is False:
            # single-pod gangs: the oldest of the identical gangs are admitted
            names = [(g, g.roles[0].pod_name(g.name, 0)) for g in item.gangs]
        else:
            g = item.gang
            names = [(g, item.role.pod_name(g.name, k)) for k in range(item.role.count)]
        # pods that stay where the previous plan had them get those nodes first
        chosen: list[tuple[Gang, str, int]] = []
        pool = list(nodes)
        rest = []
        for g, pod in names:
            pn = prev_node.get((g.namespace, pod))
            if pn is not None and ix.node_index.get(pn) in pool:
                n = ix.node_index[pn]
                pool.remove(n)
                chosen.append((g, pod, n))
            else:
                rest.append((g, pod))
        for (g, pod), n in zip(rest, pool, strict=False):
            chosen.append((g, pod, n))
        for g, pod, n in chosen:
            s = item.shape
            slot = slots[(s, n)][used[(s, n)]]
            used[(s, n)] += 1
            pods.append(
                PodPlacement(
                    pod=pod,
                    gang=g.name,
                    namespace=g.namespace,
                    role=item.role.name,
                    node=slot.node,
                    gpus=slot.gpus,
                    gpu_milli=slot.gpu_milli,
                    nics=slot.nics,
                )
            )
    return pods
