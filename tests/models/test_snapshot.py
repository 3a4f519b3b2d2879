"""The snapshot (models/snapshot.py): what running pods leave free, the inconsistencies real
clusters have (each warns and clamps, none is an error), and the scheduling terms' meaning
(gang minimums, tolerations, node affinity).
"""

from __future__ import annotations

import pytest

from gangplan.models import (
    Gang,
    GangOutcome,
    Node,
    NodeSelectorRequirement,
    Plan,
    PodPlacement,
    Role,
    RunningPod,
    Taint,
    Toleration,
    load_instance,
)
from gangplan.topology import Domain, build_topology

GPU = "nvidia.com/gpu"
NIC = "rdma/hca"
API = {"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance"}
PAIR = {
    # 2 GPUs and 2 NICs, one of each per PCIe switch
    "numa_nodes": [
        {
            "name": "numa0",
            "pcie_switches": [
                {"name": "sw0", "gpus": ["g0"], "nics": ["r0"]},
                {"name": "sw1", "gpus": ["g1"], "nics": ["r1"]},
            ],
        }
    ]
}


def load(**parts):
    return load_instance({**API, **parts})


# --------------------------------------------------------------------------- free amounts


def test_free_is_allocatable_minus_running() -> None:
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {"cpu": 8, "memory": "64Gi", GPU: 4}}],
        running=[
            {"name": "a", "node": "n", "requests": {"cpu": "1500m", "memory": "16Gi", GPU: 1}},
            {"name": "b", "node": "n", "requests": {"cpu": 2, GPU: 2}},
        ],
    )
    assert warnings == []
    free = snap.free("n")
    # cpu 8000 - 1500 - 2000; memory 64Gi - 16Gi = 48Gi; GPUs 4000 - 3000
    assert free.resources == {"cpu": 4500, "memory": 48 * 2**30, GPU: 1000}
    # a (1 GPU) and b (2 GPUs) name no device: they take the lowest-listed, in name order
    assert free.gpu_milli == {"gpu-0": 0, "gpu-1": 0, "gpu-2": 0, "gpu-3": 1000}
    assert free.whole_gpus == ("gpu-3",)
    assert free.running_gpu_milli == 3000


def test_pods_naming_devices_are_placed_before_pods_naming_none() -> None:
    # "x" (no device named) sorts before "y" by name, but "y" names gpu-0: y keeps gpu-0
    # and x gets the lowest GPU left, gpu-1.
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {GPU: 3}}],
        running=[
            {"name": "x", "node": "n", "requests": {GPU: 1}},
            {"name": "y", "node": "n", "requests": {GPU: 1}, "devices": ["gpu-0"]},
        ],
    )
    assert warnings == []
    assert snap.free("n").gpu_milli == {"gpu-0": 0, "gpu-1": 0, "gpu-2": 1000}


def test_running_shares_pack_onto_a_partly_used_gpu() -> None:
    # 300m goes to gpu-0 (no GPU partly used yet: the lowest); 500m then prefers the
    # partly used gpu-0 (700 free) over a whole one: gpu-0 keeps 200.
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {GPU: 2}}],
        running=[
            {"name": "a", "node": "n", "requests": {GPU: "300m"}},
            {"name": "b", "node": "n", "requests": {GPU: "500m"}},
        ],
    )
    assert warnings == []
    assert snap.free("n").gpu_milli == {"gpu-0": 200, "gpu-1": 1000}
    assert snap.free("n").resources[GPU] == 1200


def test_named_nics_are_not_free() -> None:
    snap, warnings = load(
        device_layouts={"pair": PAIR},
        nodes=[{"name": "n", "device_layout": "pair", "allocatable": {GPU: 2, NIC: 2}}],
        running=[{"name": "a", "node": "n", "requests": {GPU: 1, NIC: 1}, "devices": ["g1", "r1"]}],
    )
    assert warnings == []
    free = snap.free("n")
    assert free.gpu_milli == {"g0": 1000, "g1": 0}
    assert free.nics == frozenset({"r0"})
    assert free.resources == {GPU: 1000, NIC: 1000}


