"""The CP-SAT model as a whole (solver/model/): the variables container makes every variable
and hints every decision variable; the constraint families do not depend on their order."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest
from ortools.sat.python import cp_model

from gangplan.adapters.files import load_snapshot
from gangplan.models import Plan, Snapshot, load_instance
from gangplan.solver.context import CycleContext
from gangplan.solver.cycle.pipeline import run_baseline, solve_cycle
from gangplan.solver.judges.verify import verify
from gangplan.solver.model.constraints import Constraints
from gangplan.solver.model.indexing import build_index
from gangplan.solver.model.objective import build_terms
from gangplan.solver.model.variables import KINDS, Variables
from gangplan.solver.result import CycleResult, CycleStatus, SolverConfig

CASES = Path(__file__).resolve().parents[3] / "instances" / "cases"
DET = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=10.0, seed=1)

GPU, NIC = "nvidia.com/gpu", "rdma/hca"
MIXED: dict[str, Any] = {
    "apiVersion": "gangplan.io/v1alpha1",
    "kind": "Instance",
    "resources": {"gpu": GPU, "nic": NIC},
    "levels": [{"name": "leaf"}],
    "device_layouts": {
        "quad": {
            "numa_nodes": [
                {
                    "name": "numa0",
                    "pcie_switches": [
                        {"name": "p0", "gpus": ["g0", "g1"], "nics": ["r0"]},
                        {"name": "p1", "gpus": ["g2", "g3"], "nics": ["r1"]},
                    ],
                }
            ]
        }
    },
    "nodes": [
        {
            "name": f"n{i}",
            "domains": {"leaf": f"l{i // 2}"},
            "allocatable": {"cpu": 8, "memory": "32Gi", GPU: 4} | ({NIC: 2} if i < 2 else {}),
            **({"device_layout": "quad"} if i < 2 else {}),
        }
        for i in range(4)
    ],
    "queues": [{"name": "q1", "weight": 2}, {"name": "q2", "max": {GPU: 4}}],
    "running": [{"name": "r", "node": "n2", "requests": {GPU: "500m", "cpu": 1}}],
    "gangs": [
        {
            "name": "a",
            "queue": "q1",
            "joint": "pcie",
            # one pod: the model holds at most one pod of fewer NICs than GPUs per node
            "roles": [{"name": "w", "count": 1, "requests": {"cpu": 1, GPU: 2, NIC: 1}}],
        },
        {
            "name": "b",
            "queue": "q2",
            "topology": {"required": "leaf"},
            "roles": [{"name": "w", "count": 3, "requests": {"cpu": 1, GPU: 1}}],
        },
        {
            "name": "c",
            "queue": "q1",
            "roles": [{"name": "w", "count": 2, "requests": {"cpu": 1, GPU: "500m"}}],
        },
        {
            "name": "d",
            "queue": "q2",
            "roles": [
                {"name": "l", "count": 1, "requests": {"cpu": 2}},
                {
                    "name": "w",
                    "count": 2,
                    "requests": {"cpu": 1, GPU: 1},
                    "topology": {"preferred": "leaf"},
                },
            ],
        },
    ],
}


BINDING: dict[str, Any] = {
    # leaves l0 = {n0, n1}, l1 = {n2, n3}, 4 GPUs each; running pods hold 3 GPUs of n0 and
    # of n2. b (2 pods x 4 GPUs) can only take n1 and n3; r (2 x 1 GPU, one leaf) then finds
    # one GPU per leaf. Split across leaves r would fit beside b (10 GPUs): the required
    # level is what makes the best plan b alone, 8 GPUs (r alone, 2, is worse).
    "apiVersion": "gangplan.io/v1alpha1",
    "kind": "Instance",
    "levels": [{"name": "leaf"}],
    "nodes": [
        {"name": f"n{i}", "domains": {"leaf": f"l{i // 2}"}, "allocatable": {GPU: 4}}
        for i in range(4)
    ],
    "queues": [{"name": "q"}],
    "running": [
        {"name": "r0", "node": "n0", "requests": {GPU: 3}},
        {"name": "r2", "node": "n2", "requests": {GPU: 3}},
    ],
    "gangs": [
        {"name": "b", "queue": "q", "roles": [{"name": "w", "count": 2, "requests": {GPU: 4}}]},
        {
            "name": "r",
            "queue": "q",
            "topology": {"required": "leaf"},
            "roles": [{"name": "w", "count": 2, "requests": {GPU: 1}}],
        },
    ],
}


PREEMPT: dict[str, Any] = {
    # preemption on; queue q lets its gangs evict lower priorities. Victims: w (2 pods of 2
    # GPUs on n0, whole), e (3 cpu pods on n1, elastic down to 1), s (a 500m GPU share on
    # n2). h (2 x 4 GPUs) and k (6 cpu), both priority 10, need their room; m (elastic, 2 x
    # 2 cpu, minimum 1) may evict for its minimum only.
    "apiVersion": "gangplan.io/v1alpha1",
    "kind": "Instance",
    "preemption": {"enabled": True},
    "nodes": [
        {"name": f"n{i}", "allocatable": {"cpu": 8, "memory": "32Gi", GPU: 4}} for i in range(3)
    ],
    "queues": [{"name": "q", "preemption": {"within_queue": "lower_priority"}}],
    "running": [
        {"name": "w", "replicas": 2, "gang": "w", "queue": "q", "node": "n0", "requests": {GPU: 2}},
        {
            "name": "e",
            "replicas": 3,
            "gang": "e",
            "min_member": 1,
            "queue": "q",
            "node": "n1",
            "requests": {"cpu": 2},
        },
        {"name": "s", "gang": "s", "queue": "q", "node": "n2", "requests": {GPU: "500m"}},
    ],
    "gangs": [
        {
            "name": "h",
            "queue": "q",
            "priority": 10,
            "roles": [{"name": "w", "count": 2, "requests": {"cpu": 1, GPU: 4}}],
        },
        {
            "name": "k",
            "queue": "q",
            "priority": 10,
            "roles": [{"name": "w", "count": 1, "requests": {"cpu": 6}}],
        },
        {
            "name": "m",
            "queue": "q",
            "priority": 10,
            "min_member": 1,
            "roles": [{"name": "w", "count": 2, "requests": {"cpu": 2}}],
        },
    ],
}


def _instances() -> list[tuple[str, Snapshot, SolverConfig]]:
    out = [("mixed", load_instance(MIXED)[0], DET), ("binding", load_instance(BINDING)[0], DET)]
    out.append(("preempt", load_instance(PREEMPT)[0], DET))
    for stem in ("05-required-leaf-b", "06-joint-gpu-nic", "08-queue-max", "03-fragmented-gpus"):
        out.append((stem, load_snapshot(CASES / f"{stem}.yaml")[0], DET))
    # the same mixed cycle counted per leaf (aggregated mode: the block link family)
    out.append(("mixed-aggregated", out[0][1], SolverConfig(**{**DET.__dict__, "exact_limit": 0})))
    return out


INSTANCES = _instances()


def _build(
    s: Snapshot, cfg: SolverConfig, previous: Plan | None = None
) -> tuple[cp_model.CpModel, Variables]:
    ctx = CycleContext.of(s)
    ix = build_index(ctx, cfg, previous)
    model = cp_model.CpModel()
    v = Variables(model, ix)
    Constraints(model, ix, v).add_all()
    build_terms(model, ix, v, ctx.shares, len(previous.pods) if previous else 0)
    return model, v


@pytest.mark.parametrize(("name", "s", "cfg"), INSTANCES, ids=[i[0] for i in INSTANCES])
def test_every_variable_is_the_containers_and_every_decision_is_hinted(
    name: str, s: Snapshot, cfg: SolverConfig
) -> None:
    previous = run_baseline(s, "topology-fit").plan
    model, v = _build(s, cfg, previous)
    made = v.by_kind()
    indices = {var.index for vs in made.values() for var in vs.values()}
    assert indices == set(range(len(model.proto.variables)))
    decisions = {var.index for k in KINDS if k.decision for var in made[k.name].values()}
    incumbent = list(run_baseline(s, "greedy").plan.pods)
    assert set(v.hint(incumbent)) == decisions
    # every variable has a name, unique in the model
    names = [var.name for var in model.proto.variables]
    assert all(names) and len(set(names)) == len(names)


def test_the_mixed_instance_exercises_every_kind() -> None:
    """So that the tests above see every kind (aggregated mode adds ``z``; exact mode the
    others: shares and whole GPUs on n2, joint groups with fewer NICs than GPUs on n0/n1, a
    required leaf, a role's preferred leaf, fair shares and fragmentation with the
    per-device measure, and with a previous plan the pods kept; the binding instance, whose
    nodes take no GPU shares, the measure by GPUs taken; the preemption instance: victims
    whole and elastic)."""
    kinds = set()
    for _name, s, cfg in (INSTANCES[0], INSTANCES[1], INSTANCES[2], INSTANCES[-1]):
        _model, v = _build(s, cfg, run_baseline(s, "greedy").plan)
        kinds |= {k for k, vs in v.by_kind().items() if vs}
    assert kinds == {k.name for k in KINDS}


def _orders() -> list[tuple[str, ...]]:
    rng = random.Random(8)
    base = Constraints.FAMILIES
    return [tuple(reversed(base)), *(tuple(rng.sample(base, len(base))) for _ in range(2))]


@pytest.mark.parametrize(
    ("name", "s", "cfg"),
    [
        # the aggregated copy takes about 10 s, the others 2 s together
        pytest.param(*i, id=i[0], marks=[pytest.mark.slow] if i[0] == "mixed-aggregated" else [])
        for i in INSTANCES
    ],
)
def test_the_families_may_be_added_in_any_order(
    name: str, s: Snapshot, cfg: SolverConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The optimum (deterministic mode, every tier proven optimal) is the same whatever
    order the families are added in; a family that read variables another one had to make
    first would lose its constraints in some order and change it (e.g. a required level
    added before the domain 'uses' exist would have nothing to sum)."""
    reference = solve_cycle(s, config=cfg)
    # in aggregated mode node locality is derived after the solve, not optimised: the cycle
    # may return the incumbent, better there; the entries before it are compared
    statuses = (
        {CycleStatus.OPTIMAL} if cfg.exact_limit else {CycleStatus.OPTIMAL, CycleStatus.INCUMBENT}
    )

    def proven(r: CycleResult) -> bool:
        # an optimal plan the locality polish then gathered (node locality, derived in
        # aggregated mode) is feasible: its entries below the polish lost their proof
        polished = any(n.startswith("locality polish:") for n in r.notes)
        return r.status in statuses or (
            not cfg.exact_limit and polished and r.status is CycleStatus.FEASIBLE
        )

    names = reference.score.names
    upto = len(names) if cfg.exact_limit else names.index("locality.node")
    assert proven(reference), reference.notes
    assert verify(s, reference.plan) == []
    if name == "binding":
        assert reference.score["p0.gpu_milli"] == 8000  # worked out beside BINDING
    for order in _orders():
        monkeypatch.setattr(Constraints, "FAMILIES", order)
        got = solve_cycle(s, config=cfg)
        assert proven(got), (order, got.notes)
        assert got.score.values[:upto] == reference.score.values[:upto], order
        assert verify(s, got.plan) == []


def test_an_unknown_family_is_named() -> None:
    s = INSTANCES[0][1]
    ctx = CycleContext.of(s)
    ix = build_index(ctx, DET, None)
    model = cp_model.CpModel()
    cons = Constraints(model, ix, Variables(model, ix))
    with pytest.raises(ValueError, match=r"no constraint family 'capacity'.*node_capacity"):
        cons.add("capacity")


def test_families_are_permutations_of_one_table() -> None:
    assert len(set(Constraints.FAMILIES)) == len(Constraints.FAMILIES) == 14
    for a, b in itertools.combinations(_orders(), 2):
        assert sorted(a) == sorted(b) == sorted(Constraints.FAMILIES)
