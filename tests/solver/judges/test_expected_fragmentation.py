"""The CP-SAT term of ``fragmentation.expected`` equals the score's entry on every solution.

On small random instances (GPU shares and whole GPUs, free CPU that a pod shape may lack, GPU
models, running shares, the default workload or a declared one), every solution of the
model's hard rules is listed (CP-SAT's solution enumeration); each distinct assignment of the
decision variables is turned into pods and devices as the cycle does, checked by the
verifier, and scored by the independent ``solver/judges/score.py``: the term's value (its
expression plus its constant) must be that entry, exactly. The term is exact both ways (the
measure's booleans are reified, not bounded), so this holds for every solution, not only at
the optimum. Ten drawn instances in the default run, thirty in the slow one.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from gangplan.models import load_instance
from gangplan.solver.context import CycleContext
from gangplan.solver.judges.score import score
from gangplan.solver.judges.verify import verify
from gangplan.solver.model import objective
from gangplan.solver.model.constraints import Constraints
from gangplan.solver.model.indexing import build_index
from gangplan.solver.model.readback import disaggregate, solution_plan
from gangplan.solver.model.variables import KINDS, Variables
from gangplan.solver.result import SolverConfig, assemble_plan

API = {"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance"}
GPU = "nvidia.com/gpu"
NAME = "fragmentation.expected"
MAX_SOLUTIONS = 5000


@st.composite
def instances(draw: st.DrawFn) -> dict[str, Any]:
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        nodes.append(
            {
                "name": f"n{i}",
                "gpu_model": draw(st.sampled_from(["A", "B"])),
                "allocatable": {
                    GPU: draw(st.sampled_from([1, 2, 4])),
                    "cpu": draw(st.sampled_from([2, 3, 8])),
                },
                "domains": {"leaf": "l0"},
            }
        )
    running = []
    if draw(st.booleans()):
        running.append(
            {
                "name": "r",
                "node": draw(st.sampled_from([n["name"] for n in nodes])),
                "requests": {GPU: draw(st.sampled_from(["300m", "500m", 1])), "cpu": 1},
            }
        )
    gangs = []
    for k in range(draw(st.integers(1, 3))):
        gpu = draw(st.sampled_from(["250m", "500m", 1, 2]))
        req: dict[str, Any] = {GPU: gpu}
        cpu = draw(st.sampled_from([0, 1, 2]))
        if cpu:
            req["cpu"] = cpu
        gang: dict[str, Any] = {
            "name": f"g{k}",
            "queue": "q",
            "roles": [{"name": "w", "count": draw(st.integers(1, 2)), "requests": req}],
        }
        if draw(st.integers(0, 3)) == 0:
            gang["gpu_models"] = [draw(st.sampled_from(["A", "B"]))]
        gangs.append(gang)
    data: dict[str, Any] = {
        "levels": [{"name": "leaf"}],
        "nodes": nodes,
        "queues": [{"name": "q"}],
        "gangs": gangs,
        "running": running,
    }
    if draw(st.booleans()):
        shapes = st.fixed_dictionaries(
            {
                "requests": st.sampled_from(
                    [
                        {GPU: "500m", "cpu": 1},
                        {GPU: "250m"},
                        {GPU: 1, "cpu": 3},
                        {GPU: 2},
                        {"cpu": 2},
                    ]
                ),
                "weight": st.integers(1, 3),
            }
        )
        data["workload"] = draw(st.lists(shapes, min_size=1, max_size=3))
        if draw(st.booleans()):
            data["workload"][0]["gpu_models"] = ["B"]
    return data


class _Collect(cp_model.CpSolverSolutionCallback):
    """Every solution's decision values, with the term's value there."""

    def __init__(self, decisions: list[cp_model.IntVar], expr: cp_model.LinearExprT):
        super().__init__()
        self.decisions, self.expr = decisions, expr
        self.seen: dict[tuple[int, ...], set[int]] = {}
        self.count = 0

    def on_solution_callback(self) -> None:
        key = tuple(self.value(x) for x in self.decisions)
        self.seen.setdefault(key, set()).add(int(self.value(self.expr)))
        self.count += 1
        if self.count >= MAX_SOLUTIONS:
            self.stop_search()


def _term_equals_the_scores_entry_on_every_solution(data: dict[str, Any], exact_limit: int) -> None:
    s, _ = load_instance({**API, **data})
    ix = build_index(CycleContext.of(s), SolverConfig(exact_limit=exact_limit), None)
    if not ix.items:
        return
    model = cp_model.CpModel()
    v = Variables(model, ix)
    Constraints(model, ix, v).add_all()
    # this term alone: the other terms' auxiliary variables (a shortfall bounded on one
    # side) would multiply the solutions without changing a pod
    terms: dict[str, objective.ObjectiveTerm] = {}
    objective._expected_fragmentation(model, ix, v, terms)
    term = terms[NAME]
    expr = term.expr if term.expr is not None else 0
    made = v.by_kind()
    decisions = [var for k in KINDS if k.decision for var in made[k.name].values()]
    solver = cp_model.CpSolver()
    solver.parameters.enumerate_all_solutions = True
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 20.0
    collect = _Collect(decisions, expr)
    solver.solve(model, collect)
    assert collect.seen  # the empty plan at least
    for key, values in collect.seen.items():
        # the measure's variables follow from the decisions: one value per assignment
        assert len(values) == 1, values
        fixed = model.clone()
        for var, val in zip(decisions, key, strict=True):
            fixed.add(fixed.get_int_var_from_proto_index(var.index) == val)
        one = cp_model.CpSolver()
        one.parameters.num_workers = 1
        assert one.solve(fixed) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        plan = assemble_plan(s, disaggregate(ix, v.read(one), None), {})
        assert verify(s, plan) == []
        assert score(s, plan)[NAME] == next(iter(values)) + term.const


def _examples(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@_examples(10)
@given(instances(), st.sampled_from([6000, 0]))
def test_the_term_equals_the_scores_entry_on_every_solution(
    data: dict[str, Any], exact_limit: int
) -> None:
    _term_equals_the_scores_entry_on_every_solution(data, exact_limit)


@pytest.mark.slow  # the same with 30 examples: about 7 s
@_examples(30)
@given(instances(), st.sampled_from([6000, 0]))
def test_the_term_equals_the_scores_entry_on_30_drawn_instances(
    data: dict[str, Any], exact_limit: int
) -> None:
    _term_equals_the_scores_entry_on_every_solution(data, exact_limit)


@st.composite
def preemption_instances(draw: st.DrawFn) -> dict[str, Any]:
    """Preemption on: running gangs of priority 0 (whole GPUs, a GPU share, CPU, one
    elastic) that pending gangs of priority 10 in the same queue may evict."""
    nodes = [
        {
            "name": f"n{i}",
            "allocatable": {GPU: draw(st.sampled_from([2, 4])), "cpu": 4},
            "domains": {"leaf": "l0"},
        }
        for i in range(draw(st.integers(1, 2)))
    ]
    names = [n["name"] for n in nodes]
    running: list[dict[str, Any]] = []
    for k in range(draw(st.integers(1, 2))):
        req = draw(st.sampled_from([{GPU: 1}, {GPU: "500m", "cpu": 1}, {"cpu": 2}, {GPU: 2}]))
        pod: dict[str, Any] = {
            "name": f"r{k}",
            "gang": f"r{k}",
            "queue": "q",
            "node": draw(st.sampled_from(names)),
            "requests": req,
        }
        if draw(st.booleans()):
            pod["replicas"] = 2
            if draw(st.booleans()):
                pod["min_member"] = 1  # elastic: may give up one pod
        running.append(pod)
    gangs = []
    for k in range(draw(st.integers(1, 2))):
        req: dict[str, Any] = {GPU: draw(st.sampled_from(["500m", 1, 2]))}
        if draw(st.booleans()):
            req["cpu"] = 2
        gangs.append(
            {
                "name": f"g{k}",
                "queue": "q",
                "priority": 10,
                "roles": [{"name": "w", "count": draw(st.integers(1, 2)), "requests": req}],
            }
        )
    data: dict[str, Any] = {
        "preemption": {"enabled": True},
        "levels": [{"name": "leaf"}],
        "nodes": nodes,
        "queues": [{"name": "q", "preemption": {"within_queue": "lower_priority"}}],
        "gangs": gangs,
        "running": running,
    }
    if draw(st.booleans()):
        data["workload"] = [
            {"requests": {GPU: "500m", "cpu": 1}, "weight": 2},
            {"requests": {GPU: 1}},
        ]
    return data


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(preemption_instances(), st.sampled_from([6000, 0]))
def test_the_term_counts_what_victims_keep_on_every_solution(
    data: dict[str, Any], exact_limit: int
) -> None:
    """With victims, the devices and CPU that evicted pods free count as free, those kept
    pods hold as held: the term equals the score's entry of the plan with its evictions."""
    s, _ = load_instance({**API, **data})
    ctx = CycleContext.of(s)
    ix = build_index(ctx, SolverConfig(exact_limit=exact_limit), None)
    if not ix.items:
        return
    model = cp_model.CpModel()
    v = Variables(model, ix)
    Constraints(model, ix, v).add_all()
    terms: dict[str, objective.ObjectiveTerm] = {}
    objective._expected_fragmentation(model, ix, v, terms)
    term = terms[NAME]
    expr = term.expr if term.expr is not None else 0
    made = v.by_kind()
    decisions = [var for k in KINDS if k.decision for var in made[k.name].values()]
    solver = cp_model.CpSolver()
    solver.parameters.enumerate_all_solutions = True
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 20.0
    collect = _Collect(decisions, expr)
    solver.solve(model, collect)
    assert collect.seen
    for key, values in collect.seen.items():
        assert len(values) == 1, values
        fixed = model.clone()
        for var, val in zip(decisions, key, strict=True):
            fixed.add(fixed.get_int_var_from_proto_index(var.index) == val)
        one = cp_model.CpSolver()
        one.parameters.num_workers = 1
        assert one.solve(fixed) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        pods, evictions = solution_plan(ctx, ix, v.read(one), None)
        plan = assemble_plan(s, pods, {}, evictions=evictions)
        assert verify(s, plan) == []
        assert score(s, plan)[NAME] == next(iter(values)) + term.const


