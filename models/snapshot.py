"""The snapshot's types: what a scheduling cycle works from — nodes and their devices,
topology levels, queues, pending gangs and running pods.

The cross-checks a snapshot runs when it is built live in :mod:`gangplan.models.checks`; what
running pods leave free on each node is derived in :mod:`gangplan.models.free`.

Everything is a frozen pydantic v2 model; objects refer to each other by name, never by
index. Resource amounts are integers in base units (:mod:`gangplan.models.quantity`:
milli-CPU, bytes, milli-units for GPUs and other extended resources, so one GPU device is
1000 milli-GPU).

Field mapping to the Kubernetes batch schedulers (see also ``docs/instance-format.md``):

=====================  ==========================================================================
gangplan               Volcano / Kueue / scheduler-plugins / Koordinator
=====================  ==========================================================================
``Gang``               PodGroup (Volcano ``scheduling.volcano.sh``, scheduler-plugins
                       ``scheduling.x-k8s.io``), a Kueue Workload, a Volcano Job
``Gang.min_member``    Volcano ``minAvailable`` / PodGroup ``minMember``; scheduler-plugins
                       ``minMember``; upstream PodGroup ``gang.minCount``
``Role``               Volcano Job task, Kueue PodSet, Kubeflow replica spec
``Role.min_member``    Volcano ``minTaskMember``
``TopologyConstraint`` Volcano ``networkTopology`` (mode hard = ``required``, soft =
                       ``preferred``); Kueue ``podset-required-topology`` /
                       ``podset-preferred-topology`` annotations
``Gang.joint``         Koordinator ``scheduling.koordinator.sh/device-joint-allocate``
                       (``SamePCIe`` = ``pcie``, ``SameNUMA`` = ``numa``)
``Queue.weight``       Volcano Queue ``weight``; Kueue ``fairSharing.weight`` (0 = served last)
``Queue.guaranteed``   Volcano ``deserved``; Kueue ``nominalQuota``; ElasticQuota ``min``
``Queue.max``          Volcano ``capability``; Kueue nominal + ``borrowingLimit``;
                       ElasticQuota ``max``
``Level``              Kueue ``Topology`` level (``nodeLabel``); Volcano HyperNode tier
``QueuePreemption``    Kueue ClusterQueue ``spec.preemption`` (``withinClusterQueue``,
                       ``reclaimWithinCohort``); Volcano Queue ``reclaimable``
``Gang.preemption_``   PriorityClass ``preemptionPolicy`` (``Never``: the gang never preempts)
``policy``
``RunningPod.``        Volcano ``volcano.sh/preemptable``, Koordinator's
``preemptible``        ``koordinator.sh/preemptible`` label, a PodDisruptionBudget that
                       allows no disruption
=====================  ==========================================================================

Inconsistencies real clusters have (running pods holding more than the node reports, a
resource the node does not advertise, a node without a label of some level) are not errors:
:meth:`Snapshot.warnings` names each, and :meth:`Snapshot.free` clamps at zero.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Iterator
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    NonNegativeInt,
    PositiveInt,
    model_validator,
)

from gangplan.models.base import GPU_MILLI, Frozen, K8sName, Name, gang_key
from gangplan.models.checks import Problem, SnapshotError, snapshot_problems
from gangplan.models.free import FreeCapacity, NodeFree, derive_free, free_after
from gangplan.models.limits import RoleCount
from gangplan.models.moves import DisruptionBudget
from gangplan.models.owners import PodOwner
from gangplan.models.preemption import PreemptionRules
from gangplan.models.quantity import CPU, MEMORY, ResourceList
from gangplan.models.reservation import Reservation, ReservationRules, ReservationSettings

__all__ = [
    "DeviceLayout",
    "Gang",
    "JointPolicy",
    "Level",
    "Node",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NumaNode",
    "PcieSwitch",
    "PreemptionPolicy",
    "PreemptionSettings",
    "Queue",
    "QueuePreemption",
    "ResourceNames",
    "Role",
    "RunningPod",
    "Snapshot",
    "Taint",
    "Toleration",
    "TopologyConstraint",
    "WorkloadShape",
]

Priority = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
"""A pod priority (core/v1: int32; PriorityClass values)."""
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
JointPolicy = Literal["none", "pcie", "numa"]
PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]
"""A pending gang's PriorityClass ``preemptionPolicy`` (scheduling.k8s.io/v1): ``Never``
means the gang waits and never preempts."""


# --------------------------------------------------------------------------- scheduling terms


class Taint(Frozen):
    """A node taint (core/v1 ``Taint``). ``NoSchedule`` and ``NoExecute`` keep untolerating
    pods off the node; ``PreferNoSchedule`` is only a preference and is ignored here."""

    key: Name
    value: str = ""
    effect: TaintEffect


class Toleration(Frozen):
    """A pod toleration (core/v1 ``Toleration``).

    Matching follows the Kubernetes API doc: an empty ``key`` with ``Exists`` tolerates
    every taint; ``effect`` None matches every effect; ``Equal`` compares values.
    """

    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: TaintEffect | None = None

    def tolerates(self, taint: Taint) -> bool:
        """True if this toleration tolerates ``taint`` (k8s ``Toleration.ToleratesTaint``)."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