def test_unnamed_nics_of_a_running_pod_are_not_free() -> None:
    # A running pod asking a GPU and a NIC but naming neither holds some GPU and some NIC:
    # as for its GPU, the snapshot gives it the lowest-listed free NIC (r0), so no plan
    # may give r0 to another pod.
    snap, warnings = load(
        device_layouts={"pair": PAIR},
        nodes=[{"name": "n", "device_layout": "pair", "allocatable": {GPU: 2, NIC: 2}}],
        running=[{"name": "a", "node": "n", "requests": {GPU: 1, NIC: 1}}],
    )
    assert warnings == []
    free = snap.free("n")
    assert free.gpu_milli == {"g0": 0, "g1": 1000}
    assert free.nics == frozenset({"r1"})
    assert free.resources == {GPU: 1000, NIC: 1000}


def test_a_pod_naming_only_its_nic_does_not_take_a_gpu_another_pod_names() -> None:
    # "a" names its NIC but not its GPU; "b" names g0. b keeps g0, a gets g1.
    snap, warnings = load(
        device_layouts={"pair": PAIR},
        nodes=[{"name": "n", "device_layout": "pair", "allocatable": {GPU: 2, NIC: 2}}],
        running=[
            {"name": "a", "node": "n", "requests": {GPU: 1, NIC: 1}, "devices": ["r0"]},
            {"name": "b", "node": "n", "requests": {GPU: 1}, "devices": ["g0"]},
        ],
    )
    assert warnings == []
    assert snap.free("n").gpu_milli == {"g0": 0, "g1": 0}
    assert snap.free("n").nics == frozenset({"r1"})


# --------------------------------------------------------------------------- inconsistencies


def test_gpu_lost_warns_and_clamps() -> None:
    # The node now reports 1 GPU (a GPU was lost); the running pod still holds 2, and
    # 10 cpu of the node's 8. Warnings name the node and the resource; free is 0, never
    # negative.
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {"cpu": 8, GPU: 1}}],
        running=[{"name": "r", "node": "n", "requests": {"cpu": 10, GPU: 2}}],
    )
    assert warnings == [
        "node 'n': running pods hold 10 cpu but the node reports 8; free clamped at 0",
        "node 'n': running pods hold 2 nvidia.com/gpu but the node reports 1; free clamped at 0",
        "node 'n': running pod 'r' holds 2 GPUs but only 1 GPU devices are left for it"
        " (a GPU was lost?)",
    ]
    free = snap.free("n")
    assert free.resources == {"cpu": 0, GPU: 0}
    assert free.gpu_milli == {"gpu-0": 0}


def test_gpu_lost_with_an_explicit_layout() -> None:
    # The device plugin lists one GPU left (g0); a pod that named none holds 2.
    snap, warnings = load(
        nodes=[
            {
                "name": "n",
                "allocatable": {GPU: 1},
                "devices": {
                    "numa_nodes": [{"name": "u", "pcie_switches": [{"name": "s", "gpus": ["g0"]}]}]
                },
            }
        ],
        running=[{"name": "r", "node": "n", "requests": {GPU: 2}}],
    )
    assert warnings == [
        "node 'n': running pods hold 2 nvidia.com/gpu but the node reports 1; free clamped at 0",
        "node 'n': running pod 'r' holds 2 GPUs but only 1 GPU devices are left for it"
        " (a GPU was lost?)",
    ]
    assert snap.free("n").gpu_milli == {"g0": 0}
    assert snap.free("n").resources == {GPU: 0}


def test_nics_held_beyond_the_node_warn_and_clamp() -> None:
    # "a" names r0; "b" asks 2 NICs naming none, and only r1 is left: 3 NICs held of 2
    snap, warnings = load(
        device_layouts={"pair": PAIR},
        nodes=[{"name": "n", "device_layout": "pair", "allocatable": {GPU: 2, NIC: 2}}],
        running=[
            {"name": "a", "node": "n", "requests": {NIC: 1}, "devices": ["r0"]},
            {"name": "b", "node": "n", "requests": {NIC: 2}},
        ],
    )
    assert warnings == [
        "node 'n': running pods hold 3 rdma/hca but the node reports 2; free clamped at 0",
        "node 'n': running pod 'b' holds 2 NICs but only 1 NIC devices are left for it",
    ]
    assert snap.free("n").nics == frozenset()
    assert snap.free("n").resources[NIC] == 0


