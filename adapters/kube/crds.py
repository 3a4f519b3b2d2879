"""Small pydantic models of the custom resources gangplan reads (only the fields it maps).

Each model validates the plain dict of one object; unknown fields are ignored here (the
reader lists the notable unmapped ones in the summary). Resource amounts are parsed by
:data:`gangplan.models.quantity.ResourceList` into base units. Field names follow the
projects' Go types (camelCase in YAML):

* Volcano — ``scheduling.volcano.sh/v1beta1`` ``PodGroup``, ``Queue``;
  ``batch.volcano.sh/v1alpha1`` ``Job``; ``topology.volcano.sh/v1alpha1`` ``HyperNode``
  (volcano-sh/apis ``pkg/apis/...``).
* scheduler-plugins — ``scheduling.x-k8s.io/v1alpha1`` ``PodGroup``, ``ElasticQuota`` (and
  the same kinds at ``scheduling.sigs.k8s.io/v1alpha1``, the group Koordinator still uses).
* Kueue — ``kueue.x-k8s.io`` ``Topology``, ``ClusterQueue``, ``LocalQueue``,
  ``ResourceFlavor``, ``WorkloadPriorityClass`` (v1beta1 and v1beta2).
* Kubeflow — ``kubeflow.org`` ``PyTorchJob``, ``TFJob``, ``MPIJob`` (v1 and v2beta1),
  ``XGBoostJob``, ``PaddleJob``, ``JAXJob``, ``MXJob``: replica specs and
  ``runPolicy.schedulingPolicy``.
* JobSet — ``jobset.x-k8s.io/v1alpha2`` ``JobSet``.
* Koordinator — ``scheduling.koordinator.sh/v1alpha1`` ``Device``.

Pod templates inside them stay plain dicts here; the reader validates them with the
official client's ``V1PodTemplateSpec``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from gangplan.models.quantity import ResourceList

__all__ = [
    "KUBEFLOW_REPLICA_FIELDS",
    "ClusterQueue",
    "Device",
    "ElasticQuota",
    "HyperNode",
    "JobSet",
    "KubeflowJob",
    "LocalQueue",
    "Meta",
    "PluginsPodGroup",
    "ResourceFlavor",
    "Topology",
    "VolcanoJob",
    "VolcanoPodGroup",
    "VolcanoQueue",
    "WorkloadPriorityClass",
]


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="ignore", populate_by_name=True, alias_generator=to_camel, frozen=True
    )


class OwnerRef(_Model):
    api_version: str = ""
    kind: str
    name: str
    controller: bool | None = None


class Meta(_Model):
    """``metadata`` (ObjectMeta): only what the reader uses."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    creation_timestamp: datetime | None = None
    owner_references: list[OwnerRef] = Field(default_factory=list)


class _Object(_Model):
    api_version: str
    kind: str
    metadata: Meta = Field(default_factory=Meta)


# --------------------------------------------------------------------------- Volcano


class NetworkTopology(_Model):
    """Volcano ``networkTopology``: ``mode`` hard (required) or soft (preferred), and the
    highest HyperNode tier the gang may span (``highestTierAllowed``, default 1)."""

    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: PositiveInt | None = None
    highest_tier_name: str | None = None


class VolcanoPodGroupSpec(_Model):
    min_member: NonNegativeInt = 0
    min_task_member: dict[str, NonNegativeInt] = Field(default_factory=dict)
    queue: str = ""
    priority_class_name: str | None = None
    min_resources: dict[str, Any] | None = None
    network_topology: NetworkTopology | None = None
    sub_group_policy: list[Any] | None = None


class VolcanoPodGroup(_Object):
    """``scheduling.volcano.sh/v1beta1`` PodGroup."""

    spec: VolcanoPodGroupSpec = Field(default_factory=VolcanoPodGroupSpec)


class Guarantee(_Model):
    resource: ResourceList = Field(default_factory=dict)


class VolcanoQueueSpec(_Model):
    weight: NonNegativeInt = 0
    capability: ResourceList = Field(default_factory=dict)
    deserved: ResourceList = Field(default_factory=dict)
    guarantee: Guarantee | None = None
    reclaimable: bool | None = None
    parent: str | None = None


class QueueStatus(_Model):
    state: str | None = None


class VolcanoQueue(_Object):
    """``scheduling.volcano.sh/v1beta1`` Queue (cluster-scoped)."""

    spec: VolcanoQueueSpec = Field(default_factory=VolcanoQueueSpec)
    status: QueueStatus = Field(default_factory=QueueStatus)


class VolcanoTask(_Model):
    name: str = ""
    replicas: NonNegativeInt = 0
    min_available: NonNegativeInt | None = None
    template: dict[str, Any] = Field(default_factory=dict)
    partition_policy: dict[str, Any] | None = None
    depends_on: dict[str, Any] | None = None


