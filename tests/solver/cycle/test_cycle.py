"""The cycle end to end on small cases worked out by hand: a previous plan (the stability
entry, and pods given back the node they had when the counts allow), and a role's own
preferred level."""

from __future__ import annotations

from typing import Any

from gangplan.models import Plan, PodPlacement, Snapshot, load_instance
from gangplan.solver.cycle.pipeline import run_baseline, solve_cycle
from gangplan.solver.judges.score import score
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import CycleStatus, SolverConfig, assemble_plan

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


def test_the_previous_plan_keeps_a_gang_where_it_was() -> None:
    """Two empty nodes of 4 GPUs, g asks 2 x 1 GPU. Every plan with g on one node scores the
    same above stability (all GPUs asked placed; one node partly used; node spread 0), and
    the baselines pick n1 (first in order). The previous plan had g on n2: the best plan is
    g on n2, stability 0, where the baselines' n1 scores -2 (two pods moved)."""
    s = _snapshot(
        nodes=[{"name": "n1", "allocatable": {GPU: 4}}, {"name": "n2", "allocatable": {GPU: 4}}],
        queues=[{"name": "q"}],
        gangs=[
            {"name": "g", "queue": "q", "roles": [{"name": "w", "count": 2, "requests": {GPU: 1}}]}
        ],
    )
    previous = _previous(s, {"g-w-0": "n2", "g-w-1": "n2"})
    greedy = run_baseline(s, "greedy", previous)
    assert set(_nodes_of(greedy.plan).values()) == {"n1"}
    assert greedy.score["stability"] == -2
    result = solve_cycle(s, previous, DET)
    assert result.status is CycleStatus.OPTIMAL
    assert verify(s, result.plan) == []
    assert _nodes_of(result.plan) == {"g-w-0": "n2", "g-w-1": "n2"}
    assert result.score["stability"] == 0
    assert result.score == score(s, result.plan, previous)


def test_pods_get_back_their_own_previous_node() -> None:
    """Two nodes of 1 GPU each: g (2 x 1 GPU) must put one pod on each. The model counts
    pods per node, not names; the previous plan had g-w-0 on n2 and g-w-1 on n1, so the
    plan must name them that way round to keep both (stability 0; the other naming moves
    both, -2)."""
    s = _snapshot(
        nodes=[{"name": "n1", "allocatable": {GPU: 1}}, {"name": "n2", "allocatable": {GPU: 1}}],
        queues=[{"name": "q"}],
        gangs=[
            {"name": "g", "queue": "q", "roles": [{"name": "w", "count": 2, "requests": {GPU: 1}}]}
        ],
    )
    previous = _previous(s, {"g-w-0": "n2", "g-w-1": "n1"})
    result = solve_cycle(s, previous, DET)
    assert verify(s, result.plan) == []
    assert _nodes_of(result.plan) == {"g-w-0": "n2", "g-w-1": "n1"}
    assert result.score["stability"] == 0
    # without a previous plan, the same counts name the pods in node order
    fresh = solve_cycle(s, None, DET)
    assert _nodes_of(fresh.plan) == {"g-w-0": "n1", "g-w-1": "n2"}


def test_a_roles_own_preferred_level_keeps_its_pods_in_one_leaf() -> None:
    """Leaves l1 = {n1, n2}, l2 = {n3, n4}, 2 GPUs each; running pods hold one GPU of n1 and
    one of n3. Gang g: launcher l (1 cpu) and 3 workers w of 1 GPU that prefer one leaf.
    Greedy's binpack takes the fullest nodes first: n1, n3, then n2 — workers in two leaves,
    locality.preferred = -1. The workers fit one leaf (n1 + n2, or n3 + n4: 3 free GPUs
    each): the best plan has locality.preferred = 0, every tier above it being equal (all
    GPUs asked placed)."""
    s = _snapshot(
        levels=[{"name": "leaf"}],
        nodes=[
            {
                "name": f"n{i}",
                "domains": {"leaf": f"l{(i + 1) // 2}"},
                "allocatable": {GPU: 2, "cpu": 4},
            }
            for i in range(1, 5)
        ],
        queues=[{"name": "q"}],
        running=[
            {"name": "r1", "node": "n1", "requests": {GPU: 1}},
            {"name": "r3", "node": "n3", "requests": {GPU: 1}},
        ],
        gangs=[
            {
                "name": "g",
                "queue": "q",
                "roles": [
                    {"name": "l", "count": 1, "requests": {"cpu": 1}},
                    {
                        "name": "w",
                        "count": 3,
                        "requests": {GPU: 1},
                        "topology": {"preferred": "leaf"},
                    },
                ],
            }
        ],
    )
    greedy = run_baseline(s, "greedy")
    workers = [p.node for p in greedy.plan.pods if p.role == "w"]
    assert sorted(workers) == ["n1", "n2", "n3"]
    assert greedy.score["locality.preferred"] == -1
    result = solve_cycle(s, None, DET)
    assert result.status is CycleStatus.OPTIMAL
    assert verify(s, result.plan) == []
    workers = [p.node for p in result.plan.pods if p.role == "w"]
    assert len(workers) == 3
    assert set(workers) <= {"n1", "n2"} or set(workers) <= {"n3", "n4"}
    assert result.score["locality.preferred"] == 0
    assert result.score["p0.gpu_milli"] == greedy.score["p0.gpu_milli"] == 3000


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


