"""Bounds on sizes that no real cluster reaches, so that a small hostile file (``count:
1000000000``, ``nvidia.com/gpu: 100Mi``, a name pattern of width 2,000,000) is refused with
the bound named, instead of running the process out of memory.

The source is Kubernetes' own documented limits (kubernetes.io, "Considerations for large
clusters"): a cluster of at most 5,000 nodes, 110 pods per node, 150,000 pods in all and
300,000 containers. gangplan's bounds are generous multiples of those, so that no real
cluster meets them, and low enough that a snapshot near them still fits in memory:

====================  ==========  ===================================================
bound                 value       why
====================  ==========  ===================================================
MAX_NODES             100,000     20 x Kubernetes' 5,000 nodes
MAX_PODS              1,000,000   pending and running pods together; 6.7 x 150,000
MAX_PODS_PER_GANG     150,000     a gang as large as Kubernetes' whole cluster
MAX_DEVICES_PER_NODE  1,024       GPUs (or NICs) of one node: 8 GPUs each shared 128
                                  ways by time-slicing, which advertises every share
MAX_DEVICES           2,000,000   GPU and NIC devices in all: 100,000 nodes x 8 + 8,
                                  and headroom
MAX_NAME_LENGTH       253         a Kubernetes object name (RFC 1123 subdomain)
====================  ==========  ===================================================

Each bound is inclusive (a cluster of exactly ``MAX_NODES`` nodes is accepted).
:func:`too_many` writes the message every refusal uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, Field

__all__ = [
    "MAX_DEVICES",
    "MAX_DEVICES_PER_NODE",
    "MAX_NAME_LENGTH",
    "MAX_NODES",
    "MAX_PODS",
    "MAX_PODS_PER_GANG",
    "NodeCount",
    "PodCount",
    "RoleCount",
    "too_many",
]

MAX_NODES = 100_000
"""Nodes in a snapshot (node pools expanded)."""
MAX_PODS = 1_000_000
"""Pods in a snapshot: every pending gang's full size plus the running pods (replicas
expanded)."""
MAX_PODS_PER_GANG = 150_000
"""Pods in one gang, and so in one role."""
MAX_DEVICES_PER_NODE = 1_024
"""Devices of the GPU resource, and of the NIC resource, on one node (``allocatable``)."""
MAX_DEVICES = 2_000_000
"""GPU and NIC devices of all nodes together."""
MAX_NAME_LENGTH = 253
"""Characters in a name (Kubernetes object names: RFC 1123 subdomains)."""

_WHAT = {
    "MAX_NODES": ("nodes", "nodes in a snapshot", MAX_NODES),
    "MAX_PODS": ("pods", "pods in a snapshot", MAX_PODS),
    "MAX_PODS_PER_GANG": ("pods", "pods in one gang", MAX_PODS_PER_GANG),
    "MAX_DEVICES_PER_NODE": (
        "devices",
        "devices of one resource on a node",
        MAX_DEVICES_PER_NODE,
    ),
    "MAX_DEVICES": ("devices", "GPU and NIC devices in a snapshot", MAX_DEVICES),
}


def too_many(bound: str, got: int) -> str | None:
    """The refusal for ``got`` against the bound named ``bound`` (e.g. ``"MAX_NODES"``), or
    None when ``got`` is within it.

    ``too_many("MAX_NODES", 10**9)`` is ``"1,000,000,000 nodes: more than gangplan accepts
    (at most 100,000 nodes in a snapshot, MAX_NODES in gangplan.models.limits)"``.
    """
    unit, what, limit = _WHAT[bound]
    if got <= limit:
        return None
    return (
        f"{got:,} {unit}: more than gangplan accepts (at most {limit:,} {what}, {bound} in "
        "gangplan.models.limits)"
    )


def _within(bound: str) -> Callable[[int], int]:
    def check(value: int) -> int:
        msg = too_many(bound, value)
        if msg is not None:
            raise ValueError(msg)
        return value

    return check


NodeCount = Annotated[
    int,
    Field(gt=0, json_schema_extra={"maximum": MAX_NODES}),
    AfterValidator(_within("MAX_NODES")),
]
"""A positive count of nodes, at most :data:`MAX_NODES` (a node pool's ``count``)."""
PodCount = Annotated[
    int,
    Field(gt=0, json_schema_extra={"maximum": MAX_PODS}),
    AfterValidator(_within("MAX_PODS")),
]
"""A positive count of pods, at most :data:`MAX_PODS` (a running entry's ``replicas``)."""
RoleCount = Annotated[
    int,
    Field(gt=0, json_schema_extra={"maximum": MAX_PODS_PER_GANG}),
    AfterValidator(_within("MAX_PODS_PER_GANG")),
]
"""A positive count of one role's pods, at most :data:`MAX_PODS_PER_GANG`."""
