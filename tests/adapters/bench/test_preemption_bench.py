"""The benchmark's preemption section (adapters/bench/preemption.py) on a tiny fat-tree: the
scenario it builds, and rows that agree with the plans (the timing and the ratio's value are
measured by `gangplan bench --preemption`, never asserted)."""

from __future__ import annotations

import pytest

from gangplan.adapters.bench.preemption import (
    HIGH,
    preemption_rows,
    preemption_scenario,
    render_rows,
)
from gangplan.adapters.traces.generate import generate_fat_tree
from gangplan.models import Snapshot
from gangplan.solver.result import SolverConfig

DET = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=5.0)


@pytest.fixture(scope="module")
def tiny() -> Snapshot:
    # 1 spine x 2 leaves x 4 nodes of 8 GPUs, 80% of the 64 GPUs held by running pods
    return generate_fat_tree(spines=1, leaves_per_spine=2, nodes_per_leaf=4, load=0.8, seed=3)


def test_whole_node_scenario(tiny: Snapshot) -> None:
    s = preemption_scenario(tiny, gangs=3, kind="whole-node")
    assert s.preemption.enabled
    assert all(q.preemption.within_queue == "lower_priority" for q in s.queues)
    assert [(g.priority, g.size, g.roles[0].requests[s.gpu]) for g in s.gangs] == [
        (HIGH, 1, 8000)
    ] * 3
    assert s.running == tiny.running  # the running load is kept as generated


def test_rows_agree_with_the_plans(tiny: Snapshot) -> None:
    s = preemption_scenario(tiny, gangs=3, kind="whole-node")
    rows = preemption_rows("tiny", s, DET)
    assert [r.placer for r in rows] == ["greedy", "topology-fit", "fgd", "cpsat"]
    cpsat = rows[-1]
    assert cpsat.valid
    # whole-node gangs: admitted GPUs are 8 per admitted gang, at most 3 gangs
    for r in rows:
        assert r.admitted_gpus % 8 == 0 and r.admitted_gpus <= 24
        if r.ratio is not None:
            assert r.ratio == r.evicted_gpus / r.admitted_gpus
    assert "| tiny | cpsat |" in render_rows(rows)


def test_unknown_kind_is_refused(tiny: Snapshot) -> None:
    with pytest.raises(ValueError, match="accepted: generated, whole-node"):
        preemption_scenario(tiny, kind="half")
