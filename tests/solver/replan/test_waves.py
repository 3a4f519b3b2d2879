"""The wave planner and the move-plan verifier, on clusters small enough to work by hand.

Nodes have 8 GPUs (devices ``gpu-0``..``gpu-7``, the implicit layout) and no other resource;
running pods ask whole GPUs and hold the lowest free devices of their node. Each test says
the state it builds and what must hold. The refusal tests build a move plan by hand that
breaks exactly one rule and check that the verifier names that rule.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from gangplan.models import (
    DisruptionBudget,
    GangMove,
    GangOutcome,
    MovedPod,
    MovePlan,
    Plan,
    PodPlacement,
    Snapshot,
    Wave,
    WaveLimits,
    load_instance,
)
from gangplan.solver.judges.verify_moves import verify_moves
from gangplan.solver.replan.waves import plan_waves

GPU = "nvidia.com/gpu"


def cluster(nodes: int, running: list[dict[str, Any]], gpus: int = 8) -> Snapshot:
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "nodes": [{"name": f"n{i + 1}", "allocatable": {GPU: gpus}} for i in range(nodes)],
        "queues": [{"name": "q"}],
        "running": running,
    }
    return load_instance(data)[0]


def pod(name: str, node: str, gpus: int, gang: str | None = None, ns: str = "default") -> dict:
    return {
        "name": name,
        "namespace": ns,
        "gang": gang or name,
        "queue": "q",
        "node": node,
        "requests": {GPU: gpus},
    }


def to(name: str, node: str, gpus: list[str], gang: str | None = None, ns: str = "default"):
    return PodPlacement(
        pod=name, namespace=ns, gang=gang or name, role="r0", node=node, gpus=tuple(gpus)
    )


def rules(plan: MovePlan, s: Snapshot, **kw: Any) -> set[str]:
    return {v.rule for v in verify_moves(s, plan, **kw)}


def gpus(*ids: int) -> list[str]:
    return [f"gpu-{i}" for i in ids]


# ---------------------------------------------------------------------- the planner


def test_independent_moves_share_one_wave() -> None:
    # a (4 GPUs on n1) and b (4 GPUs on n2) both go to the empty n3: 8 GPUs, they fit
    # together, one pod leaves each node: one wave
    s = cluster(3, [pod("a", "n1", 4), pod("b", "n2", 4)])
    targets = {
        "default/a": [to("a", "n3", gpus(0, 1, 2, 3))],
        "default/b": [to("b", "n3", gpus(4, 5, 6, 7))],
    }
    mp = plan_waves(s, targets, Plan())
    assert [sorted(m.gang for m in w.moves) for w in mp.waves] == [["default/a", "default/b"]]
    assert mp.left_out == ()
    assert verify_moves(s, mp, target={("default", "a"): "n3", ("default", "b"): "n3"}) == []


def test_a_chain_takes_two_waves() -> None:
    # n2 is full (b, 8 GPUs); a (4 on n1) goes to n2, b to the empty n3. a needs b's room:
    # in one wave (evictions first, then placements) both fit, so one wave is valid
    s = cluster(3, [pod("a", "n1", 4), pod("b", "n2", 8)])
    targets = {
        "default/a": [to("a", "n2", gpus(0, 1, 2, 3))],
        "default/b": [to("b", "n3", gpus(*range(8)))],
    }
    mp = plan_waves(s, targets, Plan())
    assert mp.left_out == ()
    assert verify_moves(s, mp, target={("default", "a"): "n2", ("default", "b"): "n3"}) == []
    # with a PDB that lets only one of a, b be disrupted at once, they need two waves, b first
    pdb = DisruptionBudget(name="ab", pods=("a", "b"), disruptions_allowed=1)
    mp2 = plan_waves(s, targets, Plan(), WaveLimits(budgets=(pdb,)))
    assert [[m.gang for m in w.moves] for w in mp2.waves] == [["default/b"], ["default/a"]]
    limits = WaveLimits(budgets=(pdb,))
    assert (
        verify_moves(s, mp2, target={("default", "a"): "n2", ("default", "b"): "n3"}, limits=limits)
        == []
    )
    # the PDB is the verifier's (the cluster's), not the plan's: one wave moving both is
    # refused, whatever the plan file says its limits were
    assert {v.rule for v in verify_moves(s, mp, limits=limits)} == {"disruption_budget"}


def test_a_swap_goes_in_one_wave_or_is_left_out() -> None:
    # a (8 GPUs on n1) and b (8 GPUs on n2) swap nodes: each needs the other's room. In one
    # wave (both evicted, then both placed) it is valid; a PDB allowing one disruption at a
    # time makes it impossible without a temporary spot: both are left out, nothing moves
    s = cluster(2, [pod("a", "n1", 8), pod("b", "n2", 8)])
    targets = {
        "default/a": [to("a", "n2", gpus(*range(8)))],
        "default/b": [to("b", "n1", gpus(*range(8)))],
    }
    mp = plan_waves(s, targets, Plan())
    assert len(mp.waves) == 1 and mp.moved_gangs == 2
    assert verify_moves(s, mp, target={("default", "a"): "n2", ("default", "b"): "n1"}) == []
    pdb = DisruptionBudget(name="ab", pods=("a", "b"), disruptions_allowed=1)
    mp2 = plan_waves(s, targets, Plan(), WaveLimits(budgets=(pdb,)))
    assert mp2.waves == ()
    assert sorted(x.gang for x in mp2.left_out) == ["default/a", "default/b"]
    assert verify_moves(s, mp2, target={}) == []


def test_per_node_budget_spreads_a_node_over_waves() -> None:
    # three single-GPU gangs leave n1 for n2; Koordinator's default lets 2 move off n1 at
    # once: waves of 2 and 1
    s = cluster(2, [pod(f"p{i}", "n1", 1) for i in range(3)])
    targets = {f"default/p{i}": [to(f"p{i}", "n2", gpus(i))] for i in range(3)}
    mp = plan_waves(s, targets, Plan())
    assert [len(w.moves) for w in mp.waves] == [2, 1]
    assert verify_moves(s, mp, target={("default", f"p{i}"): "n2" for i in range(3)}) == []


def test_final_gang_that_needed_a_left_out_move_stays_pending() -> None:
    # a and b swap (n1 <-> n2) and c (n3) follows a... onto n1 is impossible as well: with a
    # PDB allowing one disruption at a time no move can start (each target is taken by a gang
    # that waits for another), so the pending g (8 GPUs), meant for n3 once c has left,
    # stays pending and nothing moves
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "nodes": [{"name": f"n{i + 1}", "allocatable": {GPU: 8}} for i in range(3)],
        "queues": [{"name": "q"}],
        "running": [pod("a", "n1", 8), pod("b", "n2", 8), pod("c", "n3", 8)],
        "gangs": [
            {"name": "g", "queue": "q", "roles": [{"name": "w", "count": 1, "requests": {GPU: 8}}]}
        ],
    }
    s = load_instance(data)[0]
    final = Plan(
        pods=(
            PodPlacement(pod="g-w-0", gang="g", role="w", node="n3", gpus=tuple(gpus(*range(8)))),
        ),
    )
    targets = {
        "default/a": [to("a", "n2", gpus(*range(8)))],
        "default/b": [to("b", "n1", gpus(*range(8)))],
        "default/c": [to("c", "n1", gpus(*range(8)))],
    }
    pdb = DisruptionBudget(name="all", pods=("a", "b", "c"), disruptions_allowed=1)
    mp = plan_waves(s, targets, final, WaveLimits(budgets=(pdb,)))
    assert mp.final.pods == ()
    assert verify_moves(s, mp) == []


@pytest.mark.parametrize("seed", range(30))
def test_random_move_plans_pass_the_verifier(seed: int) -> None:
    # random single- and two-pod gangs on 6 nodes; targets: a random feasible final state
    # (first fit of every gang, in random order, on an empty cluster); the planner's waves
    # must pass the verifier, and every move it makes ends at its target
    rng = random.Random(seed)
    nodes = 6
    gangs = []
    free = {f"n{i + 1}": 8 for i in range(nodes)}
    start: dict[str, list[tuple[str, int]]] = {}
    for k in range(rng.randint(3, 9)):
        shape = [rng.choice([1, 2, 4]) for _ in range(rng.choice([1, 1, 2]))]
        gangs.append((f"g{k}", shape))
    # initial placement: first fit in order
    running, ok = [], []
    for name, shape in gangs:
        where = []
        for g in shape:
            n = next((n for n in free if free[n] >= g), None)
            if n is None:
                break
            free[n] -= g
            where.append((n, g))
        if len(where) < len(shape):
            for n, g in where:
                free[n] += g
            continue
        start[name] = where
        ok.append(name)
        running += [pod(f"{name}-{i}", n, g, gang=name) for i, (n, g) in enumerate(where)]
    s = cluster(nodes, running)
    # target: shuffle gangs, first fit on empty nodes with explicit devices
    order = list(ok)
    rng.shuffle(order)
    used = {f"n{i + 1}": 0 for i in range(nodes)}
    targets: dict[str, list[PodPlacement]] = {}
    want: dict[tuple[str, str], str] = {}
    for name in order:
        pl = []
        for i, (_n, g) in enumerate(start[name]):
            n = next(n for n in used if used[n] + g <= 8)
            pl.append(to(f"{name}-{i}", n, gpus(*range(used[n], used[n] + g)), gang=name))
            used[n] += g
            want[("default", f"{name}-{i}")] = n
        targets[f"default/{name}"] = pl
    limits = WaveLimits(max_moving_per_node=rng.choice([1, 2, 3]))
    mp = plan_waves(s, targets, Plan(), limits)
    moved = {(p.namespace, p.pod) for m in mp.moves for p in m.pods}
    assert (
        verify_moves(s, mp, target={k: v for k, v in want.items() if k in moved}, limits=limits)
        == []
    )
    left = {x.gang for x in mp.left_out}
    assert left | {m.gang for m in mp.moves} == set(targets)


# ---------------------------------------------------------------------- refusals


def _state() -> Snapshot:
    # n1: a (4 GPUs, devices 0-3) and b (2 pods of 2 GPUs each: b-0 on n1, b-1 on n2)
    return cluster(
        3, [pod("a", "n1", 4), pod("b-0", "n1", 2, gang="b"), pod("b-1", "n2", 2, gang="b")]
    )


def _move(name: str, node: str, dest: str, devs: list[str], gang: str) -> MovedPod:
    return MovedPod(pod=name, node=node, to=to(name, dest, devs, gang=gang.split("/")[1]))


def test_refuses_a_wave_that_overcommits_a_node() -> None:
    # a (4 GPUs) moves onto n2, which holds b-1 (2 GPUs): fine; moving it onto n1's own
    # devices 4..7 is fine too; but onto n2's gpu0..3, where b-1 holds gpu0, gpu1, it
    # overcommits gpu0 and gpu1
    s = _state()
    bad = MovePlan(
        waves=(
            Wave(
                index=0,
                moves=(
                    GangMove(
                        gang="default/a",
                        pods=(_move("a", "n1", "n2", gpus(0, 1, 2, 3), "default/a"),),
                    ),
                ),
            ),
        )
    )
    assert rules(bad, s) == {"capacity"}
    good = MovePlan(
        waves=(
            Wave(
                index=0,
                moves=(
                    GangMove(
                        gang="default/a",
                        pods=(_move("a", "n1", "n2", gpus(2, 3, 4, 5), "default/a"),),
                    ),
                ),
            ),
        )
    )
    assert rules(good, s) == set()


def test_refuses_a_broken_disruption_budget() -> None:
    # a PDB over b-0 and b-1 allowing 1 disruption; moving b (both pods) in one wave breaks it
    s = _state()
    move = GangMove(
        gang="default/b",
        pods=(
            _move("b-0", "n1", "n3", gpus(0, 1), "default/b"),
            _move("b-1", "n2", "n3", gpus(2, 3), "default/b"),
        ),
    )
    pdb = DisruptionBudget(name="b", pods=("b-0", "b-1"), disruptions_allowed=1)
    plan = MovePlan(waves=(Wave(index=0, moves=(move,)),))
    assert rules(plan, s, limits=WaveLimits(budgets=(pdb,))) == {"disruption_budget"}
    loose = WaveLimits(budgets=(pdb.model_copy(update={"disruptions_allowed": 2}),))
    assert rules(plan, s, limits=loose) == set()
    # the snapshot's own budgets (the cluster's, an instance's disruption_budgets) count too
    s2 = s.model_copy(update={"disruption_budgets": (pdb,)})
    assert rules(plan, s2) == {"disruption_budget"}
    # a plan that carries a looser budget of the same name changes nothing
    forged = plan.model_copy(update={"limits": loose})
    assert rules(forged, s2) == {"disruption_budget"}


def test_refuses_a_per_node_budget_exceeded() -> None:
    # a and b-0 both leave n1 in one wave: 2 pods, fine at the default of 2, refused at 1
    s = _state()
    moves = (
        GangMove(gang="default/a", pods=(_move("a", "n1", "n3", gpus(0, 1, 2, 3), "default/a"),)),
        GangMove(
            gang="default/b",
            pods=(
                _move("b-0", "n1", "n3", gpus(4, 5), "default/b"),
                _move("b-1", "n2", "n3", gpus(6, 7), "default/b"),
            ),
        ),
    )
    plan = MovePlan(waves=(Wave(index=0, moves=moves),))
    assert rules(plan, s) == set()
    assert rules(plan, s, limits=WaveLimits(max_moving_per_node=1)) == {"budgets"}
    assert rules(plan, s, limits=WaveLimits(max_moving_per_namespace=2)) == {"budgets"}
    # the caps are the verifier's: a plan claiming a cap of 1 is not held to it, and one
    # claiming 3 (with 3 pods leaving a node) is held to the default of 2
    claims = plan.model_copy(update={"limits": WaveLimits(max_moving_per_node=1)})
    assert rules(claims, s) == set()


def test_refuses_a_gang_partly_moved() -> None:
    # only b-0 of gang b moves: b-1 keeps running on n2
    s = _state()
    move = GangMove(gang="default/b", pods=(_move("b-0", "n1", "n3", gpus(0, 1), "default/b"),))
    assert rules(MovePlan(waves=(Wave(index=0, moves=(move,)),)), s) == {"gang_whole"}


def test_refuses_a_last_state_that_is_not_the_plan() -> None:
    # the target puts a on n3, the waves move it to n2
    s = _state()
    move = GangMove(gang="default/a", pods=(_move("a", "n1", "n2", gpus(2, 3, 4, 5), "default/a"),))
    plan = MovePlan(waves=(Wave(index=0, moves=(move,)),))
    assert rules(plan, s, target={("default", "a"): "n3"}) == {"last_state"}
    assert rules(plan, s, target={("default", "a"): "n2"}) == set()


def test_refuses_final_pods_that_do_not_fit_the_last_state() -> None:
    # nothing moves; the final plan puts a 6-GPU pod on n1, where a and b-0 hold 6 of 8
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "nodes": [{"name": f"n{i + 1}", "allocatable": {GPU: 8}} for i in range(3)],
        "queues": [{"name": "q"}],
        "running": [
            pod("a", "n1", 4),
            pod("b-0", "n1", 2, gang="b"),
            pod("b-1", "n2", 2, gang="b"),
        ],
        "gangs": [
            {"name": "g", "queue": "q", "roles": [{"name": "w", "count": 1, "requests": {GPU: 6}}]}
        ],
    }
    s = load_instance(data)[0]
    final = Plan(
        pods=(
            PodPlacement(
                pod="g-w-0", gang="g", role="w", node="n1", gpus=tuple(gpus(*range(2, 8)))
            ),
        )
    )
    assert "capacity" in rules(MovePlan(final=final), s)
    fine = Plan(
        gangs=(GangOutcome(gang="g", admitted=True, placed=1, roles={"w": 1}),),
        pods=(
            PodPlacement(pod="g-w-0", gang="g", role="w", node="n3", gpus=tuple(gpus(*range(6)))),
        ),
    )
    assert rules(MovePlan(final=fine), s) == set()
    # the final plan is checked by the plan verifier in full: one without its outcomes is not
    assert rules(MovePlan(final=fine.model_copy(update={"gangs": ()})), s) == {"references"}


# ------------------------------------------------ the plan verifier's rules, on every wave
# Issue 26, finding 4: the move verifier accepted a target that is cordoned, NotReady,
# NoExecute-tainted, of another GPU model, outside the pod's own nodeSelector, 4-GPU pods
# given no devices, and moves of gangs that tolerate no disruption or that nothing recreates.
# Each case below was accepted (rules == set()) before the fix.


def _one_move(node: str = "n2", devs: list[str] | None = None, pod_name: str = "a") -> MovePlan:
    """a (4 GPUs on n1) moves to ``node`` on ``devs`` (default gpu-0..3)."""
    d = gpus(0, 1, 2, 3) if devs is None else devs
    move = GangMove(
        gang=f"default/{pod_name}", pods=(_move(pod_name, "n1", node, d, f"default/{pod_name}"),)
    )
    return MovePlan(waves=(Wave(index=0, moves=(move,)),))


def _two_nodes(
    n2: dict[str, Any], a: dict[str, Any] | None = None, n1: dict[str, Any] | None = None
) -> Snapshot:
    """n1 (holding a, 4 GPUs) and an empty n2 with the fields ``n2``."""
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "nodes": [
            {"name": "n1", "allocatable": {GPU: 8}, **(n1 or {})},
            {"name": "n2", "allocatable": {GPU: 8}, **n2},
        ],
        "queues": [{"name": "q"}],
        "running": [{**pod("a", "n1", 4), **(a or {})}],
    }
    return load_instance(data)[0]


@pytest.mark.parametrize(
    ("n2", "a", "rule"),
    [
        # cordoned (kubectl cordon: spec.unschedulable)
        ({"unschedulable": True}, None, "readiness"),
        # NotReady
        ({"ready": False}, None, "readiness"),
        # a NoExecute taint a does not tolerate
        ({"taints": [{"key": "maint", "effect": "NoExecute"}]}, None, "readiness"),
        # a NoSchedule taint a does not tolerate
        (
            {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]},
            None,
            "readiness",
        ),
        # a's own nodeSelector pool=a; n2 is pool b
        ({"labels": {"pool": "b"}}, {"node_selector": {"pool": "a"}}, "selector"),
        # a's own required affinity: zone In [z1]; n2 is z2
        (
            {"labels": {"zone": "z2"}},
            {
                "node_affinity": [
                    {"match_expressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
                ]
            },
            "affinity",
        ),
    ],
    ids=["cordoned", "not-ready", "no-execute", "no-schedule", "selector", "affinity"],
)
def test_refuses_a_target_the_pod_may_not_go_to(
    n2: dict[str, Any], a: dict[str, Any] | None, rule: str
) -> None:
    s = _two_nodes(n2, a)
    assert rules(_one_move(), s) == {rule}


def test_accepts_a_target_the_pod_tolerates_and_selects() -> None:
    # the same taint and selector, now tolerated and matched: the move is valid
    s = _two_nodes(
        {"labels": {"pool": "a"}, "taints": [{"key": "maint", "effect": "NoExecute"}]},
        {"node_selector": {"pool": "a"}, "tolerations": [{"key": "maint", "operator": "Exists"}]},
    )
    assert rules(_one_move(), s) == set()


def test_refuses_another_gpu_model() -> None:
    # a runs on an A100 node; n2 has H100s: a pod asking GPUs stays on its model
    s = _two_nodes({"gpu_model": "H100"}, n1={"gpu_model": "A100"})
    assert rules(_one_move(), s) == {"gpu_model"}
    same = _two_nodes({"gpu_model": "A100"}, n1={"gpu_model": "A100"})
    assert rules(_one_move(), same) == set()


def test_refuses_a_4_gpu_pod_given_no_devices() -> None:
    s = _two_nodes({})
    assert rules(_one_move(devs=[]), s) == {"devices"}
    # given devices that n2 does not have
    assert rules(_one_move(devs=gpus(5, 6, 7, 8)), s) == {"devices"}


def test_refuses_a_gang_that_tolerates_no_disruption() -> None:
    s = _two_nodes({}, {"preemptible": False})
    assert rules(_one_move(), s) == {"preemptible"}


@pytest.mark.parametrize(
    ("owner", "movable"),
    [
        ("none", False),  # a bare pod: an eviction deletes it for good
        ({"api_version": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9"}, False),
        ({"api_version": "apps/v1", "kind": "DaemonSet", "name": "agent"}, False),
        ({"api_version": "batch/v1", "kind": "Job", "name": "j"}, False),  # no index
        ({"api_version": "ray.io/v1", "kind": "RayCluster", "name": "r"}, False),  # unknown
        ({"api_version": "apps/v1", "kind": "StatefulSet", "name": "a", "index": "0"}, True),
        ({"api_version": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "a"}, True),
        ({"api_version": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "a"}, True),
        ({"api_version": "batch/v1", "kind": "Job", "name": "a-w-0", "index": "0"}, True),
        (None, True),  # not stated: the file's word
    ],
    ids=[
        "bare",
        "replicaset",
        "daemonset",
        "job-no-index",
        "unknown-kind",
        "statefulset",
        "volcano",
        "pytorchjob",
        "indexed-job",
        "unstated",
    ],
)
def test_moves_only_pods_their_owner_recreates(owner: Any, movable: bool) -> None:
    s = _two_nodes({}, {"owner": owner} if owner is not None else None)
    assert rules(_one_move(), s) == (set() if movable else {"recreated"})