_INT64 = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str) -> int | None:
    """``text`` as Go's ``strconv.ParseInt(text, 10, 64)`` reads it, or None where that fails:
    ASCII digits with an optional ``+`` or ``-``, within -2^63..2^63-1; no blanks, no
    underscores, no other digits (``"²"``, ``"٣"``). Kubernetes reads ``Gt``/``Lt`` values
    and node labels this way (``k8s.io/apimachinery/pkg/labels``, ``Requirement.Matches``)."""
    if _INT64.fullmatch(text) is None or len(text.lstrip("+-").lstrip("0")) > 19:
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


class NodeSelectorRequirement(Frozen):
    """One ``matchExpressions`` entry of a required node affinity term (core/v1).

    ``Gt`` and ``Lt`` take exactly one value, an integer as :func:`parse_int64` reads it
    (anything else is refused); a node whose label is not such an integer matches neither.
    """

    key: Name
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _values_fit_operator(self) -> NodeSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        if self.operator in ("Gt", "Lt") and (
            len(self.values) != 1 or parse_int64(self.values[0]) is None
        ):
            got = repr(list(self.values))
            raise ValueError(
                f"operator {self.operator} takes exactly one integer value (accepted: a 64-bit "
                "integer in ASCII digits with an optional sign, as Kubernetes parses it with "
                f"Go's strconv.ParseInt; got {got if len(got) <= 60 else got[:57] + '...'})"
            )
        return self

    def matches(self, labels: dict[str, str]) -> bool:
        """True if a node with ``labels`` satisfies this requirement (core/v1 semantics)."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        value = parse_int64(labels[self.key]) if present else None
        bound = parse_int64(self.values[0]) if len(self.values) == 1 else None
        if value is None or bound is None:
            return False  # as Kubernetes: a label ParseInt refuses matches neither Gt nor Lt
        return value > bound if self.operator == "Gt" else value < bound


class NodeSelectorTerm(Frozen):
    """A required node affinity term: all its expressions must hold (AND)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = Field(min_length=1)

    def matches(self, labels: dict[str, str]) -> bool:
        return all(req.matches(labels) for req in self.match_expressions)


class TopologyConstraint(Frozen):
    """Where a gang's (or role's) pods may go in the topology tree.

    ``required``: all pods inside one domain of this level (Kueue
    ``podset-required-topology``; Volcano ``networkTopology`` mode hard). ``preferred``: as
    few domains of this level as possible (Kueue ``podset-preferred-topology``; Volcano mode
    soft). Level names must be among ``Snapshot.levels`` (or ``node``, the lowest level).
    """

    required: Name | None = None
    preferred: Name | None = None


# --------------------------------------------------------------------------- devices


class PcieSwitch(Frozen):
    """A PCIe switch and the GPU and RDMA NIC device ids under it (device-plugin ids)."""

    name: Name
    gpus: tuple[Name, ...] = ()
    nics: tuple[Name, ...] = ()


