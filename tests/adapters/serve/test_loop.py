"""The loop end to end on the in-memory API with a simulated kube-scheduler, kubelets and
job controller, in fake time; every test ends with :func:`kubesim.final_check` (no pod bound
twice, the verifier on where everything is bound)."""

from __future__ import annotations

import json

from kubesim import Controller, Kubelet, Scheduler, final_check, settle
from objects import GATE, node

from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.loop import ServeLoop
from gangplan.adapters.serve.memory import InMemoryApi
from gangplan.solver.result import SolverConfig

PODS = KINDS["pods"]
SOLVER = SolverConfig(deterministic=True, deterministic_time=2.0)


def make_loop(api: InMemoryApi, clock: FakeClock, **cfg: object) -> ServeLoop:
    lines: list[str] = []
    loop = ServeLoop(api, ServeConfig(**cfg), clock=clock, solver=SOLVER, emit=lines.append)
    loop.lines = lines  # type: ignore[attr-defined]
    return loop


def test_gate_mode_pins_and_ungates_a_gang_in_one_patch_per_pod(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    for i in range(2):
        memory.put(node(f"n{i}", gpus=8))
    ctl = Controller(memory)
    ctl.add("train", 4, gpus=4)  # 16 GPUs: both nodes, 2 pods each
    loop = make_loop(memory, clock)
    report = loop.cycle()
    assert report.admitted == ["ml/train"] and report.applied == 4
    patches = [c for c in memory.calls if c.verb == "patch"]
    assert len(patches) == 4
    for c in patches:
        spec = c.body["spec"]
        assert spec["schedulingGates"] == []
        assert spec["nodeSelector"]["kubernetes.io/hostname"] in ("n0", "n1")
        assert c.body["metadata"]["resourceVersion"]  # guarded
        plan = json.loads(c.body["metadata"]["annotations"]["gangplan.io/plan"])
        assert sorted(plan["pods"]) == [f"train-{i}" for i in range(4)]
    hosts = [c.body["spec"]["nodeSelector"]["kubernetes.io/hostname"] for c in patches]
    assert sorted(hosts) == ["n0", "n0", "n1", "n1"]
    assert [c for c in memory.calls if c.verb == "bind"] == []  # kube-scheduler binds
    sched, kubelet = Scheduler(memory), Kubelet(memory, clock)
    settle(loop, sched, kubelet, ctl, clock, 3)
    assert loop.last is not None and loop.ledger.gangs == {}
    done = [g for line in loop.lines for g in json.loads(line)["done"]]  # type: ignore[attr-defined]
    assert done == ["ml/train"]
    assert final_check(memory) == []


def test_bind_mode_binds_each_pod_once(memory: InMemoryApi, clock: FakeClock) -> None:
    for i in range(2):
        memory.put(node(f"n{i}", gpus=8))
    ctl = Controller(memory, scheduler="gangplan")
    ctl.add("a", 2, gpus=8)
    ctl.add("b", 2, gpus=8)  # only one of the two fits
    loop = make_loop(memory, clock, mode="bind")
    kubelet = Kubelet(memory, clock, duration=10)
    settle(loop, None, kubelet, ctl, clock, 12)
    binds = [c for c in memory.calls if c.verb == "bind"]
    assert len(binds) == 4  # a's two pods, then b's after a finished
    assert sorted(ctl.finished) == ["a", "b"]
    assert final_check(memory) == []
    events = [e for e in memory.objects(KINDS["events.events.k8s.io"])]
    reasons = {e["reason"] for e in events}
    assert {"Scheduled", "FailedScheduling"} <= reasons
    # bind mode: the pending gang's pods said so in PodScheduled while waiting
    said = [
        c
        for c in memory.calls
        if c.verb == "status"
        and c.kind == "pods"
        and c.body["status"]["conditions"][-1]["reason"] == "Unschedulable"
    ]
    assert said


def test_dry_run_sends_nothing(memory: InMemoryApi, clock: FakeClock) -> None:
    memory.put(node("n0", gpus=8))
    Controller(memory).add("g", 2, gpus=2)
    loop = make_loop(memory, clock, dry_run=True)
    report = loop.cycle()
    assert report.admitted == ["ml/g"]
    assert [c for c in memory.calls if c.verb != "create"] == []
    assert [r["patch"]["spec"]["schedulingGates"] for r in loop.applier.requests] == [[], []]
    assert all(p["spec"].get("schedulingGates") == [{"name": GATE}] for p in memory.objects(PODS))


def test_a_cycle_comes_sooner_when_a_waiting_gang_gets_its_pods(memory: InMemoryApi) -> None:
    """period 10 s; the gang's last pod arrives 1 s into the wait: the next cycle starts then."""
    from objects import pod, volcano_group

    class ArrivingClock(FakeClock):
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            if not memory.objects(PODS) or len(memory.objects(PODS)) < 2:
                return
            if len(memory.objects(PODS)) == 2 and self.now() - start >= 1.0:
                memory.put(pod("g-2", group="g", gpus=1))

    clock = ArrivingClock()
    memory.clock = clock
    start = clock.now()
    memory.put(node("n0", gpus=8))
    memory.put(volcano_group("g", 3))
    for i in range(2):
        memory.put(pod(f"g-{i}", group="g", gpus=1))
    loop = make_loop(memory, clock, period_s=10)
    loop.run(cycles=2)
    assert loop.last is not None and loop.last.admitted == ["ml/g"]
    assert 1.0 <= loop.last.at - start < 2.0  # not 10 s
