"""The API port's contract, run against both implementations: the in-memory API, and the
official ``kubernetes`` client over HTTP against the loopback stand-in (every request body
checked against the Kubernetes 1.37 schemas; the fixture fails the test on any refusal).

What each case expects is the API server's documented behaviour (API conventions:
optimistic concurrency, watch bookmarks and 410; Pod Scheduling Readiness: gates removed
only, nodeSelector only added to a gated pod; the binding and eviction subresources)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from objects import GATE, node, pod
from standin import StandIn

from gangplan.adapters.serve.api import KINDS, ApiError, KubeApi
from gangplan.adapters.serve.client import OfficialApi, load_client
from gangplan.adapters.serve.memory import InMemoryApi

PODS, NODES, LEASES, EVENTS = (
    KINDS["pods"],
    KINDS["nodes"],
    KINDS["leases.coordination.k8s.io"],
    KINDS["events.events.k8s.io"],
)
VOLCANO_PG = KINDS["podgroups.scheduling.volcano.sh"]


@pytest.fixture(params=["memory", "official-client"])
def api(request: pytest.FixtureRequest, memory: InMemoryApi, tmp_path: Path) -> KubeApi:
    if request.param == "memory":
        return memory
    server: StandIn = request.getfixturevalue("standin")
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(server.kubeconfig())
    return OfficialApi(load_client(str(cfg)))


def test_list_then_watch_from_the_lists_resource_version(api: KubeApi, memory: InMemoryApi) -> None:
    memory.put(node("n1"))
    memory.put(pod("p0", group="g"))
    listing = api.list(PODS)
    assert [p["metadata"]["name"] for p in listing.items] == ["p0"]
    assert listing.items[0]["kind"] == "Pod"
    memory.put(pod("p1", group="g"))
    memory.remove(PODS, "ml", "p0")
    events = list(api.watch(PODS, listing.resource_version, timeout_s=0))
    assert [(e.type, e.object["metadata"]["name"]) for e in events[:-1]] == [
        ("ADDED", "p1"),
        ("DELETED", "p0"),
    ]
    assert events[-1].type == "BOOKMARK"
    assert int(events[-1].resource_version) == memory.resource_version
    # from the bookmark on, nothing new
    assert [e.type for e in api.watch(PODS, events[-1].resource_version, timeout_s=0)] == [
        "BOOKMARK"
    ]


def test_a_watch_from_a_compacted_resource_version_is_gone(
    api: KubeApi, memory: InMemoryApi
) -> None:
    memory.put(pod("p0"))
    rv = api.list(PODS).resource_version
    memory.put(pod("p1"))
    memory.compact()
    with pytest.raises(ApiError) as err:
        list(api.watch(PODS, rv, timeout_s=0))
    assert err.value.status == 410


def test_a_patch_with_a_stale_resource_version_is_a_conflict(
    api: KubeApi, memory: InMemoryApi
) -> None:
    stale = memory.put(pod("p0"))["metadata"]["resourceVersion"]
    memory.put(pod("p0", labels={"touched": "yes"}))
    with pytest.raises(ApiError) as err:
        api.patch(
            PODS, "ml", "p0", {"metadata": {"resourceVersion": stale, "annotations": {"a": "b"}}}
        )
    assert err.value.status == 409
    fresh = api.get(PODS, "ml", "p0")["metadata"]["resourceVersion"]
    out = api.patch(
        PODS, "ml", "p0", {"metadata": {"resourceVersion": fresh, "annotations": {"a": "b"}}}
    )
    assert out["metadata"]["annotations"] == {"a": "b"}


def test_gate_rules_and_the_binding_subresource(api: KubeApi, memory: InMemoryApi) -> None:
    memory.put(node("n1"))
    uid = memory.put(pod("p0", gated=True))["metadata"]["uid"]
    with pytest.raises(ApiError) as err:  # a gated pod cannot be bound
        api.bind("ml", "p0", "n1", uid=uid)
    assert err.value.status == 409
    with pytest.raises(ApiError) as err:  # a gate cannot be added
        api.patch(PODS, "ml", "p0", {"spec": {"schedulingGates": [{"name": GATE}, {"name": "x"}]}})
    assert err.value.status == 422
    # one patch: pin the node and remove the gate (nodeSelector may be added while gated)
    api.patch(
        PODS,
        "ml",
        "p0",
        {"spec": {"nodeSelector": {"kubernetes.io/hostname": "n1"}, "schedulingGates": []}},
    )
    with pytest.raises(ApiError) as err:  # no longer gated: nodeSelector is fixed
        api.patch(PODS, "ml", "p0", {"spec": {"nodeSelector": {"zone": "a"}}})
    assert err.value.status == 422
    with pytest.raises(ApiError) as err:  # another pod's UID
        api.bind("ml", "p0", "n1", uid="not-this-pod")
    assert err.value.status == 409
    api.bind("ml", "p0", "n1", uid=uid)
    assert api.get(PODS, "ml", "p0")["spec"]["nodeName"] == "n1"
    with pytest.raises(ApiError) as err:  # never bound twice
        api.bind("ml", "p0", "n1", uid=uid)
    assert err.value.status == 409
    assert memory.bindings[uid] == 1


def test_eviction_respects_a_disruption_budget(api: KubeApi, memory: InMemoryApi) -> None:
    for i in range(2):
        memory.put(pod(f"w{i}", gated=False, node_name="n1", labels={"app": "train"}))
    memory.put(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "train"}}},
        }
    )
    with pytest.raises(ApiError) as err:
        api.evict("ml", "w0")
    assert err.value.status == 429
    assert len(memory.objects(PODS)) == 2  # nothing evicted
    memory.remove(KINDS["poddisruptionbudgets.policy"], "ml", "train")
    uid = memory.objects(PODS)[0]["metadata"]["uid"]
    api.evict("ml", "w0", uid=uid)
    assert [p["metadata"]["name"] for p in memory.objects(PODS)] == ["w1"]


def test_delete_with_a_uid_precondition(api: KubeApi, memory: InMemoryApi) -> None:
    memory.put(pod("p0"))
    with pytest.raises(ApiError) as err:
        api.delete(PODS, "ml", "p0", uid="an-older-pod")
    assert err.value.status == 409
    uid = api.get(PODS, "ml", "p0")["metadata"]["uid"]
    api.delete(PODS, "ml", "p0", uid=uid)
    with pytest.raises(ApiError) as err:
        api.get(PODS, "ml", "p0")
    assert err.value.status == 404


def test_events_leases_and_status(api: KubeApi, memory: InMemoryApi) -> None:
    memory.put(pod("p0"))
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "p0.1", "namespace": "ml"},
        "eventTime": "2027-01-15T08:00:00.000000Z",
        "reportingController": "gangplan.io/scheduler",
        "reportingInstance": "gangplan-0",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "type": "Warning",
        "note": "needs 8 GPUs",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "ml", "name": "p0"},
    }
    api.create(EVENTS, "ml", event)
    assert [e["reason"] for e in memory.objects(EVENTS)] == ["FailedScheduling"]
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "gangplan", "namespace": "kube-system"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    made = api.create(LEASES, "kube-system", lease)
    with pytest.raises(ApiError) as err:
        api.create(LEASES, "kube-system", lease)
    assert err.value.status == 409
    taken = {**made, "spec": {**made["spec"], "holderIdentity": "b"}}
    api.replace(LEASES, "kube-system", "gangplan", taken)
    with pytest.raises(ApiError) as err:  # made's resourceVersion is stale now
        api.replace(LEASES, "kube-system", "gangplan", made)
    assert err.value.status == 409
    assert api.get(LEASES, "kube-system", "gangplan")["spec"]["holderIdentity"] == "b"
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}
    api.patch(PODS, "ml", "p0", {"status": {"conditions": [cond]}}, status=True)
    assert memory.objects(PODS)[0]["status"]["conditions"] == [cond]
    memory.put({**_volcano_pg(), "status": {}})
    api.patch(
        VOLCANO_PG, "ml", "g", {"status": {"conditions": [{"type": "Unschedulable"}]}}, status=True
    )
    assert memory.objects(VOLCANO_PG)[0]["status"]["conditions"] == [{"type": "Unschedulable"}]


def test_injected_faults_reach_the_caller_with_their_status(
    api: KubeApi, memory: InMemoryApi
) -> None:
    from gangplan.adapters.serve.memory import Fault

    memory.put(node("n1"))
    memory.put(pod("p0", gated=False))
    for status in (409, 429, 500):
        memory.faults.add(Fault("bind", status))
        with pytest.raises(ApiError) as err:
            api.bind("ml", "p0", "n1")
        assert err.value.status == status
    assert memory.bindings == {}
    api.bind("ml", "p0", "n1")


def _volcano_pg() -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"minMember": 1},
    }


def test_the_standin_saw_every_body_kind(
    memory: InMemoryApi, tmp_path: Path, standin: StandIn
) -> None:
    """The official client's requests of the suite above reach the schema checks."""
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(standin.kubeconfig())
    api = OfficialApi(load_client(str(cfg)))
    memory.put(node("n1"))
    uid = memory.put(pod("p0", gated=False))["metadata"]["uid"]
    api.patch(PODS, "ml", "p0", {"metadata": {"annotations": {"a": "b"}}})
    api.bind("ml", "p0", "n1", uid=uid)
    api.evict("ml", "p0", uid=uid)
    memory.put(pod("p1"))
    api.delete(PODS, "ml", "p1", uid=memory.objects(PODS)[0]["metadata"]["uid"])
    assert {"v1/Pod", "v1/Binding", "policy/v1/Eviction"} <= set(standin.validated)
    assert standin.validated["v1/DeleteOptions"] == 1


