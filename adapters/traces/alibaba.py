"""The Alibaba GPU cluster trace ``cluster-trace-gpu-v2023`` ("openb", the FGD paper's trace,
USENIX ATC '23) as an instance: ``gangplan convert alibaba-gpu``.

Source and terms: https://github.com/alibaba/clusterdata, folder ``cluster-trace-gpu-v2023``
(use for research or study; cite Weng et al., "Beware of Fragmentation: Scheduling
GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC '23). Instances made
from it are generated when needed and never committed (docs/design.md).

Reading (:func:`read_openb_nodes`, :func:`read_openb_pods`) returns plain dataclasses in the
trace's own units, so the replay can use them without building a snapshot. Conversion
(:func:`convert_openb`):

============================  ====================================================================
trace                         instance
============================  ====================================================================
node ``sn``                   node name
``cpu_milli``                 ``allocatable.cpu`` (milli-CPU, as is)
``memory_mib``                ``allocatable.memory`` (MiB x 2^20 bytes)
``gpu``, ``model``            ``allocatable[nvidia.com/gpu]`` (whole GPUs), ``gpu_model``, and the
                              label ``alibabacloud.com/gpu-card-model`` the trace's node YAML uses;
                              no device layout (the trace has no PCIe/NUMA/NIC data: the implicit
                              layout, no joint allocation). CPU-only nodes are kept.
pod                           a pending gang of one pod (gang and pod named ``name``), role ``main``
``cpu_milli``, ``memory_mib`` the pod's ``cpu`` and ``memory`` requests
``num_gpu``, ``gpu_milli``    a GPU share ``"<gpu_milli>m"`` when ``num_gpu == 1`` and
                              ``gpu_milli < 1000`` (docs/design.md "GPU share"); ``num_gpu``
                              whole GPUs otherwise; no GPU request when ``num_gpu == 0``
                              (CPU-only pods kept)
``gpu_spec``                  ``gpu_models`` (``|``-separated; empty: any model)
``qos``                       ``priority`` (:data:`QOS_PRIORITY`), unless ``use_qos=False``
``creation_time``             ``creation_time`` (s, the trace's relative clock)
``pod_phase``, ``scheduled_   not used: every pod of the list is pending, as the FGD simulator
time``, ``deletion_time``     replays the list from an empty cluster
============================  ====================================================================

What is synthetic (and said so in the instance's ``metadata.synthetic``):

* **Leaves.** The trace has no network topology. Nodes are grouped by machine type (GPU
  model and GPU count; CPU-only nodes are one type) in the order each type first appears in
  the CSV, kept in CSV order inside a type, and cut into leaves of ``leaf_size`` nodes; each
  type starts a new leaf, so a leaf never mixes types (racks are usually filled with one
  server model, bought and installed together). Leaves are ``leaf-000``, ``leaf-001``, ...
  in that order, on the label ``network.gangplan.io/leaf`` (level ``leaf``).
* **Queue.** The trace has no tenants: every pod is charged to one queue, ``openb``
  (weight 1, no guaranteed amount, no cap). One queue per QoS class was rejected: QoS is a
  service class, not a tenant, and a fair split between classes would fight the priorities.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

from gangplan.adapters.traces.common import (
    Converted,
    raise_problems,
    read_csv,
    snapshot_of,
    unique,
)
from gangplan.models import API_VERSION, GPU_MILLI, format_quantity
from gangplan.models.quantity import CPU, MEMORY

__all__ = [
    "GPU_MODEL_LABEL",
    "LEAF_LABEL",
    "NODE_COLUMNS",
    "POD_COLUMNS",
    "POD_OPTIONAL_COLUMNS",
    "QOS_PRIORITY",
    "QUEUE",
    "OpenbNode",
    "OpenbPod",
    "assign_leaves",
    "convert_openb",
    "node_allocatable",
    "openb_instance",
    "pod_requests",
    "read_openb_nodes",
    "read_openb_pods",
]

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
"""``openb_node_list_*.csv`` columns (trace README)."""
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
"""Columns every ``openb_pod_list_*.csv`` has (the ``multigpu*`` lists have only these)."""
POD_OPTIONAL_COLUMNS = (
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
"""Columns of the other pod lists (``default``, ``cpu*``, ``gpushare*``, ``gpuspec*``)."""

QOS_PRIORITY = {"LS": 9000, "Guaranteed": 9000, "Burstable": 7000, "BE": 5000}
"""Pod priority per ``qos`` class, in Koordinator's priority bands (Koordinator is
Alibaba's open-source co-location scheduler, whose QoS classes LS and BE the trace uses):
LS (latency-sensitive) and Kubernetes ``Guaranteed`` -> ``koord-prod`` (9000), Kubernetes
``Burstable`` -> ``koord-mid`` (7000), BE (best effort) -> ``koord-batch`` (5000). So LS and
Guaranteed come before Burstable, and Burstable before BE, in the score's priority order.
Pods of a list without a ``qos`` column get priority 0."""

QUEUE = "openb"
"""The one queue every pod is charged to (the trace has no tenants)."""
LEAF_LABEL = "network.gangplan.io/leaf"
GPU_MODEL_LABEL = "alibabacloud.com/gpu-card-model"
"""The GPU model label of the trace's own node YAML (``node_yaml/``)."""
MIB = 2**20
SOURCE_URL = "https://github.com/alibaba/clusterdata/tree/master/cluster-trace-gpu-v2023"
LICENSE = (
    "no license file; the clusterdata README allows use for research or study; cite the FGD "
    "paper (Weng et al., USENIX ATC '23)"
)


