"""``convert k8s`` on every folder of ``../shared/data/k8s-manifests`` (issue 4, "Done means").

Each test converts one folder (or one of its files) in place and checks the numbers that
matter — gang sizes, minimums, roles, queue weights and caps, levels, devices — against
the manifests. Every expected value is worked out by hand from the YAML (the comments say
how); none is copied from the converter's output. Folders holding only other kinds
(``hived/``, ``nvidia-gfd/``) are checked through the summary of what was not read.

Where several files of a folder define an object of the same kind, namespace and name,
the one read last (files in path order) is kept, as ``kubectl apply -f FOLDER`` would
leave it; the tests name which file that is.

The data is read where it lies and never copied; the tests skip when it is absent.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangplan.adapters.kube.read import KubeOptions, KubeRead, read_kube
from gangplan.adapters.kube.summary import (
    REASON_DUPLICATE,
    REASON_GROUP_MISSING,
    REASON_INVALID,
    REASON_KIND_NOT_READ,
    REASON_NO_PODS,
    REASON_NODE_MISSING,
    REASON_NOT_AN_OBJECT,
    REASON_NOT_MAPPED,
)
from gangplan.models import Gang, Snapshot

GI = 2**30
MI = 2**20


def _find_manifests() -> Path | None:
    env = os.environ.get("GANGPLAN_SHARED_DATA")
    if env and (Path(env) / "k8s-manifests").is_dir():
        return Path(env) / "k8s-manifests"
    for parent in Path(__file__).resolve().parents:
        cand = parent / "shared" / "data" / "k8s-manifests"
        if cand.is_dir():
            return cand
    return None


MANIFESTS = _find_manifests()
pytestmark = pytest.mark.skipif(
    MANIFESTS is None,
    reason="../shared/data/k8s-manifests is absent (real manifests are read in place from "
    "../shared/data, beside the repository)",
)


def convert(rel: str, **options: Any) -> KubeRead:
    assert MANIFESTS is not None
    return read_kube([MANIFESTS / rel], KubeOptions(**options))


def gang(s: Snapshot, key: str) -> Gang:
    assert key in s.gang_by_key, f"{key} not in {sorted(s.gang_by_key)}"
    return s.gang_by_key[key]


def roles(g: Gang) -> dict[str, tuple[int, int | None, dict[str, int]]]:
    """role name -> (count, own min_member, requests)"""
    return {r.name: (r.count, r.min_member, dict(r.requests)) for r in g.roles}


def counts(r: KubeRead) -> dict[tuple[str, str], int]:
    return dict(r.summary.by_kind_and_reason())


def load_docs(rel: str) -> list[dict[str, Any]]:
    assert MANIFESTS is not None
    return [d for d in yaml.safe_load_all((MANIFESTS / rel).read_text()) if d]


def write_list(tmp_path: Path, items: list[dict[str, Any]], name: str = "dump.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return p


# --------------------------------------------------------------------------- volcano/


class TestVolcano:
    @pytest.fixture(scope="class")
    @classmethod
    def read(cls) -> KubeRead:
        return convert("volcano")

    def test_queues_weights_and_caps(self, read: KubeRead) -> None:
        q = read.snapshot.queue_by_name
        # staging/.../queue.yaml: default, weight 1, capability cpu 2000m, memory 4G
        assert (q["default"].weight, q["default"].max) == (1.0, {"cpu": 2000, "memory": 4 * 10**9})
        # example/deployment/queue.yaml: test, weight 1, capability cpu 2
        assert q["test"].max == {"cpu": 2000}
        # benchmark/.../queue.yaml: capability cpu 10000 (cores), memory 10000Gi
        assert q["benchmark-queue"].max == {"cpu": 10_000_000, "memory": 10_000 * GI}
        # hierarchical-jobs/queues.yaml: four queues of weight 1, no caps; hierarchy noted
        for name in ("root-eng-prod", "root-eng-dev", "root-sci-prod", "root-sci-dev"):
            assert (q[name].weight, q[name].guaranteed, q[name].max) == (1.0, {}, {})
        hier = [e for e in read.summary.notes_of("Queue.scheduling.volcano.sh", REASON_NOT_MAPPED)]
        assert sorted(e.name for e in hier) == [
            "root-eng-dev",
            "root-eng-prod",
            "root-sci-dev",
            "root-sci-prod",
        ]
        assert len(q) == 7

    def test_gang_sizes_minimums_and_roles(self, read: KubeRead) -> None:
        s = read.snapshot
        # MindSpore-example/mindspore_cpu: minAvailable 1 of 8 one-CPU pods
        g = gang(s, "default/mindspore-cpu")
        assert (g.size, g.min_member, g.queue) == (8, 1, "default")
        assert roles(g) == {"pod": (8, None, {"cpu": 1000})}
        # mindspore_gpu: minAvailable 3 = 1 master + 2 workers with nvidia.com/gpu limit 1
        g = gang(s, "default/mindspore-gpu")
        assert (g.size, g.min_member) == (3, None)
        assert roles(g) == {
            "mpimaster": (1, None, {}),
            "mpiworker": (2, None, {"nvidia.com/gpu": 1000}),
        }
        # lm-mpi-job: four files; the last in path order is task-start-dependency/mpi.yaml:
        # minAvailable 3 of 1 master + 10 workers; task minimums (1 + 10 = 11) exceed 3,
        # so Volcano skips them (CheckTaskReady) and no role has a minimum
        g = gang(s, "default/lm-mpi-job")
        assert (g.size, g.min_member) == (11, 3)
        assert roles(g) == {"mpimaster": (1, None, {}), "mpiworker": (10, None, {})}
        # kubecon tf-sample (last of two tensorflow-benchmark): ps 1 x (1 CPU, 2048Mi),
        # workers 2 x (2 CPU, requests 2048Mi); minAvailable 3 = all
        g = gang(s, "default/tensorflow-benchmark")
        assert (g.size, g.min_member) == (3, None)
        assert roles(g) == {
            "ps": (1, None, {"cpu": 1000, "memory": 2048 * MI}),
            "worker": (2, None, {"cpu": 2000, "memory": 2048 * MI}),
        }
        # paddlepaddle: pserver 2 (1 CPU, 100M, 1Gi ephemeral), trainer 2 (10Gi ephemeral)
        g = gang(s, "default/ctr-volcano")
        assert roles(g) == {
            "pserver": (2, None, {"cpu": 1000, "memory": 100 * 10**6, "ephemeral-storage": GI}),
            "trainer": (
                2,
                None,
                {"cpu": 1000, "memory": 100 * 10**6, "ephemeral-storage": 10 * GI},
            ),
        }
        # task-priority/elastic-job: minAvailable 3 of 9 workers + 1 master
        g = gang(s, "default/elastic-job")
        assert (g.size, g.min_member) == (10, 3)
        # task-start-dependency/job.yaml: minAvailable 1, three tasks of 1 + 5 + 5 pods
        g = gang(s, "default/job")
        assert (g.size, g.min_member) == (11, 1)
        assert {r.name: r.node_selector for r in g.roles} == {
            f"job-nginx{i}": {"kubernetes.io/os": "linux"} for i in (1, 2, 3)
        }
        # hierarchical-jobs: each job in its own queue, minAvailable 1 of 6 half-CPU pods
        for job, queue in (("eng-prod-job", "root-eng-prod"), ("sci-dev-job", "root-sci-dev")):
            g = gang(s, f"default/{job}")
            assert (g.queue, g.size, g.min_member) == (queue, 6, 1)
            assert roles(g) == {"default-nginx": (6, None, {"cpu": 500})}
        # network-topology-job: last of three is the user guide's block 7 (minAvailable 4
        # of 8 four-CPU pods); its hard tier-2 constraint has no HyperNode tier here
        g = gang(s, "default/network-topology-job")
        assert (g.size, g.min_member, g.topology) == (8, 4, None)
        dropped = read.summary.notes_of("Job.batch.volcano.sh", REASON_NOT_MAPPED)
        assert any("HyperNode tier 2" in e.detail for e in dropped)
        assert any("partitionPolicy" in e.detail for e in dropped)
        # deployment/deployment.yaml: one pod of 300m CPU charged to queue test (annotation)
        g = gang(s, "default/deploy-with-volcano-0")
        assert (g.queue, roles(g)) == ("test", {"pods": (1, None, {"cpu": 300})})

    def test_gang_count(self, read: KubeRead) -> None:
        # 19 Volcano Jobs (31 Job documents: 6 replaced by later ones with the same name,
        # 2 denied by the webhook rules, 4 inside Argo workflows' strings), 1 Deployment
        # pod, and the ReplicaSets nginx (last: task-priority, 4), nginx-1 (8), nginx-2 (8)
        s = read.snapshot
        assert len(s.gangs) == 19 + 1 + 4 + 8 + 8
        assert sum(1 for g in s.gangs if g.name.startswith("nginx-1-")) == 8

    def test_summary(self, read: KubeRead) -> None:
        c = counts(read)
        # the design doc's HyperNodes use `version:` and top-level `name:` (SOURCE.md)
        assert c[("HyperNode", REASON_NOT_AN_OBJECT)] == 13
        assert (
            c[("Job.batch.volcano.sh", REASON_INVALID)] == 2
        )  # invalid_jobs: dup task, minAvailable 5 > 4
        assert c[("Job.batch.volcano.sh", REASON_DUPLICATE)] == 6
        assert c[("PodGroup.scheduling.volcano.sh", REASON_NO_PODS)] == 2  # test-pg, subgroup doc
        assert c[("PodGroup.scheduling.incubator.k8s.io", REASON_KIND_NOT_READ)] == 1
        for kind, n in (
            ("ConfigMap", 2),
            ("CronJob.batch.volcano.sh", 1),
            ("JobFlow.flow.volcano.sh", 1),
            ("JobTemplate.flow.volcano.sh", 5),
            ("Workflow.argoproj.io", 2),
            ("WorkflowTemplate.argoproj.io", 1),
            ("SparkApplication.sparkoperator.k8s.io", 1),
            ("Role.rbac.authorization.k8s.io", 1),
            ("RoleBinding.rbac.authorization.k8s.io", 1),
        ):
            assert c[(kind, REASON_KIND_NOT_READ)] == n, kind
        # SOURCE.md, the two benchmark profiles (no apiVersion/kind), the Go template
        not_objects = read.summary.skipped_of("-", REASON_NOT_AN_OBJECT)
        assert len(not_objects) == 4
        assert any(
            "vcjob-template.yaml" in e.source and "not valid YAML" in e.detail for e in not_objects
        )
        invalid = " ".join(
            e.detail for e in read.summary.skipped_of("Job.batch.volcano.sh", REASON_INVALID)
        )
        assert "duplicate task name 'task-1'" in invalid
        assert "minAvailable 5 exceeds the 4 replicas" in invalid

    def test_hypernodes_from_the_design_doc(self, tmp_path: Path) -> None:
        """The design doc's 3-tier HyperNode tree, rewritten to the v1alpha1 API shape
        (apiVersion, metadata.name, members[].selector.exactMatch), with its 8 nodes and the
        user guide's hard tier-1 job: levels tier-3 > tier-2 > tier-1, each node in the
        switches drawn in the doc."""
        items: list[dict[str, Any]] = []
        for d in load_docs(
            "volcano/docs-extracted/design_network-topology-aware-scheduling_block1_hypernode-tree-3tier.yaml"
        ):
            members = [
                {
                    "type": "Node" if m["name"].startswith("node") else "HyperNode",
                    "selector": {"exactMatch": {"name": m["name"]}},
                }
                for m in d["spec"]["members"]
            ]
            items.append(
                {
                    "apiVersion": d["version"],
                    "kind": "HyperNode",
                    "metadata": {"name": d["name"]},
                    "spec": {"tier": d["spec"]["tier"], "members": members},
                }
            )
        for i in range(8):
            items.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": f"node{i}"},
                    "status": {"allocatable": {"cpu": "16"}},
                }
            )
        items += load_docs(
            "volcano/docs-extracted/user-guide_network-topology-aware-scheduling_block5_vcjob-hard-tier1.yaml"
        )
        r = read_kube([write_list(tmp_path, items)])
        s = r.snapshot
        assert s.level_names == ("tier-3", "tier-2", "tier-1")
        doms = {n.name: n.domains for n in s.nodes}
        assert doms["node0"] == {"tier-1": "s0", "tier-2": "s4", "tier-3": "s6"}
        assert doms["node3"] == {"tier-1": "s1", "tier-2": "s4", "tier-3": "s6"}
        assert doms["node5"] == {"tier-1": "s2", "tier-2": "s5", "tier-3": "s6"}
        assert doms["node7"] == {"tier-1": "s3", "tier-2": "s5", "tier-3": "s6"}
        g = gang(s, "default/network-topology-job")  # hard, highestTierAllowed 1
        assert (g.size, g.min_member, g.topology.required if g.topology else None) == (
            8,
            4,
            "tier-1",
        )

    def test_hypernodes_with_the_docs_misspelt_members(self, tmp_path: Path) -> None:
        """Block 2 names its tier-1 HyperNodes nvlink_network-N but its tier-2 members
        nvlink-networkN (SOURCE.md): the four references are listed, and the nodes get
        tier-1 domains only."""
        items = []
        for d in load_docs(
            "volcano/docs-extracted/design_network-topology-aware-scheduling_block2_hypernode-nvlink-roce.yaml"
        ):
            members = [
                {"type": m["type"], "selector": {"exactMatch": {"name": m["name"]}}}
                for m in d["spec"]["members"]
            ]
            items.append(
                {
                    "apiVersion": d["version"],
                    "kind": "HyperNode",
                    "metadata": {"name": d["name"]},
                    "spec": {"tier": d["spec"]["tier"], "members": members},
                }
            )
        for i in range(1, 9):
            items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node{i}"}})
        r = read_kube([write_list(tmp_path, items)])
        assert r.snapshot.level_names == ("tier-2", "tier-1")
        assert {n.name: n.domains for n in r.snapshot.nodes}["node3"] == {
            "tier-1": "nvlink_network-1"
        }
        missing = [
            e
            for e in r.summary.notes_of("HyperNode.topology.volcano.sh")
            if "not in the dump" in e.detail
        ]
        assert sorted(e.detail.split("'")[1] for e in missing) == [
            f"nvlink-network{i}" for i in range(4)
        ]


# --------------------------------------------------------------------------- kueue/


class TestKueue:
    @pytest.fixture(scope="class")
    @classmethod
    def read(cls) -> KubeRead:
        return convert("kueue")

    def test_levels_from_the_last_topology(self, read: KubeRead) -> None:
        # tas/sample-queues.yaml (the last Topology "default"): block > rack > hostname;
        # the hostname is the node itself
        lv = read.snapshot.levels
        assert [(x.name, x.node_label) for x in lv] == [
            ("block", "cloud.provider.com/topology-block"),
            ("rack", "cloud.provider.com/topology-rack"),
        ]

    def test_cluster_queues(self, read: KubeRead) -> None:
        q = read.snapshot.queue_by_name
        # admin/shared-quota-setup.yaml (last team-cluster-queue): cpu 9 on-demand + 9 spot,
        # cpu_credits 14; no cohort, so it cannot borrow: max = nominal
        assert q["team-cluster-queue"].guaranteed == {"cpu": 18_000, "cpu_credits": 14_000}
        assert q["team-cluster-queue"].max == q["team-cluster-queue"].guaranteed
        # multikueue/tas/manager-setup.yaml is the last cluster-queue: 16 CPU, 32Gi
        assert q["cluster-queue"].guaranteed == {"cpu": 16_000, "memory": 32 * GI}
        # tas/sample-queues.yaml is the last tas-cluster-queue: 100 CPU, 100Gi (no GPUs)
        assert q["tas-cluster-queue"].max == {"cpu": 100_000, "memory": 100 * GI}
        assert q["worker-cluster-queue"].guaranteed == {"cpu": 8_000, "memory": 16 * GI}
        assert (q["cluster-queue-2"].guaranteed, q["cluster-queue-2"].max) == ({}, {})
        assert all(x.weight == 1.0 for x in q.values())
        assert len(q) == 5

    def test_jobs_and_topology_annotations(self, read: KubeRead) -> None:
        s = read.snapshot
        # names from generateName carry a suffix: find the three tas jobs by queue and size
        tas = {g.roles[0].count: g for g in s.gangs if g.queue == "tas-cluster-queue"}
        # tas/sample-job-preferred: 40 pods, preferred block; -required: 10 pods, required
        # rack; -unconstrained: 6 pods, none; each 1 CPU, 200Mi, and tas-flavor's node label
        assert tas[40].topology is not None and tas[40].topology.preferred == "block"
        assert tas[10].topology is not None and tas[10].topology.required == "rack"
        assert tas[6].topology is None
        for g in tas.values():
            assert dict(g.roles[0].requests) == {"cpu": 1000, "memory": 200 * MI}
            assert g.roles[0].node_selector == {"cloud.provider.com/node-group": "tas-group"}
            assert g.min_member is None
        # jobs/sample-job-partial-admission: 20 pods, job-min-parallelism 5
        g = gang(s, "default/sample-job-partial-admission")
        assert (g.size, g.min_member) == (20, 5)
        # jobs/sample-scalable-job: parallelism 3 of completions 100 -> 3 pods
        assert gang(s, "default/sample-elastic-job").size == 3
        # multikueue/dev: required kubernetes.io/hostname -> the node level
        g = gang(s, "default/tas-sample-job")
        assert g.topology is not None and (g.topology.required, g.size) == ("node", 2)

    def test_jobsets_and_kubeflow(self, read: KubeRead) -> None:
        s = read.snapshot
        # JobSets: one replicated job "workers" of parallelism 8 / 4 / 8
        g = gang(s, "default/jobset-tas-combined")
        assert roles(g) == {"workers": (8, None, {"cpu": 1000, "memory": 200 * MI})}
        assert g.topology is not None and g.topology.required == "block"
        g = gang(s, "default/jobset-tas-required")
        assert (g.size, g.topology.required if g.topology else None) == (4, "rack")
        assert gang(s, "default/jobset-tas-sliced").topology is None  # slices are listed
        sliced = [e for e in read.summary.notes_of("JobSet.jobset.x-k8s.io", REASON_NOT_MAPPED)]
        assert {e.name for e in sliced} == {
            "default/jobset-tas-combined",
            "default/jobset-tas-sliced",
        }
        # Kubeflow jobs: replica types become roles
        assert roles(gang(s, "default/pytorch-simple")) == {
            "master": (1, None, {"cpu": 1000, "memory": 200 * MI}),
            "worker": (1, None, {"cpu": 1000, "memory": 200 * MI}),
        }
        # MPIJob pi: limits only (cpu 1, memory 1Gi) -> requests
        assert roles(gang(s, "default/pi")) == {
            "launcher": (1, None, {"cpu": 1000, "memory": GI}),
            "worker": (2, None, {"cpu": 1000, "memory": GI}),
        }
        assert roles(gang(s, "default/xgboost-dist-iris-test-train")) == {
            "master": (1, None, {"cpu": 500, "memory": 256 * MI}),
            "worker": (2, None, {"cpu": 500, "memory": 256 * MI}),
        }
        assert gang(s, "default/tensorflow-dist-mnist").size == 3
        assert gang(s, "default/jax-simple").size == 2
        assert gang(s, "default/paddle-simple-cpu").size == 2

    def test_pod_group_and_queue_mapping(self, read: KubeRead) -> None:
        s = read.snapshot
        # pods-kueue/kueue-pod-group.yaml: two 3-CPU pods, pod-group-total-count 2
        g = gang(s, "default/sample-group")
        assert (g.size, g.min_member) == (2, None)
        assert dict(g.roles[0].requests) == {"cpu": 3000}
        # user-queue's last LocalQueue (multikueue/tas/worker-setup) -> worker-cluster-queue
        assert g.queue == "worker-cluster-queue"
        # admission-fs jobs: lq-a / lq-b -> cluster-queue
        lq = [g for g in s.gangs if g.queue == "cluster-queue"]
        assert len(lq) == 2 and all(dict(x.roles[0].requests) == {"cpu": 3000} for x in lq)
        # 12 batch Jobs, 4 JobSets, 6 Kubeflow jobs, the pod group and the single pod
        assert len(s.gangs) == 12 + 4 + 6 + 2

    def test_summary(self, read: KubeRead) -> None:
        c = counts(read)
        assert c[("AppWrapper.workload.codeflare.dev", REASON_KIND_NOT_READ)] == 3
        assert c[("MultiKueueCluster.kueue.x-k8s.io", REASON_KIND_NOT_READ)] == 2
        assert c[("MultiKueueConfig.kueue.x-k8s.io", REASON_KIND_NOT_READ)] == 1
        assert c[("AdmissionCheck.kueue.x-k8s.io", REASON_KIND_NOT_READ)] == 1
        # Topology "default" in 4 files, ClusterQueue names 10 times for 5 queues, ...
        assert c[("Topology.kueue.x-k8s.io", REASON_DUPLICATE)] == 3
        assert c[("ClusterQueue.kueue.x-k8s.io", REASON_DUPLICATE)] == 5
        assert c[("LocalQueue.kueue.x-k8s.io", REASON_DUPLICATE)] == 5


# --------------------------------------------------------------------------- koordinator/


class TestKoordinator:
    def test_summary(self) -> None:
        r = convert("koordinator")
        c = counts(r)
        # the node excerpt has no metadata.name (and nests status under metadata)
        assert c[("Node", REASON_INVALID)] == 1
        # the 5 proposal pods have no apiVersion; the user-manual pod has `...` in it
        assert c[("Pod", REASON_NOT_AN_OBJECT)] == 5
        assert any(
            "not valid YAML" in e.detail for e in r.summary.skipped_of("-", REASON_NOT_AN_OBJECT)
        )
        # node-1 twice (the 2025 proposal's is kept); neither node is in the folder
        assert c[("Device.scheduling.koordinator.sh", REASON_DUPLICATE)] == 1
        assert sorted(
            e.name
            for e in r.summary.skipped_of("Device.scheduling.koordinator.sh", REASON_NODE_MISSING)
        ) == [
            "host04",
            "node-1",
        ]
        assert r.snapshot.gangs == () and r.snapshot.nodes == ()

    def test_device_topology_becomes_the_node_layout(self, tmp_path: Path) -> None:
        """The 2025 proposal's Device node-1 with a node-1 advertising 2 GPUs: GPU minor 0
        (NUMA 0, PCIe pci0000:3a) is healthy; minor 1 reports Healthy False (XID 74), so it
        is left out and the node's allocatable GPUs drop to 1."""
        device = load_docs(
            "koordinator/proposal_20250425-heterogeneous-GPU-device-reporting_block0_device-topology.yaml"
        )
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-1"},
            "status": {
                "allocatable": {"cpu": "8", "nvidia.com/gpu": "2"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        r = read_kube([write_list(tmp_path, [node, *device])])
        n = r.snapshot.node_by_name["node-1"]
        assert n.devices is not None
        assert [
            (x.name, [(p.name, p.gpus) for p in x.pcie_switches]) for x in n.devices.numa_nodes
        ] == [
            ("numa0", [("pci0000:3a", ("GPU-fd971b33-4891-fd2e-ed42-ce6adf324615",))]),
        ]
        assert n.allocatable["nvidia.com/gpu"] == 1000
        assert n.gpu_model == "Tesla-T4"  # the Device's node.koordinator.sh/gpu-model label

    def test_joint_allocation_pods(self, tmp_path: Path) -> None:
        """The device-allocate-hint proposal's pods, given the apiVersion they lack, with
        koordinator.sh/rdma as the NIC resource (100 = one NIC unless RequestsAsCount)."""
        items = []
        for block in (0, 3, 5, 6):
            for d in load_docs(
                f"koordinator/proposal_20230803-device-allocate-hint-apis_block{block}_pod-gpu-rdma.yaml"
            ):
                d = copy.deepcopy(d)
                d["apiVersion"] = "v1"
                d["metadata"]["name"] = f"pod-block{block}"
                items.append(d)
        r = read_kube(
            [write_list(tmp_path, items)], KubeOptions(nic_resource="koordinator.sh/rdma")
        )
        s = r.snapshot
        # block 3: 4 GPUs + rdma 1 (1% of a NIC -> 1 NIC), SamePCIe -> joint pcie
        g = gang(s, "default/pod-block3")
        assert (dict(g.roles[0].requests), g.joint) == (
            {"nvidia.com/gpu": 4000, "koordinator.sh/rdma": 1000},
            "pcie",
        )
        # block 0: no requiredScope -> no joint policy, noted
        assert gang(s, "default/pod-block0").joint == "none"
        assert any(
            "no requiredScope" in e.detail
            for e in r.summary.notes
            if e.name == "default/pod-block0"
        )
        # block 5: rdma 100 with ApplyForAll -> one NIC; block 6: RequestsAsCount 2 -> two
        assert dict(gang(s, "default/pod-block5").roles[0].requests) == {
            "koordinator.sh/rdma": 1000
        }
        assert dict(gang(s, "default/pod-block6").roles[0].requests) == {
            "koordinator.sh/rdma": 2000
        }


# --------------------------------------------------------------------------- hived/, nvidia-gfd/


def test_hived_is_listed_by_kind_and_reason() -> None:
    r = convert("hived")
    assert counts(r) == {
        # SOURCE.md, 3 cluster configs, 2 OpenPAI job files, 4 non-object documents of
        # request/basic and 2 of request/design (job requests, physicalCluster)
        ("-", REASON_NOT_AN_OBJECT): 12,
        # FrameworkController Frameworks: 3 in request/basic, 1 in request/design
        ("Framework.frameworkcontroller.microsoft.com", REASON_KIND_NOT_READ): 4,
        # request/design's 6 pods: containers without names, cpu "3 * 16"
        ("Pod", REASON_INVALID): 6,
        # request/basic's 3 pods ask their GPUs in the HiveD annotation, not in resources
        ("Pod", REASON_NOT_MAPPED): 3,
    }
    # every pod is listed as not read above: none counts as read (before: {"Pod": 3})
    assert r.snapshot.gangs == () and r.summary.read == {}


def test_nvidia_gfd_is_listed_and_its_labels_give_the_gpu_model(tmp_path: Path) -> None:
    r = convert("nvidia-gfd")
    assert counts(r) == {("-", REASON_NOT_AN_OBJECT): 3}  # SOURCE.md, the .md and the .txt
    assert MANIFESTS is not None
    # named explicitly, the excerpt is read as YAML and its `...` elisions make it invalid
    r = read_kube([MANIFESTS / "nvidia-gfd" / "gfd-readme_kubectl-get-nodes-excerpt.txt"])
    assert [e.reason for e in r.summary.skipped] == [REASON_NOT_AN_OBJECT]
    assert "not valid YAML" in r.summary.skipped[0].detail
    # the excerpt's labels on a node: the GPU model is gpu.product
    text = (MANIFESTS / "nvidia-gfd" / "gfd-readme_kubectl-get-nodes-excerpt.txt").read_text()
    labels = dict(
        line.strip().split(": ", 1)
        for line in text.splitlines()
        if line.strip().startswith("nvidia.com/")
    )
    labels = {k: v.strip('"') for k, v in labels.items()}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "dgx", "labels": labels},
        "status": {"allocatable": {"nvidia.com/gpu": labels["nvidia.com/gpu.count"]}},
    }
    n = read_kube([write_list(tmp_path, [node])]).snapshot.nodes[0]
    assert (n.gpu_model, n.allocatable["nvidia.com/gpu"]) == ("A100-SXM4-40GB", 1000)


