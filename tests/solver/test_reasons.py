"""Pending reasons: the three classes of DESIGN.md, with the binding constraint and numbers.

Each instance is small enough to reason about by hand; the expected class follows from
DESIGN.md's definitions (never fits: not even on the empty cluster within the queue's max;
blocked: by running pods or the queue's headroom; lost: other gangs took the room).
"""

from __future__ import annotations

from typing import Any

from gangplan.models import load_instance
from gangplan.solver.cycle import solve_cycle
from gangplan.solver.result import SolverConfig
from gangplan.solver.verify import verify

CFG = SolverConfig(time_limit_s=20, deterministic=True, deterministic_time=5.0)


def _node(name: str, gpus: int, cpu: int = 16, leaf: str = "l1") -> dict[str, Any]:
    return {
        "name": name,
        "domains": {"leaf": leaf},
        "allocatable": {"cpu": cpu, "memory": "64Gi", "nvidia.com/gpu": gpus},
    }


def _solve(data: dict[str, Any]) -> dict[str, tuple[str, str]]:
    s, _ = load_instance({"levels": [{"name": "leaf"}], **data})
    result = solve_cycle(s, config=CFG)
    assert verify(s, result.plan) == []
    return {
        o.gang: (o.reason.kind, o.reason.message) for o in result.plan.gangs if o.reason is not None
    }


def test_never_fits_names_the_size_and_the_largest_leaf() -> None:
    # two leaves of 2 x 8 GPUs: a gang of 3 x 8 GPUs inside one leaf can never fit
    reasons = _solve(
        {
            "nodes": [
                _node("a", 8),
                _node("b", 8),
                _node("c", 8, leaf="l2"),
                _node("d", 8, leaf="l2"),
            ],
            "queues": [{"name": "q"}],
            "gangs": [
                {
                    "name": "g",
                    "queue": "q",
                    "topology": {"required": "leaf"},
                    "roles": [{"name": "w", "count": 3, "requests": {"nvidia.com/gpu": 8}}],
                }
            ],
        }
    )
    kind, msg = reasons["g"]
    assert kind == "never_fits"
    assert "inside one leaf" in msg and "holds 2 of them" in msg


def test_never_fits_by_queue_max() -> None:
    reasons = _solve(
        {
            "nodes": [_node("a", 8)],
            "queues": [{"name": "q", "max": {"nvidia.com/gpu": 4}}],
            "gangs": [
                {
                    "name": "g",
                    "queue": "q",
                    "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 8}}],
                }
            ],
        }
    )
    kind, msg = reasons["g"]
    assert kind == "never_fits"
    assert "max of 4 nvidia.com/gpu" in msg and "at least 8" in msg


def test_blocked_by_running_pods() -> None:
    # 8 GPUs, 6 held by a running pod: a 4-GPU pod would fit the empty node, not now
    reasons = _solve(
        {
            "nodes": [_node("a", 8)],
            "queues": [{"name": "q"}],
            "running": [{"name": "r", "node": "a", "requests": {"nvidia.com/gpu": 6}}],
            "gangs": [
                {
                    "name": "g",
                    "queue": "q",
                    "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 4}}],
                }
            ],
        }
    )
    assert reasons["g"][0] == "blocked"
    assert "running pods" in reasons["g"][1]


def test_blocked_by_queue_headroom() -> None:
    # max 8 GPUs, running pods of the queue hold 6: a 4-GPU gang would exceed it
    reasons = _solve(
        {
            "nodes": [_node("a", 8), _node("b", 8)],
            "queues": [{"name": "q", "max": {"nvidia.com/gpu": 8}}],
            "running": [
                {"name": "r", "node": "a", "queue": "q", "requests": {"nvidia.com/gpu": 6}}
            ],
            "gangs": [
                {
                    "name": "g",
                    "queue": "q",
                    "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 4}}],
                }
            ],
        }
    )
    kind, msg = reasons["g"]
    assert kind == "blocked"
    assert "queue q would exceed its max of 8" in msg and "running pods use 6" in msg


