"""Write a large synthetic Kubernetes dump, as ``kubectl get nodes,pods,podgroups,queues -A
-o yaml|json`` would write it, to measure how fast ``gangplan convert k8s`` reads one.

The dump is a v1 ``List``: NODES GPU nodes (8 GPUs and 8 RDMA NICs each, on racks of 32
under blocks of 16 racks, by node label), two Volcano queues, and PODS pods, as
``kubectl`` shows them (metadata with uid, labels, annotations and owner references; a
spec with containers, volumes, tolerations; a status with conditions): nine in ten are
running, bound one per GPU to the nodes in order, the rest pending in Volcano gangs of 8
one-GPU pods with their PodGroups. Nothing is random: equal arguments write equal files.

Usage::

    python scripts/make_kube_dump.py --nodes 5000 --pods 50000 -o /tmp/dump.yaml
    python scripts/make_kube_dump.py --nodes 5000 --pods 50000 -o /tmp/dump.json
    /usr/bin/time -f "%e s %M KB" gangplan convert k8s /tmp/dump.yaml -o /tmp/inst.yaml

Not test data: the files are generated where they are needed and never committed.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import yaml

GANG = 8
GPUS_PER_NODE = 8
RACK = 32
BLOCK = 16
STAMP = "2026-01-05T10:00:00Z"


def _uid(kind: str, i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"gangplan-dump/{kind}/{i}"))


def node(i: int) -> dict[str, Any]:
    name = f"gpu-{i:05d}"
    amounts = {
        "cpu": "192",
        "memory": "2063731508Ki",
        "ephemeral-storage": "3748905420Ki",
        "nvidia.com/gpu": str(GPUS_PER_NODE),
        "rdma/hca": str(GPUS_PER_NODE),
        "pods": "110",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": _uid("node", i),
            "resourceVersion": str(1000 + i),
            "creationTimestamp": STAMP,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": str(GPUS_PER_NODE),
                "cloud.provider.com/topology-block": f"block-{i // (RACK * BLOCK)}",
                "cloud.provider.com/topology-rack": f"rack-{i // RACK}",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24", "providerID": f"aws:///{name}"},
        "status": {
            "allocatable": amounts,
            "capacity": amounts,
            "conditions": [
                {
                    "type": t,
                    "status": "False" if t != "Ready" else "True",
                    "reason": r,
                    "lastHeartbeatTime": STAMP,
                    "lastTransitionTime": STAMP,
                    "message": m,
                }
                for t, r, m in (
                    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has memory"),
                    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID"),
                    ("Ready", "KubeletReady", "kubelet is posting ready status"),
                )
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.1.{i // 256 % 256}.{i % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": f"{i:032x}",
                "systemUUID": _uid("system", i),
                "bootID": _uid("boot", i),
                "kubeProxyVersion": "",
                "kubeletVersion": "v1.36.0",
                "containerRuntimeVersion": "containerd://2.1.0",
                "kernelVersion": "6.8.0",
                "osImage": "Ubuntu 24.04 LTS",
                "architecture": "amd64",
                "operatingSystem": "linux",
            },
        },
    }


def pod(i: int, *, node_name: str | None, gang: str | None, rank: int = 0) -> dict[str, Any]:
    name = f"{gang}-{rank}" if gang else f"train-{i:06d}"
    labels = {"app": "train", "team": f"team-{i % 2}"}
    annotations = {"scheduling.volcano.sh/queue-name": f"team-{i % 2}"}
    if gang:
        annotations["scheduling.k8s.io/group-name"] = gang
        labels["volcano.sh/task-spec"] = "worker"
    status: dict[str, Any] = {"phase": "Pending", "qosClass": "Burstable"}
    if node_name:
        status = {
            "phase": "Running",
            "qosClass": "Burstable",
            "hostIP": "10.1.0.1",
            "podIP": f"10.200.{i // 256 % 256}.{i % 256}",
            "startTime": STAMP,
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": STAMP}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "imageID": "nvcr.io/nvidia/pytorch@sha256:" + "0" * 64,
                    "containerID": f"containerd://{i:064x}",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": STAMP}},
                }
            ],
        }
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "restartPolicy": "Never",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                "command": ["torchrun", "--nproc-per-node=1", "train.py"],
                "env": [
                    {"name": "NCCL_DEBUG", "value": "WARN"},
                    {"name": "RANK", "value": str(rank)},
                ],
                "resources": {
                    "requests": {"cpu": "16", "memory": "128Gi"},
                    "limits": {"nvidia.com/gpu": "1", "memory": "128Gi"},
                },
                "volumeMounts": [
                    {"name": "data", "mountPath": "/data"},
                    {
                        "name": "kube-api-access",
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        "readOnly": True,
                    },
                ],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}},
            {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": []}},
        ],
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "train",
            "uid": _uid("pod", i),
            "resourceVersion": str(100000 + i),
            "creationTimestamp": STAMP,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": gang or f"train-{i:06d}",
                    "uid": _uid("job", i // GANG),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def items(nodes: int, pods: int) -> Iterator[dict[str, Any]]:
    for i in range(nodes):
        yield node(i)
    for q in range(2):
        yield {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": f"team-{q}"},
            "spec": {"weight": 1, "reclaimable": True},
        }
    running = min(pods * 9 // 10, nodes * GPUS_PER_NODE)
    for i in range(running):
        yield pod(i, node_name=f"gpu-{i // GPUS_PER_NODE:05d}", gang=None)
    for g, start in enumerate(range(running, pods, GANG)):
        name = f"gang-{g:05d}"
        yield {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "train", "creationTimestamp": STAMP},
            "spec": {"minMember": min(GANG, pods - start), "queue": f"team-{g % 2}"},
        }
        for i in range(start, min(start + GANG, pods)):
            yield pod(i, node_name=None, gang=name, rank=i - start)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50000)
    ap.add_argument("-o", "--output", required=True, help="FILE.yaml or FILE.json")
    args = ap.parse_args(argv)
    data = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": list(items(args.nodes, args.pods)),
    }
    with open(args.output, "w", encoding="utf-8") as out:
        if args.output.endswith(".json"):
            json.dump(data, out, indent=4)
        else:
            dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
            yaml.dump(data, out, Dumper=dumper, sort_keys=False, default_flow_style=False)
    print(f"wrote {args.output}: {len(data['items'])} objects", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