class VolcanoJobSpec(_Model):
    scheduler_name: str = ""
    min_available: NonNegativeInt = 0
    queue: str = ""
    priority_class_name: str | None = None
    tasks: list[VolcanoTask] = Field(min_length=1)
    network_topology: NetworkTopology | None = None

    @field_validator("tasks", mode="before")
    @classmethod
    def _default_task_names(cls, v: Any) -> Any:
        """Volcano's webhook names an unnamed task ``default<index>`` (DefaultTaskSpec)."""
        if not isinstance(v, list):
            return v
        return [
            {**t, "name": t.get("name") or f"default{i}"} if isinstance(t, dict) else t
            for i, t in enumerate(v)
        ]

    @model_validator(mode="after")
    def _webhook_rules(self) -> VolcanoJobSpec:
        """What Volcano's admission webhook denies (jobs/validate)."""
        names = [t.name for t in self.tasks]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError(f"duplicate task name {dups[0]!r} (Volcano's webhook denies it)")
        total = sum(t.replicas for t in self.tasks)
        if self.min_available > total:
            raise ValueError(
                f"minAvailable {self.min_available} exceeds the {total} replicas of its tasks "
                "(Volcano's webhook denies it)"
            )
        return self


class VolcanoJob(_Object):
    """``batch.volcano.sh/v1alpha1`` Job."""

    spec: VolcanoJobSpec


class MemberSelector(_Model):
    exact_match: dict[str, str] | None = None
    regex_match: dict[str, str] | None = None
    label_match: dict[str, Any] | None = None


class HyperNodeMember(_Model):
    type: Literal["Node", "HyperNode"] = "Node"
    selector: MemberSelector = Field(default_factory=MemberSelector)


class HyperNodeSpec(_Model):
    tier: PositiveInt
    tier_name: str | None = None
    members: list[HyperNodeMember] = Field(default_factory=list)

    @field_validator("tier", mode="before")
    @classmethod
    def _tier_as_int(cls, v: Any) -> Any:
        # volcano-sh/apis had ``tier`` as a string before it became an int
        return int(v) if isinstance(v, str) and v.isdigit() else v


class HyperNode(_Object):
    """``topology.volcano.sh/v1alpha1`` HyperNode (cluster-scoped)."""

    spec: HyperNodeSpec


# --------------------------------------------------------------------------- scheduler-plugins


class PluginsPodGroupSpec(_Model):
    min_member: NonNegativeInt = 0
    min_resources: dict[str, Any] | None = None
    schedule_timeout_seconds: int | None = None


class PluginsPodGroup(_Object):
    """``scheduling.x-k8s.io/v1alpha1`` (or ``scheduling.sigs.k8s.io/v1alpha1``) PodGroup."""

    spec: PluginsPodGroupSpec = Field(default_factory=PluginsPodGroupSpec)


class ElasticQuotaSpec(_Model):
    min: ResourceList = Field(default_factory=dict)
    max: ResourceList = Field(default_factory=dict)


class ElasticQuota(_Object):
    """scheduler-plugins ElasticQuota (capacity scheduling), one per namespace."""

    spec: ElasticQuotaSpec = Field(default_factory=ElasticQuotaSpec)


# --------------------------------------------------------------------------- Kueue


class TopologyLevel(_Model):
    node_label: str = Field(min_length=1)


class TopologySpec(_Model):
    levels: list[TopologyLevel] = Field(min_length=1)


class Topology(_Object):
    """``kueue.x-k8s.io`` Topology: node label keys from the top level down."""

    spec: TopologySpec


class FlavorResource(_Model):
    name: str
    nominal_quota: Any = 0
    borrowing_limit: Any = None
    lending_limit: Any = None


class FlavorQuotas(_Model):
    name: str
    resources: list[FlavorResource] = Field(default_factory=list)


class ResourceGroup(_Model):
    covered_resources: list[str] = Field(default_factory=list)
    flavors: list[FlavorQuotas] = Field(default_factory=list)


class FairSharing(_Model):
    weight: Any = None


class ClusterQueuePreemption(_Model):
    """``spec.preemption``: Kueue's ``withinClusterQueue`` (``Never``, ``LowerPriority``,
    ``LowerOrNewerEqualPriority``), ``reclaimWithinCohort`` (``Never``, ``LowerPriority``,
    ``Any``) and ``borrowWithinCohort``."""

    within_cluster_queue: str | None = None
    reclaim_within_cohort: str | None = None
    borrow_within_cohort: Any = None


class ClusterQueueSpec(_Model):
    cohort: str | None = None
    cohort_name: str | None = None
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    fair_sharing: FairSharing | None = None
    preemption: ClusterQueuePreemption | None = None


class ClusterQueue(_Object):
    """``kueue.x-k8s.io`` ClusterQueue (cluster-scoped)."""

    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)

    @property
    def cohort_of(self) -> str | None:
        return self.spec.cohort_name or self.spec.cohort


class LocalQueueSpec(_Model):
    cluster_queue: str = ""


class LocalQueue(_Object):
    """``kueue.x-k8s.io`` LocalQueue: a namespace's name for a ClusterQueue."""

    spec: LocalQueueSpec = Field(default_factory=LocalQueueSpec)


