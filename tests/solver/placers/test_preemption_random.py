"""Random small instances with preemption on: every baseline's plan passes the verifier.

The instances (fixed seeds, so a failure is reproducible) mix node kinds (a PCIe/NUMA
layout, implicit devices, GPU models, labels, taints), running gangs (elastic or not,
running pods that fit their node), and pending gangs with selectors, affinity, GPU models, joint
allocation and topology. One queue, every pending gang above every running one: so every
gang of a plan may evict every victim, and the verifier's "no eviction for nothing" counts
all the pods placed in a victim's room.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from gangplan.models import load_instance
from gangplan.solver.cycle.pipeline import run_baseline
from gangplan.solver.judges.verify import verify

LAYOUT = {
    "numa_nodes": [
        {
            "name": "numa0",
            "pcie_switches": [
                {"name": "p0", "gpus": ["g0", "g1"], "nics": ["m0"]},
                {"name": "p1", "gpus": ["g2"], "nics": ["m1", "m2"]},
            ],
        },
        {"name": "numa1", "pcie_switches": [{"name": "p2", "gpus": ["g3"], "nics": ["m3"]}]},
    ]
}


def _node(rng: random.Random, i: int) -> dict[str, Any]:
    n: dict[str, Any] = {
        "name": f"n{i}",
        "domains": {"spine": f"s{i % 2}", "leaf": f"l{i % 3}"},
        "allocatable": {"cpu": rng.choice([8, 16]), "memory": "64Gi", "pods": 110},
        "gpu_model": rng.choice(["A100", "H100"]),
        "labels": {"zone": rng.choice(["a", "b"])},
    }
    if rng.random() < 0.5:
        n["device_layout"] = "hgx4"
        n["allocatable"].update({"nvidia.com/gpu": 4, "rdma/hca": 4})
    else:
        n["allocatable"]["nvidia.com/gpu"] = rng.choice([1, 2, 8])
    if rng.random() < 0.2:
        n["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    return n


def _gang(rng: random.Random, k: int) -> dict[str, Any]:
    roles = []
    for r in range(rng.randint(1, 2)):
        gpu = rng.choice([0, "250m", "500m", 1, 2, 4])
        role: dict[str, Any] = {
            "name": f"r{r}",
            "count": rng.randint(1, 3),
            "requests": {"cpu": rng.choice([1, 2, 8]), **({"nvidia.com/gpu": gpu} if gpu else {})},
        }
        if rng.random() < 0.2:
            role["tolerations"] = [{"operator": "Exists"}]
        if rng.random() < 0.2:
            role["node_selector"] = {"zone": "a"}
        roles.append(role)
    g: dict[str, Any] = {"name": f"g{k}", "queue": "q", "priority": 10, "roles": roles}
    if rng.random() < 0.3:
        g["min_member"] = 1
    if rng.random() < 0.2:
        g["gpu_models"] = [rng.choice(["A100", "H100"])]
    if rng.random() < 0.2:
        g["topology"] = {"required": rng.choice(["leaf", "node"])}
    return g


def random_instance(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    nodes = [_node(rng, i) for i in range(rng.randint(1, 4))]
    running = []
    free = {
        n["name"]: [n["allocatable"]["cpu"], 1000 * n["allocatable"]["nvidia.com/gpu"]]
        for n in nodes
    }
    prio = {f"rg{k}": rng.choice([0, 5]) for k in range(3)}
    for j in range(rng.randint(1, 5)):
        n = rng.choice(nodes)
        cpu, gpu = (
            rng.choice([1, 4]),
            rng.choice([500, 1000, 1000 * n["allocatable"]["nvidia.com/gpu"]]),
        )
        if free[n["name"]][0] < cpu or free[n["name"]][1] < gpu:
            continue  # running pods fit their node (as the API server's nodes show them)
        free[n["name"]][0] -= cpu
        free[n["name"]][1] -= gpu
        running.append(
            {
                "name": f"r{j}",
                "gang": f"rg{j % 3}",
                "queue": "q",
                "priority": prio[f"rg{j % 3}"],
                "node": n["name"],
                "requests": {"cpu": cpu, "nvidia.com/gpu": f"{gpu}m"},
                "admitted": 1000 * (j % 3),
                **({"min_member": 1} if rng.random() < 0.3 else {}),
            }
        )
    return {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "levels": [{"name": "spine"}, {"name": "leaf"}],
        "device_layouts": {"hgx4": LAYOUT},
        "nodes": nodes,
        "queues": [{"name": "q", "preemption": {"within_queue": "lower_priority"}}],
        "running": running,
        "gangs": [_gang(rng, k) for k in range(rng.randint(1, 3))],
        "preemption": {"enabled": True, "grace_s": 300, "now": 2000},
    }


@pytest.mark.parametrize("placer", ["greedy", "topology-fit", "fgd"])
def test_baseline_plans_with_preemption_verify_on_random_instances(placer: str) -> None:
    evicting = 0
    for seed in range(150):
        snap, _ = load_instance(random_instance(seed))
        plan = run_baseline(snap, placer).plan
        assert verify(snap, plan) == [], f"seed {seed}"
        evicting += bool(plan.evictions)
    assert evicting >= 10  # the instances do exercise preemption


def random_device_instance(seed: int) -> dict[str, Any]:
    """Nodes of the PCIe layout above, running pods holding named devices (GPU shares spread
    over GPUs, whole GPUs with their NICs), pending gangs asking joint GPU+NIC allocations or
    shares: where a victim may hold just the device a preemptor needs while the node's
    totals have room (an eviction for a device alone, which the verifier refuses)."""
    rng = random.Random(seed)
    nodes = [
        {
            "name": f"n{i}",
            "device_layout": "hgx4",
            "allocatable": {"cpu": 32, "memory": "64Gi", "nvidia.com/gpu": 4, "rdma/hca": 4},
        }
        for i in range(rng.randint(1, 2))
    ]
    running = []
    for i, n in enumerate(nodes):
        free = {g: 1000 for g in ("g0", "g1", "g2", "g3")}
        nics = ["m0", "m1", "m2", "m3"]
        for j in range(rng.randint(1, 5)):
            gang = f"rg{rng.randint(0, 2)}"
            gpu = rng.choice(list(free))
            kind = rng.choice(["share", "share", "whole"])
            if kind == "share":
                milli = rng.choice([250, 500])
                if free[gpu] < milli:
                    continue
                free[gpu] -= milli
                req: dict[str, Any] = {"cpu": 1, "nvidia.com/gpu": f"{milli}m"}
                devices = [gpu]
            else:
                if free[gpu] < 1000:
                    continue
                free[gpu] = 0
                req = {"cpu": 1, "nvidia.com/gpu": 1}
                devices = [gpu]
                if nics and rng.random() < 0.5:
                    req["rdma/hca"] = 1
                    devices.append(nics.pop(rng.randrange(len(nics))))
            running.append(
                {
                    "name": f"r{i}-{j}",
                    "gang": gang,
                    "queue": "q",
                    "priority": {"rg0": 0, "rg1": 5, "rg2": 20}[gang],
                    "node": n["name"],
                    "requests": req,
                    "devices": devices,
                    "admitted": 1000 * int(gang[-1]),
                    **({"min_member": 1} if rng.random() < 0.3 else {}),
                }
            )
    gangs = []
    for k in range(rng.randint(1, 3)):
        count = rng.randint(1, 3)
        if rng.random() < 0.5:
            gpus = rng.choice([1, 2])
            req = {"cpu": 1, "nvidia.com/gpu": gpus, "rdma/hca": gpus}
            g: dict[str, Any] = {"joint": "pcie"}
        else:
            req = {"cpu": 1, "nvidia.com/gpu": rng.choice(["500m", "750m", 1])}
            g = {}
        g.update(
            {
                "name": f"g{k}",
                "queue": "q",
                "priority": 10,
                "roles": [{"name": "w", "count": count, "requests": req}],
            }
        )
        if count > 1 and rng.random() < 0.4:
            g["min_member"] = 1
        gangs.append(g)
    return {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "device_layouts": {"hgx4": LAYOUT},
        "nodes": nodes,
        "queues": [{"name": "q", "preemption": {"within_queue": "lower_priority"}}],
        "running": running,
        "gangs": gangs,
        "preemption": {"enabled": True, "grace_s": 300, "now": 5000},
    }


@pytest.mark.parametrize("placer", ["greedy", "topology-fit", "fgd"])
def test_baseline_plans_never_evict_for_a_device_alone(placer: str) -> None:
    """Every baseline plan on instances with joint allocation and GPU shares passes the
    verifier (its eviction_needed rule counts node totals: an eviction that frees a
    particular device only is refused, so a baseline leaves such a gang pending)."""
    evicting = 0
    for seed in range(400):
        snap, _ = load_instance(random_device_instance(seed))
        plan = run_baseline(snap, placer).plan
        assert verify(snap, plan) == [], f"seed {seed}"
        evicting += bool(plan.evictions)
    assert evicting >= 20  # the instances do exercise preemption
