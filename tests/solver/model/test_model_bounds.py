"""The model's build stops as soon as it passes its bounds (``MAX_VARIABLES``), so a large
cycle never spends its budget building a model it would not solve; the incumbent (a
verified baseline plan) is returned and the note says where the build stopped."""

from __future__ import annotations

import pytest

import gangplan.solver.model.build as build
from gangplan.models import load_instance
from gangplan.solver.cycle.pipeline import solve_cycle
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import CycleStatus, SolverConfig

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
    monkeypatch.setattr(build, "MAX_VARIABLES", bound)
    s = _snapshot()
    result = solve_cycle(s, None, DET)
    assert result.status is CycleStatus.INCUMBENT
    notes = [n for n in result.plan.summary.notes if n.startswith("model build stopped")]
    assert len(notes) == 1 and f"over {bound})" in notes[0], result.plan.summary.notes
    assert "family" in notes[0]
    assert verify(s, result.plan) == []
    assert len(result.plan.pods) == 3  # the baseline places everything here too


def _shares_snapshot(whole_first: int = 0):  # type: ignore[no-untyped-def]
    # 40 alike nodes of 4 GPUs, 24 one-pod gangs asking GPU shares (250m, 500m, 750m): the
    # expected-fragmentation term adds variables at every node alike. whole_first: that
    # many nodes of 8 GPUs of model B before them, for gangs of whole B GPUs (no shares
    # there: a node of another cost, first in node order)
    sizes = [250, 500, 250, 750, 500, 250] * 4
    b_nodes = [
        {"name": f"b{i:02d}", "gpu_model": "B", "allocatable": {GPU: 8, "cpu": 16}}
        for i in range(whole_first)
    ]
    b_gangs = [
        {
            "name": f"w{i}",
            "queue": "q",
            "gpu_models": ["B"],
            "roles": [{"name": "w", "count": 1, "requests": {GPU: k, "cpu": c}}],
        }
        for i, (k, c) in enumerate([(1, 4), (2, 6), (4, 3), (1, 10), (2, 12), (3, 2)])
        if whole_first
    ]
    return load_instance(
        {
            "apiVersion": "gangplan.io/v1alpha1",
            "kind": "Instance",
            "nodes": b_nodes
            + [
                {"name": f"n{i:02d}", "gpu_model": "A", "allocatable": {GPU: 4, "cpu": 32}}
                for i in range(40)
            ],
            "queues": [{"name": "q"}],
            "gangs": b_gangs
            + [
                {
                    "name": f"s{i}",
                    "queue": "q",
                    "gpu_models": ["A"],
                    "roles": [{"name": "w", "count": 1, "requests": {GPU: m / 1000, "cpu": 1}}],
                }
                for i, m in enumerate(sizes)
            ],
        }
    )[0]


def _sparse_after_snapshot():  # type: ignore[no-untyped-def]
    # 4 nodes of 4 GPUs of model A where shares go, first in node order, then 60 nodes of 8
    # GPUs of model B for one-GPU pods: the term's first nodes are dense, the rest sparse
    nodes = [
        {"name": f"a{i:02d}", "gpu_model": "A", "allocatable": {GPU: 4, "cpu": 32}}
        for i in range(4)
    ] + [
        {"name": f"m{i:02d}", "gpu_model": "B", "allocatable": {GPU: 8, "cpu": 64}}
        for i in range(60)
    ]
    gangs = [
        {
            "name": f"s{i}",
            "queue": "q",
            "gpu_models": ["A"],
            "roles": [{"name": "w", "count": 1, "requests": {GPU: m / 1000, "cpu": 1}}],
        }
        for i, m in enumerate([250, 500, 750, 250])
    ] + [
        {
            "name": f"w{i}",
            "queue": "q",
            "gpu_models": ["B"],
            "roles": [{"name": "w", "count": 1, "requests": {GPU: 1, "cpu": 1}}],
        }
        for i in range(2)
    ]
    return load_instance(
        {
            "apiVersion": "gangplan.io/v1alpha1",
            "kind": "Instance",
            "nodes": nodes,
            "queues": [{"name": "q"}],
            "gangs": gangs,
        }
    )[0]


def _fragmentation_term(
    monkeypatch: pytest.MonkeyPatch, whole_first: int = 0
) -> tuple[int, int, int]:
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
        result = solve_cycle(_shares_snapshot(whole_first), None, SHORT)
    return seen["start"], seen["end"], result.model_size["variables"]


