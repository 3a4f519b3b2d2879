"""Metrics of the hand-worked run of test_sim_replay.py, every number worked out by hand.

Jobs (wait, JCT): J1 (0, 600), J2 (30, 330), J3 (270, 370), J4 (500, 700), J5 (10, 60);
J5 is the only 1-GPU job (queue vc-bb), the others have 2-8 GPUs (queue vc-aa).

Percentiles are numpy's linear ones: of n sorted values, the p-th is at rank (n-1)p/100.
JCT sorted 60, 330, 370, 600, 700: mean 2060/5 = 412; p50 at rank 2 = 370; p95 at rank
3.8 = 600 + 0.8 x 100 = 680; p99 at rank 3.96 = 696.
Wait sorted 0, 10, 30, 270, 500: mean 810/5 = 162; p50 = 30; p95 = 270 + 0.8 x 230 = 454;
p99 = 270 + 0.96 x 230 = 490.8.
2-8 GPUs: waits 0, 30, 270, 500 (mean 200, p50 at rank 1.5 = 30 + 0.5 x 240 = 150); JCTs
330, 370, 600, 700 (mean 500, p50 = 370 + 0.5 x 230 = 485).

GPUs held (of 12): 8 on [0, 60), 12 on [60, 360), 11 on [360, 410), 10 on [410, 460), 8 on
[460, 800). Arrival window [0, 350]: (8 x 60 + 12 x 290) / (12 x 350) = 3960/4200. Whole
run [0, 800]: (480 + 3600 + 550 + 500 + 1120 + 1600) / 9600 = 7850/9600.

Fairness at the cycle of t=360, the only one where two queues have pending demand, in ppm
of the cluster (96 cores, 768 GiB, 12 GPUs; a GPU's pod asks 6 cores and 48 GiB): vc-aa
runs J1 (8 GPUs: 666,667) and asks J3 + J4 (2 + 8 GPUs: 166,667 + 2 x 333,333); vc-bb asks
J5 (1 GPU: 83,333). Water filling at equal weights: vc-bb gets its whole demand (83,333)
while the level is below vc-aa's 666,667; the 333,333 GPU ppm left minus 83,333 = 250,000
go to vc-aa: target 666,667 + 250,000 = 916,667 (to the solver's bisection tolerance).
After the cycle: vc-aa holds J1 + J3 = 833,334, vc-bb J5 = 83,333. Ratios 833,334/916,667
= 0.90909 and 1; Jain = (0.90909 + 1)^2 / (2 x (0.90909^2 + 1)) = 0.99773.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gangplan.adapters.sim.cluster import load_cluster
from gangplan.adapters.sim.engine import SimConfig, simulate
from gangplan.adapters.sim.jobs import load_input, size_class
from gangplan.adapters.sim.metrics import Stat, run_metrics, stat, time_average


@pytest.fixture
def metrics(hand_trace: Path, three_nodes: Path):  # type: ignore[no-untyped-def]
    inp = load_input(hand_trace, load_cluster(three_nodes), gpus_per_node=4)
    result = simulate(inp, SimConfig(placer="greedy", verify=True))
    return result, run_metrics(result)


def test_jct_and_wait(metrics) -> None:  # type: ignore[no-untyped-def]
    _, m = metrics
    assert m.jct == Stat(5, 412.0, 370.0, pytest.approx(680.0), pytest.approx(696.0))
    assert m.wait == Stat(5, 162.0, 30.0, pytest.approx(454.0), pytest.approx(490.8))
    assert (m.jobs, m.finished, m.started, m.never_fits, m.unfinished) == (5, 5, 5, 0, 0)


def test_by_size_and_queue(metrics) -> None:  # type: ignore[no-untyped-def]
    _, m = metrics
    sizes = {g.key: g for g in m.by_size}
    assert [g.key for g in m.by_size] == ["1", "2-8", "9-32", "33+"]
    assert (sizes["1"].jobs, sizes["1"].wait.mean, sizes["1"].jct.mean) == (1, 10.0, 60.0)
    two8 = sizes["2-8"]
    assert (two8.jobs, two8.wait.mean, two8.wait.p50) == (4, 200.0, 150.0)
    assert (two8.jct.mean, two8.jct.p50) == (500.0, 485.0)
    assert sizes["33+"].jobs == 0 and sizes["33+"].wait.mean is None
    queues = {g.key: g.jobs for g in m.by_queue}
    assert queues == {"vc-aa": 4, "vc-bb": 1}


def test_utilisation_makespan_longest_wait(metrics) -> None:  # type: ignore[no-untyped-def]
    _, m = metrics
    assert m.utilisation_window == pytest.approx(3960 / 4200)
    assert m.utilisation_run == pytest.approx(7850 / 9600)
    assert m.makespan_s == 800
    assert m.longest_wait is not None
    assert (m.longest_wait.job, m.longest_wait.wait_s, m.longest_wait.gpus) == (
        "philly-00004",
        500.0,
        8,
    )
    assert m.cycles == 7 and m.statuses == {"baseline": 7}


def test_fairness_at_the_contended_cycle(metrics) -> None:  # type: ignore[no-untyped-def]
    result, m = metrics
    at = {(s.queue): s for s in result.shares if s.time == 360}
    assert at["vc-aa"].allocation_ppm == 833_334
    assert at["vc-aa"].target_ppm == pytest.approx(916_667, abs=2)
    assert (at["vc-bb"].allocation_ppm, at["vc-bb"].target_ppm) == (83_333, 83_333)
    assert [t for t, j in result.jain if j is not None] == [360]
    assert m.jain_mean == pytest.approx(0.99773, abs=1e-5)
    assert m.jain_min == m.jain_mean


def test_stat_and_time_average_small() -> None:
    # one value: every percentile is that value
    assert stat([7.0]) == Stat(1, 7.0, 7.0, 7.0, 7.0)
    assert stat([]) == Stat(0, None, None, None, None)
    # 1, 2, 3, 4: p50 at rank 1.5 = 2.5; p95 at rank 2.85 = 3.85
    s = stat([4.0, 1.0, 3.0, 2.0])
    assert (s.mean, s.p50, s.p95) == (2.5, 2.5, pytest.approx(3.85))
    # value 0 before t=1, 2 on [1, 3), 0 after: over [0, 4] the mean is 4/4 = 1
    assert time_average([(1, 2), (3, 0)], 0, 4) == 1.0
    # over [2, 3]: 2;  an empty interval has no mean
    assert time_average([(1, 2), (3, 0)], 2, 3) == 2.0
    assert time_average([(1, 2)], 3, 3) is None


@pytest.mark.parametrize(
    ("gpus", "label"),
    [(1, "1"), (2, "2-8"), (8, "2-8"), (9, "9-32"), (32, "9-32"), (33, "33+"), (128, "33+")],
)
def test_size_classes(gpus: int, label: str) -> None:
    assert size_class(gpus) == label
