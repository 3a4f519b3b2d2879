"""``convert k8s`` leaves out what a cluster will not run or bind, and catches option typos:
pending pods being deleted or held by another controller's scheduling gate are listed, not
planned; an unknown ``--topology-labels`` preset and a ``--gpu-resource`` no node
advertises are errors naming what would be accepted; joint allocation without any device
layout warns and names ``--device-layout``."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from gangplan.adapters.cli import main
from gangplan.adapters.kube.read import read_kube
from gangplan.adapters.kube.summary import REASON_DELETING, REASON_GATED

NODE = (
    "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
    "status: {allocatable: {cpu: '8', nvidia.com/gpu: '8'}, "
    "conditions: [{type: Ready, status: 'True'}]}\n"
)


def pod(name: str, meta: str = "", spec: str = "") -> str:
    return (
        f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}{meta}}}\n"
        f"spec: {{{spec}containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]}}\n"
    )


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_pods_being_deleted_or_gated_by_another_controller_are_listed_not_planned(
    tmp_path: Path,
) -> None:
    dump = tmp_path / "d.yaml"
    dump.write_text(
        NODE
        + pod("going", ", deletionTimestamp: '2026-01-01T00:00:00Z'")
        + pod("gated", spec="schedulingGates: [{name: example.com/quota}], ")
        + pod("ours", spec="schedulingGates: [{name: gangplan.io/placement}], ")
        + pod("plain")
        # a running pod being deleted still holds its node's resources: read
        + pod("leaving", ", deletionTimestamp: '2026-01-01T00:00:00Z'", "nodeName: n1, ")
    )
    read = read_kube([dump])
    # only gangplan's own gate is one gangplan lifts
    assert sorted(g.name for g in read.snapshot.gangs) == ["ours", "plain"]
    assert [p.name for p in read.snapshot.running] == ["leaving"]
    skipped = {e.name: e for e in read.summary.skipped}
    assert skipped["default/going"].reason == REASON_DELETING
    assert skipped["default/gated"].reason == REASON_GATED
    assert "example.com/quota" in skipped["default/gated"].detail
    text = "\n".join(read.summary.lines())
    assert "kube-scheduler skips it" in text and "refuses to bind a gated pod" in text


def test_a_gang_with_a_gated_pod_is_not_planned_half(tmp_path: Path) -> None:
    # a gang of two (scheduler-plugins PodGroup, minMember 2) with one gated pod: the
    # gang cannot be bound whole, so it is left out (fewer pods than its minimum)
    group = (
        "---\napiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
        "metadata: {name: g}\nspec: {minMember: 2}\n"
    )
    label = ", labels: {scheduling.x-k8s.io/pod-group: g}"
    dump = tmp_path / "d.yaml"
    dump.write_text(
        NODE + group + pod("g-0", label) + pod("g-1", label, "schedulingGates: [{name: x/y}], ")
    )
    read = read_kube([dump])
    assert read.snapshot.gangs == ()


def test_an_unknown_topology_preset_lists_the_presets(tmp_path: Path) -> None:
    dump = tmp_path / "d.yaml"
    dump.write_text(NODE)
    r = run("convert", "k8s", str(dump), "--topology-labels", "foo")
    assert r.exit_code == 1
    assert (
        "error: --topology-labels 'foo': not a preset (kueue, gke, eks, topograph, "
        "topograph-v0) and not a node label key with a prefix" in r.stderr
    )
    r = run("convert", "k8s", str(dump), "--topology-labels", "gek")
    assert "did you mean 'gke'?" in r.stderr
    # a bare key is still accepted when its level is named
    assert run("convert", "k8s", str(dump), "--topology-labels", "rack=rack").exit_code == 0


def test_a_gpu_resource_no_node_advertises_is_an_error_naming_what_they_do(
    tmp_path: Path,
) -> None:
    dump = tmp_path / "d.yaml"
    dump.write_text(NODE + pod("plain"))
    r = run("convert", "k8s", str(dump), "--gpu-resource", "nvidia.com/gpuX")
    assert r.exit_code == 1
    assert (
        "error: --gpu-resource 'nvidia.com/gpuX': no node of the dump advertises it; "
        "the nodes advertise nvidia.com/gpu (1 node)" in r.stderr
    )
    assert r.stdout == ""
    # a CPU-only dump with the default GPU resource is fine
    cpu = tmp_path / "cpu.yaml"
    cpu.write_text(NODE.replace(", nvidia.com/gpu: '8'", ""))
    assert run("convert", "k8s", str(cpu)).exit_code == 0


FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "k8s" / "small-cluster.yaml"


def test_joint_allocation_without_any_device_layout_names_the_option() -> None:
    # llm-train's workers ask SamePCIe joint allocation of GPUs and RDMA NICs; the fixture's
    # nodes have no Koordinator Device, so without --device-layout nothing can place them
    r = run("convert", "k8s", str(FIXTURE))
    assert r.exit_code == 0
    assert (
        "warning: 1 gang (ml/llm-train) asks joint GPU/NIC allocation, but no node has a "
        "device layout" in " ".join(r.stderr.split())  # wrapped at 80 columns
    )
    assert "--device-layout (a template: hgx8, pcie4; or a DeviceLayout file)" in " ".join(
        r.stderr.split()
    )
    quiet = run("convert", "k8s", str(FIXTURE), "--device-layout", "hgx8")
    assert "joint GPU/NIC" not in quiet.stderr