@dataclass(frozen=True, slots=True)
class OpenbNode:
    """One row of ``openb_node_list_*.csv`` in the trace's units.

    ``cpu_milli`` milli-CPU; ``memory_mib`` MiB; ``gpus`` whole GPUs; ``model`` the GPU
    type (``G1``..``G3`` are undisclosed internal codes) or None for a CPU-only node.
    """

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str | None

    @property
    def machine_type(self) -> tuple[str, int]:
        """``(model, gpus)``; ``("", 0)`` for CPU-only nodes (the leaf grouping key)."""
        return (self.model or "", self.gpus)


@dataclass(frozen=True, slots=True)
class OpenbPod:
    """One row of ``openb_pod_list_*.csv`` in the trace's units.

    ``cpu_milli`` milli-CPU; ``memory_mib`` MiB; ``num_gpu`` GPUs (0..8); ``gpu_milli`` the
    share of one GPU in milli-GPU (meaningful when ``num_gpu == 1``); ``gpu_spec`` accepted
    GPU models (empty: any); ``qos`` LS / BE / Burstable / Guaranteed; times in seconds of
    the trace's relative clock (None when the list has no such column or the cell is
    empty; ``creation_time`` then falls back to the row number, see ``arrival``).
    """

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...] = ()
    qos: str | None = None
    pod_phase: str | None = None
    creation_time: int | None = None
    deletion_time: int | None = None
    scheduled_time: int | None = None
    row: int = 0

    @property
    def is_share(self) -> bool:
        """True for a GPU-sharing pod: one GPU, below 1000 milli-GPU."""
        return self.num_gpu == 1 and self.gpu_milli < GPU_MILLI

    @property
    def gpu_request_milli(self) -> int:
        """Milli-GPU the pod asks in all: ``gpu_milli`` for a share, else 1000 per GPU."""
        return self.gpu_milli if self.is_share else GPU_MILLI * self.num_gpu

    @property
    def arrival(self) -> tuple[int, int]:
        """Sort key of arrival: ``creation_time`` (row number when absent), then row."""
        return (self.creation_time if self.creation_time is not None else self.row, self.row)


# --------------------------------------------------------------------------- reading


def read_openb_nodes(path: str | Path) -> list[OpenbNode]:
    """Read a node list (``sn,cpu_milli,memory_mib,gpu,model``), in file order.

    Raises:
        InputError: missing file, wrong header, or bad cells (each with row and column):
            non-integers, negative amounts, a GPU node without a model, a CPU-only node with
            one, duplicate node names.
    """
    source, _, rows, problems = read_csv(path, NODE_COLUMNS)
    nodes: list[OpenbNode] = []
    first_row: dict[str, int] = {}
    for r in rows:
        name = r.text("sn")
        if not name:
            r.fail("sn", "empty node name")
        elif name in first_row:
            r.fail("sn", f"duplicate node name {name!r} (first at row {first_row[name]})")
        first_row.setdefault(name, r.row)
        gpus = r.integer("gpu")
        model = r.text("model") or None
        if gpus and model is None:
            r.fail("model", f"empty, but the node has {gpus} GPUs (name its GPU type)")
        if not gpus and model is not None:
            r.fail("model", f"{model!r} on a node with 0 GPUs (leave it empty)")
        nodes.append(
            OpenbNode(
                name=name,
                cpu_milli=r.integer("cpu_milli"),
                memory_mib=r.integer("memory_mib"),
                gpus=gpus,
                model=model if gpus else None,
            )
        )
    raise_problems(source, problems)
    return nodes


