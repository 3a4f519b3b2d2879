"""Preemption in the cycle: the queues' policies worked by hand on small clusters, the score's
order with evictions, and the baselines' greedy preemption (Volcano's and Kueue's).

Every cluster here is one or two nodes of 8 GPUs and 8 cpu; every pod asks 1 cpu besides
its GPUs. Preemption is on, the clock at 1000 s and the grace period 300 s unless a test
says otherwise. Each expected plan is worked out beside its test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gangplan.adapters.files import load_snapshot
from gangplan.models import Snapshot, load_instance
from gangplan.solver.cycle.pipeline import run_baseline, solve_cycle
from gangplan.solver.judges.score import EVICTION_ENTRIES, score, score_names
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import CycleResult, CycleStatus, SolverConfig

GPU = "nvidia.com/gpu"
DET = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=10.0)


def instance(
    queues: list[dict[str, Any]],
    running: list[dict[str, Any]],
    gangs: list[dict[str, Any]],
    nodes: int = 1,
    enabled: bool = True,
) -> Snapshot:
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "preemption": {"enabled": enabled, "now": 1000, "grace_s": 300},
        "nodes": [{"name": f"n{i + 1}", "allocatable": {"cpu": 8, GPU: 8}} for i in range(nodes)],
        "queues": queues,
        "running": running,
        "gangs": gangs,
    }
    return load_instance(data)[0]


def run(name: str, queue: str, priority: int, gpus: int, node: str = "n1", **extra: Any) -> dict:
    return {
        "name": name,
        "gang": extra.pop("gang", name),
        "queue": queue,
        "priority": priority,
        "node": node,
        "requests": {"cpu": 1, GPU: gpus},
        **extra,
    }


def gang(name: str, queue: str, priority: int, gpus: int, count: int = 1, **extra: Any) -> dict:
    return {
        "name": name,
        "queue": queue,
        "priority": priority,
        "roles": [{"name": "w", "count": count, "requests": {"cpu": 1, GPU: gpus}}],
        **extra,
    }


def solved(s: Snapshot) -> CycleResult:
    result = solve_cycle(s, config=DET)
    assert verify(s, result.plan) == []
    return result


def evicted(result: CycleResult) -> list[str]:
    return sorted(e.pod for e in result.plan.evictions)


def within(policy: str) -> dict[str, Any]:
    return {"name": "q", "preemption": {"within_queue": policy}}


# --------------------------------------------------------------------------- within_queue


def test_within_queue_never_keeps_running_gangs() -> None:
    # low (priority 0) holds all 8 GPUs; h (priority 100, 8 GPUs) waits: its queue's
    # within_queue is never
    s = instance([within("never")], [run("low", "q", 0, 8)], [gang("h", "q", 100, 8)])
    result = solved(s)
    assert evicted(result) == []
    assert result.plan.placed("h") == 0


def test_within_queue_lower_priority_evicts_a_lower_priority() -> None:
    s = instance([within("lower_priority")], [run("low", "q", 0, 8)], [gang("h", "q", 100, 8)])
    result = solved(s)
    assert evicted(result) == ["low"]
    assert result.plan.placed("h") == 1
    (e,) = result.plan.evictions
    assert (e.for_gang, e.kind, e.node) == ("default/h", "priority", "n1")


def test_within_queue_never_evicts_an_equal_priority() -> None:
    # "lower" is strictly lower: a running gang of h's own priority stays
    s = instance([within("lower_priority")], [run("peer", "q", 100, 8)], [gang("h", "q", 100, 8)])
    assert evicted(solved(s)) == []


def test_within_queue_does_not_reach_another_queue() -> None:
    # q2's low gang is another queue's: within_queue never covers it, and q has no reclaim
    s = instance(
        [within("lower_priority"), {"name": "q2"}],
        [run("low", "q2", 0, 8)],
        [gang("h", "q", 100, 8)],
    )
    assert evicted(solved(s)) == []


def test_a_gang_whose_priority_class_says_never_does_not_preempt() -> None:
    s = instance(
        [within("lower_priority")],
        [run("low", "q", 0, 8)],
        [gang("h", "q", 100, 8, preemption_policy="Never")],
    )
    result = solved(s)
    assert evicted(result) == []
    assert result.plan.placed("h") == 0


def test_preemption_off_changes_nothing() -> None:
    s = instance(
        [within("lower_priority")], [run("low", "q", 0, 8)], [gang("h", "q", 100, 8)], enabled=False
    )
    result = solved(s)
    assert evicted(result) == []
    assert not any(n.startswith("preemption.") for n in result.score.names)


# --------------------------------------------------------------------------- reclaim


def reclaim_case(policy: str, priority: int, **a_queue: Any) -> Snapshot:
    """Queue a is guaranteed the cluster's 8 GPUs (and 8 cpu) and runs nothing; queue b is
    guaranteed nothing and runs b-0 (priority 0) on all 8 GPUs: b borrows a's amount. a's
    gang x (8 GPUs, the given priority) asks for it back."""
    a = {
        "name": "a",
        "guaranteed": {GPU: 8, "cpu": 8},
        "preemption": {"reclaim": policy},
        **a_queue,
    }
    return instance([a, {"name": "b"}], [run("b-0", "b", 0, 8)], [gang("x", "a", priority, 8)])


def test_reclaim_never_leaves_the_borrower() -> None:
    assert evicted(solved(reclaim_case("never", 10))) == []


def test_reclaim_lower_priority_takes_back_from_a_lower_priority_borrower() -> None:
    result = solved(reclaim_case("lower_priority", 10))
    assert evicted(result) == ["b-0"]
    assert [e.kind for e in result.plan.evictions] == ["reclaim"]
    assert result.plan.placed("x") == 1


def test_reclaim_lower_priority_spares_an_equal_priority_borrower() -> None:
    assert evicted(solved(reclaim_case("lower_priority", 0))) == []


def test_reclaim_any_takes_back_from_an_equal_priority_borrower() -> None:
    # x and b-0 are both class 0: throughput is +8000 -8000 either way; what decides is a's
    # fairness: entitled to its guaranteed 8 GPUs (its target is raised to that share,
    # 1,000,000 ppm), it falls short by all of it unless x runs
    result = solved(reclaim_case("any", 0))
    assert evicted(result) == ["b-0"]
    assert result.score["p0.fairness"] == 0
    assert result.score["p0.gpu_milli"] == 0  # 8000 admitted - 8000 evicted


def test_reclaim_stops_at_the_guaranteed_amount() -> None:
    # a is guaranteed only 4 GPUs: x's 8 would take it past them, so it may not reclaim
    s = reclaim_case("any", 10, guaranteed={GPU: 4, "cpu": 8})
    assert evicted(solved(s)) == []


def test_reclaim_needs_a_borrower() -> None:
    # b is guaranteed 8 GPUs too: it uses no more than its own, nothing to reclaim
    a = {"name": "a", "guaranteed": {GPU: 8, "cpu": 8}, "preemption": {"reclaim": "any"}}
    b = {"name": "b", "guaranteed": {GPU: 8, "cpu": 8}}
    s = instance([a, b], [run("b-0", "b", 0, 8)], [gang("x", "a", 10, 8)])
    assert evicted(solved(s)) == []


def test_a_queue_that_is_not_reclaimable_keeps_what_it_borrowed() -> None:
    a = {"name": "a", "guaranteed": {GPU: 8, "cpu": 8}, "preemption": {"reclaim": "any"}}
    b = {"name": "b", "preemption": {"reclaimable": False}}
    s = instance([a, b], [run("b-0", "b", 0, 8)], [gang("x", "a", 10, 8)])
    assert evicted(solved(s)) == []


# --------------------------------------------------------------------------- the order


def test_the_most_recently_admitted_go_first() -> None:
    # two alike victims of 4 GPUs each on n1 (admitted at 100 s and 500 s); h needs 4 of
    # them: every tier above is equal, and Kueue's order evicts the most recent, new
    s = instance(
        [within("lower_priority")],
        [run("old", "q", 0, 4, admitted=100.0), run("new", "q", 0, 4, admitted=500.0)],
        [gang("h", "q", 100, 4)],
    )
    result = solved(s)
    assert evicted(result) == ["new"]
    assert result.score["preemption.recency"] == 2  # ranks: old 1, new 2


def test_a_gang_inside_its_grace_period_stays() -> None:
    # new was admitted at 800 s: 200 s ago, within the 300 s grace period; old goes instead
    s = instance(
        [within("lower_priority")],
        [run("old", "q", 0, 4, admitted=100.0), run("new", "q", 0, 4, admitted=800.0)],
        [gang("h", "q", 100, 4)],
    )
    assert evicted(solved(s)) == ["old"]


def test_a_gang_that_does_not_tolerate_disruption_stays() -> None:
    s = instance(
        [within("lower_priority")],
        [run("old", "q", 0, 4, admitted=100.0), run("new", "q", 0, 4, preemptible=False)],
        [gang("h", "q", 100, 4)],
    )
    assert evicted(solved(s)) == ["old"]


def test_the_fewest_gpus_are_evicted() -> None:
    # n1: v4 holds 4 GPUs, 4 free; n2: v8 holds all 8. h (8 GPUs) needs one node's 8:
    # evicting v4 loses 4000 milli-GPU of class 0, v8 8000
    s = instance(
        [within("lower_priority")],
        [run("v4", "q", 0, 4, node="n1"), run("v8", "q", 0, 8, node="n2")],
        [gang("h", "q", 100, 8)],
        nodes=2,
    )
    result = solved(s)
    assert evicted(result) == ["v4"]
    assert result.score["p0.gpu_milli"] == -4000


def test_an_elastic_victim_gives_up_only_what_is_needed() -> None:
    # e runs 3 pods of 2 GPUs on n1 (min_member 1), 2 GPUs free; h asks 4: one pod of e
    # goes, two run on
    pods = [run(f"e-{i}", "q", 0, 2, gang="e", min_member=1) for i in range(3)]
    s = instance([within("lower_priority")], pods, [gang("h", "q", 100, 4)])
    result = solved(s)
    assert len(evicted(result)) == 1
    assert result.plan.placed("h") == 1


def test_a_higher_class_is_never_given_up_for_a_lower_one() -> None:
    # mid (priority 50) holds 8 GPUs; h (priority 100) asks 1: p100 comes first in the
    # tuple, so one GPU of class 100 outweighs eight of class 50
    s = instance([within("lower_priority")], [run("mid", "q", 50, 8)], [gang("h", "q", 100, 1)])
    result = solved(s)
    assert evicted(result) == ["mid"]
    assert (result.score["p100.gpu_milli"], result.score["p50.gpu_milli"]) == (1000, -8000)


# --------------------------------------------------------------------------- the score


def test_scores_without_preemption_keep_their_names() -> None:
    s, _ = load_snapshot(None)
    names = score_names(s)
    assert not any(n.startswith("preemption.") for n in names)
    on = score_names(s.with_preemption())
    assert [n for n in on if n.startswith("preemption.")] == list(EVICTION_ENTRIES)
    assert on.index("preemption.evicted_gpu_milli") == on.index("stability") - 3
    assert [n for n in on if not n.startswith("preemption.")][-1] == "stability"


def test_an_evicted_pod_is_lost_throughput_of_its_class() -> None:
    # hand-made plan: evict low (class 0, 8 GPUs) and admit h (class 100, 8 GPUs)
    s = instance([within("lower_priority")], [run("low", "q", 0, 8)], [gang("h", "q", 100, 8)])
    result = solved(s)
    sc = score(s, result.plan)
    assert (sc["p100.gpu_milli"], sc["p100.pods"]) == (8000, 1)
    assert (sc["p0.gpu_milli"], sc["p0.pods"]) == (-8000, -1)
    assert (sc["preemption.evicted_gpu_milli"], sc["preemption.evicted_pods"]) == (-8000, -1)


# --------------------------------------------------------------------------- the baselines


def trap() -> Snapshot:
    """v0 (priority 0, 2 GPUs on n1) comes first in the candidates' order, but n1's other 6
    GPUs are held by keep (priority 200): h (8 GPUs) can never fit n1. v5 (priority 5)
    holds all of n2: evicting it is what makes room."""
    return instance(
        [within("lower_priority")],
        [run("v0", "q", 0, 2), run("keep", "q", 200, 6), run("v5", "q", 5, 8, node="n2")],
        [gang("h", "q", 100, 8)],
        nodes=2,
    )


def test_cpsat_evicts_only_the_victim_that_makes_room() -> None:
    result = solved(trap())
    assert evicted(result) == ["v5"]


def test_greedy_preemption_gives_back_the_room_it_did_not_use() -> None:
    # greedy (Volcano's order) evicts v0 first, h still does not fit, then v5 on n2, where
    # h goes: v0's room on n1 is unused and it is given back (before, both were evicted
    # and the plan broke "no eviction for nothing", github.com/volcano-sh/volcano #5984)
    s = trap()
    base = run_baseline(s, "greedy")
    assert sorted(e.pod for e in base.plan.evictions) == ["v5"]
    assert verify(s, base.plan) == []


FIXTURES = Path(__file__).parents[2] / "fixtures" / "preemption"


@pytest.mark.parametrize(
    ("name", "victims"),
    [
        # g3 asks A100s, only n0 has them: its 4 GPUs are all r3's, so r3 goes, and r0 (on
        # the H100 node n1, the most recently admitted) must stay; before, both went
        ("min-victim", ["r3"]),
        # g3's affinity (rank > 4) leaves only n3: 3 pods x 2 CPU do not fit beside r1's 4
        # of 8 CPUs, so r1 goes; r0 on n2 (no rank label) must stay; before, both went
        ("min-evict", ["r1"]),
    ],
)
@pytest.mark.parametrize("placer", ["greedy", "topology-fit", "fgd"])
def test_greedy_preemption_evicts_only_on_nodes_the_gang_may_use(
    name: str, victims: list[str], placer: str
) -> None:
    s, _ = load_snapshot(FIXTURES / f"{name}.yaml")
    base = run_baseline(s, placer)
    assert sorted(e.pod for e in base.plan.evictions) == victims
    assert [g.key for g in base.plan.gangs if g.admitted] == ["default/g3"]
    assert verify(s, base.plan) == []


@pytest.mark.parametrize("placer", ["topology-fit", "fgd"])
def test_kueue_like_greedy_preemption_gives_back_what_was_not_needed(placer: str) -> None:
    s = trap()
    base = run_baseline(s, placer)
    assert sorted(e.pod for e in base.plan.evictions) == ["v5"]
    assert verify(s, base.plan) == []


def test_greedy_preemption_takes_the_most_recent_first() -> None:
    s = instance(
        [within("lower_priority")],
        [run("old", "q", 0, 8, admitted=100.0), run("new", "q", 0, 8, node="n2", admitted=500.0)],
        [gang("h", "q", 100, 8)],
        nodes=2,
    )
    for placer in ("greedy", "topology-fit", "fgd"):
        base = run_baseline(s, placer)
        assert sorted(e.pod for e in base.plan.evictions) == ["new"], placer
        assert verify(s, base.plan) == []


def test_greedy_preemption_commits_nothing_when_the_gang_never_fits() -> None:
    # h asks 16 GPUs in one pod: no node has them, whatever is evicted
    s = instance([within("lower_priority")], [run("low", "q", 0, 8)], [gang("h", "q", 100, 16)])
    for placer in ("greedy", "topology-fit", "fgd"):
        assert run_baseline(s, placer).plan.evictions == ()


def test_aggregated_mode_with_a_victim_on_a_node_its_preemptor_may_not_use() -> None:
    # n1 and n2 in one leaf (aggregated mode at exact_limit 0), 4 GPUs each, full with v on
    # n1 and u on n2 (priority 0). h (priority 10, same queue, lower_priority within it):
    # 2 x 1 GPU on one node (required node level), selector pool=b: n2 only. By hand: h
    # evicts u and takes n2; v stays (h may not use n1). The rows that make an eviction
    # needed looked up h's count on n1, where a gang counted per node has none: KeyError.
    s, _ = load_instance(
        {
            "apiVersion": "gangplan.io/v1alpha1",
            "kind": "Instance",
            "preemption": {"enabled": True, "grace_s": 0},
            "levels": [{"name": "leaf"}],
            "nodes": [
                {"name": "n1", "domains": {"leaf": "l1"}, "allocatable": {GPU: 4}},
                {
                    "name": "n2",
                    "domains": {"leaf": "l1"},
                    "labels": {"pool": "b"},
                    "allocatable": {GPU: 4},
                },
            ],
            "queues": [{"name": "q", "preemption": {"within_queue": "lower_priority"}}],
            "running": [
                {"name": "v-0", "gang": "v", "queue": "q", "node": "n1", "requests": {GPU: 4}},
                {"name": "u-0", "gang": "u", "queue": "q", "node": "n2", "requests": {GPU: 4}},
            ],
            "gangs": [
                {
                    "name": "h",
                    "queue": "q",
                    "priority": 10,
                    "topology": {"required": "node"},
                    "roles": [
                        {
                            "name": "w",
                            "count": 2,
                            "node_selector": {"pool": "b"},
                            "requests": {GPU: 1},
                        }
                    ],
                }
            ],
        }
    )
    cfg = SolverConfig(deterministic=True, deterministic_time=2, time_limit_s=30, exact_limit=0)
    r = solve_cycle(s, None, cfg)
    assert verify(s, r.plan) == []
    assert r.status in (CycleStatus.OPTIMAL, CycleStatus.FEASIBLE, CycleStatus.INCUMBENT)
    assert any(n.startswith("aggregated mode") for n in r.notes)
    assert sorted(p.node for p in r.plan.pods) == ["n2", "n2"]
    assert [e.pod for e in r.plan.evictions] == ["u-0"]


_API = {"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance"}


@pytest.mark.parametrize(
    ("max_gpus", "running"),
    [
        # queue max 3 GPUs, r0 holds 2 of n0's 4: g0 (2 GPUs) fits the node beside r0 but
        # not the max (2 + 2 > 3); evicting r0 would make room under the max only
        (3, [("r0", 2)]),
        # queue max 1 GPU, already over it (r0 2 + r1 1); g0 asks 1: only evicting both
        # would make room, again under the max only (n0 has 1 GPU free)
        (1, [("r0", 2), ("r1", 1)]),
    ],
)
def test_the_baselines_never_evict_for_a_queue_max(
    max_gpus: int, running: list[tuple[str, int]]
) -> None:
    # an eviction is for node capacity only (the verifier's evictions_needed): g0 cannot
    # be admitted, and no baseline evicts for it (they evicted r0, and the verifier refused
    # every plan; at scale the cycle returned the empty plan, a reviewer's finding)
    s, warnings = load_instance(
        {
            **_API,
            "nodes": [{"name": "n0", "allocatable": {"cpu": 32, GPU: 4}}],
            "queues": [
                {
                    "name": "qd",
                    "max": {GPU: max_gpus},
                    "preemption": {"within_queue": "lower_priority", "reclaim": "any"},
                }
            ],
            "running": [
                {
                    "name": n,
                    "gang": n,
                    "queue": "qd",
                    "priority": 0,
                    "node": "n0",
                    "requests": {"cpu": 1, GPU: g},
                    "admitted": 0,
                }
                for n, g in running
            ],
            "gangs": [
                {
                    "name": "g0",
                    "queue": "qd",
                    "priority": 100,
                    "creation_time": 1,
                    "roles": [
                        {
                            "name": "w",
                            "count": 1,
                            "requests": {"cpu": 1, GPU: 2 if max_gpus == 3 else 1},
                        }
                    ],
                }
            ],
            "preemption": {"enabled": True, "grace_s": 0, "now": 1000},
        }
    )
    assert warnings == []
    for name in ("greedy", "topology-fit", "fgd"):
        r = run_baseline(s, name)
        assert not r.plan.evictions and not r.plan.pods, name
        assert verify(s, r.plan) == []
    r = solve_cycle(
        s, None, SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=2)
    )
    assert not r.plan.evictions and not r.plan.pods
    assert verify(s, r.plan) == []


def test_the_greedy_preemption_stops_when_its_time_is_up() -> None:
    # low holds n1's 8 GPUs; h (priority 100) needs them: with time the step evicts low for
    # h; with none left it tries nothing (no eviction, h stays pending) and the plan is
    # still valid (on a reviewer's 1,000-node instance the step took 12 s at any limit)
    from gangplan.solver.context import CycleContext
    from gangplan.solver.placers.greedy_preemption import greedy_preemption

    s = instance([within("lower_priority")], [run("low", "q", 0, 8)], [gang("h", "q", 100, 8)])
    out, ev = greedy_preemption(CycleContext.of(s), [], reprieve=True, out_of_time=lambda: False)
    assert [p.gang_key for p in out] == ["default/h"] and [e.pod for e in ev] == ["low"]
    out, ev = greedy_preemption(CycleContext.of(s), [], reprieve=True, out_of_time=lambda: True)
    assert out == [] and ev == []
    # in a cycle the step gets a share of the budget; at a budget too short for it the
    # notes say it stopped, and the plan verifies
    r = solve_cycle(
        s, config=SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=1e-9)
    )
    assert verify(s, r.plan) == []
    assert any("greedy preemption stopped for time" in n for n in r.notes)
