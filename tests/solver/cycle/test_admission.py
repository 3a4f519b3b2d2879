"""Admission before growth, and evictions for a gang's minimum only, worked by hand.

One node ``n1`` of 8 GPUs (plenty of cpu), one queue ``q`` (``within_queue: lower_priority``);
every pod asks one whole GPU and nothing else that binds.

* **Growth** (``test_a_waiting_gang_starts_before_a_running_one_grows``): ``e`` runs 5 pods
  of its full size 8, so its growth gang (``models/elastic.py``) asks 3 pods; ``a`` (2 GPUs,
  one pod) and ``b`` (1 GPU) wait. Free: 3 GPUs. Either ``e`` grows by 3 (3,000 milli-GPU,
  3 pods) or ``a`` and ``b`` start (3,000 milli-GPU, 2 pods): the same GPUs, the same fair
  shares (one queue, at 8 of 8 GPUs either way), and the old score took the growth for its
  one pod more. Admission first: ``a`` and ``b`` start (``p0.gpu_milli`` 3,000, ``p0.pods``
  2) and ``e`` gets nothing (growth 0), where growing ``e`` scores 0 and 0 in the minimums'
  entries.
* **Optional pods** (``test_a_gangs_minimum_comes_before_anothers_optional_pods``): on 3 free
  GPUs, ``c`` (elastic, 3 pods, minimum 1) and ``d`` (rigid, one pod of 2 GPUs) wait. ``c``
  at full size is 3,000 milli-GPU and 3 pods, as much GPU as ``c`` at 1 pod and ``d`` with
  one pod more; the minimums first: ``c`` at 1 and ``d`` (minimums 3,000 and 2 pods)
  against ``c`` alone (1,000 and 1, growth 2,000 and 2).
* **Minimum-only preemption** (``test_a_preemptor_evicts_for_its_minimum_only``), the 4-pod
  case of issue 29: on a node of 4 GPUs ``e`` (priority 0, elastic, minimum 1) runs 4 pods,
  ``p`` (priority 10, elastic, 4 pods, minimum 1) waits. Only ``p``'s minimum (one pod) may
  take a victim's room: evicting one pod of ``e`` starts ``p``; a second eviction, put
  back, fits beside the 2 pods ``e`` keeps and ``p``'s minimum (3 of 4 GPUs), so it would
  be for an optional pod, and evicting ``e`` whole (all 4 pods, what the solver did before)
  is refused the same way. So: one pod evicted, one placed.
* **A device alone** (``test_no_eviction_for_a_device_alone``): ``n1`` has 2 GPUs; ``v``
  (priority 0) holds 500 milli of ``gpu-0``, ``k`` (priority 20, not evictable by ``p``)
  500 milli of ``gpu-1``; ``p`` (priority 10) asks one whole GPU. The node's total has room
  (1,000 milli free), no device is whole: evicting ``v`` would free a particular device
  only, which the verifier refuses. ``p`` stays pending, nothing is evicted.
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplan.models import (
    Eviction,
    PodPlacement,
    Snapshot,
    growth_gang,
    load_instance,
)
from gangplan.solver.cycle.pipeline import run_baseline, solve_cycle
from gangplan.solver.judges.score import score
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import CycleResult, SolverConfig, assemble_plan

GPU = "nvidia.com/gpu"
DET = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=10.0)
PLACERS = ("greedy", "topology-fit", "fgd", "cpsat")


def instance(
    gpus: int,
    running: list[dict[str, Any]],
    gangs: list[dict[str, Any]],
    *,
    preemption: bool = False,
) -> Snapshot:
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "preemption": {"enabled": preemption, "now": 10_000, "grace_s": 300},
        "nodes": [{"name": "n1", "allocatable": {"cpu": 64, GPU: gpus}}],
        "queues": [{"name": "q", "preemption": {"within_queue": "lower_priority"}}],
        "running": running,
        "gangs": gangs,
    }
    return load_instance(data)[0]


def gang(name: str, count: int, gpus: int = 1, **extra: Any) -> dict[str, Any]:
    role = {"name": "w", "count": count, "requests": {"cpu": 1, GPU: gpus}}
    return {"name": name, "queue": "q", "roles": [role], **extra}


def runs(name: str, count: int, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": f"{name}-w-{k}",
            "gang": name,
            "queue": "q",
            "node": "n1",
            "requests": {"cpu": 1, GPU: 1},
            "devices": [f"gpu-{k}"],
            "admitted": 0,
            **extra,
        }
        for k in range(count)
    ]


def cycle(s: Snapshot, placer: str) -> CycleResult:
    result = run_baseline(s, placer) if placer != "cpsat" else solve_cycle(s, config=DET)
    assert verify(s, result.plan) == []
    return result


def growth_snapshot() -> Snapshot:
    full = instance(8, [], [gang("e", 8, min_member=1)]).gangs[0]
    grow = growth_gang(full, {"w": 5}, {"w": [f"e-w-{k}" for k in range(5, 8)]})
    assert grow is not None
    waiting = [
        gang("a", 1, gpus=2, creation_time=100),
        gang("b", 1, creation_time=200),
    ]
    return instance(8, runs("e", 5, min_member=1), [grow.model_dump(mode="json"), *waiting])


@pytest.mark.parametrize("placer", PLACERS)
def test_a_waiting_gang_starts_before_a_running_one_grows(placer: str) -> None:
    s = growth_snapshot()
    result = cycle(s, placer)
    assert sorted(p.gang for p in result.plan.pods) == ["a", "b"]
    entries = dict(result.score.entries)
    assert (entries["p0.gpu_milli"], entries["p0.pods"]) == (3000, 2)
    assert (entries["p0.growth_gpu_milli"], entries["p0.growth_pods"]) == (0, 0)


def test_growth_scores_below_any_minimum() -> None:
    s = growth_snapshot()
    pods = [
        PodPlacement(pod=f"e-w-{k}", gang="e", role="w", node="n1", gpus=(f"gpu-{k}",))
        for k in range(5, 8)
    ]
    grown = assemble_plan(s, pods, {})
    assert verify(s, grown) == []
    entries = dict(score(s, grown).entries)
    # all three pods are growth: the growth gang's minimum is empty
    assert (entries["p0.gpu_milli"], entries["p0.pods"]) == (0, 0)
    assert (entries["p0.growth_gpu_milli"], entries["p0.growth_pods"]) == (3000, 3)
    started = cycle(s, "greedy").plan
    assert score(s, started) > score(s, grown)


@pytest.mark.parametrize("placer", PLACERS)
def test_a_gangs_minimum_comes_before_anothers_optional_pods(placer: str) -> None:
    s = instance(
        8,
        runs("r", 5),  # rigid, 5 GPUs: 3 free
        [gang("c", 3, min_member=1, creation_time=100), gang("d", 1, gpus=2, creation_time=200)],
    )
    result = cycle(s, placer)
    assert sorted(p.gang for p in result.plan.pods) == ["c", "d"]
    entries = dict(result.score.entries)
    assert (entries["p0.gpu_milli"], entries["p0.pods"]) == (3000, 2)
    assert (entries["p0.growth_gpu_milli"], entries["p0.growth_pods"]) == (0, 0)


def four_pod_snapshot() -> Snapshot:
    return instance(
        4,
        runs("e", 4, min_member=1),
        [gang("p", 4, min_member=1, priority=10)],
        preemption=True,
    )


@pytest.mark.parametrize("placer", PLACERS)
def test_a_preemptor_evicts_for_its_minimum_only(placer: str) -> None:
    s = four_pod_snapshot()
    result = cycle(s, placer)
    assert [p.gang for p in result.plan.pods] == ["p"]
    assert len(result.plan.evictions) == 1
    assert {e.gang for e in result.plan.evictions} == {"e"}
    entries = dict(result.score.entries)
    # p's minimum admitted in class 10; class 0 loses one of e's pods above its minimum
    assert (entries["p10.gpu_milli"], entries["p10.pods"]) == (1000, 1)
    assert (entries["p10.growth_gpu_milli"], entries["p10.growth_pods"]) == (0, 0)
    assert (entries["p0.gpu_milli"], entries["p0.pods"]) == (0, 0)
    assert (entries["p0.growth_gpu_milli"], entries["p0.growth_pods"]) == (-1000, -1)


@pytest.mark.parametrize("evicted", [2, 4])
def test_the_verifier_refuses_an_eviction_for_optional_pods(evicted: int) -> None:
    # evict `evicted` pods of e (4: whole, the old plan), place as many pods of p on them
    s = four_pod_snapshot()
    evictions = tuple(
        Eviction(pod=f"e-w-{k}", gang="e", node="n1", for_gang="default/p", kind="priority")
        for k in range(evicted)
    )
    pods = [
        PodPlacement(pod=f"p-w-{k}", gang="p", role="w", node="n1", gpus=(f"gpu-{k}",))
        for k in range(evicted)
    ]
    plan = assemble_plan(s, pods, {}, evictions=evictions)
    assert {v.rule for v in verify(s, plan)} == {"eviction_needed"}
    # one pod for p's minimum is needed: accepted
    one = assemble_plan(s, pods[:1], {}, evictions=evictions[:1])
    assert verify(s, one) == []


def test_a_victim_keeps_its_minimum_before_it_goes_whole() -> None:
    # whole e costs its minimum (one pod, 1,000 milli) in class 0's minimums' entries; three
    # of its pods above the minimum cost growth only: the score prefers the partial
    s = four_pod_snapshot()
    gone = [
        Eviction(pod=f"e-w-{k}", gang="e", node="n1", for_gang="default/p", kind="priority")
        for k in range(4)
    ]
    whole = dict(score(s, assemble_plan(s, [], {}, evictions=tuple(gone))).entries)
    assert (whole["p0.gpu_milli"], whole["p0.pods"]) == (-1000, -1)
    assert (whole["p0.growth_gpu_milli"], whole["p0.growth_pods"]) == (-3000, -3)
    part = dict(score(s, assemble_plan(s, [], {}, evictions=tuple(gone[:3]))).entries)
    assert (part["p0.gpu_milli"], part["p0.pods"]) == (0, 0)
    assert (part["p0.growth_gpu_milli"], part["p0.growth_pods"]) == (-3000, -3)


@pytest.mark.parametrize("placer", PLACERS)
def test_no_eviction_for_a_device_alone(placer: str) -> None:
    share = {"cpu": 1, GPU: "500m"}
    s = instance(
        2,
        [
            {
                "name": "v",
                "gang": "v",
                "queue": "q",
                "node": "n1",
                "requests": share,
                "devices": ["gpu-0"],
                "admitted": 0,
            },
            {
                "name": "k",
                "gang": "k",
                "queue": "q",
                "priority": 20,
                "node": "n1",
                "requests": share,
                "devices": ["gpu-1"],
                "admitted": 0,
            },
        ],
        [gang("p", 1, priority=10)],
        preemption=True,
    )
    result = cycle(s, placer)
    assert result.plan.pods == ()
    assert result.plan.evictions == ()