def read_openb_pods(path: str | Path) -> list[OpenbPod]:
    """Read a pod list, in file order (any of ``openb_pod_list_*.csv``).

    Checks: ``num_gpu`` 0..8 (no node of the trace has more); ``gpu_milli`` 0 when
    ``num_gpu`` is 0, 1..1000 when it is 1, and 0..1000 otherwise (the trace writes 1000;
    multi-GPU pods take whole GPUs either way); ``qos`` one of :data:`QOS_PRIORITY`.

    Raises:
        InputError: missing file, wrong header, or bad cells (each with row and column).
    """
    source, _, rows, problems = read_csv(path, POD_COLUMNS, POD_OPTIONAL_COLUMNS)
    pods: list[OpenbPod] = []
    first_row: dict[str, int] = {}
    for r in rows:
        name = r.text("name")
        if not name:
            r.fail("name", "empty pod name")
        elif name in first_row:
            r.fail("name", f"duplicate pod name {name!r} (first at row {first_row[name]})")
        first_row.setdefault(name, r.row)
        num_gpu = r.integer("num_gpu", maximum=8)
        gpu_milli = r.integer("gpu_milli", maximum=GPU_MILLI)
        if num_gpu == 0 and gpu_milli:
            r.fail("gpu_milli", f"{gpu_milli} on a pod with num_gpu 0 (accepted: 0)")
        if num_gpu == 1 and gpu_milli == 0:
            r.fail("gpu_milli", "0 on a pod with num_gpu 1 (accepted: 1..1000)")
        qos = r.text("qos") or None
        if qos is not None and qos not in QOS_PRIORITY:
            r.fail("qos", f"unknown QoS class {qos!r} (accepted: {', '.join(QOS_PRIORITY)})")
        spec = r.text("gpu_spec")
        times = {
            col: (r.integer(col) if r.text(col) else None)
            for col in ("creation_time", "deletion_time", "scheduled_time")
        }
        pods.append(
            OpenbPod(
                name=name,
                cpu_milli=r.integer("cpu_milli"),
                memory_mib=r.integer("memory_mib"),
                num_gpu=num_gpu,
                gpu_milli=gpu_milli,
                gpu_spec=tuple(unique(m.strip() for m in spec.split("|") if m.strip())),
                qos=qos,
                pod_phase=r.text("pod_phase") or None,
                row=r.row,
                **times,
            )
        )
    raise_problems(source, problems)
    return pods


# --------------------------------------------------------------------------- converting


def assign_leaves(nodes: Sequence[OpenbNode], leaf_size: int) -> list[str]:
    """The leaf of each node (same order as ``nodes``), by the module's rule: machine types
    in order of first appearance, CSV order inside a type, ``leaf_size`` nodes per leaf,
    each type starting a new leaf.

    Raises:
        ValueError: ``leaf_size`` < 1.
    """
    if leaf_size < 1:
        raise ValueError(f"leaf size must be >= 1 (got {leaf_size})")
    types = {t: i for i, t in enumerate(unique(n.machine_type for n in nodes))}
    order = sorted(range(len(nodes)), key=lambda i: (types[nodes[i].machine_type], i))
    leaf_of = [""] * len(nodes)
    leaf = 0
    for _, members in groupby(order, key=lambda i: nodes[i].machine_type):
        block = list(members)
        for k in range(0, len(block), leaf_size):
            for i in block[k : k + leaf_size]:
                leaf_of[i] = f"leaf-{leaf:03d}"
            leaf += 1
    return leaf_of


def node_allocatable(node: OpenbNode, gpu_resource: str = "nvidia.com/gpu") -> dict[str, str]:
    """A node's allocatable as quantity strings (CPU in milli-CPU, memory from MiB)."""
    out = {
        CPU: format_quantity(CPU, node.cpu_milli),
        MEMORY: format_quantity(MEMORY, node.memory_mib * MIB),
    }
    if node.gpus:
        out[gpu_resource] = str(node.gpus)
    return out


def pod_requests(pod: OpenbPod, gpu_resource: str = "nvidia.com/gpu") -> dict[str, str]:
    """A pod's requests as quantity strings: a share ``"460m"`` when it shares one GPU,
    whole GPUs otherwise, nothing for the GPU when it asks none."""
    out = {
        CPU: format_quantity(CPU, pod.cpu_milli),
        MEMORY: format_quantity(MEMORY, pod.memory_mib * MIB),
    }
    if pod.num_gpu:
        out[gpu_resource] = format_quantity(gpu_resource, pod.gpu_request_milli)
    return out


