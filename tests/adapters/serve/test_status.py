"""Status where users look, Kueue beside gangplan, and the metrics endpoints."""

from __future__ import annotations

import urllib.request

import pytest
from objects import GATE, gang_pods, node, pod, volcano_group, volcano_queue
from prometheus_client import generate_latest

from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.loop import ServeLoop
from gangplan.adapters.serve.memory import InMemoryApi
from gangplan.adapters.serve.run import start_http
from gangplan.solver.result import SolverConfig

PODS, EVENTS = KINDS["pods"], KINDS["events.events.k8s.io"]
SOLVER = SolverConfig(deterministic=True, deterministic_time=1.0)
KUEUE_GATE = "kueue.x-k8s.io/admission"


def make_loop(api: InMemoryApi, clock: FakeClock, **cfg: object) -> ServeLoop:
    return ServeLoop(api, ServeConfig(**cfg), clock=clock, solver=SOLVER, emit=lambda _: None)


def _upstream_group(name: str, n: int) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": n}}},
    }


def _plugins_group(name: str, n: int) -> dict:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"minMember": n},
    }


def test_podgroup_status_in_each_flavours_terms(memory: InMemoryApi, clock: FakeClock) -> None:
    memory.put(node("n0", gpus=8))
    memory.put(volcano_group("v", 2))
    for p in gang_pods("v", 2, gpus=8):  # 16 GPUs: never fits one node of 8
        memory.put(p)
    memory.put(_upstream_group("u", 2))
    for i in range(2):
        p = pod(f"u-{i}", gpus=8)
        p["spec"]["schedulingGroup"] = {"podGroupName": "u"}
        memory.put(p)
    memory.put(_plugins_group("s", 1))
    memory.put(pod("s-0", gpus=4, labels={"scheduling.x-k8s.io/pod-group": "s"}))
    loop = make_loop(memory, clock)
    report = loop.cycle()
    assert report.admitted == ["ml/s"]
    vol = memory.get(KINDS["podgroups.scheduling.volcano.sh"], "ml", "v")["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in vol] == [
        ("Unschedulable", "True", "NotEnoughResources")
    ]
    assert "16" in vol[0]["message"] or "GPU" in vol[0]["message"]
    up = memory.get(KINDS["podgroups.scheduling.k8s.io"], "ml", "u")["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in up] == [
        ("PodGroupInitiallyScheduled", "False", "Unschedulable")
    ]
    assert memory.get(KINDS["podgroups.scheduling.x-k8s.io"], "ml", "s")["status"] == {
        "phase": "Scheduled"
    }
    writes = len([c for c in memory.calls if c.verb == "status"])
    loop.cycle()  # nothing changed: no status written again
    assert len([c for c in memory.calls if c.verb == "status"]) == writes


