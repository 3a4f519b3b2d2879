"""The bounds of :mod:`gangplan.models.limits`, applied object by object as a cluster is read.

Both readers of Kubernetes objects — ``gangplan convert k8s`` on a dump
(:mod:`gangplan.adapters.kube.read`) and the live snapshot of ``gangplan serve``
(:mod:`gangplan.adapters.serve.snapshot`) — go through these checks, so an object one of
them refuses the other refuses too, with the same words:

* :func:`node_devices_problem`: a node advertising more devices of the GPU or the NIC
  resource than :data:`~gangplan.models.limits.MAX_DEVICES_PER_NODE` (a device plugin gone
  wrong: ``nvidia.com/gpu: "1e9"``) is skipped before any device id is made for it — 10^9
  ids would not fit in memory;
* :class:`SnapshotBounds`: the snapshot-wide bounds (``MAX_NODES``, ``MAX_DEVICES``,
  ``MAX_PODS``) counted as nodes, running pods and gangs are added; the first object that
  would pass one is skipped, and so is every later one that would (what came first stays).

An object past a bound is listed in the :class:`~gangplan.adapters.kube.summary.ReadSummary`
as not read (``invalid object``), with the field, the amount and the bound, e.g.
``status.allocatable.nvidia.com/gpu: 1,000,000,000 devices: more than gangplan accepts (at
most 1,024 devices of one resource on a node, MAX_DEVICES_PER_NODE in
gangplan.models.limits)``; the rest of the cluster is read as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gangplan.models import GPU_MILLI
from gangplan.models.limits import MAX_DEVICES_PER_NODE, too_many

__all__ = ["SnapshotBounds", "node_device_count", "node_devices_problem"]


def node_device_count(allocatable: Mapping[str, int], *, gpu: str, nic: str) -> int:
    """The GPU and NIC devices a node's ``allocatable`` (base units: 1,000 per device)
    gives it, each resource counted up to :data:`MAX_DEVICES_PER_NODE` (a node past it is
    refused by :func:`node_devices_problem` already)."""
    return sum(
        min(int(allocatable.get(res, 0)) // GPU_MILLI, MAX_DEVICES_PER_NODE)
        for res in dict.fromkeys((gpu, nic))
    )


def node_devices_problem(
    allocatable: Mapping[str, int], *, gpu: str, nic: str, field: str = "status.allocatable"
) -> str | None:
    """Why a node with ``allocatable`` (base units) is refused, or None: more devices of
    ``gpu`` or ``nic`` than :data:`MAX_DEVICES_PER_NODE`. ``field``: where the amounts
    are, for the message."""
    for res in dict.fromkeys((gpu, nic)):
        msg = too_many("MAX_DEVICES_PER_NODE", int(allocatable.get(res, 0)) // GPU_MILLI)
        if msg is not None:
            return f"{field}.{res}: {msg}"
    return None


@dataclass
class SnapshotBounds:
    """What a reader has put in its snapshot so far, against the snapshot-wide bounds.

    Each ``take_*`` counts the object in and returns None, or returns the refusal (and
    counts nothing) when the object would take the snapshot past a bound."""

    nodes: int = 0
    devices: int = 0
    pods: int = 0

    def take_node(self, devices: int) -> str | None:
        """One more node of ``devices`` GPU and NIC devices."""
        if msg := too_many("MAX_NODES", self.nodes + 1):
            return msg
        if msg := too_many("MAX_DEVICES", self.devices + devices):
            return f"{devices:,} more devices would make {msg}"
        self.nodes += 1
        self.devices += devices
        return None

    def take_pods(self, pods: int) -> str | None:
        """``pods`` more pods (one running pod, or a pending gang's full size)."""
        if msg := too_many("MAX_PODS", self.pods + pods):
            return f"{pods:,} more pods would make {msg}"
        self.pods += pods
        return None