# --------------------------------------------------------------------------- scheduler-plugins/


def test_scheduler_plugins() -> None:
    r = convert("scheduler-plugins")
    s = r.snapshot
    # coscheduling doc: PodGroup nginx minMember 3 + ReplicaSet of 6 pods labelled with it,
    # 3000m CPU and 500Mi each
    g = gang(s, "default/nginx")
    assert (g.size, g.min_member) == (6, 3)
    assert roles(g) == {"pods": (6, None, {"cpu": 3000, "memory": 500 * MI})}
    # capacityscheduling: ElasticQuota test/test, min -> guaranteed, max -> max
    q = s.queue_by_name["test/test"]
    assert q.guaranteed == {"cpu": 10_000, "memory": 20 * GI, "nvidia.com/gpu": 1000}
    assert q.max == {"cpu": 20_000, "memory": 40 * GI, "nvidia.com/gpu": 2000}
    assert counts(r) == {
        ("-", REASON_NOT_AN_OBJECT): 1,  # SOURCE.md
        ("AppGroup.appgroup.diktyo.x-k8s.io", REASON_KIND_NOT_READ): 1,
        ("KubeSchedulerConfiguration.kubescheduler.config.k8s.io", REASON_KIND_NOT_READ): 2,
        ("NetworkTopology.networktopology.diktyo.x-k8s.io", REASON_KIND_NOT_READ): 1,
        ("NodeResourceTopology.topology.node.k8s.io", REASON_KIND_NOT_READ): 2,
    }


