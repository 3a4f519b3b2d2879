"""Fault tests of the loop: each fault of the issue, injected into the in-memory API or the
simulated cluster; each test ends with :func:`kubesim.final_check` on the final cluster
state (no pod bound twice; the independent verifier on where every pod is bound: every
node holds what is bound to it, every gang is whole or has no pod bound) and checks that
every gang finished."""

from __future__ import annotations

import itertools

import pytest
from kubesim import Controller, Kubelet, Scheduler, final_check
from objects import node

from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import LeaderElection, ServeConfig
from gangplan.adapters.serve.leader import LeaseElector
from gangplan.adapters.serve.loop import ServeLoop
from gangplan.adapters.serve.memory import Fault, InMemoryApi
from gangplan.solver.result import SolverConfig

PODS, NODES = KINDS["pods"], KINDS["nodes"]
SOLVER = SolverConfig(deterministic=True, deterministic_time=1.0)


def make_loop(api: InMemoryApi, clock: FakeClock, **cfg: object) -> ServeLoop:
    return ServeLoop(api, ServeConfig(**cfg), clock=clock, solver=SOLVER, emit=lambda _: None)


def cluster(api: InMemoryApi, nodes: int = 2, gpus: int = 8) -> None:
    for i in range(nodes):
        api.put(node(f"n{i}", gpus=gpus))


def taken_back(loop: ServeLoop, reports: list) -> list[str]:
    return [t for r in reports for t in r.taken_back]


def run(loop, sched, kubelet, ctl, clock, cycles):  # type: ignore[no-untyped-def]
    reports = []
    for _ in range(cycles):
        reports.append(loop.cycle())
        if sched is not None:
            sched.step()
        kubelet.step()
        ctl.step()
        clock.advance(2.0)
    return reports


def test_a_bind_fails_halfway_through_a_gang(memory: InMemoryApi, clock: FakeClock) -> None:
    cluster(memory)
    ctl = Controller(memory, scheduler="gangplan")
    ctl.add("g", 4, gpus=4)
    memory.faults.add(Fault("bind", 500, skip=2))  # pods 0 and 1 bound, then a 500
    loop = make_loop(memory, clock, mode="bind")
    first = loop.cycle()
    assert first.applied == 2 and first.failures == 1
    assert "ml/g" in loop.ledger.gangs  # held in flight, retried next cycle
    kubelet = Kubelet(memory, clock, duration=10)
    run(loop, None, kubelet, ctl, clock, 10)
    assert ctl.finished == ["g"]
    assert sum(memory.bindings.values()) == 4
    assert final_check(memory) == []


def test_killed_between_two_binds_and_restarted(memory: InMemoryApi, clock: FakeClock) -> None:
    cluster(memory)
    ctl = Controller(memory, scheduler="gangplan")
    ctl.add("g", 4, gpus=4)
    memory.faults.add(Fault("bind", 0, skip=1))  # the connection dies on the second bind
    first = make_loop(memory, clock, mode="bind")
    first.cycle()
    bound = [p for p in memory.objects(PODS) if p["spec"].get("nodeName")]
    assert len(bound) == 1
    # the process dies here; a new one starts with nothing in memory
    second = make_loop(memory, clock, mode="bind")
    report = second.cycle()
    assert report.notes and report.notes[0].startswith("recovered ml/g")
    kubelet = Kubelet(memory, clock, duration=10)
    run(second, None, kubelet, ctl, clock, 10)
    assert ctl.finished == ["g"]
    # the recovered plan was finished, not re-planned: the first pod stayed where it was
    assert sorted(memory.bindings.values()) == [1, 1, 1, 1]
    assert final_check(memory) == []


