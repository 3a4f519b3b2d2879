"""Issue 26, findings 1-3: what a tenant writes is a claim, a pinned pod holds its room, and
a failure is named. Each test drives the loop against the in-memory API (the CLI's exit
codes are in ``test_cli_serve.py``, through the loopback stand-in) and works its expected
outcome out by hand from the cluster it builds."""

from __future__ import annotations

import json

import pytest
from kubesim import Controller, Kubelet, Scheduler, final_check
from objects import gang_pods, node, pod, volcano_group

from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.loop import ServeLoop
from gangplan.adapters.serve.memory import Fault, InMemoryApi
from gangplan.solver.result import SolverConfig

PODS = KINDS["pods"]
ANN = "gangplan.io/plan"
SOLVER = SolverConfig(deterministic=True, deterministic_time=1.0)


def make_loop(api: InMemoryApi, clock: FakeClock, **cfg: object) -> ServeLoop:
    return ServeLoop(api, ServeConfig(**cfg), clock=clock, solver=SOLVER, emit=lambda _: None)


def bind_gang(api: InMemoryApi, name: str, n: int, gpus: int, ns: str = "ml") -> None:
    api.put(volcano_group(name, n, ns=ns))
    for p in gang_pods(name, n, gpus=gpus, ns=ns, gated=False, scheduler="gangplan"):
        api.put(p)


def pods_of(api: InMemoryApi) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in api.objects(PODS)}


# ---------------------------------------------------------------- finding 3: failures named


