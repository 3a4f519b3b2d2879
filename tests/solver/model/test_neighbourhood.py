"""Large neighbourhood search (``solver/model/neighbourhood.py``): the steps on a toy model
whose optimum is worked out by hand, and the cycle with LNS forced on a small fat-tree
(verified, never below the incumbent, reproducible, inside its deterministic budget)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest
from ortools.sat.python import cp_model

import gangplan.solver.model.neighbourhood as nb
import gangplan.solver.model.search as search
from gangplan.adapters.traces.generate import generate_fat_tree
from gangplan.models import Snapshot
from gangplan.models.snapshot import QueuePreemption
from gangplan.solver.cycle.pipeline import solve_cycle
from gangplan.solver.judges.verify import verify
from gangplan.solver.model.neighbourhood import Neighbourhoods, Pace, StepLimits, improve
from gangplan.solver.result import CycleResult, SolverConfig

# two independent 0-1 knapsacks, one per part: (weight, value) of each item, capacity
PART_A = ([(3, 4), (4, 5), (2, 3)], 5)
PART_B = ([(5, 10), (3, 6), (3, 6)], 6)


def _best(items: list[tuple[int, int]], cap: int) -> int:
    """Brute force over every subset."""
    best = 0
    for pick in itertools.product((0, 1), repeat=len(items)):
        w = sum(p * it[0] for p, it in zip(pick, items, strict=True))
        if w <= cap:
            best = max(best, sum(p * it[1] for p, it in zip(pick, items, strict=True)))
    return best


def _toy() -> tuple[cp_model.CpModel, cp_model.LinearExprT, Neighbourhoods, list[int], list[int]]:
    model = cp_model.CpModel()
    expr: list[cp_model.LinearExprT] = []
    parts: dict[object, list[int]] = {}
    for name, (items, cap) in (("A", PART_A), ("B", PART_B)):
        xs = [model.new_bool_var(f"{name}{k}") for k in range(len(items))]
        model.add(sum(x * w for x, (w, _) in zip(xs, items, strict=True)) <= cap)
        expr += [x * val for x, (_, val) in zip(xs, items, strict=True)]
        parts[name] = [x.index for x in xs]
    hood = Neighbourhoods(parts, [], [*parts["A"], *parts["B"]], ["A", "B"])
    return model, sum(expr), hood, parts["A"], parts["B"]


def _start(model: cp_model.CpModel) -> cp_model.CpSolver:
    """The empty solution (every item out), as a solved copy."""
    trial = model.clone()
    for var in trial.proto.variables:
        var.domain.clear()
        var.domain.extend([0, 0])
    solver = cp_model.CpSolver()
    assert solver.solve(trial) == cp_model.OPTIMAL
    return solver


def _steps(n: int) -> object:
    left = [n]

    def limits(_det: float, _step: float) -> StepLimits | None:
        if left[0] == 0:
            return None
        left[0] -= 1
        return StepLimits(3600.0, 1.0, 1, 0)

    return limits


def _search(
    model: cp_model.CpModel,
    expr: cp_model.LinearExprT,
    start: cp_model.CpSolver,
    hood: Neighbourhoods,
    steps: int,
    run: object = None,
) -> tuple[list[cp_model.CpSolver], float, bool, bool]:
    """:func:`improve` from ``start`` with at most ``steps`` steps (each 1 deterministic
    second, one worker), a fresh Pace(1) and a seeded draw; ``run`` solves (default: plain)."""
    return improve(
        model,
        expr,
        start,
        hood,
        Pace(1),
        limits=_steps(steps),  # type: ignore[arg-type]
        run=run or (lambda s, m: s.solve(m)),  # type: ignore[arg-type]
        rng=random.Random(0),
    )


def test_each_step_changes_one_part_and_the_steps_reach_the_optimum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One part per step (MIN_SIZE 1): each improving solution differs from the one before
    only inside one part; after both parts have been drawn the value is the sum of the two
    knapsacks' optima by brute force (7 + 12 = 19)."""
    monkeypatch.setattr(nb, "MIN_SIZE", 1)
    monkeypatch.setattr(nb, "STALL", 10**6)
    model, expr, hood, a, b = _toy()
    start = _start(model)
    found, det, proven, _stalled = _search(model, expr, start, hood, 12)
    assert _best(*PART_A) + _best(*PART_B) == 19
    assert found and found[-1].value(expr) == 19
    assert det >= 0.0
    assert not proven  # no step freed both parts
    before = list(start.response_proto.solution)
    for sol in found:
        now = list(sol.response_proto.solution)
        changed = {i for i, (x, y) in enumerate(zip(before, now, strict=True)) if x != y}
        assert changed <= set(a) or changed <= set(b), changed
        before = now
    values = [s.value(expr) for s in found]
    assert values == sorted(values) and len(set(values)) == len(values)  # strictly better


