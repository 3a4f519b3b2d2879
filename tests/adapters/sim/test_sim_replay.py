"""A 3-node, 5-job trace replayed by hand, for greedy and for CP-SAT (deterministic mode).

Cluster: n1, n2 (leaf a), n3 (leaf b), 4 GPUs each: 12 GPUs. Pods of at most 4 GPUs, so
an 8-GPU job is 2 pods of 4 (two whole nodes). Cycles every 60 s; a cycle at t sees what
arrived and left at or before t.

Trace (arrival s, GPUs, duration s, queue):
  J1  0    8  600  vc-aa
  J2  30   4  300  vc-aa
  J3  90   2  100  vc-aa
  J4  100  8  200  vc-aa
  J5  350  1   50  vc-bb

Worked out on paper:
  t=0    J1 pending, 12 free  -> J1 starts (two nodes), ends 0+600 = 600.     free 4
  t=60   J2 (arrived 30)      -> J2 starts on the last node, ends 360.        free 0
  t=120  J3, J4 pending, 0 free -> nothing.
  (no arrival nor departure until J5 at 350 and J2's end at 360: ticks 180-300 skipped)
  t=360  J2 has left (4 free); J3 (2), J4 (8), J5 (1) pending. J4 cannot fit in 4; J3 and
         J5 can, together (3 GPUs):  J3 starts, ends 460;  J5 starts, ends 410.  free 1
         (greedy: J3 then J4 fails then J5; CP-SAT: most GPUs admitted is J3 + J5 = 3,
         since J4's 8 do not fit in 4)
  t=420  J5 has left (2 free): J4 still does not fit.
  t=480  J3 has left (4 free): J4 still does not fit.
  t=600  J1 has left: 12 free -> J4 starts, ends 800.  Nothing pending.
  t=800  J4 leaves; nothing left: the run ends.

So (start, end): J1 (0, 600), J2 (60, 360), J3 (360, 460), J4 (600, 800), J5 (360, 410);
waits 0, 30, 270, 500, 10; JCTs 600, 330, 370, 700, 60; cycles at 0, 60, 120, 360, 420,
480, 600 (seven). The metrics of this run are worked out in test_sim_metrics.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gangplan.adapters.sim.cluster import load_cluster
from gangplan.adapters.sim.engine import SimConfig, SimResult, simulate
from gangplan.adapters.sim.jobs import load_input
from gangplan.adapters.sim.speed import Slowdown

EXPECTED = {
    "philly-00001": (0, 600),
    "philly-00002": (60, 360),
    "philly-00003": (360, 460),
    "philly-00004": (600, 800),
    "philly-00005": (360, 410),
}
CYCLES = [0, 60, 120, 360, 420, 480, 600]


def run(trace: Path, cluster: Path, **config: object) -> SimResult:
    inp = load_input(trace, load_cluster(cluster), gpus_per_node=4)
    cfg = SimConfig(verify=True, validate_snapshots=True, **config)  # type: ignore[arg-type]
    return simulate(inp, cfg)


def starts_ends(result: SimResult) -> dict[str, tuple[float | None, float | None]]:
    return {j.name: (j.start, j.end) for j in result.jobs}


@pytest.mark.parametrize(
    "config",
    [
        {"placer": "greedy"},
        {"placer": "topology-fit"},
        # CP-SAT: one worker, a deterministic budget (no wall-clock limit in a test)
        {"placer": "cpsat", "deterministic": True, "time_limit_s": 2.0},
    ],
    ids=["greedy", "topology-fit", "cpsat"],
)
def test_hand_replay(hand_trace: Path, three_nodes: Path, config: dict[str, object]) -> None:
    result = run(hand_trace, three_nodes, **config)
    assert starts_ends(result) == EXPECTED
    assert [c.time for c in result.cycles] == CYCLES
    assert [c.admitted for c in result.cycles] == [1, 1, 0, 2, 0, 0, 1]
    assert all(j.status == "finished" for j in result.jobs)
    assert result.end_time == 800
    statuses = {c.status for c in result.cycles}
    if config["placer"] == "cpsat":
        assert "baseline" not in statuses  # CP-SAT ran (optimal, feasible or incumbent)
    else:
        assert statuses == {"baseline"}
    # the 8-GPU jobs took two whole nodes of one leaf each time (the only free pair at 0
    # is any two nodes; greedy takes n1, n2 by node order; at 600 all are free)
    if config["placer"] == "greedy":
        assert [(j.leaves, j.factor) for j in result.jobs if j.gpus == 8] == [(1, 1.0), (1, 1.0)]


def test_every_tick_gives_the_same_run(hand_trace: Path, three_nodes: Path) -> None:
    """Skipping ticks without change is only a speed-up: running every tick (with pending
    gangs) gives the same jobs, and the extra cycles admit nothing."""
    skipped = run(hand_trace, three_nodes, placer="greedy")
    every = run(hand_trace, three_nodes, placer="greedy", skip_unchanged=False)
    assert every.jobs == skipped.jobs
    # pending at 120..300 (J3, J4) and 360..600 (J4): ticks 120, 180, 240, 300, 360, ...
    assert [c.time for c in every.cycles] == [0, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600]
    assert sum(c.admitted for c in every.cycles) == 5


def test_utilisation_steps(hand_trace: Path, three_nodes: Path) -> None:
    """GPUs held change at binds and at exact end times (milli-GPU): 8 at 0, 12 at 60, 8
    at 360 (J2 left) then 11 (J3 + J5 bound), 10 at 410, 8 at 460, 0 then 8 at 600 (J1
    left, J4 bound), 0 at 800."""
    result = run(hand_trace, three_nodes, placer="greedy")
    assert result.utilisation == (
        (0, 0),
        (0, 8000),
        (60, 12000),
        (360, 8000),
        (360, 10000),
        (360, 11000),
        (410, 10000),
        (460, 8000),
        (600, 0),
        (600, 8000),
        (800, 0),
    )


def test_spread_slowdown(trace_of: Callable[..., Path], three_nodes: Path) -> None:
    """A 4-GPU job at 0 takes n1 (greedy: equal binpack scores, first node); an 8-GPU job
    at 10 then gets n2 (leaf a) and n3 (leaf b): 2 leaves, so with leaf=0.5 it runs
    1 + 0.5 x (2 - 1) = 1.5 times its 100 s: starts at 60, ends at 210. Without the
    slowdown it ends at 160. One-pod jobs are never slowed."""
    trace = trace_of([(0, 1000, 4, "aa"), (10, 100, 8, "aa")])
    slow = run(trace, three_nodes, placer="greedy", slowdown=Slowdown(leaf=0.5))
    plain = run(trace, three_nodes, placer="greedy")
    one, two = slow.jobs
    assert (one.start, one.end, one.factor) == (0, 1000, 1.0)
    assert (two.start, two.end, two.leaves, two.factor) == (60, 210, 2, 1.5)
    assert plain.jobs[1].end == 160


def test_seed_changes_ties(hand_trace: Path, three_nodes: Path) -> None:
    """Seed 1 permutes the nodes with random.Random(1): the order is n2, n3, n1. Greedy's
    binpack scores tie on empty nodes, so J1's two pods go to n2 then n3 — leaves a and b.
    With leaf=0.5 J1 runs 1.5 x 600 = 900 s; J2 takes n1 at 60 (ends 360); J3 and J5 go
    to n1 at 360 as before; J4 waits for J1 (900) and gets n2, n3 again: 2 leaves, 1.5 x
    200 = 300 s, ends 1200. Seed 0 (node order n1, n2, n3) keeps both jobs in leaf a."""
    slow = Slowdown(leaf=0.5)
    seeded = starts_ends(run(hand_trace, three_nodes, placer="greedy", seed=1, slowdown=slow))
    assert seeded == {
        "philly-00001": (0, 900),
        "philly-00002": (60, 360),
        "philly-00003": (360, 460),
        "philly-00004": (900, 1200),
        "philly-00005": (360, 410),
    }
    assert starts_ends(run(hand_trace, three_nodes, placer="greedy", slowdown=slow)) == EXPECTED


def test_never_fits_is_dropped(trace_of: Callable[..., Path], three_nodes: Path) -> None:
    """A 16-GPU job cannot fit the 12-GPU cluster even empty: the cycle at 0 reports it as
    never fitting and it is dropped (status never_fits, no start); the 4-GPU job arriving
    with it starts at 0 and ends at 100, and the run ends there."""
    result = run(trace_of([(0, 100, 16, "aa"), (0, 100, 4, "aa")]), three_nodes, placer="greedy")
    big, small = result.jobs
    assert (big.status, big.start, big.end) == ("never_fits", None, None)
    assert (small.status, small.start, small.end) == ("finished", 0, 100)
    assert [c.time for c in result.cycles] == [0]
    assert result.end_time == 100


def test_horizon_stops_the_run(hand_trace: Path, three_nodes: Path) -> None:
    """At a horizon of 400 s: J1 (ends 600) and J3, J5 (started 360; J5 ends 410) are still
    running, J4 still pending, J2 finished at 360; no job is left to arrive."""
    result = run(hand_trace, three_nodes, placer="greedy", horizon_s=400.0)
    assert [j.status for j in result.jobs] == [
        "running",
        "finished",
        "running",
        "pending",
        "running",
    ]
    assert result.end_time == 400


def test_horizon_between_ticks(trace_of: Callable[..., Path], three_nodes: Path) -> None:
    """A job of 30 s starting at 0 ends at 30; with the horizon at 50 (before the next tick
    at 60) it is counted as finished at 30, not left running."""
    result = run(trace_of([(0, 30, 1, "aa")]), three_nodes, placer="greedy", horizon_s=50.0)
    assert [(j.status, j.end) for j in result.jobs] == [("finished", 30)]


def test_jitter_is_seeded(hand_trace: Path, three_nodes: Path) -> None:
    """With jitter_s = 20 every arrival moves later by less than 20 s; the same seed gives
    the same arrivals, another seed others."""
    base = {j.name: j.arrival for j in run(hand_trace, three_nodes, placer="greedy").jobs}
    one = run(hand_trace, three_nodes, placer="greedy", jitter_s=20.0, seed=1)
    again = run(hand_trace, three_nodes, placer="greedy", jitter_s=20.0, seed=1)
    other = run(hand_trace, three_nodes, placer="greedy", jitter_s=20.0, seed=2)
    assert all(0 <= j.arrival - base[j.name] < 20 for j in one.jobs)
    assert one.jobs == again.jobs
    assert {j.name: j.arrival for j in other.jobs} != {j.name: j.arrival for j in one.jobs}
