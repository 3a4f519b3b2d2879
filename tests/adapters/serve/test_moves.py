"""``gangplan apply MOVES.yaml`` and evictions together, on the in-memory API with the
simulated cluster of :mod:`kubesim` (mode gate): a move plan runs wave by wave; a
PodDisruptionBudget that would be broken stops a wave before anything is evicted; a 429
midway stops the rest, puts back the pods that went, and the report says so. Each test ends with
:func:`kubesim.final_check` on the cluster."""

from __future__ import annotations

from typing import Any

from kubesim import Controller, Kubelet, Scheduler, final_check
from objects import node, pod

from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.loop import ServeLoop
from gangplan.adapters.serve.memory import Fault, InMemoryApi
from gangplan.adapters.serve.moves import apply_moves
from gangplan.models import GangMove, MovedPod, MovePlan, PodPlacement, Wave
from gangplan.solver.result import SolverConfig

PODS = KINDS["pods"]
PDB = KINDS["poddisruptionbudgets.policy"]
SOLVER = SolverConfig(deterministic=True, deterministic_time=1.0)


class LabelledController(Controller):
    """The test controller, its pods labelled ``gang: <group>`` (for the PDBs)."""

    def _pod(self, group: str, i: int, gpus: int) -> dict[str, Any]:
        return pod(f"{group}-{i}", ns=self.ns, gpus=gpus, group=group, labels={"gang": group})


class World:
    def __init__(self, api: InMemoryApi, clock: FakeClock):
        self.api, self.clock = api, clock
        for i in range(3):
            api.put(node(f"n{i}", gpus=8))
        self.ctl = LabelledController(api)
        self.sched, self.kubelet = Scheduler(api), Kubelet(api, clock, duration=10_000)
        self.loop = ServeLoop(api, ServeConfig(), clock=clock, solver=SOLVER, emit=lambda _: None)

    def step(self) -> None:
        self.sched.step()
        self.kubelet.step()
        self.ctl.step()
        self.clock.advance(2.0)

    def settle(self, cycles: int = 6) -> None:
        for _ in range(cycles):
            self.loop.cycle()
            self.step()

    def where(self) -> dict[str, str]:
        return {
            p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in self.api.objects(PODS)
        }


def _move(gang: str, pods: list[tuple[str, str, str]]) -> GangMove:
    """``pods``: (pod, from node, to node); each pod asks 4 GPUs and gets devices 0-3 of
    its target, the second pod of a gang on one node 4-7."""
    out, seen = [], dict[str, int]()
    for p, a, b in pods:
        k = seen.get(b, 0)
        seen[b] = k + 1
        gpus = tuple(f"gpu-{i}" for i in range(4 * k, 4 * k + 4))
        to = PodPlacement(pod=p, gang=gang, namespace="ml", role="r0", node=b, gpus=gpus)
        out.append(MovedPod(pod=p, namespace="ml", node=a, to=to))
    return GangMove(gang=f"ml/{gang}", pods=tuple(out))


def _started(api: InMemoryApi, clock: FakeClock) -> tuple[World, dict[str, str]]:
    w = World(api, clock)
    w.ctl.add("a", 1, gpus=4)
    w.ctl.add("b", 2, gpus=4)
    w.settle()
    where = w.where()
    assert all(where.values()), where  # everything runs
    return w, where


def _other(where: dict[str, str], *pods: str) -> str:
    used = {where[p] for p in pods}
    return next(n for n in ("n0", "n1", "n2") if n not in used)


