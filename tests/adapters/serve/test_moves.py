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
    """The test controller, its pods labelled ``gang: <group>`` (for the PDBs) and owned by
    a StatefulSet ``<group>`` (it recreates a pod under its name, as a StatefulSet does:
    the move verifier's rule ``recreated`` lets them move)."""

    def _pod(self, group: str, i: int, gpus: int) -> dict[str, Any]:
        out = pod(f"{group}-{i}", ns=self.ns, gpus=gpus, group=group, labels={"gang": group})
        out["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": group, "uid": f"sts-{group}"}
            | {"controller": True}
        ]
        return out


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


_PDB_B = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "b", "namespace": "ml"},
    "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"gang": "b"}}},
}
"""b's budget: one disruption at a time (a wave takes both pods of b at once)."""


def test_a_pdb_that_would_break_refuses_the_plan_before_any_eviction(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    import pytest

    from gangplan.adapters.serve.moves import MovePlanRefused

    w, where = _started(memory, clock)
    memory.put(_PDB_B)
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
    with pytest.raises(MovePlanRefused) as err:
        apply_moves(memory, ServeConfig(), plan, wait=w.step, clock=clock)
    assert err.value.lines == [
        "the move plan does not hold on the cluster now: [disruption_budget] wave 0: "
        "PodDisruptionBudget ml/b: 2 of its pods evicted at once, 1 allowed"
    ]
    assert not [c for c in list(memory.calls)[calls:] if c.verb == "evict"]
    assert w.where() == where  # nothing moved
    assert final_check(memory) == []


def test_a_pdb_made_while_the_waves_run_stops_the_next_wave_before_any_eviction(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # the plan holds when checked; b's budget appears while wave 0 runs: wave 1, which
    # would take both pods of b at once, is stopped before its first eviction
    w, where = _started(memory, clock)
    free = _other(where, "a-0")
    target = where["a-0"]
    plan = MovePlan(
        waves=(
            Wave(index=0, moves=(_move("a", [("a-0", where["a-0"], free)]),)),
            Wave(
                index=1,
                moves=(_move("b", [("b-0", where["b-0"], target), ("b-1", where["b-1"], target)]),),
            ),
        )
    )

    def step() -> None:
        memory.put(_PDB_B)
        w.step()

    calls = len(memory.calls)
    reports = apply_moves(memory, ServeConfig(), plan, wait=step, clock=clock)
    assert len(reports) == 2 and reports[0].stopped == ""
    rep = reports[1]
    assert rep.evicted == [] and "PodDisruptionBudget ml/b allows 1" in rep.stopped
    evicted = [c for c in list(memory.calls)[calls:] if c.verb == "evict"]
    assert [c.name for c in evicted] == ["a-0"]
    for _ in range(3):
        w.step()
    now = w.where()
    assert (now["a-0"], now["b-0"], now["b-1"]) == (free, where["b-0"], where["b-1"])
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


def _evictions(memory: InMemoryApi, since: int) -> list[str]:
    return [f"{c.namespace}/{c.name}" for c in list(memory.calls)[since:] if c.verb == "evict"]


def test_a_move_plan_the_verifier_refuses_is_refused_before_any_eviction(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # issue 26, finding 4: before, apply checked node names and numbering only and ran
    # each of these to the end. Each is refused whole, the line naming wave, move and rule.
    import pytest

    from gangplan.adapters.serve.moves import MovePlanRefused

    w, where = _started(memory, clock)
    free = _other(where, "a-0")
    prefix = "the move plan does not hold on the cluster now: "

    def refused(plan: MovePlan) -> list[str]:
        calls = len(memory.calls)
        with pytest.raises(MovePlanRefused) as err:
            apply_moves(memory, ServeConfig(), plan, wait=w.step, clock=clock)
        assert _evictions(memory, calls) == []
        return err.value.lines

    # half of b moved: b-1 would keep running where it was
    half = MovePlan(
        waves=(Wave(index=0, moves=(_move("b", [("b-0", where["b-0"], free)]),)),),
    )
    assert refused(half) == [
        prefix + "[gang_whole] wave 0: gang ml/b partly moved: ml/b-1 keep running where they were"
    ]
    # a gang that tolerates no disruption
    a0 = next(p for p in memory.objects(PODS) if p["metadata"]["name"] == "a-0")
    a0["metadata"].setdefault("annotations", {})["gangplan.io/preemptible"] = "false"
    memory.put(a0)
    lines = refused(
        MovePlan(waves=(Wave(index=0, moves=(_move("a", [("a-0", where["a-0"], free)]),)),))
    )
    assert any(
        line.startswith(prefix + "[preemptible] wave 0: move of ml/a: the gang does not tolerate")
        for line in lines
    ), lines
    a0["metadata"]["annotations"].pop("gangplan.io/preemptible")
    memory.put(a0)
    # a cordoned target
    n = next(x for x in memory.objects(KINDS["nodes"]) if x["metadata"]["name"] == free)
    n["spec"]["unschedulable"] = True
    memory.put(n)
    plan = MovePlan(waves=(Wave(index=0, moves=(_move("a", [("a-0", where["a-0"], free)]),)),))
    assert refused(plan) == [
        prefix + f"[readiness] wave 0: move of ml/a: pod 'a-0' on node '{free}', which is "
        "unschedulable"
    ]
    assert w.where() == where  # nothing moved
    assert final_check(memory) == []


def test_a_dry_run_records_each_waves_requests_and_waits_for_none(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # before: the dry run evicted nothing, then waited for the pods to be created again
    # (about 5 minutes on a cluster) and stopped the wave
    w, where = _started(memory, clock)
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

    def never() -> None:
        raise AssertionError("a dry run waits for nothing")

    calls = len(memory.calls)
    reports = apply_moves(memory, ServeConfig(dry_run=True), plan, wait=never, clock=clock)
    assert [(r.index, r.stopped) for r in reports] == [(0, ""), (1, "")]
    kinds = [[(q["kind"], q["metadata"]["name"]) for q in r.requests] for r in reports]
    assert kinds == [
        [("Eviction", "a-0"), ("Pod", "a-0")],
        [("Eviction", "b-0"), ("Eviction", "b-1"), ("Pod", "b-0"), ("Pod", "b-1")],
    ]
    pins = [
        q["patch"]["spec"]["nodeSelector"]["kubernetes.io/hostname"]
        for r in reports
        for q in r.requests
        if q["kind"] == "Pod"
    ]
    assert pins == [free, where["a-0"], where["a-0"]]
    assert list(memory.calls)[calls:] == []  # nothing sent
    assert w.where() == where
    assert final_check(memory) == []


JOB_INDEX = "batch.kubernetes.io/job-completion-index"


class IndexedJob:
    """An Indexed Job's controller (as a JobSet's Jobs are): pods ``<job>-<index>-<k>``,
    each labelled with its completion index; an evicted pod is replaced under a new name
    with the same index."""

    def __init__(self, api: InMemoryApi, name: str, n: int, gpus: int):
        self.api, self.name, self.n, self.gpus, self.made = api, name, n, gpus, 0
        api.put(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {"minMember": n},
            }
        )
        self.step()

    def step(self) -> None:
        have = {
            (p["metadata"].get("labels") or {}).get(JOB_INDEX)
            for p in self.api.objects(PODS)
            if p["metadata"]["name"].startswith(f"{self.name}-")
        }
        for i in range(self.n):
            if str(i) not in have:
                self.made += 1
                p = pod(
                    f"{self.name}-{i}-{self.made}",
                    gpus=self.gpus,
                    group=self.name,
                    labels={JOB_INDEX: str(i)},
                )
                p["metadata"]["ownerReferences"] = [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": self.name, "uid": "j"}
                    | {"controller": True}
                ]
                self.api.put(p)


def test_a_recreated_pod_is_followed_by_its_owner_and_index(
    memory: InMemoryApi, clock: FakeClock
) -> None:
    # before: apply waited for a pod of the evicted pod's name, which an Indexed Job never
    # makes ("the evicted pods were not created again in time"), and placed nothing
    w = World(memory, clock)
    job = IndexedJob(memory, "j", 1, gpus=4)

    def step() -> None:
        w.step()
        job.step()

    for _ in range(6):
        w.loop.cycle()
        step()
    where = w.where()
    assert where["j-0-1"], where
    free = next(n for n in ("n0", "n1", "n2") if n != where["j-0-1"])
    gpus = tuple(f"gpu-{i}" for i in range(4))
    to = PodPlacement(pod="j-0-1", gang="j", namespace="ml", role="r0", node=free, gpus=gpus)
    move = GangMove(
        gang="ml/j", pods=(MovedPod(pod="j-0-1", namespace="ml", node=where["j-0-1"], to=to),)
    )
    plan = MovePlan(waves=(Wave(index=0, moves=(move,)),))
    (rep,) = apply_moves(memory, ServeConfig(), plan, wait=step, clock=clock)
    assert (rep.evicted, rep.placed, rep.stopped) == (["ml/j-0-1"], ["ml/j-0-2"], "")
    for _ in range(3):
        step()
    now = w.where()
    assert "j-0-1" not in now and now["j-0-2"] == free
    assert final_check(memory) == []