def test_nodes_alike_but_in_free_cpu_keep_their_own_measure() -> None:
    # n0 and n1 have the same GPUs and model and differ only in free CPU (a running pod
    # takes 6 of n1's 8): the workload's shape (1 GPU, 3 CPU) fits n0 but never n1, so the
    # per-state memo of the measure must tell them apart. By hand, F = milli-GPU the shape
    # cannot use: on n0 0 while a whole GPU is free; on n1 every free milli-GPU.
    # no pod: 0 + 2000; the pod on n0: 0 + 2000; on n1: 0 + 1000.
    data = {
        "levels": [{"name": "leaf"}],
        "nodes": [
            {
                "name": f"n{i}",
                "gpu_model": "A",
                "allocatable": {GPU: 2, "cpu": 8},
                "domains": {"leaf": "l0"},
            }
            for i in range(2)
        ],
        "queues": [{"name": "q"}],
        "gangs": [
            {"name": "g", "queue": "q", "roles": [{"name": "w", "count": 1, "requests": {GPU: 1}}]}
        ],
        "running": [{"name": "r", "node": "n1", "requests": {"cpu": 6}}],
        "workload": [{"requests": {GPU: 1, "cpu": 3}, "weight": 1}],
    }
    s, _ = load_instance({**API, **data})
    ix = build_index(CycleContext.of(s), SolverConfig(exact_limit=6000), None)
    assert ix.exact and len(ix.items) == 1
    model = cp_model.CpModel()
    v = Variables(model, ix)
    Constraints(model, ix, v).add_all()
    terms: dict[str, objective.ObjectiveTerm] = {}
    objective._expected_fragmentation(model, ix, v, terms)
    term = terms[NAME]
    assert term.expr is not None
    for where, want in {None: -2000, "n0": -2000, "n1": -1000}.items():
        fixed = model.clone()
        for node in ("n0", "n1"):
            x = v.x(0, ix.block_of_node[ix.node_index[node]])
            assert x is not None
            fixed.add(fixed.get_int_var_from_proto_index(x.index) == int(node == where))
        one = cp_model.CpSolver()
        one.parameters.num_workers = 1
        assert one.solve(fixed) == cp_model.OPTIMAL
        assert int(one.value(term.expr)) + term.const == want, where