def test_identical_one_pod_gangs_with_a_role_level_are_not_held_to_one_domain() -> None:
    """Regression: identical single-pod gangs are counted as one item, and their role's own
    required leaf was applied to the item, as if all of them had to share one leaf. n1 (leaf
    l1) and n2 (leaf l2) have 1 GPU each; g0 and g1 ask 1 GPU each, role required leaf: each
    pod alone is inside one leaf, so both are placed (2 pods, 2000 milli-GPU), and the model
    proves it, with no bound below the plan's value."""
    s = _snapshot(
        levels=[{"name": "leaf"}],
        nodes=[
            {"name": "n1", "domains": {"leaf": "l1"}, "allocatable": {GPU: 1}},
            {"name": "n2", "domains": {"leaf": "l2"}, "allocatable": {GPU: 1}},
        ],
        queues=[{"name": "q"}],
        gangs=[
            {
                "name": f"g{i}",
                "queue": "q",
                "creation_time": i,
                "roles": [
                    {
                        "name": "w",
                        "count": 1,
                        "requests": {GPU: 1},
                        "topology": {"required": "leaf"},
                    }
                ],
            }
            for i in range(2)
        ],
    )
    result = solve_cycle(s, None, DET)
    assert verify(s, result.plan) == []
    assert result.status is CycleStatus.OPTIMAL, result.notes
    assert result.score["p0.pods"] == 2
    tiers = {t.name: t for t in result.plan.summary.tiers}
    assert tiers["p0.gpu_milli"].value == tiers["p0.gpu_milli"].bound == 2000


def test_a_search_note_about_a_tier_the_plan_shows_optimal_is_dropped() -> None:
    # the model left locality.spine at -1 ("no better solution"), but the returned plan's
    # own value is 0 = its bound: the tier is optimal and the note is stale
    from gangplan.models import TierReport
    from gangplan.solver.cycle.tiers import current_notes

    tiers = (
        TierReport(name="locality.spine", value=0, bound=0, gap=0.0, status="optimal"),
        TierReport(name="locality.leaf", value=-2, bound=0, gap=1.0, status="feasible"),
    )
    notes = [
        "aggregated mode: ...",
        "tier locality.spine: no better solution within its time share",
        "tier locality.leaf: no better solution within its time share",
    ]
    assert current_notes(notes, tiers) == [
        "aggregated mode: ...",
        "tier locality.leaf: no better solution within its time share",
    ]


def test_the_notes_say_where_cp_sats_plan_beats_the_incumbent(monkeypatch: Any) -> None:
    """One node of 8 GPUs, queue q, gang g of one 1-GPU pod. Every baseline is made to
    place nothing, so the incumbent is the empty plan; CP-SAT places g. The first entry
    that differs is p0.fairness (q's shortfall from its fair target: its demand, 1 GPU,
    unmet in the empty plan, met in CP-SAT's). With the baselines as they are, greedy
    places g too: equal."""
    from gangplan.solver.cycle import incumbent

    s = _snapshot(
        nodes=[{"name": "n1", "allocatable": {"cpu": 8, GPU: 8}}],
        queues=[{"name": "q"}],
        gangs=[
            {"name": "g", "queue": "q", "roles": [{"name": "w", "count": 1, "requests": {GPU: 1}}]}
        ],
    )
    r = solve_cycle(s, config=DET)
    assert "CP-SAT's plan scores equal to the incumbent (greedy)" in r.notes
    monkeypatch.setattr(incumbent, "run_placer", lambda ctx, name, out_of_time=None: ([], []))
    r = solve_cycle(s, config=DET)
    assert verify(s, r.plan) == []
    assert [p.node for p in r.plan.pods] == ["n1"]
    assert "CP-SAT's plan scores above the incumbent (empty plan) at p0.fairness" in r.notes


def test_an_incumbents_entries_keep_a_bound_only_down_to_the_first_difference() -> None:
    """CP-SAT's entries a, b, c, d proven at 10, 5, 3, 2; the incumbent returned scores 10,
    4, 9, 1. a: the same value, its bound holds (gap 0, optimal). b: the first entry that
    differs, 4 below the bound 5: gap 1/5 = 0.2, feasible. c and d: proven with b at 5,
    which the incumbent does not have: no bound (c's 9 is even above CP-SAT's 3)."""
    from gangplan.models import TierReport
    from gangplan.solver.cycle.tiers import plan_tiers
    from gangplan.solver.judges.score import Score

    tiers = tuple(
        TierReport(name=n, value=v, bound=v, gap=0.0, status="optimal")
        for n, v in (("a", 10), ("b", 5), ("c", 3), ("d", 2))
    )
    got = {
        t.name: t
        for t in plan_tiers(tiers, Score((("a", 10), ("b", 4), ("c", 9), ("d", 1))), cpsat=False)
    }
    assert (got["a"].bound, got["a"].gap, got["a"].status) == (
        10,
        0.0,
        "optimal; incumbent returned",
    )
    assert (got["b"].bound, got["b"].gap, got["b"].status) == (
        5,
        0.2,
        "feasible; incumbent returned",
    )
    for n, v in (("c", 9), ("d", 1)):
        assert (got[n].value, got[n].bound, got[n].gap) == (v, None, None)
        assert got[n].status == "no bound; incumbent returned"
