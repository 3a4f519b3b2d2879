"""gangplan's data: the snapshot a cycle works from, the instance file, the plan.

Pydantic v2, frozen, names not indices. Knows nothing of OR-Tools, networkx or Kubernetes.
Every public name is exported here; the modules:

- ``base``: the frozen base model, the name types, ``GPU_MILLI`` and the gang key;
- ``quantity``: Kubernetes quantities parsed into base units (``ResourceList``);
- ``snapshot``: the snapshot's types (nodes, devices, levels, queues, gangs, running pods);
- ``checks``: the snapshot's cross-checks (``Problem``, ``SnapshotError``);
- ``free``: what running pods leave free on each node (``NodeFree``) and the warnings;
- ``limits``: the bounds on sizes that no real cluster reaches (``MAX_NODES``, ...);
- ``instance``: the instance file's schema and its expansion into a snapshot;
- ``preemption``: who may evict whom (``PreemptionRules``, ``RunningGang``);
- ``reservation``: capacity held for starving gangs, and who may backfill it
  (``Reservation``, ``ReservationRules``);
- ``elastic``: a running elastic gang's room to grow (``growth_gang``, ``growing_nodes``);
- ``plan``: the plan a cycle returns;
- ``moves``: a move plan in waves (``gangplan replan``);
- ``owners``: who recreates an evicted running pod (``PodOwner``, ``why_not_recreated``).
"""

from gangplan.models.base import API_VERSION, GPU_MILLI, gang_key
from gangplan.models.checks import Problem, SnapshotError
from gangplan.models.elastic import (
    growing_nodes,
    growth_gang,
    minimum_counts,
    minimum_gang,
    running_minimum_gpu,
)
from gangplan.models.free import NodeFree, PodHold
from gangplan.models.instance import (
    InstanceError,
    InstanceFile,
    NodePool,
    SpreadRule,
    instance_from_snapshot,
    load_instance,
)
from gangplan.models.limits import (
    MAX_DEVICES,
    MAX_DEVICES_PER_NODE,
    MAX_NAME_LENGTH,
    MAX_NODES,
    MAX_PODS,
    MAX_PODS_PER_GANG,
)
from gangplan.models.moves import (
    DEFAULT_MAX_MOVING_PER_NODE,
    DisruptionBudget,
    GangMove,
    LeftOut,
    MovedPod,
    MovePlan,
    Wave,
    WaveLimits,
)
from gangplan.models.owners import RECREATING, PodOwner, why_not_recreated
from gangplan.models.plan import (
    NOT_OPTIMISED,
    Eviction,
    GangOutcome,
    PendingKind,
    PendingReason,
    Plan,
    PlanSummary,
    PodPlacement,
    ReasonFamily,
    TierReport,
    open_status,
)
from gangplan.models.preemption import PreemptionKind, PreemptionRules, RunningGang
from gangplan.models.quantity import QuantityError, ResourceList, format_quantity, parse_quantity
from gangplan.models.reservation import (
    HeldNode,
    Reservation,
    ReservationRules,
    ReservationSettings,
)
from gangplan.models.snapshot import (
    DeviceLayout,
    Gang,
    JointPolicy,
    Level,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NumaNode,
    PcieSwitch,
    PreemptionPolicy,
    PreemptionSettings,
    Queue,
    QueuePreemption,
    ResourceNames,
    Role,
    RunningPod,
    Snapshot,
    Taint,
    Toleration,
    TopologyConstraint,
    WorkloadShape,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_MAX_MOVING_PER_NODE",
    "GPU_MILLI",
    "MAX_DEVICES",
    "MAX_DEVICES_PER_NODE",
    "MAX_NAME_LENGTH",
    "MAX_NODES",
    "MAX_PODS",
    "MAX_PODS_PER_GANG",
    "NOT_OPTIMISED",
    "RECREATING",
    "DeviceLayout",
    "DisruptionBudget",
    "Eviction",
    "Gang",
    "GangMove",
    "GangOutcome",
    "HeldNode",
    "InstanceError",
    "InstanceFile",
    "JointPolicy",
    "LeftOut",
    "Level",
    "MovePlan",
    "MovedPod",
    "Node",
    "NodeFree",
    "NodePool",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NumaNode",
    "PcieSwitch",
    "PendingKind",
    "PendingReason",
    "Plan",
    "PlanSummary",
    "PodHold",
    "PodOwner",
    "PodPlacement",
    "PreemptionKind",
    "PreemptionPolicy",
    "PreemptionRules",
    "PreemptionSettings",
    "Problem",
    "QuantityError",
    "Queue",
    "QueuePreemption",
    "ReasonFamily",
    "Reservation",
    "ReservationRules",
    "ReservationSettings",
    "ResourceList",
    "ResourceNames",
    "Role",
    "RunningGang",
    "RunningPod",
    "Snapshot",
    "SnapshotError",
    "SpreadRule",
    "Taint",
    "TierReport",
    "Toleration",
    "TopologyConstraint",
    "Wave",
    "WaveLimits",
    "WorkloadShape",
    "format_quantity",
    "gang_key",
    "growing_nodes",
    "growth_gang",
    "instance_from_snapshot",
    "load_instance",
    "minimum_counts",
    "minimum_gang",
    "open_status",
    "parse_quantity",
    "running_minimum_gpu",
    "why_not_recreated",
]