def _left_out(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [n for n in result.plan.summary.notes if "left out of the model" in n]


def _stopped(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [n for n in result.plan.summary.notes if n.startswith("model build stopped")]


@pytest.mark.parametrize("past", ["far", "near"])
def test_a_term_that_takes_the_model_past_the_bound_is_left_out(
    monkeypatch: pytest.MonkeyPatch, past: str
) -> None:
    # the term would take the model past its bound: it is left out, and the rest of the
    # model is built and solved (all 24 shares fit, 10,000 milli-GPU: 40 x 4 free GPUs).
    # far: one below the whole model (the term is built last, so its end is the whole
    # model's size); near: 5 variables above the model without the term, which the term
    # passes before a tenth of it is built
    start, end, whole = _fragmentation_term(monkeypatch)
    assert end == whole
    rest = whole - (end - start)
    bound = {"far": end - 1, "near": rest + 5}[past]
    monkeypatch.setattr(build, "MAX_VARIABLES", bound)
    s = _shares_snapshot()
    result = solve_cycle(s, None, SHORT)
    assert result.status in (CycleStatus.OPTIMAL, CycleStatus.FEASIBLE)
    notes = _left_out(result)
    assert len(notes) == 1 and notes[0].startswith("fragmentation.expected"), notes
    assert not _stopped(result)
    tiers = {t.name: t.status for t in result.plan.summary.tiers}
    assert tiers["fragmentation.expected"] == "derived (not in the model)"
    assert result.model_size["variables"] == rest  # nothing of the term kept
    assert len(result.plan.pods) == 24
    assert sum(p.gpu_milli for p in result.plan.pods) == 10_000
    assert verify(s, result.plan) == []


def test_without_a_saved_copy_a_term_past_the_bound_stops_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # no saved copy to go back to (as if the term's bound had fitted): the build stops
    # where the model passes the bound, inside the term, and the incumbent is returned
    import gangplan.solver.model.objective as objective

    _start, end, _whole = _fragmentation_term(monkeypatch)
    monkeypatch.setattr(build, "MAX_VARIABLES", end - 100)
    monkeypatch.setattr(objective, "VARIABLES_PER_WORK", 0)
    s = _shares_snapshot()
    result = solve_cycle(s, None, SHORT)
    assert result.status is CycleStatus.INCUMBENT
    notes = _stopped(result)
    assert len(notes) == 1 and "into the objective's expected fragmentation" in notes[0], notes
    assert end - 100 < result.model_size["variables"] < end
    assert verify(s, result.plan) == []


@pytest.mark.parametrize("order", ["alike", "sparse first", "dense first"])
def test_a_model_within_the_bound_is_built_whole(
    monkeypatch: pytest.MonkeyPatch, order: str
) -> None:
    # at a bound equal to the whole model, nothing is stopped or left out, also when nodes
    # of another cost come first in node order: 20 nodes of 8 whole GPUs before the share
    # nodes (sparse first), or 4 share nodes before 60 nodes of whole GPUs (dense first)
    import gangplan.solver.model.objective as objective

    make = {
        "alike": lambda: _shares_snapshot(),
        "sparse first": lambda: _shares_snapshot(20),
        "dense first": _sparse_after_snapshot,
    }[order]
    seen: dict[str, int] = {}
    original = objective._expected_fragmentation

    def recorded(model, ix, v, terms, check, limit):  # type: ignore[no-untyped-def]
        original(model, ix, v, terms, check, limit)
        seen["end"] = len(model.proto.variables)

    with monkeypatch.context() as m:
        m.setattr(objective, "_expected_fragmentation", recorded)
        whole = solve_cycle(make(), None, SHORT).model_size["variables"]
    monkeypatch.setattr(build, "MAX_VARIABLES", whole)
    s = make()
    result = solve_cycle(s, None, SHORT)
    assert not _stopped(result) and not _left_out(result), result.plan.summary.notes
    assert result.model_size["variables"] == whole
    assert verify(s, result.plan) == []


@pytest.mark.parametrize("projection", [True, False])
def test_a_term_whose_build_would_take_too_long_is_left_out(
    monkeypatch: pytest.MonkeyPatch, projection: bool
) -> None:
    # the builder's check stops the build for time half way into the term: on a wall-clock
    # projection, with a saved copy, the term is left out and the rest solved; when the
    # time is already spent, leaving the term out saves nothing and the build stops
    import gangplan.solver.model.objective as objective
    from gangplan.solver.model.outcome import ModelOutcome

    start, end, whole = _fragmentation_term(monkeypatch)
    monkeypatch.setattr(build, "MAX_VARIABLES", end - 1)  # the term's size is at risk
    original = objective._expected_fragmentation
    stop = ModelOutcome(CycleStatus.INCUMBENT, None, notes=["model build stopped (here)"])

    def slow(model, ix, v, terms, check, limit):  # type: ignore[no-untyped-def]
        def timed(name: str, share: float) -> None:
            if 0.5 <= share < 1.0:
                why = "on course for 9.00 s, over the 7.00 s it may take"
                raise objective.BuildStopped(why, stop, projection=projection)
            check(name, share)

        original(model, ix, v, terms, timed, limit)

    monkeypatch.setattr(objective, "_expected_fragmentation", slow)
    s = _shares_snapshot()
    result = solve_cycle(s, None, SHORT)
    assert verify(s, result.plan) == []
    if not projection:
        assert result.status is CycleStatus.INCUMBENT and not _left_out(result)
        assert "model build stopped (here)" in result.plan.summary.notes
        return
    notes = _left_out(result)
    assert len(notes) == 1 and "its build was on course for 9.00 s" in notes[0], notes
    assert not _stopped(result)
    assert result.model_size["variables"] == whole - (end - start)
    assert len(result.plan.pods) == 24