def openb_instance(
    nodes: Sequence[OpenbNode],
    pods: Sequence[OpenbPod],
    *,
    leaf_size: int = 16,
    limit: int | None = None,
    use_qos: bool = True,
    name: str = "alibaba-openb",
    sources: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The instance data (a YAML/JSON-ready dict) for a node list and a pod list.

    Args:
        leaf_size: nodes per leaf (see the module docstring).
        limit: keep only the first ``limit`` pods by ``creation_time`` (ties in file order).
        use_qos: map ``qos`` to priority (:data:`QOS_PRIORITY`); False: priority 0 for all
            (as the FGD simulator, which ignores QoS).
        name: ``metadata.name``.
        sources: file names to record in ``metadata.source``.
    """
    gpu = "nvidia.com/gpu"
    leaves = assign_leaves(nodes, leaf_size)
    node_data = []
    for node, leaf in zip(nodes, leaves, strict=True):
        labels = {LEAF_LABEL: leaf}
        if node.model:
            labels[GPU_MODEL_LABEL] = node.model
        entry: dict[str, Any] = {
            "name": node.name,
            "labels": labels,
            "allocatable": node_allocatable(node, gpu),
        }
        if node.model:
            entry["gpu_model"] = node.model
        node_data.append(entry)
    chosen = sorted(pods, key=lambda p: p.arrival)
    if limit is not None:
        chosen = chosen[:limit]
    gangs = []
    for pod in chosen:
        gang: dict[str, Any] = {"name": pod.name, "queue": QUEUE}
        if use_qos and pod.qos is not None:
            gang["priority"] = QOS_PRIORITY[pod.qos]
        gang["creation_time"] = pod.arrival[0]
        if pod.num_gpu and pod.gpu_spec:
            gang["gpu_models"] = list(pod.gpu_spec)
        gang["roles"] = [
            {
                "name": "main",
                "count": 1,
                "requests": pod_requests(pod, gpu),
                "pod_names": [pod.name],
            }
        ]
        gangs.append(gang)
    n_leaves = len(set(leaves))
    metadata: dict[str, Any] = {
        "name": name,
        "description": (
            f"Alibaba GPU trace (openb): {len(nodes)} nodes, {len(gangs)} pods as pending "
            "gangs of one pod"
        ),
        "source": {
            "trace": "Alibaba cluster-trace-gpu-v2023 (openb)",
            "url": SOURCE_URL,
            "license": LICENSE,
            **(sources or {}),
        },
        "synthetic": [
            f"network topology: the trace has none; nodes grouped by machine type (GPU model "
            f"and count) in order of first appearance, CSV order inside a type, {leaf_size} "
            f"nodes per leaf, each type starting a new leaf ({n_leaves} leaves)",
            f"queue: the trace has no tenants; every pod is charged to queue {QUEUE!r}",
            "every pod of the list is pending (pod_phase, scheduled_time and deletion_time "
            "are not used)",
        ],
        "priority": (
            {"from": "qos", **QOS_PRIORITY} if use_qos else {"from": "none (qos ignored)"}
        ),
    }
    if limit is not None:
        metadata["limit"] = limit
    return {
        "apiVersion": API_VERSION,
        "kind": "Instance",
        "metadata": metadata,
        "resources": {"gpu": gpu},
        "levels": [{"name": "leaf", "node_label": LEAF_LABEL}],
        "nodes": node_data,
        "queues": [{"name": QUEUE, "weight": 1}],
        "gangs": gangs,
    }


def convert_openb(
    nodes_csv: str | Path,
    pods_csv: str | Path,
    *,
    leaf_size: int = 16,
    limit: int | None = None,
    use_qos: bool = True,
) -> Converted:
    """Read both CSV files and convert them (see :func:`openb_instance`); the result holds
    the instance data, the validated snapshot and warnings (e.g. ``gpu_spec`` naming a GPU
    model no node has, so those pods never fit).

    Raises:
        InputError: a bad file (naming the file, row and column) or an instance that does
            not validate.
    """
    nodes = read_openb_nodes(nodes_csv)
    pods = read_openb_pods(pods_csv)
    name = "alibaba-" + Path(pods_csv).stem.removeprefix("openb_pod_list_")
    data = openb_instance(
        nodes,
        pods,
        leaf_size=leaf_size,
        limit=limit,
        use_qos=use_qos,
        name=name,
        sources={"nodes_file": Path(nodes_csv).name, "pods_file": Path(pods_csv).name},
    )
    snapshot, warnings = snapshot_of(f"{nodes_csv} + {pods_csv}", data)
    models = {n.model for n in nodes if n.model}
    unknown: dict[str, int] = {}
    for gang in data["gangs"]:
        for m in gang.get("gpu_models", ()):
            if m not in models:
                unknown[m] = unknown.get(m, 0) + 1
    for m, count in sorted(unknown.items()):
        warnings.append(
            f"{pods_csv}: {count} pods accept GPU model {m!r}, which no node of {nodes_csv} has"
        )
    return Converted(data=data, snapshot=snapshot, warnings=warnings)
