"""Reservation and backfill, worked by hand on two nodes (EASY backfilling: Lifka, JSSPP
1995; Mu'alem and Feitelson, IEEE TPDS 2001).

The cluster of every case: nodes n1 and n2, 4 GPUs and 16 cpu each; every pod asks 1 cpu
besides its GPUs. The clock is at 700 s; reservations are on with reserve_after 600 s.

Running: ``a`` (2 GPUs on n1, expected to end at 1000 s) and ``c`` (4 GPUs on n2, expected
to end at 5000 s). Pending: ``big`` (one pod of 4 GPUs, created at 0 s: it has waited 700 s
> 600 s, so it is starving) and a small gang ``s`` (one pod of 2 GPUs, created at 650 s: it
waited 50 s). n1 has 2 free GPUs now, n2 none: neither gang... ``big`` does not fit now
(it needs 4 on one node); ``s`` fits n1 now.

The reservation, by hand: candidate domains are the nodes (a one-pod gang). n1 at 700 s:
2 GPUs free < 4; at 1000 s (``a`` ends): 2 + 2 = 4 ≥ 4, fits. n2 at 700 s: 0; at 5000 s: 4,
fits. The earliest is n1 at 1000 s. It holds 4 GPUs and 1 cpu on n1, so the room left there
for gangs that may not backfill it is, in GPUs, free 2 + released by 1000 s (``a``'s 2) −
held 4 = 0; in cpu, free 15 + released 1 − held 1 = 15.

So ``s`` may take n1's 2 free GPUs only if it is expected to end by 1000 s: with an
expected duration of 200 s it ends at 900 s ≤ 1000 s (backfilled); with 400 s it would end at
1100 s > 1000 s, and without an expected duration nobody knows (both: not placed).
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplan.models import HeldNode, Plan, PodPlacement, Reservation, Snapshot, load_instance
from gangplan.solver.cycle.pipeline import run_baseline, solve_cycle
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import CycleResult, SolverConfig, assemble_plan

GPU = "nvidia.com/gpu"
DET = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=10.0)
PLACERS = ("greedy", "topology-fit", "fgd", "cpsat")


def instance(
    small: dict[str, Any] | None, *, enabled: bool = True, reservations: list[Any] | None = None
) -> Snapshot:
    gangs: list[dict[str, Any]] = [
        {
            "name": "big",
            "queue": "q",
            "creation_time": 0,
            "roles": [{"name": "w", "count": 1, "requests": {"cpu": 1, GPU: 4}}],
        }
    ]
    if small is not None:
        gangs.append(
            {
                "name": "s",
                "queue": "q",
                "creation_time": 650,
                "roles": [{"name": "w", "count": 1, "requests": {"cpu": 1, GPU: 2}}],
                **small,
            }
        )
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "preemption": {"now": 700},
        "reservation": {"enabled": enabled, "reserve_after_s": 600},
        "reservations": reservations or [],
        "nodes": [{"name": n, "allocatable": {"cpu": 16, GPU: 4}} for n in ("n1", "n2")],
        "queues": [{"name": "q"}],
        "running": [
            {
                "name": "a-0",
                "gang": "a",
                "queue": "q",
                "node": "n1",
                "expected_end": 1000,
                "requests": {"cpu": 1, GPU: 2},
            },
            {
                "name": "c-0",
                "gang": "c",
                "queue": "q",
                "node": "n2",
                "expected_end": 5000,
                "requests": {"cpu": 1, GPU: 4},
            },
        ],
        "gangs": gangs,
    }
    return load_instance(data)[0]


def cycle(s: Snapshot, placer: str) -> CycleResult:
    result = run_baseline(s, placer) if placer != "cpsat" else solve_cycle(s, config=DET)
    assert verify(s, result.plan) == []
    return result


def admitted(result: CycleResult) -> set[str]:
    return {g.gang for g in result.plan.gangs if g.admitted}


@pytest.mark.parametrize("placer", PLACERS)
def test_backfill_starts_a_short_job_before_the_big_gang(placer: str) -> None:
    # s ends at 700 + 200 = 900 <= 1000, the reservation's start: it may use n1's held GPUs
    result = cycle(instance({"expected_duration_s": 200}), placer)
    assert admitted(result) == {"s"}
    assert [p.node for p in result.plan.pods] == ["n1"]
    (res,) = result.plan.reservations
    assert (res.gang, res.level, res.domain, res.start) == ("big", "node", "n1", 1000)
    assert res.held == (HeldNode(node="n1", resources={"cpu": 1000, GPU: 4000}),)
    big = result.plan.outcome("default/big")
    assert big is not None and big.reason is not None
    assert "reserved: node n1, 1 node(s) held, from t=1000 s (in 300 s)" in big.reason.message


@pytest.mark.parametrize("placer", PLACERS)
@pytest.mark.parametrize(
    "small",
    [
        {"expected_duration_s": 400},  # ends at 1100 > 1000: it would delay big
        {},  # no expected duration: nothing is backfilled onto held capacity
    ],
    ids=["too-long", "no-estimate"],
)
def test_backfill_must_not_start_a_job_that_would_delay_the_big_gang(
    placer: str, small: dict[str, Any]
) -> None:
    result = cycle(instance(small), placer)
    assert admitted(result) == set()
    assert [r.domain for r in result.plan.reservations] == ["n1"]
    if placer == "cpsat":
        # the model's own plan, not a fallback to the incumbent: its held-capacity family
        # kept s off n1 (without it, s on n1 scores higher and the verifier would refuse it)
        assert result.status.value == "optimal"


@pytest.mark.parametrize("placer", PLACERS)
def test_without_reservations_the_small_gang_takes_the_free_gpus(placer: str) -> None:
    # the control: reservations off, s (no estimate) fits n1's 2 free GPUs now
    result = cycle(instance({}, enabled=False), placer)
    assert admitted(result) == {"s"}
    assert result.plan.reservations == ()


def test_a_gang_that_has_not_waited_long_enough_gets_no_reservation() -> None:
    # reserve_after 800 s: big has waited 700 s, so no reservation, and s takes n1
    s = instance({})
    s = s.model_copy(
        update={"reservation": s.reservation.model_copy(update={"reserve_after_s": 800})}
    )
    result = cycle(s, "greedy")
    assert result.plan.reservations == ()
    assert admitted(result) == {"s"}


def test_unknown_end_gives_an_unknown_start_and_holds_the_node_that_drains_first() -> None:
    # no running pod declares an end: big fits neither node until its pods leave
    # (start unknown); both nodes fit it empty; n1 has 2 GPUs free now, n2 none, so n1 is
    # held (held GPUs not free now: 4 − 2 = 2 on n1, 4 on n2). Room on n1: free 2 −
    # held 4 < 0, so 0: a gang with an estimate cannot backfill an unknown start either.
    s = instance({"expected_duration_s": 1})
    running = tuple(p.model_copy(update={"expected_end": None}) for p in s.running)
    s = s.model_copy(update={"running": running})
    s.__dict__.pop("_running_by_node", None)
    result = cycle(s, "greedy")
    (res,) = result.plan.reservations
    assert (res.domain, res.start) == ("n1", None)
    assert admitted(result) == set()


# --------------------------------------------------------------------------- the verifier


def _plan_s_on_n1(s: Snapshot) -> Plan:
    pod = PodPlacement(pod="s-w-0", gang="s", role="w", node="n1", gpus=("gpu-2", "gpu-3"))
    return assemble_plan(s, [pod], {})


HELD = [
    {
        "gang": "big",
        "level": "node",
        "domain": "n1",
        "start": 1000,
        "held": [{"node": "n1", "resources": {GPU: 4000, "cpu": 1000}}],
    }
]


def test_verifier_refuses_a_plan_that_uses_held_capacity_wrongly() -> None:
    # s (400 s: ends at 1100 > 1000) on n1 takes 2 GPUs of a room of 0
    s = instance({"expected_duration_s": 400}, enabled=False, reservations=HELD)
    rules = [v.rule for v in verify(s, _plan_s_on_n1(s))]
    assert rules == ["held_capacity"]
    # the same plan when s may backfill (200 s: ends at 900 <= 1000) is valid
    s = instance({"expected_duration_s": 200}, enabled=False, reservations=HELD)
    assert verify(s, _plan_s_on_n1(s)) == []


def test_verifier_checks_the_plans_reservations_too() -> None:
    # the snapshot has none; the plan says it held n1 for big, and breaks it
    s = instance({}, enabled=False)
    plan = _plan_s_on_n1(s).model_copy(
        update={"reservations": (Reservation.model_validate(HELD[0]),)}
    )
    assert [v.rule for v in verify(s, plan)] == ["held_capacity"]
    assert verify(s, _plan_s_on_n1(s)) == []


def test_a_reservation_for_an_unknown_gang_or_node_is_a_clear_error() -> None:
    bad = [{**HELD[0], "gang": "nobody"}, {**HELD[0], "held": [{"node": "n9", "resources": {}}]}]
    for res in bad:
        with pytest.raises(Exception) as err:
            instance({}, reservations=[res])
        assert "reservations[0]" in str(err.value)


@pytest.mark.parametrize("placer", PLACERS)
def test_with_preemption_on_no_baseline_places_on_held_capacity(placer: str) -> None:
    # preemption on, s of priority 100 (a and c run at 0, so it may evict them) and without
    # an expected duration: it may not backfill big's hold on n1 (0 GPUs of room there for
    # it, module docstring). n1's 2 free GPUs are held; n2's 4 are c's, which s could evict.
    # The baselines do not preempt under a reservation, so s stays pending in theirs; in
    # every plan s is not on n1
    base = instance({"priority": 100})
    s = base.model_copy(update={"preemption": base.preemption.model_copy(update={"enabled": True})})
    result = cycle(s, placer)  # verifies the plan
    assert all(p.node != "n1" for p in result.plan.pods if p.gang == "s")
    if placer != "cpsat":
        assert "s" not in admitted(result) and result.plan.evictions == ()
    assert any(
        n.startswith("the baselines do not preempt while reservations") for n in result.notes
    )


# --------------------------------------------------------------------------- one meter


def test_every_reservation_phase_is_charged_to_the_cycles_meter() -> None:
    """The phases of a baseline under reservations, by hand on the module's instance with
    s ending at 900 s: big's reservation alone (phase 0), s without held capacity (phase 1,
    where it fits nowhere: n1's free GPUs are held, n2 is full), then s again as a gang
    that may backfill big's reservation (phase 2). A placer that counts 7 work units on the
    state its phase hands it, and places nothing, so adds 3 x 7 = 21 units to the cycle's
    meter (each phase's state used to count on a meter of its own: 0)."""
    from gangplan.solver.context import CycleContext
    from gangplan.solver.cycle.reservations import place_with_holds, reserved_context

    ctx = reserved_context(CycleContext.of(instance({"expected_duration_s": 200})))
    assert [r.gang for r in ctx.snapshot.reservations] == ["big"]
    seen: list[tuple[str, ...]] = []

    def placer(phase: CycleContext) -> list[PodPlacement]:
        seen.append(tuple(g.name for g in phase.snapshot.gangs))
        phase.state().meter.add(7)
        return []

    before = ctx.meter.units
    assert place_with_holds(ctx, placer) == []
    assert seen == [("big",), ("s",), ("s",)]
    assert ctx.meter.units - before == 21


def test_a_deterministic_cycle_charges_the_reservation_step_and_the_phases() -> None:
    # the same instance in a deterministic cycle: the reservation step's greedy and every
    # baseline's phases evaluate nodes, so each of their parts is charged work (every
    # baseline's part was charged 0 when the phases counted on meters of their own)
    s = instance({"expected_duration_s": 200})
    result = cycle(s, "cpsat")
    assert admitted(result) == {"s"}
    assert result.work.get("reservations", 0.0) > 0
    for name in ("greedy", "topology-fit", "fgd"):
        assert result.work.get(f"baseline.{name}", 0.0) > 0, (name, result.work)
