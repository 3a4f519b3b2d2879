"""Free capacity (models/free.py): what running pods leave on each node, per resource and per
device, and the warnings for inconsistent input.

Both the verifier and the model count placements against these amounts, so a mistake here
would pass both judges: every expected value below is worked out by hand in a comment, from
the rules in the module docstring of ``gangplan.models.free`` (named devices first, then the
lowest-listed free ones in pod-name order; shares pack onto a partly used GPU; everything
clamped at 0 with a warning).
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplan.models import load_instance

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


def load(**parts: Any) -> Any:
    return load_instance({**API, **parts})


def pod(
    name: str, devices: tuple[str, ...] = (), node: str = "n", **requests: Any
) -> dict[str, Any]:
    """A running pod; ``gpu=`` and ``nic=`` stand for the GPU and NIC resource names."""
    names = {"gpu": GPU, "nic": NIC}
    req = {names.get(k, k): v for k, v in requests.items()}
    return {"name": name, "node": node, "requests": req, "devices": list(devices)}


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
    # the node's GPU resource is 2000 - 1200 = 800 free: the devices (1000 + 0) may not offer
    # more, so the cut comes off the last-listed device with milli left: gpu-0 1000 -> 800
    assert snap.free("n").resources == {GPU: 800}
    assert snap.free("n").gpu_milli == {"gpu-0": 800, "gpu-1": 0}


def test_a_node_without_running_pods_is_all_free() -> None:
    # nothing runs: free = allocatable; every device whole; no GPU held
    snap, warnings = load(
        device_layouts={"pair": PAIR},
        nodes=[{"name": "n", "device_layout": "pair", "allocatable": {"cpu": 4, GPU: 2, NIC: 2}}],
    )
    assert warnings == []
    free = snap.free("n")
    assert free.resources == {"cpu": 4000, GPU: 2000, NIC: 2000}
    assert free.gpu_milli == {"g0": 1000, "g1": 1000}
    assert free.whole_gpus == ("g0", "g1")
    assert free.nics == frozenset({"r0", "r1"})
    assert free.running_gpu_milli == 0


def test_cpu_and_memory_clamp_at_zero() -> None:
    # cpu: 3 + 5 = 8 of 8 -> 0 free, exactly full is no warning;
    # memory: 48Gi + 32Gi = 80Gi of 64Gi -> clamped at 0, one warning;
    # ephemeral-storage: 100Gi - 10Gi = 90Gi
    snap, warnings = load(
        nodes=[
            {
                "name": "n",
                "allocatable": {"cpu": 8, "memory": "64Gi", "ephemeral-storage": "100Gi"},
            }
        ],
        running=[
            pod("a", cpu=3, memory="48Gi"),
            pod("b", cpu=5, memory="32Gi", **{"ephemeral-storage": "10Gi"}),
        ],
    )
    assert warnings == [
        "node 'n': running pods hold 80Gi memory but the node reports 64Gi; free clamped at 0"
    ]
    assert snap.free("n").resources == {
        "cpu": 0,
        "memory": 0,
        "ephemeral-storage": 90 * 2**30,
    }


# --------------------------------------------------------------------------- lost GPUs


def test_lost_gpu_with_a_named_and_an_unnamed_pod() -> None:
    # 2 GPUs (gpu-0, gpu-1). "a" names gpu-1 and goes first (pods naming a GPU first): gpu-1
    # taken. "b" asks 2 and names none: only gpu-0 is left, so it gets 1 of its 2.
    # Held: 1 + 2 = 3 GPUs of 2 -> the GPU resource is clamped at 0.
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {GPU: 2}}],
        running=[pod("a", ("gpu-1",), gpu=1), pod("b", gpu=2)],
    )
    assert warnings == [
        "node 'n': running pods hold 3 nvidia.com/gpu but the node reports 2; free clamped at 0",
        "node 'n': running pod 'b' holds 2 GPUs but only 1 GPU devices are left for it"
        " (a GPU was lost?)",
    ]
    free = snap.free("n")
    assert free.gpu_milli == {"gpu-0": 0, "gpu-1": 0}
    assert free.whole_gpus == ()
    assert free.resources == {GPU: 0}
    assert free.running_gpu_milli == 3000  # 1000 + 2000, what the pods request (unclamped)


def test_a_share_on_a_node_whose_gpus_are_all_taken() -> None:
    # 1 GPU. "a" (1 whole GPU) and "b" (500m) name none: by name, a takes gpu-0; then no GPU
    # has 500 milli free for b. Held: 1000 + 500 = 1500m of 1000.
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {GPU: 1}}],
        running=[pod("a", gpu=1), pod("b", gpu="500m")],
    )
    assert warnings == [
        "node 'n': running pods hold 1500m nvidia.com/gpu but the node reports 1;"
        " free clamped at 0",
        "node 'n': running pod 'b' holds a GPU share but no GPU of the node has 500 milli free",
    ]
    assert snap.free("n").gpu_milli == {"gpu-0": 0}
    assert snap.free("n").resources == {GPU: 0}
    assert snap.free("n").running_gpu_milli == 1500


# --------------------------------------------------------------------------- GPU shares


@pytest.mark.parametrize(
    ("pods", "gpu_milli", "warnings"),
    [
        # several shares on one device: 250m a -> gpu-0 (none partly used: the lowest), 750
        # left; b and c pack onto the partly used gpu-0: 500, then 250; d (400m) does not fit
        # the 250 left, so it takes the lowest whole GPU: gpu-1 1000 - 400 = 600
        (
            [pod(x, gpu="250m") for x in "abc"] + [pod("d", gpu="400m")],
            {"gpu-0": 250, "gpu-1": 600},
            [],
        ),
        # a named share stays where it is named: a (800m) on gpu-1 leaves 200 there; b (300m,
        # unnamed) does not fit the 200, so it takes the lowest whole GPU, gpu-0: 700
        (
            [pod("a", ("gpu-1",), gpu="800m"), pod("b", gpu="300m")],
            {"gpu-0": 700, "gpu-1": 200},
            [],
        ),
        # pods naming a GPU go first even when their name sorts last: z (600m, gpu-0) first,
        # 400 left; then y (300m, unnamed) packs onto partly used gpu-0: 100
        (
            [pod("y", gpu="300m"), pod("z", ("gpu-0",), gpu="600m")],
            {"gpu-0": 100, "gpu-1": 1000},
            [],
        ),
        # shares beyond 1000 milli on one named device are clamped: 400 x 3 named on gpu-0:
        # 1000 - 400 = 600, 200, then -200 -> 0 with one warning (for the third); the GPU
        # resource has 2000 - 1200 = 800 left, so gpu-1 offers 800, not 1000
        (
            [pod(x, ("gpu-0",), gpu="400m") for x in "abc"],
            {"gpu-0": 0, "gpu-1": 800},
            ["node 'n': GPU 'gpu-0' is shared beyond 1000 milli-GPU; free clamped at 0"],
        ),
        # a fourth share named there warns again: 0 - 100 < 0; the resource has 2000 - 1300
        # = 700 left, which gpu-1 offers
        (
            [pod(x, ("gpu-0",), gpu="400m") for x in "abc"] + [pod("d", ("gpu-0",), gpu="100m")],
            {"gpu-0": 0, "gpu-1": 700},
            ["node 'n': GPU 'gpu-0' is shared beyond 1000 milli-GPU; free clamped at 0"] * 2,
        ),
    ],
)
def test_gpu_shares_on_the_implicit_layout(
    pods: list[dict[str, Any]], gpu_milli: dict[str, int], warnings: list[str]
) -> None:
    snap, got = load(nodes=[{"name": "n", "allocatable": {GPU: 2}}], running=pods)
    assert got == warnings
    assert snap.free("n").gpu_milli == gpu_milli


def test_shares_clamped_on_a_device_still_count_in_the_resource() -> None:
    # 400m x 3 on gpu-0 of 2 GPUs: the resource is 2000 - 1200 = 800 (no resource warning:
    # 1200 <= 2000); the devices would show 0 + 1000, but they never offer more than the
    # node's total (the kubelet and kube-scheduler count the resource), so gpu-1 offers 800
    snap, _ = load(
        nodes=[{"name": "n", "allocatable": {GPU: 2}}],
        running=[pod(x, ("gpu-0",), gpu="400m") for x in "abc"],
    )
    assert snap.free("n").resources == {GPU: 800}
    assert snap.free("n").gpu_milli == {"gpu-0": 0, "gpu-1": 800}
    assert snap.free("n").whole_gpus == ()
    assert snap.free("n").running_gpu_milli == 1200


def test_gpu_shares_on_named_devices_of_a_declared_layout() -> None:
    # pair layout: g0, g1. "a" names g1 (300m): g1 700 left. "b" (200m) names none: the
    # partly used g1 (700 >= 200) is preferred over the whole g0: g1 500.
    # Resource: 2000 - 300 - 200 = 1500. NICs untouched.
    snap, warnings = load(
        device_layouts={"pair": PAIR},
        nodes=[{"name": "n", "device_layout": "pair", "allocatable": {GPU: 2, NIC: 2}}],
        running=[pod("a", ("g1",), gpu="300m"), pod("b", gpu="200m")],
    )
    assert warnings == []
    free = snap.free("n")
    assert free.gpu_milli == {"g0": 1000, "g1": 500}
    assert free.whole_gpus == ("g0",)
    assert free.resources == {GPU: 1500, NIC: 2000}
    assert free.nics == frozenset({"r0", "r1"})
    assert free.running_gpu_milli == 500


# --------------------------------------------------------------------------- NICs


def test_named_and_unnamed_nics_on_the_implicit_layout() -> None:
    # 5 NICs nic-0..nic-4. Named first: a names nic-2, c names nic-0 -> left nic-1, nic-3,
    # nic-4. Then by pod name: a asks 2 and names 1 -> gets nic-1; b asks 1, names none ->
    # gets nic-3; c asks 1 and names 1 -> nothing more. Left: nic-4.
    # Resource: 5000 - 2000 - 1000 - 1000 = 1000.
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {NIC: 5}}],
        running=[pod("a", ("nic-2",), nic=2), pod("b", nic=1), pod("c", ("nic-0",), nic=1)],
    )
    assert warnings == []
    assert snap.free("n").nics == frozenset({"nic-4"})
    assert snap.free("n").resources == {NIC: 1000}


# --------------------------------------------------------------------------- warnings


def test_a_snapshot_without_nodes_warns_only_when_gangs_wait() -> None:
    gangs = [{"name": "g", "queue": "q", "roles": [{"name": "w", "count": 1}]}]
    _, warnings = load(queues=[{"name": "q"}], gangs=gangs)
    assert warnings == [
        "the snapshot has no nodes: no gang can be placed (a Kubernetes dump without "
        "`kubectl get nodes`?)"
    ]
    _, warnings = load(queues=[{"name": "q"}])
    assert warnings == []


def test_warnings_come_snapshot_first_then_node_by_node() -> None:
    # levels first (every node of the level, in node order), then per node in node order:
    # held resources (sorted by name: nvidia.com/gpu < rdma/hca), then NICs, then GPUs.
    # n1: 2 cpu held of 1. n2 (1 GPU, 1 NIC): q asks 2 of each and names none: it gets
    # nic-0 and gpu-0, one short of each.
    snap, warnings = load(
        levels=[{"name": "leaf", "node_label": "lf"}],
        nodes=[
            {"name": "n1", "allocatable": {"cpu": 1}},
            {"name": "n2", "allocatable": {GPU: 1, NIC: 1}},
        ],
        running=[pod("p", node="n1", cpu=2), pod("q", node="n2", gpu=2, nic=2)],
    )
    assert warnings == [
        "node 'n1' has no label 'lf' for level 'leaf': it joins no leaf domain",
        "node 'n2' has no label 'lf' for level 'leaf': it joins no leaf domain",
        "node 'n1': running pods hold 2 cpu but the node reports 1; free clamped at 0",
        "node 'n2': running pods hold 2 nvidia.com/gpu but the node reports 1; free clamped at 0",
        "node 'n2': running pods hold 2 rdma/hca but the node reports 1; free clamped at 0",
        "node 'n2': running pod 'q' holds 2 NICs but only 1 NIC devices are left for it",
        "node 'n2': running pod 'q' holds 2 GPUs but only 1 GPU devices are left for it"
        " (a GPU was lost?)",
    ]
    assert snap.free("n1").resources == {"cpu": 0}
    assert snap.free("n2").resources == {GPU: 0, NIC: 0}
    assert snap.free("n2").nics == frozenset()
    # the list is a copy: changing it changes nothing
    warnings.clear()
    assert len(snap.warnings()) == 7


def test_nics_short_go_to_pods_in_name_order() -> None:
    # 2 NICs, nothing named; listed b then a, but given in name order: a (asks 2) gets
    # nic-0 and nic-1, so b (asks 1) is the one left short, with 0 NICs.
    # Held 3 of 2: the resource clamps at 0.
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {NIC: 2}}],
        running=[pod("b", nic=1), pod("a", nic=2)],
    )
    assert warnings == [
        "node 'n': running pods hold 3 rdma/hca but the node reports 2; free clamped at 0",
        "node 'n': running pod 'b' holds 1 NICs but only 0 NIC devices are left for it",
    ]
    assert snap.free("n").nics == frozenset()
    assert snap.free("n").resources == {NIC: 0}


def test_every_named_nic_is_taken_even_beyond_the_request() -> None:
    # 4 NICs; a asks 1 but names nic-0 and nic-1 (what the device plugin gave it): both are
    # taken, nothing more is given: nic-2 and nic-3 stay free. The resource counts the
    # request: 4000 - 1000 = 3000.
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {NIC: 4}}],
        running=[pod("a", ("nic-0", "nic-1"), nic=1)],
    )
    assert warnings == []
    assert snap.free("n").nics == frozenset({"nic-2", "nic-3"})
    assert snap.free("n").resources == {NIC: 3000}


def test_devices_never_offer_more_than_the_node_total() -> None:
    # 1 GPU. "a" (500m) and "b" (1 GPU) name none; by name a takes gpu-0 (500 left), then b
    # finds no whole GPU (a GPU lost). The GPU resource: 1000 - 1500 -> clamped 0. Before the
    # one-rule cut the device offered 500 milli, so a placer could put a 250m share there
    # that the node-total check refuses; now the device offers 0 as well.
    snap, warnings = load(
        nodes=[{"name": "n", "allocatable": {GPU: 1}}],
        running=[pod("a", gpu="500m"), pod("b", gpu=1)],
    )
    assert snap.free("n").resources == {GPU: 0}
    assert snap.free("n").gpu_milli == {"gpu-0": 0}
    assert len(warnings) == 2
