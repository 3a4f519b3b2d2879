"""Hostile and broken Kubernetes dumps: each bad object is listed as not read, with the
field that is wrong, and the rest of the dump converts — never a traceback, never
gigabytes for a small file.

Each test rebuilds a reproducer found by breaking ``gangplan convert k8s`` on purpose
(issue 11, "No input crashes, hangs, eats memory or destroys a file"); the comment under
``before:`` says what happened then. Expected messages are written out by hand.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangplan.adapters.kube.read import KubeOptions, KubeRead, read_kube
from gangplan.adapters.kube.summary import REASON_INVALID, Entry

Limited = Callable[..., subprocess.CompletedProcess[str]]


def node(name: str = "n1", gpus: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, gpus: int = 1, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
            ]
        },
    }


TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "x"}]}}


def read(tmp_path: Path, *items: dict[str, Any]) -> KubeRead:
    p = tmp_path / "dump.yaml"
    p.write_text(yaml.safe_dump_all(items), encoding="utf-8")
    return read_kube([p], KubeOptions())


def invalid(result: KubeRead) -> list[Entry]:
    return [e for e in result.summary.skipped if e.reason == REASON_INVALID]


# --------------------------------------------------------------------------- tracebacks


@pytest.mark.parametrize(
    ("bad", "kind", "detail"),
    [
        # before: AttributeError: 'NoneType' object has no attribute 'parallelism'
        (
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
                "spec": None,
            },
            "Job.batch",
            "spec: required field is missing",
        ),
        # before: AttributeError: 'NoneType' object has no attribute 'containers'
        (
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "j"},
                "spec": {"template": {"metadata": {"labels": {"a": "b"}}}},
            },
            "Job.batch",
            "spec.template.spec: required field is missing",
        ),
        # before: AttributeError: 'NoneType' object has no attribute 'metadata'
        (
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": "j"},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}}},
            },
            "ReplicaSet.apps",
            "spec.template: required field is missing",
        ),
        # a negative count: the API server refuses it; before, range(-3) made no pods quietly
        (
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "j"},
                "spec": {"replicas": -3, "selector": {}, "template": TEMPLATE},
            },
            "StatefulSet.apps",
            "spec.replicas: must be greater than or equal to 0 (got -3)",
        ),
        # before: pydantic_core.ValidationError: 1 validation error for RunPolicy
        (
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "TFJob",
                "metadata": {"name": "j"},
                "spec": {
                    "runPolicy": 5,
                    "tfReplicaSpecs": {"Worker": {"replicas": 2, "template": TEMPLATE}},
                },
            },
            "TFJob.kubeflow.org",
            "spec.runPolicy: Input should be a valid dictionary or instance of RunPolicy (got 5)",
        ),
        # the same, one level down, and in a replica spec
        (
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": "j"},
                "spec": {
                    "runPolicy": {"schedulingPolicy": {"minAvailable": "x"}},
                    "pytorchReplicaSpecs": {"Worker": 7},
                },
            },
            "PyTorchJob.kubeflow.org",
            "spec.pytorchReplicaSpecs.Worker: Input should be a valid dictionary or instance "
            "of ReplicaSpec (got 7)",
        ),
    ],
)
def test_a_broken_workload_is_listed_and_the_rest_converts(
    tmp_path: Path, bad: dict[str, Any], kind: str, detail: str
) -> None:
    result = read(tmp_path, bad, node(), pod("p"))
    [entry] = invalid(result)
    assert (entry.source, entry.kind) == (f"{tmp_path / 'dump.yaml'}#0", kind)
    assert entry.detail == detail
    # the node and the pod (a gang of one) convert
    assert [n.name for n in result.snapshot.nodes] == ["n1"]
    assert [g.name for g in result.snapshot.gangs] == ["p"]


def test_a_deployment_past_the_pod_bound_is_listed_before_any_pod_is_named(
    tmp_path: Path, gangplan_limited: Limited
) -> None:
    # before: every one of the 2,147,483,647 pod names was built first (MemoryError, or
    # gigabytes without a memory limit); now the count is checked against MAX_PODS first.
    # Run with 1 GiB of address space: building the names would fail there.
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "default"},
        "spec": {"replicas": 2147483647, "selector": {}, "template": TEMPLATE},
    }
    dump = tmp_path / "d.yaml"
    dump.write_text(yaml.safe_dump_all([deployment, node(), pod("p")]), encoding="utf-8")
    done = gangplan_limited("convert", "k8s", str(dump), "-o", str(tmp_path / "out.yaml"))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert (
        f"{dump}#0 default/d: spec.replicas: 2,147,483,647 pods: more than gangplan accepts "
        "(at most 1,000,000 pods in a snapshot, MAX_PODS in gangplan.models.limits)"
    ) in " ".join(done.stderr.split())  # wrapped at 80 columns
    assert "1 node, 8 GPUs, 0 levels, 1 queue, 1 pending gang (1 pod)" in " ".join(
        done.stderr.split()
    )


def test_a_gang_workload_past_the_gang_bound_is_listed(tmp_path: Path) -> None:
    # a Volcano job is one gang: 150,001 pods is one more than MAX_PODS_PER_GANG
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "v"},
        "spec": {"tasks": [{"name": "w", "replicas": 150_001, "template": TEMPLATE}]},
    }
    result = read(tmp_path, job, node())
    [entry] = invalid(result)
    assert entry.detail == (
        "spec.tasks[*].replicas: 150,001 pods: more than gangplan accepts (at most 150,000 "
        "pods in one gang, MAX_PODS_PER_GANG in gangplan.models.limits)"
    )


def test_workloads_that_together_pass_the_pod_bound_are_listed_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MAX_PODS lowered to 5 (the real bound would need a million pods): the dump's one pod
    # leaves room for 4; Deployment a (2 replicas) takes 2 of them, b (3) does not fit the 2
    # left and is listed, c (2) fits them
    from gangplan.adapters.kube import predicted
    from gangplan.adapters.kube import read as kube_read

    monkeypatch.setattr(kube_read, "MAX_PODS", 5)
    monkeypatch.setattr(predicted, "MAX_PODS", 5)

    def deployment(name: str, replicas: int) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {}, "template": TEMPLATE},
        }

    result = read(tmp_path, deployment("a", 2), deployment("b", 3), deployment("c", 2), pod("p"))
    [entry] = invalid(result)
    assert (entry.kind, entry.name) == ("Deployment.apps", "default/b")
    assert entry.detail == (
        "spec.replicas: 3 pods: the dump's pods and the workloads read before it leave room "
        "for 2 of the 5 pods gangplan accepts in a snapshot (MAX_PODS in gangplan.models.limits)"
    )
    assert sorted(g.name for g in result.snapshot.gangs) == ["a-0", "a-1", "c-0", "c-1", "p"]


# --------------------------------------------------------------------------- small input, long runs


def hypernode(pattern: str) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "rack-a"},
        "spec": {
            "tier": 1,
            "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}],
        },
    }


def test_a_hypernode_pattern_never_backtracks(tmp_path: Path, gangplan_limited: Limited) -> None:
    # before: Python's re backtracked exponentially on ^(a+)+$ against "aaa...ab" (past 60 s
    # at 44 characters: it never ended here). RE2, as Go's regexp, runs in linear time: the
    # 44 a's and the b do not match (no node in tier 1), the 44 a's alone do. In a child
    # process, so that the old engine fails the test as hung instead of hanging it.
    dump = tmp_path / "hn.yaml"
    dump.write_text(
        yaml.safe_dump_all(
            [hypernode("^(a+)+$"), node("a" * 44 + "b"), node("a" * 44, gpus=4), pod("p")]
        ),
        encoding="utf-8",
    )
    out = tmp_path / "out.yaml"
    done = gangplan_limited("convert", "k8s", str(dump), "-o", str(out))
    assert done.returncode == 0, done.stderr
    nodes = {n["name"]: n for n in yaml.safe_load(out.read_text())["nodes"]}
    assert nodes["a" * 44]["domains"] == {"tier-1": "rack-a"}
    assert "domains" not in nodes["a" * 44 + "b"]  # in no domain (written without the key)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        # a backreference: Python's re accepted it (and matched "aa"); Go's regexp refuses it
        (r"(a)\1", r"invalid escape sequence: \1"),
        # a lookahead: Go's regexp refuses it too
        ("(?=a)a", "invalid perl operator: (?="),
    ],
)
def test_a_pattern_go_refuses_is_noted_not_matched(
    tmp_path: Path, pattern: str, message: str
) -> None:
    result = read(tmp_path, hypernode(pattern), node("aa"))
    assert result.snapshot.nodes[0].domains == {}
    [note] = [e for e in result.summary.notes if e.kind == "HyperNode.topology.volcano.sh"]
    assert note.detail == f"spec.members[0].selector.regexMatch: bad pattern ({message})"


# --------------------------------------------------------------------------- one bad object


def volcano_queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, **spec},
    }


def test_a_queue_name_too_long_drops_the_queue_and_its_gang_only(tmp_path: Path) -> None:
    # before: "the dump reads into an inconsistent snapshot: queues[1].name: String should
    # have at most 253 characters" — and nothing converted
    long = "q" * 254
    bad = pod("p1", annotations={"scheduling.volcano.sh/queue-name": long})
    result = read(tmp_path, node(), bad, pod("p2"))
    src = f"{tmp_path / 'dump.yaml'}#1"
    assert {(e.source, e.kind, e.name, e.detail) for e in invalid(result)} == {
        # the queue the annotation names, listed under the pod that names it
        (src, "Queue", long, "name: String should have at most 253 characters"),
        (src, "Gang", "default/p1", "queue: String should have at most 253 characters"),
    }
    assert [g.name for g in result.snapshot.gangs] == ["p2"]
    assert [q.name for q in result.snapshot.queues] == ["default"]


def test_a_fractional_extended_resource_in_a_queue_drops_that_queue(tmp_path: Path) -> None:
    # before: "the dump reads into an inconsistent snapshot: queues[1].max.example.com/fpga:
    # 500m is not a whole number" — and nothing converted
    result = read(
        tmp_path,
        node(),
        volcano_queue("qa", capability={"example.com/fpga": "0.5"}),
        volcano_queue("qb", capability={"nvidia.com/gpu": "4"}),
        pod("p", annotations={"scheduling.volcano.sh/queue-name": "qb"}),
    )
    [entry] = invalid(result)
    assert (entry.kind, entry.name) == ("Queue.scheduling.volcano.sh", "qa")
    assert entry.detail == (
        "max.example.com/fpga: 500m is not a whole number; extended resources are counted in "
        "whole units (only the GPU resource takes a share such as 500m)"
    )
    assert [q.name for q in result.snapshot.queues] == ["qb"]
    assert [(g.name, g.queue) for g in result.snapshot.gangs] == [("p", "qb")]


def test_strict_fails_on_a_dropped_queue(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gangplan.adapters.cli import main

    dump = tmp_path / "d.yaml"
    dump.write_text(
        yaml.safe_dump_all([node(), volcano_queue("qa", capability={"example.com/fpga": "0.5"})]),
        encoding="utf-8",
    )
    assert CliRunner().invoke(main, ["convert", "k8s", str(dump)]).exit_code == 0
    strict = CliRunner().invoke(main, ["convert", "k8s", "--strict", str(dump)])
    assert strict.exit_code == 1
    assert strict.stderr.startswith(
        f"error: {dump}#1: Queue.scheduling.volcano.sh qa: invalid object: max.example.com/fpga"
    )


def test_a_missing_priority_class_of_a_gang_object_is_noted_under_it(tmp_path: Path) -> None:
    # found by the fuzz suite: the note had no source, kind or name (": priorityClassName:
    # ...") when a Volcano PodGroup named a PriorityClass the dump does not hold
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 1, "priorityClassName": "missing"},
    }
    member = pod("p", annotations={"scheduling.k8s.io/group-name": "g"})
    result = read(tmp_path, group, node(), member)
    [note] = [e for e in result.summary.notes if "PriorityClass" in e.detail]
    assert (note.source, note.kind, note.name) == (
        f"{tmp_path / 'dump.yaml'}#0",
        "PodGroup.scheduling.volcano.sh",
        "default/g",
    )
    assert (
        note.detail == "priorityClassName: PriorityClass 'missing' is not in the dump: priority 0"
    )


# --------------------------------------------------------------------------- deep JSON

DEEP = "[" * 50_000 + "]" * 50_000  # 100 KB: under the 256 KiB annotation limit


@pytest.mark.parametrize(
    "key",
    [
        # before: RecursionError out of joint_policy (json.loads), a traceback
        "scheduling.koordinator.sh/device-joint-allocate",
        # before: RecursionError out of _requests_as_count
        "scheduling.koordinator.sh/device-allocate-hint",
    ],
)
def test_deep_json_in_a_pending_pods_annotation_is_ignored(tmp_path: Path, key: str) -> None:
    p = pod("p0", annotations={key: DEEP})
    p["spec"]["containers"][0]["resources"]["limits"]["koordinator.sh/rdma"] = "100"
    f = tmp_path / "dump.yaml"
    f.write_text(yaml.safe_dump_all([node(), p]), encoding="utf-8")
    result = read_kube([f], KubeOptions(nic_resource="koordinator.sh/rdma"))
    assert [g.name for g in result.snapshot.gangs] == ["p0"]  # still read, as one pending pod
    assert invalid(result) == []
    if key.endswith("joint-allocate"):
        details = [e.detail for e in result.summary.notes]
        assert any("nested more than 64 levels deep" in d for d in details), details


def test_deep_json_in_device_allocated_is_a_note(tmp_path: Path) -> None:
    # before: RecursionError out of allocated_devices for a running pod
    p = pod("r0", annotations={"scheduling.koordinator.sh/device-allocated": DEEP})
    p["spec"]["nodeName"] = "n1"
    p["status"] = {"phase": "Running"}
    result = read(tmp_path, node(), p)
    assert [r.name for r in result.snapshot.running] == ["r0"]
    details = [e.detail for e in result.summary.notes]
    assert any("device-allocated: nested more than 64 levels deep" in d for d in details), details
