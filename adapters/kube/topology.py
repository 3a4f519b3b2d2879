"""Topology levels and device layouts from Kubernetes objects.

**Levels** (top to bottom; the node is the implicit lowest level) come from one source, in
this order of precedence:

1. ``--topology-labels``: a preset name, or node label keys from the top level down,
   each optionally named (``spine=example.com/spine,leaf=example.com/leaf``); an unnamed
   key is named by its last path segment without a ``topology-`` prefix
   (``cloud.provider.com/topology-rack`` -> ``rack``). Presets (:data:`PRESETS`):

   ============  ==============================================================================
   ``kueue``     ``cloud.provider.com/topology-block`` > ``cloud.provider.com/topology-rack``
                 (Kueue's Topology examples; ``kubernetes.io/hostname`` is the node)
   ``gke``       ``cloud.google.com/gce-topology-block`` >
                 ``cloud.google.com/gce-topology-subblock`` > ``cloud.google.com/gce-topology-host``
                 (GKE's labels for A3/A4 and TPU nodes)
   ``eks``       ``topology.k8s.aws/network-node-layer-1`` > ``-layer-2`` > ``-layer-3`` (EKS,
                 from the EC2 instance topology API; layer-4, present on a few instance
                 types, is not in the preset)
   ``topograph`` ``network.topology.nvidia.com/core`` > ``.../spine`` > ``.../leaf`` (NVIDIA
                 Topograph's default keys; its ``.../accelerator`` NVLink-domain label is not a
                 tree level, add it by hand if your domains nest under leaves)
   ``topograph-v0`` ``network.topology.nvidia.com/datacenter`` > ``.../spine`` > ``.../block``
                 (Topograph's keys before its leaf/core rename)
   ============  ==============================================================================

2. Volcano ``HyperNode`` objects: one level per tier, named ``tier-<n>``, highest tier on
   top; a node's domain at tier n is the tier-n HyperNode that contains it, directly or
   through lower HyperNodes (members by exact name, by regular expression — searched, as
   Go's ``regexp.MatchString`` does, with Google's RE2, Go's own syntax and linear-time
   engine (:func:`compile_go_regexp`) — or, for nodes, by label selector).
3. A Kueue ``Topology``: the one most ResourceFlavors name (then the one with most levels,
   then by name); its ``nodeLabel`` keys are the levels, ``kubernetes.io/hostname`` being
   the node itself.

**Device layouts** (NUMA > PCIe switch > GPU / RDMA NIC): the node's DRA ResourceSlices
(:mod:`gangplan.adapters.kube.dra`) give it its own layout; else a Koordinator ``Device`` of the
node's name gives the node its own layout (healthy GPUs and RDMA NICs, by ``nodeID`` and
``pcieID``); otherwise ``--device-layout`` names a template (:data:`TEMPLATES`, or a YAML
file holding one ``DeviceLayout``) given to every node whose GPU count matches it.
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re2
import yaml
from pydantic import ValidationError

from gangplan.adapters import yaml_input
from gangplan.adapters.files import InputError, read_text
from gangplan.adapters.kube.crds import Device, HyperNode, Topology
from gangplan.adapters.kube.dra import DraInventory
from gangplan.adapters.kube.objects import KubeObject
from gangplan.models import GPU_MILLI, DeviceLayout, Level, NumaNode, PcieSwitch

__all__ = [
    "HOSTNAME_LABEL",
    "PRESETS",
    "TEMPLATES",
    "DeviceLayouts",
    "LevelSource",
    "OptionError",
    "hypernode_levels",
    "kueue_levels",
    "label_levels",
    "level_name_for",
    "load_template",
    "match_labels",
    "node_device_layouts",
    "parse_topology_labels",
]

HOSTNAME_LABEL = "kubernetes.io/hostname"

PRESETS: dict[str, tuple[tuple[str, str], ...]] = {
    "kueue": (
        ("block", "cloud.provider.com/topology-block"),
        ("rack", "cloud.provider.com/topology-rack"),
    ),
    "gke": (
        ("block", "cloud.google.com/gce-topology-block"),
        ("subblock", "cloud.google.com/gce-topology-subblock"),
        ("host", "cloud.google.com/gce-topology-host"),
    ),
    "eks": (
        ("layer-1", "topology.k8s.aws/network-node-layer-1"),
        ("layer-2", "topology.k8s.aws/network-node-layer-2"),
        ("layer-3", "topology.k8s.aws/network-node-layer-3"),
    ),
    "topograph": (
        ("core", "network.topology.nvidia.com/core"),
        ("spine", "network.topology.nvidia.com/spine"),
        ("leaf", "network.topology.nvidia.com/leaf"),
    ),
    "topograph-v0": (
        ("datacenter", "network.topology.nvidia.com/datacenter"),
        ("spine", "network.topology.nvidia.com/spine"),
        ("block", "network.topology.nvidia.com/block"),
    ),
}
"""Named level lists: (level name, node label key), top level first."""


def _hgx8(nics: bool) -> DeviceLayout:
    numa = []
    for n in range(2):
        switches = []
        for s in range(2 * n, 2 * n + 2):
            gpus = tuple(f"gpu{2 * s + i}" for i in range(2))
            nic_ids = tuple(f"mlx5_{2 * s + i}" for i in range(2)) if nics else ()
            switches.append(PcieSwitch(name=f"pcie{s}", gpus=gpus, nics=nic_ids))
        numa.append(NumaNode(name=f"numa{n}", pcie_switches=tuple(switches)))
    return DeviceLayout(numa_nodes=tuple(numa))


def _pcie4(nics: bool) -> DeviceLayout:
    switches = tuple(
        PcieSwitch(
            name=f"pcie{s}",
            gpus=(f"gpu{2 * s}", f"gpu{2 * s + 1}"),
            nics=(f"mlx5_{s}",) if nics else (),
        )
        for s in range(2)
    )
    return DeviceLayout(numa_nodes=(NumaNode(name="numa0", pcie_switches=switches),))


TEMPLATES: dict[str, DeviceLayout] = {
    "hgx8": _hgx8(nics=True),
    "pcie4": _pcie4(nics=True),
}
"""Built-in device layouts. ``hgx8``: 8 GPUs (``gpu0..7``) and 8 RDMA NICs (``mlx5_0..7``),
two of each under each of 4 PCIe switches, two switches per NUMA node (HGX/DGX H100-class
servers). ``pcie4``: 4 GPUs and 2 NICs under 2 PCIe switches on one NUMA node. A node that
advertises no NIC resource gets the template without its NICs."""


class OptionError(ValueError):
    """A bad option value (``--topology-labels``, ``--device-layout``), with what is accepted."""


# --------------------------------------------------------------------------- levels


@dataclass
class LevelSource:
    """The chosen levels, where they came from, and explicit node memberships (HyperNodes)."""

    levels: tuple[Level, ...] = ()
    source: str = "none"
    domains: dict[str, dict[str, str]] = field(default_factory=dict)
    tiers: dict[int, str] = field(default_factory=dict)
    notes: list[tuple[KubeObject | None, str]] = field(default_factory=list)

    def level_for_label(self, key: str) -> str | None:
        """The level whose nodes are grouped by label ``key`` (``node`` for the hostname)."""
        if key == HOSTNAME_LABEL:
            return "node"
        for lv in self.levels:
            if lv.node_label == key:
                return lv.name
        return None


def level_name_for(key: str) -> str:
    """The default level name of a label key: its last segment without ``topology-``."""
    last = key.rsplit("/", 1)[-1]
    return last.removeprefix("topology-") or key


def parse_topology_labels(value: str) -> tuple[Level, ...]:
    """``--topology-labels``: a preset name or ``[name=]key,...`` from the top level down.

    Raises:
        OptionError: unknown preset, empty entry, a duplicate name or key, or ``node``.
    """
    value = value.strip()
    if value in PRESETS:
        return tuple(Level(name=n, node_label=k) for n, k in PRESETS[value])
    entries = [e.strip() for e in value.split(",")]
    if value and len(entries) == 1 and "=" not in value and "/" not in value:
        # one word that is no preset: a typo of one far more often than a bare label key
        close = difflib.get_close_matches(value, list(PRESETS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise OptionError(
            f"--topology-labels {value!r}: not a preset ({', '.join(PRESETS)}) and not a node "
            "label key with a prefix (e.g. example.com/rack); a key without a prefix needs its "
            f"level named, e.g. '{value}={value}'{hint}"
        )
    if not value or any(not e for e in entries):
        raise OptionError(
            f"--topology-labels {value!r}: give a preset ({', '.join(PRESETS)}) or node label "
            "keys from the top level down, e.g. 'spine=example.com/spine,leaf=example.com/leaf'"
        )
    pairs: list[tuple[str, str]] = []
    for e in entries:
        name, sep, key = e.partition("=")
        if not sep:
            if "/" not in e and e not in (HOSTNAME_LABEL,) and not re.match(r"^[\w.-]+$", e):
                raise OptionError(f"--topology-labels: {e!r} is not a label key")
            name, key = level_name_for(e), e
        if not key or not name:
            raise OptionError(f"--topology-labels: {e!r} needs both a name and a key (name=key)")
        pairs.append((name.strip(), key.strip()))
    if pairs and pairs[-1][1] == HOSTNAME_LABEL:
        pairs.pop()  # the node is the implicit lowest level
    names = [n for n, _ in pairs]
    keys = [k for _, k in pairs]
    for what, items in (("level name", names), ("label key", keys)):
        dups = sorted({x for x in items if items.count(x) > 1})
        if dups:
            raise OptionError(f"--topology-labels: {what} {dups[0]!r} given twice")
    if "node" in names:
        raise OptionError(
            "--topology-labels: 'node' is the implicit lowest level; name it otherwise"
        )
    if HOSTNAME_LABEL in keys:
        raise OptionError(f"--topology-labels: {HOSTNAME_LABEL} can only be the last (node) level")
    return tuple(Level(name=n, node_label=k) for n, k in pairs)


def label_levels(levels: tuple[Level, ...], source: str) -> LevelSource:
    return LevelSource(levels=levels, source=source)


def kueue_levels(topologies: list[KubeObject], flavors: list[KubeObject]) -> LevelSource:
    """Levels from the Kueue Topology most ResourceFlavors name (see the module docstring)."""
    named: dict[str, int] = defaultdict(int)
    for f in flavors:
        if f.model.spec.topology_name:
            named[f.model.spec.topology_name] += 1
    chosen = min(
        topologies, key=lambda t: (-named.get(t.name, 0), -len(t.model.spec.levels), t.name)
    )
    topo: Topology = chosen.model
    keys = [lv.node_label for lv in topo.spec.levels]
    src = LevelSource(source=f"Topology {chosen.name}")
    if keys and keys[-1] == HOSTNAME_LABEL:
        keys.pop()
    names: list[str] = []
    for k in keys:
        n = level_name_for(k)
        names.append(k if (n in names or n == "node") else n)
    src.levels = tuple(Level(name=n, node_label=k) for n, k in zip(names, keys, strict=True))
    for t in topologies:
        if t is not chosen:
            src.notes.append((t, f"not used: the levels come from Topology {chosen.name}"))
    return src


def match_labels(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (``matchLabels``, ``matchExpressions``) against ``labels``."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # the error is reported as a note, not logged to stderr


def compile_go_regexp(pattern: str) -> Any:
    """``pattern`` compiled as Go's ``regexp.Compile`` does (RE2 syntax, by Google's RE2:
    Volcano matches HyperNode members with Go's ``regexp.MatchString``). RE2 never
    backtracks: a match takes time linear in the name's length, whatever the pattern
    (``^(a+)+$`` included), and a pattern's compiled program is bounded (8 MiB, RE2's
    ``max_mem``). The result's ``search(name)`` matches anywhere in ``name``, as
    ``MatchString``.

    Raises:
        ValueError: a pattern RE2 (and so Go) refuses — a backreference, a lookaround, a
            repetition over 1,000, a program too large — with RE2's message.
    """
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as err:
        what = err.args[0] if err.args else err
        raise ValueError(what.decode() if isinstance(what, bytes) else str(what)) from None


def hypernode_levels(
    hypernodes: list[KubeObject], nodes: Mapping[str, Mapping[str, str]]
) -> LevelSource:
    """Levels ``tier-<n>`` and explicit node memberships from Volcano HyperNodes.

    ``nodes``: node name -> labels (for label selectors and regular expressions).
    """
    src = LevelSource(source="HyperNodes")
    by_name = {h.name: h for h in hypernodes}
    direct_nodes: dict[str, set[str]] = {}
    children: dict[str, set[str]] = {}
    for h in hypernodes:
        model: HyperNode = h.model
        members_n: set[str] = set()
        members_h: set[str] = set()
        for i, m in enumerate(model.spec.members):
            sel = m.selector
            pool: Iterable[str] = nodes if m.type == "Node" else by_name
            if sel.exact_match is not None:
                name = sel.exact_match.get("name", "")
                if name in pool:
                    (members_n if m.type == "Node" else members_h).add(name)
                else:
                    src.notes.append(
                        (h, f"spec.members[{i}]: {m.type} {name!r} is not in the dump")
                    )
            elif sel.regex_match is not None:
                pattern = sel.regex_match.get("pattern", "")
                try:
                    rx = compile_go_regexp(pattern)
                except ValueError as err:
                    src.notes.append(
                        (h, f"spec.members[{i}].selector.regexMatch: bad pattern ({err})")
                    )
                    continue
                found = {n for n in pool if rx.search(n)}
                (members_n if m.type == "Node" else members_h).update(found)
                if not found:
                    src.notes.append(
                        (h, f"spec.members[{i}]: pattern {pattern!r} matches no {m.type}")
                    )
            elif sel.label_match is not None and m.type == "Node":
                members_n.update(
                    n for n, labels in nodes.items() if match_labels(sel.label_match, labels)
                )
            else:
                src.notes.append(
                    (h, f"spec.members[{i}].selector: no exactMatch, regexMatch or labelMatch")
                )
        direct_nodes[h.name] = members_n
        children[h.name] = members_h - {h.name}

    leaves: dict[str, set[str]] = {}

    def nodes_under(name: str, path: tuple[str, ...] = ()) -> set[str]:
        if name in leaves:
            return leaves[name]
        if name in path:
            src.notes.append(
                (by_name[name], f"member cycle {' > '.join((*path, name))}: broken here")
            )
            return set()
        out = set(direct_nodes.get(name, set()))
        for c in sorted(children.get(name, set())):
            out |= nodes_under(c, (*path, name))
        leaves[name] = out
        return out

    tiers = sorted({h.model.spec.tier for h in hypernodes}, reverse=True)
    for t in tiers:
        level = f"tier-{t}"
        src.tiers[t] = level
        for h in sorted((h for h in hypernodes if h.model.spec.tier == t), key=lambda x: x.name):
            for n in sorted(nodes_under(h.name)):
                have = src.domains.setdefault(n, {}).get(level)
                if have is None:
                    src.domains[n][level] = h.name
                elif have != h.name:
                    src.notes.append(
                        (h, f"node {n!r} is already in tier-{t} HyperNode {have!r}: kept there")
                    )
    src.levels = tuple(Level(name=f"tier-{t}") for t in tiers)
    return src


# --------------------------------------------------------------------------- device layouts


def load_template(value: str) -> tuple[str, DeviceLayout]:
    """``--device-layout``: a built-in template name or a YAML file holding one layout.

    Raises:
        OptionError: neither a template name nor a readable, valid layout file.
    """
    if value in TEMPLATES:
        return value, TEMPLATES[value]
    p = Path(value)
    if not p.is_file():
        raise OptionError(
            f"--device-layout {value!r}: not a template ({', '.join(TEMPLATES)}) nor a file"
        )
    try:
        data = yaml_input.load(read_text(p))
    except InputError as err:
        raise OptionError(f"{p}: cannot read a device layout: {err.problems[0]}") from None
    except yaml.YAMLError as err:
        raise OptionError(f"{p}: cannot read a device layout: {str(err).splitlines()[0]}") from None
    try:
        return p.stem, DeviceLayout.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        where = f"{loc}: " if loc else ""  # empty: the file is not a mapping at all
        raise OptionError(
            f"{p}: {where}{first['msg']} (a DeviceLayout: numa_nodes > pcie_switches > gpus, nics)"
        ) from None


def _without_nics(layout: DeviceLayout) -> DeviceLayout:
    return DeviceLayout(
        numa_nodes=tuple(
            NumaNode(
                name=n.name,
                pcie_switches=tuple(PcieSwitch(name=s.name, gpus=s.gpus) for s in n.pcie_switches),
            )
            for n in layout.numa_nodes
        )
    )


@dataclass
class DeviceLayouts:
    """What each node gets: a template name, or its own layout (from a Device object), plus
    device minor numbers (Koordinator's ``minor``, else the position among the node's GPUs
    or NICs), and adjusted allocatable counts."""

    templates: dict[str, DeviceLayout] = field(default_factory=dict)
    node_template: dict[str, str] = field(default_factory=dict)
    node_layout: dict[str, DeviceLayout] = field(default_factory=dict)
    minors: dict[str, dict[str, dict[int, str]]] = field(default_factory=dict)
    allocatable_fix: dict[str, dict[str, int]] = field(default_factory=dict)
    gpu_models: dict[str, str] = field(default_factory=dict)
    notes: list[tuple[KubeObject | None, str, str]] = field(default_factory=list)
    dra: DraInventory | None = None
    """the DRA device inventory (ResourceSlices), when the dump has slices or classes"""


def _device_layout(
    dev: Device,
) -> tuple[DeviceLayout | None, dict[str, dict[int, str]], int, int, str | None]:
    """Layout from one Device (None if any device lacks NUMA/PCIe ids), its minors, and the
    healthy GPU and NIC counts; the last item says why there is no layout."""
    minors: dict[str, dict[int, str]] = {"gpu": {}, "rdma": {}}
    tree: dict[str, dict[str, dict[str, list[str]]]] = {}
    missing_topology = False
    counts = {"gpu": 0, "rdma": 0}
    for d in sorted(
        dev.spec.devices, key=lambda x: (x.type, x.minor if x.minor is not None else -1)
    ):
        if d.type not in ("gpu", "rdma") or not d.healthy:
            continue
        dev_id = d.id or f"{d.type}{d.minor}"
        if d.minor is not None:
            minors[d.type][d.minor] = dev_id
        counts[d.type] += 1
        topo = d.topology
        if topo is None or topo.node_id is None or topo.pcie_id is None:
            missing_topology = True
            continue
        numa = f"numa{topo.node_id}" if topo.node_id >= 0 else "numa-unknown"
        bucket = tree.setdefault(numa, {}).setdefault(topo.pcie_id, {"gpu": [], "rdma": []})
        bucket[d.type].append(dev_id)
    if missing_topology or not tree:
        why = (
            "a device has no topology (nodeID, pcieID)"
            if missing_topology
            else "no healthy GPU or RDMA device"
        )
        return None, minors, counts["gpu"], counts["rdma"], why
    layout = DeviceLayout(
        numa_nodes=tuple(
            NumaNode(
                name=numa,
                pcie_switches=tuple(
                    PcieSwitch(name=pcie, gpus=tuple(b["gpu"]), nics=tuple(b["rdma"]))
                    for pcie, b in sorted(switches.items())
                ),
            )
            for numa, switches in sorted(tree.items())
        )
    )
    return layout, minors, counts["gpu"], counts["rdma"], None


def node_device_layouts(
    nodes: Mapping[str, Mapping[str, int]],
    devices: list[KubeObject],
    template: tuple[str, DeviceLayout] | None,
    *,
    gpu: str,
    nic: str,
) -> DeviceLayouts:
    """Decide every node's device layout (see the module docstring).

    ``nodes``: node name -> allocatable in base units. Counts must agree: a Device whose
    healthy GPUs are fewer than the node's allocatable GPUs lowers the allocatable (an
    unhealthy GPU is never allocated by Koordinator); any other disagreement leaves the
    node without a layout, with a note.
    """
    out = DeviceLayouts()
    by_node = {d.name: d for d in devices}
    for d in devices:
        if d.name not in nodes:
            out.notes.append((d, "skip", f"no Node {d.name!r} in the dump"))
    for name, alloc in nodes.items():
        have_gpus = alloc.get(gpu, 0) // GPU_MILLI
        have_nics = alloc.get(nic, 0) // GPU_MILLI
        dev = by_node.get(name)
        if dev is not None:
            model: Device = dev.model
            if model.metadata.labels.get("node.koordinator.sh/gpu-model"):
                out.gpu_models[name] = model.metadata.labels["node.koordinator.sh/gpu-model"]
            layout, minors, gpus, nics, why = _device_layout(model)
            out.minors[name] = minors
            if layout is None:
                out.notes.append((dev, "note", f"no device layout: {why}"))
            elif gpus > have_gpus or (have_nics and nics != have_nics):
                out.notes.append(
                    (
                        dev,
                        "note",
                        f"{gpus} healthy GPUs and {nics} NICs, but Node {name!r} advertises "
                        f"{have_gpus} {gpu} and {have_nics} {nic}: layout not used",
                    )
                )
            else:
                if gpus < have_gpus:
                    out.allocatable_fix.setdefault(name, {})[gpu] = gpus * GPU_MILLI
                    out.notes.append(
                        (
                            dev,
                            "note",
                            f"Node {name!r} advertises {have_gpus} {gpu}, {gpus} are healthy: "
                            f"allocatable lowered to {gpus}",
                        )
                    )
                if nics and not have_nics:
                    layout = _without_nics(layout)
                    out.notes.append(
                        (dev, "note", f"Node {name!r} advertises no {nic}: RDMA devices left out")
                    )
                out.node_layout[name] = layout
                continue
        if template is None:
            continue
        tname, tlayout = template
        if have_gpus != len(tlayout.gpu_ids):
            if have_gpus:
                out.notes.append(
                    (
                        None,
                        "note",
                        f"Node {name!r} has {have_gpus} GPUs, template {tname!r} has "
                        f"{len(tlayout.gpu_ids)}: node keeps the implicit layout",
                    )
                )
            continue
        if have_nics == len(tlayout.nic_ids):
            out.templates[tname] = tlayout
            out.node_template[name] = tname
        elif have_nics == 0:
            bare = f"{tname}-no-nic"
            out.templates[bare] = _without_nics(tlayout)
            out.node_template[name] = bare
        else:
            out.notes.append(
                (
                    None,
                    "note",
                    f"Node {name!r} has {have_nics} NICs, template {tname!r} has "
                    f"{len(tlayout.nic_ids)}: node keeps the implicit layout",
                )
            )
    for name, tname in out.node_template.items():
        layout = out.templates[tname]
        out.minors[name] = {
            "gpu": dict(enumerate(layout.gpu_ids)),
            "rdma": dict(enumerate(layout.nic_ids)),
        }
    return out
