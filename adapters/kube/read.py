"""Kubernetes objects in: a cluster dump becomes a :class:`gangplan.models.Snapshot`.

``read_kube(paths, options)`` reads a v1 ``List`` (``kubectl get ... -o yaml|json``), a
multi-document YAML, or a folder of manifests (:mod:`gangplan.adapters.kube.docs`), and
returns the snapshot and a :class:`~gangplan.adapters.kube.summary.ReadSummary` of
everything not read, by kind and reason. It never raises for the content of a dump: a
document that is not an object, an invalid object, a kind gangplan does not read, a pod
whose PodGroup is missing — each is listed. It raises :class:`KubeInputError` only for a
path that does not exist, a bad option value, or (never seen on real dumps) objects that
read into a snapshot the models reject as a whole.

What becomes what (field by field; sources in the docstrings of the modules named):

=========================================  ===============================================
Kubernetes                                 gangplan
=========================================  ===============================================
``Node`` allocatable (capacity if no       ``Node.allocatable``; labels, ``NoSchedule`` /
allocatable), labels, taints,              ``NoExecute`` taints, ``unschedulable``,
``unschedulable``, ``Ready`` condition     ``ready`` (no Ready condition: assumed Ready)
``nvidia.com/gpu.product`` (GPU feature    ``Node.gpu_model`` (then GKE's
discovery)                                 ``cloud.google.com/gke-accelerator``, Alibaba's
                                           ``alibabacloud.com/gpu-card-model``, then a
                                           Koordinator Device's ``node.koordinator.sh/gpu-model``)
node labels / HyperNodes / Kueue Topology  ``Snapshot.levels``, ``Node.domains``
                                           (:mod:`~gangplan.adapters.kube.topology`)
DRA ``ResourceSlice`` (``DeviceClass``)   ``Node.devices``, GPU and NIC ``allocatable``,
                                           ``gpu_model`` (:mod:`~gangplan.adapters.kube.dra`)
Koordinator ``Device``, ``--device-layout``  ``Node.devices``, ``Node.device_layout``
pending ``Pod`` (no ``spec.nodeName``)     a pod of a ``Gang`` (:mod:`~gangplan.adapters.kube.pods`
                                           for requests and constraints)
bound ``Pod`` (``spec.nodeName``, not      ``RunningPod`` (devices from Koordinator's
Succeeded/Failed)                          ``device-allocated`` annotation, or its allocated
                                           ``ResourceClaim``)
a pod's ``ResourceClaim`` /                GPU and NIC requests, joint policy, node affinity
``ResourceClaimTemplate``                  (:mod:`~gangplan.adapters.kube.dra_claims`)
PodGroups, Volcano/Kubeflow/batch jobs,    ``Gang`` with roles
JobSets, ReplicaSets, ...                  (:mod:`~gangplan.adapters.kube.workloads`)
Volcano ``Queue``, Kueue ``ClusterQueue``  ``Queue`` (:mod:`~gangplan.adapters.kube.queues`)
(``LocalQueue``, ``ResourceFlavor``),
scheduler-plugins ``ElasticQuota``
``PriorityClass``, Kueue                   ``Gang.priority``, ``RunningPod.priority``
``WorkloadPriorityClass``
=========================================  ===============================================

How it is read, step by step (each a module of this room): documents
(:mod:`~gangplan.adapters.kube.docs`) and typed objects (:mod:`~gangplan.adapters.kube.objects`);
priorities (:mod:`~gangplan.adapters.kube.priorities`); nodes, their levels and device
layouts (:mod:`~gangplan.adapters.kube.nodes`); pods (:mod:`~gangplan.adapters.kube.pod_reader`)
and the pods of workloads that have none in the dump
(:mod:`~gangplan.adapters.kube.predicted`); queues (:mod:`~gangplan.adapters.kube.queues`);
gangs (:mod:`~gangplan.adapters.kube.gangs`); and the snapshot, each node, running pod and
gang validated as it is added, a bad one listed with the problem and the rest converted
(:mod:`~gangplan.adapters.kube.snapshot`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangplan.adapters import yaml_input
from gangplan.adapters.kube.disruption import Disruptions
from gangplan.adapters.kube.docs import DumpError, iter_documents
from gangplan.adapters.kube.dra_claims import ClaimReader
from gangplan.adapters.kube.gangs import GangAssembler, note_unknown_resources
from gangplan.adapters.kube.nodes import (
    device_ids,
    dra_devices,
    node_data,
    read_layouts,
    read_levels,
    read_nodes,
)
from gangplan.adapters.kube.objects import Registry, read_objects
from gangplan.adapters.kube.options import KubeInputError, KubeOptions
from gangplan.adapters.kube.pod_reader import PodReader
from gangplan.adapters.kube.pods import HOSTNAME
from gangplan.adapters.kube.predicted import predict_pods
from gangplan.adapters.kube.priorities import Priorities
from gangplan.adapters.kube.queues import QueueBook, quantities
from gangplan.adapters.kube.snapshot import Draft, SnapshotParts
from gangplan.adapters.kube.summary import ReadSummary
from gangplan.adapters.kube.topology import OptionError, load_template, parse_topology_labels
from gangplan.models import MAX_PODS, DeviceLayout, Level, Snapshot

__all__ = ["KubeInputError", "KubeOptions", "KubeRead", "joint_without_layout", "read_kube"]


@dataclass
class KubeRead:
    """The snapshot read from a dump and the summary of what was not read."""

    snapshot: Snapshot
    summary: ReadSummary

    def warnings(self) -> list[str]:
        """The YAML reader's warning (PyYAML without libyaml), the snapshot's warnings (no
        node while gangs wait among them), no node at all beside queues or running pods, and
        what would stop gangs from being placed that an option can fix (joint allocation with
        no device layout: ``--device-layout``)."""
        slow = yaml_input.loader_warning()
        s = self.snapshot
        bare = (
            [
                "the dump has no Node: the instance has no nodes "
                "(a dump without `kubectl get nodes`?)"
            ]
            if not s.nodes and not s.gangs and (s.queues or s.running)
            else []
        )
        return [
            *([slow] if slow else []),
            *s.warnings(),
            *bare,
            *joint_without_layout(s),
        ]


def joint_without_layout(snapshot: Snapshot) -> list[str]:
    """A warning when gangs ask joint GPU/NIC allocation (Koordinator's
    ``device-joint-allocate`` with a required scope) for pods with NICs but no node has a
    device layout: no placement can give them NICs under the GPUs' PCIe switch or NUMA node."""
    s = snapshot
    if any(n.has_device_topology for n in s.nodes):
        return []
    asking = [
        g.key
        for g in s.gangs
        if g.joint != "none" and any(r.requests.get(s.nic, 0) for r in g.roles)
    ]
    if not asking:
        return []
    names = ", ".join(asking[:3]) + (f" and {len(asking) - 3} more" if len(asking) > 3 else "")
    return [
        f"{len(asking)} gang{'s' if len(asking) != 1 else ''} ({names}) "
        f"ask{'' if len(asking) != 1 else 's'} joint GPU/NIC "
        "allocation, but no node has a device layout (a Koordinator Device or "
        "--device-layout), so none can be placed: give the nodes' layout with --device-layout "
        "(a template: hgx8, pcie4; or a DeviceLayout file)"
    ]