def test_every_watch_is_bounded_on_a_server_that_holds_watches_open(
    standin: StandIn, memory: InMemoryApi, tmp_path: Path
) -> None:
    # issue 26, finding 11: the cache's pump (apply, apply MOVES, serve --once) watched with
    # timeoutSeconds=0 right after its list; the API server reads 0 as its default (30-60
    # min), as the stand-in now does, so the watch was cut by the client's read timeout: an
    # error on every kind, every pump
    from gangplan.adapters.serve.cache import Cache

    cfg = tmp_path / "kubeconfig"
    cfg.write_text(standin.kubeconfig())
    api = OfficialApi(load_client(str(cfg)), request_timeout_s=2)
    memory.put(node("n1"))
    seen: list[tuple[str, str]] = []
    cache = Cache(api, [NODES, PODS], lambda kind, key, obj: seen.append((kind, key[1])))
    cache.pump()  # the lists
    memory.put(pod("p0", group="g"))
    cache.pump()  # the watches
    cache.pump()
    assert seen == [("nodes", "n1"), ("pods", "p0")]
    assert [inf.stats.errors for inf in cache] == [0, 0]
    assert len(standin.watch_timeouts) == 4
    assert all(t is not None and int(t) >= 1 for t in standin.watch_timeouts)


@pytest.mark.parametrize(
    ("timeout_s", "asked"), [(0.0, 1), (0.2, 1), (1.0, 1), (60.0, 60), (60.5, 61)]
)
def test_a_watch_asks_whole_seconds_never_zero(timeout_s: float, asked: int) -> None:
    from gangplan.adapters.serve.client import watch_seconds

    assert watch_seconds(timeout_s) == asked


