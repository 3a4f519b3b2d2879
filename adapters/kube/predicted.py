"""Workloads whose pods are not in the dump, read as the pods their controllers would create.

A workload of :data:`~gangplan.adapters.kube.workloads.WORKLOAD_KINDS` is expanded
(:func:`~gangplan.adapters.kube.workloads.expand`) only when no workload of the dump owns
it and no pod of the dump belongs to it — by owner reference (directly or through a child
workload) or by its controller's job-name label (``volcano.sh/job-name``,
``batch.kubernetes.io/job-name`` or ``job-name``, ``jobset.sigs.k8s.io/jobset-name``,
``training.kubeflow.org/job-name``). Otherwise it is read through its pods, and noted so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gangplan.adapters.kube import workloads as wl
from gangplan.adapters.kube.objects import KubeObject, ObjectInvalid, Registry
from gangplan.adapters.kube.pod_reader import PodReader
from gangplan.adapters.kube.pods import PodInfo, PodProblem
from gangplan.adapters.kube.summary import (
    REASON_INVALID,
    REASON_NOT_MAPPED,
    REASON_OTHER_SCHEDULER,
    REASON_READ_THROUGH_PODS,
    ReadSummary,
)
from gangplan.models.limits import MAX_PODS

__all__ = ["JOB_NAME_LABELS", "Predicted", "predict_pods"]

JOB_NAME_LABELS = {
    ("batch.volcano.sh", "Job"): "volcano.sh/job-name",
    ("batch", "Job"): "batch.kubernetes.io/job-name",
    ("jobset.x-k8s.io", "JobSet"): "jobset.sigs.k8s.io/jobset-name",
}

ObjectKey = tuple[str, str, str, str]
"""``(group, kind, namespace, name)`` of a workload"""


@dataclass
class Predicted:
    """The pods predicted from workloads, their gangs (by gang key), and the workloads
    expanded (by :data:`ObjectKey`)."""

    pods: list[PodInfo] = field(default_factory=list)
    groups: dict[tuple[str, str, str], wl.GroupSpec] = field(default_factory=dict)
    expanded: set[ObjectKey] = field(default_factory=set)


def predict_pods(
    reg: Registry,
    summary: ReadSummary,
    reader: PodReader,
    scheduler_names: tuple[str, ...],
    *,
    room: int = MAX_PODS,
) -> Predicted:
    """The pods of every workload that has none in the dump (see the module docstring); a
    workload that cannot be read, or of a scheduler not in ``scheduler_names`` (when given),
    is listed instead, and so is one whose pods would take the predicted pods past ``room``
    (default :data:`~gangplan.models.limits.MAX_PODS`; the caller passes what the dump's own
    pods leave of it), checked before any of its pods is made."""
    workloads = {
        (o.group, o.kind, o.namespace, o.name): o
        for g, k in wl.WORKLOAD_KINDS
        for o in reg.of(g, k)
    }
    with_pods = _workloads_with_pods(reg, workloads)
    out = Predicted()
    for key, obj in workloads.items():
        owners = [o for o in wl.owner_refs(obj) if o in workloads]
        if owners:
            o = owners[0]
            summary.note_object(
                obj, REASON_READ_THROUGH_PODS, f"read through its owner {o[1]} {o[3]}"
            )
            continue
        if key in with_pods:
            summary.note_object(obj, REASON_READ_THROUGH_PODS, "its pods are in the dump")
            continue
        made = _expand(obj, summary, reader, scheduler_names, room - len(out.pods))
        if made is None:
            continue
        exp, pods = made
        out.expanded.add(key)
        if exp.group is not None:
            out.groups[exp.group.key] = exp.group
        out.pods.extend(pods)
    return out


def _workloads_with_pods(reg: Registry, workloads: dict[ObjectKey, KubeObject]) -> set[ObjectKey]:
    """The workloads that a pod of the dump belongs to, by owner chain or job-name label."""
    out: set[ObjectKey] = set()
    for pod in reg.of("", "Pod"):
        chain = list(wl.owner_refs(pod))
        seen: set[ObjectKey] = set()
        while chain:
            key = chain.pop()
            if key in seen:
                continue
            seen.add(key)
            out.add(key)
            if key in workloads:
                chain.extend(wl.owner_refs(workloads[key]))
        labels = pod.model.metadata.labels or {}
        for (group, kind), label in JOB_NAME_LABELS.items():
            if labels.get(label):
                out.add((group, kind, pod.namespace, labels[label]))
        if labels.get("job-name"):
            out.add(("batch", "Job", pod.namespace, labels["job-name"]))
        if labels.get("training.kubeflow.org/job-name"):
            for g, k in wl.WORKLOAD_KINDS:
                if g == "kubeflow.org":
                    out.add((g, k, pod.namespace, labels["training.kubeflow.org/job-name"]))
    return out


def _expand(
    obj: KubeObject,
    summary: ReadSummary,
    reader: PodReader,
    scheduler_names: tuple[str, ...],
    room: int,
) -> tuple[wl.Expansion, list[PodInfo]] | None:
    """One workload's expansion and predicted pods; None (listed) if it cannot be read, or
    if it has more than ``room`` pods."""
    try:
        exp = wl.expand(obj)
    except ObjectInvalid as err:
        summary.skip_object(obj, REASON_INVALID, "; ".join(err.problems))
        return None
    count = sum(t.count for t in exp.templates)
    if count > room:
        summary.skip_object(
            obj,
            REASON_INVALID,
            f"{exp.counted_by}: {count:,} pods: the dump's pods and the workloads read before "
            f"it leave room for {room:,} of the {MAX_PODS:,} pods gangplan accepts in a "
            "snapshot (MAX_PODS in gangplan.models.limits)",
        )
        return None
    for n in exp.notes:
        summary.note_object(obj, REASON_NOT_MAPPED, n)
    made: list[PodInfo] = []
    try:
        make = reader.template_pod(exp)
        for tmpl in exp.templates:
            for i in range(tmpl.count):
                made.append(wl.predicted_pod(exp, tmpl, i, make))
    except PodProblem as err:
        summary.skip_object(obj, REASON_NOT_MAPPED, str(err))
        return None
    if scheduler_names and any(p.scheduler not in scheduler_names for p in made):
        summary.skip_object(
            obj, REASON_OTHER_SCHEDULER, f"spec.schedulerName {made[0].scheduler!r}"
        )
        return None
    return exp, made