class NumaNode(Frozen):
    """A NUMA node and its PCIe switches."""

    name: Name
    pcie_switches: tuple[PcieSwitch, ...] = ()


class DeviceLayout(Frozen):
    """The inside of a node: NUMA nodes > PCIe switches > GPUs / RDMA NICs.

    Declared once under ``Snapshot.device_layouts`` and named by many nodes
    (e.g. ``hgx8``: 8 GPUs + 8 NICs under 4 PCIe switches on 2 NUMA nodes), or given
    explicitly on one node. Each GPU device holds 1000 milli-GPU.
    """

    numa_nodes: tuple[NumaNode, ...] = Field(min_length=1)

    @cached_property
    def gpu_ids(self) -> tuple[str, ...]:
        return tuple(g for n in self.numa_nodes for s in n.pcie_switches for g in s.gpus)

    @cached_property
    def nic_ids(self) -> tuple[str, ...]:
        return tuple(x for n in self.numa_nodes for s in n.pcie_switches for x in s.nics)

    def switches(self) -> Iterator[tuple[NumaNode, PcieSwitch]]:
        for numa in self.numa_nodes:
            for switch in numa.pcie_switches:
                yield numa, switch

    @staticmethod
    def implicit(gpus: int, nics: int) -> DeviceLayout:
        """The layout assumed for a node that declares none: ``gpu-0..`` and ``nic-0..``
        under one switch. Its PCIe topology is unknown, so joint allocation never uses it
        (:attr:`Node.has_device_topology`)."""
        switch = PcieSwitch(
            name="pcie-0",
            gpus=tuple(f"gpu-{i}" for i in range(gpus)),
            nics=tuple(f"nic-{i}" for i in range(nics)),
        )
        return DeviceLayout(numa_nodes=(NumaNode(name="numa-0", pcie_switches=(switch,)),))


# --------------------------------------------------------------------------- cluster objects


class ResourceNames(Frozen):
    """Which resource names mean GPUs and RDMA NICs in this snapshot.

    ``gpu`` is the GPU resource (milli-GPU inside); ``gpu_model_resources`` maps
    model-specific GPU resources (``nvidia.com/a100``) to a GPU model: a request for them
    is a request for ``gpu`` restricted to that model, and a node advertising them has that
    model. ``nic`` is the RDMA NIC resource (``rdma/hca``, ``nvidia.com/hostdev``,
    ``koordinator.sh/rdma``). Any other name is an opaque extended resource.
    """

    gpu: Name = "nvidia.com/gpu"
    nic: Name = "rdma/hca"
    gpu_model_resources: dict[Name, Name] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _distinct(self) -> ResourceNames:
        reserved = {CPU, MEMORY, "ephemeral-storage", "pods"}
        for what, name in (("gpu", self.gpu), ("nic", self.nic)):
            if name in reserved or name.startswith("hugepages-"):
                raise ValueError(
                    f"{what}: {name!r} is a core resource (accepted: an extended resource "
                    "name such as nvidia.com/gpu or rdma/hca)"
                )
        if self.gpu == self.nic:
            raise ValueError(f"gpu and nic are both {self.gpu!r} (they must differ)")
        for res in self.gpu_model_resources:
            if res in reserved or res in (self.gpu, self.nic) or res.startswith("hugepages-"):
                raise ValueError(
                    f"gpu_model_resources: {res!r} cannot name a GPU model (accepted: a "
                    "model-specific GPU resource such as nvidia.com/a100)"
                )
        return self


class Level(Frozen):
    """A topology level (top to bottom in ``Snapshot.levels``), e.g. block > spine > leaf.

    A node's domain at this level comes from ``Node.domains[name]`` when given (explicit
    membership, as Volcano HyperNodes give it), otherwise from its label ``node_label``
    (Kueue ``Topology``). The node itself is the implicit lowest level, ``node``.
    """

    name: Name
    node_label: Name | None = None


