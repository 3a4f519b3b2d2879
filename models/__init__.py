"""gangplan's data: the snapshot a cycle works from, the instance file, the plan.

Pydantic v2, frozen, names not indices. Knows nothing of OR-Tools, networkx or Kubernetes.
"""

from gangplan.models.base import API_VERSION, GPU_MILLI, gang_key
from gangplan.models.checks import Problem, SnapshotError
from gangplan.models.free import NodeFree
from gangplan.models.instance import (
    InstanceError,
    InstanceFile,
    NodePool,
    SpreadRule,
    instance_from_snapshot,
    load_instance,
)
from gangplan.models.plan import (
    GangOutcome,
    PendingKind,
    PendingReason,
    Plan,
    PlanSummary,
    PodPlacement,
    TierReport,
)
from gangplan.models.quantity import QuantityError, ResourceList, format_quantity, parse_quantity
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
    Queue,
    ResourceNames,
    Role,
    RunningPod,
    Snapshot,
    Taint,
    Toleration,
    TopologyConstraint,
)

__all__ = [
    "API_VERSION",
    "GPU_MILLI",
    "DeviceLayout",
    "Gang",
    "GangOutcome",
    "InstanceError",
    "InstanceFile",
    "JointPolicy",
    "Level",
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
    "PodPlacement",
    "Problem",
    "QuantityError",
    "Queue",
    "ResourceList",
    "ResourceNames",
    "Role",
    "RunningPod",
    "Snapshot",
    "SnapshotError",
    "SpreadRule",
    "Taint",
    "TierReport",
    "Toleration",
    "TopologyConstraint",
    "format_quantity",
    "gang_key",
    "instance_from_snapshot",
    "load_instance",
    "parse_quantity",
]
