"""Pods read into :class:`~gangplan.adapters.kube.pods.PodInfo`: the dump's ``Pod`` objects
and the pods a workload's templates predict, with what each says of its gang, queue, role,
priority and topology.

A pod's gang is, in this order: its Volcano group (``scheduling.k8s.io/group-name``
annotation), scheduler-plugins PodGroup (``scheduling.x-k8s.io/pod-group`` label),
Koordinator PodGroup (``pod-group.scheduling.sigs.k8s.io`` label), upstream PodGroup
(``spec.schedulingGroup.podGroupName``), Kueue pod group (``kueue.x-k8s.io/pod-group-name``
label), Koordinator gang annotation (``gang.scheduling.koordinator.sh/name``); otherwise the
pod is a gang of one. Its role is its Volcano task, Kubeflow replica type or JobSet
replicated job label; its topology request Kueue's ``podset-required-topology`` or
``podset-preferred-topology`` annotation. Requests and constraints:
:mod:`gangplan.adapters.kube.pods`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gangplan.adapters.kube import workloads as wl
from gangplan.adapters.kube.objects import KubeObject, Registry
from gangplan.adapters.kube.options import KubeOptions
from gangplan.adapters.kube.owners import owner_of, owner_refs
from gangplan.adapters.kube.pods import (
    GroupRef,
    PodInfo,
    PodProblem,
    TopologyRequest,
    allocated_devices,
    claims_of,
    effective_requests,
    epoch,
    joint_policy,
    map_vendor_requests,
    required_terms,
    tolerations_of,
)
from gangplan.adapters.kube.priorities import Priorities
from gangplan.adapters.kube.summary import (
    REASON_ASSUMED,
    REASON_DELETING,
    REASON_FIELD_IGNORED,
    REASON_GATED,
    REASON_INVALID,
    REASON_NOT_MAPPED,
    REASON_OTHER_SCHEDULER,
    REASON_POD_FINISHED,
    ReadSummary,
)
from gangplan.adapters.kube.topology import DeviceLayouts

__all__ = [
    "ANN_HIVED",
    "ANN_KOORD_GANG",
    "ANN_KOORD_GANG_MIN",
    "ANN_KUEUE_TOTAL",
    "ANN_VOLCANO_GROUP",
    "ANN_VOLCANO_QUEUE",
    "LABEL_KOORD_GROUP",
    "LABEL_KUEUE_POD_GROUP",
    "LABEL_PLUGINS_GROUP",
    "OWN_GATE",
    "PodReader",
    "group_what",
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
OWN_GATE = "gangplan.io/placement"
"""gangplan's own scheduling gate: a pod that carries only this one is planned (gangplan
removes it when it places the pod)"""
ROLE_LABELS = (
    "volcano.sh/task-spec",
    "training.kubeflow.org/replica-type",
    "jobset.sigs.k8s.io/replicatedjob-name",
)


def group_what(ref: GroupRef) -> str:
    """Where a pod names its gang object, and the object's kind (for the summary)."""
    return {
        "volcano": f"annotation {ANN_VOLCANO_GROUP}: Volcano PodGroup",
        "plugins": f"label {LABEL_PLUGINS_GROUP}: PodGroup.scheduling.x-k8s.io",
        "koordinator": f"label {LABEL_KOORD_GROUP}: PodGroup.scheduling.sigs.k8s.io",
        "upstream": "spec.schedulingGroup.podGroupName: PodGroup.scheduling.k8s.io",
    }.get(ref.system, ref.system)


def _group_of(labels: dict[str, str], annotations: dict[str, str], spec: Any) -> GroupRef | None:
    if annotations.get(ANN_VOLCANO_GROUP):
        return GroupRef("volcano", annotations[ANN_VOLCANO_GROUP])
    if labels.get(LABEL_PLUGINS_GROUP):
        return GroupRef("plugins", labels[LABEL_PLUGINS_GROUP])
    if labels.get(LABEL_KOORD_GROUP):
        return GroupRef("koordinator", labels[LABEL_KOORD_GROUP])
    if spec.scheduling_group is not None and spec.scheduling_group.pod_group_name:
        return GroupRef("upstream", spec.scheduling_group.pod_group_name)
    if labels.get(LABEL_KUEUE_POD_GROUP):
        return GroupRef("kueue-pods", labels[LABEL_KUEUE_POD_GROUP])
    if annotations.get(ANN_KOORD_GANG):
        return GroupRef("koordinator-gang", annotations[ANN_KOORD_GANG])
    return None


