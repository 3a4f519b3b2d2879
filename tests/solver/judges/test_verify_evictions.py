"""The verifier's eviction rules (solver/judges/verify_evictions.py): one hand-made bad plan per
way of breaking a rule, and the good plan beside it.

The cluster, worked out by hand: n1 and n2 have 4 cpu and 8 GPUs each. Queue q lets its
gangs evict lower priorities (``within_queue: lower_priority``); preemption is on, the clock
at 1000 s, the grace period 300 s. Running, each one pod of 8 GPUs and 1 cpu unless said:

* ``low`` (priority 0) on n1 — the victim of the good plan;
* ``peer`` (priority 100, as h) and ``high`` (priority 200) on n2 in the variants that need
  them; ``pair`` (two pods of 4 GPUs, priority 0, a whole gang) on n1 in the variant that
  splits it; ``fresh`` (priority 0, admitted at 900 s: inside its grace period);
  ``pinned`` (priority 0, not preemptible).

Pending: ``h`` (priority 100), one pod of 8 GPUs and 1 cpu.
"""

from __future__ import annotations

from typing import Any

from gangplan.models import Eviction, PodPlacement, Snapshot, load_instance
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import assemble_plan

GPU = "nvidia.com/gpu"


def snapshot(running: list[dict[str, Any]], h_gpus: int = 8, **preemption: Any) -> Snapshot:
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "preemption": {"enabled": True, "now": 1000, "grace_s": 300, **preemption},
        "nodes": [{"name": n, "allocatable": {"cpu": 4, GPU: 8}} for n in ("n1", "n2")],
        "queues": [{"name": "q", "preemption": {"within_queue": "lower_priority"}}],
        "running": running,
        "gangs": [
            {
                "name": "h",
                "queue": "q",
                "priority": 100,
                "roles": [{"name": "w", "count": 1, "requests": {"cpu": 1, GPU: h_gpus}}],
            }
        ],
    }
    return load_instance(data)[0]


def run(name: str, node: str, priority: int = 0, gpu: int = 8, **extra: Any) -> dict[str, Any]:
    gang = extra.pop("gang", name)
    return {
        "name": name,
        "gang": gang,
        "queue": "q",
        "priority": priority,
        "node": node,
        "requests": {"cpu": 1, GPU: gpu},
        **extra,
    }


def h_on(node: str, gpus: tuple[int, ...] = tuple(range(8))) -> PodPlacement:
    return PodPlacement(
        pod="h-w-0", gang="h", role="w", node=node, gpus=tuple(f"gpu-{i}" for i in gpus)
    )


def evict(pod: str, node: str, gang: str | None = None, kind: str = "priority") -> Eviction:
    return Eviction(pod=pod, gang=gang or pod, node=node, for_gang="default/h", kind=kind)  # type: ignore[arg-type]


def rules(s: Snapshot, pods: list[PodPlacement], evictions: list[Eviction]) -> list[str]:
    """The rules the plan breaks, each once, in the verifier's order."""
    found = verify(s, assemble_plan(s, pods, {}, evictions=evictions))
    return list(dict.fromkeys(v.rule for v in found))


def test_the_good_plan_passes() -> None:
    # low's 8 GPUs on n1 are what h takes there; n2 is held by peer (priority 100, kept)
    s = snapshot([run("low", "n1"), run("peer", "n2", 100)])
    assert rules(s, [h_on("n1")], [evict("low", "n1")]) == []


def test_evictions_need_preemption_on() -> None:
    s = snapshot([run("low", "n1"), run("peer", "n2", 100)], enabled=False)
    assert rules(s, [h_on("n1")], [evict("low", "n1")]) == ["evictions"]


def test_a_victim_of_equal_priority_is_refused() -> None:
    # peer has h's priority: evicting it for h is not "strictly lower"
    s = snapshot([run("low", "n1"), run("peer", "n2", 100)])
    assert rules(s, [h_on("n2")], [evict("peer", "n2")]) == ["victim_priority"]


def test_a_victim_of_higher_priority_is_refused() -> None:
    s = snapshot([run("low", "n1"), run("high", "n2", 200)])
    assert rules(s, [h_on("n2")], [evict("high", "n2")]) == ["victim_priority"]


def test_a_partial_victim_is_refused() -> None:
    # pair runs one pod of 8 GPUs on each node (a whole gang): evicting the one on n1 makes
    # room for h but leaves the other running, useless
    pair = [run(f"pair-{i}", f"n{i + 1}", gang="pair") for i in range(2)]
    s = snapshot(pair)
    assert rules(s, [h_on("n1")], [evict("pair-0", "n1", gang="pair")]) == ["victim_whole"]
    whole = [evict("pair-0", "n1", gang="pair"), evict("pair-1", "n2", gang="pair")]
    assert rules(s, [h_on("n1")], whole) == []


def test_an_elastic_victim_may_lose_its_pods_above_its_minimum_only() -> None:
    # elastic e on n1: pods of 4, 2 and 2 GPUs, min_member 2; h asks 4 GPUs. Evicting the
    # 4-GPU pod leaves two running (its minimum) and makes h's room: valid. Evicting the two
    # 2-GPU pods leaves one running, below the minimum (each was needed: put back, 4 kept
    # + 2 + h's 4 > 8).
    pods = [
        run("e-0", "n1", gpu=4, gang="e", min_member=2),
        run("e-1", "n1", gpu=2, gang="e", min_member=2),
        run("e-2", "n1", gpu=2, gang="e", min_member=2),
    ]
    s = snapshot([*pods, run("peer", "n2", 100)], h_gpus=4)
    h4 = h_on("n1", (0, 1, 2, 3))
    assert rules(s, [h4], [evict("e-0", "n1", gang="e")]) == []
    h4b = h_on("n1", (4, 5, 6, 7))
    below = [evict("e-1", "n1", gang="e"), evict("e-2", "n1", gang="e")]
    assert rules(s, [h4b], below) == ["victim_whole"]


