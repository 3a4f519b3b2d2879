"""Nodes of a dump: allocatable, taints, readiness and GPU model; their levels and layouts.

:func:`read_nodes` reads each ``Node`` into the instance file's node fields (base units);
:func:`read_levels` and :func:`read_layouts` choose the topology levels and device layouts
(:mod:`gangplan.adapters.kube.topology`) and list what they did not use;
:func:`node_data` gives one node its levels and layout, as the snapshot takes it.

* ``status.allocatable`` (``status.capacity`` when it is missing), as the scheduler counts
  a node (kube-scheduler's ``NodeInfo.Allocatable``); a quantity that does not parse makes
  the node invalid;
* Koordinator's GPU percentages (``koordinator.sh/gpu-core``, ...) stand for the GPU
  resource when the node does not advertise it (100 percent = one GPU), and
  ``koordinator.sh/rdma``, when it is the NIC resource, is percent of one NIC;
* taints of effect ``NoSchedule``, ``PreferNoSchedule`` and ``NoExecute``; ``unschedulable``;
  ``Ready`` from the ``Ready`` condition (none: assumed Ready, noted);
* the GPU model from GPU feature discovery's ``nvidia.com/gpu.product``, GKE's
  ``cloud.google.com/gke-accelerator`` or Alibaba's ``alibabacloud.com/gpu-card-model``
  label (or, later, a Koordinator Device's model).
"""

from __future__ import annotations

from typing import Any

from gangplan.adapters.kube import dra
from gangplan.adapters.kube.bounds import node_devices_problem
from gangplan.adapters.kube.objects import KubeObject, Registry
from gangplan.adapters.kube.pods import KOORD_GPU_OTHER, KOORD_GPU_PERCENT, KOORD_RDMA
from gangplan.adapters.kube.summary import (
    REASON_ASSUMED,
    REASON_FIELD_IGNORED,
    REASON_INVALID,
    REASON_NODE_MISSING,
    REASON_NOT_MAPPED,
    ReadSummary,
)
from gangplan.adapters.kube.topology import (
    DeviceLayouts,
    LevelSource,
    hypernode_levels,
    kueue_levels,
    label_levels,
    node_device_layouts,
)
from gangplan.models import GPU_MILLI, DeviceLayout, Level, Taint
from gangplan.models.quantity import QuantityError, to_base_units

__all__ = [
    "GPU_MODEL_LABELS",
    "device_ids",
    "dra_devices",
    "node_data",
    "read_layouts",
    "read_levels",
    "read_nodes",
]

GPU_MODEL_LABELS = (
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "alibabacloud.com/gpu-card-model",
)
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def read_nodes(
    reg: Registry, summary: ReadSummary, *, gpu: str, nic: str
) -> dict[str, dict[str, Any]]:
    """Every readable ``Node`` of the dump, by name, as instance-file node fields
    (``allocatable`` in base units); an unreadable one is listed and left out, and so is
    one advertising more GPU or NIC devices than gangplan accepts
    (:func:`~gangplan.adapters.kube.bounds.node_devices_problem`)."""
    out: dict[str, dict[str, Any]] = {}
    for obj in reg.of("", "Node"):
        node = _read_node(obj, summary, gpu=gpu, nic=nic)
        if node is not None:
            out[obj.name] = node
    return out


def _read_node(
    obj: KubeObject, summary: ReadSummary, *, gpu: str, nic: str
) -> dict[str, Any] | None:
    node = obj.model
    alloc = _allocatable(obj, summary)
    if alloc is None:
        return None
    alloc = _vendor_resources(obj, summary, alloc, gpu=gpu, nic=nic)
    if (why := node_devices_problem(alloc, gpu=gpu, nic=nic)) is not None:
        summary.skip_object(obj, REASON_INVALID, why)  # before any device id is made
        return None
    labels = dict(node.metadata.labels or {})
    return {
        "name": obj.name,
        "labels": labels,
        "taints": _taints(obj, summary),
        "unschedulable": bool(node.spec.unschedulable) if node.spec else False,
        "ready": _ready(obj, summary),
        "allocatable": {k: v for k, v in alloc.items() if v > 0},
        "gpu_model": next((labels[k] for k in GPU_MODEL_LABELS if labels.get(k)), None),
    }


