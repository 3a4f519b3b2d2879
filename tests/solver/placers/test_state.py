"""ClusterState: rooms counted directly agree with trial placement; classes of
interchangeable nodes really are interchangeable, and stay so as pods are placed."""

from __future__ import annotations

import random

import pytest

from gangplan.adapters.traces.generate import generate_fat_tree
from gangplan.models import Gang, Role
from gangplan.solver.placers.state import ClusterState
from gangplan.topology import build_topology


@pytest.fixture(scope="module")
def cluster() -> tuple[object, object]:
    s = generate_fat_tree(spines=2, leaves_per_spine=2, nodes_per_leaf=8, load=0.5, seed=3)
    return s, build_topology(s)


def _shapes(s: object) -> list[tuple[Gang, Role]]:
    out = []
    seen = set()
    for g in s.gangs:  # type: ignore[attr-defined]
        for r in g.roles:
            key = (tuple(sorted(r.requests.items())), g.joint)
            if key not in seen:
                seen.add(key)
                out.append((g, r))
    return out


def test_direct_room_equals_trial_placement(cluster: tuple[object, object]) -> None:
    s, topo = cluster
    state = ClusterState(s, topo)  # type: ignore[arg-type]
    for g, r in _shapes(s):
        for n in state.candidates(g, r):
            assert state._pod_capacity(g, r, n, 64) == state._trial_capacity(g, r, n, 64), (
                n,
                r.requests,
            )


def test_classes_are_interchangeable_as_pods_are_placed(cluster: tuple[object, object]) -> None:
    s, topo = cluster
    state = ClusterState(s, topo)  # type: ignore[arg-type]
    shapes = _shapes(s)
    rng = random.Random(7)
    for step in range(40):
        g, r = rng.choice(shapes)
        cands = state.candidates(g, r)
        classes = state.classes(cands)
        # every candidate is in exactly one class, in candidate order inside each class
        flat = [n for m in classes for n in m]
        assert sorted(flat) == sorted(cands)
        pos = {n: i for i, n in enumerate(cands)}
        for members in classes:
            assert members == sorted(members, key=pos.__getitem__)
            rooms = {state.pod_capacity(g, r, n, 64) for n in members}
            assert len(rooms) == 1, (step, members, rooms)
        fitting = state.fitting(g, r, cands)
        if fitting:
            node = rng.choice(fitting)
            state.place(g, r, node, f"p{step}")


def test_candidate_capacities_per_class_equal_each_nodes_own_count(
    cluster: tuple[object, object],
) -> None:
    # the per-class answers, spread to every candidate, agree with each node's own count
    # (direct room or trial placement on that node, no class memo) as pods are placed
    s, topo = cluster
    state = ClusterState(s, topo)  # type: ignore[arg-type]
    shapes = _shapes(s)
    rng = random.Random(11)
    for step in range(30):
        for g, r in shapes:
            cands = state.candidates(g, r)
            for limit in (1, 3, 64):
                own = [state._pod_capacity(g, r, n, limit) for n in cands]
                assert state.candidate_capacities(g, r, limit) == own, (step, r.requests, limit)
        g, r = rng.choice(shapes)
        fitting = state.fitting(g, r, state.candidates(g, r))
        if fitting:
            state.place(g, r, rng.choice(fitting), f"p{step}")
