"""Preemption in ``gangplan serve`` (``preemption: true``), on the in-memory API: the victims
go through the Eviction API together, before the preemptor, whose room the ledger holds
until they are gone; a PodDisruptionBudget that would be broken stops the gang's
preemption for the cycle with nothing evicted; a 429 midway leaves the remaining victims
running and the note says which went. Each test ends with :func:`kubesim.final_check`.

The cluster: one node of 8 GPUs, a Kueue ClusterQueue ``research`` whose gangs may evict
lower priorities (``withinClusterQueue: LowerPriority``); running low-priority pods fill
the node; a pending gang ``high`` (priority 100) asks the whole node."""

from __future__ import annotations

from typing import Any

from kubesim import Kubelet, Scheduler, final_check
from objects import node, pod

from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.loop import ServeLoop
from gangplan.adapters.serve.memory import Fault, InMemoryApi
from gangplan.solver.result import SolverConfig

PODS = KINDS["pods"]
SOLVER = SolverConfig(deterministic=True, deterministic_time=2.0)


def _kueue(api: InMemoryApi) -> None:
    api.put(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100"},
            "spec": {},
        }
    )
    api.put(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "research"},
            "spec": {
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "h100",
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "64"}],
                            }
                        ],
                    }
                ],
            },
        }
    )
    api.put(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "team", "namespace": "ml"},
            "spec": {"clusterQueue": "research"},
        }
    )


def _pod(
    name: str, group: str, n: int, gpus: int, prio: int, node_name: str | None
) -> dict[str, Any]:
    labels = {
        "kueue.x-k8s.io/queue-name": "team",
        "kueue.x-k8s.io/pod-group-name": group,
        "gang": group,
    }
    ann = {"kueue.x-k8s.io/pod-group-total-count": str(n)}
    p = pod(
        name,
        gpus=gpus,
        labels=labels,
        annotations=ann,
        gated=node_name is None,
        node_name=node_name,
    )
    p["spec"]["priority"] = prio
    if node_name:
        p["status"]["startTime"] = "2020-01-01T00:00:00Z"
    return p


def setup(api: InMemoryApi, clock: FakeClock, victims: list[tuple[str, str, int]]) -> ServeLoop:
    """``victims``: running pods (name, group, gangs' size) of 4 GPUs each on n0."""
    api.put(node("n0", gpus=8))
    _kueue(api)
    for name, group, n in victims:
        api.put(_pod(name, group, n, 4, 0, "n0"))
    api.put(_pod("high-0", "high", 1, 8, 100, None))
    return ServeLoop(
        api,
        ServeConfig(queue_source="kueue", preemption=True),
        clock=clock,
        solver=SOLVER,
        emit=lambda _: None,
    )


def _evicted(api: InMemoryApi) -> list[str]:
    return sorted(c.name for c in api.calls if c.verb == "evict")


def test_victims_go_first_then_the_preemptor(memory: InMemoryApi, clock: FakeClock) -> None:
    loop = setup(memory, clock, [("low-0", "low", 2), ("low-1", "low", 2)])
    first = loop.cycle()
    assert first.admitted == ["ml/high"]
    assert _evicted(memory) == ["low-0", "low-1"]  # the whole victim, together
    assert first.applied == 0  # held in the ledger until the victims are gone
    assert "ml/high" in loop.ledger.gangs
    clock.advance(2)
    second = loop.cycle()
    assert second.applied == 1
    Scheduler(memory).step()
    Kubelet(memory, clock).step()
    high = next(p for p in memory.objects(PODS) if p["metadata"]["name"] == "high-0")
    assert high["spec"]["nodeName"] == "n0" and high["status"]["phase"] == "Running"
    assert final_check(memory) == []


def test_a_pdb_that_would_break_stops_the_preemption(memory: InMemoryApi, clock: FakeClock) -> None:
    loop = setup(memory, clock, [("low-0", "low", 2), ("low-1", "low", 2)])
    memory.put(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "low", "namespace": "ml"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"gang": "low"}}},
        }
    )
    report = loop.cycle()
    assert _evicted(memory) == []  # not one victim pod: low is never half-evicted
    assert report.applied == 0 and "ml/high" not in loop.ledger.gangs
    assert any("PodDisruptionBudget ml/low allows 1" in n for n in report.notes)
    events = [
        e
        for e in memory.objects(KINDS["events.events.k8s.io"])
        if e.get("reason") == "PreemptionStopped"
    ]
    assert len(events) == 1
    assert final_check(memory) == []


def test_a_429_midway_leaves_the_remaining_victims_running(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # two one-pod victims; the second eviction is refused (a budget changed meanwhile)
    loop = setup(memory, clock, [("a-0", "a", 1), ("b-0", "b", 1)])
    memory.faults.add(Fault("evict", 429, skip=1))
    report = loop.cycle()
    assert len(_evicted(memory)) == 1
    gone = _evicted(memory)[0]
    left = "b-0" if gone == "a-0" else "a-0"
    note = next(n for n in report.notes if "preemption" in n)
    assert "429" in note and f"not evicted: ml/{left}" in note
    assert report.applied == 0 and "ml/high" not in loop.ledger.gangs
    running = [p["metadata"]["name"] for p in memory.objects(PODS) if p["spec"].get("nodeName")]
    assert running == [left]
    assert final_check(memory) == []