def test_no_step_no_change() -> None:
    """Limits that allow no step: nothing found, no time used."""
    model, expr, hood, _a, _b = _toy()
    found, det, proven, stalled = _search(model, expr, _start(model), hood, 0)
    assert found == [] and det == 0.0 and not proven and not stalled  # time, not a stall


def test_the_steps_stop_after_stall_steps_that_prove_nothing_better(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From the optimum (19), every one-part step proves its part optimal without gain: the
    search stops after STALL such steps though the limits allow 50."""
    monkeypatch.setattr(nb, "MIN_SIZE", 1)
    model, expr, hood, _a, _b = _toy()
    best = cp_model.CpSolver()
    model.maximize(expr)
    assert best.solve(model) == cp_model.OPTIMAL and best.value(expr) == 19
    runs: list[int] = []

    def run(s: cp_model.CpSolver, m: cp_model.CpModel) -> object:
        runs.append(1)
        return s.solve(m)

    found, _det, proven, stalled = _search(model, expr, best, hood, 50, run)
    assert found == [] and not proven and stalled  # it says it stopped for the stall
    assert len(runs) == nb.STALL < 50


def test_a_step_that_frees_every_decision_proves_the_tier(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One part holding every decision: the first step is the whole model, solved to its
    optimum (19, brute force), so the search ends at once with the tier proven."""
    model, expr, _hood, a, b = _toy()
    whole = Neighbourhoods({"all": [*a, *b]}, [], [*a, *b], ["all"])
    found, _det, proven, _stalled = _search(model, expr, _start(model), whole, 50)
    assert proven and len(found) == 1 and found[0].value(expr) == 19


def _instance() -> Snapshot:
    return generate_fat_tree(spines=2, leaves_per_spine=4, nodes_per_leaf=8, load=0.5, seed=3)


def _preempting() -> Snapshot:
    """A fuller fat-tree where every running pod may be evicted (preemption on, each queue
    lower_priority within and reclaim any): victims whose pods run over several leaves."""
    snap = generate_fat_tree(spines=2, leaves_per_spine=4, nodes_per_leaf=8, load=0.8, seed=7)
    rules = QueuePreemption(within_queue="lower_priority", reclaim="any")
    data = snap.model_copy(
        update={
            "queues": tuple(q.model_copy(update={"preemption": rules}) for q in snap.queues),
            "running": tuple(
                r.model_copy(update={"preemptible": True, "admitted": None}) for r in snap.running
            ),
            "preemption": snap.preemption.model_copy(update={"enabled": True}),
        }
    )
    return Snapshot.model_validate(data.model_dump())


def _forced(
    monkeypatch: pytest.MonkeyPatch,
    budget: float,
    gains: list[int] | None = None,
    snapshot: Snapshot | None = None,
) -> CycleResult:
    """The cycle with LNS on whatever the model's size, small neighbourhoods; ``gains``
    collects how many improving steps each tier's search found."""
    monkeypatch.setattr(search, "LNS_MIN_DECISIONS", 0)
    monkeypatch.setattr(nb, "STALL", 4)  # small neighbourhoods of a small model: persist
    if gains is not None:

        def counted(*args: object, **kwargs: object) -> object:
            found, det, proven, stalled = improve(*args, **kwargs)  # type: ignore[arg-type]
            gains.append(len(found))
            return found, det, proven, stalled

        monkeypatch.setattr(search, "improve", counted)
    monkeypatch.setattr(nb, "MIN_SIZE", 20)
    monkeypatch.setattr(nb, "START_SIZE", 0.05)
    cfg = SolverConfig(time_limit_s=60, deterministic=True, deterministic_time=budget, seed=2)
    return solve_cycle(snapshot or _instance(), config=cfg)


def test_a_cycle_with_lns_verifies_and_never_falls_below_the_incumbent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gains: list[int] = []
    result = _forced(monkeypatch, 4.0, gains)
    snapshot = _instance()
    assert sum(gains) >= 1, gains  # the steps ran and improved a tier (so this tests them)
    assert verify(snapshot, result.plan) == []
    assert result.incumbent_score is not None
    assert result.score >= result.incumbent_score
    # the budget holds with the steps counted (the cycle's parts in deterministic seconds)
    assert sum(result.work.values()) <= 4.0 * 1.05 + 0.05, result.work


@pytest.mark.slow  # two cycles with LNS forced: 10-15 s
def test_a_cycle_with_lns_is_reproducible(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic mode: one worker, seeded draws, deterministic step limits."""
    first = _forced(monkeypatch, 2.0)
    second = _forced(monkeypatch, 2.0)
    assert first.plan.pods == second.plan.pods
    assert first.score == second.score


def _optimum(model: cp_model.CpModel) -> int | None:
    """The model's optimum, or None if not proven within 2 deterministic seconds."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 2.0
    st = solver.solve(model)
    assert st in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN)
    return round(solver.objective_value) if st == cp_model.OPTIMAL else None


@pytest.mark.slow  # every captured step's model solved twice: 10-15 s each
@pytest.mark.parametrize(
    ("instance", "seed"),
    [(_instance, 0), (_instance, 5), (_preempting, 2)],
    ids=["a", "b", "evict"],
)
def test_fixing_the_auxiliary_variables_of_unfreed_parts_keeps_each_neighbourhoods_optimum(
    monkeypatch: pytest.MonkeyPatch, instance: Callable[[], Snapshot], seed: int
) -> None:
    """A step fixes the auxiliary variables of the parts it does not free (FGD's measure,
    node and leaf flags, ``uses`` at 0) besides their decisions. On a small fat-tree's
    model (and one where running gangs over several leaves may be evicted), in every tier
    that searched and for several drawn neighbourhoods, the step's optimum
    equals the optimum with only the decisions outside the neighbourhood fixed (every
    auxiliary variable free): fixing them cuts off no solution of the neighbourhood. Some
    of these neighbourhoods hold a better solution than the start (so the comparison can
    fail), and the steps' models have fewer free variables. The seeds are chosen so that the
    comparison fails when ``uses`` is fixed at 1 (case a) and when a node's variables go only
    with its own part, not with every part of the victims running on it (case evict)."""
    seen: list[tuple[cp_model.CpModel, cp_model.LinearExprT, cp_model.CpSolver, Neighbourhoods]]
    seen = []

    def capture(model, expr, start, hood, pace, **kwargs):  # type: ignore[no-untyped-def]
        seen.append((model.clone(), expr, start, hood))
        return improve(model, expr, start, hood, pace, **kwargs)

    monkeypatch.setattr(search, "improve", capture)
    _forced(monkeypatch, 2.0, snapshot=instance())
    assert sum(len(v) for v in seen[0][3].aux_by_part.values()) > 0

    def n_free(m: cp_model.CpModel) -> int:
        return sum(1 for v in m.proto.variables if v.domain[0] != v.domain[len(v.domain) - 1])

    rng = random.Random(seed)
    better = compared = 0
    for model, expr, start, hood in seen:
        model.maximize(expr)
        sol = start.response_proto.solution
        local = [i for i in hood.local() if i not in hood.always]
        copy = nb.FixedCopy(model, local, sol, hood.at_zero_only)
        for size in (len(hood.decisions) // 8, len(hood.decisions) // 4):
            free, parts = hood.draw_parts(rng, size)
            plain = model.clone()
            plain.clear_hints()  # type: ignore[no-untyped-call]
            for idx in hood.decisions:
                if idx not in free:
                    plain.proto.variables[idx].domain.clear()
                    plain.proto.variables[idx].domain.extend([sol[idx], sol[idx]])
            step = copy.model.clone()
            freed = free.union(*(hood.aux_by_part.get(p, ()) for p in parts))
            for idx in freed:
                step.proto.variables[idx].domain.clear()
                step.proto.variables[idx].domain.extend(model.proto.variables[idx].domain)
            assert n_free(step) < n_free(plain)
            optimum = _optimum(plain)
            if optimum is None:
                continue  # not proven in its time: nothing to compare
            assert _optimum(step) == optimum
            compared += 1
            better += optimum > start.value(expr)
    assert compared >= 4 and better > 0, (compared, better)


def test_the_fixed_copy_follows_the_models_new_constraints_and_the_best_solution() -> None:
    """The toy model's copy fixed at the empty solution; after the tier loop adds a
    constraint and the best solution moves (item A0 in), a sync gives the copy the
    constraint and the objective, and fixes A0 at 1; a step's update fixes what it freed
    at the step's values."""
    model, expr, _hood, a, b = _toy()
    copy = nb.FixedCopy(model, [*a, *b], [0] * len(model.proto.variables))
    model.add(expr >= 4)
    model.maximize(expr)
    moved = [1 if i == a[0] else 0 for i in range(len(model.proto.variables))]
    copy.sync(model, moved)
    assert len(copy.model.proto.constraints) == len(model.proto.constraints)
    domains = [list(v.domain) for v in copy.model.proto.variables]
    assert domains[a[0]] == [1, 1] and all(domains[i] == [0, 0] for i in [*a[1:], *b])
    solver = cp_model.CpSolver()
    assert solver.solve(copy.model) == cp_model.OPTIMAL and solver.objective_value == 4
    step = list(moved)
    step[b[0]] = 1
    copy.update(step)
    assert list(copy.model.proto.variables[b[0]].domain) == [1, 1]