class Node(Frozen):
    """A cluster node.

    ``allocatable`` in base units; ``gpu_model`` e.g. ``H100`` or ``V100M32``; the device
    tree from ``device_layout`` (a template name) or ``devices`` (explicit), else the
    :meth:`DeviceLayout.implicit` one.
    """

    name: K8sName
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    allocatable: ResourceList = Field(default_factory=dict)
    gpu_model: Name | None = None
    domains: dict[Name, Name] = Field(
        default_factory=dict, description="level name -> domain name, explicit membership"
    )
    device_layout: Name | None = None
    devices: DeviceLayout | None = None

    @model_validator(mode="after")
    def _one_device_source(self) -> Node:
        if self.device_layout is not None and self.devices is not None:
            raise ValueError("give either device_layout (a template name) or devices, not both")
        return self

    @property
    def has_device_topology(self) -> bool:
        """True if the PCIe/NUMA layout is declared (template or explicit)."""
        return self.device_layout is not None or self.devices is not None


class QueuePreemption(Frozen):
    """Whom a queue's pending gangs may evict, in Kueue's terms (ClusterQueue
    ``spec.preemption``; in force only when :attr:`PreemptionSettings.enabled`).

    ``within_queue`` (Kueue ``withinClusterQueue``): ``never``, or ``lower_priority`` —
    running gangs of the same queue with a strictly lower priority.
    ``reclaim`` (Kueue ``reclaimWithinCohort``; Volcano's ``reclaim`` action and Queue
    ``reclaimable``): a queue whose running usage plus the gang stays within its
    ``guaranteed`` amount may take back what other queues use above theirs: ``never``;
    ``lower_priority`` — only their gangs of strictly lower priority; ``any`` — whatever
    their priority. All queues form one cohort.
    ``reclaimable`` (Volcano Queue ``spec.reclaimable``, default true): may other queues
    reclaim from this one at all?
    """

    within_queue: Literal["never", "lower_priority"] = "never"
    reclaim: Literal["never", "lower_priority", "any"] = "never"
    reclaimable: bool = True


class Queue(Frozen):
    """A tenant queue (Volcano Queue, Kueue ClusterQueue, ElasticQuota).

    ``weight`` >= 0; 0 means served last, after every queue of positive weight (Kueue).
    ``guaranteed``: a fair-share floor per resource, lent to others while unused.
    ``max``: a hard cap per resource; a resource not named is not capped.
    ``preemption``: whom its gangs may evict (:class:`QueuePreemption`).
    """

    name: Name
    weight: float = Field(1.0, ge=0, le=1_000_000)
    guaranteed: ResourceList = Field(default_factory=dict)
    max: ResourceList = Field(default_factory=dict)
    preemption: QueuePreemption = Field(default_factory=QueuePreemption)

    @property
    def weight_milli(self) -> int:
        """The weight in thousandths, the integer the score and the model use."""
        return round(self.weight * 1000)