def test_the_leader_dies_and_the_other_replica_takes_over(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    cluster(memory)
    ctl = Controller(memory)
    ctl.add("g", 4, gpus=4)
    le = LeaderElection()

    def replica(name: str) -> ServeLoop:
        elector = LeaseElector(
            memory,
            clock,
            name,
            namespace=le.namespace,
            name=le.name,
            lease_duration_s=le.lease_duration_s,
            renew_deadline_s=le.renew_deadline_s,
            retry_period_s=le.retry_period_s,
        )
        return ServeLoop(
            memory, ServeConfig(), clock=clock, solver=SOLVER, elector=elector, emit=lambda _: None
        )

    a, b = replica("a"), replica("b")
    memory.faults.add(Fault("patch", 0, skip=2))  # a ungates two pods, then loses the API
    ra = a.cycle()
    rb = b.cycle()
    assert (ra.leader, rb.leader) == (True, False) and ra.applied == 2
    writes_before = len(memory.calls)
    # a dies; b keeps cycling but must not write before a's Lease has expired
    sched, kubelet = Scheduler(memory), Kubelet(memory, clock, duration=20)
    followers = []
    for _ in range(3):
        clock.advance(2.0)
        followers.append(b.cycle().leader)
    assert followers == [False, False, False]
    assert all(c.kind.startswith("leases") for c in list(memory.calls)[writes_before:])
    reports = run(b, sched, kubelet, ctl, clock, 25)
    assert reports[-1].leader
    assert any(n.startswith("recovered ml/g: 2 pods applied") for r in reports for n in r.notes)
    assert ctl.finished == ["g"]
    lease = memory.get(KINDS["leases.coordination.k8s.io"], le.namespace, le.name)
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    assert final_check(memory) == []


def test_a_node_disappears_mid_cycle(memory: InMemoryApi, clock: FakeClock) -> None:
    cluster(memory, nodes=3)
    ctl = Controller(memory)
    ctl.add("g", 2, gpus=8)
    loop = make_loop(memory, clock)
    loop.cycle()
    pinned = {
        p["spec"]["nodeSelector"]["kubernetes.io/hostname"]
        for p in memory.objects(PODS)
        if p["spec"].get("nodeSelector")
    }
    assert len(pinned) == 2
    gone = sorted(pinned)[0]
    memory.remove(NODES, "", gone)  # before kube-scheduler binds
    sched, kubelet = Scheduler(memory), Kubelet(memory, clock, duration=10)
    reports = run(loop, sched, kubelet, ctl, clock, 14)
    assert any(f"node {gone} is gone" in t for t in taken_back(loop, reports))
    assert ctl.finished == ["g"]
    assert final_check(memory) == []


def test_the_watch_drops_and_resumes(memory: InMemoryApi, clock: FakeClock) -> None:
    cluster(memory)
    ctl = Controller(memory)
    ctl.add("g", 2, gpus=8)
    memory.faults.add(Fault("watch", 0, kind="pods", times=3))
    loop = make_loop(memory, clock)
    sched, kubelet = Scheduler(memory), Kubelet(memory, clock, duration=10)
    run(loop, sched, kubelet, ctl, clock, 3)
    memory.compact()  # and once it is back, too late to resume: 410, relist
    run(loop, sched, kubelet, ctl, clock, 8)
    (inf,) = loop.cache.informers["pods"]
    assert inf.stats.errors >= 3 and inf.stats.relists_gone >= 1
    assert ctl.finished == ["g"]
    assert final_check(memory) == []


def test_a_kubelet_rejects_a_pod(memory: InMemoryApi, clock: FakeClock) -> None:
    cluster(memory)
    ctl = Controller(memory)
    ctl.add("g", 4, gpus=4)
    loop = make_loop(memory, clock)
    sched, kubelet = Scheduler(memory), Kubelet(memory, clock, duration=10)
    kubelet.reject.add("g-1")
    reports = run(loop, sched, kubelet, ctl, clock, 20)
    assert kubelet.rejected == ["g-1"]
    assert any("UnexpectedAdmissionError" in t for t in taken_back(loop, reports))
    reasons = {e["reason"] for e in memory.objects(KINDS["events.events.k8s.io"])}
    assert "GangTakenBack" in reasons
    assert ctl.finished == ["g"]
    assert final_check(memory) == []


def test_a_pod_the_plan_counted_is_deleted(memory: InMemoryApi, clock: FakeClock) -> None:
    cluster(memory)
    ctl = Controller(memory)
    ctl.add("g", 4, gpus=4)
    memory.faults.add(Fault("patch", 503, skip=2))  # two pods ungated, then a 503
    loop = make_loop(memory, clock)
    loop.cycle()
    memory.remove(PODS, "ml", "g-3")  # deleted before gangplan ungates it
    ctl.step()  # its controller creates it again: another pod, same name
    sched, kubelet = Scheduler(memory), Kubelet(memory, clock, duration=10)
    reports = run(loop, sched, kubelet, ctl, clock, 16)
    assert any("g-3 was recreated" in t for t in taken_back(loop, reports))
    assert ctl.finished == ["g"]
    assert final_check(memory) == []


@pytest.mark.parametrize("status", [409, 429, 500])
def test_the_api_answers(memory: InMemoryApi, clock: FakeClock, status: int) -> None:
    cluster(memory)
    ctl = Controller(memory)
    ctl.add("g", 4, gpus=4)
    memory.faults.add(Fault("patch", status, skip=1, times=2))
    loop = make_loop(memory, clock)
    sched, kubelet = Scheduler(memory), Kubelet(memory, clock, duration=10)
    reports = run(loop, sched, kubelet, ctl, clock, 10)
    assert sum(r.failures for r in reports) == 2
    assert taken_back(loop, reports) == []  # retried, not taken back
    assert ctl.finished == ["g"]
    assert final_check(memory) == []


def test_a_gang_never_bound_is_taken_back_and_backs_off(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    """The watchdog: kube-scheduler never binds (no simulated scheduler here)."""
    cluster(memory)
    ctl = Controller(memory)
    ctl.add("g", 2, gpus=8)
    loop = make_loop(memory, clock, bind_timeout_s=20, backoff_initial_s=10, backoff_max_s=40)
    kubelet = Kubelet(memory, clock)
    reports = run(loop, None, kubelet, ctl, clock, 120)
    backs = [(r.at, t) for r in reports for t in r.taken_back]
    assert len(backs) >= 5 and all("not fully bound within bind_timeout" in t for _, t in backs)
    # between two take-backs: the back-off (10, 20, 40, 40 s: doubling, capped at 40),
    # then bind_timeout; so the gaps grow by 10, then 20, then not at all
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(backs)]
    assert [b - a for a, b in itertools.pairwise(gaps)][:3] == [10, 20, 0]
    assert loop.watchdog.backoff.delay["ml/g"] == 40
    assert ctl.recreated >= 2 * len(backs)  # each take-back deleted both ungated pods
    assert final_check(memory) == []


def test_the_final_check_itself_catches_a_partial_gang_and_an_overfull_node(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    """The verdict of every test above can fail: a gang half bound, a node overfull."""
    cluster(memory, nodes=1, gpus=8)
    ctl = Controller(memory, scheduler="gangplan")
    ctl.add("half", 2, gpus=4)
    memory.bind("ml", "half-0", "n0")
    assert "[gang] gang ml/half: 1 pods placed, below its minimum 2 (all or nothing)" in (
        final_check(memory)
    )
    ctl.add("big", 3, gpus=4)
    memory.bind("ml", "half-1", "n0")
    for i in range(3):
        memory.bind("ml", f"big-{i}", "n0")
    problems = final_check(memory)
    assert any("capacity" in p and "nvidia.com/gpu" in p for p in problems)
