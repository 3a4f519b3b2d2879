"""End to end: a small cluster dump -> snapshot -> plan -> bindings (issue 4, "Done means").

``tests/fixtures/k8s/small-cluster.yaml`` is a v1 List written by hand: 4 H100 nodes of 8
GPUs and 8 RDMA NICs (rack-1: h100-a1, h100-a2; rack-2: h100-b1, h100-b2 tainted
dedicated=inference), a CPU node that is not Ready, two PriorityClasses, two Volcano
Queues, a Kueue Topology, a running pod on 2 GPUs of h100-a1, and pending: a Volcano gang
(launcher + 2 eight-GPU workers, SamePCIe), a scheduler-plugins gang (3 one-GPU pods, at
least 2), a notebook with a sidecar, a pod whose PodGroup is missing, a finished pod.

The plan comes from the CP-SAT cycle (``gangplan.solver.cycle.pipeline.solve_cycle``); every Binding
is validated against the Kubernetes 1.37 OpenAPI schema with ``kubernetes-validate``, and
the plan passes the independent verifier.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from gangplan.adapters.cli import main
from gangplan.adapters.files import load_snapshot, write_snapshot
from gangplan.adapters.kube.bindings import (
    DEVICE_ANNOTATION,
    BindRequest,
    InMemoryBinder,
    KubeBinder,
    bind_requests,
    bindings_document,
    dump_bindings,
    select_bindings,
)
from gangplan.adapters.kube.read import KubeOptions, KubeRead, read_kube
from gangplan.adapters.kube.summary import REASON_GROUP_MISSING, REASON_POD_FINISHED
from gangplan.models import Plan, Snapshot
from gangplan.solver.cycle.pipeline import solve_cycle
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import SolverConfig

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "k8s" / "small-cluster.yaml"
GI = 2**30
K8S_VERSION = "1.37"


@pytest.fixture(scope="module")
def read() -> KubeRead:
    return read_kube([FIXTURE], KubeOptions(device_layout="hgx8"))


@pytest.fixture(scope="module")
def plan(read: KubeRead) -> Plan:
    return solve_cycle(read.snapshot, config=SolverConfig(time_limit_s=20)).plan


def test_snapshot_worked_out_by_hand(read: KubeRead) -> None:
    s = read.snapshot
    assert s.level_names == ("block", "rack")  # the Topology, hostname being the node
    nodes = {n.name: n for n in s.nodes}
    assert sorted(nodes) == ["cpu-1", "h100-a1", "h100-a2", "h100-b1", "h100-b2"]
    assert nodes["cpu-1"].ready is False and nodes["h100-a1"].ready is True
    assert [(t.key, t.value, t.effect) for t in nodes["h100-b2"].taints] == [
        ("dedicated", "inference", "NoSchedule")
    ]
    assert nodes["h100-a1"].allocatable == {
        "cpu": 64_000,
        "memory": 512 * GI,
        "nvidia.com/gpu": 8000,
        "rdma/hca": 8000,
        "pods": 110_000,
    }
    assert nodes["h100-a1"].device_layout == "hgx8" and nodes["cpu-1"].device_layout is None
    assert nodes["h100-a1"].gpu_model == "NVIDIA-H100-80GB-HBM3"
    q = s.queue_by_name
    assert (q["team-a"].weight, q["team-a"].guaranteed, q["team-a"].max) == (
        2.0,
        {"nvidia.com/gpu": 16_000},
        {},
    )
    assert (q["team-b"].weight, q["team-b"].max) == (1.0, {"nvidia.com/gpu": 8000, "cpu": 64_000})
    assert (q["default"].weight, q["default"].max) == (1.0, {})  # named by the notebook, assumed

    train = s.gang_by_key["ml/llm-train"]
    # minMember 3 = launcher + 2 workers: not elastic; PriorityClass training-high = 1000
    assert (train.queue, train.priority, train.min_member, train.joint) == (
        "team-a",
        1000,
        None,
        "pcie",
    )
    # every node advertises pods, so each pod also asks one of them (1000 milli)
    assert {r.name: (r.count, dict(r.requests), r.pod_names) for r in train.roles} == {
        "launcher": (1, {"cpu": 2000, "memory": 8 * GI, "pods": 1000}, ("llm-train-launcher-0",)),
        "worker": (
            2,
            {
                "cpu": 16_000,
                "memory": 128 * GI,
                "nvidia.com/gpu": 8000,
                "rdma/hca": 8000,
                "pods": 1000,
            },
            ("llm-train-worker-0", "llm-train-worker-1"),
        ),
    }
    infer = s.gang_by_key["serving/infer"]
    # minMember 2 of 3; no PriorityClass named: the globalDefault batch-low = 10
    assert (infer.queue, infer.priority, infer.min_member, infer.size) == ("team-b", 10, 2, 3)
    assert infer.roles[0].node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    nb = s.gang_by_key["research/notebook"]
    # containers 2 CPU + sidecar 1 = 3; fetch-data 4 runs beside the sidecar: 4 + 1 = 5;
    # max(3, 5) = 5, plus 250m overhead = 5.25 CPU. Memory: 16Gi + 1Gi = 17Gi vs 2Gi + 1Gi
    # = 3Gi -> 17Gi, plus 128Mi overhead.
    assert dict(nb.roles[0].requests) == {
        "cpu": 5250,
        "memory": 17 * GI + 128 * 2**20,
        "nvidia.com/gpu": 1000,
        "pods": 1000,
    }
    (serve,) = s.running
    # the Koordinator annotation's minors 0 and 1 are hgx8's gpu0 and gpu1
    assert (serve.node, serve.queue, serve.devices) == ("h100-a1", "team-a", ("gpu0", "gpu1"))
    assert dict(serve.requests)["nvidia.com/gpu"] == 2000
    c = read.summary.by_kind_and_reason()
    assert c == {("Pod", REASON_GROUP_MISSING): 1, ("Pod", REASON_POD_FINISHED): 1}
    assert read.warnings() == []


def test_the_converted_snapshot_is_an_instance_file(read: KubeRead, tmp_path: Path) -> None:
    write_snapshot(read.snapshot, tmp_path / "cluster.yaml")
    again, warnings = load_snapshot(tmp_path / "cluster.yaml")
    assert again == read.snapshot and warnings == []


def test_plan_passes_the_verifier(read: KubeRead, plan: Plan) -> None:
    s = read.snapshot
    assert verify(s, plan) == []
    # there is room for everything: the workers need two whole free H100 nodes they
    # tolerate (h100-a2, h100-b1; a1 has 6 GPUs left, b2 is tainted), team-b's cap of 8
    # GPUs covers the 3 inference pods, and the notebook needs one more GPU
    assert {o.key: (o.admitted, o.placed) for o in plan.gangs} == {
        "ml/llm-train": (True, 3),
        "serving/infer": (True, 3),
        "research/notebook": (True, 1),
    }
    workers = {p.pod: p.node for p in plan.pods if p.role == "worker"}
    assert sorted(workers.values()) == ["h100-a2", "h100-b1"]
    assert all(p.node != "cpu-1" for p in plan.pods)  # not Ready


def test_bindings_pass_the_schema_and_come_after_their_annotation(
    read: KubeRead, plan: Plan
) -> None:
    # llm-train's pods name the volcano scheduler: by default they are withheld, so 4 of
    # the 7 placed pods are bound (3 inference pods, the notebook), each with its devices
    default = bindings_document(read.snapshot, plan)
    assert sorted(i["metadata"]["name"] for i in default if i["kind"] == "Binding") == [
        "infer-0",
        "infer-1",
        "infer-2",
        "notebook",
    ]
    assert sum(1 for i in default if i["kind"] == "Pod") == 4
    items = bindings_document(read.snapshot, plan, any_scheduler=True)
    bindings = [i for i in items if i["kind"] == "Binding"]
    patches = [i for i in items if i["kind"] == "Pod"]
    # 7 placed pods; 6 got devices (2 workers, 3 inference pods, the notebook)
    assert (len(bindings), len(patches)) == (7, 6)
    for b in bindings:
        kubernetes_validate.validate(b, K8S_VERSION, strict=True)
    for i, item in enumerate(items):
        if item["kind"] == "Pod":
            nxt = items[i + 1]
            assert nxt["kind"] == "Binding" and nxt["metadata"] == {
                "name": item["metadata"]["name"],
                "namespace": item["metadata"]["namespace"],
            }
    by_pod = {p.pod: p for p in plan.pods}
    for b in bindings:
        assert b["target"] == {
            "apiVersion": "v1",
            "kind": "Node",
            "name": by_pod[b["metadata"]["name"]].node,
        }
    w0 = next(p for p in patches if p["metadata"]["name"] == "llm-train-worker-0")
    alloc = json.loads(w0["metadata"]["annotations"][DEVICE_ANNOTATION])
    # a whole node's 8 GPUs and 8 NICs, minors as the hgx8 template orders them
    assert sorted(a["minor"] for a in alloc["gpu"]) == list(range(8))
    assert sorted(a["id"] for a in alloc["rdma"]) == [f"mlx5_{i}" for i in range(8)]
    assert all(
        a["resources"]
        == {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"}
        for a in alloc["gpu"]
    )
    text = dump_bindings(items)
    assert text.count("kind: Binding") == 7


def test_in_memory_binder_records_and_is_idempotent(read: KubeRead, plan: Plan) -> None:
    binder = InMemoryBinder()
    reqs = bind_requests(read.snapshot, plan)
    assert all(binder.bind(r).ok for r in reqs)
    assert (len(binder.bindings), len(binder.patches)) == (7, 6)
    again = binder.bind(reqs[0])
    assert again.ok and again.message == "already bound there"
    moved = BindRequest(reqs[0].pod, reqs[0].namespace, "elsewhere")
    out = binder.bind(moved)
    assert not out.ok and "already bound" in out.message


class _FakeApi:
    """Stands in for kubernetes.client.CoreV1Api: records calls, can refuse a Binding."""

    def __init__(self, conflict_node: str | None = None):
        self.calls: list[tuple[str, Any]] = []
        self.conflict_node = conflict_node

    def patch_namespaced_pod(self, name: str, namespace: str, body: Any, **kw: Any) -> None:
        self.calls.append(("patch", (name, namespace, body)))

    def create_namespaced_pod_binding(
        self, name: str, namespace: str, body: Any, **kw: Any
    ) -> None:
        from kubernetes.client import ApiClient
        from kubernetes.client.exceptions import ApiException

        # the JSON the client would send
        self.calls.append(("bind", (name, namespace, ApiClient().sanitize_for_serialization(body))))
        if self.conflict_node is not None:
            raise ApiException(status=409, reason="Conflict")

    def read_namespaced_pod(self, name: str, namespace: str) -> Any:
        from kubernetes.client import V1Pod, V1PodSpec

        return V1Pod(spec=V1PodSpec(containers=[], node_name=self.conflict_node))


def test_kube_binder_calls_the_api_in_order() -> None:
    api = _FakeApi()
    req = BindRequest("w-0", "ml", "n1", {DEVICE_ANNOTATION: '{"gpu":[]}'})
    out = KubeBinder(api).bind(req)
    assert out.ok
    assert [c[0] for c in api.calls] == ["patch", "bind"]
    assert api.calls[0][1] == (
        "w-0",
        "ml",
        {"metadata": {"annotations": {DEVICE_ANNOTATION: '{"gpu":[]}'}}},
    )
    body = api.calls[1][1][2]
    kubernetes_validate.validate(body, K8S_VERSION, strict=True)
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}


@pytest.mark.parametrize(("bound_to", "ok"), [("n1", True), ("n2", False)])
def test_kube_binder_conflict(bound_to: str, ok: bool) -> None:
    """409 Conflict: fine if the pod is already on the asked node (idempotent), else not."""
    out = KubeBinder(_FakeApi(conflict_node=bound_to)).bind(BindRequest("w-0", "ml", "n1"))
    assert out.ok is ok


NODE = (
    "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
    "status: {allocatable: {cpu: '64'}, conditions: [{type: Ready, status: 'True'}]}\n"
)
CONTAINERS = "containers: [{name: c, resources: {requests: {cpu: '1'}}}]"


def _workload(api: str, kind: str, name: str, spec: str) -> str:
    return f"---\napiVersion: {api}\nkind: {kind}\nmetadata: {{name: {name}}}\nspec:\n{spec}"


BINDING_DUMP = (
    NODE
    # a pod of the dump, of the default scheduler, and one of volcano
    + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: real}\nspec: {"
    + CONTAINERS
    + "}\n"
    + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: theirs}\n"
    "spec: {schedulerName: volcano, "
    + CONTAINERS
    + "}\n"
    # workloads without pods: names the controller chooses (Deployment, batch Job) or
    # knows (StatefulSet; a Volcano Job, whose pods name the volcano scheduler)
    + _workload(
        "apps/v1",
        "Deployment",
        "web",
        "  replicas: 2\n  selector: {matchLabels: {a: b}}\n  template:\n"
        "    metadata: {labels: {a: b}}\n    spec: {" + CONTAINERS + "}\n",
    )
    + _workload(
        "batch/v1",
        "Job",
        "batch",
        "  completionMode: Indexed\n  completions: 2\n  parallelism: 2\n  template:\n"
        "    spec: {restartPolicy: Never, " + CONTAINERS + "}\n",
    )
    + _workload(
        "apps/v1",
        "StatefulSet",
        "db",
        "  replicas: 2\n  serviceName: db\n  selector: {matchLabels: {s: t}}\n  template:\n"
        "    metadata: {labels: {s: t}}\n    spec: {" + CONTAINERS + "}\n",
    )
    + _workload(
        "batch.volcano.sh/v1alpha1",
        "Job",
        "j",
        "  tasks:\n  - name: t\n    replicas: 2\n    template:\n      spec: {" + CONTAINERS + "}\n",
    )
)


def test_bindings_only_for_pods_a_cluster_can_take(tmp_path: Path) -> None:
    """Every gang is planned (64 cpu hold all 10 pods), but a Binding names a pod that
    exists, of a scheduler that is not another's, unless asked: a Deployment's and a batch
    Job's pods get random names, so they are never bound; a StatefulSet's and a Volcano
    Job's pods are bound under their controller's names with --include-predicted (the
    Volcano Job's only with --bind-any-scheduler too, as the pod 'theirs')."""
    (tmp_path / "d.yaml").write_text(BINDING_DUMP)
    snap: Snapshot = read_kube([tmp_path / "d.yaml"]).snapshot
    p = solve_cycle(snap, config=SolverConfig(time_limit_s=10)).plan
    assert all(o.admitted for o in p.gangs) and len(p.pods) == 10

    def bound(**kw: bool) -> list[str]:
        docs = bindings_document(snap, p, **kw)
        return sorted(d["metadata"]["name"] for d in docs if d["kind"] == "Binding")

    assert bound() == ["real"]
    assert bound(include_predicted=True) == ["db-0", "db-1", "real"]
    assert bound(any_scheduler=True) == ["real", "theirs"]
    assert bound(include_predicted=True, any_scheduler=True) == [
        "db-0",
        "db-1",
        "j-t-0",
        "j-t-1",
        "real",
        "theirs",
    ]
    withheld = {w.gang: w for w in select_bindings(snap, p).withheld}
    assert sorted(withheld) == [
        "default/batch-0",
        "default/batch-1",
        "default/db-0",
        "default/db-1",
        "default/j",
        "default/theirs",
        "default/web-0",
        "default/web-1",
    ]
    assert "names cannot be known" in withheld["default/web-0"].reason
    assert "random suffix" in withheld["default/batch-0"].reason
    assert "--include-predicted" in withheld["default/db-0"].reason
    assert "'volcano'" in withheld["default/theirs"].reason


def test_an_instance_converted_before_predicted_by_still_withholds_predicted_gangs(
    tmp_path: Path,
) -> None:
    # older instances list predicted gangs only in metadata.kubernetes.predicted_gangs
    (tmp_path / "d.yaml").write_text(BINDING_DUMP)
    snap: Snapshot = read_kube([tmp_path / "d.yaml"]).snapshot
    meta = snap.metadata["kubernetes"]
    old = {**snap.metadata, "kubernetes": {"predicted_gangs": meta["predicted_gangs"]}}
    snap = snap.model_copy(update={"metadata": old})
    p = solve_cycle(snap, config=SolverConfig(time_limit_s=10)).plan
    names = {d["metadata"]["name"] for d in bindings_document(snap, p) if d["kind"] == "Binding"}
    assert names == {"real", "theirs"}  # no scheduler names recorded either
    every = bindings_document(snap, p, include_predicted=True)
    assert len([d for d in every if d["kind"] == "Binding"]) == 10
    assert snap.metadata["kubernetes"] == {"predicted_gangs": meta["predicted_gangs"]}


def test_solve_bindings_warns_naming_the_gangs_it_withholds(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text(BINDING_DUMP)
    out = tmp_path / "c.yaml"
    conv = CliRunner().invoke(main, ["convert", "k8s", str(tmp_path / "d.yaml"), "-o", str(out)])
    assert conv.exit_code == 0, conv.output
    r = CliRunner().invoke(main, ["solve", str(out), "--placer", "greedy", "--format", "bindings"])
    assert r.exit_code == 0, r.output
    docs = list(yaml.safe_load_all(r.stdout))
    assert [d["metadata"]["name"] for d in docs] == ["real"]
    assert (
        "warning: no Binding for 1 placed pod of 1 gang (default/theirs): its pods name the "
        "scheduler 'volcano'" in r.stderr
    )
    assert "no Binding for 2 placed pods of 2 gangs (default/db-0, default/db-1)" in r.stderr
