"""Gangs from workload objects whose pods are not in the dump yet, and from gang objects.

A workload expands into the pods its controller would create — named as the controller
names them — when no pod in the dump belongs to it (by owner reference, directly or
through a child workload, or by the controller's job-name label) and no workload in the
dump owns it:

Per workload (pod names as its controller gives them):

* Volcano ``Job``: a gang with ``minAvailable`` (default: the sum of task minimums), task
  ``minAvailable`` (default: replicas) as role minimums (Volcano's PodGroup
  ``minTaskMember``), ``queue``, ``networkTopology``, ``priorityClassName``; pods
  ``{job}-{task}-{i}``.
* Kubeflow ``PyTorchJob``, ``TFJob``, ``MPIJob``, ``XGBoostJob``, ``PaddleJob``,
  ``JAXJob``, ``MXJob``: a gang with ``runPolicy.schedulingPolicy.minAvailable`` (default:
  all replicas, as the training operator's PodGroup), ``queue``, ``priorityClass``; one
  role per replica type; pods ``{job}-{replica type}-{i}``.
* batch ``Job`` with a Kueue ``kueue.x-k8s.io/queue-name`` label: Kueue's workload, all
  pods or ``kueue.x-k8s.io/job-min-parallelism`` (partial admission);
  ``min(parallelism, completions)`` pods ``{job}-{i}``.
* ``JobSet`` with a Kueue label: a gang, one role per replicated job (replicas × pods
  per job); pods ``{jobset}-{replicated job}-{j}-{i}``.
* any other batch ``Job``, ``JobSet``, ``ReplicaSet``, ``Deployment``, ``StatefulSet``:
  independent pods (each a gang of one) unless the pod template names a gang object;
  pods ``{name}-{i}``.

The minimum a gang object states (``minMember``, ``minCount``, ``min-available``) is kept
as the gang's; its queue and priority are the object's when it names them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import kubernetes.client as k8s

from gangplan.adapters.kube.crds import JobSet, KubeflowJob, VolcanoJob
from gangplan.adapters.kube.objects import KubeObject, ObjectInvalid, parse_official
from gangplan.adapters.kube.pods import GroupRef, PodInfo, TopologyRequest, epoch
from gangplan.models.limits import too_many

__all__ = [
    "LABEL_KUEUE_QUEUE",
    "WORKLOAD_KINDS",
    "Expansion",
    "GroupSpec",
    "group_spec_of",
    "owner_key",
]

LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
ANN_KUEUE_MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"

WORKLOAD_KINDS: tuple[tuple[str, str], ...] = (
    ("batch.volcano.sh", "Job"),
    ("kubeflow.org", "PyTorchJob"),
    ("kubeflow.org", "TFJob"),
    ("kubeflow.org", "MPIJob"),
    ("kubeflow.org", "XGBoostJob"),
    ("kubeflow.org", "PaddleJob"),
    ("kubeflow.org", "JAXJob"),
    ("kubeflow.org", "MXJob"),
    ("jobset.x-k8s.io", "JobSet"),
    ("batch", "Job"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
)
"""Workloads read from their pod templates when their pods are not in the dump."""


@dataclass
class GroupSpec:
    """What a gang object (or a workload) says of its gang.

    ``min_member`` None: all its pods. ``min_task_member``: per task (role) minimums, used
    only when ``min_member`` >= their sum (Volcano's ``CheckTaskReady``). ``expected``: the
    pod count the gang waits for (Kueue's ``pod-group-total-count``).
    """

    system: str
    namespace: str
    name: str
    source: str
    kind: str
    min_member: int | None = None
    min_task_member: dict[str, int] = field(default_factory=dict)
    queue: str | None = None
    kueue_queue: str | None = None
    priority_class: str | None = None
    priority: int | None = None
    topology: TopologyRequest | None = None
    creation: float | None = None
    expected: int | None = None
    predicted: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.system, self.name)


def _workload_system(obj: KubeObject) -> str:
    return f"workload:{obj.display_kind}"


def owner_key(
    group_version: str, kind: str, namespace: str, name: str
) -> tuple[str, str, str, str]:
    """The identity of an owner reference: (API group, kind, namespace, name)."""
    group = group_version.rpartition("/")[0] if "/" in group_version else ""
    return (group, kind, namespace, name)


def group_spec_of(obj: KubeObject) -> GroupSpec:
    """A gang object's :class:`GroupSpec` (Volcano, scheduler-plugins / Koordinator, or the
    upstream ``scheduling.k8s.io`` PodGroup)."""
    m = obj.model
    meta = m.metadata
    created = epoch(getattr(meta, "creation_timestamp", None))
    if obj.group == "scheduling.volcano.sh":
        spec = m.spec
        topo = None
        if spec.network_topology is not None:
            nt = spec.network_topology
            topo = TopologyRequest(
                "required" if nt.mode == "hard" else "preferred",
                tier=nt.highest_tier_allowed or 1,
                source="spec.networkTopology",
            )
        return GroupSpec(
            "volcano",
            obj.namespace,
            obj.name,
            obj.source,
            obj.display_kind,
            min_member=max(1, spec.min_member),
            min_task_member=dict(spec.min_task_member),
            queue=spec.queue or "default",
            priority_class=spec.priority_class_name,
            topology=topo,
            creation=created,
        )
    if obj.group in ("scheduling.x-k8s.io", "scheduling.sigs.k8s.io"):
        system = "plugins" if obj.group == "scheduling.x-k8s.io" else "koordinator"
        return GroupSpec(
            system,
            obj.namespace,
            obj.name,
            obj.source,
            obj.display_kind,
            min_member=max(1, m.spec.min_member),
            creation=created,
        )
    # upstream scheduling.k8s.io PodGroup (official client model)
    spec = m.spec
    policy = spec.scheduling_policy if spec is not None else None
    gang = policy.gang if policy is not None else None
    topo = None
    cons = spec.scheduling_constraints if spec is not None else None
    if cons is not None and cons.topology:
        topo = TopologyRequest(
            "required",
            label=cons.topology[0].key,
            source="spec.schedulingConstraints.topology[0].key",
        )
    return GroupSpec(
        "upstream",
        obj.namespace,
        obj.name,
        obj.source,
        obj.display_kind,
        min_member=gang.min_count if gang is not None and gang.min_count else 1,
        priority_class=spec.priority_class_name if spec is not None else None,
        priority=spec.priority if spec is not None else None,
        topology=topo,
        creation=created,
    )


# --------------------------------------------------------------------------- expansion


@dataclass
class Template:
    """One pod template of a workload: role name, pod count, validated ``V1PodTemplateSpec``,
    and the name of pod ``i`` (``name_of(i)``: names are made one at a time, when the pod
    is, so a count is checked against the bounds before any name is built)."""

    role: str
    count: int
    spec: Any
    where: str
    name_of: Callable[[int], str]


@dataclass
class Expansion:
    """A workload read from its templates: its gang (None: independent pods) and templates;
    ``counted_by``: the field that sets how many pods (named when they are too many)."""

    obj: KubeObject
    group: GroupSpec | None
    templates: list[Template]
    labels: dict[str, str]
    notes: list[str] = field(default_factory=list)
    counted_by: str = "spec"


def _template(raw: dict[str, Any], where: str) -> Any:
    spec, ignored = parse_official(k8s.V1PodTemplateSpec, raw, where)
    return _pod_template(spec, where), ignored


def _pod_template(template: Any, where: str) -> Any:
    """``template`` (a validated ``V1PodTemplateSpec``) if it has a pod spec.

    Raises:
        ObjectInvalid: no template, or a template without ``spec`` (the API server requires
            both of every workload kind read here).
    """
    if template is None:
        raise ObjectInvalid([f"{where}: required field is missing"])
    if template.spec is None:
        raise ObjectInvalid([f"{where}.spec: required field is missing"])
    return template


def _spec(obj: KubeObject) -> Any:
    """The workload's ``spec``.

    Raises:
        ObjectInvalid: ``spec`` is missing or null.
    """
    spec = obj.model.spec
    if spec is None:
        raise ObjectInvalid(["spec: required field is missing"])
    return spec


def expand(obj: KubeObject) -> Expansion:
    """The pods a workload's controller would create (see the module docstring).

    Raises:
        ObjectInvalid: a missing ``spec`` or template, a template that does not validate,
            naming its field; more pods than the bounds of :mod:`gangplan.models.limits`
            (a gang's pods: ``MAX_PODS_PER_GANG``; independent pods: ``MAX_PODS``), checked
            before any pod or name is made.
    """
    handler = _EXPANDERS[(obj.group, obj.kind)]
    exp = handler(obj)
    total = sum(t.count for t in exp.templates)
    bound = "MAX_PODS_PER_GANG" if exp.group is not None else "MAX_PODS"
    if (msg := too_many(bound, total)) is not None:
        raise ObjectInvalid([f"{exp.counted_by}: {msg}"])
    return exp


def _meta(obj: KubeObject) -> tuple[dict[str, str], dict[str, str], float | None]:
    meta = obj.model.metadata
    return (dict(meta.labels or {}), dict(meta.annotations or {}), epoch(meta.creation_timestamp))


def _volcano_job(obj: KubeObject) -> Expansion:
    job: VolcanoJob = obj.model
    labels, _, created = _meta(obj)
    templates = []
    notes: list[str] = []
    for i, task in enumerate(job.spec.tasks):
        where = f"spec.tasks[{i}].template"
        tmpl, ignored = _template(task.template, where)
        notes += [f"{p}: not a field of the pod template (dropped)" for p in ignored]
        if task.partition_policy:
            notes.append(
                f"spec.tasks[{i}].partitionPolicy: not mapped (no sub-gang partitions in the model)"
            )
        if task.depends_on:
            notes.append(f"spec.tasks[{i}].dependsOn: not mapped (all tasks are placed together)")
        if task.replicas:
            templates.append(
                Template(task.name, task.replicas, tmpl, where, _names(obj.name, task.name))
            )
    mtm = {
        t.name: (t.min_available if t.min_available is not None else t.replicas)
        for t in job.spec.tasks
    }
    min_available = job.spec.min_available or sum(mtm.values())
    topo = None
    if job.spec.network_topology is not None:
        nt = job.spec.network_topology
        topo = TopologyRequest(
            "required" if nt.mode == "hard" else "preferred",
            tier=nt.highest_tier_allowed or 1,
            source="spec.networkTopology",
        )
    group = GroupSpec(
        _workload_system(obj),
        obj.namespace,
        obj.name,
        obj.source,
        obj.display_kind,
        min_member=min_available,
        min_task_member=mtm,
        queue=job.spec.queue or "default",
        kueue_queue=labels.get(LABEL_KUEUE_QUEUE),
        priority_class=job.spec.priority_class_name,
        topology=topo,
        creation=created,
        predicted=True,
    )
    return Expansion(obj, group, templates, labels, notes, counted_by="spec.tasks[*].replicas")


def _kubeflow(obj: KubeObject) -> Expansion:
    job: KubeflowJob = obj.model
    labels, _, created = _meta(obj)
    templates = []
    notes: list[str] = []
    specs = job.replica_specs
    for rtype, rspec in specs.items():
        where = f"spec.*ReplicaSpecs.{rtype}.template"
        tmpl, ignored = _template(rspec.template, where)
        notes += [f"{p}: not a field of the pod template (dropped)" for p in ignored]
        role = rtype.lower()
        if rspec.replicas:
            templates.append(Template(role, rspec.replicas, tmpl, where, _names(obj.name, role)))
    total = sum(r.replicas for r in specs.values())
    sp = job.run_policy.scheduling_policy
    if job.spec.get("elasticPolicy"):
        notes.append(
            "spec.elasticPolicy: not mapped (the gang's minimum is "
            "schedulingPolicy.minAvailable or all replicas)"
        )
    group = GroupSpec(
        _workload_system(obj),
        obj.namespace,
        obj.name,
        obj.source,
        obj.display_kind,
        min_member=min(total, sp.min_available) if sp and sp.min_available else total,
        queue=sp.queue if sp and sp.queue else None,
        kueue_queue=labels.get(LABEL_KUEUE_QUEUE),
        priority_class=sp.priority_class if sp and sp.priority_class else None,
        creation=created,
        predicted=True,
    )
    return Expansion(
        obj, group, templates, labels, notes, counted_by="spec.*ReplicaSpecs.*.replicas"
    )


def _names(*prefix: str) -> Callable[[int], str]:
    """Pod ``i`` named ``{prefix}-{i}`` (the parts of ``prefix`` joined by ``-``)."""
    head = "-".join(prefix)
    return lambda i: f"{head}-{i}"


def _count(value: int | None, field: str, default: int = 1) -> int:
    """A workload's pod count (``default`` when unset).

    Raises:
        ObjectInvalid: a negative count (the API server refuses one).
    """
    if value is None:
        return default
    if value < 0:
        raise ObjectInvalid([f"{field}: must be greater than or equal to 0 (got {value})"])
    return int(value)


def _job_pods(spec: Any, where: str = "spec") -> int:
    parallelism = _count(spec.parallelism, f"{where}.parallelism")
    if spec.completions is not None:
        return min(parallelism, _count(spec.completions, f"{where}.completions"))
    return parallelism


def _batch_job(obj: KubeObject) -> Expansion:
    labels, annotations, created = _meta(obj)
    spec = _spec(obj)
    n = _job_pods(spec)
    tmpl = _pod_template(spec.template, "spec.template")
    templates = [Template("pods", n, tmpl, "spec.template", _names(obj.name))] if n else []
    group = None
    notes: list[str] = []
    lq = labels.get(LABEL_KUEUE_QUEUE)
    if lq:
        min_member = None
        raw = annotations.get(ANN_KUEUE_MIN_PARALLELISM)
        if raw is not None:
            if raw.isdigit() and 0 < int(raw) <= n:
                min_member = int(raw)
            else:
                notes.append(
                    f"annotation {ANN_KUEUE_MIN_PARALLELISM}: {raw!r} is not 1..{n}; ignored"
                )
        group = GroupSpec(
            _workload_system(obj),
            obj.namespace,
            obj.name,
            obj.source,
            obj.display_kind,
            min_member=min_member,
            kueue_queue=lq,
            creation=created,
            predicted=True,
        )
    if not n:
        notes.append("parallelism 0: no pods")
    return Expansion(obj, group, templates, labels, notes, counted_by="spec.parallelism")


def _jobset(obj: KubeObject) -> Expansion:
    js: JobSet = obj.model
    labels, _, created = _meta(obj)
    templates = []
    notes: list[str] = []
    for i, rj in enumerate(js.spec.replicated_jobs):
        where = f"spec.replicatedJobs[{i}].template"
        jt, ignored = parse_official(k8s.V1JobTemplateSpec, rj.template, where)
        notes += [f"{p}: not a field of the job template (dropped)" for p in ignored]
        if jt.spec is None:
            raise ObjectInvalid([f"{where}.spec: required field is missing"])
        pod_tmpl = _pod_template(jt.spec.template, f"{where}.spec.template")
        per_job = _job_pods(jt.spec, f"{where}.spec")
        if rj.replicas and per_job:
            templates.append(
                Template(
                    rj.name,
                    rj.replicas * per_job,
                    pod_tmpl,
                    f"{where}.spec.template",
                    _jobset_names(f"{obj.name}-{rj.name}", per_job),
                )
            )
    group = None
    lq = labels.get(LABEL_KUEUE_QUEUE)
    if lq:
        group = GroupSpec(
            _workload_system(obj),
            obj.namespace,
            obj.name,
            obj.source,
            obj.display_kind,
            kueue_queue=lq,
            creation=created,
            predicted=True,
        )
    return Expansion(obj, group, templates, labels, notes, counted_by="spec.replicatedJobs")


def _jobset_names(head: str, per_job: int) -> Callable[[int], str]:
    """Pod ``i`` of a replicated job: ``{head}-{job index}-{pod index}``."""
    return lambda i: f"{head}-{i // per_job}-{i % per_job}"


def _replicated(obj: KubeObject) -> Expansion:
    labels, _, _ = _meta(obj)
    spec = _spec(obj)
    n = _count(spec.replicas, "spec.replicas")
    tmpl = _pod_template(spec.template, "spec.template")
    templates = [Template("pods", n, tmpl, "spec.template", _names(obj.name))] if n else []
    notes = [] if n else ["replicas 0: no pods"]
    return Expansion(obj, None, templates, labels, notes, counted_by="spec.replicas")


_EXPANDERS: dict[tuple[str, str], Callable[[KubeObject], Expansion]] = {
    ("batch.volcano.sh", "Job"): _volcano_job,
    **{("kubeflow.org", k): _kubeflow for g, k in WORKLOAD_KINDS if g == "kubeflow.org"},
    ("jobset.x-k8s.io", "JobSet"): _jobset,
    ("batch", "Job"): _batch_job,
    ("apps", "Deployment"): _replicated,
    ("apps", "ReplicaSet"): _replicated,
    ("apps", "StatefulSet"): _replicated,
}


def owner_refs(obj: KubeObject) -> Iterator[tuple[str, str, str, str]]:
    for ref in obj.model.metadata.owner_references or []:
        yield owner_key(ref.api_version or "", ref.kind, obj.namespace, ref.name)


NAMES_KNOWN: dict[tuple[str, str], str] = {
    ("batch.volcano.sh", "Job"): "{job}-{task}-{index}",
    **{
        ("kubeflow.org", k): "{job}-{replica type}-{index}"
        for g, k in WORKLOAD_KINDS
        if g == "kubeflow.org" and k != "MPIJob"
    },
    ("apps", "StatefulSet"): "{statefulset}-{ordinal}",
}
"""Workloads whose controllers name their pods deterministically, so that a predicted pod
carries the name its pod will have, and how they name them (Volcano's job controller, the
Kubeflow training operator, the StatefulSet controller)."""

NAMES_CHOSEN: dict[tuple[str, str], str] = {
    ("apps", "Deployment"): "its ReplicaSet names pods with a random suffix",
    ("apps", "ReplicaSet"): "a ReplicaSet names its pods with a random suffix",
    ("batch", "Job"): (
        "the Job controller names pods with a random suffix ({job}-{random}; indexed Jobs "
        "{job}-{index}-{random})"
    ),
    ("jobset.x-k8s.io", "JobSet"): (
        "its Jobs name their pods with a random suffix ({jobset}-{job}-{index}-{i}-{random})"
    ),
    ("kubeflow.org", "MPIJob"): (
        "the launcher's name is not {job}-launcher-{index} (mpi-operator v2 runs it as a "
        "batch Job, whose pod gets a random suffix)"
    ),
}
"""Workloads whose controllers choose their pods' names (a ``generateName`` suffix), and
why: a Binding for a predicted name would name no pod. Sources: the Kubernetes job
controller (``podGenerateNameWithIndex`` gives ``generateName`` ``{job}-{index}-``), the
ReplicaSet controller (``generateName`` ``{replicaset}-``), JobSet (its child Jobs), and
kubeflow/mpi-operator v2 (the launcher is a batch Job)."""


def predicted_pod(
    exp: Expansion, tmpl: Template, index: int, make: Callable[..., PodInfo]
) -> PodInfo:
    """One pod of ``tmpl`` as :class:`PodInfo` (through ``make``, the reader's converter),
    marked as predicted by its workload, and whether its name is the one its controller will
    give it (:data:`NAMES_KNOWN`)."""
    name = tmpl.name_of(index)
    pod = make(
        name=name,
        namespace=exp.obj.namespace,
        source=exp.obj.source,
        kind=exp.obj.display_kind,
        template=tmpl.spec,
        where=tmpl.where,
        workload_labels=exp.labels,
    )
    pod.role_hint = tmpl.role
    pod.predicted_by = f"{exp.obj.display_kind} {exp.obj.key}"
    kind = (exp.obj.group, exp.obj.kind)
    pod.name_known = kind in NAMES_KNOWN
    pod.name_rule = NAMES_KNOWN.get(kind) or NAMES_CHOSEN.get(kind, "")
    if exp.group is not None:
        pod.group = GroupRef(_workload_system(exp.obj), exp.obj.name)
    return pod
