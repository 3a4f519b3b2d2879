"""Devices from Dynamic Resource Allocation: ResourceSlices and DeviceClasses
(``resource.k8s.io/v1``).

A DRA driver publishes each node's devices in ResourceSlices (Kubernetes 1.34+, "Dynamic
Resource Allocation"): one ``spec.pool`` per driver and node, each device with a ``name``
unique in its pool, typed ``attributes`` and ``capacity``. :func:`read_inventory` reads them as
the node's device inventory — GPUs and RDMA NICs, in the snapshot's device tree
(:class:`gangplan.models.DeviceLayout`, NUMA > PCIe switch > GPU / NIC) — and where a node
has slices they replace the guessed ``--device-layout`` and the Koordinator ``Device``
(:func:`gangplan.adapters.kube.nodes.read_layouts`); a node without slices is read as before.

**Which devices are GPUs and NICs.** A device of a driver in :data:`DRIVERS` whose marker
attribute holds (the NVIDIA GPU driver ``gpu.nvidia.com``: ``type == "gpu"``, its full GPUs —
MIG partitions and VFIO devices are not modelled; DRANET ``dra.net``: ``rdma == true``, its
RDMA-capable interfaces — DRANET publishes every network interface), or a device a
DeviceClass with ``spec.extendedResourceName`` equal to the snapshot's GPU (NIC) resource
selects. Other devices are counted in a note and not modelled.

**The tree.** PCIe switches are the standard attribute ``resource.kubernetes.io/pcieRoot``
(``pci<domain>:<bus>``, a PCIe root complex: ``k8s.io/dynamic-resource-allocation/
deviceattribute``; both drivers publish it), what a claim's ``matchAttribute`` constraint
pairs GPUs and NICs by. NUMA nodes come from ``resource.kubernetes.io/numaNode`` (proposed,
not yet a standard attribute: read where a driver publishes it), else from the driver's own
attribute (DRANET ``dra.net/numaNode``; NVIDIA ``gpu.nvidia.com/numa``, published for VFIO
devices only); the NVIDIA driver publishes no NUMA node for full GPUs, so a PCIe root takes
the NUMA node its other devices (DRANET's NICs) name. Missing attributes never invent
locality: a device without a PCIe root gets a switch of its own, a root whose devices name no
NUMA node a NUMA node of its own, so joint allocation never pairs what the slices do not
say is together.

**Capacity.** The node's GPU and NIC counts are its devices in the slices; the GPU model is
the GPUs' ``productName`` (NVIDIA) where they agree and no node label names it.

**Bad slices are skipped, never fatal**, each with a note naming the slice: no
``spec.nodeName`` (network-attached devices: ``allNodes``, ``nodeSelector``,
``perDeviceNodeSelection``), a node not in the snapshot, more than 128 devices (the API's
``ResourceSliceMaxDevices``), slices of an older pool generation (the allocator reads only
the newest), a device name used twice in a pool or twice on a node, a tainted device, an
attribute with no value or several, a node with more than ``MAX_DEVICES_PER_NODE`` GPUs or
NICs.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gangplan.adapters.kube.cel import (
    CelDevice,
    CelUnsupported,
    Quantity,
    Selector,
    Version,
    compile_selector,
    matcher,
)
from gangplan.adapters.kube.objects import KubeObject
from gangplan.models import GPU_MILLI, DeviceLayout, NumaNode, PcieSwitch
from gangplan.models.limits import MAX_DEVICES_PER_NODE
from gangplan.models.quantity import QuantityError, parse_quantity

__all__ = [
    "DRIVERS",
    "GROUP",
    "PCIE_ROOT",
    "STANDARD_NUMA",
    "DeviceClassInfo",
    "DraDevice",
    "DraInventory",
    "DriverRule",
    "read_inventory",
]

GROUP = "resource.k8s.io"
STANDARD_DOMAIN = "resource.kubernetes.io"
PCIE_ROOT = f"{STANDARD_DOMAIN}/pcieRoot"
STANDARD_NUMA = f"{STANDARD_DOMAIN}/numaNode"
MAX_SLICE_DEVICES = 128
"""Devices in one ResourceSlice (``resource.k8s.io/v1`` ``ResourceSliceMaxDevices``)."""

Kind = Literal["gpu", "nic", "other"]


@dataclass(frozen=True)
class DriverRule:
    """How gangplan reads one DRA driver's devices: what they are (``kind``), the attribute
    (in the driver's own domain) and value that mark the devices of that kind, the driver's
    own NUMA attribute (qualified) where the standard one is absent, and its GPU model
    attribute."""

    kind: Kind
    marker: tuple[str, Any]
    numa: str | None = None
    product: str | None = None


DRIVERS: dict[str, DriverRule] = {
    # github.com/NVIDIA/k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin/deviceinfo.go: full GPUs
    # are type "gpu" (MIG devices "mig", VFIO "vfio"); productName; "numa" on VFIO only
    "gpu.nvidia.com": DriverRule(
        "gpu", ("type", "gpu"), numa="gpu.nvidia.com/numa", product="productName"
    ),
    # github.com/google/dranet, pkg/apis/attributes.go: dra.net/rdma, dra.net/numaNode
    "dra.net": DriverRule("nic", ("rdma", True), numa="dra.net/numaNode"),
}
"""The drivers gangplan knows by name (see the module docstring)."""

_INT_NAME = re.compile(r"(\d+)")


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in _INT_NAME.split(name))


@dataclass(frozen=True)
class DraDevice:
    """One device of a slice: its node, driver, pool and name (``(driver, pool, name)`` is
    what a claim's allocation names), what gangplan reads it as, and its CEL view."""

    node: str
    driver: str
    pool: str
    name: str
    kind: Kind
    cel: CelDevice
    pcie_root: str | None = None
    numa: int | None = None
    numa_from: str | None = None
    product: str | None = None

    @property
    def ref(self) -> str:
        """``driver/pool/name``, as ``kubectl`` and the allocator's results name a device."""
        return f"{self.driver}/{self.pool}/{self.name}"


@dataclass
class DeviceClassInfo:
    """A DeviceClass: its compiled selectors (None: one could not be compiled, ``problem``
    says why), and the extended resource it stands for."""

    name: str
    selectors: list[Selector] | None
    extended_resource: str | None = None
    problem: str = ""


@dataclass
class DraInventory:
    """What the slices say, by node: every device read (``devices``), the device tree and
    counts of the nodes with GPUs or NICs in slices, their GPU model, and the DeviceClasses.

    ``notes``: ``(object or None, "skip" | "note", message)``, as
    :class:`~gangplan.adapters.kube.topology.DeviceLayouts` keeps them."""

    devices: dict[str, list[DraDevice]] = field(default_factory=dict)
    by_ref: dict[tuple[str, str, str], DraDevice] = field(default_factory=dict)
    layouts: dict[str, DeviceLayout] = field(default_factory=dict)
    allocatable: dict[str, dict[str, int]] = field(default_factory=dict)
    gpu_models: dict[str, str] = field(default_factory=dict)
    classes: dict[str, DeviceClassInfo] = field(default_factory=dict)
    notes: list[tuple[KubeObject | None, str, str]] = field(default_factory=list)

    def class_devices(self, name: str) -> list[DraDevice] | None:
        """The devices DeviceClass ``name`` selects (None: no such class, or a selector
        gangplan cannot evaluate)."""
        info = self.classes.get(name)
        if info is None or info.selectors is None:
            return None
        match = matcher(info.selectors)
        return [d for devs in self.devices.values() for d in devs if match(d.cel)]

    def class_kind(self, name: str) -> tuple[Kind | None, str]:
        """What DeviceClass ``name`` asks: ``gpu`` or ``nic`` when every device it selects is
        one (or its extended resource is the GPU / NIC resource), else None with why."""
        info = self.classes.get(name)
        if info is None:
            return None, f"DeviceClass {name!r} is not in the dump"
        devices = self.class_devices(name)
        if devices is None:
            return None, f"DeviceClass {name!r}: {info.problem}"
        kinds = sorted({d.kind for d in devices})
        if len(kinds) == 1 and kinds[0] != "other":
            return kinds[0], ""
        if not kinds:
            return None, f"DeviceClass {name!r} selects no device of the slices"
        return None, (
            f"DeviceClass {name!r} selects {', '.join(kinds)} devices (accepted: a class of "
            "GPUs only or of RDMA NICs only)"
        )


# --------------------------------------------------------------------------- reading


def _attribute(value: Any) -> tuple[Any, bool]:
    """A ``V1DeviceAttribute`` as a CEL value, and whether it has exactly one value."""
    set_fields = [
        (k, v)
        for k, v in (
            ("string", value.string),
            ("int", value.int),
            ("bool", value.bool),
            ("version", value.version),
            ("strings", getattr(value, "strings", None)),
            ("ints", getattr(value, "ints", None)),
            ("bools", getattr(value, "bools", None)),
            ("versions", getattr(value, "versions", None)),
        )
        if v is not None
    ]
    if len(set_fields) != 1:
        return None, False
    kind, v = set_fields[0]
    if kind == "version":
        return Version(v), True
    if kind == "versions":
        return tuple(Version(x) for x in v), True
    if isinstance(v, list):
        return tuple(v), True
    return v, True


def _qualified(driver: str, name: str) -> tuple[str, str]:
    """``(domain, name)`` of an attribute or capacity name: unqualified names belong to the
    driver's own domain (``resource.k8s.io/v1`` ``QualifiedName``)."""
    domain, sep, short = name.partition("/")
    return (domain, short) if sep else (driver, name)


def _cel_device(driver: str, dev: Any, problems: list[str]) -> tuple[CelDevice, dict[str, Any]]:
    """The device's CEL view and its attributes by qualified name (``domain/name``)."""
    attrs: dict[str, dict[str, Any]] = defaultdict(dict)
    flat: dict[str, Any] = {}
    for key, value in (dev.attributes or {}).items():
        v, ok = _attribute(value)
        if not ok:
            problems.append(f"attribute {key!r} has no value or several: ignored")
            continue
        domain, short = _qualified(driver, key)
        attrs[domain][short] = v
        flat[f"{domain}/{short}"] = v
    caps: dict[str, dict[str, Quantity]] = defaultdict(dict)
    for key, cap in (dev.capacity or {}).items():
        domain, short = _qualified(driver, key)
        try:
            caps[domain][short] = Quantity(parse_quantity(cap.value))
        except QuantityError as err:
            problems.append(f"capacity {key!r}: {err}: ignored")
    cel = CelDevice(
        driver=driver,
        attributes={k: dict(v) for k, v in attrs.items()},
        capacity={k: dict(v) for k, v in caps.items()},
        allow_multiple_allocations=bool(getattr(dev, "allow_multiple_allocations", False)),
    )
    return cel, flat


def _classes(objs: Iterable[KubeObject]) -> dict[str, DeviceClassInfo]:
    out: dict[str, DeviceClassInfo] = {}
    for obj in objs:
        spec = obj.model.spec
        selectors: list[Selector] | None = []
        problem = ""
        for i, sel in enumerate((spec.selectors if spec else None) or []):
            expr = sel.cel.expression if sel.cel is not None else None
            if expr is None:
                selectors, problem = None, f"spec.selectors[{i}] has no cel expression"
                break
            try:
                selectors.append(compile_selector(expr))  # type: ignore[union-attr]
            except CelUnsupported as err:
                selectors, problem = (
                    None,
                    (
                        f"spec.selectors[{i}].cel.expression {expr!r}: gangplan cannot evaluate "
                        f"it ({err})"
                    ),
                )
                break
        ext = getattr(spec, "extended_resource_name", None) if spec else None
        out[obj.name] = DeviceClassInfo(obj.name, selectors, ext, problem)
    return out


class _Reader:
    def __init__(self, nodes: Mapping[str, Any], gpu: str, nic: str):
        self.nodes = nodes
        self.gpu, self.nic = gpu, nic
        self.inv = DraInventory()

    def note(self, obj: KubeObject | None, what: str, msg: str) -> None:
        self.inv.notes.append((obj, what, msg))

    def newest_slices(self, slices: list[KubeObject]) -> list[KubeObject]:
        """The node-local slices of each pool's newest generation; the rest noted."""
        pools: dict[tuple[str, str], list[KubeObject]] = defaultdict(list)
        for obj in slices:
            spec = obj.model.spec
            if not spec.node_name:
                self.note(
                    obj,
                    "skip",
                    "no spec.nodeName: devices not local to one node (allNodes, nodeSelector "
                    "or perDeviceNodeSelection) are not modelled",
                )
                continue
            if spec.node_name not in self.nodes:
                self.note(obj, "skip", f"spec.nodeName {spec.node_name!r}: no such Node")
                continue
            if len(spec.devices or []) > MAX_SLICE_DEVICES:
                self.note(
                    obj,
                    "skip",
                    f"{len(spec.devices):,} devices: more than the {MAX_SLICE_DEVICES} a "
                    "ResourceSlice may hold",
                )
                continue
            pools[(spec.driver, spec.pool.name)].append(obj)
        out: list[KubeObject] = []
        for (driver, pool), objs in sorted(pools.items()):
            newest = max(o.model.spec.pool.generation for o in objs)
            for o in objs:
                if o.model.spec.pool.generation < newest:
                    self.note(
                        o,
                        "skip",
                        f"pool {driver}/{pool} generation {o.model.spec.pool.generation}: "
                        f"replaced by generation {newest}",
                    )
            current = [o for o in objs if o.model.spec.pool.generation == newest]
            nodes = {o.model.spec.node_name for o in current}
            if len(nodes) > 1:
                for o in current:
                    self.note(
                        o,
                        "skip",
                        f"pool {driver}/{pool} spans nodes {sorted(nodes)}: a node-local pool "
                        "belongs to one node",
                    )
                continue
            want = current[0].model.spec.pool.resource_slice_count
            if want and len(current) < want:
                self.note(
                    current[0],
                    "note",
                    f"pool {driver}/{pool}: {len(current)} of its {want} slices present "
                    "(being updated): the devices present are read",
                )
            out += sorted(current, key=lambda o: o.name)
        return out

    def read_devices(self, slices: list[KubeObject]) -> None:
        seen: dict[tuple[str, str, str], str] = {}
        ids: dict[tuple[str, str], str] = {}
        other: dict[tuple[str, str], int] = defaultdict(int)
        for obj in slices:
            spec = obj.model.spec
            node, driver, pool = spec.node_name, spec.driver, spec.pool.name
            rule = DRIVERS.get(driver)
            for i, dev in enumerate(spec.devices or []):
                where = f"spec.devices[{i}] {dev.name!r}"
                key = (driver, pool, dev.name)
                if key in seen:
                    self.note(
                        obj,
                        "note",
                        f"{where}: device name used twice in pool {driver}/{pool} (first in "
                        f"{seen[key]}): skipped",
                    )
                    continue
                seen[key] = obj.name
                if any(t.effect in ("NoSchedule", "NoExecute") for t in dev.taints or []):
                    self.note(obj, "note", f"{where}: tainted ({dev.taints[0].key}): skipped")
                    continue
                problems: list[str] = []
                cel, flat = _cel_device(driver, dev, problems)
                for p in problems:
                    self.note(obj, "note", f"{where}: {p}")
                kind: Kind = "other"
                if rule is not None:
                    mark_name, mark_value = rule.marker
                    if cel.attributes.get(driver, {}).get(mark_name) == mark_value:
                        kind = rule.kind
                kind = self._class_kind(cel, kind)
                if kind == "other":
                    other[(node, driver)] += 1
                    self._add(obj, DraDevice(node, driver, pool, dev.name, kind, cel))
                    continue
                if (node, dev.name) in ids:
                    self.note(
                        obj,
                        "note",
                        f"{where}: node {node!r} has a device of that name already (from "
                        f"{ids[(node, dev.name)]}): skipped (gangplan names a node's devices "
                        "by their names)",
                    )
                    continue
                ids[(node, dev.name)] = f"{driver}/{pool}"
                self._add(
                    obj,
                    self._located(obj, where, node, driver, pool, dev.name, kind, cel, flat, rule),
                )
        for (node, driver), n in sorted(other.items()):
            self.note(
                None,
                "note",
                f"node {node!r}: {n} device{'s' if n != 1 else ''} of driver {driver!r} neither "
                "GPU nor RDMA NIC: not modelled",
            )

    def _class_kind(self, cel: CelDevice, kind: Kind) -> Kind:
        """A device selected by a DeviceClass that stands for the GPU (NIC) resource is a
        GPU (NIC)."""
        if kind != "other":
            return kind
        for info in self.inv.classes.values():
            if info.extended_resource not in (self.gpu, self.nic) or not info.selectors:
                continue
            if matcher(info.selectors)(cel):
                return "gpu" if info.extended_resource == self.gpu else "nic"
        return kind

    def _located(
        self,
        obj: KubeObject,
        where: str,
        node: str,
        driver: str,
        pool: str,
        name: str,
        kind: Kind,
        cel: CelDevice,
        flat: dict[str, Any],
        rule: DriverRule | None,
    ) -> DraDevice:
        root = flat.get(PCIE_ROOT)
        if root is not None and not isinstance(root, str):
            self.note(obj, "note", f"{where}: {PCIE_ROOT} is not a string: ignored")
            root = None
        numa, numa_from = None, None
        for attr in (STANDARD_NUMA, rule.numa if rule else None):
            if attr is None or attr not in flat:
                continue
            value = flat[attr]
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 4096:
                numa, numa_from = value, attr
                break
            self.note(obj, "note", f"{where}: {attr} {value!r} is not a NUMA node: ignored")
        product = (
            cel.attributes.get(driver, {}).get(rule.product) if rule and rule.product else None
        )
        return DraDevice(
            node,
            driver,
            pool,
            name,
            kind,
            cel,
            root,
            numa,
            numa_from,
            product if isinstance(product, str) else None,
        )

    def _add(self, obj: KubeObject, dev: DraDevice) -> None:
        self.inv.devices.setdefault(dev.node, []).append(dev)
        self.inv.by_ref[(dev.driver, dev.pool, dev.name)] = dev

    def build_layouts(self) -> None:
        for node, devices in sorted(self.inv.devices.items()):
            gpus = [d for d in devices if d.kind == "gpu"]
            nics = [d for d in devices if d.kind == "nic"]
            if not gpus and not nics:
                continue
            if max(len(gpus), len(nics)) > MAX_DEVICES_PER_NODE:
                self.note(
                    None,
                    "note",
                    f"node {node!r}: {len(gpus):,} GPUs and {len(nics):,} NICs in its slices, "
                    f"more than {MAX_DEVICES_PER_NODE:,}: its slices are not used",
                )
                for d in gpus + nics:
                    self.inv.by_ref.pop((d.driver, d.pool, d.name), None)
                self.inv.devices[node] = [d for d in devices if d.kind == "other"]
                continue
            self.inv.layouts[node] = self._tree(node, gpus + nics)
            self.inv.allocatable[node] = {
                self.gpu: len(gpus) * GPU_MILLI,
                self.nic: len(nics) * GPU_MILLI,
            }
            products = {d.product for d in gpus}
            if len(products) == 1 and None not in products:
                self.inv.gpu_models[node] = str(products.pop())
            elif len(products) > 1:
                self.note(
                    None,
                    "note",
                    f"node {node!r}: its GPUs are of several products "
                    f"{sorted(p or '?' for p in products)}: no GPU model from the slices",
                )

    def _tree(self, node: str, devices: list[DraDevice]) -> DeviceLayout:
        """NUMA > PCIe root > devices, as the module docstring builds it."""
        roots: dict[str, list[DraDevice]] = defaultdict(list)
        alone: list[DraDevice] = []
        for d in devices:
            (roots[d.pcie_root] if d.pcie_root else alone).append(d)
        numa_of: dict[str, str] = {}
        for root, devs in roots.items():
            named = sorted({d.numa for d in devs if d.numa is not None})
            if len(named) > 1:
                self.note(
                    None,
                    "note",
                    f"node {node!r}: devices under PCIe root {root!r} name NUMA nodes {named}: "
                    f"numa{named[0]} used",
                )
            numa_of[root] = f"numa{named[0]}" if named else f"numa-of-{root}"
        tree: dict[str, dict[str, list[DraDevice]]] = defaultdict(dict)
        for root, devs in roots.items():
            tree[numa_of[root]][root] = devs
        for d in alone:
            numa = f"numa{d.numa}" if d.numa is not None else f"numa-of-{d.name}"
            tree[numa][f"no-pcie-root-{d.name}"] = [d]
        lacking = sorted((d.name for d in alone), key=_natural)
        if lacking:
            self.note(
                None,
                "note",
                f"node {node!r}: {len(lacking)} device{'s' if len(lacking) != 1 else ''} "
                f"without {PCIE_ROOT} ({', '.join(lacking[:4])}"
                f"{', ...' if len(lacking) > 4 else ''}): each under a PCIe switch of its own",
            )
        unplaced = sorted(r for r, n in numa_of.items() if n.startswith("numa-of-"))
        if unplaced:
            self.note(
                None,
                "note",
                f"node {node!r}: no device under PCIe root{'s' if len(unplaced) != 1 else ''} "
                f"{', '.join(unplaced)} names a NUMA node ({STANDARD_NUMA} or the driver's "
                "own): each root is a NUMA node of its own",
            )
        return DeviceLayout(
            numa_nodes=tuple(
                NumaNode(
                    name=numa,
                    pcie_switches=tuple(
                        PcieSwitch(
                            name=root,
                            gpus=tuple(
                                sorted((d.name for d in devs if d.kind == "gpu"), key=_natural)
                            ),
                            nics=tuple(
                                sorted((d.name for d in devs if d.kind == "nic"), key=_natural)
                            ),
                        )
                        for root, devs in sorted(switches.items())
                    ),
                )
                for numa, switches in sorted(tree.items(), key=lambda kv: _natural(kv[0]))
            )
        )


def read_inventory(
    slices: list[KubeObject],
    classes: list[KubeObject],
    nodes: Mapping[str, Any],
    *,
    gpu: str,
    nic: str,
) -> DraInventory:
    """The device inventory of ``slices`` (``ResourceSlice`` objects) on ``nodes`` (the
    snapshot's node names), with the DeviceClasses ``classes``; see the module docstring.
    Never raises for the content of an object: what cannot be read is in ``notes``."""
    reader = _Reader(nodes, gpu, nic)
    reader.inv.classes = _classes(classes)
    reader.read_devices(reader.newest_slices(slices))
    reader.build_layouts()
    return reader.inv