class ResourceFlavorSpec(_Model):
    node_labels: dict[str, str] = Field(default_factory=dict)
    node_taints: list[dict[str, Any]] = Field(default_factory=list)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    topology_name: str | None = None


class ResourceFlavor(_Object):
    """``kueue.x-k8s.io`` ResourceFlavor (cluster-scoped)."""

    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)


class WorkloadPriorityClass(_Object):
    """``kueue.x-k8s.io`` WorkloadPriorityClass: ``value`` like a PriorityClass."""

    value: int = 0


# --------------------------------------------------------------------------- Kubeflow, JobSet

KUBEFLOW_REPLICA_FIELDS = {
    "PyTorchJob": "pytorchReplicaSpecs",
    "TFJob": "tfReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs",
    "JAXJob": "jaxReplicaSpecs",
    "MXJob": "mxReplicaSpecs",
}
"""Kind -> the spec field holding its replica specs (kubeflow/training-operator v1 types,
kubeflow/mpi-operator v2beta1)."""


class ReplicaSpec(_Model):
    replicas: NonNegativeInt = 1
    template: dict[str, Any] = Field(default_factory=dict)


class SchedulingPolicy(_Model):
    min_available: NonNegativeInt | None = None
    queue: str | None = None
    priority_class: str | None = None
    min_resources: dict[str, Any] | None = None


class RunPolicy(_Model):
    scheduling_policy: SchedulingPolicy | None = None


_M = TypeVar("_M", bound=BaseModel)


def _validated(model: type[_M], data: Any, where: str) -> _M:
    """``model`` of ``data``, a part of a ``spec`` kept as a dict.

    Raises:
        ValueError: every problem, each naming its field under ``where``.
    """
    try:
        return model.model_validate(data)
    except ValidationError as err:
        problems = []
        for e in err.errors():
            loc = ".".join(str(x) for x in e["loc"])
            got = repr(e["input"]) if e["type"] != "missing" else ""
            got = f" (got {got if len(got) <= 60 else got[:57] + '...'})" if got else ""
            problems.append(f"{where}{'.' + loc if loc else ''}: {e['msg']}{got}")
        raise ValueError("; ".join(problems)) from None


class KubeflowJob(_Object):
    """A Kubeflow training job: ``replicas`` by replica type (Master, Worker, Launcher, PS,
    ...) and ``runPolicy.schedulingPolicy``. ``spec`` stays a dict: the replica-spec field's
    name depends on the kind (:data:`KUBEFLOW_REPLICA_FIELDS`)."""

    spec: dict[str, Any] = Field(default_factory=dict)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        field = KUBEFLOW_REPLICA_FIELDS[self.kind]
        raw = self.spec.get(field) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"spec.{field} must be a mapping of replica type to spec")
        return {
            str(k): _validated(ReplicaSpec, v or {}, f"spec.{field}.{k}") for k, v in raw.items()
        }

    @property
    def run_policy(self) -> RunPolicy:
        return _validated(RunPolicy, self.spec.get("runPolicy") or {}, "spec.runPolicy")

    @model_validator(mode="after")
    def _has_replicas(self) -> KubeflowJob:
        field = KUBEFLOW_REPLICA_FIELDS.get(self.kind)
        if field is None:
            raise ValueError(f"kind {self.kind!r} is not a Kubeflow job")
        if not self.spec.get(field):
            raise ValueError(f"spec.{field} is missing or empty")
        specs = self.replica_specs  # validates each
        self.run_policy  # noqa: B018 (validates it)
        if not any(r.replicas for r in specs.values()):
            raise ValueError(f"spec.{field}: every replica type has 0 replicas")
        return self


class ReplicatedJob(_Model):
    name: str
    replicas: NonNegativeInt = 1
    template: dict[str, Any] = Field(default_factory=dict)


class JobSetSpec(_Model):
    replicated_jobs: list[ReplicatedJob] = Field(min_length=1)


class JobSet(_Object):
    """``jobset.x-k8s.io/v1alpha2`` JobSet."""

    spec: JobSetSpec


# --------------------------------------------------------------------------- Koordinator


class DeviceTopology(_Model):
    socket_id: int | None = Field(None, alias="socketID")
    node_id: int | None = Field(None, alias="nodeID")
    pcie_id: str | None = Field(None, alias="pcieID")
    bus_id: str | None = Field(None, alias="busID")


class DeviceCondition(_Model):
    type: str
    status: str


class DeviceInfo(_Model):
    id: str | None = None
    minor: int | None = None
    type: str
    health: bool = True
    topology: DeviceTopology | None = None
    conditions: list[DeviceCondition] = Field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """``health`` and no ``Healthy`` condition that is not ``True``."""
        return self.health and all(
            c.status == "True" for c in self.conditions if c.type == "Healthy"
        )


class DeviceSpec(_Model):
    devices: list[DeviceInfo] = Field(default_factory=list)


class Device(_Object):
    """``scheduling.koordinator.sh/v1alpha1`` Device: the devices koordlet reports for the
    node of the same name (GPUs, RDMA NICs) with NUMA node and PCIe ids."""

    spec: DeviceSpec = Field(default_factory=DeviceSpec)
