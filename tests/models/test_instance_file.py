"""The instance file (models/instance.py): the round trip, and one test of its message per kind
of bad input (issue 2: unknown fields, bad quantities, negative values, zero counts,
duplicate names, references to nothing, min_member above the full size, a device id used
twice, a device layout that disagrees with allocatable).

Each bad input is checked for the path it names inside the file (``gangs[0].roles[0].count``),
for what is wrong and for what is accepted.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from gangplan.adapters.files import InputError, load_snapshot, read_data, write_snapshot
from gangplan.models import InstanceError, instance_from_snapshot, load_instance

GPU = "nvidia.com/gpu"
NIC = "rdma/hca"

TINY: dict[str, Any] = {
    "apiVersion": "gangplan.io/v1alpha1",
    "kind": "Instance",
    "levels": [{"name": "spine", "node_label": "sp"}, {"name": "leaf", "node_label": "lf"}],
    "device_layouts": {
        "two": {
            "numa_nodes": [
                {
                    "name": "n0",
                    "pcie_switches": [{"name": "p0", "gpus": ["g0", "g1"], "nics": ["r0", "r1"]}],
                }
            ]
        }
    },
    "nodes": [
        {
            "name": "a",
            "labels": {"sp": "s1", "lf": "l1"},
            "allocatable": {"cpu": 8, "memory": "64Gi", GPU: 2, NIC: 2},
            "device_layout": "two",
        }
    ],
    "queues": [{"name": "q"}],
    "gangs": [
        {
            "name": "g",
            "queue": "q",
            "roles": [{"name": "w", "count": 2, "requests": {"cpu": 1, GPU: 1}}],
        }
    ],
    "running": [{"name": "p", "node": "a", "queue": "q", "requests": {"cpu": 1}}],
}

HAND: dict[str, Any] = {
    # explicit devices, a layout template, taints, tolerations, affinity of every operator,
    # explicit domain membership, a model-specific GPU resource, namespaces, pod names,
    # an elastic gang with a role minimum, a weight-0 queue, running pods with devices
    "apiVersion": "gangplan.io/v1alpha1",
    "kind": "Instance",
    "metadata": {"name": "hand", "description": "round-trip fixture"},
    "resources": {"gpu": GPU, "nic": NIC, "gpu_model_resources": {"nvidia.com/a100": "A100"}},
    "levels": [{"name": "spine", "node_label": "net/spine"}, {"name": "leaf"}],
    "device_layouts": {
        "pair": {
            "numa_nodes": [
                {
                    "name": "numa0",
                    "pcie_switches": [
                        {"name": "sw0", "gpus": ["gpu0"], "nics": ["mlx0"]},
                        {"name": "sw1", "gpus": ["gpu1"], "nics": ["mlx1"]},
                    ],
                }
            ]
        }
    },
    "nodes": [
        {
            "name": "h1",
            "labels": {"net/spine": "s1", "zone": "z1"},
            "domains": {"leaf": "l1"},
            "allocatable": {"cpu": "15500m", "memory": "62Gi", GPU: 2, NIC: 2},
            "gpu_model": "H100",
            "device_layout": "pair",
            "taints": [{"key": "dedicated", "value": "train", "effect": "NoSchedule"}],
        },
        {
            "name": "h2",
            "labels": {"net/spine": "s1"},
            "domains": {"leaf": "l2"},
            "allocatable": {"cpu": 16, "memory": "64Gi", "nvidia.com/a100": 4},
            "devices": {
                "numa_nodes": [
                    {"name": "n0", "pcie_switches": [{"name": "p0", "gpus": ["a", "b", "c", "d"]}]}
                ]
            },
            "unschedulable": True,
        },
        {
            "name": "h3",
            "labels": {"net/spine": "s2"},
            "domains": {"leaf": "l1"},
            "ready": False,
            "allocatable": {"cpu": "1.5", "example.com/fpga": 2},
        },
    ],
    "queues": [
        {"name": "qa", "weight": 2.5, "guaranteed": {GPU: 2}, "max": {"cpu": 100}},
        {"name": "qz", "weight": 0},
    ],
    "gangs": [
        {
            "name": "job",
            "namespace": "team",
            "queue": "qa",
            "priority": 7,
            "creation_time": 12.5,
            "min_member": 2,
            "joint": "pcie",
            "gpu_models": ["H100", "A100"],
            "topology": {"required": "spine", "preferred": "leaf"},
            "roles": [
                {"name": "launcher", "count": 1, "min_member": 1, "requests": {"cpu": "500m"}},
                {
                    "name": "worker",
                    "count": 3,
                    "pod_names": ["w-a", "w-b", "w-c"],
                    "requests": {"cpu": 2, "memory": "8Gi", GPU: 1, NIC: 1},
                    "node_selector": {"zone": "z1"},
                    "node_affinity": [
                        {
                            "match_expressions": [
                                {"key": "zone", "operator": "In", "values": ["z1", "z2"]},
                                {"key": "broken", "operator": "DoesNotExist"},
                            ]
                        },
                        {
                            "match_expressions": [
                                {"key": "zone", "operator": "NotIn", "values": ["z9"]},
                                {"key": "net/spine", "operator": "Exists"},
                            ]
                        },
                    ],
                    "tolerations": [
                        {
                            "key": "dedicated",
                            "operator": "Equal",
                            "value": "train",
                            "effect": "NoSchedule",
                        },
                        {"operator": "Exists"},
                    ],
                    "topology": {"required": "node"},
                },
            ],
        },
        {
            "name": "share",
            "queue": "qz",
            "roles": [{"name": "main", "count": 1, "requests": {"nvidia.com/a100": "250m"}}],
        },
    ],
    "running": [
        {
            "name": "r1",
            "namespace": "team",
            "gang": "old",
            "queue": "qa",
            "priority": 3,
            "node": "h1",
            "requests": {"cpu": 1, GPU: 1, NIC: 1},
            "devices": ["gpu1", "mlx1"],
        },
        {"name": "r2", "node": "h2", "requests": {GPU: "300m"}},
    ],
}


# --------------------------------------------------------------------------- round trip


def _via_text(data: dict[str, Any], fmt: str) -> dict[str, Any]:
    if fmt == "json":
        return json.loads(json.dumps(data))
    return yaml.safe_load(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_round_trip_of_the_default_instance(fmt: str) -> None:
    _, data = read_data(None)
    snap, warnings = load_instance(data)
    again, warnings_again = load_instance(_via_text(instance_from_snapshot(snap), fmt))
    assert again == snap
    assert warnings_again == warnings
    # the shorthands come back expanded: 2 pools of 16 nodes; 13 gangs; running: 10
    # single entries plus batch x4, infer x2 and etl x2 = 18 pods
    assert len(again.nodes) == 32
    assert len(again.gangs) == 13
    assert len(again.running) == 18


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_round_trip_of_a_hand_instance(fmt: str) -> None:
    snap, warnings = load_instance(copy.deepcopy(HAND))
    assert warnings == []
    data = _via_text(instance_from_snapshot(snap), fmt)
    again, _ = load_instance(data)
    assert again == snap
    # file -> snapshot -> file is stable too
    assert instance_from_snapshot(again) == instance_from_snapshot(snap)

    # what survived, read by hand from HAND
    h1, h2, h3 = again.nodes
    assert h1.allocatable == {"cpu": 15_500, "memory": 62 * 2**30, GPU: 2000, NIC: 2000}
    assert [(t.key, t.value, t.effect) for t in h1.taints] == [("dedicated", "train", "NoSchedule")]
    assert h1.domains == {"leaf": "l1"} and h1.device_layout == "pair"
    # nvidia.com/a100 is the GPU resource restricted to model A100
    assert h2.allocatable == {"cpu": 16_000, "memory": 64 * 2**30, GPU: 4000}
    assert h2.gpu_model == "A100" and h2.unschedulable
    assert h2.devices is not None and h2.devices.gpu_ids == ("a", "b", "c", "d")
    assert not h3.ready and h3.allocatable == {"cpu": 1500, "example.com/fpga": 2000}
    job, share = again.gangs
    assert job.key == "team/job" and job.priority == 7 and job.creation_time == 12.5
    assert job.min_member == 2 and job.joint == "pcie"
    assert set(job.gpu_models) == {"H100", "A100"}
    assert job.topology is not None and (job.topology.required, job.topology.preferred) == (
        "spine",
        "leaf",
    )
    launcher, worker = job.roles
    assert launcher.min_member == 1 and launcher.requests == {"cpu": 500}
    assert worker.pod_names == ("w-a", "w-b", "w-c")
    assert worker.requests == {"cpu": 2000, "memory": 8 * 2**30, GPU: 1000, NIC: 1000}
    assert [[r.operator for r in t.match_expressions] for t in worker.node_affinity] == [
        ["In", "DoesNotExist"],
        ["NotIn", "Exists"],
    ]
    assert [(t.key, t.operator) for t in worker.tolerations] == [
        ("dedicated", "Equal"),
        (None, "Exists"),
    ]
    assert worker.topology is not None and worker.topology.required == "node"
    assert share.roles[0].requests == {GPU: 250} and share.gpu_models == ("A100",)
    assert [q.weight for q in again.queues] == [2.5, 0.0]
    assert again.queues[0].guaranteed == {GPU: 2000} and again.queues[0].max == {"cpu": 100_000}
    r1, r2 = again.running
    assert (r1.namespace, r1.devices, r1.priority) == ("team", ("gpu1", "mlx1"), 3)
    assert r2.requests == {GPU: 300} and r2.queue is None
    assert again.metadata == {"name": "hand", "description": "round-trip fixture"}


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_round_trip_through_a_file(tmp_path, suffix: str) -> None:
    snap, _ = load_instance(copy.deepcopy(HAND))
    path = tmp_path / f"hand{suffix}"
    write_snapshot(snap, path)
    again, warnings = load_snapshot(path)
    assert again == snap
    assert warnings == []


def test_node_pools_and_replicas_expand_as_written() -> None:
    # pool of 4: spine by label (size 4, one spine s0), leaf by explicit membership (no
    # label) 2 nodes each from l3: p5, p6 in l3; p7, p8 in l4 (names start at 5).
    # "r" with 3 replicas: r-0, r-1, r-2.
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "levels": [{"name": "spine", "node_label": "sp"}, {"name": "leaf"}],
        "node_pools": [
            {
                "name": "p{index}",
                "count": 4,
                "start": 5,
                "labels": {"pool": "x"},
                "allocatable": {"cpu": 4},
                "spread": [
                    {"level": "spine", "size": 4, "name": "s{n}"},
                    {"level": "leaf", "size": 2, "name": "l{n}", "first": 3},
                ],
            }
        ],
        "running": [{"name": "r", "replicas": 3, "node": "p6", "requests": {"cpu": 1}}],
    }
    snap, warnings = load_instance(data)
    assert warnings == []
    assert [(n.name, n.labels, n.domains) for n in snap.nodes] == [
        ("p5", {"pool": "x", "sp": "s0"}, {"leaf": "l3"}),
        ("p6", {"pool": "x", "sp": "s0"}, {"leaf": "l3"}),
        ("p7", {"pool": "x", "sp": "s0"}, {"leaf": "l4"}),
        ("p8", {"pool": "x", "sp": "s0"}, {"leaf": "l4"}),
    ]
    assert all(n.allocatable == {"cpu": 4000} for n in snap.nodes)
    assert [p.name for p in snap.running] == ["r-0", "r-1", "r-2"]
    assert snap.free("p6").resources == {"cpu": 1000}


# --------------------------------------------------------------------------- bad input


def edit(fn: Callable[[dict[str, Any]], Any]) -> Callable[[], dict[str, Any]]:
    """TINY, deep-copied, with ``fn`` applied."""

    def make() -> dict[str, Any]:
        data = copy.deepcopy(TINY)
        fn(data)
        return data

    return make


def role(d: dict[str, Any]) -> dict[str, Any]:
    return d["gangs"][0]["roles"][0]


def switch(d: dict[str, Any]) -> dict[str, Any]:
    return d["device_layouts"]["two"]["numa_nodes"][0]["pcie_switches"][0]


BAD = [
    # ---- unknown fields: the path to the field, and the fields accepted there
    pytest.param(
        edit(lambda d: d.update(bogus=1)),  # top level
        [
            (
                "bogus",
                [
                    "unknown field 'bogus'",
                    "accepted: apiVersion, kind, metadata",
                    "gangs",
                    "running",
                ],
            )
        ],
        id="unknown-field-top",
    ),
    pytest.param(
        edit(lambda d: role(d).update(cnt=2)),  # a misspelt role field
        [("gangs[0].roles[0].cnt", ["unknown field 'cnt'", "accepted: name, count, min_member"])],
        id="unknown-field-role",
    ),
    pytest.param(
        edit(lambda d: d["nodes"][0].update(label={})),  # 'label' for 'labels'
        [("nodes[0].label", ["unknown field 'label'", "accepted: name, labels, taints"])],
        id="unknown-field-node",
    ),
    pytest.param(
        edit(lambda d: switch(d).update(gpu=["g9"])),  # inside a device layout template
        [
            (
                "device_layouts.two.numa_nodes[0].pcie_switches[0].gpu",
                ["unknown field 'gpu'", "accepted: name, gpus, nics"],
            )
        ],
        id="unknown-field-layout",
    ),
    pytest.param(
        edit(lambda d: d["queues"][0].update(cap={GPU: 1})),  # 'cap' for 'max'
        [("queues[0].cap", ["unknown field 'cap'", "accepted: name, weight, guaranteed, max"])],
        id="unknown-field-queue",
    ),
    # ---- bad quantities: the resource named, and the forms accepted
    pytest.param(
        edit(lambda d: role(d)["requests"].update(cpu="1.2.3")),
        [
            (
                "gangs[0].roles[0].requests",
                [
                    "resource 'cpu': '1.2.3' is not a Kubernetes quantity",
                    'accepted: "500m", "2", "1.5", "32Gi", "1e3"',
                ],
            )
        ],
        id="bad-quantity-request",
    ),
    pytest.param(
        edit(lambda d: d["nodes"][0]["allocatable"].update(memory="64GB")),  # GB is not a suffix
        [
            (
                "nodes[0].allocatable",
                ["resource 'memory': '64GB' is not a Kubernetes quantity", "accepted: "],
            )
        ],
        id="bad-quantity-allocatable",
    ),
    pytest.param(
        edit(
            lambda d: d["nodes"][0]["allocatable"].update({"example.com/fpga": "500m"})
        ),  # half an FPGA
        [
            (
                "nodes[0].allocatable.example.com/fpga",
                ["500m is not a whole number", "only the GPU resource takes a share"],
            )
        ],
        id="fractional-extended-resource",
    ),
    pytest.param(
        edit(lambda d: role(d)["requests"].update({GPU: "1.5"})),  # a share and whole GPUs at once
        [
            (
                "gangs[0].roles[0].requests.nvidia.com/gpu",
                ["1500m GPUs", "a share of one GPU (below 1) or whole GPUs"],
            )
        ],
        id="gpu-share-above-one",
    ),
    # ---- negative values
    pytest.param(
        edit(lambda d: role(d)["requests"].update(cpu="-1")),
        [
            (
                "gangs[0].roles[0].requests",
                ["resource 'cpu': '-1' is negative", "accepted: a quantity >= 0"],
            )
        ],
        id="negative-request",
    ),
    pytest.param(
        edit(lambda d: d["queues"][0].update(max={GPU: -2})),
        [
            (
                "queues[0].max",
                ["resource 'nvidia.com/gpu': -2 is negative", "accepted: a quantity >= 0"],
            )
        ],
        id="negative-queue-max",
    ),
    pytest.param(
        edit(lambda d: d["queues"][0].update(weight=-1)),
        [("queues[0].weight", ["greater than or equal to 0", "got -1"])],
        id="negative-weight",
    ),
    pytest.param(
        edit(lambda d: role(d).update(min_member=-1)),
        [("gangs[0].roles[0].min_member", ["greater than or equal to 0", "got -1"])],
        id="negative-role-min-member",
    ),
    pytest.param(
        edit(lambda d: d.update(node_pools=[{"name": "p-{index}", "count": 1, "start": -1}])),
        [("node_pools[0].start", ["greater than or equal to 0", "got -1"])],
        id="negative-pool-start",
    ),
    # ---- zero counts
    pytest.param(
        edit(lambda d: role(d).update(count=0)),
        [("gangs[0].roles[0].count", ["greater than 0", "got 0"])],
        id="zero-role-count",
    ),
    pytest.param(
        edit(lambda d: d["gangs"][0].update(min_member=0)),
        [("gangs[0].min_member", ["greater than 0", "got 0"])],
        id="zero-gang-min-member",
    ),
    pytest.param(
        edit(lambda d: d["running"][0].update(replicas=0)),
        [("running[0].replicas", ["greater than 0", "got 0"])],
        id="zero-replicas",
    ),
    pytest.param(
        edit(lambda d: d.update(node_pools=[{"name": "p-{index}", "count": 0}])),
        [("node_pools[0].count", ["greater than 0", "got 0"])],
        id="zero-pool-count",
    ),
    pytest.param(
        edit(
            lambda d: d.update(
                node_pools=[
                    {
                        "name": "p-{index}",
                        "count": 2,
                        "spread": [{"level": "leaf", "size": 0, "name": "l{n}"}],
                    }
                ]
            )
        ),
        [("node_pools[0].spread[0].size", ["greater than 0", "got 0"])],
        id="zero-spread-size",
    ),
    pytest.param(
        edit(lambda d: d["gangs"][0].update(roles=[])),  # a gang of no role
        [("gangs[0].roles", ["at least 1 item"])],
        id="zero-roles",
    ),
    # ---- duplicate names: every copy is reported
    pytest.param(
        edit(lambda d: d["nodes"].append(copy.deepcopy(d["nodes"][0]))),
        [
            ("nodes[0].name", ["duplicate node name 'a'"]),
            ("nodes[1].name", ["duplicate node name 'a'"]),
        ],
        id="duplicate-node",
    ),
    pytest.param(
        edit(lambda d: d["queues"].append({"name": "q", "weight": 2})),
        [
            ("queues[0].name", ["duplicate queue name 'q'"]),
            ("queues[1].name", ["duplicate queue name 'q'"]),
        ],
        id="duplicate-queue",
    ),
    pytest.param(
        edit(lambda d: d["gangs"].append(copy.deepcopy(d["gangs"][0]))),
        [
            ("gangs[0].name", ["duplicate gang 'default/g'"]),
            ("gangs[1].name", ["duplicate gang 'default/g'"]),
        ],
        id="duplicate-gang",
    ),
    pytest.param(
        edit(lambda d: d["gangs"][0]["roles"].append({"name": "w", "count": 1})),
        [
            ("gangs[0].roles[0].name", ["duplicate role name 'w'"]),
            ("gangs[0].roles[1].name", ["duplicate role name 'w'"]),
        ],
        id="duplicate-role",
    ),
    pytest.param(
        edit(lambda d: d["levels"].append({"name": "spine"})),
        [
            ("levels[0].name", ["duplicate level name 'spine'"]),
            ("levels[2].name", ["duplicate level name 'spine'"]),
        ],
        id="duplicate-level",
    ),
    pytest.param(
        edit(lambda d: d["running"].append({"name": "p", "node": "a"})),
        [
            ("running[0].name", ["duplicate running pod 'p'"]),
            ("running[1].name", ["duplicate running pod 'p'"]),
        ],
        id="duplicate-running-pod",
    ),
    pytest.param(
        # a pool node named like an explicit node: the pool copy is named by its pool
        edit(
            lambda d: d.update(
                node_pools=[{"name": "{index}", "count": 1}], nodes=[*d["nodes"], {"name": "0"}]
            )
        ),
        [
            ("node_pools[0] (node '0').name", ["duplicate node name '0'"]),
            ("nodes[1].name", ["duplicate node name '0'"]),
        ],
        id="duplicate-pool-node",
    ),
    # ---- references to what does not exist: what exists is listed
    pytest.param(
        edit(lambda d: d["gangs"][0].update(queue="nope")),
        [("gangs[0].queue", ["unknown queue 'nope'", "declared: 'q'"])],
        id="unknown-queue",
    ),
    pytest.param(
        edit(lambda d: d["running"][0].update(queue="nope")),
        [("running[0].queue", ["unknown queue 'nope'", "declared: 'q'"])],
        id="unknown-queue-running",
    ),
    pytest.param(
        edit(lambda d: d["gangs"][0].update(topology={"required": "rack"})),
        [
            (
                "gangs[0].topology.required",
                ["unknown level 'rack'", "accepted: 'spine', 'leaf', 'node'"],
            )
        ],
        id="unknown-level-gang",
    ),
    pytest.param(
        edit(lambda d: role(d).update(topology={"preferred": "block"})),
        [
            (
                "gangs[0].roles[0].topology.preferred",
                ["unknown level 'block'", "accepted: 'spine', 'leaf', 'node'"],
            )
        ],
        id="unknown-level-role",
    ),
    pytest.param(
        edit(lambda d: d["nodes"][0].update(domains={"rack": "r1"})),
        [("nodes[0].domains.rack", ["unknown level 'rack'", "accepted: 'spine', 'leaf'"])],
        id="unknown-level-node",
    ),
    pytest.param(
        edit(
            lambda d: d.update(
                node_pools=[
                    {
                        "name": "p-{index}",
                        "count": 2,
                        "spread": [{"level": "rack", "size": 1, "name": "r{n}"}],
                    }
                ]
            )
        ),
        [("node_pools[0].spread[0].level", ["unknown level 'rack'", "accepted: 'spine', 'leaf'"])],
        id="unknown-level-spread",
    ),
    pytest.param(
        edit(lambda d: d["running"][0].update(node="zz")),
        [("running[0].node", ["unknown node 'zz'", "declared: 'a'"])],
        id="unknown-node",
    ),
    pytest.param(
        edit(lambda d: d["running"][0].update(devices=["g9"])),
        [
            (
                "running[0].devices",
                ["device 'g9' does not exist on node 'a'", "its devices: 'g0', 'g1', 'r0', 'r1'"],
            )
        ],
        id="unknown-device",
    ),
    pytest.param(
        edit(lambda d: d["nodes"][0].update(device_layout="eight")),
        [("nodes[0].device_layout", ["unknown device layout 'eight'", "declared: 'two'"])],
        id="unknown-device-layout",
    ),
    # ---- min_member above the full size
    pytest.param(
        edit(lambda d: d["gangs"][0].update(min_member=3)),
        [("gangs[0].min_member", ["min_member 3 exceeds the full size 2", "accepted: 1..2"])],
        id="gang-min-member-above-size",
    ),
    pytest.param(
        edit(lambda d: role(d).update(min_member=3)),
        [("gangs[0].roles[0].min_member", ["min_member 3 exceeds count 2", "accepted: 0..2"])],
        id="role-min-member-above-count",
    ),
    # ---- a device id used twice
    pytest.param(
        edit(lambda d: switch(d).update(nics=["r0", "g0"])),  # in a template
        [("device_layouts.two", ["device id 'g0' used twice"])],
        id="device-twice-template",
    ),
    pytest.param(
        edit(
            lambda d: (
                d["nodes"][0].pop("device_layout"),
                d["nodes"][0].update(
                    devices={
                        "numa_nodes": [
                            {
                                "name": "u",
                                "pcie_switches": [
                                    {"name": "s", "gpus": ["g0", "g0"], "nics": ["r0", "r1"]}
                                ],
                            }
                        ]
                    }
                ),
            )
        ),
        [("nodes[0].devices", ["device id 'g0' used twice"])],
        id="device-twice-explicit",
    ),
    pytest.param(
        # two running pods both holding g0 whole
        edit(
            lambda d: d["running"].extend(
                [
                    {"name": "x", "node": "a", "requests": {GPU: 1}, "devices": ["g0"]},
                    {"name": "y", "node": "a", "requests": {GPU: 1}, "devices": ["g0"]},
                ]
            )
        ),
        [("running[2].devices", ["device 'g0' on node 'a' is already held by 'x'"])],
        id="device-held-twice",
    ),
    # ---- a device layout whose counts disagree with allocatable
    pytest.param(
        edit(lambda d: d["nodes"][0]["allocatable"].update({GPU: 4})),
        [
            (
                "nodes[0].allocatable.nvidia.com/gpu",
                ["device layout has 2 GPUs but allocatable nvidia.com/gpu is 4", "they must agree"],
            )
        ],
        id="layout-gpus-disagree",
    ),
    pytest.param(
        edit(lambda d: d["nodes"][0]["allocatable"].pop(NIC)),
        [
            (
                "nodes[0].allocatable.rdma/hca",
                ["device layout has 2 NICs but allocatable rdma/hca is 0", "they must agree"],
            )
        ],
        id="layout-nics-disagree",
    ),
    pytest.param(
        edit(
            lambda d: d.update(
                node_pools=[
                    {
                        "name": "p{index}",
                        "count": 1,
                        "device_layout": "two",
                        "allocatable": {GPU: 1, NIC: 2},
                    }
                ]
            )
        ),
        [
            (
                "node_pools[0] (node 'p0').allocatable.nvidia.com/gpu",
                ["device layout has 2 GPUs but allocatable nvidia.com/gpu is 1"],
            )
        ],
        id="layout-disagrees-in-pool",
    ),
]


@pytest.mark.parametrize(("make", "expected"), BAD)
def test_bad_input_message(
    make: Callable[[], dict[str, Any]], expected: list[tuple[str, list[str]]]
) -> None:
    with pytest.raises(InstanceError) as err:
        load_instance(make())
    got = [(p.path, p.message) for p in err.value.problems]
    assert [path for path, _ in got] == [path for path, _ in expected]
    for (_, message), (_, fragments) in zip(got, expected, strict=True):
        for fragment in fragments:
            assert fragment in message


def test_tiny_is_valid() -> None:
    # the base of every bad input above is itself valid
    snap, warnings = load_instance(copy.deepcopy(TINY))
    assert warnings == []
    assert [n.name for n in snap.nodes] == ["a"]


def test_same_gang_name_in_two_namespaces_is_not_a_duplicate() -> None:
    data = copy.deepcopy(TINY)
    data["gangs"].append({**copy.deepcopy(data["gangs"][0]), "namespace": "other"})
    snap, _ = load_instance(data)
    assert [g.key for g in snap.gangs] == ["default/g", "other/g"]


def test_every_problem_at_once() -> None:
    data = copy.deepcopy(TINY)
    role(data)["count"] = 0
    data["queues"][0]["weight"] = -1
    data["bogus"] = True
    with pytest.raises(InstanceError) as err:
        load_instance(data)
    assert sorted(p.path for p in err.value.problems) == [
        "bogus",
        "gangs[0].roles[0].count",
        "queues[0].weight",
    ]


def test_every_cross_reference_problem_at_once() -> None:
    data = copy.deepcopy(TINY)
    data["gangs"][0]["queue"] = "nope"
    data["running"][0]["node"] = "zz"
    data["nodes"][0]["allocatable"][GPU] = 4
    with pytest.raises(InstanceError) as err:
        load_instance(data)
    assert [p.path for p in err.value.problems] == [
        "nodes[0].allocatable.nvidia.com/gpu",
        "gangs[0].queue",
        "running[0].node",
    ]


def test_file_errors_name_the_file_and_the_path(tmp_path) -> None:
    data = copy.deepcopy(TINY)
    role(data)["count"] = 0
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_snapshot(path)
    assert list(err.value.lines()) == [
        f"{path}: gangs[0].roles[0].count: Input should be greater than 0 (got 0)"
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "the file is empty"),
        ([1, 2], "the file holds a list, not a mapping (kind: Instance)"),
    ],
)
def test_not_a_mapping(data: Any, message: str) -> None:
    with pytest.raises(InstanceError) as err:
        load_instance(data)
    assert [p.path for p in err.value.problems] == [""]
    assert message in err.value.problems[0].message