def test_resource_the_node_does_not_advertise_warns() -> None:
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {"cpu": 4}}],
        running=[{"name": "r", "node": "n", "requests": {"cpu": 1, "example.com/fpga": 2}}],
    )
    assert warnings == [
        "node 'n': running pods request 2 example.com/fpga, which the node does not advertise"
    ]
    # nothing of it is free
    assert snap.free("n").resources == {"cpu": 3000}
    assert snap.free("n").resources.get("example.com/fpga", 0) == 0


def test_running_shares_beyond_one_gpu_warn_and_clamp() -> None:
    # two 600m shares named on one GPU: 1200 of 1000 milli
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {GPU: 2}}],
        running=[
            {"name": "a", "node": "n", "requests": {GPU: "600m"}, "devices": ["gpu-1"]},
            {"name": "b", "node": "n", "requests": {GPU: "600m"}, "devices": ["gpu-1"]},
        ],
    )
    assert warnings == ["node 'n': GPU 'gpu-1' is shared beyond 1000 milli-GPU; free clamped at 0"]
    assert snap.free("n").gpu_milli == {"gpu-0": 1000, "gpu-1": 0}


@pytest.mark.parametrize(
    ("level", "node", "warning"),
    [
        # a level tied to a label: the node lacks the label
        (
            {"name": "leaf", "node_label": "lf"},
            {"name": "b", "labels": {"sp": "s1"}},
            "node 'b' has no label 'lf' for level 'leaf': it joins no leaf domain",
        ),
        # a level of explicit membership: the node names no domain of it
        (
            {"name": "leaf"},
            {"name": "b", "labels": {"sp": "s1"}},
            "node 'b' has no explicit membership for level 'leaf': it joins no leaf domain",
        ),
    ],
)
def test_node_without_a_level_warns_and_joins_no_domain(level, node, warning) -> None:
    snap, warnings = load(
        levels=[{"name": "spine", "node_label": "sp"}, level],
        nodes=[
            {
                "name": "a",
                "labels": {"sp": "s1", "lf": "l1"},
                "domains": {"leaf": "l1"} if "node_label" not in level else {},
            },
            node,
        ],
    )
    assert warnings == [warning]
    topo = build_topology(snap)
    assert topo.domain_of("b", "leaf") is None
    assert topo.domains_at("leaf") == (Domain("leaf", ("s1", "l1")),)
    assert topo.nodes_in(Domain("leaf", ("s1", "l1"))) == {"a"}
    # it keeps the levels it has
    assert topo.domain_of("b", "spine") == Domain("spine", ("s1",))
    assert topo.nodes_in(Domain("spine", ("s1",))) == {"a", "b"}


# --------------------------------------------------------------------------- gang minimums


@pytest.mark.parametrize(
    ("gang", "role_mins", "min_size"),
    [
        # not elastic: every role at its count; the gang at its full size 1 + 4
        ({"roles": [("launcher", 1, None), ("worker", 4, None)]}, [1, 4], 5),
        # elastic (3 < 5): roles default to 0; the launcher sets its own 1
        ({"min_member": 3, "roles": [("launcher", 1, 1), ("worker", 4, None)]}, [1, 0], 3),
        # the roles' own minimums may ask more than the gang's: 1 + 3 = 4 > 2
        ({"min_member": 2, "roles": [("launcher", 1, 1), ("worker", 4, 3)]}, [1, 3], 4),
        # min_member equal to the full size is not elastic
        ({"min_member": 5, "roles": [("launcher", 1, None), ("worker", 4, None)]}, [1, 4], 5),
    ],
)
def test_role_and_gang_minimums(gang, role_mins, min_size) -> None:
    roles = tuple(Role(name=n, count=c, min_member=m) for n, c, m in gang["roles"])
    g = Gang(name="g", queue="q", roles=roles, min_member=gang.get("min_member"))
    assert [g.role_min(r) for r in g.roles] == role_mins
    assert g.min_size == min_size
    assert g.size == 5