def _allocatable(obj: KubeObject, summary: ReadSummary) -> dict[str, int] | None:
    """``status.allocatable`` (else ``status.capacity``) in base units; None (listed) if a
    quantity does not parse."""
    status = obj.model.status
    raw = (status.allocatable if status and status.allocatable else None) or (
        status.capacity if status and status.capacity else None
    )
    if status is None or not status.allocatable:
        summary.note_object(
            obj,
            REASON_ASSUMED,
            "status.allocatable missing: capacity used"
            if raw
            else "no status.allocatable or capacity: nothing allocatable",
        )
    alloc: dict[str, int] = {}
    bad = []
    for res, q in (raw or {}).items():
        try:
            alloc[res] = to_base_units(res, q)
        except QuantityError as err:
            bad.append(f"status.allocatable.{res}: {err}")
    if bad:
        summary.skip_object(obj, REASON_INVALID, "; ".join(bad))
        return None
    return alloc


def _vendor_resources(
    obj: KubeObject, summary: ReadSummary, alloc: dict[str, int], *, gpu: str, nic: str
) -> dict[str, int]:
    """Koordinator's GPU percentages mirror the GPU resource; RDMA percent -> count."""
    koord = {k: alloc.pop(k) for k in (*KOORD_GPU_PERCENT, *KOORD_GPU_OTHER) if k in alloc}
    if koord and gpu not in alloc:
        core = max((koord[k] for k in KOORD_GPU_PERCENT if k in koord), default=0)
        if core:
            alloc[gpu] = core // 100_000 * GPU_MILLI
            summary.note_object(
                obj, REASON_ASSUMED, f"{gpu} = Koordinator GPU percent / 100 = {core // 100_000}"
            )
    if nic == KOORD_RDMA and KOORD_RDMA in alloc:
        alloc[KOORD_RDMA] = alloc[KOORD_RDMA] // 100_000 * GPU_MILLI
    return alloc


def _taints(obj: KubeObject, summary: ReadSummary) -> list[dict[str, Any]]:
    node = obj.model
    taints = []
    for i, t in enumerate((node.spec.taints if node.spec else None) or []):
        if t.effect not in _TAINT_EFFECTS:
            summary.note_object(
                obj, REASON_FIELD_IGNORED, f"spec.taints[{i}]: effect {t.effect!r} unknown"
            )
            continue
        taints.append(Taint(key=t.key, value=t.value or "", effect=t.effect).model_dump())
    return taints


def _ready(obj: KubeObject, summary: ReadSummary) -> bool:
    status = obj.model.status
    conds = [c for c in (status.conditions if status else None) or [] if c.type == "Ready"]
    if conds:
        return bool(conds[0].status == "True")
    summary.note_object(
        obj, REASON_ASSUMED, "no Ready condition in status.conditions: assumed Ready"
    )
    return True


# --------------------------------------------------------------------------- levels, layouts


def read_levels(
    reg: Registry,
    summary: ReadSummary,
    nodes: dict[str, dict[str, Any]],
    given: tuple[Level, ...] | None,
    given_as: str,
) -> LevelSource:
    """The topology levels: ``given`` (``--topology-labels``, written ``given_as``), else
    Volcano HyperNodes, else a Kueue Topology, else none; the sources not used are noted."""
    hypernodes = reg.of("topology.volcano.sh", "HyperNode")
    topologies = reg.of("kueue.x-k8s.io", "Topology")
    if given is not None:
        src = label_levels(given, f"--topology-labels {given_as}")
        unused = [*hypernodes, *topologies]
    elif hypernodes:
        src = hypernode_levels(hypernodes, {n: d["labels"] for n, d in nodes.items()})
        unused = list(topologies)
    elif topologies:
        src = kueue_levels(topologies, reg.of("kueue.x-k8s.io", "ResourceFlavor"))
        unused = []
    else:
        return LevelSource()
    for obj in unused:
        summary.note_object(obj, REASON_NOT_MAPPED, f"not used: the levels come from {src.source}")
    for note_on, msg in src.notes:
        if note_on is None:
            summary.note("", "", "", REASON_NOT_MAPPED, msg)
        else:
            summary.note_object(note_on, REASON_NOT_MAPPED, msg)
    return src