def test_elastic_quota_charges_its_namespace(tmp_path: Path) -> None:
    """A pod in namespace test is charged to the ElasticQuota of that namespace."""
    items = load_docs("scheduler-plugins/manifests/capacityscheduling/elasticquota-example.yaml")
    items.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "test"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        }
    )
    assert gang(read_kube([write_list(tmp_path, items)]).snapshot, "test/p").queue == "test/test"


def test_missing_pod_group_is_listed(tmp_path: Path) -> None:
    """The coscheduling ReplicaSet without its PodGroup: its 6 pods are not read."""
    docs = load_docs(
        "scheduler-plugins/docs-extracted/coscheduling_block2_podgroup-replicaset.yaml"
    )
    r = read_kube([write_list(tmp_path, [d for d in docs if d["kind"] == "ReplicaSet"])])
    assert r.snapshot.gangs == ()
    assert len(r.summary.skipped_of("ReplicaSet.apps", REASON_GROUP_MISSING)) == 6


# --------------------------------------------------------------------------- kubeflow


def test_kubeflow_mpi_operator() -> None:
    r = convert("kubeflow-mpi-operator")
    s = r.snapshot
    # pi.yaml is read last of pi-intel, pi-mpich, pi: launcher + 2 workers, limits cpu 1, 1Gi
    assert roles(gang(s, "default/pi")) == {
        "launcher": (1, None, {"cpu": 1000, "memory": GI}),
        "worker": (2, None, {"cpu": 1000, "memory": GI}),
    }
    # tensorflow-benchmarks: workers limit nvidia.com/gpu 1; the launcher asks nothing
    assert roles(gang(s, "default/tensorflow-benchmarks")) == {
        "launcher": (1, None, {}),
        "worker": (2, None, {"nvidia.com/gpu": 1000}),
    }
    assert roles(gang(s, "default/tensorflow-mnist")) == {
        "launcher": (1, None, {"cpu": 1000, "memory": 2 * GI}),
        "worker": (2, None, {"cpu": 2000, "memory": 4 * GI}),
    }
    # no schedulingPolicy: the gang is all replicas (the operator's PodGroup minMember)
    assert all(g.min_member is None for g in s.gangs) and len(s.gangs) == 3
    assert counts(r)[("MPIJob.kubeflow.org", REASON_DUPLICATE)] == 2


