"""Plan metrics (solver/judges/metrics.py) on tiny plans, every expected value worked out by hand.

Clusters are the shared fixtures: ``two_nodes`` (n1, n2 of 4 GPUs, no levels) and
``fat_tree`` (2 spines x 2 leaves x 2 nodes of 4 GPUs; leaves s1/l1 = n1, n2; s1/l2 = n3,
n4; s2/l1 = n5, n6; s2/l2 = n7, n8). Fair targets are in ppm of dominant share (one GPU
of ``two_nodes`` is 125,000 ppm).
"""

from __future__ import annotations

import pytest

from gangplan.models import Plan, PlanSummary, TierReport
from gangplan.solver.judges.metrics import jain_index, plan_metrics
from gangplan.solver.judges.verify import verify

GPU = "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("xs", "expected"),
    [
        ([1.0, 1.0, 1.0], 1.0),  # all equal: 9 / (3 * 3)
        ([1.0, 0.0], 0.5),  # one gets all: 1 / (2 * 1) = 1/n
        ([0.5, 1.0], 0.9),  # 1.5^2 / (2 * 1.25) = 2.25 / 2.5
        ([2.0, 1.0, 1.0], 16 / 18),  # 4^2 / (3 * 6)
    ],
)
def test_jain_index_by_hand(xs: list[float], expected: float) -> None:
    assert jain_index(xs) == pytest.approx(expected)


@pytest.mark.parametrize("xs", [[], [0.0, 0.0]], ids=["no-values", "all-zero"])
def test_jain_index_undefined(xs: list[float]) -> None:
    assert jain_index(xs) is None


def test_throughput_fairness_and_stranded_gpus(two_nodes, one_role_gang, plan_of) -> None:
    # qa demands 8 GPUs (a1, a2: 4 each), qb 3 (b1). Equal weights: qa 625,000 ppm,
    # qb 375,000 ppm (water filling: L + 375,000 = 1,000,000).
    snap = two_nodes(
        queues=[{"name": "qa"}, {"name": "qb"}],
        gangs=[
            one_role_gang("a1", "qa", gpus=4),
            one_role_gang("a2", "qa", gpus=4),
            one_role_gang("b1", "qb", gpus=3),
        ],
    )
    plan = plan_of(snap, {"a1": [("w", "n1")], "b1": [("w", "n2")]})
    assert verify(snap, plan) == []
    m = plan_metrics(snap, plan)
    # 7 of the 11 GPUs asked, of the 8 free; 2 of 3 gangs, all priority 0
    assert (m.gpus_placed, m.gpus_demand, m.gpus_free) == (7, 11, 8)
    assert m.placed_of_demand == pytest.approx(7 / 11)
    assert m.placed_of_free == pytest.approx(7 / 8)
    assert m.gangs == ((0, 2, 3),)
    # qa: 4 GPUs = 500,000 of 625,000 (0.8); qb: 3 GPUs = 375,000 of 375,000 (1.0)
    by_queue = {q.queue: (q.allocation_ppm, q.target_ppm) for q in m.queues}
    assert by_queue == {"qa": (500_000, 625_000), "qb": (375_000, 375_000)}
    # Jain over (0.8, 1.0): 1.8^2 / (2 * 1.64) = 3.24 / 3.28
    assert m.jain == pytest.approx(3.24 / 3.28)
    assert m.min_fair_ratio == pytest.approx(0.8)
    assert m.queues_below_target == 1
    # n1 full, n2 has 3 of 4 taken: 1 GPU stranded on 1 partly used node
    assert (m.stranded_gpus, m.partly_used_nodes) == (1, 1)
    # no multi-pod gang: no locality figures
    assert m.locality == ()
    assert m.one_leaf_share is None and m.mean_spread_over_min is None


def test_spread_over_minimum_and_one_leaf(fat_tree, one_role_gang, plan_of) -> None:
    # g: 4 pods x 2 GPUs = 8 GPUs; a leaf has 8 GPUs, so its minimum is 1 leaf, and on the
    # empty cluster one leaf can hold it.
    snap = fat_tree(queues=[{"name": "qa"}], gangs=[one_role_gang("g", count=4, gpus=2)])
    # one leaf (s1/l1): spread 0, and it got the one leaf it fits in
    tight = plan_metrics(snap, plan_of(snap, {"g": [("w", n) for n in ("n1", "n1", "n2", "n2")]}))
    (g,) = tight.locality
    assert (g.leaves_used, g.min_leaves, g.fits_one_leaf) == (1, 1, True)
    assert (tight.spread_over_min, tight.one_leaf_fit, tight.one_leaf_got) == (0, 1, 1)
    assert tight.one_leaf_share == 1.0
    # n1..n4: leaves s1/l1 and s1/l2, 2 used for a minimum of 1: spread 1, share 0
    loose = plan_metrics(snap, plan_of(snap, {"g": [("w", n) for n in ("n1", "n2", "n3", "n4")]}))
    (g,) = loose.locality
    assert (g.leaves_used, g.min_leaves, g.spread_over_min) == (2, 1, 1)
    assert (loose.spread_over_min, loose.spread_gangs, loose.mean_spread_over_min) == (1, 1, 1.0)
    assert (loose.one_leaf_fit, loose.one_leaf_got, loose.one_leaf_share) == (1, 0, 0.0)


