"""Annotations anyone who may edit a pod can write, and a cycle that raises: the loop lives on.

``gangplan.io/plan`` is read on every start and on every new leader (the ledger's recovery);
a value that crashed it would crash-loop the scheduler. Each bad value here is one a hostile
tester wrote; the right outcome, worked out by hand, is: the annotation is skipped with a
note naming the pod, and the pending gang next to it is still admitted.
"""

from __future__ import annotations

import json
import logging

import pytest
from objects import gang_pods, node, pod, volcano_group

from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.ledger import recover
from gangplan.adapters.serve.loop import ServeLoop
from gangplan.adapters.serve.memory import InMemoryApi
from gangplan.solver.result import SolverConfig

SOLVER = SolverConfig(deterministic=True, deterministic_time=1.0)
DEEP = "[" * 50_000 + "]" * 50_000  # 100 KB, under the 256 KiB annotation limit


def plan(pods: object) -> str:
    return json.dumps({"gang": "ml/x", "at": 1, "pods": pods})


BAD_PLANS = [
    plan({"x-0": ["n0", "gpu0"]}),  # two fields, not four
    plan({"x-0": {"node": "n0"}}),  # an object, not a list
    plan({"x-0": [5, [], [], None]}),  # the node is a number
    plan({"x-0": ["n0", 3, [], None]}),  # the GPUs are a number
    plan({"x-0": ["n0", [], [], -5]}),  # negative milli-GPU
    plan({"x-0": ["n0", [], [], True]}),  # a boolean milli-GPU
    plan(None),  # no pods
    plan([["x-0", 1]]),  # pods a list
    '{"gang": "ml/x", "at": NaN, "pods": {"x-0": ["n0", [], [], null]}}',  # NaN time
    '{"gang": 5, "at": 1, "pods": {}}',  # gang not a key
    "{not json",
    "[1, 2, 3]",
    DEEP,  # RecursionError in json.loads before
]


@pytest.mark.parametrize("text", BAD_PLANS, ids=range(len(BAD_PLANS)))
def test_recover_skips_a_bad_plan_annotation_with_a_note(text: str) -> None:
    raw = pod("x-0", node_name="n0", group="x", gated=False, annotations={"gangplan.io/plan": text})
    notes: list[str] = []
    assert recover([raw], "gate", notes) == []
    assert len(notes) == 1
    assert notes[0].startswith("pod ml/x-0: annotation gangplan.io/plan ignored: ")


def test_recover_still_reads_a_good_annotation_next_to_a_bad_one() -> None:
    good = json.dumps({"gang": "ml/g", "at": 1, "pods": {"g-0": ["n0", ["gpu0"], [], None]}})
    pods = [
        pod("x-0", group="x", gated=False, annotations={"gangplan.io/plan": BAD_PLANS[0]}),
        pod("g-0", group="g", gated=False, annotations={"gangplan.io/plan": good}),
    ]
    notes: list[str] = []
    flights = recover(pods, "gate", notes)
    assert [f.key for f in flights] == ["ml/g"]
    assert flights[0].placements["g-0"].node == "n0"
    assert flights[0].placements["g-0"].gpus == ("gpu0",)
    assert len(notes) == 1


@pytest.mark.parametrize("text", [BAD_PLANS[0], BAD_PLANS[7], DEEP], ids=["short", "list", "deep"])
def test_serve_starts_with_a_hostile_plan_annotation(
    memory: InMemoryApi, clock: FakeClock, text: str
) -> None:
    memory.put(node("n0", gpus=8))
    memory.put(node("n1", gpus=8))
    memory.put(
        pod("x-0", node_name="n0", group="x", gated=False, annotations={"gangplan.io/plan": text})
    )
    memory.put(volcano_group("g", 2))
    for p in gang_pods("g", 2, gpus=4):
        memory.put(p)
    loop = ServeLoop(memory, ServeConfig(), clock=clock, solver=SOLVER, emit=lambda _: None)
    report = loop.cycle()
    assert any("annotation gangplan.io/plan ignored" in n for n in report.notes)
    assert report.admitted == ["ml/g"]  # the cycle went on: 8 GPUs asked, 16 free


def test_run_survives_a_cycle_that_raises(
    memory: InMemoryApi, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    loop = ServeLoop(
        memory, ServeConfig(period_s=1), clock=clock, solver=SOLVER, emit=lambda _: None
    )
    real, calls = loop.cycle, []

    def flaky() -> object:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom in cycle 2")
        return real()

    loop.cycle = flaky  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="gangplan.serve"):
        loop.run(cycles=4)
    assert len(calls) == 4  # the two cycles after the one that raised still ran
    assert loop.metrics.cycle_errors._value.get() == 1
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None
    assert "boom in cycle 2" in str(errors[0].exc_info[1])


def test_serve_cycles_with_deep_koordinator_annotations(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # before: RecursionError out of allocated_devices / joint_policy in the snapshot
    memory.put(node("n0", gpus=8))
    allocated = {"scheduling.koordinator.sh/device-allocated": DEEP}
    memory.put(pod("r1", node_name="n0", gpus=1, gated=False, annotations=allocated))
    memory.put(volcano_group("g", 1))
    joint = {"scheduling.koordinator.sh/device-joint-allocate": DEEP}
    memory.put(pod("g-0", group="g", gpus=1, annotations=joint))
    loop = ServeLoop(memory, ServeConfig(), clock=clock, solver=SOLVER, emit=lambda _: None)
    report = loop.cycle()
    assert report.admitted == ["ml/g"]  # 1 GPU asked, 7 free
