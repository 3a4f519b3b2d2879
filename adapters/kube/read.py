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
Koordinator ``Device``, ``--device-layout``  ``Node.devices``, ``Node.device_layout``
pending ``Pod`` (no ``spec.nodeName``)     a pod of a ``Gang`` (:mod:`~gangplan.adapters.kube.pods`
                                           for requests and constraints)
bound ``Pod`` (``spec.nodeName``, not      ``RunningPod`` (devices from Koordinator's
Succeeded/Failed)                          ``device-allocated`` annotation)
PodGroups, Volcano/Kubeflow/batch jobs,    ``Gang`` with roles
JobSets, ReplicaSets, ...                  (:mod:`~gangplan.adapters.kube.workloads`)
Volcano ``Queue``, Kueue ``ClusterQueue``  ``Queue`` (:mod:`~gangplan.adapters.kube.queues`)
(``LocalQueue``, ``ResourceFlavor``),
scheduler-plugins ``ElasticQuota``
``PriorityClass``, Kueue                   ``Gang.priority``, ``RunningPod.priority``
``WorkloadPriorityClass``
=========================================  ===============================================

A pending pod's gang is, in this order: its Volcano group (``scheduling.k8s.io/group-name``
annotation), scheduler-plugins PodGroup (``scheduling.x-k8s.io/pod-group`` label),
Koordinator PodGroup (``pod-group.scheduling.sigs.k8s.io`` label), upstream PodGroup
(``spec.schedulingGroup.podGroupName``), Kueue pod group (``kueue.x-k8s.io/pod-group-name``
label with ``pod-group-total-count``), Koordinator gang annotations
(``gang.scheduling.koordinator.sh/name``, ``min-available``); otherwise the pod is a gang of
one. Identical pending pods of a gang (same requests, selector, affinity, tolerations,
topology and role label) form one role, whose ``pod_names`` are the pods'. When some pods
of a gang already run, they stay fixed and the pending ones form the gang with minimum
``max(1, minimum - running)``.

Its queue: see :mod:`~gangplan.adapters.kube.queues`. A gang, running pod or node that the
snapshot's own checks still reject (e.g. a fractional extended resource) is removed and
listed with the problem.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gangplan.adapters.kube import workloads as wl
from gangplan.adapters.kube.docs import DumpError, read_documents
from gangplan.adapters.kube.objects import KubeObject, ObjectInvalid, Registry, read_objects
from gangplan.adapters.kube.pods import (
    KOORD_GPU_OTHER,
    KOORD_GPU_PERCENT,
    KOORD_RDMA,
    GroupRef,
    PodInfo,
    PodProblem,
    TopologyRequest,
    allocated_devices,
    effective_requests,
    epoch,
    joint_policy,
    map_vendor_requests,
    required_terms,
    tolerations_of,
)
from gangplan.adapters.kube.queues import QueueBook
from gangplan.adapters.kube.queues import quantities as _q
from gangplan.adapters.kube.summary import (
    REASON_ASSUMED,
    REASON_FIELD_IGNORED,
    REASON_GANG_INCOMPLETE,
    REASON_GROUP_MISSING,
    REASON_INVALID,
    REASON_NO_PODS,
    REASON_NODE_MISSING,
    REASON_NOT_MAPPED,
    REASON_OTHER_SCHEDULER,
    REASON_POD_FINISHED,
    REASON_READ_THROUGH_PODS,
    ReadSummary,
)
from gangplan.adapters.kube.topology import (
    DeviceLayouts,
    LevelSource,
    OptionError,
    hypernode_levels,
    kueue_levels,
    label_levels,
    load_template,
    node_device_layouts,
    parse_topology_labels,
)
from gangplan.models import (
    GPU_MILLI,
    DeviceLayout,
    Snapshot,
    SnapshotError,
    Taint,
    TopologyConstraint,
)
from gangplan.models.instance import format_loc
from gangplan.models.quantity import QuantityError, to_base_units

__all__ = [
    "ANN_VOLCANO_GROUP",
    "ANN_VOLCANO_QUEUE",
    "LABEL_KOORD_GROUP",
    "LABEL_KUEUE_POD_GROUP",
    "LABEL_PLUGINS_GROUP",
    "KubeInputError",
    "KubeOptions",
    "KubeRead",
    "read_kube",
]

ANN_VOLCANO_GROUP = "scheduling.k8s.io/group-name"
ANN_VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"
LABEL_PLUGINS_GROUP = "scheduling.x-k8s.io/pod-group"
LABEL_KOORD_GROUP = "pod-group.scheduling.sigs.k8s.io"
LABEL_KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
ANN_KUEUE_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ANN_KOORD_GANG = "gang.scheduling.koordinator.sh/name"
ANN_KOORD_GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
LABEL_KUEUE_PRIORITY = "kueue.x-k8s.io/priority-class"
ANN_KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
ANN_KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
ANN_KUEUE_UNMAPPED = (
    "kueue.x-k8s.io/podset-slice-required-topology",
    "kueue.x-k8s.io/podset-slice-size",
    "kueue.x-k8s.io/podset-group-name",
)
ANN_HIVED = "hivedscheduler.microsoft.com/pod-scheduling-spec"
ROLE_LABELS = (
    "volcano.sh/task-spec",
    "training.kubeflow.org/replica-type",
    "jobset.sigs.k8s.io/replicatedjob-name",
)
JOB_NAME_LABELS = {
    ("batch.volcano.sh", "Job"): "volcano.sh/job-name",
    ("batch", "Job"): "batch.kubernetes.io/job-name",
    ("jobset.x-k8s.io", "JobSet"): "jobset.sigs.k8s.io/jobset-name",
}
GPU_MODEL_LABELS = (
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "alibabacloud.com/gpu-card-model",
)