def _topology_request(annotations: dict[str, str]) -> TopologyRequest | None:
    for key, kind in ((ANN_KUEUE_REQUIRED, "required"), (ANN_KUEUE_PREFERRED, "preferred")):
        if annotations.get(key):
            return TopologyRequest(kind, label=annotations[key], source=f"annotation {key}")
    return None


class PodReader:
    """Reads pods and pod templates of one dump; notes what it assumes or ignores."""

    def __init__(self, summary: ReadSummary, options: KubeOptions, priorities: Priorities):
        self._summary = summary
        self._options = options
        self._priorities = priorities

    def info(
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
        """One pod from its metadata and ``V1PodSpec`` (``where``: the spec's field path).

        Notes are filed under ``note_as`` (default ``namespace/name``): a workload's predicted
        pods share their workload's notes.

        Raises:
            PodProblem: requests or constraints that cannot be mapped, naming the field.
        """
        who = note_as or f"{namespace}/{name}"

        def note(reason: str, detail: str) -> None:
            self._summary.note(source, kind, who, reason, detail)

        opts = self._options
        requests = effective_requests(spec, where)
        requests, notes = map_vendor_requests(
            requests, annotations, gpu=opts.gpu_resource, nic=opts.nic_resource
        )
        for n in notes:
            note(REASON_ASSUMED, n)
        wl_labels = workload_labels or {}
        pod = PodInfo(
            name=name,
            namespace=namespace,
            source=source,
            kind=kind,
            labels=labels,
            annotations=annotations,
            requests=requests,
            phase=phase,
            node_name=spec.node_name or None,
            scheduler=spec.scheduler_name or "default-scheduler",
            node_selector=dict(spec.node_selector or {}),
            affinity=required_terms(spec, where),
            tolerations=tolerations_of(spec, where),
            creation=creation,
            group=_group_of(labels, annotations, spec),
            queue_hint=annotations.get(ANN_VOLCANO_QUEUE),
            kueue_queue=labels.get(wl.LABEL_KUEUE_QUEUE) or wl_labels.get(wl.LABEL_KUEUE_QUEUE),
            role_hint=next((labels[k] for k in ROLE_LABELS if labels.get(k)), None),
            topology=_topology_request(annotations),
            claims=claims_of(spec),
        )
        pod.priority = self._priorities.of(
            spec.priority,
            spec.priority_class_name or priority_class,
            f"{where}.priorityClassName",
            source=source,
            kind=kind,
            who=who,
        )
        pod.preemption_policy = self._priorities.policy(
            spec.preemption_policy, spec.priority_class_name or priority_class
        )
        deadline = getattr(spec, "active_deadline_seconds", None)
        if isinstance(deadline, int) and deadline > 0:
            pod.deadline = float(deadline)
        kueue_class = labels.get(LABEL_KUEUE_PRIORITY) or wl_labels.get(LABEL_KUEUE_PRIORITY)
        if kueue_class:
            value = self._priorities.workload_class(kueue_class)
            if value is not None:
                pod.priority = value
            else:
                note(REASON_ASSUMED, f"WorkloadPriorityClass {kueue_class!r} is not in the dump")
        for key in ANN_KUEUE_UNMAPPED:
            if key in annotations:
                note(REASON_NOT_MAPPED, f"annotation {key}: topology slices are not modelled")
        pod.joint, joint_note = joint_policy(annotations)
        if joint_note:
            note(REASON_NOT_MAPPED, joint_note)
        return pod

    def read_pods(self, reg: Registry, layouts: DeviceLayouts) -> list[PodInfo]:
        """Every ``Pod`` of the dump that holds or asks resources; the others are listed."""
        out: list[PodInfo] = []
        for obj in reg.of("", "Pod"):
            pod = self._pod(obj, layouts)
            if pod is not None:
                out.append(pod)
        return out

    def _pod(self, obj: KubeObject, layouts: DeviceLayouts) -> PodInfo | None:
        summary = self._summary
        meta = obj.model.metadata
        labels, annotations = dict(meta.labels or {}), dict(meta.annotations or {})
        phase = (obj.model.status.phase if obj.model.status else None) or "Pending"
        if phase in ("Succeeded", "Failed"):
            summary.skip_object(obj, REASON_POD_FINISHED, f"status.phase {phase}")
            return None
        if ANN_HIVED in annotations:
            summary.skip_object(
                obj,
                REASON_NOT_MAPPED,
                f"annotation {ANN_HIVED}: HiveD asks its GPUs there, not in resources",
            )
            return None
        if obj.model.spec is None:
            summary.skip_object(obj, REASON_INVALID, "spec: required field is missing")
            return None
        if not obj.model.spec.node_name:
            if meta.deletion_timestamp is not None:
                summary.skip_object(
                    obj, REASON_DELETING, f"metadata.deletionTimestamp {meta.deletion_timestamp}"
                )
                return None
            gates = [g.name for g in obj.model.spec.scheduling_gates or [] if g.name != OWN_GATE]
            if gates:
                summary.skip_object(obj, REASON_GATED, f"spec.schedulingGates {gates}")
                return None
        try:
            pod = self.info(
                name=obj.name,
                namespace=obj.namespace,
                source=obj.source,
                kind="Pod",
                labels=labels,
                annotations=annotations,
                spec=obj.model.spec,
                where="spec",
                phase=phase,
                creation=epoch(meta.creation_timestamp),
            )
        except PodProblem as err:
            summary.skip_object(obj, REASON_NOT_MAPPED, str(err))
            return None
        pod.owner = owner_of(owner_refs(meta.owner_references), obj.name, labels, annotations)
        if obj.model.status is not None and pod.claims:
            pod.claims = claims_of(obj.model.spec, obj.model.status)
        if pod.node_name:
            status = obj.model.status
            pod.started = epoch(status.start_time) if status is not None else None
            try:
                pod.devices = tuple(
                    allocated_devices(annotations, layouts.minors.get(pod.node_name, {}))
                )
            except (json.JSONDecodeError, AttributeError, TypeError, ValueError) as err:
                summary.note_object(
                    obj,
                    REASON_FIELD_IGNORED,
                    f"annotation scheduling.koordinator.sh/device-allocated: {err}",
                )
        elif self._options.scheduler_names and pod.scheduler not in self._options.scheduler_names:
            summary.skip_object(
                obj, REASON_OTHER_SCHEDULER, f"spec.schedulerName {pod.scheduler!r}"
            )
            return None
        return pod

    def template_pod(self, exp: wl.Expansion) -> Callable[..., PodInfo]:
        """The converter :func:`~gangplan.adapters.kube.workloads.predicted_pod` calls for
        each pod of ``exp``'s templates (Volcano jobs default to the ``volcano`` scheduler)."""
        obj: KubeObject = exp.obj
        default_scheduler = (
            (obj.model.spec.scheduler_name or "volcano")
            if obj.group == "batch.volcano.sh"
            else None
        )
        priority_class = exp.group.priority_class if exp.group is not None else None

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
            spec = template.spec
            pod = self.info(
                name=name,
                namespace=namespace,
                source=source,
                kind=kind,
                labels=dict(meta.labels or {}) if meta else {},
                annotations=dict(meta.annotations or {}) if meta else {},
                spec=spec,
                where=where,
                creation=epoch(obj.model.metadata.creation_timestamp),
                workload_labels=workload_labels,
                priority_class=priority_class,
                note_as=obj.key,
            )
            if not spec.scheduler_name and default_scheduler:
                pod.scheduler = default_scheduler
            return pod

        return make
