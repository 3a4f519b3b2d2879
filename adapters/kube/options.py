"""How a Kubernetes dump is read (:class:`KubeOptions`) and the one error reading raises."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KubeInputError", "KubeOptions"]


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
