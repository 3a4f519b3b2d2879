"""Each constraint family on its own, in the style of the CP-SAT primer: a two-node model with
only that family, a pinned variable that makes it infeasible, and its neighbour that is
feasible; without the family the infeasible pin is feasible again, so it is the family that
forbids it. Every expected answer is worked out by hand beside its case."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest
from ortools.sat.python import cp_model

from gangplan.models import Snapshot, load_instance
from gangplan.solver.context import CycleContext
from gangplan.solver.model.constraints import Constraints
from gangplan.solver.model.indexing import Index, build_index
from gangplan.solver.model.moves import MoveSpec
from gangplan.solver.model.variables import Variables
from gangplan.solver.result import SolverConfig

GPU, NIC = "nvidia.com/gpu", "rdma/hca"
EXACT = SolverConfig(max_pairs=0)
API = {"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance"}

Pin = Callable[["Model"], list[tuple[cp_model.IntVar, int]]]


@dataclass
class Model:
    """One family (or several) built on an instance, with lookups by name for pins."""

    ix: Index
    v: Variables
    m: cp_model.CpModel

    def item(self, gang: str, role: str = "w") -> int:
        for it in self.ix.items:
            if any(g.name == gang for g in it.gangs) and it.role.name == role:
                return it.id
        raise KeyError((gang, role))

    def node(self, name: str) -> int:
        return self.ix.node_index[name]

    def x(self, gang: str, node: str, role: str = "w") -> cp_model.IntVar:
        var = self.v.x(self.item(gang, role), self.ix.block_of_node[self.node(node)])
        assert var is not None, (gang, role, node)
        return var

    def shape(self, gang: str, role: str = "w") -> int:
        return self.ix.items[self.item(gang, role)].shape

    def leaf(self, node: str, level: str = "leaf") -> object:
        return self.ix.domain_of_block[level][self.ix.block_of_node[self.node(node)]]

    def victim(self, gang: str) -> int:
        assert self.ix.victims is not None
        return next(v.id for v in self.ix.victims.victims if v.gang.key == f"default/{gang}")

    def stay(self, gang: str) -> cp_model.IntVar:
        return self.v.stay(self.victim(gang))

    def keep(self, gang: str) -> cp_model.IntVar:
        assert self.ix.victims is not None
        (unit,) = self.ix.victims.victims[self.victim(gang)].units
        return self.v.keep(unit)


def build(
    data: dict[str, Any],
    families: tuple[str, ...],
    cfg: SolverConfig = EXACT,
    moves: MoveSpec | None = None,
) -> Model:
    s, warnings = load_instance({**API, **data})
    assert warnings == []
    ctx = CycleContext.of(s)
    ctx.moves = moves
    ix = build_index(ctx, cfg, None)
    m = cp_model.CpModel()
    v = Variables(m, ix)
    cons = Constraints(m, ix, v)
    for f in families:
        cons.add(f)
    return Model(ix, v, m)


def feasible(model: Model, pins: list[tuple[cp_model.IntVar, int]]) -> bool:
    trial = model.m.clone()
    for var, value in pins:
        trial.add(trial.get_int_var_from_proto_index(var.index) == value)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 5.0
    status = solver.solve(trial)
    assert status in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE)
    return status != cp_model.INFEASIBLE


@dataclass(frozen=True)
class Case:
    family: str
    data: dict[str, Any]
    bad: Pin
    good: Pin
    others: tuple[str, ...] = ()
    """families the rule needs beside its own (e.g. the 'uses' a required level sums)"""
    cfg: SolverConfig = EXACT
    moves: MoveSpec | None = None
    """replan: the running gangs that may move and their copies"""


def nodes(*specs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": f"n{i + 1}", **spec} for i, spec in enumerate(specs)]


def one(name: str, requests: dict[str, Any], count: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "queue": extra.pop("queue", "q"),
        "roles": [{"name": "w", "count": count, "requests": requests}],
        **extra,
    }


QUAD = {
    # two PCIe switches of 2 GPUs each, one NIC each
    "numa_nodes": [
        {
            "name": "numa0",
            "pcie_switches": [
                {"name": "p0", "gpus": ["g0", "g1"], "nics": ["r0", "r1"]},
                {"name": "p1", "gpus": ["g2", "g3"], "nics": ["r2", "r3"]},
            ],
        }
    ]
}
HALF = {
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
LEAVES = [{"name": "leaf"}]


BIG_HOLDS_N1: dict[str, Any] = {
    # gang big's reservation of n1's 4 GPUs from t = 1000 s
    "gang": "big",
    "level": "node",
    "domain": "n1",
    "start": 1000,
    "held": [{"node": "n1", "resources": {GPU: 4000}}],
}
TWO_LEAVES: dict[str, Any] = {
    # n1 in leaf l1, n2 in leaf l2, 4 GPUs each
    "levels": LEAVES,
    "nodes": nodes(
        {"domains": {"leaf": "l1"}, "allocatable": {GPU: 4}},
        {"domains": {"leaf": "l2"}, "allocatable": {GPU: 4}},
    ),
    "queues": [{"name": "q"}],
}


MOVE_DATA: dict[str, Any] = {
    # n1: v (4 GPUs) of 8; n2: u (4 GPUs) of 8; their copies vmv and umv pending
    "preemption": {"enabled": True, "grace_s": 0},
    "nodes": nodes({"allocatable": {GPU: 8}}, {"allocatable": {GPU: 8}}),
    "queues": [{"name": "q"}],
    "running": [
        {"name": "v-0", "gang": "v", "node": "n1", "queue": "q", "requests": {GPU: 4}},
        {"name": "u-0", "gang": "u", "node": "n2", "queue": "q", "requests": {GPU: 4}},
    ],
    "gangs": [
        one("vmv", {GPU: 4}, preemption_policy="Never", creation_time=1),
        one("umv", {GPU: 4}, preemption_policy="Never", creation_time=2),
    ],
}


CASES = {
    # g: 3 pods of 1 GPU, not elastic: placed(g) ∈ {0, 3}. Two on n1 and none on n2 is 2
    # pods: infeasible; two on n1 and one on n2 is 3: feasible.
    "gang": Case(
        "gang_all_or_nothing",
        {
            "nodes": nodes({"allocatable": {GPU: 4}}, {"allocatable": {GPU: 4}}),
            "queues": [{"name": "q"}],
            "gangs": [one("g", {GPU: 1}, count=3)],
        },
        bad=lambda t: [(t.x("g", "n1"), 2), (t.x("g", "n2"), 0)],
        good=lambda t: [(t.x("g", "n1"), 2), (t.x("g", "n2"), 1)],
    ),
    # a role's own minimum: launcher l (1 pod, its min_member 1) and workers w (2 pods,
    # min_member 0) of an elastic gang of min_member 1: workers alone are below the
    # launcher's minimum (infeasible); the launcher alone meets both (feasible).
    "role-minimum": Case(
        "gang_all_or_nothing",
        {
            "nodes": nodes({"allocatable": {GPU: 4, "cpu": 4}}, {"allocatable": {GPU: 4}}),
            "queues": [{"name": "q"}],
            "gangs": [
                {
                    "name": "g",
                    "queue": "q",
                    "min_member": 1,
                    "roles": [
                        {"name": "l", "count": 1, "min_member": 1, "requests": {"cpu": 1}},
                        {"name": "w", "count": 2, "requests": {GPU: 1}},
                    ],
                }
            ],
        },
        bad=lambda t: [(t.x("g", "n1", "l"), 0), (t.x("g", "n2"), 2)],
        good=lambda t: [(t.x("g", "n1", "l"), 1), (t.x("g", "n2"), 0)],
    ),
    # n1 and n2 have 4 cpu each; a asks 3, b asks 2: both on n1 is 5 > 4 (infeasible); a on
    # n1, b on n2 (feasible).
    "capacity": Case(
        "node_capacity",
        {
            "nodes": nodes({"allocatable": {"cpu": 4}}, {"allocatable": {"cpu": 4}}),
            "queues": [{"name": "q"}],
            "gangs": [one("a", {"cpu": 3}), one("b", {"cpu": 2})],
        },
        bad=lambda t: [(t.x("a", "n1"), 1), (t.x("b", "n1"), 1)],
        good=lambda t: [(t.x("a", "n1"), 1), (t.x("b", "n2"), 1)],
    ),
    # n1: 2 GPUs, a running 500m share on gpu-0 leaves (500, 1000); n2: 2 free GPUs. s asks a
    # 600m share (only gpu-1 holds it on n1), w one whole GPU (only gpu-1 is fully free on
    # n1): both on n1 want gpu-1 (infeasible); s on n1, w on n2 (feasible).
    "gpu-devices": Case(
        "gpu_devices",
        {
            "nodes": nodes({"allocatable": {GPU: 2}}, {"allocatable": {GPU: 2}}),
            "queues": [{"name": "q"}],
            "running": [
                {"name": "r", "node": "n1", "requests": {GPU: "500m"}, "devices": ["gpu-0"]}
            ],
            "gangs": [one("s", {GPU: "600m"}), one("w", {GPU: 1})],
        },
        bad=lambda t: [(t.x("s", "n1"), 1), (t.x("w", "n1"), 1)],
        good=lambda t: [(t.x("s", "n1"), 1), (t.x("w", "n2"), 1)],
    ),
    # n1 (layout QUAD: p0 = g0, g1 + r0, r1; p1 = g2, g3 + r2, r3) runs a pod on g0 and r2:
    # p0 has 1 free GPU/NIC pair, p1 1 pair (g2/g3 with r3): 3 GPUs and 3 NICs free, but 2
    # pairs. j asks 2 GPUs + 2 NICs, k 1 GPU + 1 NIC, both joint pcie (as many NICs as GPUs,
    # pairwise per switch): j and k on n1 need 3 pairs (infeasible, though GPUs and NICs
    # suffice); j on n1 and k on n2 (feasible).
    "joint": Case(
        "joint_gpu_nic",
        {
            "resources": {"gpu": GPU, "nic": NIC},
            "device_layouts": {"quad": QUAD},
            "nodes": nodes(
                {"device_layout": "quad", "allocatable": {GPU: 4, NIC: 4}},
                {"device_layout": "quad", "allocatable": {GPU: 4, NIC: 4}},
            ),
            "queues": [{"name": "q"}],
            "running": [
                {"name": "r", "node": "n1", "requests": {GPU: 1, NIC: 1}, "devices": ["g0", "r2"]}
            ],
            "gangs": [
                one("j", {GPU: 2, NIC: 2}, joint="pcie"),
                one("k", {GPU: 1, NIC: 1}, joint="pcie"),
            ],
        },
        bad=lambda t: [(t.x("j", "n1"), 1), (t.x("k", "n1"), 1)],
        good=lambda t: [(t.x("j", "n1"), 1), (t.x("k", "n2"), 1)],
    ),
    # fewer NICs than GPUs: f asks 2 GPUs + 1 NIC, joint pcie, on n1 (layout HALF: p0 = g0,
    # g1 + r0; p1 = g2, g3 + r1). Its NIC must come from a switch holding its GPUs: both
    # GPUs from p0 and the NIC from p1 is infeasible; GPUs and NIC from p0 is feasible.
    "joint-fewer-nics": Case(
        "joint_gpu_nic",
        {
            "resources": {"gpu": GPU, "nic": NIC},
            "device_layouts": {"half": HALF},
            "nodes": nodes(
                {"device_layout": "half", "allocatable": {GPU: 4, NIC: 2}},
                {"device_layout": "half", "allocatable": {GPU: 4, NIC: 2}},
            ),
            "queues": [{"name": "q"}],
            "gangs": [one("f", {GPU: 2, NIC: 1}, joint="pcie")],
        },
        bad=lambda t: [
            (t.x("f", "n1"), 1),
            (t.v.joint(t.shape("f"), t.node("n1"), "p0"), 2),
            (t.v.joint_nic(t.shape("f"), t.node("n1"), "p1"), 1),
        ],
        good=lambda t: [
            (t.x("f", "n1"), 1),
            (t.v.joint(t.shape("f"), t.node("n1"), "p0"), 2),
            (t.v.joint_nic(t.shape("f"), t.node("n1"), "p0"), 1),
        ],
    ),
    # n1 and n2 have 2 NICs each (no GPUs): a asks 1, b asks 2: both on n1 is 3 > 2
    # (infeasible); a on n1, b on n2 (feasible).
    "nics": Case(
        "nics",
        {
            "resources": {"gpu": GPU, "nic": NIC},
            "nodes": nodes({"allocatable": {NIC: 2}}, {"allocatable": {NIC: 2}}),
            "queues": [{"name": "q"}],
            "gangs": [one("a", {NIC: 1}), one("b", {NIC: 2})],
        },
        bad=lambda t: [(t.x("a", "n1"), 1), (t.x("b", "n1"), 1)],
        good=lambda t: [(t.x("a", "n1"), 1), (t.x("b", "n2"), 1)],
    ),
    # n1 in leaf l1, n2 in l2; g has 2 pods: a pod on n1 with uses[g, leaf, l1] = 0 is
    # infeasible (a pod in a domain means the gang uses it); with uses = 1, feasible.
    "uses": Case(
        "domain_uses",
        {
            "levels": LEAVES,
            "nodes": nodes(
                {"domains": {"leaf": "l1"}, "allocatable": {GPU: 4}},
                {"domains": {"leaf": "l2"}, "allocatable": {GPU: 4}},
            ),
            "queues": [{"name": "q"}],
            "gangs": [one("g", {GPU: 1}, count=2)],
        },
        bad=lambda t: [(t.x("g", "n1"), 1), (t.v.uses(("g", 0), "leaf", t.leaf("n1")), 0)],
        good=lambda t: [(t.x("g", "n1"), 1), (t.v.uses(("g", 0), "leaf", t.leaf("n1")), 1)],
    ),
    # levels spine > leaf, n1 in s1/l1: using leaf l1 without its spine s1 is infeasible;
    # with it, feasible.
    "uses-parent": Case(
        "domain_uses",
        {
            "levels": [{"name": "spine"}, *LEAVES],
            "nodes": nodes(
                {"domains": {"spine": "s1", "leaf": "l1"}, "allocatable": {GPU: 4}},
                {"domains": {"spine": "s2", "leaf": "l2"}, "allocatable": {GPU: 4}},
            ),
            "queues": [{"name": "q"}],
            "gangs": [one("g", {GPU: 1}, count=2)],
        },
        bad=lambda t: [
            (t.v.uses(("g", 0), "leaf", t.leaf("n1")), 1),
            (t.v.uses(("g", 0), "spine", t.leaf("n1", "spine")), 0),
        ],
        good=lambda t: [
            (t.v.uses(("g", 0), "leaf", t.leaf("n1")), 1),
            (t.v.uses(("g", 0), "spine", t.leaf("n1", "spine")), 1),
        ],
    ),
    # g (2 pods, required leaf), n1 in l1 and n2 in l2: one pod on each is two leaves
    # (infeasible); both on n1 (feasible). The rule sums the 'uses' of domain_uses.
    "required": Case(
        "required_level",
        {
            "levels": LEAVES,
            "nodes": nodes(
                {"domains": {"leaf": "l1"}, "allocatable": {GPU: 4}},
                {"domains": {"leaf": "l2"}, "allocatable": {GPU: 4}},
            ),
            "queues": [{"name": "q"}],
            "gangs": [one("g", {GPU: 1}, count=2, topology={"required": "leaf"})],
        },
        bad=lambda t: [(t.x("g", "n1"), 1), (t.x("g", "n2"), 1)],
        good=lambda t: [(t.x("g", "n1"), 2), (t.x("g", "n2"), 0)],
        others=("domain_uses",),
    ),
    # g (2 pods of 4 GPUs), n1 in l1 and n2 in l2, 4 GPUs each: each leaf holds one of its
    # pods, so an admitted g uses both leaves (k = 2). Admitted with l2's 'uses' at 0 is
    # infeasible (l1's alone is 1 < 2); with both at 1, feasible. Without the family the
    # 'uses' are free (no domain_uses link either), so the first pin is feasible.
    "spread-floor": Case(
        "spread_floor",
        {
            **TWO_LEAVES,
            "gangs": [one("g", {GPU: 4}, count=2)],
        },
        bad=lambda t: [
            (t.v.admit(0), 1),
            (t.v.uses(("g", 0), "leaf", t.leaf("n2")), 0),
        ],
        good=lambda t: [
            (t.v.admit(0), 1),
            (t.v.uses(("g", 0), "leaf", t.leaf("n1")), 1),
            (t.v.uses(("g", 0), "leaf", t.leaf("n2")), 1),
        ],
    ),
    # an elastic gang (min_member 1 of 2 pods of 4 GPUs) fits one leaf at its minimum:
    # k = 1, so admitted with no leaf used is infeasible, one leaf feasible
    "spread-floor-elastic": Case(
        "spread_floor",
        {
            **TWO_LEAVES,
            "gangs": [one("g", {GPU: 4}, count=2, min_member=1)],
        },
        bad=lambda t: [
            (t.v.admit(0), 1),
            (t.v.uses(("g", 0), "leaf", t.leaf("n1")), 0),
            (t.v.uses(("g", 0), "leaf", t.leaf("n2")), 0),
        ],
        good=lambda t: [
            (t.v.admit(0), 1),
            (t.v.uses(("g", 0), "leaf", t.leaf("n1")), 1),
            (t.v.uses(("g", 0), "leaf", t.leaf("n2")), 0),
        ],
    ),
    # a role's own required level: launcher l (1 pod) and workers w (2 pods, required leaf):
    # the workers on n1 and n2 are two leaves (infeasible); both workers on n2 with the
    # launcher on n1, in the other leaf, is feasible (the level binds the role only).
    "role-required": Case(
        "required_level",
        {
            "levels": LEAVES,
            "nodes": nodes(
                {"domains": {"leaf": "l1"}, "allocatable": {GPU: 4, "cpu": 4}},
                {"domains": {"leaf": "l2"}, "allocatable": {GPU: 4, "cpu": 4}},
            ),
            "queues": [{"name": "q"}],
            "gangs": [
                {
                    "name": "g",
                    "queue": "q",
                    "roles": [
                        {"name": "l", "count": 1, "requests": {"cpu": 1}},
                        {
                            "name": "w",
                            "count": 2,
                            "requests": {GPU: 1},
                            "topology": {"required": "leaf"},
                        },
                    ],
                }
            ],
        },
        bad=lambda t: [(t.x("g", "n1"), 1), (t.x("g", "n2"), 1)],
        good=lambda t: [(t.x("g", "n1", "l"), 1), (t.x("g", "n1"), 0), (t.x("g", "n2"), 2)],
        others=("domain_uses",),
    ),
    # queue q has a max of 2 GPUs and a running pod holding 1: a and b (1 GPU each) together
    # bring it to 3 (infeasible); a alone to 2 (feasible).
    "queue-max": Case(
        "queue_max",
        {
            "nodes": nodes({"allocatable": {GPU: 4, "cpu": 4}}, {"allocatable": {GPU: 4}}),
            "queues": [{"name": "q", "max": {GPU: 2}}],
            "running": [{"name": "r", "node": "n1", "queue": "q", "requests": {GPU: 1}}],
            "gangs": [one("a", {GPU: 1}), one("b", {GPU: 1, "cpu": 1})],
        },
        bad=lambda t: [(t.x("a", "n2"), 1), (t.x("b", "n1"), 1)],
        good=lambda t: [(t.x("a", "n2"), 1), (t.x("b", "n1"), 0)],
    ),
    # aggregated mode (blocks are leaves): n1 and n2 in leaf l1. g puts 2 pods in block l1;
    # the pods of its shape on n1 and n2 must then add up to 2: 0 and 0 is infeasible, 1
    # and 1 feasible.
    "block-link": Case(
        "block_link",
        {
            "levels": LEAVES,
            "nodes": nodes(
                {"domains": {"leaf": "l1"}, "allocatable": {GPU: 4}},
                {"domains": {"leaf": "l1"}, "allocatable": {GPU: 4}},
            ),
            "queues": [{"name": "q"}],
            "gangs": [one("g", {GPU: 1}, count=2)],
        },
        bad=lambda t: [(t.x("g", "n1"), 2), *((z, 0) for z in _zs(t, "g"))],
        good=lambda t: [(t.x("g", "n1"), 2), *((z, 1) for z in _zs(t, "g"))],
        cfg=replace(EXACT, exact_limit=0),
    ),
    # preemption: a running gang v (priority 0) holds 2 of n1's 4 cpu; h (priority 10, same
    # queue, within_queue lower_priority) asks 3. With v kept, 2 + 3 > 4 (infeasible);
    # with v evicted, 3 <= 4 (feasible): capacity counts what a victim keeps.
    "capacity-victim": Case(
        "node_capacity",
        {
            "preemption": {"enabled": True},
            "nodes": nodes({"allocatable": {"cpu": 4}}, {"allocatable": {"cpu": 1}}),
            "queues": [{"name": "q", "preemption": {"within_queue": "lower_priority"}}],
            "running": [
                {"name": "v-0", "gang": "v", "node": "n1", "queue": "q", "requests": {"cpu": 2}}
            ],
            "gangs": [one("h", {"cpu": 3}, priority=10)],
        },
        bad=lambda t: [(t.stay("v"), 1), (t.x("h", "n1"), 1)],
        good=lambda t: [(t.stay("v"), 0), (t.x("h", "n1"), 1)],
    ),
    # an elastic running gang e of 3 pods with min_member 2 on n1: kept running, it keeps at
    # least 2 — 1 pod kept is infeasible, 2 feasible.
    "victim-elastic": Case(
        "victims_whole",
        {
            "preemption": {"enabled": True},
            "nodes": nodes({"allocatable": {"cpu": 4}}, {"allocatable": {"cpu": 4}}),
            "queues": [{"name": "q", "preemption": {"within_queue": "lower_priority"}}],
            "running": [
                {
                    "name": "e",
                    "replicas": 3,
                    "gang": "e",
                    "min_member": 2,
                    "node": "n1",
                    "queue": "q",
                    "requests": {"cpu": 1},
                }
            ],
            "gangs": [one("h", {"cpu": 2}, priority=10)],
        },
        bad=lambda t: [(t.stay("e"), 1), (t.keep("e"), 1)],
        good=lambda t: [(t.stay("e"), 1), (t.keep("e"), 2)],
    ),
    # no eviction for nothing: v holds all 4 GPUs of n1, n2 has 4 free; h (priority 10)
    # asks 4. Evicting v while h goes to n2 frees nothing h uses (infeasible); with h on n1,
    # putting v back would need 4 + 4 > 4 GPUs there (feasible).
    "eviction-needed": Case(
        "evictions_needed",
        {
            "preemption": {"enabled": True},
            "nodes": nodes({"allocatable": {GPU: 4}}, {"allocatable": {GPU: 4}}),
            "queues": [{"name": "q", "preemption": {"within_queue": "lower_priority"}}],
            "running": [
                {"name": "v-0", "gang": "v", "node": "n1", "queue": "q", "requests": {GPU: 4}}
            ],
            "gangs": [one("h", {GPU: 4}, priority=10)],
        },
        bad=lambda t: [(t.stay("v"), 0), (t.x("h", "n2"), 1), (t.x("h", "n1"), 0)],
        good=lambda t: [(t.stay("v"), 0), (t.x("h", "n1"), 1), (t.x("h", "n2"), 0)],
    ),
    # replan: v (4 GPUs on n1) may move, its copy vmv re-places it. Evicted and placed
    # nowhere is infeasible; evicted and placed on n2 is a move.
    "move-replaced": Case(
        "moves_replaced",
        MOVE_DATA,
        bad=lambda t: [(t.stay("v"), 0), (t.x("vmv", "n1"), 0), (t.x("vmv", "n2"), 0)],
        good=lambda t: [(t.stay("v"), 0), (t.x("vmv", "n2"), 1)],
        moves=MoveSpec({"default/v": "default/vmv", "default/u": "default/umv"}),
    ),
    # the budget: one move at most; moving both v and u (to each other's node) is refused,
    # moving v alone (to n2's free half) is allowed
    "move-budget": Case(
        "moves_replaced",
        MOVE_DATA,
        bad=lambda t: [(t.stay("v"), 0), (t.stay("u"), 0)],
        good=lambda t: [(t.stay("v"), 0), (t.stay("u"), 1), (t.x("vmv", "n2"), 1)],
        moves=MoveSpec({"default/v": "default/vmv", "default/u": "default/umv"}, max_gangs=1),
    ),
    # reservations: big (4 GPUs) holds n1's 4 GPUs from t=1000 (clock 700, nothing running:
    # room = 4 free + 0 released - 4 held = 0). s (1 GPU, no expected duration) may not
    # backfill it: s on n1 is infeasible, s on n2 feasible.
    "held-capacity": Case(
        "held_capacity",
        {
            "preemption": {"now": 700},
            "nodes": nodes({"allocatable": {GPU: 4}}, {"allocatable": {GPU: 4}}),
            "queues": [{"name": "q"}],
            "gangs": [one("big", {GPU: 4}), one("s", {GPU: 1})],
            "reservations": [BIG_HOLDS_N1],
        },
        bad=lambda t: [(t.x("s", "n1"), 1)],
        good=lambda t: [(t.x("s", "n2"), 1)],
    ),
    # the same hold in aggregated mode (n1 and n2 in one leaf), for a gang that requires the
    # node level (its two
    # 1-GPU pods on one node: an item counted per node, in n1's own single-node block):
    # both pods on n1 take 2 of the 0 GPUs big's hold leaves there (infeasible); on n2,
    # feasible. (The rows once read only the block of n1's leaf pattern, where such an
    # item has no count: the pods went on n1 unchecked and the verifier refused the plan.)
    "held-capacity-node-level": Case(
        "held_capacity",
        {
            "preemption": {"now": 700},
            "levels": LEAVES,
            "nodes": nodes(
                {"domains": {"leaf": "l1"}, "allocatable": {GPU: 4}},
                {"domains": {"leaf": "l1"}, "allocatable": {GPU: 4}},
            ),
            "queues": [{"name": "q"}],
            "gangs": [
                one("big", {GPU: 4}),
                one("s", {GPU: 1}, count=2, topology={"required": "node"}),
            ],
            "reservations": [BIG_HOLDS_N1],
        },
        bad=lambda t: [(t.v.x(t.item("s"), t.ix.node_blocks[t.node("n1")]), 2)],
        good=lambda t: [(t.v.x(t.item("s"), t.ix.node_blocks[t.node("n2")]), 2)],
        cfg=replace(EXACT, exact_limit=0),
    ),
}


def _zs(t: Model, gang: str) -> list[cp_model.IntVar]:
    """z[s, n] of the gang's shape on n1 and n2 (aggregated mode)."""
    s = t.shape(gang)
    return [dict(t.v.shapes_on(t.node(n)))[s] for n in ("n1", "n2")]