def test_lost_to_higher_priority() -> None:
    # one 8-GPU node, two 8-GPU gangs: the higher priority one wins, the other lost it
    reasons = _solve(
        {
            "nodes": [_node("a", 8)],
            "queues": [{"name": "q"}],
            "gangs": [
                {
                    "name": "hi",
                    "queue": "q",
                    "priority": 10,
                    "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 8}}],
                },
                {
                    "name": "lo",
                    "queue": "q",
                    "priority": 0,
                    "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 8}}],
                },
            ],
        }
    )
    assert "hi" not in reasons
    kind, msg = reasons["lo"]
    assert kind == "lost"
    assert msg.endswith("went to gangs of higher priority than its 0: hi")


def test_multi_role_gang_the_bound_cannot_decide_is_checked_exactly() -> None:
    # one node, 4 GPUs and 4 cpu; roles A and B each one pod of 2 GPUs and 3 cpu. Each role
    # alone fits (so the per-role bound says "fits"), together they need 6 cpu > 4: the
    # exact check must call it never fits.
    reasons = _solve(
        {
            "nodes": [_node("a", 4, cpu=4)],
            "queues": [{"name": "q"}],
            "gangs": [
                {
                    "name": "g",
                    "queue": "q",
                    "roles": [
                        {"name": "a", "count": 1, "requests": {"nvidia.com/gpu": 2, "cpu": 3}},
                        {"name": "b", "count": 1, "requests": {"nvidia.com/gpu": 2, "cpu": 3}},
                    ],
                }
            ],
        }
    )
    kind, msg = reasons["g"]
    assert kind == "never_fits"
    assert "exact check" in msg


def test_a_cpu_bound_gang_is_told_cpu_not_gpu_fragmentation() -> None:
    # nodes of 64 CPUs: a pod asking 100 CPUs can never fit; the reason must name cpu
    reasons = _solve(
        {
            "nodes": [_node("a", 8, cpu=64), _node("b", 8, cpu=64)],
            "queues": [{"name": "q"}],
            "gangs": [
                {
                    "name": "g",
                    "queue": "q",
                    "roles": [
                        {"name": "w", "count": 1, "requests": {"cpu": 100, "nvidia.com/gpu": 1}}
                    ],
                }
            ],
        }
    )
    kind, msg = reasons["g"]
    assert kind == "never_fits"
    assert "no node it may use has 100 cpu free for one w pod (the most any has: 64)" in msg


def test_lost_names_who_took_its_nodes_not_any_higher_priority_gang() -> None:
    # node a has 8 free GPUs, node b 4 (a running pod holds the other 4). 'hi' (priority 10,
    # 4 GPUs) fills b; eq1 and eq2 (priority 0, 8 GPUs each) compete for a. The one left
    # out lost node a to the other, not to 'hi', which took a node it could never use.
    reasons = _solve(
        {
            "nodes": [_node("a", 8), _node("b", 8)],
            "queues": [{"name": "q"}],
            "running": [{"name": "r", "node": "b", "requests": {"nvidia.com/gpu": 4}}],
            "gangs": [
                {
                    "name": "hi",
                    "queue": "q",
                    "priority": 10,
                    "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 4}}],
                },
                {
                    "name": "eq1",
                    "queue": "q",
                    "creation_time": 1,
                    "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 8}}],
                },
                {
                    "name": "eq2",
                    "queue": "q",
                    "creation_time": 2,
                    "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 8}}],
                },
            ],
        }
    )
    assert "hi" not in reasons
    (loser,) = [g for g in ("eq1", "eq2") if g in reasons]
    winner = "eq2" if loser == "eq1" else "eq1"
    kind, msg = reasons[loser]
    assert kind == "lost"
    assert f"went to {winner} (this cycle ranks priority" in msg
    assert "higher priority" not in msg
