"""The model's build stops as soon as it passes its bounds (``MAX_VARIABLES``), so a large
cycle never spends its budget building a model it would not solve; the incumbent (a
verified baseline plan) is returned and the note says where the build stopped."""

from __future__ import annotations

import pytest

import gangplan.solver.model.builder as builder
from gangplan.models import load_instance
from gangplan.solver.cycle import solve_cycle
from gangplan.solver.result import CycleStatus, SolverConfig
from gangplan.solver.verify import verify

GPU = "nvidia.com/gpu"
DET = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=10.0, seed=1)
SHORT = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=0.5, seed=1)


def _snapshot():  # type: ignore[no-untyped-def]
    # two nodes of 4 GPUs; gang a: 2 pods x 2 GPUs, gang b: 1 pod x 4 GPUs. Both fit.
    return load_instance(
        {
            "apiVersion": "gangplan.io/v1alpha1",
            "kind": "Instance",
            "nodes": [{"name": f"n{i}", "allocatable": {GPU: 4, "cpu": 8}} for i in range(2)],
            "queues": [{"name": "q"}],
            "gangs": [
                {
                    "name": "a",
                    "queue": "q",
                    "roles": [{"name": "w", "count": 2, "requests": {GPU: 2}}],
                },
                {
                    "name": "b",
                    "queue": "q",
                    "roles": [{"name": "w", "count": 1, "requests": {GPU: 4}}],
                },
            ],
        }
    )[0]


def test_within_the_bound_the_model_runs() -> None:
    s = _snapshot()
    result = solve_cycle(s, None, DET)
    assert result.status is CycleStatus.OPTIMAL
    assert len(result.plan.pods) == 3  # all 8 GPUs placed
    assert verify(s, result.plan) == []


@pytest.mark.parametrize("bound", [0, 3])
def test_past_the_bound_the_build_stops_and_the_incumbent_is_returned(
    monkeypatch: pytest.MonkeyPatch, bound: int
) -> None:
    # any model of this cycle has more than 3 variables (3 pods to place, each a node
    # choice): the build stops at the first family that passes the bound
    monkeypatch.setattr(builder, "MAX_VARIABLES", bound)
    s = _snapshot()
    result = solve_cycle(s, None, DET)
    assert result.status is CycleStatus.INCUMBENT
    notes = [n for n in result.plan.summary.notes if n.startswith("model build stopped")]
    assert len(notes) == 1 and f"over {bound})" in notes[0], result.plan.summary.notes
    assert "family" in notes[0]
    assert verify(s, result.plan) == []
    assert len(result.plan.pods) == 3  # the baseline places everything here too


def _shares_snapshot():  # type: ignore[no-untyped-def]
    # 40 alike nodes of 4 GPUs, 24 one-pod gangs asking GPU shares (250m, 500m, 750m): the
    # expected-fragmentation term adds variables at every node alike, so its share built
    # tells its size
    sizes = [250, 500, 250, 750, 500, 250] * 4
    return load_instance(
        {
            "apiVersion": "gangplan.io/v1alpha1",
            "kind": "Instance",
            "nodes": [{"name": f"n{i:02d}", "allocatable": {GPU: 4, "cpu": 32}} for i in range(40)],
            "queues": [{"name": "q"}],
            "gangs": [
                {
                    "name": f"s{i}",
                    "queue": "q",
                    "roles": [{"name": "w", "count": 1, "requests": {GPU: m / 1000, "cpu": 1}}],
                }
                for i, m in enumerate(sizes)
            ],
        }
    )[0]


def _fragmentation_term(monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, int]:
    """(variables before the expected-fragmentation term, after it, of the whole model),
    read from an unbounded build."""
    import gangplan.solver.model.objective as objective

    seen: dict[str, int] = {}
    original = objective._expected_fragmentation

    def recorded(model, ix, v, terms, check, limit):  # type: ignore[no-untyped-def]
        seen["start"] = len(model.proto.variables)
        original(model, ix, v, terms, check, limit)
        seen["end"] = len(model.proto.variables)

    with monkeypatch.context() as m:
        m.setattr(objective, "_expected_fragmentation", recorded)
        result = solve_cycle(_shares_snapshot(), None, SHORT)
    return seen["start"], seen["end"], result.model_size["variables"]


def test_a_term_on_course_past_the_bound_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # the term alone would take the model past its bound: it is left out, and the rest of
    # the model is built and solved (all 24 shares fit, 10,000 milli-GPU: 40 x 4 free GPUs)
    start, end, whole = _fragmentation_term(monkeypatch)
    monkeypatch.setattr(builder, "MAX_VARIABLES", end - 1)
    s = _shares_snapshot()
    result = solve_cycle(s, None, SHORT)
    assert result.status in (CycleStatus.OPTIMAL, CycleStatus.FEASIBLE)
    notes = [n for n in result.plan.summary.notes if "left out of the model" in n]
    assert len(notes) == 1 and notes[0].startswith("fragmentation.expected"), notes
    assert not any(n.startswith("model build stopped") for n in result.plan.summary.notes)
    tiers = {t.name: t.status for t in result.plan.summary.tiers}
    assert tiers["fragmentation.expected"] == "derived (not in the model)"
    assert result.model_size["variables"] == whole - (end - start)  # nothing of it kept
    assert len(result.plan.pods) == 24
    assert sum(p.gpu_milli for p in result.plan.pods) == 10_000
    assert verify(s, result.plan) == []


def test_a_term_on_course_past_the_bound_stops_early(monkeypatch: pytest.MonkeyPatch) -> None:
    # no saved copy to go back to (the term's size was not thought to be at risk): the
    # build stops once a tenth of the term is built, far below the bound, not at it
    import gangplan.solver.model.objective as objective

    _start, end, _whole = _fragmentation_term(monkeypatch)
    monkeypatch.setattr(builder, "MAX_VARIABLES", end - 1)
    monkeypatch.setattr(objective, "VARIABLES_PER_WORK", 0)
    s = _shares_snapshot()
    result = solve_cycle(s, None, SHORT)
    assert result.status is CycleStatus.INCUMBENT
    notes = [n for n in result.plan.summary.notes if n.startswith("model build stopped")]
    assert len(notes) == 1 and "on course for" in notes[0], notes
    assert "into the objective's expected fragmentation" in notes[0]
    assert result.model_size["variables"] < end - (end - 1) // 4
    assert verify(s, result.plan) == []


def test_a_model_within_the_bound_is_not_stopped_by_its_projection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _start, _end, whole = _fragmentation_term(monkeypatch)
    monkeypatch.setattr(builder, "MAX_VARIABLES", whole)
    s = _shares_snapshot()
    result = solve_cycle(s, None, SHORT)
    assert not any(n.startswith("model build stopped") for n in result.plan.summary.notes)
    assert not any("left out of the model" in n for n in result.plan.summary.notes)
    assert result.model_size["variables"] == whole
    assert verify(s, result.plan) == []