# --------------------------------------------------------------------------- taints, affinity


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, ("k", "v", "NoSchedule"), True),
        (
            {"key": "k", "value": "w", "effect": "NoSchedule"},
            ("k", "v", "NoSchedule"),
            False,
        ),  # value differs
        (
            {"key": "k", "operator": "Exists"},
            ("k", "v", "NoExecute"),
            True,
        ),  # any value, any effect
        (
            {"key": "k", "value": "v", "effect": "NoExecute"},
            ("k", "v", "NoSchedule"),
            False,
        ),  # effect differs
        ({"key": "j", "operator": "Exists"}, ("k", "v", "NoSchedule"), False),  # key differs
        ({"operator": "Exists"}, ("k", "v", "NoSchedule"), True),  # empty key + Exists: everything
        ({"operator": "Exists", "effect": "NoExecute"}, ("k", "v", "NoSchedule"), False),
    ],
)
def test_toleration_matching(toleration, taint, tolerated) -> None:
    key, value, effect = taint
    assert (
        Toleration(**toleration).tolerates(Taint(key=key, value=value, effect=effect)) is tolerated
    )


@pytest.mark.parametrize(
    ("operator", "values", "labels", "matches"),
    [
        ("In", ("a", "b"), {"k": "b"}, True),
        ("In", ("a", "b"), {"k": "c"}, False),
        ("In", ("a",), {}, False),
        ("NotIn", ("a",), {"k": "b"}, True),
        ("NotIn", ("a",), {"k": "a"}, False),
        ("NotIn", ("a",), {}, True),  # core/v1: a missing label is not in the set
        ("Exists", (), {"k": ""}, True),
        ("Exists", (), {}, False),
        ("DoesNotExist", (), {}, True),
        ("DoesNotExist", (), {"k": "x"}, False),
        ("Gt", ("5",), {"k": "6"}, True),
        ("Gt", ("5",), {"k": "5"}, False),
        ("Lt", ("5",), {"k": "-1"}, True),
        ("Lt", ("5",), {"k": "x"}, False),  # not an integer
    ],
)
def test_node_selector_requirement(operator, values, labels, matches) -> None:
    req = NodeSelectorRequirement(key="k", operator=operator, values=values)
    assert req.matches(labels) is matches


@pytest.mark.parametrize(
    ("operator", "values", "error"),
    [
        ("In", (), "operator In needs at least one value"),
        ("NotIn", (), "operator NotIn needs at least one value"),
        ("Exists", ("a",), "operator Exists takes no values"),
        ("DoesNotExist", ("a",), "operator DoesNotExist takes no values"),
        ("Gt", ("a",), "operator Gt takes exactly one integer value"),
        ("Lt", ("1", "2"), "operator Lt takes exactly one integer value"),
    ],
)
def test_node_selector_requirement_rejects(operator, values, error) -> None:
    with pytest.raises(ValueError, match=error):
        NodeSelectorRequirement(key="k", operator=operator, values=values)


def test_role_admits_checks_selector_affinity_and_taints() -> None:
    node = Node(
        name="n",
        labels={"zone": "z1"},
        taints=(
            Taint(key="gpu", value="yes", effect="NoSchedule"),
            Taint(key="spot", effect="PreferNoSchedule"),  # only a preference
        ),
    )
    tol = (Toleration(key="gpu", operator="Exists"),)
    assert Role(name="w", count=1, node_selector={"zone": "z1"}, tolerations=tol).admits(node)
    assert not Role(name="w", count=1, node_selector={"zone": "z2"}, tolerations=tol).admits(node)
    assert not Role(name="w", count=1).admits(node)  # the NoSchedule taint
    affinity = ({"match_expressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]},)
    assert not Role(name="w", count=1, node_affinity=affinity, tolerations=tol).admits(node)


# --------------------------------------------------------------------------- the gang key


def test_the_gang_key_is_namespace_slash_name_everywhere() -> None:
    # one key, "namespace/gang", whichever object names the gang
    gang = Gang(name="g", namespace="ns", queue="q", roles=(Role(name="w", count=1),))
    placement = PodPlacement(pod="g-w-0", gang="g", namespace="ns", role="w", node="n")
    outcome = GangOutcome(gang="g", namespace="ns", admitted=True, placed=1)
    running = RunningPod(name="r", namespace="ns", gang="g", node="n")
    assert gang.key == placement.gang_key == outcome.key == running.gang_key == "ns/g"
    assert RunningPod(name="r", node="n").gang_key is None  # no gang
    plan = Plan(gangs=(outcome,), pods=(placement,))
    assert plan.pods_of("ns/g") == [placement]
    assert plan.placed("g", namespace="ns") == 1
    assert plan.placed("g") == 0  # default/g is another gang
