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
