"""GPUs still placeable per queue after a plan (solver/judges/placeable.py), worked out by hand.

Each queue gets the smallest of: the GPUs the plan leaves free on the ready, schedulable
nodes its pending gangs may use; its max less what its running and planned pods hold; its
fair ceiling (the share it would be filled to asking for every GPU) less the share it holds
after the plan. The hand computation is in each test's comment.
"""

from __future__ import annotations

from collections.abc import Callable

from gangplan.models import Snapshot
from gangplan.solver.judges.placeable import placeable_gpus
from gangplan.solver.judges.verify import verify

GPU = "nvidia.com/gpu"


def gpu_node(name: str, gpus: int, labels: dict[str, str], **extra: object) -> dict:
    return {"name": name, "labels": labels, "allocatable": {GPU: gpus}, **extra}


def test_the_fair_ceiling_bounds_a_queue_below_the_free_room(
    two_nodes: Callable[..., Snapshot], one_role_gang, plan_of
) -> None:
    # 8 GPUs (1 GPU = 125,000 ppm), weights 1 and 1. qa's gang a (1 x 2 GPUs) is placed on
    # n1; qb's gang b (2 x 4 GPUs) is pending. Free after the plan: n1 2 + n2 4 = 6.
    # qa asking for all: qa 1,000,000 and qb 1,000,000 of demand, equal weights: 500,000
    # each; qa holds 250,000 after the plan: 250,000 more = 2 GPUs. min(6, 2) = 2.
    # qb asking for all: qa stops at its demand 250,000, qb fills to 750,000 = 6 GPUs; it
    # holds none: 6. min(6, 6) = 6.
    snap = two_nodes(
        queues=[{"name": "qa"}, {"name": "qb"}],
        gangs=[
            one_role_gang("a", "qa", count=1, gpus=2),
            one_role_gang("b", "qb", count=2, gpus=4),
        ],
    )
    plan = plan_of(snap, {"a": [("w", "n1")]})
    assert verify(snap, plan) == []
    assert placeable_gpus(snap, plan) == {"qa": 2.0, "qb": 6.0}


def test_free_room_counts_only_nodes_the_queue_s_gangs_may_use(snapshot_of, one_role_gang) -> None:
    # n1 (pool a, 4 GPUs), n2 (pool b, 2 GPUs), n3 (pool b, 4 GPUs, cordoned): 10 GPUs
    # shared (a cordoned node's allocatable still counts in the total), 1 GPU = 100,000 ppm.
    # qa's gang asks pool a, qb's pool b (1 x 1 GPU each); qc has no pending gang.
    # Fair ceilings (class 0, weights 1): asking for all, qa fills to 1,000,000 - 100,000
    # (qb stops at its demand) = 900,000 = 9 GPUs; qb likewise 9; qc: qa and qb stop at
    # 100,000 each, qc 800,000 = 8 GPUs. No plan.
    # Free room: qa n1 only = 4; qb n2 only (n3 cordoned) = 2; qc every ready, schedulable
    # node = 4 + 2 = 6. min: qa 4, qb 2, qc 6.
    snap = snapshot_of(
        nodes=[
            gpu_node("n1", 4, {"pool": "a"}),
            gpu_node("n2", 2, {"pool": "b"}),
            gpu_node("n3", 4, {"pool": "b"}, unschedulable=True),
        ],
        queues=[{"name": "qa"}, {"name": "qb"}, {"name": "qc"}],
        gangs=[
            one_role_gang("a", "qa", role={"node_selector": {"pool": "a"}}),
            one_role_gang("b", "qb", role={"node_selector": {"pool": "b"}}),
        ],
    )
    assert placeable_gpus(snap, None) == {"qa": 4.0, "qb": 2.0, "qc": 6.0}


def test_a_queue_s_max_counts_its_running_and_planned_pods(
    two_nodes: Callable[..., Snapshot], one_role_gang, plan_of
) -> None:
    # 8 GPUs. qa (max 3 GPUs) runs 1 GPU on n1 and its gang a (1 x 1 GPU) is placed on n1:
    # it holds 2 of its 3, so 1 more. (Its fair ceiling says the same: the max caps it at
    # 375,000, it holds 250,000: 125,000 = 1 GPU.) Free: n1 4 - 1 - 1 = 2, n2 4 = 6.
    snap = two_nodes(
        queues=[{"name": "qa", "max": {GPU: 3}}],
        gangs=[one_role_gang("a", "qa", count=1, gpus=1)],
        running=[{"name": "r", "queue": "qa", "node": "n1", "requests": {GPU: 1}}],
    )
    plan = plan_of(snap, {"a": [("w", "n1")]})
    assert verify(snap, plan) == []
    assert placeable_gpus(snap, plan) == {"qa": 1.0}


def test_no_gpu_shared_means_nothing_placeable(snapshot_of) -> None:
    # Nodes with CPUs only: the cluster shares no GPU, so no queue can be given one.
    snap = snapshot_of(
        nodes=[{"name": "c1", "allocatable": {"cpu": 8}}],
        queues=[{"name": "qa"}],
        gangs=[],
    )
    assert placeable_gpus(snap, None) == {"qa": 0.0}