class KubeInputError(Exception):
    """A dump path that cannot be read or an option that is not valid; names the culprit."""


@dataclass(frozen=True)
class KubeOptions:
    """How to read a dump.

    ``topology_labels``: a preset or ``[name=]key,...`` (``--topology-labels``);
    ``device_layout``: a template name or layout file (``--device-layout``);
    ``scheduler_names``: read only pending pods naming one of these schedulers (empty: all);
    ``gpu_resource`` / ``nic_resource``: the snapshot's GPU and RDMA NIC resource names;
    ``default_queue``: the queue of a gang nothing else assigns one.
    """

    topology_labels: str | None = None
    device_layout: str | None = None
    scheduler_names: tuple[str, ...] = ()
    gpu_resource: str = "nvidia.com/gpu"
    nic_resource: str = "rdma/hca"
    default_queue: str = "default"


@dataclass
class KubeRead:
    """The snapshot read from a dump and the summary of what was not read."""

    snapshot: Snapshot
    summary: ReadSummary

    def warnings(self) -> list[str]:
        return self.snapshot.warnings()


def read_kube(paths: Iterable[str | Path], options: KubeOptions | None = None) -> KubeRead:
    """Read a Kubernetes dump (files, folders, or ``-``) into a snapshot.

    Raises:
        KubeInputError: a path that does not exist or cannot be read; a bad option value.
    """
    opts = options or KubeOptions()
    summary = ReadSummary()
    try:
        levels_given = parse_topology_labels(opts.topology_labels) if opts.topology_labels else None
        template = load_template(opts.device_layout) if opts.device_layout else None
        docs = read_documents(list(paths), summary)
    except (DumpError, OptionError) as err:
        raise KubeInputError(str(err)) from None
    reg = read_objects(docs, summary)
    return _Builder(reg, summary, opts, levels_given, template).build([str(p) for p in paths])


# --------------------------------------------------------------------------- the builder


@dataclass
class _Gang:
    spec: wl.GroupSpec | None
    pending: list[PodInfo] = field(default_factory=list)
    running: list[PodInfo] = field(default_factory=list)


