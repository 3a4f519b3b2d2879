"""The lexicographic search (solver/model/search.py) on a model small enough to solve by hand
(the CP-SAT primer's way): x, y in 0..3 with x + y <= 4, tier A maximises x (it can never
pass 3), tier B maximises y with A fixed, tier C is a constant.

By hand: A's optimum is x = 3; with x >= 3 fixed, y <= 1, so B's optimum is y = 1."""

from __future__ import annotations

from typing import Any

import pytest
from ortools.sat.python import cp_model

import gangplan.solver.model.search as search
from gangplan.solver.budget import SearchStop
from gangplan.solver.model.build import BuiltModel
from gangplan.solver.model.neighbourhood import StepLimits
from gangplan.solver.model.objective import ObjectiveTerm
from gangplan.solver.model.search import (
    LexicographicSearch,
    SearchLimits,
    SearchResult,
    solver_params,
    step_limits,
)
from gangplan.solver.result import SolverConfig

DET = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=1.0, seed=3)


def _built(*, infeasible: bool = False) -> tuple[BuiltModel, cp_model.IntVar, cp_model.IntVar]:
    model = cp_model.CpModel()
    x = model.new_int_var(0, 3, "x")
    y = model.new_int_var(0, 3, "y")
    model.add(x + y <= 4)
    if infeasible:
        model.add(x + y >= 7)  # 3 + 3 < 7: no solution at all
    terms = [
        ObjectiveTerm("A", x, 0, upper=3),
        ObjectiveTerm("B", y, 10),  # reported as y + 10
        ObjectiveTerm("C", None, 5),
    ]
    # the search reads the index and the variables only for neighbourhoods (4,000 decisions
    # at least): a two-variable hint never asks for them
    built = BuiltModel(model, None, None, terms, {}, [], 1.0)  # type: ignore[arg-type]
    return built, x, y


def _search(
    hint: dict[int, int],
    *,
    det: float = 1.0,
    infeasible: bool = False,
    stop: SearchStop | None = None,
) -> tuple[SearchResult, cp_model.IntVar, cp_model.IntVar]:
    built, x, y = _built(infeasible=infeasible)
    hint_ix = {x.index: hint["x"], y.index: hint["y"]}
    s = LexicographicSearch(built, DET, hint_ix, SearchLimits(0.0, 3600.0, det), stop)
    s.start()
    return s.run(), x, y


def _tiers(result: SearchResult) -> dict[str, tuple[int, str]]:
    return {r.name: (r.value, r.status) for r in result.reports}


def test_each_tier_is_maximised_with_the_ones_before_it_fixed() -> None:
    result, x, y = _search({"x": 0, "y": 0})
    assert result.solution is not None
    assert (result.solution.value(x), result.solution.value(y)) == (3, 1)
    assert _tiers(result) == {"A": (3, "optimal"), "B": (11, "optimal"), "C": (5, "constant")}
    assert result.optimal and not result.interrupted
    assert result.deterministic_time > 0  # the completion and two solves counted


def test_a_tier_the_hint_takes_to_its_ceiling_is_fixed_without_a_solve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the hint has x = 3 = A's ceiling: CP-SAT runs twice (the hint's completion, tier B),
    # where from x = 0 it runs three times (tier A too)
    calls: list[int] = []
    real = search.run_solver

    def counted(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(search, "run_solver", counted)
    result, _x, _y = _search({"x": 3, "y": 0})
    assert len(calls) == 2
    a = result.reports[0]
    assert (a.value, a.bound, a.gap, a.status) == (3, 3, 0.0, "optimal")
    assert _tiers(result)["B"] == (11, "optimal")
    calls.clear()
    _search({"x": 0, "y": 0})
    assert len(calls) == 3


def test_out_of_time_every_tier_is_kept_where_the_hint_has_it() -> None:
    # no deterministic seconds left for the tiers: the completed hint (x = 1, y = 2) is the
    # solution, each tier is fixed at its value and none is proven
    result, x, y = _search({"x": 1, "y": 2}, det=0.0)
    assert result.solution is not None
    assert (result.solution.value(x), result.solution.value(y)) == (1, 2)
    assert _tiers(result) == {
        "A": (1, "not optimised (time)"),
        "B": (12, "not optimised (time)"),
        "C": (5, "constant"),
    }
    assert not result.optimal


def test_a_stop_requested_after_the_hint_keeps_every_tier_and_says_interrupted() -> None:
    built, x, y = _built()
    stop = SearchStop()
    s = LexicographicSearch(built, DET, {x.index: 1, y.index: 2}, SearchLimits(0, 3600, 1), stop)
    s.start()
    stop.request()
    result = s.run()
    assert result.interrupted and not result.optimal
    assert result.solution is not None
    assert (result.solution.value(x), result.solution.value(y)) == (1, 2)
    assert _tiers(result) == {
        "A": (1, "not optimised (interrupted)"),
        "B": (12, "not optimised (interrupted)"),
        "C": (5, "constant"),
    }


def test_an_infeasible_hint_is_used_partly_and_the_tiers_still_reach_the_optimum() -> None:
    # x = y = 3 breaks x + y <= 4: it cannot be completed, the model is hinted with it as it
    # is, and the tiers still find (3, 1)
    result, x, y = _search({"x": 3, "y": 3})
    assert any("could not be completed" in n for n in result.notes)
    assert result.solution is not None
    assert (result.solution.value(x), result.solution.value(y)) == (3, 1)
    assert _tiers(result)["B"] == (11, "optimal")


def test_a_model_without_a_solution_gives_none_and_says_why() -> None:
    result, _x, _y = _search({"x": 0, "y": 0}, infeasible=True)
    assert result.solution is None
    assert any("tier A: infeasible" in n for n in result.notes), result.notes


def test_small_models_and_short_tiers_skip_presolve() -> None:
    # wall-clock mode: presolve only for a tier of at least PRESOLVE_MIN_S seconds on a
    # model of at least PRESOLVE_MIN_VARIABLES variables (the 64-node fat-tree's 832
    # variables: none; the 512-node one's 3,530: presolve)
    cfg = SolverConfig(time_limit_s=5)
    for seconds, variables, want in ((5.0, 832, False), (5.0, 3_530, True), (0.5, 3_530, False)):
        solver = cp_model.CpSolver()
        solver_params(solver, cfg, seconds, seconds, variables)
        assert solver.parameters.cp_model_presolve is want, (seconds, variables)


def test_deterministic_tiers_run_on_one_worker_for_their_deterministic_share() -> None:
    solver = cp_model.CpSolver()
    solver_params(solver, DET, 0.5, 0.25)
    p = solver.parameters
    assert (p.num_workers, p.max_deterministic_time, p.random_seed) == (1, 0.25, 3)
    assert p.max_time_in_seconds == 60.0  # a safety net only: max(60, 20 x 0.5)


def test_deterministic_steps_share_what_the_tier_has_left() -> None:
    limits = step_limits(DET, None, until=0.0, det_left=1.0)
    # 0.5 of 1.0 spent: a 0.3 step fits whole; 0.9 spent: the step gets the 0.1 left;
    # 0.999 spent: 0.001 < 0.002 left, no step
    assert limits(0.5, 0.3) == StepLimits(3600.0, 0.3, 1, 3)
    got = limits(0.9, 0.3)
    assert got is not None and got.deterministic == pytest.approx(0.1)
    assert limits(0.999, 0.3) is None
    stop = SearchStop()
    stop.request()
    assert step_limits(DET, stop, until=0.0, det_left=1.0)(0.0, 0.3) is None