@pytest.mark.parametrize("served", [("v1beta1",), ("v1beta2",), ("v1beta1", "v1beta2")])
def test_kueue_kinds_are_listed_at_the_newest_version_served(
    api: KubeApi, memory: InMemoryApi, served: tuple[str, ...]
) -> None:
    """Through discovery: a server serving only v1beta1 of kueue.x-k8s.io is listed at
    v1beta1, one serving v1beta2 (alone or beside v1beta1) at v1beta2; the informer's kind
    says which. A server serving neither leaves the kind unserved (empty, synced)."""
    from gangplan.adapters.serve.cache import Informer

    memory.served["kueue.x-k8s.io"] = served
    cq = KINDS["clusterqueues.kueue.x-k8s.io"]
    memory.create(
        cq,
        None,
        {
            "apiVersion": cq.api_version,
            "kind": "ClusterQueue",
            "metadata": {"name": "team-a"},
            "spec": {},
        },
    )
    inf = Informer(api, cq, lambda *_: None, threading.RLock())
    inf.step()
    want = "v1beta2" if "v1beta2" in served else "v1beta1"
    assert inf.kind.version == want
    assert [o["metadata"]["name"] for o in inf.objects.values()] == ["team-a"]
    memory.served["kueue.x-k8s.io"] = ("v1",)
    gone = Informer(api, cq, lambda *_: None, threading.RLock())
    gone.step()
    assert not gone.served and gone.synced and gone.objects == {}
