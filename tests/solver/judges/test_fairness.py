"""Fair targets (solver/judges/fairness.py; docs/design.md "Fair targets"), worked out by hand.

Shares are in ppm of the amount being shared. Targets come from weighted progressive
filling of dominant share over the queues of a class with pending demand: first up to each
queue's guaranteed amount, then in proportion to weight, never past its max or its demand;
weight-0 queues only afterwards, equally. The hand computation of every example is in the
test's comment.
"""

from __future__ import annotations

from collections.abc import Callable

from gangplan.models import Snapshot
from gangplan.solver.judges.fairness import fair_shares

GPU = "nvidia.com/gpu"


def targets(snapshot: Snapshot, priority: int = 0) -> dict[str, int]:
    return {q: t.target for q, t in fair_shares(snapshot).targets[priority].items()}


def test_weights_split_the_pool(two_nodes: Callable[..., Snapshot], one_role_gang) -> None:
    # 8 GPUs; 1 GPU = 125,000 ppm. Demands: qa 8 GPUs = 1,000,000, qb 8 GPUs = 1,000,000,
    # qz (weight 0) 4 GPUs = 500,000. No guarantees: phase 1 does nothing.
    # Phase 2, weights 2:1: qa = 2L, qb = L, 3L = 1,000,000 -> L = 333,333.3;
    # qa 666,666.7 -> floor 666,666; qb 333,333. The pool is gone: qz (phase 3) gets 0.
    snap = two_nodes(
        queues=[
            {"name": "qa", "weight": 2},
            {"name": "qb", "weight": 1},
            {"name": "qz", "weight": 0},
        ],
        gangs=[
            one_role_gang("a", "qa", count=2, gpus=4),
            one_role_gang("b", "qb", count=2, gpus=4),
            one_role_gang("z", "qz", count=1, gpus=4),
        ],
    )
    assert targets(snap) == {"qa": 666_666, "qb": 333_333, "qz": 0}


def test_guaranteed_first_then_weights_within_max(two_nodes, one_role_gang) -> None:
    # 8 GPUs; 1 GPU = 125,000 ppm.
    # qa: weight 1, guaranteed 4 GPUs (500,000), demand 8 GPUs (1,000,000)
    # qb: weight 2, demand 8 GPUs; qc: weight 1, max 1 GPU (125,000), demand 4 GPUs;
    # qz: weight 0, demand 2 GPUs.
    # Phase 1 (up to guaranteed): qa -> 500,000; 500,000 left.
    # Phase 2 (by weight): qa already holds 500,000 > L for the L reached, so it stays;
    # qb = 2L, qc = min(L, 125,000): 2L + 125,000 = 500,000 -> L = 187,500 (>= 125,000):
    # qb 375,000, qc 125,000 (its max). Pool gone: qz 0.
    snap = two_nodes(
        queues=[
            {"name": "qa", "weight": 1, "guaranteed": {GPU: 4}},
            {"name": "qb", "weight": 2},
            {"name": "qc", "weight": 1, "max": {GPU: 1}},
            {"name": "qz", "weight": 0},
        ],
        gangs=[
            one_role_gang("a", "qa", count=2, gpus=4),
            one_role_gang("b", "qb", count=2, gpus=4),
            one_role_gang("c", "qc", count=4, gpus=1),
            one_role_gang("z", "qz", count=2, gpus=1),
        ],
    )
    assert targets(snap) == {"qa": 500_000, "qb": 375_000, "qc": 125_000, "qz": 0}


def test_weight_zero_takes_only_what_is_left_equally(two_nodes, one_role_gang) -> None:
    # 8 GPUs. qa (w 1) demands 1 GPU = 125,000, qb (w 1) 2 GPUs = 250,000: both stop at
    # their demand, 625,000 is left. Then the weight-0 queues, equally: qy demands 2 GPUs
    # (250,000), qz 8 GPUs: min(L, 250,000) + L = 625,000 -> L = 375,000:
    # qy 250,000 (its demand), qz 375,000.
    snap = two_nodes(
        queues=[
            {"name": "qa"},
            {"name": "qb"},
            {"name": "qy", "weight": 0},
            {"name": "qz", "weight": 0},
        ],
        gangs=[
            one_role_gang("a", "qa", gpus=1),
            one_role_gang("b", "qb", count=2, gpus=1),
            one_role_gang("y", "qy", count=2, gpus=1),
            one_role_gang("z", "qz", count=2, gpus=4),
        ],
    )
    assert targets(snap) == {"qa": 125_000, "qb": 250_000, "qy": 250_000, "qz": 375_000}