def test_an_eviction_for_nothing_is_refused() -> None:
    # n2 is idle: h fits there, so evicting low on n1 frees nothing h uses
    s = snapshot([run("low", "n1")])
    assert rules(s, [h_on("n2")], [evict("low", "n1")]) == ["victim_priority", "eviction_needed"]
    assert rules(s, [h_on("n1")], [evict("low", "n1")]) == []


def test_an_eviction_beside_enough_room_is_for_nothing() -> None:
    # low holds 4 GPUs of n1: h's 8 need them; a second victim, low2 (4 GPUs on n1 as well,
    # 4 + 4 = 8), is needed too; but a third one on n2 is not
    s = snapshot([run("low", "n1", gpu=4), run("low2", "n1", gpu=4), run("far", "n2", gpu=4)])
    both = [evict("low", "n1"), evict("low2", "n1")]
    assert rules(s, [h_on("n1")], both) == []
    extra = [*both, evict("far", "n2")]
    assert rules(s, [h_on("n1")], extra) == ["victim_priority", "eviction_needed"]


def test_room_used_by_a_gang_that_may_not_preempt_does_not_excuse_an_eviction() -> None:
    # low (4 GPUs on n1) is evicted; h (8 GPUs) goes to idle n2, and b (priority 0, as
    # low: it may not evict it) fills low's room on n1. Put back, low fits beside what may
    # evict it (nothing on n1): the eviction is for nothing.
    s0 = snapshot([run("low", "n1", gpu=8)])
    data = s0.model_dump(mode="json")
    data["gangs"].append(
        {
            "name": "b",
            "queue": "q",
            "priority": 0,
            "roles": [{"name": "w", "count": 1, "requests": {"cpu": 1, GPU: 8}}],
        }
    )
    data.pop("api_version")
    s = load_instance({"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance", **data})[0]
    b = PodPlacement(pod="b-w-0", gang="b", role="w", node="n1", gpus=h_on("n1").gpus)
    got = rules(s, [h_on("n2"), b], [evict("low", "n1")])
    assert got == ["victim_priority", "eviction_needed"]


def test_a_victim_inside_its_grace_period_is_refused() -> None:
    # fresh was admitted at 900 s; now is 1000 s, grace 300 s: 100 s < 300 s
    s = snapshot([run("fresh", "n1", admitted=900.0), run("peer", "n2", 100)])
    assert rules(s, [h_on("n1")], [evict("fresh", "n1")]) == ["victim_grace"]
    later = snapshot([run("fresh", "n1", admitted=600.0), run("peer", "n2", 100)])
    assert rules(later, [h_on("n1")], [evict("fresh", "n1")]) == []


def test_a_victim_that_does_not_tolerate_disruption_is_refused() -> None:
    s = snapshot([run("pinned", "n1", preemptible=False), run("peer", "n2", 100)])
    got = rules(s, [h_on("n1")], [evict("pinned", "n1")])
    assert got == ["victim_disruption"]


def _two_queues() -> Snapshot:
    """Queue a is guaranteed 8 GPUs and reclaims; queue b is guaranteed none and borrows:
    its gangs b1 on n1 and b2 on n2 (8 GPUs each) use 16. Pending in a: a1 and a2, one pod
    of 8 GPUs each. Each alone is within a's guarantee (0 + 8 <= 8) and may reclaim."""
    pend = [
        {
            "name": g,
            "queue": "a",
            "roles": [{"name": "w", "count": 1, "requests": {"cpu": 1, GPU: 8}}],
        }
        for g in ("a1", "a2")
    ]
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "preemption": {"enabled": True, "now": 1000, "grace_s": 300},
        "nodes": [{"name": n, "allocatable": {"cpu": 4, GPU: 8}} for n in ("n1", "n2")],
        "queues": [
            {"name": "a", "guaranteed": {GPU: 8}, "preemption": {"reclaim": "any"}},
            {"name": "b", "preemption": {"reclaimable": True}},
        ],
        "running": [
            {**run("b1", "n1"), "queue": "b", "admitted": 0},
            {**run("b2", "n2"), "queue": "b", "admitted": 0},
        ],
        "gangs": pend,
    }
    return load_instance(data)[0]


def _on(gang: str, node: str) -> PodPlacement:
    return PodPlacement(
        pod=f"{gang}-w-0", gang=gang, role="w", node=node, gpus=tuple(f"gpu-{i}" for i in range(8))
    )


def test_reclaim_is_counted_cumulatively_per_queue() -> None:
    # issue 26, finding 6: a1 and a2 both admitted by reclaim put 16 GPUs in a queue
    # guaranteed 8 (Kueue counts each admitted workload); before, each was judged alone
    s = _two_queues()

    def ev(pod: str, node: str, for_gang: str) -> Eviction:
        return Eviction(pod=pod, gang=pod, node=node, for_gang=for_gang, kind="reclaim")

    one = rules(s, [_on("a1", "n1")], [ev("b1", "n1", "default/a1")])
    assert one == []
    both = verify(
        s,
        assemble_plan(
            s,
            [_on("a1", "n1"), _on("a2", "n2")],
            {},
            evictions=[ev("b1", "n1", "default/a1"), ev("b2", "n2", "default/a2")],
        ),
    )
    assert [(v.rule, v.message) for v in both] == [
        (
            "reclaim_total",
            "queue 'a' reclaims for default/a1, default/a2: with its running pods they use 16 "
            f"of {GPU}, above the 8 it is guaranteed (Kueue counts every admitted workload)",
        )
    ]
