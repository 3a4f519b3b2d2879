"""The model's build (solver/model/build.py): its clock, its guard's stop rule worked out by
hand on the deterministic clock, and what the build returns."""

from __future__ import annotations

import time

import pytest
from ortools.sat.python import cp_model

import gangplan.solver.model.build as build
from gangplan.models import load_instance
from gangplan.solver.budget import WORK_UNITS_PER_SECOND
from gangplan.solver.context import CycleContext
from gangplan.solver.model.build import BuildClock, BuildGuard, BuiltModel, build_model
from gangplan.solver.model.constraints import Constraints
from gangplan.solver.model.indexing import build_index
from gangplan.solver.model.objective import BuildStopped
from gangplan.solver.model.outcome import ModelOutcome
from gangplan.solver.result import CycleStatus, SolverConfig

GPU = "nvidia.com/gpu"


def _snapshot(gangs: int = 1):  # type: ignore[no-untyped-def]
    # two nodes of 4 GPUs; each gang: 2 pods x 2 GPUs
    return load_instance(
        {
            "apiVersion": "gangplan.io/v1alpha1",
            "kind": "Instance",
            "nodes": [{"name": f"n{i}", "allocatable": {GPU: 4, "cpu": 8}} for i in range(2)],
            "queues": [{"name": "q"}],
            "gangs": [
                {
                    "name": f"g{k}",
                    "queue": "q",
                    "roles": [{"name": "w", "count": 2, "requests": {GPU: 2}}],
                }
                for k in range(gangs)
            ],
        }
    )[0]


def test_the_deterministic_clock_counts_node_evaluations_variables_and_constraints() -> None:
    ctx = CycleContext.of(_snapshot())
    clock = BuildClock(ctx, deterministic=True, started=time.monotonic())
    model = cp_model.CpModel()
    x = model.new_bool_var("x")
    y = model.new_bool_var("y")
    model.add(x + y <= 1)
    ctx.meter.add(7)
    # 7 node evaluations + 2 variables + 1 constraint = 10 units
    assert clock.read(model) == pytest.approx(10 / WORK_UNITS_PER_SECOND)
    assert build.build_units(7, {"variables": 2, "constraints": 1}) == 10


def _guard(limit_units: float) -> tuple[BuildGuard, CycleContext, cp_model.CpModel]:
    """A guard on an empty model whose build may take ``0.7 * limit_units`` units."""
    ctx = CycleContext.of(_snapshot())
    ix = build_index(ctx, SolverConfig(), None)
    model = cp_model.CpModel()
    cfg = SolverConfig(
        time_limit_s=30, deterministic=True, deterministic_time=limit_units / WORK_UNITS_PER_SECOND
    )
    clock = BuildClock(ctx, deterministic=True, started=time.monotonic())
    return BuildGuard(clock, model, ix, cfg, budget_s=30.0), ctx, model


def test_a_group_is_projected_to_its_end_from_a_tenth_of_it_on() -> None:
    # the build may take 0.7 x 10 = 7 units. The group begins at 2 units (share 0.0); at 5
    # units, 5% into it, no projection (below PROJECT_FROM): 5 <= 7 passes. At 5 units and
    # half of it, its end is projected at 2 + (5 - 2) / 0.5 = 8 > 7: it stops, as a
    # projection (the time is not spent yet)
    guard, ctx, _model = _guard(10)
    ctx.meter.add(2)
    guard.check("terms", 0.0)
    ctx.meter.add(3)
    guard.check("terms", 0.05)
    with pytest.raises(BuildStopped) as stopped:
        guard.check("terms", 0.5)
    assert stopped.value.projection is True
    assert "on course for 0.00 deterministic s" in stopped.value.why
    outcome = stopped.value.outcome
    assert isinstance(outcome, ModelOutcome) and outcome.status is CycleStatus.INCUMBENT
    assert outcome.pods is None
    assert outcome.notes[-1].startswith("model build stopped 50% into terms")


def test_a_projection_within_the_share_passes_and_spent_time_is_no_projection() -> None:
    # group from 2 units; at 4 units and half of it: 2 + 2 / 0.5 = 6 <= 7 passes. Past
    # 7 units when the group ends (share 1.0): it stops, not as a projection
    guard, ctx, _model = _guard(10)
    ctx.meter.add(2)
    guard.check("terms", 0.0)
    ctx.meter.add(2)
    guard.check("terms", 0.5)
    ctx.meter.add(4)
    with pytest.raises(BuildStopped) as stopped:
        guard.check("terms", 1.0)
    assert stopped.value.projection is False
    assert isinstance(stopped.value.outcome, ModelOutcome)
    assert "after terms" in stopped.value.outcome.notes[-1]


def test_past_max_variables_the_first_family_stops_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every family adds to a model that already has its variables (2 pods, 2 nodes):
    # at a bound of 1 the check after the first family stops the build
    monkeypatch.setattr(build, "MAX_VARIABLES", 1)
    ctx = CycleContext.of(_snapshot())
    out = build_model(ctx, SolverConfig(deterministic=True), None, [], 30.0, time.monotonic())
    assert isinstance(out, ModelOutcome) and out.status is CycleStatus.INCUMBENT
    first = Constraints.FAMILIES[0]
    assert f"model build stopped after family {first}" in out.notes[-1]
    assert "over 1)" in out.notes[-1]


def test_nothing_to_place_is_optimal_with_no_pods() -> None:
    ctx = CycleContext.of(_snapshot(gangs=0))
    out = build_model(ctx, SolverConfig(), None, [], 30.0, time.monotonic())
    assert isinstance(out, ModelOutcome)
    assert (out.status, out.pods, out.notes[-1]) == (
        CycleStatus.OPTIMAL,
        [],
        "nothing can be placed",
    )


def test_the_search_gets_the_deterministic_budget_less_the_builds_charge() -> None:
    ctx = CycleContext.of(_snapshot(gangs=2))
    cfg = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=2.0)
    before = ctx.meter.units
    out = build_model(ctx, cfg, None, [], 30.0, time.monotonic())
    assert isinstance(out, BuiltModel)
    size = out.size
    assert size["items"] == 2 and size["variables"] == len(out.model.proto.variables)
    units = ctx.meter.units - before + size["variables"] + size["constraints"]
    assert out.search_budget == pytest.approx(2.0 - units / WORK_UNITS_PER_SECOND)
    assert len(out.terms) > 0 and all(t.expr is None or t.modelled for t in out.terms)
