"""``gangplan replan``: CP-SAT under a move budget against exhaustive search, hand-worked
cases, and the move plan's waves through the verifier.

The exhaustive search shares no code with the model: for every set of at most ``budget``
movable gangs it evicts them, lists every placement of the pending gangs and of the moved
gangs' copies (each moved gang placed whole, the others not at all) with the enumerator of
``test_exhaustive``, keeps the plans the independent verifier accepts in the state after
the evictions, and takes the best by the independent score (the replan score: ``score``
of the move snapshot, the original fair shares).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_exhaustive import _device_search, _gang_options, _name_pods

from gangplan.models import Eviction, Plan, PodPlacement, Snapshot, load_instance
from gangplan.solver.judges.score import Score, score
from gangplan.solver.judges.verify import verify
from gangplan.solver.replan.planner import (
    ReplanSettings,
    _shares,
    movable_gangs,
    move_snapshot,
    replan,
)
from gangplan.solver.result import SolverConfig, assemble_plan

GPU = "nvidia.com/gpu"
DET = SolverConfig(time_limit_s=60, deterministic=True, deterministic_time=30.0, seed=1)


# --------------------------------------------------------------------------- brute force


def _without(s: Snapshot, gone: set[tuple[str, str]], gangs: list[Any]) -> Snapshot:
    """``s`` with the running pods ``gone`` removed and the pending gangs ``gangs``; each
    pod kept holds the devices it holds in ``s`` (named, so that none moves to a device an
    evicted pod left)."""
    kept = []
    for p in s.running:
        if (p.namespace, p.name) in gone:
            continue
        hold = s.free(p.node).holds[(p.namespace, p.name)]
        kept.append(p.model_copy(update={"devices": (*hold.gpu_milli, *hold.nics)}))
    return Snapshot(
        resources=s.resources,
        levels=s.levels,
        device_layouts=s.device_layouts,
        nodes=s.nodes,
        queues=s.queues,
        gangs=tuple(gangs),
        running=tuple(kept),
    )


def brute_best(s: Snapshot, budget: int) -> Score:
    s2, copies = move_snapshot(s, movable_gangs(s))
    shares = _shares(s, s2)
    rules = s.preemption_rules
    best: Score | None = None
    keys = sorted(copies)
    for k in range(min(budget, len(keys)) + 1):
        for moved in itertools.combinations(keys, k):
            gone = {(p.namespace, p.name) for key in moved for p in rules.gangs[key].pods}
            copy_keys = {copies[key] for key in moved}
            gangs = [g for g in s2.gangs if g.key not in set(copies.values()) or g.key in copy_keys]
            after = _without(s2, gone, gangs)
            evictions = [
                Eviction(
                    pod=p.name,
                    namespace=p.namespace,
                    gang=p.gang,
                    node=p.node,
                    for_gang=copies[rules.key_of(p)],
                    kind="move",
                )
                for p in s.running
                if (p.namespace, p.name) in gone
            ]
            found = _best_in(after, s2, copy_keys, evictions, shares)
            if found is not None and (best is None or best < found):
                best = found
    assert best is not None
    return best


def _best_in(
    after: Snapshot, s2: Snapshot, must: set[str], evictions: list[Eviction], shares: Any
) -> Score | None:
    nodes = [n.name for n in after.nodes]
    options = []
    for g in after.gangs:
        opts = _gang_options(g, len(nodes))
        if g.key in must:
            opts = [o for o in opts if sum(sum(v) for v in o) > 0]
        options.append(opts)
    best: Score | None = None
    for combo in itertools.product(*options):
        per_node: dict[str, list[tuple[Any, Any, str]]] = {n: [] for n in nodes}
        for gang, roles in zip(after.gangs, combo, strict=True):
            for role, vec in zip(gang.roles, roles, strict=True):
                for pod, ni in _name_pods(gang, role, vec, nodes, {}):
                    per_node[nodes[ni]].append((gang, role, pod))
        placements: list[PodPlacement] = []
        ok = True
        for n, pods in per_node.items():
            if not pods:
                continue
            devices = _device_search(after, n, [(g, r) for g, r, _p in pods])
            if devices is None:
                ok = False
                break
            for (g, r, p), (gpus, share, nics) in zip(pods, devices, strict=True):
                placements.append(
                    PodPlacement(
                        pod=p,
                        gang=g.name,
                        role=r.name,
                        node=n,
                        gpus=gpus,
                        gpu_milli=share,
                        nics=nics,
                    )
                )
        if not ok:
            continue
        plan = assemble_plan(after, placements, {})
        if verify(after, plan):
            continue
        sc = score(s2, Plan(pods=plan.pods, evictions=tuple(evictions)), shares=shares)
        if best is None or best < sc:
            best = sc
    return best


# --------------------------------------------------------------------------- instances


@st.composite
def tiny_replan_instances(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    """1 to 3 nodes of 2 or 4 GPUs in two leaves; 1 to 3 running gangs of 1 or 2 pods
    (whole GPUs or none, some not preemptible); 0 to 2 pending gangs; a budget 0..2."""
    n_nodes = draw(st.integers(1, 3))
    nodes, room = [], {}
    for i in range(n_nodes):
        gpus = draw(st.sampled_from([2, 4]))
        nodes.append(
            {
                "name": f"n{i}",
                "allocatable": {"cpu": 4, GPU: gpus},
                "domains": {"leaf": f"l{i % 2}"},
            }
        )
        room[f"n{i}"] = {"cpu": 4000, "gpu": gpus * 1000}
    queues = [{"name": "q0"}, {"name": "q1", "weight": 2}][: draw(st.integers(1, 2))]
    running = []
    for k in range(draw(st.integers(1, 3))):
        gpu = draw(st.sampled_from([1, 2]))
        entry = {
            "gang": f"r{k}",
            "queue": draw(st.sampled_from([q["name"] for q in queues])),
            "priority": draw(st.sampled_from([0, 0, 1])),
            "preemptible": draw(st.sampled_from([True, True, True, False])),
        }
        pods = draw(st.integers(1, 2))
        placed = []
        for p in range(pods):
            fits = [n for n, r in room.items() if r["cpu"] >= 1000 and r["gpu"] >= gpu * 1000]
            if not fits:
                break
            node = draw(st.sampled_from(fits))
            room[node]["cpu"] -= 1000
            room[node]["gpu"] -= gpu * 1000
            placed.append(
                {"name": f"r{k}-{p}", "node": node, "requests": {"cpu": 1, GPU: gpu}, **entry}
            )
        if len(placed) == pods:
            running += placed
        else:
            for x in placed:
                room[x["node"]]["cpu"] += 1000
                room[x["node"]]["gpu"] += gpu * 1000
    gangs = []
    for k in range(draw(st.integers(0, 2))):
        gangs.append(
            {
                "name": f"g{k}",
                "queue": draw(st.sampled_from([q["name"] for q in queues])),
                "priority": draw(st.sampled_from([0, 1])),
                "creation_time": k,
                "roles": [
                    {
                        "name": "w",
                        "count": draw(st.integers(1, 2)),
                        "requests": {"cpu": 1, GPU: draw(st.sampled_from([1, 2, 4]))},
                    }
                ],
            }
        )
    data = {
        "levels": [{"name": "leaf"}],
        "nodes": nodes,
        "queues": queues,
        "gangs": gangs,
        "running": running,
    }
    return data, draw(st.integers(0, 2))


def _load(data: dict[str, Any]) -> Snapshot:
    return load_instance({"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance", **data})[0]


@settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(tiny_replan_instances())
def test_cpsat_equals_exhaustive_best_under_a_move_budget(case: tuple[dict[str, Any], int]) -> None:
    data, budget = case
    s = _load(data)
    result = replan(s, ReplanSettings(max_moved_gangs=budget, config=DET))
    point = result.frontier[-1]
    assert point.moved_gangs <= budget
    best = brute_best(s, min(budget, len(movable_gangs(s))))
    assert point.score == best, f"cpsat {point.score}\nbest  {best}\n{point}"
    assert result.violations == [] and result.plan_violations == []


# --------------------------------------------------------------------------- by hand


def _racks() -> Snapshot:
    """4 racks (leaves) of 4 nodes of 8 GPUs: 128 GPUs. Running: r1 holds a (one 8-GPU
    pod); r2 holds b (two 8-GPU pods); r3 holds c (four 2-GPU pods, one per node); r4
    holds d and e (4 GPUs each, two nodes). 48 GPUs run, 80 are free, but every rack has a
    used node. Pending: big, 4 pods of 8 GPUs required in one rack (32 GPUs)."""

    def run(name: str, node: str, g: int, gang: str | None = None) -> dict[str, Any]:
        return {
            "name": name,
            "gang": gang or name,
            "queue": "q",
            "node": node,
            "requests": {GPU: g, "cpu": 1},
        }

    running = [run("a", "r1n1", 8), run("b-0", "r2n1", 8, "b"), run("b-1", "r2n2", 8, "b")]
    running += [run(f"c-{i}", f"r3n{i + 1}", 2, "c") for i in range(4)]
    running += [run("d", "r4n1", 4), run("e", "r4n2", 4)]
    return _load(
        {
            "levels": [{"name": "leaf", "node_label": "rack"}],
            "nodes": [
                {"name": f"{r}n{i}", "labels": {"rack": r}, "allocatable": {GPU: 8, "cpu": 64}}
                for r in ("r1", "r2", "r3", "r4")
                for i in range(1, 5)
            ],
            "queues": [{"name": "q"}],
            "running": running,
            "gangs": [
                {
                    "name": "big",
                    "queue": "q",
                    "topology": {"required": "leaf"},
                    "roles": [{"name": "w", "count": 4, "requests": {GPU: 8, "cpu": 1}}],
                }
            ],
        }
    )


def test_the_fewest_moves_that_free_a_rack() -> None:
    # Without moves big cannot start: each rack has a used node, so at most 3 free nodes
    # (24 GPUs) in one rack. One move frees a rack: a (r1, 8 GPUs), b (r2, 16 GPUs, to a
    # rack with two free nodes) or c (r3, 8 GPUs, its four pods packed on one node) — d and
    # e would be two moves. Among one-move plans fewer moved GPUs come first (b loses), and
    # c's copy on one node is better on locality and fragmentation than a's move; either
    # way budget 1 admits big with one move of 8 GPUs. The largest leaf gang before is 24.
    s = _racks()
    result = replan(s, ReplanSettings(max_moved_gangs=1, config=DET))
    before, after = result.frontier[0], result.frontier[-1]
    assert (before.budget, before.moved_gangs, before.admitted) == (0, 0, 0)
    assert before.largest_gang_gpus == 24
    assert (after.budget, after.moved_gangs, after.moved_gpus, after.admitted) == (1, 1, 8, 1)
    moved = [m.gang for m in result.move_plan.moves]
    assert len(moved) == 1 and moved[0] in ("default/a", "default/c")
    assert result.violations == [] and result.plan_violations == []
    big = [p for p in result.move_plan.final.pods if p.gang == "big"]
    racks = {s.node_by_name[p.node].labels["rack"] for p in big}
    assert len(big) == 4 and len(racks) == 1


def test_a_budget_of_zero_moves_nothing() -> None:
    s = _racks()
    result = replan(s, ReplanSettings(max_moved_gangs=0, config=DET))
    assert [p.budget for p in result.frontier] == [0]
    assert result.move_plan.waves == () and result.move_plan.final.pods == ()


def test_a_gang_that_tolerates_no_disruption_never_moves() -> None:
    # a, b and c not preemptible (a PDB allowing none): freeing a rack now takes d and e
    # (two moves), so budget 1 admits nothing and budget 2 admits big
    s = _racks()
    running = [
        p.model_copy(update={"preemptible": p.gang not in ("a", "b", "c")}) for p in s.running
    ]
    s = Snapshot(
        resources=s.resources,
        levels=s.levels,
        nodes=s.nodes,
        queues=s.queues,
        gangs=s.gangs,
        running=tuple(running),
    )
    one = replan(s, ReplanSettings(max_moved_gangs=1, config=DET)).frontier[-1]
    assert one.admitted == 0
    two = replan(s, ReplanSettings(max_moved_gangs=2, config=DET))
    assert two.frontier[-1].admitted == 1
    assert sorted(m.gang for m in two.move_plan.moves) == ["default/d", "default/e"]
    assert two.violations == [] and two.plan_violations == []


def test_the_frontier_never_gets_worse_with_a_larger_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A budget of k moves admits every plan of a budget of k - 1, so the frontier's score
    # never decreases along it. A search cut short by its time can return worse (here:
    # budget 2's search, made to return an empty plan); budget 1's plan then stands at 2.
    import gangplan.solver.replan.planner as rp

    real, calls = rp._solve, []

    def cut_short(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        found = real(*args, **kw)
        return rp._Solved([], [], "cut short") if len(calls) == 3 else found

    monkeypatch.setattr(rp, "_solve", cut_short)
    result = replan(_racks(), ReplanSettings(max_moved_gangs=4, config=DET))
    points = result.frontier
    assert [p.budget for p in points] == [0, 1, 2, 4]
    assert points[1].admitted == 1  # budget 1 admits big (test_the_fewest_moves_...)
    assert points[2].score == points[1].score and points[2].admitted == 1
    assert "kept" in points[2].status
    assert all(a.score <= b.score for a, b in itertools.pairwise(points))
    assert result.violations == [] and result.plan_violations == []


# --------------------------------------------------------------------------- queue max


def _capped() -> Snapshot:
    """One node of 4 GPUs; queue q may use 2 GPUs. Running: r (one 2-GPU pod of q, may
    move). Pending: p (one 1-GPU pod of q). q is at its max: p cannot start, and moving r
    does not change that (its copy is q's too)."""
    return _load(
        {
            "nodes": [{"name": "n1", "allocatable": {GPU: 4, "cpu": 8}}],
            "queues": [{"name": "q", "max": {GPU: 2}}],
            "running": [
                {"name": "r", "gang": "r", "queue": "q", "node": "n1", "requests": {GPU: 2}}
            ],
            "gangs": [
                {
                    "name": "p",
                    "queue": "q",
                    "roles": [{"name": "w", "count": 1, "requests": {GPU: 1}}],
                }
            ],
        }
    )


def test_a_moved_gang_still_counts_against_its_queues_max() -> None:
    # q holds 2 GPUs of its max 2 (r): p (1 GPU) is over it at every budget. The copy of r
    # sits in the replan's own queue; it must still count as q's, else moving r "frees" 2
    # GPUs of q's quota and p is admitted (3 GPUs of q after the move).
    result = replan(_capped(), ReplanSettings(max_moved_gangs=1, config=DET))
    assert [(p.budget, p.admitted) for p in result.frontier] == [(0, 0), (1, 0)]
    assert result.move_plan.final.pods == ()
    assert result.violations == [] and result.plan_violations == []


def test_a_move_plan_its_verifier_refuses_falls_back_to_one_that_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Budget 1 admits big with one move (test_the_fewest_moves_...). Made to fail its move
    # verifier (any plan with a move), the replan falls back to budget 0: no move, nothing
    # admitted, and the notes say why.
    import gangplan.solver.replan.planner as rp
    from gangplan.solver.judges.verify_moves import MoveViolation

    real = rp.verify_moves

    def refuse(snapshot: Any, mp: Any, **kw: Any) -> Any:
        found = real(snapshot, mp, **kw)
        return [*found, MoveViolation("test", None, "refused")] if mp.moves else found

    monkeypatch.setattr(rp, "verify_moves", refuse)
    result = replan(_racks(), ReplanSettings(max_moved_gangs=1, config=DET))
    assert result.frontier[-1].admitted == 1
    assert result.move_plan.moves == () and result.move_plan.final.pods == ()
    assert result.violations == [] and result.plan_violations == []
    assert result.notes[0].startswith("budget 1's move plan fails its verifier")
    assert result.notes[-1] == "falling back to budget 0's move plan"


def test_a_gang_no_wave_may_move_is_not_offered_to_the_model() -> None:
    # At most one pod of a namespace moves per wave, and a gang is evicted whole in one
    # wave: b (2 pods) and c (4 pods) can never move. a, d and e (one pod each) can; one
    # move of a frees rack r1 for big (test_the_fewest_moves_...; c's move is out now).
    from gangplan.models import WaveLimits

    s = _racks()
    limits = WaveLimits(max_moving_per_namespace=1)
    assert sorted(rg.key for rg in movable_gangs(s, limits=limits)) == [
        "default/a",
        "default/d",
        "default/e",
    ]
    result = replan(s, ReplanSettings(max_moved_gangs=1, limits=limits, config=DET))
    why = "over the per-namespace budget"
    assert result.not_movable == {"default/b": why, "default/c": why}
    assert [m.gang for m in result.move_plan.moves] == ["default/a"]
    assert result.move_plan.left_out == ()
    assert {p.gang for p in result.move_plan.final.pods} == {"big"}
    assert result.violations == [] and result.plan_violations == []


def test_moves_the_waves_leave_out_are_solved_again_without_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A PodDisruptionBudget allows no disruption of c's first pod: the waves cannot move c.
    # Offered to the model anyway (the check that would keep it out is switched off),
    # budget 1 frees rack r3 by packing c's four pods on one node (better on locality than
    # a's move, test_the_fewest_moves_...), the waves leave it out, and the replan solves
    # once more without c: one move still frees a rack, a's (r1, 8 GPUs; b's moves 16).
    import gangplan.solver.replan.planner as rp
    from gangplan.models import DisruptionBudget, WaveLimits

    real = rp.why_not_movable
    monkeypatch.setattr(rp, "why_not_movable", lambda rg, limits=None: real(rg, None))
    pdb = DisruptionBudget(name="pdb", pods=("c-0",), disruptions_allowed=0)
    limits = WaveLimits(budgets=(pdb,))
    result = replan(_racks(), ReplanSettings(max_moved_gangs=1, limits=limits, config=DET))
    assert [m.gang for m in result.move_plan.moves] == ["default/a"]
    assert result.move_plan.left_out == ()
    assert {p.gang for p in result.move_plan.final.pods} == {"big"}
    assert any("left out by the waves" in n and "re-solved without them" in n for n in result.notes)
    assert result.violations == [] and result.plan_violations == []


# --------------------------------------------------------------------------- null moves


@pytest.mark.parametrize(
    ("gpus", "moves"),
    [
        (("gpu-0", "gpu-1"), []),  # r holds gpu-0 and gpu-1 (named none: the lowest): stays
        (("gpu-1", "gpu-0"), []),  # the same devices in another order: stays
        (("gpu-2", "gpu-3"), ["default/r"]),  # other devices of its node: a move
    ],
)
def test_a_move_to_where_the_gang_runs_now_is_no_move(
    gpus: tuple[str, str], moves: list[str]
) -> None:
    import gangplan.solver.replan.planner as rp

    s = _capped()
    s2, copies = move_snapshot(s, movable_gangs(s))
    assert copies == {"default/r": "default/r.mv"}
    copy = PodPlacement(pod="r.mv", gang="r.mv", role="r0", node="n1", gpus=gpus)
    gone = Eviction(pod="r", gang="r", node="n1", for_gang="default/r.mv", kind="move")
    sol = rp._Solved([copy], [gone], "by hand")
    result = rp._move_result(s, s2, copies, sol, [], ReplanSettings(config=DET), 0.0)
    assert [m.gang for m in result.move_plan.moves] == moves
    assert len(result.target.evictions) == len(moves)
    assert result.violations == [] and result.plan_violations == []


def test_only_a_multi_pod_copy_must_stay_in_its_lowest_domain() -> None:
    # docs/solver.md: a multi-pod gang's copy stays inside the lowest domain that holds all
    # its pods (b's two pods and c's four are each in one rack); a single-pod gang's copy
    # (a, d, e) may go anywhere — moving it out is what frees a rack
    s = _racks()
    s2, copies = move_snapshot(s, movable_gangs(s))
    required = {
        key: (g.topology.required if g.topology else None)
        for key, g in ((k, s2.gang_by_key[c]) for k, c in copies.items())
    }
    assert required == {
        "default/a": None,
        "default/b": "leaf",
        "default/c": "leaf",
        "default/d": None,
        "default/e": None,
    }