def test_every_family_has_a_case() -> None:
    assert {c.family for c in CASES.values()} == set(Constraints.FAMILIES)


@pytest.mark.parametrize("name", list(CASES))
def test_the_family_forbids_the_bad_pin_and_allows_its_neighbour(name: str) -> None:
    case = CASES[name]
    with_it = build(case.data, (*case.others, case.family), case.cfg, case.moves)
    assert not feasible(with_it, case.bad(with_it))
    assert feasible(with_it, case.good(with_it))
    without = build(case.data, case.others, case.cfg, case.moves)
    assert feasible(without, case.bad(without))


def test_the_instances_are_two_node_snapshots() -> None:
    for case in CASES.values():
        s: Snapshot = load_instance({**API, **case.data})[0]
        assert len(s.nodes) == 2


@pytest.mark.parametrize("family", ["node_capacity", "gpu_devices"])
def test_a_family_built_node_by_node_reports_its_progress(family: str) -> None:
    # 100 nodes of 4 GPUs, one gang asking a GPU share on each: the family reports after
    # every PROGRESS_EVERY (32) nodes, so at 32, 64 and 96 of 100 nodes; a report that
    # raises stops the family there (the builder's time check does so)
    nodes = [{"name": f"n{i:03d}", "allocatable": {GPU: 4, "cpu": 8}} for i in range(100)]
    gangs = [
        {
            "name": f"g{i:03d}",
            "queue": "q",
            "roles": [{"name": "w", "count": 1, "requests": {GPU: "500m", "cpu": 1}}],
        }
        for i in range(100)
    ]
    s, warnings = load_instance({**API, "nodes": nodes, "queues": [{"name": "q"}], "gangs": gangs})
    assert warnings == []
    ix = build_index(CycleContext.of(s), EXACT, None)
    m = cp_model.CpModel()
    seen: list[tuple[str, float]] = []
    Constraints(m, ix, Variables(m, ix), progress=lambda f, share: seen.append((f, share))).add(
        family
    )
    assert seen == [(family, 0.32), (family, 0.64), (family, 0.96)]

    class Stop(Exception):
        pass

    def stop(f: str, share: float) -> None:
        raise Stop

    m2 = cp_model.CpModel()
    cons = Constraints(m2, ix, Variables(m2, ix), progress=stop)
    with pytest.raises(Stop):
        cons.add(family)