def test_a_binding_answered_404_for_a_pod_that_exists_is_a_refusal_not_a_gone_pod(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # 2 nodes of 8 GPUs, one gang of two 8-GPU pods: g-0 and g-1, one per node. The Binding
    # of g-1 is answered 404 (a proxy, an authorizer) while g-1 exists. Before: read as
    # "pod is gone", the gang taken back and g-0 evicted. Now: a named failure; the gang
    # stays in flight and g-1 is bound the next cycle; nothing evicted, each pod bound once.
    memory.put(node("n0"))
    memory.put(node("n1"))
    bind_gang(memory, "g", 2, 8)
    memory.faults.add(Fault("bind", 404, name="g-1", message="the server could not find it"))
    loop = make_loop(memory, clock, mode="bind")
    first = loop.cycle()
    assert first.taken_back == []
    assert first.applied == 1 and first.failures == 1
    assert len(first.failed) == 1
    assert first.failed[0].startswith("ml/g: g-1: 404 NotFound: refused (")
    assert "yet GET finds the pod" in first.failed[0]
    assert "ml/g" in loop.ledger.gangs
    clock.advance(2.0)
    second = loop.cycle()
    assert second.applied == 1 and second.failures == 0 and second.taken_back == []
    pods = pods_of(memory)
    assert sorted(p["spec"]["nodeName"] for p in pods.values()) == ["n0", "n1"]
    assert sorted(memory.bindings.values()) == [1, 1]
    assert not [c for c in memory.calls if c.verb == "evict"]


def test_a_binding_answered_404_for_a_pod_that_is_gone_takes_the_gang_back(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # the same gang; g-1 is deleted between the snapshot and its Binding (the 404 is
    # true): GET answers 404 too, so the gang is broken and taken back whole (g-0 evicted).
    memory.put(node("n0"))
    memory.put(node("n1"))
    bind_gang(memory, "g", 2, 8)
    real = memory.bind

    def bind(namespace: str, pod: str, node: str, *, uid: str | None = None) -> None:
        if pod == "g-1":
            memory.remove(PODS, namespace, pod)
        real(namespace, pod, node, uid=uid)

    memory.bind = bind  # type: ignore[method-assign]
    loop = make_loop(memory, clock, mode="bind")
    report = loop.cycle()
    assert [t.split(":")[0] for t in report.taken_back] == ["ml/g"]
    assert "pod ml/g-1 is gone" in report.taken_back[0]
    clock.advance(2.0)
    loop.cycle()  # the cache now shows g-0 bound: it is evicted (the in-memory API deletes)
    assert "g-0" not in pods_of(memory)


def test_a_take_back_clears_the_annotations_the_cache_does_not_show_yet(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # mode bind, one gang of one 8-GPU pod; its annotation patch is sent, its Binding
    # answered 500. The cache lags (a threaded informer that has not delivered the patch):
    # the gang times out and is taken back while the cache still shows g-0 unannotated.
    # Before: the take-back cleared only the annotations the cache showed, so g-0 kept a
    # plan nobody holds. Now the patch's own resourceVersion is the precondition of the
    # patch that clears it.
    memory.put(node("n0"))
    bind_gang(memory, "g", 1, 8)
    memory.faults.add(Fault("bind", 500))
    loop = make_loop(memory, clock, mode="bind", bind_timeout_s=10)
    first = loop.cycle()
    assert first.failures == 1 and ANN in pods_of(memory)["g-0"]["metadata"]["annotations"]
    loop.threaded = True  # from here the cache is not pumped: it shows g-0 as it was
    clock.advance(20.0)
    second = loop.cycle()
    assert [t.split(":")[0] for t in second.taken_back] == ["ml/g"]
    assert second.failures == 0, second.failed
    assert ANN not in (pods_of(memory)["g-0"]["metadata"].get("annotations") or {})
    assert "ml/g" not in loop.ledger.gangs


def test_failures_of_a_take_back_are_named(memory: InMemoryApi, clock: FakeClock) -> None:
    # mode gate, one gang of one pod ungated and pinned, then deleted by nobody but timed
    # out; the delete of the take-back answers 500: the report names it
    memory.put(node("n0"))
    memory.put(volcano_group("g", 1))
    for p in gang_pods("g", 1, gpus=8):
        memory.put(p)
    loop = make_loop(memory, clock, bind_timeout_s=10)
    assert loop.cycle().admitted == ["ml/g"]
    memory.faults.add(Fault("delete", 500, kind="pods"))
    clock.advance(20.0)
    report = loop.cycle()
    assert report.failures == 1
    assert report.failed == ["ml/g: g-0: taking back: 500 InternalError: injected"]


# ---------------------------------------------------------------- finding 2: a pinned pod


class SlowScheduler(Scheduler):
    """kube-scheduler that binds an ungated, pinned pod ``delay_s`` after it first saw it
    so (by UID): a scheduler under load, or one waiting on a volume."""

    def __init__(self, api: InMemoryApi, clock: FakeClock, delay_s: float):
        super().__init__(api)
        self.clock, self.delay_s = clock, delay_s
        self.seen: dict[str, float] = {}

    def step(self) -> int:
        now = self.clock.now()
        n = 0
        for p in self.api.objects(PODS):
            spec, uid = p["spec"], p["metadata"]["uid"]
            if spec.get("nodeName") or spec.get("schedulingGates"):
                continue
            host = (spec.get("nodeSelector") or {}).get("kubernetes.io/hostname")
            if host is None:
                continue
            first = self.seen.setdefault(uid, now)
            if now - first >= self.delay_s:
                self.api.bind(p["metadata"]["namespace"], p["metadata"]["name"], host, uid=uid)
                n += 1
        return n


def holding(api: InMemoryApi) -> list[tuple[str, str, int, tuple[str, ...]]]:
    """Every live pod that holds GPUs on a node: bound, or ungated and pinned (name, node,
    GPUs, the device ids gangplan gave it)."""
    out = []
    for p in api.objects(PODS):
        spec = p["spec"]
        if p["status"].get("phase") in ("Succeeded", "Failed") or spec.get("schedulingGates"):
            continue
        where = spec.get("nodeName") or (spec.get("nodeSelector") or {}).get(
            "kubernetes.io/hostname"
        )
        if not where:
            continue
        c = spec["containers"][0]["resources"]
        gpus = int((c.get("limits") or {}).get("nvidia.com/gpu", 0))
        ann = (p["metadata"].get("annotations") or {}).get(
            "scheduling.koordinator.sh/device-allocated"
        )
        ids = tuple(a["id"] for a in json.loads(ann).get("gpu") or []) if ann else ()
        out.append((p["metadata"]["name"], where, gpus, ids))
    return out


def double_booked(api: InMemoryApi, capacity: int = 8) -> list[str]:
    """Nodes holding more GPUs than they have, and GPU ids held by two pods."""
    per_node: dict[str, int] = {}
    owner: dict[tuple[str, str], str] = {}
    problems = []
    for name, where, gpus, ids in holding(api):
        per_node[where] = per_node.get(where, 0) + gpus
        for d in ids:
            if (where, d) in owner:
                problems.append(f"{where}/{d}: {owner[(where, d)]} and {name}")
            owner[(where, d)] = name
    problems += [f"{n}: {g} GPUs held" for n, g in per_node.items() if g > capacity]
    return problems


def test_a_slow_scheduler_never_double_books_a_pinned_node(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # 2 nodes of 8 GPUs; three gangs a, b, c of two 8-GPU pods, each filling the cluster.
    # kube-scheduler binds 120 s after the ungate (assume_ttl_s 30, bind_timeout_s 300).
    # By hand: a pinned at 0, bound at 120, runs 60 s; then b or c (a tie), then the other.
    # Before: a's pinned pods stopped counting at 30 s and b was pinned onto the same nodes
    # (16 GPUs pinned on 8-GPU nodes), then the kubelet refused one of the two (OutOfgpu).
    for i in range(2):
        memory.put(node(f"n{i}"))
    ctl = Controller(memory)
    for g in ("a", "b", "c"):
        ctl.add(g, 2, gpus=8)
    sched, kubelet = SlowScheduler(memory, clock, 120.0), Kubelet(memory, clock, duration=60)
    loop = make_loop(memory, clock)
    admitted: list[str] = []
    for _ in range(80):
        report = loop.cycle()
        admitted += report.admitted
        assert report.taken_back == [], report.taken_back
        assert double_booked(memory) == [], f"t={clock.now() - 1.8e9:g}"
        sched.step()
        kubelet.step()
        assert double_booked(memory) == []
        ctl.step()
        clock.advance(10.0)
        if len(ctl.finished) == 3:
            break
    assert admitted[0] == "ml/a" and sorted(admitted) == ["ml/a", "ml/b", "ml/c"]  # one at a time
    assert ctl.finished == [k.split("/")[1] for k in admitted]
    assert kubelet.rejected == []
    assert sorted(memory.bindings.values()) == [1] * 6
    assert loop.metrics.expired._value.get() == 6  # each pod waited past assume_ttl_s


def test_a_gang_taken_back_while_the_scheduler_is_slow_was_never_partly_bound(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # the same cluster, one gang of two 8-GPU pods, kube-scheduler at 120 s and
    # bind_timeout_s 90: the watchdog takes the gang back before either pod is bound (it
    # deletes both; the controller recreates them gated) — at no take-back is one of its
    # pods bound and the other not, and no pod is ever bound.
    for i in range(2):
        memory.put(node(f"n{i}"))
    ctl = Controller(memory)
    ctl.add("g", 2, gpus=8)
    sched, kubelet = SlowScheduler(memory, clock, 120.0), Kubelet(memory, clock, duration=60)
    loop = make_loop(memory, clock, bind_timeout_s=90, backoff_initial_s=10)
    backs = 0
    for _ in range(40):
        report = loop.cycle()
        if report.taken_back:
            backs += 1
            bound = [p for p in memory.objects(PODS) if p["spec"].get("nodeName")]
            assert bound == []
        assert double_booked(memory) == []
        sched.step()
        kubelet.step()
        ctl.step()
        clock.advance(10.0)
    assert backs >= 2  # at ~100 s, and again after the back-off and a new 90 s
    assert memory.bindings == {} or set(memory.bindings.values()) == {0}
    assert final_check(memory) == []


# ---------------------------------------------------------------- finding 1: claims, not facts


GPUS8 = [f"gpu-{i}" for i in range(8)]  # the device ids of an 8-GPU node without a layout


def forged(gang: str, pods: dict[str, list], at: float = 1.0) -> dict[str, str]:
    return {ANN: json.dumps({"gang": gang, "at": at, "pods": pods})}


def writes(api: InMemoryApi, ns: str) -> list[tuple[str, str | None]]:
    """Every write to namespace ``ns`` but Events: (verb, pod)."""
    return [(c.verb, c.name) for c in api.calls if c.namespace == ns and "events" not in c.kind]


def running_gang(api: InMemoryApi, name: str, nodes: list[str], ns: str = "ml", **kw) -> None:
    api.put(volcano_group(name, len(nodes), ns=ns))
    for i, n in enumerate(nodes):
        api.put(pod(f"{name}-{i}", ns=ns, gpus=8, group=name, gated=False, node_name=n, **kw))


@pytest.mark.parametrize("mode", ["gate", "bind"])
def test_a_pod_of_another_namespace_cannot_take_a_gang_back(
    memory: InMemoryApi, clock: FakeClock, mode: str
) -> None:
    # ml/train runs on n0 and n1 (8 GPUs each); a pod of namespace dev claims ml/train with
    # its pods on the other node each, its `at` a year ahead. Before: after a restart the
    # ledger believed it, found train-0 "bound to n0, not n1" and took ml/train back
    # (deleted in gate mode, evicted in bind mode). Now the claim is ignored with a note,
    # and nothing of ml is written.
    for i in range(3):
        memory.put(node(f"n{i}"))
    running_gang(memory, "train", ["n0", "n1"])
    claim = {"train-0": ["n1", [], [], None], "train-1": ["n0", [], [], None]}
    memory.put(
        pod("x-0", ns="dev", gpus=0, gated=False, annotations=forged("ml/train", claim, 2e9))
    )
    loop = make_loop(memory, clock, mode=mode)
    for _ in range(3):
        report = loop.cycle()
        assert report.taken_back == []
        clock.advance(2.0)
    assert "ml/train" not in loop.ledger.gangs
    assert writes(memory, "ml") == []
    first = make_loop(memory, clock, mode=mode).cycle()  # a restart reads the claim again
    assert any(
        n == "pod dev/x-0: annotation gangplan.io/plan ignored: it names gang ml/train of "
        "another namespace"
        for n in first.notes
    ), first.notes


def test_a_pod_that_is_no_member_of_the_gang_it_names_cannot_take_it_back(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # the same forgery from inside namespace ml: a bare pod (no group) on n2 whose
    # annotation names ml/train and places itself. It is no member of train by the PodGroup
    # and its own annotations, so the recovered flight is dropped with an Event, and
    # train is left alone. Before: ml/train was recovered from it and taken back.
    for i in range(3):
        memory.put(node(f"n{i}"))
    running_gang(memory, "train", ["n0", "n1"])
    claim = {"spy": ["n2", [], [], None], "train-0": ["n1", [], [], None]}
    memory.put(pod("spy", gpus=0, gated=False, annotations=forged("ml/train", claim)))
    loop = make_loop(memory, clock, mode="bind")
    report = loop.cycle()
    assert report.taken_back == [] and "ml/train" not in loop.ledger.gangs
    dropped = [n for n in report.notes if n.startswith("recovered plan of gang ml/train dropped")]
    assert dropped == [
        "recovered plan of gang ml/train dropped: gang ml/train is not one gangplan plans "
        "now (no pending pods of it in a namespace it serves, or its group is incomplete)"
    ]
    assert writes(memory, "ml") == []
    events = [
        e for e in memory.objects(KINDS["events.events.k8s.io"]) if e["reason"] != "Scheduled"
    ]
    assert [(e["regarding"]["name"], e["reason"]) for e in events] == [
        ("spy", "RecoveredPlanRefused")
    ]


def test_a_forged_claim_never_binds_a_pod_onto_a_node_it_does_not_tolerate(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # mode bind; n0 tainted dedicated=infra:NoSchedule, n1..n4 free (8 GPUs each); gang
    # ml/big of four 8-GPU pods pending, no toleration. big-0's own annotation (written by
    # the tenant) places it on n0. Before: recovered and continued, big-0 bound onto n0.
    # Now the verifier refuses the flight (1 of 4 placed, and n0's taint): dropped with an
    # Event; the next cycle plans big whole on n1..n4.
    taint = {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}
    memory.put(node("n0", spec=taint))
    for i in range(1, 5):
        memory.put(node(f"n{i}"))
    memory.put(volcano_group("big", 4))
    for p in gang_pods("big", 4, gpus=8, gated=False, scheduler="gangplan"):
        if p["metadata"]["name"] == "big-0":
            p["metadata"]["annotations"].update(
                forged("ml/big", {"big-0": ["n0", GPUS8, [], None]})
            )
        memory.put(p)
    loop = make_loop(memory, clock, mode="bind")
    report = loop.cycle()
    (dropped,) = [n for n in report.notes if n.startswith("recovered plan of gang ml/big")]
    assert dropped.startswith(
        "recovered plan of gang ml/big dropped: the verifier refuses it on the cluster now:"
    )
    assert report.admitted == ["ml/big"]
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in memory.objects(PODS)}
    assert sorted(nodes.values()) == ["n1", "n2", "n3", "n4"]
    assert sorted(memory.bindings.values()) == [1, 1, 1, 1]


def test_a_recovered_at_in_the_future_is_read_as_now(memory: InMemoryApi, clock: FakeClock) -> None:
    # gate mode, one pod ungated and pinned to n0 by a plan whose `at` is 10^9 s ahead;
    # kube-scheduler never binds it. Before: now - at < 0 forever, never taken back. Now at
    # is clamped to the recovery's now, and bind_timeout_s (60) takes the gang back.
    memory.put(node("n0"))
    memory.put(volcano_group("g", 1))
    (p,) = gang_pods("g", 1, gpus=8, gated=False)
    p["metadata"]["annotations"].update(
        forged("ml/g", {"g-0": ["n0", GPUS8, [], None]}, at=clock.now() + 1e9)
    )
    p["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n0"}
    memory.put(p)
    loop = make_loop(memory, clock, bind_timeout_s=60)
    first = loop.cycle()
    assert "recovered ml/g: 1 pods applied" in first.notes
    assert loop.ledger.gangs["ml/g"].started == clock.now()
    clock.advance(61.0)
    assert [t.split(":")[0] for t in loop.cycle().taken_back] == ["ml/g"]


def test_a_recovered_flight_of_a_namespace_not_served_is_dropped(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # namespaces: [ml]; a pod of dev carries a plan of its own gang dev/g (ungated, pinned,
    # unbound). Before: recovered and continued (taken back later) though serve plans
    # only ml. Now dropped: its gang is none serve plans.
    memory.put(node("n0"))
    memory.put(volcano_group("g", 1, ns="dev"))
    (p,) = gang_pods("g", 1, gpus=8, ns="dev", gated=False)
    p["metadata"]["annotations"].update(forged("dev/g", {"g-0": ["n0", GPUS8, [], None]}))
    p["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n0"}
    memory.put(p)
    loop = make_loop(memory, clock, namespaces=["ml"], bind_timeout_s=10)
    report = loop.cycle()
    assert loop.ledger.gangs == {}
    assert any(n.startswith("recovered plan of gang dev/g dropped") for n in report.notes)
    clock.advance(20.0)
    assert loop.cycle().taken_back == []
    assert writes(memory, "dev") == []


# ---------------------------------------------------------------- two tenants, one hostile


def _ml(api: InMemoryApi) -> None:
    for i in range(4):
        api.put(node(f"n{i}"))
    for name, n, gpus in (("a", 2, 8), ("b", 4, 2), ("c", 3, 8)):
        api.put(volcano_group(name, n))
        for p in gang_pods(name, n, gpus=gpus):
            api.put(p)


def _hostile(api: InMemoryApi, pods: int) -> None:
    """Namespace dev: forged plans naming ml's gangs, an annotation near the 256 KiB cap,
    malformed PodGroups and their gated pods, and ``pods`` plain pending pods."""
    claim = {"a-0": ["n3", GPUS8, [], None], "a-1": ["n3", GPUS8, [], None]}
    api.put(pod("f-0", ns="dev", gpus=0, gated=False, annotations=forged("ml/a", claim, 2e9)))
    api.put(
        pod("f-1", ns="dev", gpus=0, annotations=forged("ml/c", {"f-1": ["n0", GPUS8, [], None]}))
    )
    api.put(pod("huge", ns="dev", gpus=0, gated=False, annotations={"x": "y" * 250_000}))
    for name, spec in (("m0", {"minMember": "many"}), ("m1", {"minMember": -3}), ("m2", [])):
        api.put(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "dev"},
                "spec": spec,
            }
        )
        api.put(pod(f"{name}-0", ns="dev", gpus=8, group=name))
    for i in range(pods):
        api.put(pod(f"p{i}", ns="dev", gpus=1, gated=False))


def _ml_outcome(api: InMemoryApi, clock: FakeClock) -> tuple[list[str], dict, list]:
    loop = make_loop(api, clock)
    admitted = []
    for _ in range(2):
        admitted += [k for k in loop.cycle().admitted if k.startswith("ml/")]
        clock.advance(2.0)
    pins = {
        p["metadata"]["name"]: (p["spec"].get("nodeSelector"), p["spec"].get("schedulingGates"))
        for p in api.objects(PODS)
        if p["metadata"]["namespace"] == "ml"
    }
    ml_writes = [(c.verb, c.name) for c in api.calls if c.namespace == "ml" and c.kind == "pods"]
    return sorted(admitted), pins, sorted(ml_writes)


def test_a_hostile_namespace_changes_nothing_of_another() -> None:
    # the same ml cluster, alone and beside a hostile dev: ml's gangs get the same
    # outcome, the same pins and the same writes (none more), and a restart of serve (the
    # forged plans read again) takes nothing of ml back. By hand for ml alone: 4 nodes of 8
    # GPUs; a (2x8) and c (3x8) need 40 GPUs of 32, so a and b (4x2) or c and b: two gangs.
    clock_a, clock_b = FakeClock(), FakeClock()
    alone, beside = InMemoryApi(clock_a), InMemoryApi(clock_b)
    _ml(alone)
    _ml(beside)
    _hostile(beside, 20_000)  # about 6 s on a shared 2-core machine
    expected = _ml_outcome(alone, clock_a)
    assert len(expected[0]) == 2 and "ml/b" in expected[0]
    assert _ml_outcome(beside, clock_b) == expected
    restarted = make_loop(beside, clock_b)
    report = restarted.cycle()
    assert report.taken_back == []
    assert any("dev/f-0: annotation gangplan.io/plan ignored" in n for n in report.notes)
    assert not [c for c in beside.calls if c.namespace == "ml" and c.verb in ("delete", "evict")]
