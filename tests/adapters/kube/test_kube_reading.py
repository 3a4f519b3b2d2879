"""Reading dumps: documents, objects, options, gang and queue rules, on small hand-written
dumps. Each expected value is derived in the comment next to it."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangplan.adapters.kube.read import KubeInputError, KubeOptions, KubeRead, read_kube
from gangplan.adapters.kube.summary import (
    REASON_DUPLICATE,
    REASON_FIELD_IGNORED,
    REASON_GANG_INCOMPLETE,
    REASON_INVALID,
    REASON_KIND_NOT_READ,
    REASON_NODE_MISSING,
    REASON_NOT_AN_OBJECT,
    REASON_NOT_MAPPED,
    REASON_OTHER_SCHEDULER,
    REASON_VERSION_NOT_READ,
)
from gangplan.adapters.kube.topology import PRESETS, OptionError, parse_topology_labels

GI = 2**30


def node(
    name: str, gpus: int = 0, labels: dict[str, str] | None = None, nics: int = 0
) -> dict[str, Any]:
    alloc: dict[str, Any] = {"cpu": "32", "memory": "256Gi"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    if nics:
        alloc["rdma/hca"] = str(nics)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(
    name: str,
    *,
    ns: str = "default",
    cpu: str = "1",
    gpus: int = 0,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"cpu": cpu}}
    if gpus:
        res["limits"] = {"nvidia.com/gpu": gpus}
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": res}], **spec}
    if node_name:
        body["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": body,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def dump(tmp_path: Path, *items: dict[str, Any], **options: Any) -> KubeRead:
    p = tmp_path / "dump.yaml"
    p.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)}))
    return read_kube([p], KubeOptions(**options))


# --------------------------------------------------------------------------- documents


def test_typed_list_items_take_kind_from_the_list(tmp_path: Path) -> None:
    p = tmp_path / "pods.json"
    p.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "PodList",
                "items": [{"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c"}]}}],
            }
        )
    )
    r = read_kube([p])
    assert [g.name for g in r.snapshot.gangs] == ["a"]


def test_multi_document_yaml_and_what_is_not_an_object(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(
        textwrap.dedent("""\
        apiVersion: v1
        kind: Pod
        metadata: {name: a}
        spec: {containers: [{name: c}]}
        ---
        ---
        just a string
        ---
        metadata: {name: b}
        spec: {}
        """)
    )
    r = read_kube([tmp_path / "m.yaml"])
    assert [g.name for g in r.snapshot.gangs] == ["a"]  # the empty document holds nothing
    details = [e.detail for e in r.summary.skipped]
    assert len(details) == 2 and all(e.reason == REASON_NOT_AN_OBJECT for e in r.summary.skipped)
    assert "is a str" in details[0] and "no apiVersion or kind" in details[1]


def test_folder_is_read_in_path_order_and_lists_other_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "sub" / "b.yml").write_text(yaml.safe_dump(pod("x", cpu="2")))
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(pod("x", cpu="1")))
    (tmp_path / ".hidden" / "c.yaml").write_text(yaml.safe_dump(pod("hidden")))
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "bad.json").write_text("{nope")
    r = read_kube([tmp_path])
    # a.yaml, then sub/b.yml replaces pod x: 2 CPU
    (g,) = r.snapshot.gangs
    assert dict(g.roles[0].requests) == {"cpu": 2000}
    c = r.summary.by_kind_and_reason()
    assert c == {("-", REASON_NOT_AN_OBJECT): 2, ("Pod", REASON_DUPLICATE): 1}
    bad = next(e for e in r.summary.skipped if e.source.endswith("bad.json#0"))
    assert "not valid JSON at line 1 column 2" in bad.detail


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(pod("from-stdin"))))
    assert [g.name for g in read_kube(["-"]).snapshot.gangs] == ["from-stdin"]


def test_missing_path_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(KubeInputError, match=r"nope\.yaml: no such file or folder"):
        read_kube([tmp_path / "nope.yaml"])


# --------------------------------------------------------------------------- objects


def test_kinds_versions_and_invalid_objects(tmp_path: Path) -> None:
    r = dump(
        tmp_path,
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
        {
            "apiVersion": "scheduling.volcano.sh/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "q"},
        },
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q2"},
            "spec": {"weight": -1},
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n"},
            "status": {"allocatable": {"cpu": "lots"}},
        },
    )
    c = r.summary.by_kind_and_reason()
    assert c == {
        ("Service", REASON_KIND_NOT_READ): 1,
        ("Queue.scheduling.volcano.sh", REASON_VERSION_NOT_READ): 1,
        ("Queue.scheduling.volcano.sh", REASON_INVALID): 1,
        ("Node", REASON_INVALID): 1,
    }
    details = {e.kind: e.detail for e in r.summary.skipped if e.reason == REASON_INVALID}
    assert details["Queue.scheduling.volcano.sh"].startswith(
        "spec.weight: Input should be greater than or equal to 0"
    )
    assert details["Node"].startswith("status.allocatable.cpu: 'lots' is not a Kubernetes quantity")


def test_generate_name_and_unknown_fields(tmp_path: Path) -> None:
    p = pod("x", labels={})
    p["metadata"] = {"generateName": "job-", "namespace": "default", "newField": True}
    r = dump(tmp_path, p)
    (g,) = r.snapshot.gangs
    assert g.name.startswith("job-") and len(g.name) == len("job-") + 5
    assert any(
        e.reason == REASON_FIELD_IGNORED and "metadata.newField" in e.detail
        for e in r.summary.notes
    )


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets(preset: str) -> None:
    assert [(lv.name, lv.node_label) for lv in parse_topology_labels(preset)] == list(
        PRESETS[preset]
    )


def test_custom_topology_labels() -> None:
    levels = parse_topology_labels(
        "spine=example.com/spine, cloud.provider.com/topology-rack, kubernetes.io/hostname"
    )
    # the rack key is named by its last segment without "topology-"; the hostname is the node
    assert [(x.name, x.node_label) for x in levels] == [
        ("spine", "example.com/spine"),
        ("rack", "cloud.provider.com/topology-rack"),
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "give a preset"),  # nothing
        ("a=x,,b=y", "give a preset"),  # an empty entry
        ("a=x,a=y", "level name 'a' given twice"),
        ("a=x,b=x", "label key 'x' given twice"),
        ("node=x", "'node' is the implicit lowest level"),
        ("kubernetes.io/hostname,rack=x", "can only be the last"),
        ("a=", "needs both a name and a key"),
    ],
)
def test_bad_topology_labels(value: str, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_topology_labels(value)


def test_topology_labels_override_a_kueue_topology(tmp_path: Path) -> None:
    topo = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "t"},
        "spec": {"levels": [{"nodeLabel": "a"}]},
    }
    r = dump(
        tmp_path,
        topo,
        node("n1", labels={"cloud.google.com/gce-topology-block": "b1"}),
        topology_labels="gke",
    )
    assert r.snapshot.level_names == ("block", "subblock", "host")
    assert [e.kind for e in r.summary.notes if e.reason == REASON_NOT_MAPPED] == [
        "Topology.kueue.x-k8s.io"
    ]


def test_bad_device_layout_option(tmp_path: Path) -> None:
    with pytest.raises(KubeInputError, match="not a template"):
        dump(tmp_path, device_layout="nosuch")
    f = tmp_path / "layout.yaml"
    f.write_text(
        "numa_nodes: [{name: n0, pcie_switches: [{name: p0, gpus: [g0, g1], nics: [x]}]}]\n"
    )
    r = dump(
        tmp_path,
        node("a", gpus=2),
        node("b", gpus=4),
        node("c", gpus=2, nics=1),
        device_layout=str(f),
    )
    nodes = r.snapshot.node_by_name
    # a: 2 GPUs, no NIC resource -> the layout without its NIC; b: 4 GPUs -> implicit; c: exact
    assert (nodes["a"].device_layout, nodes["b"].device_layout, nodes["c"].device_layout) == (
        "layout-no-nic",
        None,
        "layout",
    )


# --------------------------------------------------------------------------- gangs


def _pg(name: str, min_member: int, group: str = "scheduling.x-k8s.io/v1alpha1") -> dict[str, Any]:
    return {
        "apiVersion": group,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member},
    }


def test_partly_running_gang_keeps_the_rest_of_its_minimum(tmp_path: Path) -> None:
    lbl = {"scheduling.x-k8s.io/pod-group": "g"}
    r = dump(
        tmp_path,
        node("n1"),
        _pg("g", 4),
        *[pod(f"g-{i}", node_name="n1", labels=lbl) for i in range(3)],
        *[pod(f"g-{i}", labels=lbl) for i in (3, 4)],
    )
    (g,) = r.snapshot.gangs
    # minMember 4, 3 already run: the 2 pending ones need max(1, 4 - 3) = 1
    assert (g.size, g.min_member) == (2, 1)
    assert {p.gang for p in r.snapshot.running} == {"g"}


def test_gang_with_too_few_pods_is_listed(tmp_path: Path) -> None:
    lbl = {"scheduling.x-k8s.io/pod-group": "g"}
    r = dump(tmp_path, _pg("g", 5), *[pod(f"g-{i}", labels=lbl) for i in range(3)])
    assert r.snapshot.gangs == ()
    (e,) = r.summary.skipped
    assert (e.reason, e.detail) == (
        REASON_GANG_INCOMPLETE,
        "minimum 5, 3 pods in the dump (0 running)",
    )


def test_upstream_pod_group(tmp_path: Path) -> None:
    pg = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "schedulingConstraints": {"topology": [{"key": "example.com/rack"}]},
        },
    }
    pods = [pod(f"w-{i}", schedulingGroup={"podGroupName": "g"}) for i in range(3)]
    r = dump(tmp_path, pg, *pods, topology_labels="rack=example.com/rack")
    (g,) = r.snapshot.gangs
    assert (g.size, g.min_member, g.topology.required if g.topology else None) == (3, 2, "rack")


def test_koordinator_gang_annotations(tmp_path: Path) -> None:
    ann = {
        "gang.scheduling.koordinator.sh/name": "kg",
        "gang.scheduling.koordinator.sh/min-available": "2",
    }
    r = dump(tmp_path, *[pod(f"k-{i}", annotations=ann) for i in range(4)])
    (g,) = r.snapshot.gangs
    assert (g.name, g.size, g.min_member) == ("kg", 4, 2)


def test_scheduler_filter_and_unknown_nodes(tmp_path: Path) -> None:
    r = dump(
        tmp_path,
        node("n1"),
        pod("mine", schedulerName="volcano"),
        pod("theirs"),
        pod("away", node_name="gone"),
        scheduler_names=("volcano",),
    )
    assert [g.name for g in r.snapshot.gangs] == ["mine"]
    assert r.snapshot.running == ()
    assert r.summary.by_kind_and_reason() == {
        ("Pod", REASON_OTHER_SCHEDULER): 1,
        ("Pod", REASON_NODE_MISSING): 1,
    }


def test_kueue_cluster_queue_borrowing_and_weight(tmp_path: Path) -> None:
    def cq(
        name: str, cohort: str | None, borrow: str | None, weight: str | None = None
    ) -> dict[str, Any]:
        res: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": 8}
        if borrow is not None:
            res["borrowingLimit"] = borrow
        spec: dict[str, Any] = {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {"name": "f1", "resources": [res]},
                        {"name": "f2", "resources": [dict(res)]},
                    ],
                }
            ]
        }
        if cohort:
            spec["cohortName"] = cohort
        if weight:
            spec["fairSharing"] = {"weight": weight}
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": spec,
        }

    r = dump(
        tmp_path,
        cq("alone", None, None),
        cq("borrows", "c", "4", "500m"),
        cq("unbounded", "c", None),
    )
    q = r.snapshot.queue_by_name
    # two flavors of 8 GPUs each: guaranteed 16
    assert q["alone"].guaranteed == {"nvidia.com/gpu": 16_000}
    # no cohort: cannot borrow, max = nominal
    assert q["alone"].max == {"nvidia.com/gpu": 16_000}
    # cohort, 4 borrowable per flavor: 16 + 8; fairSharing.weight 500m = 0.5
    assert (q["borrows"].max, q["borrows"].weight) == ({"nvidia.com/gpu": 24_000}, 0.5)
    # cohort, no borrowing limit: uncapped
    assert q["unbounded"].max == {}


def test_invalid_queue_is_listed_and_its_gangs_get_an_assumed_queue(tmp_path: Path) -> None:
    q = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "big"},
        "spec": {"weight": 2_000_000},
    }
    r = dump(tmp_path, q, pod("p", annotations={"scheduling.volcano.sh/queue-name": "big"}))
    (e,) = r.summary.skipped
    # gangplan's weights stop at 10^6 (models.Queue)
    assert (e.kind, e.reason) == ("Queue.scheduling.volcano.sh", REASON_INVALID)
    assert e.detail.startswith("weight: Input should be less than or equal to 1000000")
    assert r.snapshot.queue_by_name["big"].weight == 1.0
    assert r.snapshot.gangs[0].queue == "big"


def test_koordinator_device_with_gpus_and_rdma(tmp_path: Path) -> None:
    """4 GPUs and 2 RDMA NICs on 2 NUMA nodes, one PCIe switch each (2 GPUs + 1 NIC)."""

    def dev(kind: str, minor: int, numa: int, pcie: str) -> dict[str, Any]:
        return {
            "id": f"{kind}-{minor}",
            "minor": minor,
            "type": kind,
            "health": True,
            "topology": {"nodeID": numa, "pcieID": pcie, "socketID": numa},
        }

    device = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": "n1"},
        "spec": {
            "devices": [
                dev("gpu", 0, 0, "pci0"),
                dev("gpu", 1, 0, "pci0"),
                dev("gpu", 2, 1, "pci1"),
                dev("gpu", 3, 1, "pci1"),
                dev("rdma", 0, 0, "pci0"),
                dev("rdma", 1, 1, "pci1"),
            ]
        },
    }
    running = pod(
        "r",
        node_name="n1",
        gpus=1,
        annotations={
            "scheduling.koordinator.sh/device-allocated": (
                '{"gpu":[{"minor":2}],"rdma":[{"minor":1}]}'
            )
        },
    )
    r = dump(tmp_path, node("n1", gpus=4, nics=2), device, running)
    n = r.snapshot.nodes[0]
    assert n.devices is not None
    assert [
        (x.name, [(s.name, s.gpus, s.nics) for s in x.pcie_switches]) for x in n.devices.numa_nodes
    ] == [
        ("numa0", [("pci0", ("gpu-0", "gpu-1"), ("rdma-0",))]),
        ("numa1", [("pci1", ("gpu-2", "gpu-3"), ("rdma-1",))]),
    ]
    # the running pod's minors name the Device's ids
    assert r.snapshot.running[0].devices == ("gpu-2", "rdma-1")
    assert r.snapshot.metadata["kubernetes"]["device_minors"]["n1"]["rdma-1"] == 1


@pytest.mark.parametrize(
    ("min_available", "expected"),
    [
        # unset: Volcano's webhook makes it the sum of task minimums, 1 + 2 = 3 of 5 pods;
        # 3 >= 1 + 2, so the task minimums hold (CheckTaskReady): ps 1, worker 2
        (None, (3, {"ps": 1, "worker": 2})),
        # 4 >= 3: the task minimums still hold
        (4, (4, {"ps": 1, "worker": 2})),
        # 2 < 1 + 2: Volcano skips the task minimums; the roles have none
        (2, (2, {"ps": None, "worker": None})),
    ],
)
def test_volcano_task_minimums(
    tmp_path: Path, min_available: int | None, expected: tuple[int, dict[str, int | None]]
) -> None:
    def task(name: str, replicas: int, minimum: int) -> dict[str, Any]:
        return {
            "name": name,
            "replicas": replicas,
            "minAvailable": minimum,
            "template": {"spec": {"containers": [{"name": "c"}]}},
        }

    spec: dict[str, Any] = {"tasks": [task("ps", 1, 1), task("worker", 4, 2)]}
    if min_available is not None:
        spec["minAvailable"] = min_available
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": spec,
    }
    (g,) = dump(tmp_path, job).snapshot.gangs
    assert (g.min_member, {r.name: r.min_member for r in g.roles}) == expected


# --------------------------------------------------------------------------- the snapshot's rules


def _ask(p: dict[str, Any], **requests: str) -> dict[str, Any]:
    """``p`` with these requests (and the same limits) in its one container."""
    res = p["spec"]["containers"][0]["resources"]
    res["requests"] = {**res["requests"], **requests}
    res["limits"] = {**res.get("limits", {}), **requests}
    return p


def test_objects_the_snapshot_rejects_are_dropped_one_by_one(tmp_path: Path) -> None:
    bad_node = node("n2", gpus=8)
    bad_node["status"]["allocatable"]["example.com/fpga"] = "500m"
    r = dump(
        tmp_path,
        node("n1", gpus=8),  # items[0]
        bad_node,  # items[1]: half an FPGA (extended resources are whole units)
        pod("ok", gpus=1),  # items[2]
        _ask(pod("half-fpga"), **{"example.com/fpga": "500m"}),  # items[3]: half an FPGA
        _ask(pod("gpu-1500"), **{"nvidia.com/gpu": "1500m"}),  # items[4]: 1.5 GPUs
        pod("on-n2", node_name="n2"),  # items[5]: its node is dropped
        pod("on-n1", node_name="n1"),  # items[6]
    )
    # the rest converts
    s = r.snapshot
    assert [n.name for n in s.nodes] == ["n1"]
    assert [g.name for g in s.gangs] == ["ok"]
    assert [p.name for p in s.running] == ["on-n1"]
    # each bad object is listed once, under its own document, with the field and the rule
    src = f"{tmp_path / 'dump.yaml'}#0.items"
    got = {(e.source, e.kind, e.name, e.reason): e.detail for e in r.summary.skipped}
    assert got == {
        (f"{src}[1]", "Node", "n2", REASON_INVALID): (
            "allocatable.example.com/fpga: 500m is not a whole number; extended resources are "
            "counted in whole units (only the GPU resource takes a share such as 500m)"
        ),
        (f"{src}[3]", "Gang", "default/half-fpga", REASON_INVALID): (
            "roles[0].requests.example.com/fpga: 500m is not a whole number; extended "
            "resources are counted in whole units (only the GPU resource takes a share such "
            "as 500m)"
        ),
        (f"{src}[4]", "Gang", "default/gpu-1500", REASON_INVALID): (
            "roles[0].requests.nvidia.com/gpu: 1500m GPUs: a pod asks a share of one GPU "
            "(below 1) or whole GPUs, not both"
        ),
        (f"{src}[5]", "Pod", "default/on-n2", REASON_NODE_MISSING): (
            "spec.nodeName 'n2' (the Node is in the dump but invalid: listed)"
        ),
    }


def test_a_device_held_twice_drops_the_later_pod(tmp_path: Path) -> None:
    def holding(name: str, gpu: int) -> dict[str, Any]:
        alloc = json.dumps({"gpu": [{"id": f"gpu-{gpu}"}]})
        ann = {"scheduling.koordinator.sh/device-allocated": alloc}
        return pod(name, node_name="n1", gpus=1, annotations=ann)

    r = dump(tmp_path, node("n1", gpus=4), holding("a", 2), holding("b", 2), holding("c", 3))
    # a whole GPU is one pod's: b asks gpu-2, which a holds; c's gpu-3 is free
    assert [(p.name, p.devices) for p in r.snapshot.running] == [
        ("a", ("gpu-2",)),
        ("c", ("gpu-3",)),
    ]
    (e,) = r.summary.skipped
    assert (e.kind, e.name, e.reason, e.detail) == (
        "Pod",
        "default/b",
        REASON_INVALID,
        "devices: device 'gpu-2' on node 'n1' is already held by 'a'",
    )


def test_pod_names_taken_in_a_namespace_drop_the_later_gang(tmp_path: Path) -> None:
    def kubeflow(kind: str) -> dict[str, Any]:
        replicas = {
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}
        }
        field = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs"}[kind]
        return {
            "apiVersion": "kubeflow.org/v1",
            "kind": kind,
            "metadata": {"name": "t", "namespace": "default"},
            "spec": {field: replicas},
        }

    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "default"},
        "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    r = dump(
        tmp_path,
        node("n1"),
        pod("j-0", node_name="n1"),  # the name the Job's controller gives its first pod
        job,  # pods j-0 and j-1, each a gang of one: j-0 is taken by the running pod
        kubeflow("PyTorchJob"),  # gang t, pods t-worker-0 and t-worker-1
        kubeflow("TFJob"),  # gang t as well (renamed t-2), with the same pod names
    )
    s = r.snapshot
    assert [p.name for p in s.running] == ["j-0"]
    assert sorted((g.name, g.roles[0].pod_names) for g in s.gangs) == [
        ("j-1", ("j-1",)),
        ("t", ("t-worker-0", "t-worker-1")),
    ]
    by_kind = {e.kind: e for e in r.summary.skipped}
    assert set(by_kind) == {"Job.batch", "Gang"}
    assert by_kind["Job.batch"].reason == REASON_INVALID
    assert by_kind["Job.batch"].detail.startswith(
        "predicted pod default/j-0: the name is also used by the Pod of "
    )
    taken = by_kind["Gang"]
    assert (taken.name, taken.reason) == ("default/t-2", REASON_INVALID)
    assert taken.detail == (
        "roles[0].pod_names: pod name default/t-worker-0 is also used by gang default/t; "
        "roles[0].pod_names: pod name default/t-worker-1 is also used by gang default/t "
        "(pod names must be unique in a namespace)"
    )
    # only the gangs kept are listed as predicted from workloads: t, and j-1 (j's pods,
    # without a Kueue queue label, are independent pods, each a gang of one, predicted too:
    # none of them is in the dump, so none gets a Binding by default)
    assert s.metadata["kubernetes"]["predicted_gangs"] == ["default/j-1", "default/t"]
    assert s.metadata["kubernetes"]["predicted_by"]["default/j-1"]["names_known"] is False
    assert s.metadata["kubernetes"]["predicted_by"]["default/t"]["names_known"] is True