class Role(Frozen):
    """Identical pods of one gang, e.g. the 8 workers of a training job.

    ``requests`` per pod, in base units. ``min_member`` defaults to ``count`` when the gang
    is not elastic and to 0 when it is (docs/design.md); see :meth:`Gang.role_min`.
    ``pod_names`` (optional, ``count`` of them) are the real pod names when the gang comes
    from a cluster; otherwise pods are named ``{gang}-{role}-{i}``.
    """

    name: K8sName
    count: RoleCount
    min_member: NonNegativeInt | None = None
    requests: ResourceList = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    node_affinity: tuple[NodeSelectorTerm, ...] = Field(
        default=(), description="required node affinity terms, ORed (core/v1)"
    )
    tolerations: tuple[Toleration, ...] = ()
    topology: TopologyConstraint | None = None
    pod_names: tuple[K8sName, ...] | None = None

    def pod_name(self, gang: str, index: int) -> str:
        if self.pod_names is not None:
            return self.pod_names[index]
        return f"{gang}-{self.name}-{index}"

    def admits(self, node: Node) -> bool:
        """Node selector, required affinity and taints (not capacity): may a pod go here?"""
        if any(node.labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        if self.node_affinity and not any(t.matches(node.labels) for t in self.node_affinity):
            return False
        return all(
            taint.effect == "PreferNoSchedule"
            or any(tol.tolerates(taint) for tol in self.tolerations)
            for taint in node.taints
        )


class Gang(Frozen):
    """Pods placed all together or not at all (PodGroup).

    ``min_member`` (default: the full size) makes the gang elastic when below the full
    size: any size between it and the full size is accepted. ``gpu_models``: GPU models
    accepted for GPU pods (empty: any). ``joint``: how RDMA NICs pair with GPUs
    (docs/design.md, joint allocation). ``creation_time`` in seconds (any epoch).
    ``preemption_policy``: its PriorityClass's ``preemptionPolicy``; ``Never`` keeps it from
    evicting anyone, whatever its queue allows. ``expected_duration_s``: how long it is
    expected to run once started (s; a user's estimate, or Kubernetes
    ``activeDeadlineSeconds``), what backfilling onto held capacity needs
    (:mod:`gangplan.models.reservation`); None: unknown.
    """

    name: K8sName
    namespace: K8sName = "default"
    queue: Name
    priority: Priority = 0
    creation_time: float = Field(0.0, allow_inf_nan=False)
    roles: tuple[Role, ...] = Field(min_length=1)
    min_member: PositiveInt | None = None
    topology: TopologyConstraint | None = None
    joint: JointPolicy = "none"
    gpu_models: tuple[Name, ...] = ()
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    expected_duration_s: float | None = Field(None, gt=0, allow_inf_nan=False)

    @property
    def key(self) -> str:
        """``namespace/name``, unique in a snapshot (:func:`~gangplan.models.base.gang_key`)."""
        return gang_key(self.namespace, self.name)

    @property
    def size(self) -> int:
        """Full size: pods of all roles."""
        return sum(r.count for r in self.roles)

    @property
    def elastic(self) -> bool:
        return self.min_member is not None and self.min_member < self.size

    def role_min(self, role: Role) -> int:
        """A role's minimum: its own ``min_member``, else its count (0 if the gang is elastic)."""
        if role.min_member is not None:
            return role.min_member
        return 0 if self.elastic else role.count

    @property
    def min_size(self) -> int:
        """The fewest pods an admitted gang may have."""
        return max(self.min_member or self.size, sum(self.role_min(r) for r in self.roles))

    def role(self, name: str) -> Role:
        for r in self.roles:
            if r.name == name:
                return r
        raise KeyError(f"gang {self.key}: no role {name!r}")


class RunningPod(Frozen):
    """A pod already bound to ``node``. It stays unless preemption is on
    (:attr:`Snapshot.preemption`) and a pending gang may evict its gang
    (:mod:`gangplan.models.preemption`).

    ``devices``: the GPU and NIC ids it holds (device-plugin ids). When it requests GPUs
    (or NICs) but names none, the snapshot gives it the lowest-listed free GPUs (NICs) of
    its node.
    ``queue`` None: it counts toward no queue (and is not shared between queues).

    What preemption needs to know of its gang (pods of one gang should agree; where they do
    not, the gang takes the latest ``admitted``, the largest ``min_member`` and is
    preemptible only if all its pods are): ``admitted`` — when the gang was admitted (its
    pods started), in seconds on the clock of ``Gang.creation_time`` and
    :attr:`PreemptionSettings.now`; None: long ago (outside any grace period).
    ``min_member`` — the running gang's minimum (Volcano ``minAvailable``): an elastic gang
    may lose its pods above it; None: the gang is evicted whole or not at all.
    ``preemptible`` False — the gang never is a victim (annotation
    ``gangplan.io/preemptible: "false"``, Volcano ``volcano.sh/preemptable: "false"``,
    Koordinator's ``koordinator.sh/preemptible`` label, or a PodDisruptionBudget that allows
    no disruption).
    ``expected_end``: when the pod is expected to end (s, the same clock; its gang's start
    plus its expected duration), what reservations count on (:mod:`gangplan.models.
    reservation`); None: unknown.

    Where it may go if its gang moves (``gangplan replan``): ``node_selector``,
    ``node_affinity`` and ``tolerations`` — its own, as for a pending pod's role (a moved pod
    is placed under the rules it was scheduled by); ``owner`` — the controller that creates
    it again once evicted (:mod:`gangplan.models.owners`): a :class:`PodOwner`, ``"none"``
    for a bare pod (nothing recreates it), None when not stated.
    """

    name: K8sName
    namespace: K8sName = "default"
    gang: Name | None = None
    queue: Name | None = None
    priority: Priority = 0
    node: Name
    requests: ResourceList = Field(default_factory=dict)
    devices: tuple[Name, ...] = ()
    admitted: float | None = Field(None, allow_inf_nan=False)
    min_member: PositiveInt | None = None
    preemptible: bool = True
    expected_end: float | None = Field(None, allow_inf_nan=False)
    node_selector: dict[str, str] = Field(default_factory=dict)
    node_affinity: tuple[NodeSelectorTerm, ...] = Field(
        default=(), description="required node affinity terms, ORed (core/v1)"
    )
    tolerations: tuple[Toleration, ...] = ()
    owner: PodOwner | Literal["none"] | None = None

    @property
    def gang_key(self) -> str | None:
        """The key of its gang, ``namespace/gang``, or None when it belongs to no gang."""
        return None if self.gang is None else gang_key(self.namespace, self.gang)


# --------------------------------------------------------------------------- preemption


class PreemptionSettings(Frozen):
    """Whether this cycle may evict running gangs, and how carefully.

    ``enabled``: the queues' :class:`QueuePreemption` policies are in force (off: running
    pods are fixed; ``gangplan solve --preemption`` turns it on for a run). ``grace_s``: no
    gang is evicted within this many seconds of its own admission
    (``RunningPod.admitted``), so a gang admitted by one cycle is not evicted by the next
    (no ping-pong). ``now``: the cycle's clock, in seconds on the clock of
    ``Gang.creation_time``; None: the latest time the snapshot names (a creation or an
    admission).
    """

    enabled: bool = False
    grace_s: float = Field(300.0, ge=0, allow_inf_nan=False)
    now: float | None = Field(None, allow_inf_nan=False)


# --------------------------------------------------------------------------- the workload


class WorkloadShape(Frozen):
    """One pod shape of the workload that fragmentation is measured against (FGD's target
    workload, Weng et al., USENIX ATC '23, §3): what a pod of this shape asks and how often
    such pods come, relative to the other shapes (``weight``; ``p_m = weight / sum``).

    ``requests`` in base units, as a role's (the measure reads CPU and the GPU resource: a
    share of one GPU, below 1, or whole GPUs); ``gpu_models``: the GPU models such a pod
    accepts (empty: any).
    """

    requests: ResourceList = Field(default_factory=dict)
    gpu_models: tuple[Name, ...] = ()
    weight: int = Field(1, ge=1, le=1_000_000)


# --------------------------------------------------------------------------- the snapshot


def _map_gang_gpus(gang: dict[str, Any], mapping: dict[str, str], gpu: str) -> dict[str, Any]:
    """A gang whose GPU pods all ask one model-specific resource asks the GPU resource,
    accepting that model only (intersected with its own ``gpu_models``). A gang mixing
    model-specific and generic GPU requests, or two models, or a model its ``gpu_models``
    excludes, is left as written: :meth:`Snapshot.problems` reports it (``gpu_models`` is
    per gang, so it cannot say "A100 for this role, any for that one")."""
    roles = [r for r in gang.get("roles") or () if isinstance(r, dict)]
    used: set[str] = set()
    generic = False
    for role in roles:
        req = role.get("requests")
        if not isinstance(req, dict):
            continue
        used |= {mapping[k] for k in req if k in mapping}
        generic |= gpu in req
    own = list(gang.get("gpu_models") or ())
    if not used or generic or len(used) > 1 or (own and not used <= set(own)):
        return gang
    out_roles: list[Any] = []
    for role in gang.get("roles") or ():
        if isinstance(role, dict) and isinstance(role.get("requests"), dict):
            req = {(gpu if k in mapping else k): v for k, v in role["requests"].items()}
            role = {**role, "requests": req}
        out_roles.append(role)
    return {**gang, "roles": out_roles, "gpu_models": sorted(used)}


class Snapshot(Frozen):
    """Everything one scheduling cycle sees.

    Raises (on construction) :class:`pydantic.ValidationError` for malformed fields and for
    cross-reference problems (:meth:`problems`): sizes above the bounds of
    :mod:`gangplan.models.limits`, a queue, level, node, layout or device that does not
    exist, duplicate names, a device id used twice, device layouts whose counts disagree
    with ``allocatable``, fractional extended resources.
    """

    api_version: Literal["gangplan.io/v1alpha1"] = "gangplan.io/v1alpha1"
    resources: ResourceNames = Field(default_factory=ResourceNames)
    levels: tuple[Level, ...] = ()
    device_layouts: dict[Name, DeviceLayout] = Field(default_factory=dict)
    nodes: tuple[Node, ...] = ()
    queues: tuple[Queue, ...] = ()
    gangs: tuple[Gang, ...] = ()
    running: tuple[RunningPod, ...] = ()
    preemption: PreemptionSettings = Field(default_factory=PreemptionSettings)
    workload: tuple[WorkloadShape, ...] = Field(
        default=(),
        description="pod shapes fragmentation is measured against, with weights; empty: "
        "the snapshot's pending and running pods",
    )
    reservation: ReservationSettings = Field(default_factory=ReservationSettings)
    reservations: tuple[Reservation, ...] = ()
    """capacity held for starving gangs this cycle (:mod:`gangplan.models.reservation`)"""
    disruption_budgets: tuple[DisruptionBudget, ...] = ()
    """the cluster's PodDisruptionBudgets, as the running pods they select and the
    disruptions each allows now: what every wave of a move plan keeps to"""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _map_model_specific_gpus(cls, data: Any) -> Any:
        """Rewrite model-specific GPU resources (``nvidia.com/a100``) to the GPU resource, in
        nodes' allocatable, gangs' requests and running pods' requests alike."""
        if not isinstance(data, dict):
            return data
        names = data.get("resources") or {}
        if isinstance(names, ResourceNames):
            names = names.model_dump()
        mapping = names.get("gpu_model_resources") or {} if isinstance(names, dict) else {}
        if not mapping:
            return data
        gpu = names.get("gpu", "nvidia.com/gpu")
        data = dict(data)
        nodes = []
        for node in data.get("nodes") or ():
            if isinstance(node, dict) and isinstance(node.get("allocatable"), dict):
                alloc = dict(node["allocatable"])
                for res, model in mapping.items():
                    if res in alloc:
                        node = {**node, "gpu_model": node.get("gpu_model") or model}
                        alloc[gpu] = alloc.pop(res)
                node = {**node, "allocatable": alloc}
            nodes.append(node)
        data["nodes"] = nodes
        gangs = []
        for gang in data.get("gangs") or ():
            if isinstance(gang, dict):
                gang = _map_gang_gpus(gang, mapping, gpu)
            gangs.append(gang)
        data["gangs"] = gangs
        running = []
        for pod in data.get("running") or ():
            if isinstance(pod, dict) and isinstance(pod.get("requests"), dict):
                req = dict(pod["requests"])
                for res in mapping:
                    if res in req:
                        req[gpu] = req.pop(res)
                pod = {**pod, "requests": req}
            running.append(pod)
        data["running"] = running
        workload = []
        for entry in data.get("workload") or ():
            if isinstance(entry, dict) and isinstance(entry.get("requests"), dict):
                req = dict(entry["requests"])
                models = sorted({mapping[k] for k in req if k in mapping})
                if models and gpu not in req and len(models) == 1:
                    res = next(k for k in req if k in mapping)
                    req[gpu] = req.pop(res)
                    entry = {**entry, "requests": req, "gpu_models": models}
            workload.append(entry)
        if workload:
            data["workload"] = workload
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Snapshot:
        problems = self.problems()
        if problems:
            raise SnapshotError(problems)
        return self

    # ------------------------------------------------------------------ lookups

    @cached_property
    def node_by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    @cached_property
    def queue_by_name(self) -> dict[str, Queue]:
        return {q.name: q for q in self.queues}

    @cached_property
    def gang_by_key(self) -> dict[str, Gang]:
        return {g.key: g for g in self.gangs}

    @property
    def gpu(self) -> str:
        return self.resources.gpu

    @property
    def nic(self) -> str:
        return self.resources.nic

    @cached_property
    def level_names(self) -> tuple[str, ...]:
        return tuple(level.name for level in self.levels)

    def layout_of(self, node: Node) -> DeviceLayout:
        """The node's device tree: its template, its explicit devices, or the implicit one.

        An implicit layout is built when first asked for and shared by every node with the
        same GPU and NIC counts (at most ``MAX_DEVICES_PER_NODE`` of each, checked when the
        snapshot is built), so a 50,000-node pool names its devices once, not per node.
        """
        if node.devices is not None:
            return node.devices
        if node.device_layout is not None:
            return self.device_layouts[node.device_layout]
        counts = (
            node.allocatable.get(self.gpu, 0) // GPU_MILLI,
            node.allocatable.get(self.nic, 0) // GPU_MILLI,
        )
        layout = self._implicit_layouts.get(counts)
        if layout is None:
            layout = self._implicit_layouts[counts] = DeviceLayout.implicit(*counts)
        return layout

    @cached_property
    def _implicit_layouts(self) -> dict[tuple[int, int], DeviceLayout]:
        return {}

    def domain_name(self, node: Node, level: Level) -> str | None:
        """The node's domain name at ``level`` (explicit membership first, then its label)."""
        if level.name in node.domains:
            return node.domains[level.name]
        if level.node_label is not None:
            return node.labels.get(level.node_label)
        return None

    # ------------------------------------------------------------------ derived state

    @cached_property
    def _derived(self) -> FreeCapacity:
        return derive_free(self)

    def free(self, node: str) -> NodeFree:
        """What running pods leave on ``node``, clamped at zero (never negative)."""
        return self._derived.free[node]

    def free_after(self, node: str, evicted: Collection[tuple[str, str]]) -> NodeFree:
        """What the running pods of ``node`` leave once the pods ``evicted`` (``(namespace,
        name)`` pairs; others are ignored) are gone: each pod kept holds the very devices it
        holds now (:func:`gangplan.models.free.free_after`)."""
        if not evicted:
            return self.free(node)
        return free_after(self, self.node_by_name[node], evicted)

    def with_preemption(self, enabled: bool = True) -> Snapshot:
        """This snapshot with preemption turned on (or off), everything else shared (what
        ``gangplan solve --preemption`` runs on)."""
        settings = self.preemption.model_copy(update={"enabled": enabled})
        out = self.model_copy(update={"preemption": settings})
        out.__dict__.pop("preemption_rules", None)  # rules read the setting: derive anew
        return out

    @cached_property
    def preemption_rules(self) -> PreemptionRules:
        """Who may evict whom in this snapshot (:class:`~gangplan.models.preemption.
        PreemptionRules`), built once."""
        return PreemptionRules(self)

    @cached_property
    def reservation_rules(self) -> ReservationRules:
        """What the snapshot's reservations allow (:class:`~gangplan.models.reservation.
        ReservationRules`), built once."""
        return ReservationRules(self)

    def warnings(self) -> list[str]:
        """Inconsistencies that are not errors, each naming the node and resource or label."""
        return list(self._derived.warnings)

    def running_on(self, node: str) -> list[RunningPod]:
        return self._running_by_node.get(node, [])

    @cached_property
    def _running_by_node(self) -> dict[str, list[RunningPod]]:
        out: dict[str, list[RunningPod]] = defaultdict(list)
        for pod in self.running:
            out[pod.node].append(pod)
        return dict(out)

    # ------------------------------------------------------------------ checks

    def problems(self) -> list[Problem]:
        """Every cross-reference problem at once (see the class docstring)."""
        return list(snapshot_problems(self))