def test_a_move_plan_runs_wave_by_wave(memory: InMemoryApi, clock: FakeClock) -> None:
    w, where = _started(memory, clock)
    # wave 0: a moves to a node none of a, b-0, b-1 uses... (8 GPUs there, 4 needed);
    # wave 1: b-0 and b-1 move to the node a left
    free = _other(where, "a-0")
    plan = MovePlan(
        waves=(
            Wave(index=0, moves=(_move("a", [("a-0", where["a-0"], free)]),)),
            Wave(
                index=1,
                moves=(
                    _move(
                        "b",
                        [("b-0", where["b-0"], where["a-0"]), ("b-1", where["b-1"], where["a-0"])],
                    ),
                ),
            ),
        )
    )
    reports = apply_moves(memory, ServeConfig(), plan, wait=w.step, clock=clock)
    assert [r.stopped for r in reports] == ["", ""]
    assert [sorted(r.evicted) for r in reports] == [["ml/a-0"], ["ml/b-0", "ml/b-1"]]
    for _ in range(3):
        w.step()
    now = w.where()
    assert (now["a-0"], now["b-0"], now["b-1"]) == (free, where["a-0"], where["a-0"])
    assert final_check(memory) == []


def test_a_pdb_that_would_break_stops_the_wave_before_any_eviction(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    w, where = _started(memory, clock)
    # b's budget allows one disruption; the wave would take both pods of b at once
    memory.put(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b", "namespace": "ml"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"gang": "b"}}},
        }
    )
    target = _other(where, "b-0", "b-1")
    plan = MovePlan(
        waves=(
            Wave(
                index=0,
                moves=(_move("b", [("b-0", where["b-0"], target), ("b-1", where["b-1"], target)]),),
            ),
        )
    )
    calls = len(memory.calls)
    (rep,) = apply_moves(memory, ServeConfig(), plan, wait=w.step, clock=clock)
    assert rep.evicted == [] and "PodDisruptionBudget ml/b allows 1" in rep.stopped
    assert not [c for c in list(memory.calls)[calls:] if c.verb == "evict"]
    assert w.where() == where  # nothing moved
    assert final_check(memory) == []


def test_a_429_midway_stops_the_rest_and_says_so(memory: InMemoryApi, clock: FakeClock) -> None:
    w, where = _started(memory, clock)
    target = _other(where, "b-0", "b-1")
    plan = MovePlan(
        waves=(
            Wave(
                index=0,
                moves=(_move("b", [("b-0", where["b-0"], target), ("b-1", where["b-1"], target)]),),
            ),
        )
    )
    memory.faults.add(Fault("evict", 429, skip=1))  # a budget changed after the count
    (rep,) = apply_moves(memory, ServeConfig(), plan, wait=w.step, clock=clock)
    assert rep.evicted == ["ml/b-0"]
    assert "429" in rep.stopped and "not evicted: ml/b-1" in rep.stopped
    # the wave stops; b-0, already gone, is put back where it ran, so b is whole again
    assert "put back" in rep.stopped and rep.placed == ["ml/b-0"]
    for _ in range(3):
        w.step()
    assert w.where() == where
    assert final_check(memory) == []


def test_a_move_plan_that_contradicts_itself_is_refused_before_any_eviction(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    import pytest

    from gangplan.adapters.serve.moves import MovePlanRefused

    w, where = _started(memory, clock)
    free = _other(where, "a-0")
    ghost = _move("a", [("a-0", where["a-0"], "ghost")])  # a target node the cluster lacks
    twice = _move("a", [("a-0", where["a-0"], free)])  # the same move twice in one wave
    calls = len(memory.calls)
    for moves, why in [
        ((ghost,), "waves[0]: pod ml/a-0: to.node 'ghost' is no node of the cluster"),
        ((twice, twice), "waves[0]: gang ml/a is moved twice"),
    ]:
        plan = MovePlan(waves=(Wave(index=0, moves=moves),))
        with pytest.raises(MovePlanRefused) as err:
            apply_moves(memory, ServeConfig(), plan, wait=w.step, clock=clock)
        assert why in err.value.lines
    assert not [c for c in list(memory.calls)[calls:] if c.verb == "evict"]
    assert w.where() == where  # nothing moved
    assert final_check(memory) == []
