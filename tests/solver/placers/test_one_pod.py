"""The one-pod rules (solver/placers/one_pod.py): binpack and BestFit worked out by hand, and the
class-by-class choice against a scan of every node while a cluster fills up."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from gangplan.adapters.traces.generate import generate_fat_tree
from gangplan.models import Gang, Role, Snapshot
from gangplan.solver.context import CycleContext
from gangplan.solver.judges.fragmentation import Workload
from gangplan.solver.placers.one_pod import (
    ROOM_LIMIT,
    binpack_score,
    greedy_node,
    one_pod_placer,
    topology_fit_node,
)
from gangplan.solver.placers.state import ClusterState

GPU = "nvidia.com/gpu"


def _three_nodes(snapshot_of: Callable[..., Snapshot]) -> Snapshot:
    """n1: 8 cpu, 4 GPUs, 2 GPUs and 2 cpu running; n2: 8 cpu, 4 GPUs, empty; n3: 16 cpu,
    4 GPUs, 1 GPU and 12 cpu running. The pending pod asks 1 GPU and 2 cpu."""
    alloc = {"cpu": 8, GPU: 4}
    return snapshot_of(
        nodes=[
            {"name": "n1", "allocatable": alloc},
            {"name": "n2", "allocatable": alloc},
            {"name": "n3", "allocatable": {"cpu": 16, GPU: 4}},
        ],
        queues=[{"name": "q"}],
        running=[
            {"name": "r1", "node": "n1", "requests": {"cpu": 2, GPU: 2}},
            {"name": "r3", "node": "n3", "requests": {"cpu": 12, GPU: 1}},
        ],
        gangs=[
            {
                "name": "p",
                "queue": "q",
                "roles": [{"name": "w", "count": 1, "requests": {"cpu": 2, GPU: 1}}],
            }
        ],
    )


def test_binpack_score_by_hand(snapshot_of: Callable[..., Snapshot]) -> None:
    s = _three_nodes(snapshot_of)
    state = CycleContext.of(s).state()
    role = s.gangs[0].roles[0]
    # mean of (used + request) / allocatable over cpu and GPUs:
    # n1: ((2 + 2) / 8 + (2 + 1) / 4) / 2 = (0.5 + 0.75) / 2 = 0.625
    # n2: ((0 + 2) / 8 + (0 + 1) / 4) / 2 = 0.25
    # n3: ((12 + 2) / 16 + (1 + 1) / 4) / 2 = (0.875 + 0.5) / 2 = 0.6875
    assert binpack_score(state, role, "n1") == pytest.approx(0.625)
    assert binpack_score(state, role, "n2") == pytest.approx(0.25)
    assert binpack_score(state, role, "n3") == pytest.approx(0.6875)
    gang = s.gangs[0]
    assert greedy_node(state, gang, role, ["n1", "n2", "n3"]) == "n3"
    assert greedy_node(state, gang, role, ["n1", "n2"]) == "n1"


def test_best_fit_takes_the_least_room(snapshot_of: Callable[..., Snapshot]) -> None:
    s = _three_nodes(snapshot_of)
    state = CycleContext.of(s).state()
    gang = s.gangs[0]
    role = gang.roles[0]
    # room for (2 cpu, 1 GPU) pods: n1 min(6 // 2, 2) = 2; n2 min(8 // 2, 4) = 4;
    # n3 min(4 // 2, 3) = 2. Least room 2: n1 and n3 tie, the smaller name wins.
    assert [state.pod_capacity(gang, role, n, ROOM_LIMIT) for n in ("n1", "n2", "n3")] == [2, 4, 2]
    assert topology_fit_node(state, gang, role) == "n1"
    place = one_pod_placer(state, "topology-fit", Workload(()))
    assert [place(gang, f"p{i}").node for i in range(4)] == ["n1", "n1", "n3", "n3"]
    # n1 and n3 are full now (cpu, GPUs); n2 takes the next four, then nothing fits
    assert [place(gang, f"q{i}").node for i in range(4)] == ["n2"] * 4
    assert place(gang, "last") is None


def test_an_unknown_placer_is_named(snapshot_of: Callable[..., Snapshot]) -> None:
    state = CycleContext.of(_three_nodes(snapshot_of)).state()
    with pytest.raises(ValueError, match=r"no one-pod placer 'cpsat'.*topology-fit"):
        one_pod_placer(state, "cpsat", Workload(()))


def _scan_greedy(state: ClusterState, gang: Gang, role: Role) -> str | None:
    """Binpack over every candidate node, one by one (the reference)."""
    best, best_score = None, -1.0
    for n in state.candidates(gang, role):
        if state.fits(gang, role, n):
            sc = binpack_score(state, role, n)
            if sc > best_score:
                best, best_score = n, sc
    return best


def _scan_best_fit(state: ClusterState, gang: Gang, role: Role) -> str | None:
    """BestFit over every candidate node, one by one (the reference)."""
    rooms = [
        (state.pod_capacity(gang, role, n, ROOM_LIMIT), n) for n in state.candidates(gang, role)
    ]
    fitting = [r for r in rooms if r[0] >= 1]
    return min(fitting)[1] if fitting else None


@pytest.mark.parametrize("placer", ["greedy", "topology-fit"])
def test_class_by_class_equals_a_scan_of_every_node(placer: str) -> None:
    """On a generated fat-tree with scattered load, one-pod gangs of its pending shapes
    placed one after another: each choice equals the scan's, until nothing fits."""
    s = generate_fat_tree(spines=1, leaves_per_spine=2, nodes_per_leaf=8, load=0.4, seed=5)
    state = CycleContext.of(s).state()
    place = one_pod_placer(state, placer, Workload(()))
    scan = _scan_greedy if placer == "greedy" else _scan_best_fit
    shapes = [(g, g.roles[0]) for g in s.gangs if g.size == 1]
    assert shapes
    rng = random.Random(3)
    placed = 0
    for i in range(300):
        gang, role = rng.choice(shapes)
        want = scan(state, gang, role)
        got = place(gang, f"p{i}")
        assert (got.node if got else None) == want, i
        placed += got is not None
    assert placed > 20  # the case is worth checking: many pods went in