def test_max_counts_running_usage(two_nodes, one_role_gang) -> None:
    # 8 GPUs. qc (max 2 GPUs = 250,000) already runs 1 GPU: base 125,000, and demands
    # 4 GPUs (500,000): it may add only 125,000 more, t_max = 125,000 / 500,000 = 0.25,
    # so it stops at 250,000. The pool is 1,000,000 - 125,000 (running) = 875,000.
    # qb (w 1) demands 8 GPUs: qb = L, qc = min(L, 250,000), and what they add is
    # L + (250,000 - 125,000) = 875,000 -> L = 750,000.
    snap = two_nodes(
        queues=[{"name": "qb"}, {"name": "qc", "max": {GPU: 2}}],
        gangs=[
            one_role_gang("b", "qb", count=2, gpus=4),
            one_role_gang("c", "qc", count=4, gpus=1),
        ],
        running=[{"name": "r", "queue": "qc", "node": "n1", "requests": {GPU: 1}}],
    )
    fs = fair_shares(snap)
    assert fs.base["qc"] == {GPU: 125_000}
    assert targets(snap) == {"qb": 750_000, "qc": 250_000}


def test_dominant_share_over_cpu_and_gpu_with_running_usage(snapshot_of, one_role_gang) -> None:
    # One node: 100 cpu, 10 GPUs (no memory: that resource is not shared).
    # Running in qa: 10 cpu, 2 GPUs -> base cpu 100,000, gpu 200,000 ppm.
    # qa demands 3 pods x (20 cpu, 1 GPU): cpu 600,000, gpu 300,000.
    # qb demands 6 pods x (1 cpu, 1 GPU): cpu 60,000, gpu 600,000.
    # Pool: gpu 800,000, cpu 900,000. Equal weights: both reach dominant share L.
    #   qa: cpu becomes dominant above L = 300,000; t_a = (L - 100,000) / 600,000.
    #   qb: gpu dominant, t_b = L / 600,000.
    #   GPU: 300,000 t_a + 600,000 t_b = 1.5 L - 50,000 <= 800,000 -> L <= 566,666.7
    #   CPU: 600,000 t_a + 60,000 t_b = 1.1 L - 100,000 <= 900,000 -> L <= 909,090.9
    #   demands: t_a <= 1 -> L <= 700,000; t_b <= 1 -> L <= 600,000.
    # The GPUs run out first: L = 566,666.7, floor 566,666 for both.
    snap = snapshot_of(
        nodes=[{"name": "big", "allocatable": {"cpu": 100, GPU: 10}}],
        queues=[{"name": "qa"}, {"name": "qb"}],
        gangs=[
            one_role_gang("a", "qa", count=3, gpus=1, role={"requests": {"cpu": 20, GPU: 1}}),
            one_role_gang("b", "qb", count=6, gpus=1, role={"requests": {"cpu": 1, GPU: 1}}),
        ],
        running=[{"name": "r", "queue": "qa", "node": "big", "requests": {"cpu": 10, GPU: 2}}],
    )
    fs = fair_shares(snap)
    assert fs.totals == {"cpu": 100_000, "memory": 0, GPU: 10_000}
    assert fs.base["qa"] == {"cpu": 100_000, GPU: 200_000}
    assert fs.targets[0]["qa"].demand == {"cpu": 600_000, GPU: 300_000}
    assert fs.targets[0]["qb"].demand == {"cpu": 60_000, GPU: 600_000}
    assert targets(snap) == {"qa": 566_666, "qb": 566_666}


