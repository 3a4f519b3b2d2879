"""Kubernetes objects for the serve tests, as the API server would hold them (valid against
the Kubernetes 1.37 schemas): nodes, pods of gangs, PodGroups of each flavour, queues."""

from __future__ import annotations

from typing import Any

GATE = "gangplan.io/placement"
GPU = "nvidia.com/gpu"


def node(
    name: str, gpus: int = 8, *, cpu: str = "64", labels: dict[str, str] | None = None, **kw: Any
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "512Gi", "pods": "110"}
    if gpus:
        alloc[GPU] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": kw.get("spec", {}),
        "status": {
            "allocatable": alloc,
            "capacity": dict(alloc),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    *,
    ns: str = "ml",
    gpus: int = 1,
    cpu: str = "1",
    group: str | None = None,
    gated: bool = True,
    scheduler: str | None = None,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    phase: str | None = None,
) -> dict[str, Any]:
    """A pod of Volcano gang ``group`` (annotation ``scheduling.k8s.io/group-name``)."""
    requests = {"cpu": cpu, "memory": "1Gi"}
    limits: dict[str, str] = {}
    if gpus:
        limits[GPU] = str(gpus)
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "trainer:1",
                "resources": {"requests": requests, **({"limits": limits} if limits else {})},
            }
        ],
    }
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    if scheduler:
        spec["schedulerName"] = scheduler
    if node_name:
        spec["nodeName"] = node_name
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = dict(labels)
    if ann:
        meta["annotations"] = ann
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    out["status"] = {"phase": phase or ("Running" if node_name else "Pending")}
    return out


def volcano_group(name: str, min_member: int, *, ns: str = "ml", queue: str = "default") -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member, "queue": queue},
    }


def volcano_queue(name: str, weight: int = 1, **spec: Any) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, **spec},
    }


def gang_pods(
    group: str, n: int, *, gpus: int = 1, ns: str = "ml", **kw: Any
) -> list[dict[str, Any]]:
    return [pod(f"{group}-{i}", ns=ns, gpus=gpus, group=group, **kw) for i in range(n)]
