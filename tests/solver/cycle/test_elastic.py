"""Elastic gangs across cycles, worked by hand on one node of 8 GPUs and 8 cpu.

The elastic gang ``e`` has a full size of 4 pods of 2 GPUs (and 1 cpu) each, minimum 2.

* Cycle 1 (grow): ``e`` runs 2 pods (4 GPUs) and its room to grow is a growth gang of the
  same name (``models/elastic.py``): 2 pods, ``min_member`` 1. Free: 8 − 4 = 4 GPUs, room for
  both: the cycle places both (throughput: 4000 milli-GPU more than placing none), the
  running pods untouched.
* Cycle 2 (shrink): ``e`` runs 4 pods (8 GPUs, the node full), admitted long ago. ``h``,
  priority 10 in the same queue (``within_queue: lower_priority``), asks one pod of 4 GPUs.
  Evicting 2 of ``e``'s pods frees 4 GPUs: ``h`` fits, and ``e`` keeps 2 = its minimum.
  Evicting 1 frees 2 < 4 (``h`` does not fit); evicting ``e`` whole loses 8 GPUs of class 0
  instead of 4 (worse in the class-0 throughput entry). So: 2 evicted, ``h`` placed.
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplan.models import PodPlacement, Snapshot, growth_gang, load_instance
from gangplan.solver.cycle.pipeline import run_baseline, solve_cycle
from gangplan.solver.judges.score import score
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import CycleResult, SolverConfig, assemble_plan

GPU = "nvidia.com/gpu"
DET = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=10.0)
PLACERS = ("greedy", "topology-fit", "fgd", "cpsat")
ROLE = {"name": "w", "count": 4, "requests": {"cpu": 1, GPU: 2}}


def running(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": f"e-w-{k}",
            "gang": "e",
            "queue": "q",
            "node": "n1",
            "min_member": 2,
            "requests": {"cpu": 1, GPU: 2},
            **extra,
        }
        for k in range(n)
    ]


def instance(
    run: list[dict[str, Any]],
    gangs: list[dict[str, Any]],
    *,
    preemption: bool = False,
    queue: dict[str, Any] | None = None,
) -> Snapshot:
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "preemption": {"enabled": preemption, "now": 1000, "grace_s": 300},
        "nodes": [{"name": "n1", "allocatable": {"cpu": 8, GPU: 8}}],
        "queues": [
            {"name": "q", "preemption": {"within_queue": "lower_priority"}, **(queue or {})}
        ],
        "running": run,
        "gangs": gangs,
    }
    return load_instance(data)[0]


def grow_snapshot(queue: dict[str, Any] | None = None) -> Snapshot:
    full = load_instance(
        {
            "apiVersion": "gangplan.io/v1alpha1",
            "kind": "Instance",
            "nodes": [{"name": "n1", "allocatable": {"cpu": 8, GPU: 8}}],
            "queues": [{"name": "q"}],
            "gangs": [{"name": "e", "queue": "q", "min_member": 2, "roles": [ROLE]}],
        }
    )[0].gangs[0]
    grow = growth_gang(full, {"w": 2}, {"w": ["e-w-2", "e-w-3"]})
    assert grow is not None
    return instance(running(2), [grow.model_dump(mode="json")], queue=queue)


def cycle(s: Snapshot, placer: str) -> CycleResult:
    result = run_baseline(s, placer) if placer != "cpsat" else solve_cycle(s, config=DET)
    assert verify(s, result.plan) == []
    return result


@pytest.mark.parametrize("placer", PLACERS)
def test_an_elastic_gang_grows_then_shrinks(placer: str) -> None:
    # cycle 1: both missing pods placed as new pods of e, the running ones untouched
    grown = cycle(grow_snapshot(), placer)
    assert sorted(p.pod for p in grown.plan.pods) == ["e-w-2", "e-w-3"]
    assert grown.plan.evictions == ()
    # cycle 2: e at full size (its 4 pods now running, the two new ones with their
    # devices), h of priority 10 waits: 2 of e's pods go, e keeps its minimum of 2
    pods = [
        {**r, "devices": [f"gpu-{2 * k}", f"gpu-{2 * k + 1}"]} for k, r in enumerate(running(4))
    ]
    h = {
        "name": "h",
        "queue": "q",
        "priority": 10,
        "roles": [{"name": "w", "count": 1, "requests": {"cpu": 1, GPU: 4}}],
    }
    shrunk = cycle(instance(pods, [h], preemption=True), placer)
    assert [p.gang for p in shrunk.plan.pods] == ["h"]
    assert len(shrunk.plan.evictions) == 2
    assert {e.gang for e in shrunk.plan.evictions} == {"e"}


@pytest.mark.parametrize("placer", PLACERS)
def test_growth_stops_at_the_queues_max(placer: str) -> None:
    # max 6 GPUs for q: e holds 4, so one growth pod (2 GPUs) fits the max, not two
    result = cycle(grow_snapshot({"max": {GPU: 6}}), placer)
    if placer == "topology-fit":
        # Kueue's admission checks quota for the whole workload (no partial admission
        # here): it places none rather than one; never both
        assert len(result.plan.pods) <= 1
    else:
        assert len(result.plan.pods) == 1


def test_growth_locality_counts_the_running_pods_domains() -> None:
    # two nodes in two leaves; e runs 2 pods on a1 (leaf a). Its growth pods on a1 add no
    # leaf; on b1 they add one (leaf b): the score's locality.leaf is 0, then -1
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "levels": [{"name": "leaf"}],
        "nodes": [
            {"name": n, "domains": {"leaf": leaf}, "allocatable": {"cpu": 8, GPU: 8}}
            for n, leaf in (("a1", "a"), ("b1", "b"))
        ],
        "queues": [{"name": "q"}],
        "running": [{**r, "node": "a1"} for r in running(2)],
        "gangs": [
            {
                "name": "e",
                "queue": "q",
                "min_member": 1,
                "roles": [{**ROLE, "count": 2, "min_member": 0, "pod_names": ["e-w-2", "e-w-3"]}],
            }
        ],
    }
    s = load_instance(data)[0]

    def leaf_entry(node: str) -> int:
        pods = [
            PodPlacement(
                pod=f"e-w-{k}",
                gang="e",
                role="w",
                node=node,
                gpus=(
                    f"gpu-{2 * k - 4 + (4 if node == 'a1' else 0)}",
                    f"gpu-{2 * k - 3 + (4 if node == 'a1' else 0)}",
                ),
            )
            for k in (2, 3)
        ]
        plan = assemble_plan(s, pods, {})
        assert verify(s, plan) == []
        return dict(score(s, plan).entries)["locality.leaf"]

    assert leaf_entry("a1") == 0
    assert leaf_entry("b1") == -1
    # and the model keeps the growth with its running pods
    result = solve_cycle(s, config=DET)
    assert {p.node for p in result.plan.pods} == {"a1"}


# --------------------------------------------------------------------------- the verifier


def test_verifier_refuses_a_shrink_below_the_minimum() -> None:
    # e (4 pods, minimum 2) keeps 1 pod if the plan evicts 3: refused
    pods = [
        {**r, "devices": [f"gpu-{2 * k}", f"gpu-{2 * k + 1}"]} for k, r in enumerate(running(4))
    ]
    h = {
        "name": "h",
        "queue": "q",
        "priority": 10,
        "roles": [{"name": "w", "count": 1, "requests": {"cpu": 1, GPU: 6}}],
    }
    s = instance(pods, [h], preemption=True)
    from gangplan.models import Eviction

    evict = tuple(
        Eviction(pod=f"e-w-{k}", gang="e", node="n1", for_gang="default/h", kind="priority")
        for k in range(3)
    )
    pod = PodPlacement(
        pod="h-w-0", gang="h", role="w", node="n1", gpus=tuple(f"gpu-{i}" for i in range(6))
    )
    plan = assemble_plan(s, [pod], {}, evictions=evict)
    assert "victim_whole" in {v.rule for v in verify(s, plan)}


def test_verifier_refuses_growth_past_the_max_and_past_the_full_size() -> None:
    # past the max: q's max 6 GPUs, e holds 4, both growth pods would make 8
    s = grow_snapshot({"max": {GPU: 6}})
    both = [
        PodPlacement(
            pod=f"e-w-{k}", gang="e", role="w", node="n1", gpus=(f"gpu-{2 * k}", f"gpu-{2 * k + 1}")
        )
        for k in (2, 3)
    ]
    assert {v.rule for v in verify(s, assemble_plan(s, both, {}))} == {"queue_max"}
    # past the full size: e-w-4 would be a fifth pod of e (full size 4): no pod of the
    # growth gang has that name, whatever room the node has
    s = grow_snapshot()
    extra = PodPlacement(pod="e-w-4", gang="e", role="w", node="n1", gpus=("gpu-6", "gpu-7"))
    bad = verify(s, assemble_plan(s, [both[0], extra], {}))
    assert [v.rule for v in bad] == ["references"]
    assert "e-w-4" in bad[0].message
