"""Devices from DRA ResourceSlices, pods that ask with DRA claims (issue 28).

The fixture ``tests/fixtures/k8s/dra/cluster.yaml`` (its header says what each driver
publishes and where that comes from) is two nodes of one 8-GPU, 8-NIC server model whose
locality differs per GPU. Expected values are read off the fixture's header table by hand.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gangplan.adapters.kube.cel import (
    CelDevice,
    CelEvalError,
    CelUnsupported,
    Quantity,
    Version,
    compile_selector,
)
from gangplan.adapters.kube.read import KubeOptions, read_kube
from gangplan.adapters.kube.summary import REASON_NOT_MAPPED
from gangplan.models import GPU_MILLI
from gangplan.models.quantity import parse_quantity
from gangplan.solver.cycle.pipeline import solve_cycle
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import SolverConfig

FIXTURE = Path(__file__).parents[2] / "fixtures" / "k8s" / "dra" / "cluster.yaml"
DETERMINISTIC = SolverConfig(deterministic=True, deterministic_time=5.0)


def _docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(FIXTURE.read_text()) if d]


def _read(docs: list[dict[str, Any]], tmp_path: Path, **opts: Any):  # type: ignore[no-untyped-def]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return read_kube([path], KubeOptions(**opts))


def _slice(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "ResourceSlice" and d["metadata"]["name"] == name)


# --------------------------------------------------------------------------- the fixture


def test_fixture_passes_the_1_37_schemas() -> None:
    """Every document of the fixture validates, strictly (no unknown field), against the
    Kubernetes 1.37 OpenAPI schemas; and the validator does refuse a misspelt field, so the
    check can fail."""
    for doc in _docs():
        kubernetes_validate.validate(doc, "1.37", strict=True)
    bad = copy.deepcopy(_slice(_docs(), "node-a-dra.net-q9w4m"))
    bad["spec"]["devices"][0]["attribute"] = bad["spec"]["devices"][0].pop("attributes")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.37", strict=True)


def test_slices_give_the_device_tree(tmp_path: Path) -> None:
    """The header's table, as the snapshot's layout: PCIe roots are switches; NUMA from
    DRANET's dra.net/numaNode (roots 15 and 48 NUMA 0, 97 and b8 NUMA 1); pci0000:37 holds
    only NVIDIA GPUs, which publish no NUMA node, so it is a NUMA node of its own. 8 GPUs and
    8 NICs, though the Node advertises neither resource (DRA nodes do not)."""
    snap = _read(_docs(), tmp_path).snapshot
    node = snap.node_by_name["node-a"]
    assert node.allocatable["nvidia.com/gpu"] == 8 * GPU_MILLI
    assert node.allocatable["rdma/hca"] == 8 * GPU_MILLI
    assert node.gpu_model == "NVIDIA H100 80GB HBM3"
    tree = {
        numa.name: {sw.name: (sw.gpus, sw.nics) for sw in numa.pcie_switches}
        for numa in snap.layout_of(node).numa_nodes
    }
    assert tree == {
        "numa0": {
            "pci0000:15": (("gpu-0",), ("pci-0000-1a-00-0",)),
            "pci0000:48": ((), ("pci-0000-4c-00-0", "pci-0000-4d-00-0")),
        },
        "numa1": {
            "pci0000:97": (
                ("gpu-4", "gpu-5", "gpu-6", "gpu-7"),
                ("pci-0000-9d-00-0", "pci-0000-9e-00-0"),
            ),
            "pci0000:b8": ((), ("pci-0000-bc-00-0", "pci-0000-bd-00-0", "pci-0000-be-00-0")),
        },
        "numa-of-pci0000:37": {"pci0000:37": (("gpu-1", "gpu-2", "gpu-3"), ())},
    }
    refs = snap.metadata["kubernetes"]["dra_devices"]["node-b"]
    assert refs["gpu-4"] == "gpu.nvidia.com/node-b/gpu-4"
    assert refs["pci-0000-9e-00-0"] == "dra.net/node-b/pci-0000-9e-00-0"


def test_claims_give_running_pods_their_devices(tmp_path: Path) -> None:
    """resident-a's claim is made from a template (its name in status.resourceClaimStatuses),
    resident-b's and probe-b's are named directly; each holds what its allocation lists."""
    snap = _read(_docs(), tmp_path).snapshot
    held = {
        p.name: (p.node, set(p.devices), p.requests.get("nvidia.com/gpu", 0)) for p in snap.running
    }
    assert held["resident-a"] == (
        "node-a",
        {"gpu-4", "gpu-5", "gpu-6", "gpu-7", "pci-0000-1a-00-0"},
        4 * GPU_MILLI,
    )
    assert held["resident-b"] == ("node-b", {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, 4 * GPU_MILLI)
    assert held["probe-b"] == ("node-b", {"pci-0000-9d-00-0"}, 0)


def test_convert_then_solve_places_the_pod_under_its_nics_root(tmp_path: Path) -> None:
    """trainer-0 asks 4 GPUs and 1 RDMA NIC with matchAttribute resource.kubernetes.io/pcieRoot
    (read as joint allocation ``pcie``). Worked by hand from the header's table:

    * node-a: free GPUs gpu-0..gpu-3 (resident-a holds 4..7). The pod's NIC must come from a
      PCIe root holding one of its GPUs: pci0000:15 (gpu-0) has only NIC 1a, which resident-a
      holds; pci0000:37 (gpu-1..3) has no NIC. So node-a cannot take it.
    * node-b: free GPUs gpu-4..gpu-7 only (resident-b holds 0..3), all under pci0000:97, whose
      NICs are 9d (probe-b holds it) and 9e. So the one placement is node-b, gpu-4..gpu-7,
      NIC pci-0000-9e-00-0 — all five under one root, as DRA's constraint asks too.

    A guessed layout cannot say this: the Nodes advertise no GPU at all, and hgx8 would put a
    NIC beside every pair of GPUs.
    """
    read = _read(_docs(), tmp_path)
    gang = read.snapshot.gang_by_key["ml/trainer-0"]
    assert gang.joint == "pcie"
    assert gang.roles[0].requests["nvidia.com/gpu"] == 4 * GPU_MILLI
    assert gang.roles[0].requests["rdma/hca"] == 1 * GPU_MILLI
    plan = solve_cycle(read.snapshot, config=DETERMINISTIC).plan
    assert verify(read.snapshot, plan) == []
    (p,) = plan.pods
    assert (p.node, set(p.gpus), set(p.nics)) == (
        "node-b",
        {"gpu-4", "gpu-5", "gpu-6", "gpu-7"},
        {"pci-0000-9e-00-0"},
    )


def test_without_slices_behaviour_is_as_before(tmp_path: Path) -> None:
    """Drop every DRA object: the Nodes advertise no GPU, so the pod asks none and nodes
    have the implicit (empty) layout, exactly what a dump without DRA reads to."""
    docs = [d for d in _docs() if not d["apiVersion"].startswith("resource.k8s.io")]
    snap = _read(docs, tmp_path).snapshot
    assert all(not n.has_device_topology for n in snap.nodes)
    assert "nvidia.com/gpu" not in snap.node_by_name["node-a"].allocatable
    assert snap.metadata["kubernetes"]["dra_devices"] == {}


# --------------------------------------------------------------------------- hostile slices


def _notes(read: Any, kind: str) -> list[str]:
    return [e.detail for e in [*read.summary.notes, *read.summary.skipped] if e.kind == kind]


@pytest.mark.parametrize(
    ("mutate", "expect"),
    [
        # a slice naming a node that is not in the dump is skipped, the other nodes read
        (lambda s: s["spec"].__setitem__("nodeName", "node-z"), "no such Node"),
        # 200 devices: more than a ResourceSlice may hold (128)
        (
            lambda s: s["spec"].__setitem__(
                "devices",
                [{**s["spec"]["devices"][0], "name": f"gpu-{i}"} for i in range(200)],
            ),
            "more than the 128",
        ),
        # a device name used twice in one pool: the second is skipped
        (
            lambda s: s["spec"]["devices"].__setitem__(1, {**s["spec"]["devices"][0]}),
            "used twice in pool",
        ),
        # no nodeName: network-attached devices are not modelled
        (
            lambda s: (s["spec"].pop("nodeName"), s["spec"].__setitem__("allNodes", True)),
            "not local to one node",
        ),
    ],
    ids=["unknown-node", "huge-count", "duplicate-name", "all-nodes"],
)
def test_bad_slices_are_noted_and_skipped(tmp_path: Path, mutate: Any, expect: str) -> None:
    docs = _docs()
    mutate(_slice(docs, "node-a-gpu.nvidia.com-7xk2p"))
    read = _read(docs, tmp_path)
    notes = _notes(read, "ResourceSlice.resource.k8s.io") + _notes(read, "ResourceSlice")
    assert any(expect in n for n in notes), notes
    # node-b is untouched: its 8 GPUs are read as before
    assert read.snapshot.node_by_name["node-b"].allocatable["nvidia.com/gpu"] == 8 * GPU_MILLI


def test_missing_attributes_never_invent_locality(tmp_path: Path) -> None:
    """gpu-4 of node-a loses its pcieRoot: it gets a switch of its own (not pci0000:97), and
    the note names it; the slice is otherwise read."""
    docs = _docs()
    dev = _slice(docs, "node-a-gpu.nvidia.com-7xk2p")["spec"]["devices"][4]
    assert dev["name"] == "gpu-4"
    del dev["attributes"]["resource.kubernetes.io/pcieRoot"]
    read = _read(docs, tmp_path)
    layout = read.snapshot.layout_of(read.snapshot.node_by_name["node-a"])
    switch = {g: sw.name for _, sw in layout.switches() for g in sw.gpus}
    assert switch["gpu-4"] == "no-pcie-root-gpu-4"
    assert switch["gpu-5"] == "pci0000:97"
    assert any(
        "without resource.kubernetes.io/pcieRoot (gpu-4)" in n
        for n in _notes(read, "ResourceSlice")
    )


def test_older_pool_generation_is_not_read(tmp_path: Path) -> None:
    """Two slices of pool gpu.nvidia.com/node-a: generation 1 (8 GPUs) and generation 2 (2
    GPUs, gpu-0 and gpu-1): only generation 2 counts, as the allocator reads the newest."""
    docs = _docs()
    old = _slice(docs, "node-a-gpu.nvidia.com-7xk2p")
    new = copy.deepcopy(old)
    new["metadata"]["name"] = "node-a-gpu.nvidia.com-r2d2x"
    new["spec"]["pool"]["generation"] = 2
    new["spec"]["devices"] = new["spec"]["devices"][:2]
    docs.append(new)
    # resident-a's claim names gpu-4..7, which generation 2 no longer has
    read = _read(docs, tmp_path)
    assert read.snapshot.node_by_name["node-a"].allocatable["nvidia.com/gpu"] == 2 * GPU_MILLI
    assert any(
        "replaced by generation 2" in n for n in _notes(read, "ResourceSlice.resource.k8s.io")
    )


# --------------------------------------------------------------------------- DRA pods


def _template(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(
        d for d in docs if d["kind"] == "ResourceClaimTemplate" and d["metadata"]["name"] == name
    )


def test_selector_restricts_nodes(tmp_path: Path) -> None:
    """Selectors on memory (at least 64Gi: the H100's 81559Mi passes, 40960Mi not) and
    product that only node-b's GPUs pass (node-a's GPUs are relabelled A100 40GB here): the
    pod may go to node-b only (hostname affinity)."""
    docs = _docs()
    for dev in _slice(docs, "node-a-gpu.nvidia.com-7xk2p")["spec"]["devices"]:
        dev["attributes"]["productName"] = {"string": "NVIDIA A100-SXM4-40GB"}
        dev["capacity"]["memory"] = {"value": "40960Mi"}
    req = _template(docs, "four-gpus-one-nic")["spec"]["spec"]["devices"]["requests"][0]
    memory = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("64Gi")) >= 0'
    product = "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"
    req["exactly"]["selectors"] = [
        {"cel": {"expression": memory}},
        {"cel": {"expression": product}},
    ]
    kubernetes_validate.validate(_template(docs, "four-gpus-one-nic"), "1.37", strict=True)
    read = _read(docs, tmp_path)
    role = read.snapshot.gang_by_key["ml/trainer-0"].roles[0]
    (term,) = role.node_affinity
    assert [(r.key, r.values) for r in term.match_expressions] == [
        ("kubernetes.io/hostname", ("node-b",))
    ]


def test_selector_gangplan_cannot_evaluate_is_a_note(tmp_path: Path) -> None:
    """A macro (exists) is outside the subset gangplan evaluates: the pod is still read with
    its 4 GPUs, and the note names the request and the expression."""
    docs = _docs()
    req = _template(docs, "four-gpus-one-nic")["spec"]["spec"]["devices"]["requests"][0]
    expr = "device.attributes['gpu.nvidia.com'].exists(k, k == 'uuid')"
    req["exactly"]["selectors"] = [{"cel": {"expression": expr}}]
    read = _read(docs, tmp_path)
    role = read.snapshot.gang_by_key["ml/trainer-0"].roles[0]
    assert role.requests["nvidia.com/gpu"] == 4 * GPU_MILLI
    notes = [
        e for e in read.summary.notes if e.name == "ml/trainer-0" and e.reason == REASON_NOT_MAPPED
    ]
    assert any("cannot evaluate" in e.detail and "exists" in e.detail for e in notes), notes


@pytest.mark.parametrize(
    ("mutate", "expect"),
    [
        # the template the pod names is not in the dump: the pod is listed, not read
        (
            lambda d: _template(d, "four-gpus-one-nic")["metadata"].__setitem__("name", "gone"),
            "is not in the dump",
        ),
        # allocationMode All asks every matching device of a node: not modelled
        (
            lambda d: _template(d, "four-gpus-one-nic")["spec"]["spec"]["devices"]["requests"][0][
                "exactly"
            ].update({"allocationMode": "All", "count": None}),
            "allocationMode 'All'",
        ),
        # a class gangplan does not know
        (
            lambda d: _template(d, "four-gpus-one-nic")["spec"]["spec"]["devices"]["requests"][0][
                "exactly"
            ].__setitem__("deviceClassName", "fpga.example.com"),
            "not in the dump",
        ),
    ],
    ids=["template-missing", "allocation-all", "unknown-class"],
)
def test_unreadable_claims_leave_the_pod_out_with_a_reason(
    tmp_path: Path, mutate: Any, expect: str
) -> None:
    docs = _docs()
    mutate(docs)
    for d in docs:  # drop the nulls the mutation left (count: None)
        if d["kind"] == "ResourceClaimTemplate":
            for r in d["spec"]["spec"]["devices"]["requests"]:
                r["exactly"] = {k: v for k, v in r["exactly"].items() if v is not None}
    read = _read(docs, tmp_path)
    assert "ml/trainer-0" not in read.snapshot.gang_by_key
    skipped = [e.detail for e in read.summary.skipped if e.name == "ml/trainer-0"]
    assert any(expect in s for s in skipped), skipped


# --------------------------------------------------------------------------- CEL subset


H100 = CelDevice(
    "gpu.nvidia.com",
    attributes={
        "gpu.nvidia.com": {
            "type": "gpu",
            "productName": "NVIDIA H100",
            "driverVersion": Version("570.124.6"),
        },
        "resource.kubernetes.io": {"pcieRoot": "pci0000:97"},
    },
    capacity={"gpu.nvidia.com": {"memory": Quantity(parse_quantity("81559Mi"))}},
)


NVIDIA_CLASS = (  # the NVIDIA driver's DeviceClass selector
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        (NVIDIA_CLASS, True),
        ('device.driver == "dra.net"', False),
        # 81559Mi >= 80Gi (81920Mi)? no
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0', False),
        ('device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("79Gi"))', True),
        (
            'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))',
            True,
        ),
        ('"pcieRoot" in device.attributes["resource.kubernetes.io"]', True),
        # false && error is false (CEL's commutative error handling)
        ("device.driver == 'x' && device.attributes['gpu.nvidia.com'].index <= 2", False),
        ("!(device.attributes['gpu.nvidia.com'].type != 'gpu')", True),
        # heterogeneous equality: an int is never equal to a string
        ("device.attributes['gpu.nvidia.com'].type == 1", False),
    ],
)
def test_cel_subset(expr: str, want: bool) -> None:
    assert compile_selector(expr).matches(H100) is want


def test_cel_missing_key_is_an_evaluation_error() -> None:
    with pytest.raises(CelEvalError):
        compile_selector("device.attributes['gpu.nvidia.com'].index <= 2").matches(H100)


@pytest.mark.parametrize(
    "expr",
    [
        "device.attributes['gpu.nvidia.com'].exists(k, k == 'x')",  # a macro
        "size(device.attributes) > 1",  # a function outside the subset
        "device.driver == 'a' ? true : false",  # the ternary operator
        "1 + 1 == 2",  # arithmetic
        "x.driver == 'a'",  # a variable other than device
        "(" * 100 + "true" + ")" * 100,  # nested too deep
    ],
)
def test_cel_outside_the_subset_is_refused_at_compile(expr: str) -> None:
    with pytest.raises(CelUnsupported):
        compile_selector(expr)
