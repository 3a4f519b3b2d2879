"""Regression: one free-capacity rule for placers and verifier alike.

A node with 1 GPU whose running pods hold 500m and 1 whole GPU (a GPU lost) has nothing left
by the node's total; every placer once put a 250m share on the device's 500 milli, a plan
``gangplan verify`` rejected.
"""

from __future__ import annotations

import pytest

from gangplan.models import load_instance
from gangplan.solver.cycle.pipeline import PLACERS, run_baseline, solve_cycle
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import SolverConfig

GPU = "nvidia.com/gpu"
INSTANCE = {
    "apiVersion": "gangplan.io/v1alpha1",
    "kind": "Instance",
    "nodes": [
        {"name": "lost", "allocatable": {"cpu": 8, "memory": "32Gi", GPU: 1}},
        {"name": "spare", "allocatable": {"cpu": 8, "memory": "32Gi", GPU: 1}},
    ],
    "queues": [{"name": "q"}],
    "running": [
        {"name": "a", "node": "lost", "requests": {GPU: "500m"}},
        {"name": "b", "node": "lost", "requests": {GPU: 1}},
    ],
    "gangs": [
        {
            "name": f"s{i}",
            "queue": "q",
            "roles": [{"name": "p", "count": 1, "requests": {"cpu": 1, GPU: "250m"}}],
        }
        for i in range(5)
    ],
}


@pytest.mark.parametrize("placer", [p for p in PLACERS if p != "cpsat"])
def test_baselines_see_no_room_on_a_node_with_a_lost_gpu(placer: str) -> None:
    snap, _ = load_instance(INSTANCE)
    result = run_baseline(snap, placer)
    assert verify(snap, result.plan) == []
    # 'lost' has nothing by its total; 'spare' holds 4 shares of 250m: 4 admitted, 1 pending
    assert {p.node for p in result.plan.pods} == {"spare"}
    assert len(result.plan.pods) == 4


def test_cpsat_sees_no_room_on_a_node_with_a_lost_gpu() -> None:
    snap, _ = load_instance(INSTANCE)
    result = solve_cycle(snap, config=SolverConfig(deterministic=True, time_limit_s=5))
    assert verify(snap, result.plan) == []
    assert {p.node for p in result.plan.pods} == {"spare"}
    assert len(result.plan.pods) == 4
