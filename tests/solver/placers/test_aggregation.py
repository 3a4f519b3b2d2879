"""The baselines over classes of nodes and gangs choose exactly what a scan of every node
chooses: on generated instances, every baseline's plan with the class indexes
(``CycleContext.of(s)``) equals its plan with ``indexed=False``, where every query scans
every candidate node, every gang is placed on its own and every domain is tried — pod for
pod, node and devices. And FGD's measure over GPU forms equals the sum over shapes."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangplan.adapters.traces.generate import generate_fat_tree
from gangplan.models import GPU_MILLI, Snapshot, load_instance
from gangplan.solver.context import CycleContext
from gangplan.solver.judges.fragmentation import (
    PodShape,
    Workload,
    _GroupedWorkload,
    shape_fragmentation,
)
from gangplan.solver.judges.verify import verify
from gangplan.solver.placers.baselines import BASELINES
from gangplan.solver.result import assemble_plan

GPU = "nvidia.com/gpu"
LAYOUT = {
    "numa_nodes": [
        {
            "name": "numa0",
            "pcie_switches": [
                {"name": "p0", "gpus": ["g0", "g1"], "nics": ["r0", "r1"]},
                {"name": "p1", "gpus": ["g2", "g3"], "nics": ["r2"]},
            ],
        },
        {
            "name": "numa1",
            "pcie_switches": [
                {"name": "p2", "gpus": ["g4", "g5"], "nics": ["r3", "r4"]},
                {"name": "p3", "gpus": ["g6", "g7"], "nics": ["r5"]},
            ],
        },
    ]
}


def random_instance(seed: int) -> dict[str, Any]:
    """A cluster of 2 to 54 nodes in spines and leaves (8-GPU nodes of two models, half with
    a PCIe layout and NICs, 4-GPU and CPU-only nodes, a few tainted or cordoned, half of the
    GPU nodes running a pod), and 10 to 60 gangs drawn from a few pod shapes (so that many
    nodes and gangs are alike): whole GPUs and shares, selectors, tolerations, GPU models,
    required and preferred levels, elastic sizes, launchers, joint allocation."""
    rng = random.Random(seed)
    spines = rng.randint(1, 3)
    leaves = rng.randint(1, 3)
    per_leaf = rng.randint(2, 6)
    nodes = []
    kinds = [
        {"cpu": 64, "memory": "256Gi", GPU: 8},
        {"cpu": 32, "memory": "128Gi", GPU: 4},
        {"cpu": 16, "memory": "64Gi"},
    ]
    for s in range(spines):
        for leaf in range(leaves):
            for k in range(per_leaf):
                kind = rng.choice([0, 0, 0, 1, 2]) if rng.random() < 0.9 else 0
                node: dict[str, Any] = {
                    "name": f"n{s}{leaf}{k}",
                    "allocatable": dict(kinds[kind]),
                    "labels": {"pool": rng.choice(["a", "a", "b"])},
                    "domains": {"spine": f"s{s}", "leaf": f"l{leaf}"},
                }
                if kind == 0:
                    node["gpu_model"] = rng.choice(["A100", "A100", "H100"])
                    if rng.random() < 0.5:
                        node["device_layout"] = "hgx"
                        node["allocatable"]["rdma/hca"] = 6
                if rng.random() < 0.08:
                    node["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
                if rng.random() < 0.03:
                    node["unschedulable"] = True
                nodes.append(node)
    queues = [
        {"name": f"q{j}", "weight": rng.choice([1, 1, 2, 0])} for j in range(rng.randint(1, 3))
    ]
    if rng.random() < 0.4:
        queues[0]["max"] = {GPU: rng.randint(8, 40)}
    shapes = []
    for _ in range(rng.randint(2, 6)):
        gpu = rng.choice([1, 1, 2, 4, 8, "500m", "250m", 0])
        req: dict[str, Any] = {
            "cpu": rng.choice([1, 2, 4, 8]),
            "memory": rng.choice(["4Gi", "16Gi"]),
        }
        if gpu:
            req[GPU] = gpu
        shapes.append(req)
    gangs = []
    for k in range(rng.randint(10, 60)):
        req = dict(rng.choice(shapes))
        single = rng.random() < 0.7
        roles: list[dict[str, Any]] = []
        if single:
            roles.append({"name": "w", "count": 1, "requests": req})
        else:
            roles.append({"name": "w", "count": rng.randint(2, 5), "requests": req})
            if rng.random() < 0.3:
                roles.insert(0, {"name": "launcher", "count": 1, "requests": {"cpu": 1}})
        gang: dict[str, Any] = {
            "name": f"g{k:03d}",
            "queue": rng.choice(queues)["name"],
            "priority": rng.choice([0, 0, 1]),
            "creation_time": rng.randint(0, 20),
            "roles": roles,
        }
        if rng.random() < 0.2:
            gang["gpu_models"] = [rng.choice(["A100", "H100"])]
        if rng.random() < 0.15:
            gang["topology"] = {"required": rng.choice(["leaf", "spine", "node"])}
        elif rng.random() < 0.15:
            gang["topology"] = {"preferred": rng.choice(["leaf", "spine"])}
        size = sum(r["count"] for r in roles)
        if size > 1 and rng.random() < 0.3:
            gang["min_member"] = rng.randint(1, size)
        gpu = req.get(GPU)
        if isinstance(gpu, int) and gpu >= 1 and rng.random() < 0.3:
            for r in roles:
                if GPU in r["requests"]:
                    r["requests"]["rdma/hca"] = rng.choice([gpu, 1]) if gpu > 1 else gpu
            gang["joint"] = rng.choice(["pcie", "numa"])
        if rng.random() < 0.1:
            for r in roles:
                r["node_selector"] = {"pool": "b"}
        if rng.random() < 0.1:
            for r in roles:
                r["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        if not single and rng.random() < 0.1:
            roles[-1]["topology"] = {"required": rng.choice(["leaf", "node"])}
        gangs.append(gang)
    running = []
    for i, n in enumerate(nodes):
        g = n["allocatable"].get(GPU, 0)
        if g and rng.random() < 0.5:
            running.append(
                {
                    "name": f"run{i}",
                    "node": n["name"],
                    "queue": rng.choice([None, queues[-1]["name"]]),
                    "requests": {GPU: rng.choice([1, 2, "500m"]), "cpu": 2},
                }
            )
    return {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "levels": [{"name": "spine"}, {"name": "leaf"}],
        "device_layouts": {"hgx": LAYOUT},
        "nodes": nodes,
        "queues": queues,
        "gangs": gangs,
        "running": running,
    }


def _pods(s: Snapshot, name: str, indexed: bool) -> list[tuple[object, ...]]:
    ctx = CycleContext.of(s, indexed=indexed)
    pods = BASELINES[name](ctx)
    assert verify(s, assemble_plan(s, pods, {})) == []
    return [(p.pod, p.node, p.gpus, p.gpu_milli, p.nics) for p in pods]


@pytest.mark.parametrize("name", list(BASELINES))
@pytest.mark.parametrize("seed", range(24))
def test_a_baseline_over_classes_places_as_a_scan_of_every_node(name: str, seed: int) -> None:
    s, _warnings = load_instance(random_instance(seed))
    assert _pods(s, name, indexed=True) == _pods(s, name, indexed=False)


@pytest.mark.parametrize("name", list(BASELINES))
@pytest.mark.parametrize("seed", range(3))
def test_the_same_on_a_generated_fat_tree(name: str, seed: int) -> None:
    # 64 nodes of 8 GPUs, half held by running pods, gangs from the ITP trace at 1.3 x free
    s = generate_fat_tree(spines=2, leaves_per_spine=4, nodes_per_leaf=8, load=0.5, seed=seed)
    want = _pods(s, name, indexed=False)
    assert len(want) > 20  # many gangs placed: the case is worth checking
    assert _pods(s, name, indexed=True) == want


def test_the_random_instances_exercise_what_classes_skip() -> None:
    """Identical one-pod gangs that find no node, and many alike nodes: the cases the
    indexes shortcut are there."""
    alike = failed = 0
    for seed in range(24):
        s, _ = load_instance(random_instance(seed))
        pods = {p.gang_key for p in BASELINES["greedy"](CycleContext.of(s))}
        shapes: dict[object, int] = {}
        for g in s.gangs:
            if g.size == 1 and g.key not in pods:
                key = (g.queue, tuple(sorted(g.roles[0].requests.items())))
                shapes[key] = shapes.get(key, 0) + 1
        failed += sum(n - 1 for n in shapes.values() if n > 1)
        alike += len(s.nodes) - len({tuple(sorted(n.allocatable.items())) for n in s.nodes})
    assert failed > 20 and alike > 200


@settings(max_examples=200, deadline=None)
@given(
    frees=st.lists(st.sampled_from([0, 100, 250, 500, 750, GPU_MILLI]), min_size=0, max_size=8),
    cpu=st.integers(0, 64_000),
    model=st.sampled_from([None, "A100", "H100"]),
    shapes=st.lists(
        st.tuples(
            st.sampled_from([0, 1000, 2000, 8000, 32_000]),
            st.sampled_from([(0, 0), (1, 250), (1, 500), (1, GPU_MILLI), (2, GPU_MILLI)]),
            st.sampled_from([(), ("A100",), ("A100", "H100")]),
            st.integers(1, 9),
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_fgds_measure_over_gpu_forms_equals_the_sum_over_shapes(
    frees: list[int],
    cpu: int,
    model: str | None,
    shapes: list[tuple[int, tuple[int, int], tuple[str, ...], int]],
) -> None:
    counts: dict[PodShape, int] = {}
    for c, (gpus, milli), models, w in shapes:
        shape = PodShape(c, gpus, milli if gpus else 0, models if gpus else ())
        counts[shape] = counts.get(shape, 0) + w
    workload = Workload.from_counts(counts)
    state = tuple(sorted(frees))
    want = sum(w * shape_fragmentation(state, cpu, model, s) for s, w in workload.shapes)
    assert _GroupedWorkload(workload).fragmentation(model, cpu, state) == want