def read_layouts(
    reg: Registry,
    summary: ReadSummary,
    nodes: dict[str, dict[str, Any]],
    template: tuple[str, DeviceLayout] | None,
    *,
    gpu: str,
    nic: str,
) -> DeviceLayouts:
    """Each node's device layout: its DRA ResourceSlices (:mod:`~gangplan.adapters.kube.dra`,
    GPU and NIC counts from them too), else its Koordinator ``Device``, else ``template``
    (``--device-layout``) where the GPU count matches; what did not fit is listed."""
    slices = reg.of(dra.GROUP, "ResourceSlice")
    classes = reg.of(dra.GROUP, "DeviceClass")
    inventory = (
        dra.read_inventory(slices, classes, nodes, gpu=gpu, nic=nic) if slices or classes else None
    )
    sliced = inventory.layouts if inventory is not None else {}
    out = node_device_layouts(
        {n: d["allocatable"] for n, d in nodes.items() if n not in sliced},
        [d for d in reg.of("scheduling.koordinator.sh", "Device") if d.name not in sliced],
        template,
        gpu=gpu,
        nic=nic,
    )
    if inventory is not None:
        out.dra = inventory
        for name, layout in sliced.items():
            out.node_layout[name] = layout
            out.allocatable_fix[name] = inventory.allocatable[name]
            if name in inventory.gpu_models:
                out.gpu_models[name] = inventory.gpu_models[name]
            have = nodes[name]["allocatable"]
            for res in (gpu, nic):
                if have.get(res, 0) and have[res] != inventory.allocatable[name][res]:
                    summary.note(
                        "",
                        "Node",
                        name,
                        REASON_ASSUMED,
                        f"status.allocatable.{res} {have[res] // GPU_MILLI}: its ResourceSlices "
                        f"have {inventory.allocatable[name][res] // GPU_MILLI}, which are used",
                    )
        for koord in reg.of("scheduling.koordinator.sh", "Device"):
            if koord.name in sliced:
                summary.note_object(
                    koord, REASON_NOT_MAPPED, "not used: the node's ResourceSlices give its devices"
                )
        for on, what, msg in inventory.notes:
            if on is None:
                summary.note("ResourceSlices", "ResourceSlice", "", REASON_NOT_MAPPED, msg)
            elif what == "skip":
                summary.skip_object(on, REASON_NOT_MAPPED, msg)
            else:
                summary.note_object(on, REASON_NOT_MAPPED, msg)
    for obj, what, msg in out.notes:
        if obj is None:
            summary.note("--device-layout", "Node", "", REASON_NOT_MAPPED, msg)
        elif what == "skip":
            summary.skip_object(obj, REASON_NODE_MISSING, msg)
        else:
            summary.note_object(obj, REASON_NOT_MAPPED, msg)
    return out


def node_data(node: dict[str, Any], layouts: DeviceLayouts, levels: LevelSource) -> dict[str, Any]:
    """``node`` (from :func:`read_nodes`) with its layout, domains and GPU model added."""
    name = node["name"]
    d = dict(node)
    d["allocatable"] = {**node["allocatable"], **layouts.allocatable_fix.get(name, {})}
    if name in layouts.node_layout:
        d["devices"] = layouts.node_layout[name].model_dump()
    elif name in layouts.node_template:
        d["device_layout"] = layouts.node_template[name]
    if name in levels.domains:
        d["domains"] = levels.domains[name]
    if not d.get("gpu_model") and name in layouts.gpu_models:
        d["gpu_model"] = layouts.gpu_models[name]
    return d


def dra_devices(layouts: DeviceLayouts) -> dict[str, dict[str, str]]:
    """Node -> snapshot device id -> ``driver/pool/device`` for the devices read from
    ResourceSlices (what a ResourceClaim's allocation names); ``{}`` without slices."""
    inv = layouts.dra
    if inv is None:
        return {}
    return {
        node: {d.name: d.ref for d in devs if d.kind != "other"}
        for node, devs in sorted(inv.devices.items())
        if node in inv.layouts
    }


def device_ids(node: dict[str, Any], layouts: DeviceLayouts, *, gpu: str, nic: str) -> set[str]:
    """The device ids of ``node`` (from :func:`node_data`), as the snapshot lays them out."""
    name = node["name"]
    if name in layouts.node_layout:
        lay = layouts.node_layout[name]
    elif name in layouts.node_template:
        lay = layouts.templates[layouts.node_template[name]]
    else:
        alloc = node["allocatable"]
        lay = DeviceLayout.implicit(alloc.get(gpu, 0) // GPU_MILLI, alloc.get(nic, 0) // GPU_MILLI)
    return {*lay.gpu_ids, *lay.nic_ids}