def read_kube(paths: Iterable[str | Path], options: KubeOptions | None = None) -> KubeRead:
    """Read a Kubernetes dump (files, folders, or ``-``) into a snapshot.

    The documents are validated into typed objects as they are handed out, each raw
    document let go of once it is (:func:`~gangplan.adapters.kube.docs.iter_documents`);
    the cyclic garbage collector waits until the snapshot is made
    (:func:`~gangplan.adapters.yaml_input.gc_paused`: the objects read hold no cycles).

    Raises:
        KubeInputError: a path that does not exist or cannot be read; a bad option value.
    """
    opts = options or KubeOptions()
    paths = list(paths)
    summary = ReadSummary()
    with yaml_input.gc_paused():
        try:
            levels_given = (
                parse_topology_labels(opts.topology_labels) if opts.topology_labels else None
            )
            template = load_template(opts.device_layout) if opts.device_layout else None
            reg = read_objects(iter_documents(paths, summary), summary)
        except (DumpError, OptionError) as err:
            raise KubeInputError(str(err)) from None
        return _convert(reg, summary, opts, levels_given, template, [str(p) for p in paths])


def _convert(
    reg: Registry,
    summary: ReadSummary,
    opts: KubeOptions,
    levels_given: tuple[Level, ...] | None,
    template: tuple[str, DeviceLayout] | None,
    paths: list[str],
) -> KubeRead:
    """The objects of a dump, read into a snapshot in the order of the module docstring."""
    gpu, nic = opts.gpu_resource, opts.nic_resource
    priorities = Priorities(reg, summary)
    read = read_nodes(reg, summary, gpu=gpu, nic=nic)
    levels = read_levels(reg, summary, read, levels_given, opts.topology_labels or "")
    layouts = read_layouts(reg, summary, read, template, gpu=gpu, nic=nic)
    parts = SnapshotParts(
        summary,
        resources={"gpu": gpu, "nic": nic},
        levels=[lv.model_dump() for lv in levels.levels],
        device_layouts={k: v.model_dump() for k, v in layouts.templates.items()},
    )
    nodes = [node_data(n, layouts, levels) for n in read.values()]
    node_devices: dict[str, set[str]] = {}
    for n in nodes:
        obj = reg.get("", "Node", "", n["name"])
        data = {**n, "allocatable": quantities(n["allocatable"])}
        if parts.add_node(Draft(data, obj.source if obj else "", "Node", n["name"])):
            node_devices[n["name"]] = device_ids(n, layouts, gpu=gpu, nic=nic)
    queues = QueueBook(reg, summary)
    reader = PodReader(summary, opts, priorities)
    claims = ClaimReader(
        reg,
        layouts.dra,
        summary,
        gpu=gpu,
        nic=nic,
        hostnames={n: d["labels"].get(HOSTNAME, n) for n, d in read.items()},
    )
    pods = claims.apply_all(reader.read_pods(reg, layouts))
    disruptions = Disruptions(reg)
    disruptions.mark(pods)
    predicted = predict_pods(
        reg, summary, reader, opts.scheduler_names, room=max(0, MAX_PODS - len(pods))
    )
    predicted.pods = claims.apply_all(predicted.pods)
    assembler = GangAssembler(
        reg,
        summary,
        options=opts,
        priorities=priorities,
        queues=queues,
        levels=levels,
        node_devices=node_devices,
        invalid_nodes=frozenset(o.name for o in reg.of("", "Node")) - frozenset(node_devices),
        add_pods=bool(read) and all("pods" in n["allocatable"] for n in read.values()),
    )
    gangs = assembler.assemble(pods + predicted.pods, predicted)
    note_unknown_resources(summary, gangs.gangs, nodes)
    parts.set_queues(queues.finish())
    for draft in gangs.running:
        parts.add_running(draft)
    labels = {(p.namespace, p.name): p.labels for p in pods if p.node_name}
    parts.budgets = disruptions.budgets(
        (rp.namespace, rp.name, labels.get((rp.namespace, rp.name), {})) for rp in parts.running
    )
    for draft in gangs.gangs:
        parts.add_gang(draft)
    kept = {g.key for g in parts.gangs}
    minors = {
        n: {
            dev: m
            for kind in ("gpu", "rdma")
            for m, dev in layouts.minors.get(n, {}).get(kind, {}).items()
        }
        for n in layouts.node_layout
    }
    metadata: dict[str, Any] = {
        "name": "kubernetes-dump",
        "description": "converted by gangplan convert k8s",
        "source": paths,
        "kubernetes": {
            "levels_from": levels.source,
            "predicted_gangs": sorted(g for g in gangs.predicted if g in kept),
            "predicted_by": {k: v for k, v in sorted(gangs.predicted.items()) if k in kept},
            "schedulers": {k: v for k, v in sorted(gangs.schedulers.items()) if k in kept},
            "device_minors": minors,
            "dra_devices": dra_devices(layouts),
            "read": dict(sorted(summary.read.items())),
        },
    }
    return KubeRead(parts.snapshot(metadata), summary)