def test_kubeflow_training_operator_v1() -> None:
    r = convert("kubeflow-training-operator-v1")
    s = r.snapshot
    one_gpu = {"nvidia.com/gpu": 1000}
    for name in ("pytorch-dist-mnist-gloo", "pytorch-dist-mnist-nccl", "pytorch-deepspeed-demo"):
        assert roles(gang(s, f"default/{name}")) == {
            "master": (1, None, one_gpu),
            "worker": (1, None, one_gpu),
        }
    assert roles(gang(s, "default/multi-worker")) == {"worker": (2, None, one_gpu)}
    assert roles(gang(s, "default/elastic-example-imagenet")) == {
        "worker": (2, None, {"cpu": 4000})
    }
    assert roles(gang(s, "kubeflow/pytorch-simple")) == {
        "master": (1, None, {}),
        "worker": (1, None, {}),
    }
    assert roles(gang(s, "kubeflow/tfjob-simple")) == {"worker": (2, None, {})}
    assert roles(gang(s, "default/tensorflow-mnist")) == {
        "launcher": (1, None, {"cpu": 1000, "memory": 2 * GI}),
        "worker": (2, None, {"cpu": 2000, "memory": 4 * GI}),
    }
    assert len(s.gangs) == 8
    assert any(
        "elasticPolicy" in e.detail
        for e in r.summary.notes_of("PyTorchJob.kubeflow.org", REASON_NOT_MAPPED)
    )