def test_lower_class_shares_what_higher_classes_leave(two_nodes, one_role_gang) -> None:
    # 8 GPUs. Class 10: qa demands 4 GPUs = 500,000 and is alone: target 500,000.
    # Class 0 shares 1,000,000 - 500,000 (class 10's demand) = 500,000 between qa and qb,
    # each demanding 4 GPUs (500,000): 250,000 each.
    snap = two_nodes(
        queues=[{"name": "qa"}, {"name": "qb"}],
        gangs=[
            one_role_gang("hi", "qa", gpus=4, priority=10),
            one_role_gang("lo-a", "qa", gpus=4),
            one_role_gang("lo-b", "qb", gpus=4),
        ],
    )
    fs = fair_shares(snap)
    assert fs.classes == (10, 0)
    assert targets(snap, 10) == {"qa": 500_000}
    assert targets(snap, 0) == {"qa": 250_000, "qb": 250_000}


def test_pods_of_no_queue_are_not_shared(two_nodes, one_role_gang) -> None:
    # A queue-less pod holds 4 of the 8 GPUs: 4 GPUs are shared, 1 GPU = 250,000 ppm.
    # qa alone demands 2 GPUs: 500,000.
    snap = two_nodes(
        queues=[{"name": "qa"}],
        gangs=[one_role_gang("a", "qa", count=2, gpus=1)],
        running=[{"name": "system", "node": "n1", "requests": {GPU: 4}}],
    )
    fs = fair_shares(snap)
    assert fs.totals[GPU] == 4000
    assert fs.contribution({GPU: 1000}) == {GPU: 250_000}
    assert targets(snap) == {"qa": 500_000}


def test_contribution_rounds_to_the_nearest_ppm(snapshot_of, one_role_gang) -> None:
    # 3 GPUs: one GPU is 333,333.33 ppm -> 333,333; two are 666,666.67 -> 666,667;
    # a 500m share is 166,666.67 -> 166,667.
    snap = snapshot_of(
        nodes=[{"name": "n", "allocatable": {GPU: 3}}],
        queues=[{"name": "qa"}],
        gangs=[one_role_gang("a", "qa")],
    )
    fs = fair_shares(snap)
    assert fs.contribution({GPU: 1000}) == {GPU: 333_333}
    assert fs.contribution({GPU: 2000}) == {GPU: 666_667}
    assert fs.contribution({GPU: 500}) == {GPU: 166_667}


def test_guarantees_beyond_the_pool_are_met_at_one_rate(two_nodes, one_role_gang) -> None:
    # 8 GPUs; qa and qb are each guaranteed 6 GPUs (750,000) and demand 8. Phase 1 raises
    # both at one rate: 2L = 1,000,000 -> 500,000 each, and nothing is left for phase 2.
    snap = two_nodes(
        queues=[
            {"name": "qa", "guaranteed": {GPU: 6}},
            {"name": "qb", "weight": 3, "guaranteed": {GPU: 6}},
        ],
        gangs=[
            one_role_gang("a", "qa", count=2, gpus=4),
            one_role_gang("b", "qb", count=2, gpus=4),
        ],
    )
    assert targets(snap) == {"qa": 500_000, "qb": 500_000}


def test_a_queue_above_its_fair_level_gets_nothing_more(two_nodes, one_role_gang) -> None:
    # qa already runs 6 of 8 GPUs (750,000) and demands 2 more; qb demands 8. The pool is
    # 250,000. qb rises to L while qa stays (its share 750,000 is above any L reached):
    # qb 250,000; qa's target is its running share, 750,000.
    snap = two_nodes(
        queues=[{"name": "qa"}, {"name": "qb"}],
        gangs=[
            one_role_gang("a", "qa", count=2, gpus=1),
            one_role_gang("b", "qb", count=2, gpus=4),
        ],
        running=[
            {"name": "r1", "queue": "qa", "node": "n1", "requests": {GPU: 4}},
            {"name": "r2", "queue": "qa", "node": "n2", "requests": {GPU: 2}},
        ],
    )
    assert targets(snap) == {"qa": 750_000, "qb": 250_000}