def test_failed_scheduling_events_are_deduplicated_and_rate_limited(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    memory.put(node("n0", gpus=8))
    memory.put(volcano_group("big", 2))
    for p in gang_pods("big", 2, gpus=8):
        memory.put(p)
    loop = make_loop(memory, clock, event_interval_s=60)

    def failed() -> list[dict]:
        return [e for e in memory.objects(EVENTS) if e["reason"] == "FailedScheduling"]

    for _ in range(5):  # 5 cycles within a minute: one Event per pod
        loop.cycle()
        clock.advance(10)
    assert sorted(e["regarding"]["name"] for e in failed()) == ["big-0", "big-1"]
    assert all(e["type"] == "Warning" and e["note"].startswith("gang ml/big: ") for e in failed())
    clock.advance(20)
    loop.cycle()  # a minute later: posted again
    assert len(failed()) == 4
    assert loop.recorder.suppressed == 8


def test_kueue_admits_then_gangplan_places(memory: InMemoryApi, clock: FakeClock) -> None:
    """Kueue's pod integration gates the pods with kueue.x-k8s.io/admission until the
    workload fits its ClusterQueue's quota; the pod template carries gangplan's gate too.
    gangplan places only pods whose last gate is its own, charged to the ClusterQueue."""
    for i in range(2):
        memory.put(node(f"n{i}", gpus=8))
    memory.put(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100"},
            "spec": {},
        }
    )
    memory.put(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "research"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "h100",
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "16"}],
                            }
                        ],
                    }
                ]
            },
        }
    )
    memory.put(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "team", "namespace": "ml"},
            "spec": {"clusterQueue": "research"},
        }
    )
    labels = {"kueue.x-k8s.io/queue-name": "team", "kueue.x-k8s.io/pod-group-name": "job"}
    ann = {"kueue.x-k8s.io/pod-group-total-count": "2"}
    for i in range(2):
        p = pod(f"job-{i}", gpus=8, labels=labels, annotations=ann)
        p["spec"]["schedulingGates"] = [{"name": KUEUE_GATE}, {"name": GATE}]
        memory.put(p)
    loop = make_loop(memory, clock, queue_source="kueue")
    first = loop.cycle()
    assert first.gangs == 0 and first.admitted == []  # not admitted by Kueue yet
    for p in memory.objects(PODS):  # Kueue admits: it removes its own gate
        p["spec"]["schedulingGates"] = [{"name": GATE}]
        memory.put(p)
    clock.advance(2)
    second = loop.cycle()
    assert second.admitted == ["ml/job"]
    assert loop.last_built is not None
    assert [g.queue for g in loop.last_built.snapshot.gangs] == ["research"]
    pinned = sorted(
        p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in memory.objects(PODS)
    )
    assert pinned == ["n0", "n1"]


def test_metrics_health_and_readiness_endpoints(memory: InMemoryApi, clock: FakeClock) -> None:
    memory.put(node("n0", gpus=8))
    memory.put(volcano_group("g", 1))
    memory.put(pod("g-0", gpus=2, group="g"))
    loop = make_loop(memory, clock)
    server = start_http(loop, 0, host="127.0.0.1")
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{base}/readyz")
        assert err.value.code == 503  # not listed yet
        loop.cycle()
        assert urllib.request.urlopen(f"{base}/readyz").read() == b"ok"
        assert urllib.request.urlopen(f"{base}/healthz").read() == b"ok"
        text = urllib.request.urlopen(f"{base}/metrics").read().decode()
    finally:
        server.shutdown()
    assert 'gangplan_schedule_attempts_total{result="scheduled"} 1.0' in text
    assert "gangplan_binds_total 1.0" in text
    assert "gangplan_gangs_in_flight 1.0" in text
    # 8 GPUs, 2 placed this cycle: 6 left for the queue (no max)
    assert 'gangplan_queue_placeable_gpus{queue="default"} 6.0' in text
    assert "gangplan_cycle_duration_seconds_count 1.0" in text


def test_placeable_gpus_stop_at_the_queue_s_fair_target(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    """One node of 8 GPUs; queues qa and qb of weight 1. qa's gang a (1 x 2 GPUs) is
    admitted; qb's gang b (1 x 16 GPUs) fits nowhere but is qb's demand.

    qa, asking for more: qb demands 16 of 8 GPUs, so equal weights fill both to 50% = 4
    GPUs; qa holds 2 after the plan, so 2 more are placeable (6 are free).
    qb, asking for more: qa demands 2 GPUs = 25% and stops there, qb fills to 75% = 6
    GPUs; it holds none, and 6 are free: 6."""
    memory.put(node("n0", gpus=8))
    memory.put(volcano_queue("qa"))
    memory.put(volcano_queue("qb"))
    memory.put(volcano_group("a", 1, queue="qa"))
    memory.put(pod("a-0", gpus=2, group="a"))
    memory.put(volcano_group("b", 1, queue="qb"))
    memory.put(pod("b-0", gpus=16, group="b"))
    loop = make_loop(memory, clock)
    report = loop.cycle()
    assert report.admitted == ["ml/a"]
    text = generate_latest(loop.metrics.registry).decode()
    assert 'gangplan_queue_placeable_gpus{queue="qa"} 2.0' in text
    assert 'gangplan_queue_placeable_gpus{queue="qb"} 6.0' in text
