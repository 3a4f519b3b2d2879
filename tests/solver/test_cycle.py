"""The cycle end to end on small cases worked out by hand."""

from __future__ import annotations

from typing import Any

from gangplan.models import Plan, PodPlacement, Snapshot, load_instance
from gangplan.solver.cycle import solve_cycle
from gangplan.solver.result import SolverConfig, assemble_plan
from gangplan.solver.verify import verify

GPU = "nvidia.com/gpu"
API = {"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance"}
DET = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=10.0, seed=0)


def _snapshot(**parts: Any) -> Snapshot:
    s, warnings = load_instance({**API, **parts})
    assert warnings == []
    return s


def _previous(s: Snapshot, where: dict[str, str]) -> Plan:
    """A previous plan putting each named pod of gang g (role w) on a node."""
    pods = [PodPlacement(pod=p, gang="g", role="w", node=n) for p, n in where.items()]
    return assemble_plan(s, pods, {})


def _nodes_of(plan: Plan) -> dict[str, str]:
    return {p.pod: p.node for p in plan.pods}


def test_a_node_left_with_a_running_share_stays_partly_used_in_the_model() -> None:
    """Regression: the model's fragmentation entry counted free milli-GPU in whole GPUs when
    no pending pod asked a share, so n2 (2 GPUs, a running 500m share: 1500 free) looked
    full after one more whole GPU, though 500 stay free. Here g (1 pod, 1 GPU) was on n1 in
    the previous plan. On n1 (1 GPU): n1 full, n2 partly used by its running share: one
    partly used node; on n2: n2 has 500 free, partly used, n1 empty: one too. The tie goes
    to stability: g stays on n1 (0), where the old count wrongly preferred n2 (-1)."""
    s = _snapshot(
        nodes=[{"name": "n1", "allocatable": {GPU: 1}}, {"name": "n2", "allocatable": {GPU: 2}}],
        queues=[{"name": "q"}],
        running=[{"name": "r", "node": "n2", "requests": {GPU: "500m"}, "devices": ["gpu-0"]}],
        gangs=[
            {"name": "g", "queue": "q", "roles": [{"name": "w", "count": 1, "requests": {GPU: 1}}]}
        ],
    )
    previous = _previous(s, {"g-w-0": "n1"})
    result = solve_cycle(s, previous, DET)
    assert verify(s, result.plan) == []
    assert _nodes_of(result.plan) == {"g-w-0": "n1"}
    assert result.score["fragmentation.gpu_nodes"] == -1
    assert result.score["stability"] == 0
    # the model's own value of the entry is the plan's (the tier report keeps the bound)
    frag = next(t for t in result.plan.summary.tiers if t.name == "fragmentation.gpu_nodes")
    assert frag.bound == -1