class _Builder:
    def __init__(
        self,
        reg: Registry,
        summary: ReadSummary,
        opts: KubeOptions,
        levels_given: Any,
        template: Any,
    ):
        self.reg = reg
        self.summary = summary
        self.opts = opts
        self.levels_given = levels_given
        self.template = template
        self.gpu = opts.gpu_resource
        self.nic = opts.nic_resource
        self.predicted: list[str] = []

    # ------------------------------------------------------------------ helpers

    def _note(
        self,
        obj: KubeObject | None,
        reason: str,
        detail: str,
        *,
        source: str = "",
        kind: str = "",
        name: str = "",
    ) -> None:
        if obj is not None:
            self.summary.note(obj.source, obj.display_kind, obj.key, reason, detail)
        else:
            self.summary.note(source, kind, name, reason, detail)

    def _skip(self, obj: KubeObject, reason: str, detail: str = "") -> None:
        self.summary.skip(obj.source, obj.display_kind, obj.key, reason, detail)

    # ------------------------------------------------------------------ build

    def build(self, paths: list[str]) -> KubeRead:
        self._priorities()
        nodes = self._nodes()
        levels = self._levels(nodes)
        layouts = self._layouts(nodes)
        self.layout_ids = self._layout_ids(nodes, layouts)
        self.qb = QueueBook(self.reg, self.summary)
        pods = self._pods(layouts)
        pods += self._workloads(pods)
        specs = self._group_specs()
        gangs = self._assign(pods, specs)
        add_pods_resource = bool(nodes) and all("pods" in n["allocatable"] for n in nodes.values())
        gang_dicts, running = self._gangs(gangs, levels, add_pods_resource)
        node_dicts = []
        for name, n in nodes.items():
            d = dict(n)
            d["allocatable"] = {
                k: v
                for k, v in {**n["allocatable"], **layouts.allocatable_fix.get(name, {})}.items()
            }
            if name in layouts.node_layout:
                d["devices"] = layouts.node_layout[name].model_dump()
            elif name in layouts.node_template:
                d["device_layout"] = layouts.node_template[name]
            if name in levels.domains:
                d["domains"] = levels.domains[name]
            if not d.get("gpu_model") and name in layouts.gpu_models:
                d["gpu_model"] = layouts.gpu_models[name]
            node_dicts.append(d)
        self._unknown_resources(gang_dicts, node_dicts)
        minors = {
            n: {
                dev: m
                for kind in ("gpu", "rdma")
                for m, dev in layouts.minors.get(n, {}).get(kind, {}).items()
            }
            for n in layouts.node_layout
        }
        data = {
            "resources": {"gpu": self.gpu, "nic": self.nic},
            "levels": [lv.model_dump() for lv in levels.levels],
            "device_layouts": {k: v.model_dump() for k, v in layouts.templates.items()},
            "nodes": node_dicts,
            "queues": self.qb.finish(),
            "gangs": gang_dicts,
            "running": running,
            "metadata": {
                "name": "kubernetes-dump",
                "description": "converted by gangplan convert k8s",
                "source": paths,
                "kubernetes": {
                    "levels_from": levels.source,
                    "predicted_gangs": sorted(self.predicted),
                    "device_minors": minors,
                    "read": dict(sorted(self.summary.read.items())),
                },
            },
        }
        return KubeRead(self._snapshot(data), self.summary)

    # ------------------------------------------------------------------ priorities

    def _priorities(self) -> None:
        self.pc: dict[str, int] = {}
        self.pc_default: int | None = None
        for obj in self.reg.of("scheduling.k8s.io", "PriorityClass"):
            self.pc[obj.name] = obj.model.value
            if obj.model.global_default:
                self.pc_default = obj.model.value
        self.wpc = {
            o.name: o.model.value for o in self.reg.of("kueue.x-k8s.io", "WorkloadPriorityClass")
        }

    def _priority_of(
        self,
        value: int | None,
        class_name: str | None,
        where: str,
        pod: PodInfo | None = None,
        who: str = "",
    ) -> int:
        if value is not None:
            return int(value)
        if class_name:
            if class_name in self.pc:
                return self.pc[class_name]
            if class_name not in ("system-node-critical", "system-cluster-critical"):
                self.summary.note(
                    pod.source if pod else "",
                    pod.kind if pod else "",
                    who,
                    REASON_ASSUMED,
                    f"{where}: PriorityClass {class_name!r} is not in the dump: priority 0",
                )
                return 0
            return 2_000_001_000 if class_name == "system-node-critical" else 2_000_000_000
        return self.pc_default or 0

    # ------------------------------------------------------------------ nodes

    def _nodes(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for obj in self.reg.of("", "Node"):
            node = obj.model
            status = node.status
            raw = (status.allocatable if status and status.allocatable else None) or (
                status.capacity if status and status.capacity else None
            )
            if status is None or not status.allocatable:
                self._note(
                    obj,
                    REASON_ASSUMED,
                    "status.allocatable missing: capacity used"
                    if raw
                    else "no status.allocatable or capacity: nothing allocatable",
                )
            alloc: dict[str, int] = {}
            bad = []
            for res, q in (raw or {}).items():
                try:
                    alloc[res] = to_base_units(res, q)
                except QuantityError as err:
                    bad.append(f"status.allocatable.{res}: {err}")
            if bad:
                self._skip(obj, REASON_INVALID, "; ".join(bad))
                continue
            alloc = self._node_vendor_resources(obj, alloc)
            alloc = {k: v for k, v in alloc.items() if v > 0}
            taints = []
            for i, t in enumerate((node.spec.taints if node.spec else None) or []):
                if t.effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                    self._note(
                        obj, REASON_FIELD_IGNORED, f"spec.taints[{i}]: effect {t.effect!r} unknown"
                    )
                    continue
                taints.append(Taint(key=t.key, value=t.value or "", effect=t.effect).model_dump())
            ready = True
            conds = [c for c in (status.conditions if status else None) or [] if c.type == "Ready"]
            if conds:
                ready = conds[0].status == "True"
            else:
                self._note(
                    obj, REASON_ASSUMED, "no Ready condition in status.conditions: assumed Ready"
                )
            labels = dict(node.metadata.labels or {})
            model = next((labels[k] for k in GPU_MODEL_LABELS if labels.get(k)), None)
            out[obj.name] = {
                "name": obj.name,
                "labels": labels,
                "taints": taints,
                "unschedulable": bool(node.spec.unschedulable) if node.spec else False,
                "ready": ready,
                "allocatable": alloc,
                "gpu_model": model,
            }
        return out

    def _node_vendor_resources(self, obj: KubeObject, alloc: dict[str, int]) -> dict[str, int]:
        """Koordinator's GPU percentages mirror the GPU resource; RDMA percent -> count."""
        koord = {k: alloc.pop(k) for k in (*KOORD_GPU_PERCENT, *KOORD_GPU_OTHER) if k in alloc}
        if koord and self.gpu not in alloc:
            core = max((koord[k] for k in KOORD_GPU_PERCENT if k in koord), default=0)
            if core:
                alloc[self.gpu] = core // 100_000 * GPU_MILLI
                self._note(
                    obj,
                    REASON_ASSUMED,
                    f"{self.gpu} = Koordinator GPU percent / 100 = {core // 100_000}",
                )
        if self.nic == KOORD_RDMA and KOORD_RDMA in alloc:
            alloc[KOORD_RDMA] = alloc[KOORD_RDMA] // 100_000 * GPU_MILLI
        return alloc

    # ------------------------------------------------------------------ topology

    def _levels(self, nodes: dict[str, dict[str, Any]]) -> LevelSource:
        hypernodes = self.reg.of("topology.volcano.sh", "HyperNode")
        topologies = self.reg.of("kueue.x-k8s.io", "Topology")
        if self.levels_given is not None:
            src = label_levels(self.levels_given, f"--topology-labels {self.opts.topology_labels}")
            unused = [*hypernodes, *topologies]
        elif hypernodes:
            src = hypernode_levels(hypernodes, {n: d["labels"] for n, d in nodes.items()})
            unused = list(topologies)
        elif topologies:
            src = kueue_levels(topologies, self.reg.of("kueue.x-k8s.io", "ResourceFlavor"))
            unused = []
        else:
            return LevelSource()
        for obj in unused:
            self._note(obj, REASON_NOT_MAPPED, f"not used: the levels come from {src.source}")
        for obj, msg in src.notes:
            self._note(obj, REASON_NOT_MAPPED, msg)
        return src

    def _layouts(self, nodes: dict[str, dict[str, Any]]) -> DeviceLayouts:
        devices = self.reg.of("scheduling.koordinator.sh", "Device")
        out = node_device_layouts(
            {n: d["allocatable"] for n, d in nodes.items()},
            devices,
            self.template,
            gpu=self.gpu,
            nic=self.nic,
        )
        for obj, what, msg in out.notes:
            if obj is None:
                self.summary.note("--device-layout", "Node", "", REASON_NOT_MAPPED, msg)
            elif what == "skip":
                self._skip(obj, REASON_NODE_MISSING, msg)
            else:
                self._note(obj, REASON_NOT_MAPPED, msg)
        return out

    def _layout_ids(
        self, nodes: dict[str, dict[str, Any]], layouts: DeviceLayouts
    ) -> dict[str, set[str]]:
        """Each node's device ids, as the snapshot will lay them out (for running pods)."""
        out: dict[str, set[str]] = {}
        for name, n in nodes.items():
            if name in layouts.node_layout:
                lay = layouts.node_layout[name]
            elif name in layouts.node_template:
                lay = layouts.templates[layouts.node_template[name]]
            else:
                alloc = {**n["allocatable"], **layouts.allocatable_fix.get(name, {})}
                lay = DeviceLayout.implicit(
                    alloc.get(self.gpu, 0) // GPU_MILLI, alloc.get(self.nic, 0) // GPU_MILLI
                )
            out[name] = {*lay.gpu_ids, *lay.nic_ids}
        return out

    # ------------------------------------------------------------------ queues

    # ------------------------------------------------------------------ pods

    def _pod_info(
        self,
        *,
        name: str,
        namespace: str,
        source: str,
        kind: str,
        labels: dict[str, str],
        annotations: dict[str, str],
        spec: Any,
        where: str,
        phase: str = "Pending",
        creation: float | None = None,
        workload_labels: dict[str, str] | None = None,
        priority_class: str | None = None,
        note_as: str | None = None,
    ) -> PodInfo:
        who = note_as or f"{namespace}/{name}"
        requests = effective_requests(spec, where)
        requests, notes = map_vendor_requests(requests, annotations, gpu=self.gpu, nic=self.nic)
        pod = PodInfo(
            name=name,
            namespace=namespace,
            source=source,
            kind=kind,
            labels=labels,
            annotations=annotations,
        )
        for n in notes:
            self.summary.note(source, kind, who, REASON_ASSUMED, n)
        pod.requests = requests
        pod.phase = phase
        pod.node_name = spec.node_name or None
        pod.scheduler = spec.scheduler_name or "default-scheduler"
        pod.node_selector = dict(spec.node_selector or {})
        pod.affinity = required_terms(spec, where)
        pod.tolerations = tolerations_of(spec, where)
        pod.creation = creation
        pod.priority = self._priority_of(
            spec.priority,
            spec.priority_class_name or priority_class,
            f"{where}.priorityClassName",
            pod,
            who,
        )
        wl_labels = workload_labels or {}
        kueue_pc = labels.get(LABEL_KUEUE_PRIORITY) or wl_labels.get(LABEL_KUEUE_PRIORITY)
        if kueue_pc:
            if kueue_pc in self.wpc:
                pod.priority = self.wpc[kueue_pc]
            else:
                self.summary.note(
                    source,
                    kind,
                    who,
                    REASON_ASSUMED,
                    f"WorkloadPriorityClass {kueue_pc!r} is not in the dump",
                )
        if annotations.get(ANN_VOLCANO_GROUP):
            pod.group = GroupRef("volcano", annotations[ANN_VOLCANO_GROUP])
        elif labels.get(LABEL_PLUGINS_GROUP):
            pod.group = GroupRef("plugins", labels[LABEL_PLUGINS_GROUP])
        elif labels.get(LABEL_KOORD_GROUP):
            pod.group = GroupRef("koordinator", labels[LABEL_KOORD_GROUP])
        elif spec.scheduling_group is not None and spec.scheduling_group.pod_group_name:
            pod.group = GroupRef("upstream", spec.scheduling_group.pod_group_name)
        elif labels.get(LABEL_KUEUE_POD_GROUP):
            pod.group = GroupRef("kueue-pods", labels[LABEL_KUEUE_POD_GROUP])
        elif annotations.get(ANN_KOORD_GANG):
            pod.group = GroupRef("koordinator-gang", annotations[ANN_KOORD_GANG])
        pod.queue_hint = annotations.get(ANN_VOLCANO_QUEUE)
        pod.kueue_queue = labels.get(wl.LABEL_KUEUE_QUEUE) or wl_labels.get(wl.LABEL_KUEUE_QUEUE)
        pod.role_hint = next((labels[k] for k in ROLE_LABELS if labels.get(k)), None)
        for key, kind_ in ((ANN_KUEUE_REQUIRED, "required"), (ANN_KUEUE_PREFERRED, "preferred")):
            if annotations.get(key):
                pod.topology = TopologyRequest(
                    kind_, label=annotations[key], source=f"annotation {key}"
                )
                break
        for key in ANN_KUEUE_UNMAPPED:
            if key in annotations:
                self.summary.note(
                    source,
                    kind,
                    who,
                    REASON_NOT_MAPPED,
                    f"annotation {key}: topology slices are not modelled",
                )
        joint, note = joint_policy(annotations)
        pod.joint = joint
        if note:
            self.summary.note(source, kind, who, REASON_NOT_MAPPED, note)
        return pod

    def _pods(self, layouts: DeviceLayouts) -> list[PodInfo]:
        out: list[PodInfo] = []
        for obj in self.reg.of("", "Pod"):
            pod_m = obj.model
            meta = pod_m.metadata
            labels, annotations = dict(meta.labels or {}), dict(meta.annotations or {})
            phase = (pod_m.status.phase if pod_m.status else None) or "Pending"
            if phase in ("Succeeded", "Failed"):
                self._skip(obj, REASON_POD_FINISHED, f"status.phase {phase}")
                continue
            if ANN_HIVED in annotations:
                self._skip(
                    obj,
                    REASON_NOT_MAPPED,
                    f"annotation {ANN_HIVED}: HiveD asks its GPUs there, not in resources",
                )
                continue
            if pod_m.spec is None:
                self._skip(obj, REASON_INVALID, "spec: required field is missing")
                continue
            try:
                pod = self._pod_info(
                    name=obj.name,
                    namespace=obj.namespace,
                    source=obj.source,
                    kind="Pod",
                    labels=labels,
                    annotations=annotations,
                    spec=pod_m.spec,
                    where="spec",
                    phase=phase,
                    creation=epoch(meta.creation_timestamp),
                )
            except PodProblem as err:
                self._skip(obj, REASON_NOT_MAPPED, str(err))
                continue
            refs = [ref for ref in meta.owner_references or [] if ref.controller]
            if refs:
                pod.owner = (refs[0].kind, refs[0].name)
            if pod.node_name:
                try:
                    pod.devices = tuple(
                        allocated_devices(annotations, layouts.minors.get(pod.node_name, {}))
                    )
                except (json.JSONDecodeError, AttributeError, TypeError, ValueError) as err:
                    self._note(
                        obj,
                        REASON_FIELD_IGNORED,
                        f"annotation scheduling.koordinator.sh/device-allocated: {err}",
                    )
            elif self.opts.scheduler_names and pod.scheduler not in self.opts.scheduler_names:
                self._skip(obj, REASON_OTHER_SCHEDULER, f"spec.schedulerName {pod.scheduler!r}")
                continue
            out.append(pod)
        return out

    # ------------------------------------------------------------------ workloads

    def _workloads(self, pods: list[PodInfo]) -> list[PodInfo]:
        workloads = {
            (o.group, o.kind, o.namespace, o.name): o
            for g, k in wl.WORKLOAD_KINDS
            for o in self.reg.of(g, k)
        }
        has_pods: set[tuple[str, str, str, str]] = set()
        for p_obj in self.reg.of("", "Pod"):
            chain = list(wl.owner_refs(p_obj))
            seen: set[tuple[str, str, str, str]] = set()
            while chain:
                key = chain.pop()
                if key in seen:
                    continue
                seen.add(key)
                has_pods.add(key)
                if key in workloads:
                    chain.extend(wl.owner_refs(workloads[key]))
            labels = p_obj.model.metadata.labels or {}
            for (group, kind), label in JOB_NAME_LABELS.items():
                if labels.get(label):
                    has_pods.add((group, kind, p_obj.namespace, labels[label]))
            if labels.get("job-name"):
                has_pods.add(("batch", "Job", p_obj.namespace, labels["job-name"]))
            if labels.get("training.kubeflow.org/job-name"):
                for g, k in wl.WORKLOAD_KINDS:
                    if g == "kubeflow.org":
                        has_pods.add(
                            (g, k, p_obj.namespace, labels["training.kubeflow.org/job-name"])
                        )
        self.expanded: dict[tuple[str, str, str], wl.GroupSpec] = {}
        self.expanded_objects: set[tuple[str, str, str, str]] = set()
        out: list[PodInfo] = []
        for key, obj in workloads.items():
            owners = [o for o in wl.owner_refs(obj) if o in workloads]
            if owners:
                o = owners[0]
                self._note(obj, REASON_READ_THROUGH_PODS, f"read through its owner {o[1]} {o[3]}")
                continue
            if key in has_pods:
                self._note(obj, REASON_READ_THROUGH_PODS, "its pods are in the dump")
                continue
            try:
                exp = wl.expand(obj)
            except ObjectInvalid as err:
                self._skip(obj, REASON_INVALID, "; ".join(err.problems))
                continue
            for n in exp.notes:
                self._note(obj, REASON_NOT_MAPPED, n)
            made: list[PodInfo] = []
            try:
                for tmpl in exp.templates:
                    for i in range(tmpl.count):
                        made.append(wl.predicted_pod(exp, tmpl, i, self._template_pod(exp)))
            except PodProblem as err:
                self._skip(obj, REASON_NOT_MAPPED, str(err))
                continue
            if self.opts.scheduler_names:
                keep = [p for p in made if p.scheduler in self.opts.scheduler_names]
                if len(keep) < len(made):
                    self._skip(
                        obj, REASON_OTHER_SCHEDULER, f"spec.schedulerName {made[0].scheduler!r}"
                    )
                    continue
            self.expanded_objects.add(key)
            if exp.group is not None:
                self.expanded[exp.group.key] = exp.group
            out.extend(made)
        return out

    def _template_pod(self, exp: wl.Expansion) -> Any:
        def make(
            *,
            name: str,
            namespace: str,
            source: str,
            kind: str,
            template: Any,
            where: str,
            workload_labels: dict[str, str],
        ) -> PodInfo:
            meta = template.metadata
            labels = dict(meta.labels or {}) if meta else {}
            annotations = dict(meta.annotations or {}) if meta else {}
            spec = template.spec
            default_scheduler = None
            pclass = None
            if exp.obj.group == "batch.volcano.sh":
                default_scheduler = exp.obj.model.spec.scheduler_name or "volcano"
            if exp.group is not None:
                pclass = exp.group.priority_class
            pod = self._pod_info(
                name=name,
                namespace=namespace,
                source=source,
                kind=kind,
                labels=labels,
                annotations=annotations,
                spec=spec,
                where=where,
                creation=epoch(exp.obj.model.metadata.creation_timestamp),
                workload_labels=workload_labels,
                priority_class=pclass,
                note_as=exp.obj.key,
            )
            if not spec.scheduler_name and default_scheduler:
                pod.scheduler = default_scheduler
            return pod

        return make

    # ------------------------------------------------------------------ gang objects

    def _group_specs(self) -> dict[tuple[str, str, str], wl.GroupSpec]:
        specs: dict[tuple[str, str, str], wl.GroupSpec] = {}
        self.group_objects: dict[tuple[str, str, str], KubeObject] = {}
        for group, kind in (
            ("scheduling.volcano.sh", "PodGroup"),
            ("scheduling.x-k8s.io", "PodGroup"),
            ("scheduling.sigs.k8s.io", "PodGroup"),
            ("scheduling.k8s.io", "PodGroup"),
        ):
            for obj in self.reg.of(group, kind):
                spec = wl.group_spec_of(obj)
                specs[spec.key] = spec
                self.group_objects[spec.key] = obj
                if group == "scheduling.volcano.sh":
                    if obj.model.spec.min_resources:
                        self._note(
                            obj,
                            REASON_NOT_MAPPED,
                            "spec.minResources: not mapped (the gang's pods say what they need)",
                        )
                    if obj.model.spec.sub_group_policy:
                        self._note(
                            obj,
                            REASON_NOT_MAPPED,
                            "spec.subGroupPolicy: not mapped (no sub-gangs in the model)",
                        )
                    nt = obj.model.spec.network_topology
                    if nt is not None and nt.highest_tier_name:
                        self._note(
                            obj,
                            REASON_NOT_MAPPED,
                            "spec.networkTopology.highestTierName: not mapped "
                            "(tiers by number only)",
                        )
        specs.update(self.expanded)
        return specs

    # ------------------------------------------------------------------ gangs

    def _assign(
        self, pods: list[PodInfo], specs: dict[tuple[str, str, str], wl.GroupSpec]
    ) -> dict[tuple[str, str, str], _Gang]:
        gangs: dict[tuple[str, str, str], _Gang] = {}
        solo = 0
        for pod in pods:
            running = pod.node_name is not None
            key: tuple[str, str, str]
            if pod.group is None:
                key = (pod.namespace, "pod", pod.name)
                gangs[key] = _Gang(None)
                solo += 1
            else:
                key = (pod.namespace, pod.group.system, pod.group.name)
                if key not in specs:
                    spec = self._implicit_spec(pod)
                    if spec is None:
                        if running:
                            gangs.setdefault(
                                (pod.namespace, "running-only", pod.name), _Gang(None)
                            ).running.append(pod)
                        else:
                            self.summary.skip(
                                pod.source,
                                pod.kind,
                                f"{pod.namespace}/{pod.name}",
                                REASON_GROUP_MISSING,
                                f"{_group_what(pod.group)} {pod.group.name!r}",
                            )
                        continue
                    specs[key] = spec
                gangs.setdefault(key, _Gang(specs[key]))
            (gangs[key].running if running else gangs[key].pending).append(pod)
        used = set(gangs)
        for key in specs:
            if key not in used and key in self.group_objects:
                obj = self.group_objects[key]
                owners = [o for o in wl.owner_refs(obj) if o in self.expanded_objects]
                if owners:
                    self._note(
                        obj,
                        REASON_READ_THROUGH_PODS,
                        f"read through its owner {owners[0][1]} {owners[0][3]}",
                    )
                else:
                    self._skip(obj, REASON_NO_PODS)
        return gangs

    def _implicit_spec(self, pod: PodInfo) -> wl.GroupSpec | None:
        """Kueue pod groups and Koordinator gang annotations need no object."""
        assert pod.group is not None
        if pod.group.system == "kueue-pods":
            raw = pod.annotations.get(ANN_KUEUE_TOTAL, "")
            expected = int(raw) if raw.isdigit() and int(raw) > 0 else None
            if expected is None:
                self.summary.note(
                    pod.source,
                    pod.kind,
                    f"{pod.namespace}/{pod.name}",
                    REASON_ASSUMED,
                    f"annotation {ANN_KUEUE_TOTAL} missing or not a count: the pods in the dump",
                )
            return wl.GroupSpec(
                "kueue-pods",
                pod.namespace,
                pod.group.name,
                pod.source,
                "Pod",
                min_member=expected,
                expected=expected,
            )
        if pod.group.system == "koordinator-gang":
            raw = pod.annotations.get(ANN_KOORD_GANG_MIN, "")
            return wl.GroupSpec(
                "koordinator-gang",
                pod.namespace,
                pod.group.name,
                pod.source,
                "Pod",
                min_member=int(raw) if raw.isdigit() and int(raw) > 0 else None,
            )
        return None

    def _resolve(
        self, req: TopologyRequest | None, levels: LevelSource, where: tuple[str, str, str]
    ) -> TopologyConstraint | None:
        if req is None:
            return None
        level = levels.level_for_label(req.label) if req.label else levels.tiers.get(req.tier or 0)
        if level is None:
            what = f"node label {req.label!r}" if req.label else f"HyperNode tier {req.tier}"
            self.summary.note(
                where[0],
                where[1],
                where[2],
                REASON_NOT_MAPPED,
                f"{req.source}: no topology level for {what} (levels from {levels.source}): "
                "constraint dropped",
            )
            return None
        return TopologyConstraint(**{req.kind: level})

    def _gangs(
        self, gangs: dict[tuple[str, str, str], _Gang], levels: LevelSource, add_pods: bool
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        gang_out: list[dict[str, Any]] = []
        running_out: list[dict[str, Any]] = []
        names: Counter[tuple[str, str]] = Counter()
        for _key, g in sorted(gangs.items(), key=lambda kv: kv[0]):
            spec = g.spec
            gname = spec.name if spec else (g.pending or g.running)[0].name
            queue_running = (
                self.qb.queue_for(g.running + g.pending, spec, None) if g.running else None
            )
            for p in g.running:
                if p.node_name not in self.layout_ids:
                    self.summary.skip(
                        p.source,
                        p.kind,
                        f"{p.namespace}/{p.name}",
                        REASON_NODE_MISSING,
                        f"spec.nodeName {p.node_name!r}",
                    )
                    continue
                running_out.append(
                    self._running(p, gname if spec else None, queue_running, add_pods)
                )
            if not g.pending:
                continue
            where = (
                (spec.source, spec.kind, f"{spec.namespace}/{spec.name}")
                if spec
                else (
                    g.pending[0].source,
                    g.pending[0].kind,
                    f"{g.pending[0].namespace}/{g.pending[0].name}",
                )
            )
            total = len(g.pending) + len(g.running)
            want = spec.min_member if spec and spec.min_member is not None else total
            if spec is not None and spec.expected and spec.expected > total:
                want = spec.expected
            if want > total:
                self.summary.skip(
                    *where,
                    REASON_GANG_INCOMPLETE,
                    f"minimum {want}, {total} pods in the dump ({len(g.running)} running)",
                )
                continue
            remaining = want - len(g.running)
            gang_min = None if remaining >= len(g.pending) else max(1, remaining)
            roles = self._roles(g, spec, gang_min, want, levels, where)
            ns = g.pending[0].namespace
            names[(ns, gname)] += 1
            if names[(ns, gname)] > 1:
                new = f"{gname}-{names[(ns, gname)]}"
                self.summary.note(
                    *where, REASON_ASSUMED, f"gang name {gname!r} is taken in {ns}: named {new!r}"
                )
                gname = new
            queue = self.qb.queue_for(g.pending + g.running, spec, self.opts.default_queue)
            priority = max(p.priority for p in g.pending)
            if spec is not None and (spec.priority is not None or spec.priority_class):
                priority = self._priority_of(
                    spec.priority, spec.priority_class, "priorityClassName"
                )
            created = (spec.creation if spec else None) or min(
                (p.creation for p in g.pending if p.creation is not None), default=0.0
            )
            topo = self._resolve(spec.topology if spec else None, levels, where)
            if topo is None and len(roles) == 1 and roles[0].get("topology") is not None:
                topo = TopologyConstraint.model_validate(roles[0].pop("topology"))
            joints = {p.joint for p in g.pending if p.joint}
            if len(joints) > 1:
                self.summary.note(
                    *where,
                    REASON_NOT_MAPPED,
                    f"pods ask different joint policies {sorted(joints)}: "
                    f"{sorted(joints)[0]!r} used",
                )
            gang: dict[str, Any] = {
                "name": gname,
                "namespace": ns,
                "queue": queue,
                "priority": priority,
                "creation_time": created,
                "roles": roles,
                "min_member": gang_min,
                "joint": sorted(joints)[0] if joints else "none",
            }
            if topo is not None:
                gang["topology"] = topo.model_dump(exclude_none=True)
            if spec is not None and spec.predicted:
                self.predicted.append(f"{ns}/{gname}")
            gang_out.append(gang)
        return gang_out, running_out

    def _roles(
        self,
        g: _Gang,
        spec: wl.GroupSpec | None,
        gang_min: int | None,
        want: int,
        levels: LevelSource,
        where: tuple[str, str, str],
    ) -> list[dict[str, Any]]:
        groups: dict[tuple[Any, ...], list[PodInfo]] = {}
        for p in sorted(g.pending, key=lambda p: (p.role_hint or "", _natural(p.name))):
            shape = (
                p.role_hint,
                tuple(sorted(p.requests.items())),
                tuple(sorted(p.node_selector.items())),
                p.affinity,
                p.tolerations,
                p.topology,
            )
            groups.setdefault(shape, []).append(p)
        roles: list[dict[str, Any]] = []
        seen: Counter[str] = Counter()
        mtm = dict(spec.min_task_member) if spec else {}
        use_task_mins = gang_min is not None and bool(mtm) and want >= sum(mtm.values())
        for shape, pods in groups.items():
            base = shape[0] or ("main" if len(g.pending) == 1 and spec is None else "pods")
            seen[base] += 1
            name = base if seen[base] == 1 else f"{base}-{seen[base]}"
            p0 = pods[0]
            role: dict[str, Any] = {
                "name": name,
                "count": len(pods),
                "requests": p0.requests,
                "node_selector": p0.node_selector,
                "node_affinity": [t.model_dump() for t in p0.affinity],
                "tolerations": [t.model_dump() for t in p0.tolerations],
                "pod_names": [p.name for p in pods],
            }
            self.qb.apply_flavors(role, p0, spec)
            topo = self._resolve(p0.topology, levels, where)
            if topo is not None:
                role["topology"] = topo.model_dump(exclude_none=True)
            if use_task_mins and shape[0] in mtm:
                running = sum(1 for r in g.running if r.role_hint == shape[0])
                need = max(0, mtm[shape[0]] - running)
                role["min_member"] = min(len(pods), need)
                mtm[shape[0]] = max(0, need - len(pods)) + running
            roles.append(role)
        return roles

    def _running(
        self, p: PodInfo, gang: str | None, queue: str | None, add_pods: bool
    ) -> dict[str, Any]:
        req = dict(p.requests)
        if add_pods:
            req["pods"] = GPU_MILLI
        ids = self.layout_ids.get(p.node_name or "", set())
        unknown = [d for d in p.devices if d not in ids]
        if unknown:
            self.summary.note(
                p.source,
                p.kind,
                f"{p.namespace}/{p.name}",
                REASON_FIELD_IGNORED,
                f"devices {', '.join(unknown)} are not in node {p.node_name}'s device layout: "
                "the node's lowest-listed free GPUs are counted instead",
            )
        return {
            "name": p.name,
            "namespace": p.namespace,
            "gang": gang,
            "queue": queue,
            "priority": p.priority,
            "node": p.node_name,
            "requests": _q(req),
            "devices": [d for d in p.devices if d in ids],
        }

    def _unknown_resources(self, gangs: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        if not nodes:
            return
        advertised = {r for n in nodes for r in n["allocatable"]}
        for g in gangs:
            for r in g["roles"]:
                missing = sorted(set(r["requests"]) - advertised - {"pods"})
                if missing:
                    self.summary.note(
                        "",
                        "Gang",
                        f"{g['namespace']}/{g['name']}",
                        REASON_NOT_MAPPED,
                        f"role {r['name']!r} asks {', '.join(missing)}, which no node "
                        "advertises: it never fits",
                    )

    # ------------------------------------------------------------------ snapshot

    def _snapshot(self, data: dict[str, Any]) -> Snapshot:
        add_pods = bool(data["nodes"]) and all("pods" in n["allocatable"] for n in data["nodes"])
        for g in data["gangs"]:
            for r in g["roles"]:
                if add_pods:
                    r["requests"] = {**r["requests"], "pods": GPU_MILLI}
                r["requests"] = _q(r["requests"])
        for n in data["nodes"]:
            n["allocatable"] = _q(n["allocatable"])
        for _ in range(8):
            try:
                return Snapshot.model_validate(data)
            except ValidationError as err:
                problems: list[tuple[str, str]] = []
                for e in err.errors():
                    ctx_err = (e.get("ctx") or {}).get("error")
                    if isinstance(ctx_err, SnapshotError):
                        problems += [(p.path, p.message) for p in ctx_err.problems]
                    else:
                        problems.append((format_loc(tuple(e["loc"])), e["msg"]))
                if not self._drop(data, problems):
                    raise KubeInputError(
                        "the dump reads into an inconsistent snapshot: "
                        + "; ".join(f"{path}: {msg}" for path, msg in problems)
                    ) from None
        raise RuntimeError("snapshot problems did not converge")  # pragma: no cover

    def _drop(self, data: dict[str, Any], problems: list[tuple[str, str]]) -> bool:
        """Remove the gangs, running pods and nodes a snapshot problem names; list them."""
        drop: dict[str, set[int]] = defaultdict(set)
        for path, msg in problems:
            head = path.split(".", 1)[0]
            section, _, idx = head.partition("[")
            if section not in ("gangs", "running", "nodes") or not idx.rstrip("]").isdigit():
                continue
            i = int(idx.rstrip("]"))
            drop[section].add(i)
            item = data[section][i]
            kind = {"gangs": "Gang", "running": "Pod", "nodes": "Node"}[section]
            who = f"{item.get('namespace', '')}/{item['name']}".lstrip("/")
            self.summary.skip(
                "",
                kind,
                who,
                REASON_INVALID,
                f"{path.split('.', 1)[1] if '.' in path else path}: {msg}",
            )
        if not drop:
            return False
        dropped_nodes = {data["nodes"][i]["name"] for i in drop["nodes"]}
        for section, idxs in drop.items():
            data[section] = [x for i, x in enumerate(data[section]) if i not in idxs]
        data["running"] = [r for r in data["running"] if r["node"] not in dropped_nodes]
        return True


def _natural(name: str) -> tuple[Any, ...]:
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def _group_what(ref: GroupRef) -> str:
    return {
        "volcano": f"annotation {ANN_VOLCANO_GROUP}: Volcano PodGroup",
        "plugins": f"label {LABEL_PLUGINS_GROUP}: PodGroup.scheduling.x-k8s.io",
        "koordinator": f"label {LABEL_KOORD_GROUP}: PodGroup.scheduling.sigs.k8s.io",
        "upstream": "spec.schedulingGroup.podGroupName: PodGroup.scheduling.k8s.io",
    }.get(ref.system, ref.system)