def test_minimum_is_by_size_and_fit_by_free_capacity(fat_tree, one_role_gang, plan_of) -> None:
    # Running pods hold 2 GPUs on n2, n4, n6 and n8: every leaf has 4 + 2 = 6 GPUs free.
    # x: 1 pod of 4 GPUs + 1 of 2 (6 GPUs) fits one leaf (4 on the empty node, 2 beside the
    # running pod); y: 1 x 4 + 2 x 2 (8 GPUs) fits none any more, although its minimum by
    # size (leaves of 8 GPUs) is still 1 leaf.
    def two_roles(name: str, small: int) -> dict:
        return {
            "name": name,
            "queue": "qa",
            "roles": [
                {"name": "big", "count": 1, "requests": {GPU: 4}},
                {"name": "small", "count": small, "requests": {GPU: 2}},
            ],
        }

    snap = fat_tree(
        queues=[{"name": "qa"}],
        gangs=[two_roles("x", 1), two_roles("y", 2)],
        running=[
            {"name": f"r{n}", "queue": "qa", "node": n, "requests": {GPU: 2}}
            for n in ("n2", "n4", "n6", "n8")
        ],
    )
    plan = plan_of(
        snap,
        {
            "x": [("big", "n1"), ("small", "n2")],  # s1/l1 only
            "y": [("big", "n3"), ("small", "n4"), ("small", "n5")],  # s1/l2 and s2/l1
        },
    )
    assert verify(snap, plan) == []
    m = plan_metrics(snap, plan)
    x, y = m.locality
    assert (x.gang, x.leaves_used, x.min_leaves, x.fits_one_leaf) == ("default/x", 1, 1, True)
    assert (y.gang, y.leaves_used, y.min_leaves, y.fits_one_leaf) == ("default/y", 2, 1, False)
    # spread: y alone, 2 - 1; one-leaf share: only x fits one leaf, and it got one
    assert (m.spread_over_min, m.spread_gangs) == (1, 1)
    assert (m.one_leaf_fit, m.one_leaf_got, m.one_leaf_share) == (1, 1, 1.0)
    # after the plan: n1..n4 full; n5, n6, n8 have 2 of 4 taken (2 GPUs free each); n7 empty
    assert (m.stranded_gpus, m.partly_used_nodes) == (6, 3)
    # no node has 8 GPUs: no 8-GPU pod fits anywhere
    assert (m.largest_8gpu_gang_leaf, m.largest_8gpu_gang_any) == (0, 0)


def test_largest_8gpu_gang_that_still_fits(snapshot_of, one_role_gang, plan_of) -> None:
    # Leaf A: a1 (8 GPUs), a2 (8, 1 held by a running pod), c1 (8, cordoned).
    # Leaf B: b1 (8), b2 (16). The plan puts one 8-GPU pod on b1.
    def node(name: str, leaf: str, gpus: int, **extra: object) -> dict:
        return {"name": name, "labels": {"lf": leaf}, "allocatable": {GPU: gpus}, **extra}

    snap = snapshot_of(
        levels=[{"name": "leaf", "node_label": "lf"}],
        nodes=[
            node("a1", "A", 8),
            node("a2", "A", 8),
            node("c1", "A", 8, unschedulable=True),
            node("b1", "B", 8),
            node("b2", "B", 16),
        ],
        queues=[{"name": "qa"}],
        gangs=[one_role_gang("big", gpus=8)],
        running=[{"name": "r", "queue": "qa", "node": "a2", "requests": {GPU: 1}}],
    )
    plan = plan_of(snap, {"big": [("w", "b1")]})
    assert verify(snap, plan) == []
    m = plan_metrics(snap, plan)
    # whole free GPUs after the plan: a1 8 -> 1 pod; a2 7 -> 0; c1 cordoned -> not counted;
    # b1 0 -> 0; b2 16 -> 2. Leaf A: 1, leaf B: 2; anywhere: 3.
    assert (m.largest_8gpu_gang_leaf, m.largest_8gpu_gang_any) == (2, 3)
    # a2 is the only partly used node: 7 GPUs stranded
    assert (m.stranded_gpus, m.partly_used_nodes) == (7, 1)


def test_solve_stats_from_the_plan_summary(two_nodes, one_role_gang, plan_of) -> None:
    snap = two_nodes(queues=[{"name": "qa"}], gangs=[one_role_gang("a", gpus=4)])
    plan = plan_of(snap, {"a": [("w", "n1")]})
    assert plan_metrics(snap, plan).solve is None  # no summary: not a placer's plan
    tiers = (
        TierReport(name="p10.gpu_milli", value=7000, bound=8000, gap=0.125, status="feasible"),
        TierReport(name="p0.gpu_milli", value=4000, bound=4000, gap=0.0, status="optimal"),
        TierReport(name="locality.node", value=-2, bound=0, gap=1.0, status="feasible"),
        TierReport(name="fragmentation.leaves", value=-1, status="not improved (time)"),
        TierReport(name="fragmentation.expected", value=0, status="constant"),
        TierReport(name="stability", value=0),
    )
    summary = PlanSummary(
        placer="cpsat",
        status="feasible",
        tiers=tiers,
        wall_time_s=1.5,
        model_size={"variables": 10, "constraints": 4},
    )
    s = plan_metrics(snap, Plan(gangs=plan.gangs, pods=plan.pods, summary=summary)).solve
    assert s is not None
    assert (s.placer, s.status, s.wall_time_s, s.variables, s.constraints) == (
        "cpsat",
        "feasible",
        1.5,
        10,
        4,
    )
    # throughput: the largest gap of the p*.gpu_milli entries; max: of all; open: optimised
    # and not optimal (the two "feasible" and the one "not improved"; not the constant, not
    # the baseline's "not optimised")
    assert (s.throughput_gap, s.max_gap, s.open_tiers) == (0.125, 1.0, 3)
