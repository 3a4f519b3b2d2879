"""The cycle's snapshot, built from the cache without calling the API, incrementally.

Each object the cache reports changed is converted again — and only that one — with the
builders of :mod:`gangplan.adapters.kube` (the same code ``gangplan convert k8s`` runs on a
dump): a Pod into a :class:`~gangplan.adapters.kube.pods.PodInfo` (``PodReader``), a Node
into its instance fields (``read_nodes``), a gang object, queue, HyperNode, Topology or
Device into a typed :class:`~gangplan.adapters.kube.objects.KubeObject`. Conversion is lazy:
a change marks its object dirty (so the cache absorbs a burst of events cheaply) and the
next :meth:`LiveSnapshot.build` converts what is dirty.

A build then assembles, each step from cached results:

1. levels and device layouts (``read_levels``, ``read_layouts``): again only when a node or
   a topology source (HyperNode, Topology, ResourceFlavor, Device) changed;
2. each node's ``Node`` model: cached by the node's resourceVersion and the topology
   generation;
3. queues (``QueueBook``) and priorities (``Priorities``): few objects, every build;
4. the pending gangs: the pending pods gangplan plans (:class:`Selection`) that no apply in
   flight holds, with the running pods of the same gangs, grouped by ``GangAssembler`` and
   validated one by one (``SnapshotParts``), as a dump is;
5. each running pod's ``RunningPod``: cached by its resourceVersion, gang, queue and the
   topology generation; plus the pods the assumed ledger holds
   (:mod:`gangplan.adapters.serve.ledger`);
6. one ``Snapshot``, from validated models (pydantic does not validate them again).

Pending pods that gangplan does not plan hold nothing and are never converted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from gangplan.adapters.kube import workloads as wl
from gangplan.adapters.kube.disruption import Disruptions
from gangplan.adapters.kube.docs import Document
from gangplan.adapters.kube.gangs import GANG_OBJECTS, GangAssembler
from gangplan.adapters.kube.nodes import (
    device_ids,
    node_data,
    read_layouts,
    read_levels,
    read_nodes,
)
from gangplan.adapters.kube.objects import KubeObject, Registry, read_objects
from gangplan.adapters.kube.options import KubeInputError, KubeOptions
from gangplan.adapters.kube.pod_reader import PodReader
from gangplan.adapters.kube.pods import ANN_PLAN, PodInfo, allocated_devices, carried_selector
from gangplan.adapters.kube.predicted import Predicted
from gangplan.adapters.kube.priorities import Priorities
from gangplan.adapters.kube.queues import QueueBook, quantities
from gangplan.adapters.kube.snapshot import Draft, SnapshotParts
from gangplan.adapters.kube.summary import REASON_GANG_INCOMPLETE, REASON_INVALID, ReadSummary
from gangplan.adapters.kube.topology import DeviceLayouts, LevelSource
from gangplan.adapters.serve.api import KINDS, Obj
from gangplan.adapters.serve.cache import ObjKey
from gangplan.models import (
    GPU_MILLI,
    DeviceLayout,
    Level,
    Node,
    PodPlacement,
    RunningPod,
    Snapshot,
    gang_key,
)

__all__ = ["ANN_PLAN", "GATE", "Built", "LiveSnapshot", "PodRef", "Selection", "pod_ref"]

GATE = "gangplan.io/placement"
"""The scheduling gate gangplan removes when it places a pod (mode ``gate``)."""
HOSTNAME = "kubernetes.io/hostname"

TOPOLOGY_KINDS = (
    "hypernodes.topology.volcano.sh",
    "topologies.kueue.x-k8s.io",
    "resourceflavors.kueue.x-k8s.io",
    "devices.scheduling.koordinator.sh",
)
QUEUE_KINDS = (
    "queues.scheduling.volcano.sh",
    "clusterqueues.kueue.x-k8s.io",
    "localqueues.kueue.x-k8s.io",
    "elasticquotas.scheduling.x-k8s.io",
)
GANG_KINDS = (
    "podgroups.scheduling.volcano.sh",
    "podgroups.scheduling.x-k8s.io",
    "podgroups.scheduling.sigs.k8s.io",
    "podgroups.scheduling.k8s.io",
)
OTHER_KINDS = ("priorityclasses.scheduling.k8s.io", "workloads.scheduling.k8s.io")
_FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Selection:
    """Which pending pods gangplan plans. ``gate``: those whose only scheduling gate is
    ``gate`` (another gate — Kueue's ``kueue.x-k8s.io/admission`` until Kueue admits the
    workload against its quota — means the pod is not ready for placement yet), and those
    gangplan ungated and that are not bound yet (they carry its plan annotation); ``bind``:
    those naming ``scheduler_name`` in ``spec.schedulerName`` with no gate at all (a gated pod
    cannot be bound). ``namespaces``: only these (empty: all)."""

    mode: Literal["gate", "bind"] = "gate"
    scheduler_name: str = "gangplan"
    gate: str = GATE
    namespaces: tuple[str, ...] = ()

    def ours(self, pod: Obj) -> bool:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if spec.get("nodeName") or meta.get("deletionTimestamp"):
            return False
        if self.namespaces and meta.get("namespace") not in self.namespaces:
            return False
        gates = [g.get("name") for g in spec.get("schedulingGates") or []]
        if self.mode == "gate":
            # gated, or ungated by gangplan (its plan annotation) and not bound yet
            if gates:
                return gates == [self.gate]
            return ANN_PLAN in (meta.get("annotations") or {})
        return not gates and spec.get("schedulerName") == self.scheduler_name


@dataclass(frozen=True)
class PodRef:
    """A pod the snapshot plans: its UID, resourceVersion, scheduling gates and
    nodeSelector as the cache last saw them, and its gang object (kind key, name)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    gates: tuple[str, ...]
    node_selector: dict[str, str]
    annotations: dict[str, str]


@dataclass
class Built:
    """One build: the snapshot, what was not read, and what the loop needs to act on it.

    ``pods``: the pending pods of the snapshot's gangs by ``(namespace, name)``;
    ``gang_objects``: gang key -> (kind key, namespace, name) of its gang object;
    ``waiting``: gang key -> the pods it needs, when fewer exist (the scheduler waits);
    ``hostnames``: node -> its ``kubernetes.io/hostname`` label; ``converted``: objects
    converted by this build.
    """

    snapshot: Snapshot
    summary: ReadSummary
    pods: dict[ObjKey, PodRef] = field(default_factory=dict)
    gang_objects: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    waiting: dict[str, int] = field(default_factory=dict)
    hostnames: dict[str, str] = field(default_factory=dict)
    converted: int = 0


@dataclass
class _Pod:
    raw: Obj
    state: Literal["running", "ours", "other"]
    info: PodInfo | None = None


def _source(kind_key: str, key: ObjKey) -> str:
    return f"{kind_key} {key[0]}/{key[1]}" if key[0] else f"{kind_key} {key[1]}"


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class LiveSnapshot:
    """Converted objects of the cache, and the snapshot built from them (module docstring).

    ``options``: how objects read (resource names, topology labels, device layout, default
    queue), as for a dump; ``selection``: which pending pods are planned.

    Raises:
        KubeInputError: a bad ``options.topology_labels`` or ``options.device_layout``.
    """

    def __init__(self, options: KubeOptions, selection: Selection):
        from gangplan.adapters.kube.topology import (
            OptionError,
            load_template,
            parse_topology_labels,
        )

        self.options = options
        self.selection = selection
        try:
            self._levels_given: tuple[Level, ...] | None = (
                parse_topology_labels(options.topology_labels) if options.topology_labels else None
            )
            self._template: tuple[str, DeviceLayout] | None = (
                load_template(options.device_layout) if options.device_layout else None
            )
        except OptionError as err:
            raise KubeInputError(str(err)) from None
        self._raw: dict[str, dict[ObjKey, Obj]] = {}
        self._objects: dict[str, dict[ObjKey, KubeObject]] = {}
        self._dirty: dict[str, set[ObjKey]] = {}
        self._nodes: dict[str, dict[str, Any]] = {}
        self._node_models: dict[str, tuple[tuple[str, int], Node]] = {}
        self._pods: dict[ObjKey, _Pod] = {}
        self._running: dict[ObjKey, tuple[tuple[Any, ...], RunningPod | None]] = {}
        self._topo_gen = 0
        self._prio_gen = 0
        self._queue_gen = 0
        self._ours: set[ObjKey] = set()
        self._node_ids: dict[str, tuple[tuple[str, int], set[str]]] = {}
        self._levels: tuple[int, LevelSource, DeviceLayouts, ReadSummary] | None = None
        self._nodes_changed = True
        self._priorities: Priorities | None = None
        self._read_notes: dict[tuple[str, ObjKey], ReadSummary] = {}

    # ------------------------------------------------------------------ changes

    def on_change(self, kind_key: str, key: ObjKey, obj: Obj | None) -> None:
        """What the cache calls for every change: remember, mark dirty (converted later)."""
        raw = self._raw.setdefault(kind_key, {})
        if obj is None:
            raw.pop(key, None)
        else:
            raw[key] = obj
        self._dirty.setdefault(kind_key, set()).add(key)
        if kind_key in TOPOLOGY_KINDS:
            self._topo_gen += 1
        elif kind_key == "nodes":
            self._nodes_changed = True
        elif kind_key == "priorityclasses.scheduling.k8s.io":
            self._prio_gen += 1
        elif kind_key in QUEUE_KINDS or kind_key in GANG_KINDS:
            self._queue_gen += 1
        if kind_key == "pods":
            self._ours.discard(key)

    def _convert_dirty(self, priorities: Priorities | None) -> int:
        n = 0
        for kind_key, keys in list(self._dirty.items()):
            if kind_key == "pods" and priorities is None:
                continue
            raw = self._raw.get(kind_key, {})
            for key in keys:
                n += 1
                self._convert_one(kind_key, key, raw.get(key), priorities)
            del self._dirty[kind_key]
        return n

    def _convert_one(
        self, kind_key: str, key: ObjKey, obj: Obj | None, priorities: Priorities | None
    ) -> None:
        """Convert one object, keeping what its reading said (what was skipped or noted)
        for every build until the object changes again. An object that no reader rule
        refused but that still fails to convert (an error nothing anticipated) is left out
        and listed with the error: one object never stops a cycle."""
        summary = ReadSummary()
        try:
            if kind_key == "pods":
                assert priorities is not None
                self._convert_pod(key, obj, priorities, summary)
            elif kind_key == "nodes":
                self._convert_node(key, obj, summary)
            else:
                self._convert_object(kind_key, key, obj, summary)
        except Exception as err:  # the rule: one object never stops a cycle
            self._forget(kind_key, key)
            summary.skip(
                _source(kind_key, key),
                KINDS[kind_key].kind if kind_key in KINDS else kind_key,
                f"{key[0]}/{key[1]}" if key[0] else key[1],
                REASON_INVALID,
                f"could not be read ({type(err).__name__}: {err}); left out",
            )
        if summary.skipped or summary.notes:
            self._read_notes[(kind_key, key)] = summary
        else:
            self._read_notes.pop((kind_key, key), None)

    def _forget(self, kind_key: str, key: ObjKey) -> None:
        """Drop what a failed conversion of the object may have left half made."""
        if kind_key == "pods":
            self._pods.pop(key, None)
            self._running.pop(key, None)
            self._ours.discard(key)
        elif kind_key == "nodes":
            self._nodes.pop(key[1], None)
            self._objects.get("nodes", {}).pop(key, None)
        else:
            self._objects.get(kind_key, {}).pop(key, None)

    def _typed(self, kind_key: str, key: ObjKey, obj: Obj, summary: ReadSummary) -> Registry:
        return read_objects([Document(_source(kind_key, key), obj)], summary)

    def _convert_object(
        self, kind_key: str, key: ObjKey, obj: Obj | None, summary: ReadSummary
    ) -> None:
        store = self._objects.setdefault(kind_key, {})
        store.pop(key, None)
        if obj is None:
            return
        for typed in self._typed(kind_key, key, obj, summary):
            store[key] = typed

    def _convert_node(self, key: ObjKey, obj: Obj | None, summary: ReadSummary) -> None:
        name = key[1]
        self._nodes.pop(name, None)
        self._objects.setdefault("nodes", {}).pop(key, None)
        if obj is None:
            return
        reg = self._typed("nodes", key, obj, summary)
        opts = self.options
        for n in read_nodes(reg, summary, gpu=opts.gpu_resource, nic=opts.nic_resource).values():
            self._nodes[name] = n
            self._objects["nodes"][key] = next(iter(reg))

    def _convert_pod(
        self, key: ObjKey, obj: Obj | None, priorities: Priorities, summary: ReadSummary
    ) -> None:
        self._pods.pop(key, None)
        self._running.pop(key, None)
        if obj is None:
            return
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if status.get("phase") in _FINISHED:
            return
        if spec.get("nodeName"):
            state: Literal["running", "ours", "other"] = "running"
        elif self.selection.ours(obj):
            state = "ours"
        else:
            self._pods[key] = _Pod(obj, "other")
            return
        reg = self._typed("pods", key, obj, summary)
        reader = PodReader(summary, self.options, priorities)
        infos = reader.read_pods(reg, DeviceLayouts())
        self._pods[key] = _Pod(obj, state, infos[0] if infos else None)
        if state == "ours":
            self._ours.add(key)

    # ------------------------------------------------------------------ build

    def _registry(self, kinds: Iterable[str]) -> Registry:
        reg = Registry()
        for k in kinds:
            for obj in self._objects.get(k, {}).values():
                reg.add(obj)
        return reg

    def _topology(self) -> tuple[LevelSource, DeviceLayouts, ReadSummary]:
        gen = self._topo_gen
        if self._levels is not None and self._levels[0] == gen and not self._nodes_changed:
            return self._levels[1], self._levels[2], self._levels[3]
        summary = ReadSummary()
        reg = self._registry(TOPOLOGY_KINDS)
        opts = self.options
        levels = read_levels(
            reg, summary, self._nodes, self._levels_given, opts.topology_labels or ""
        )
        layouts = read_layouts(
            reg,
            summary,
            self._nodes,
            self._template,
            gpu=opts.gpu_resource,
            nic=opts.nic_resource,
        )
        self._levels = (gen, levels, layouts, summary)
        self._nodes_changed = False
        return levels, layouts, summary

    def _node_model(
        self, name: str, layouts: DeviceLayouts, levels: LevelSource, summary: ReadSummary
    ) -> Node | None:
        obj = self._objects.get("nodes", {}).get(("", name))
        key = (obj.model.metadata.resource_version or "" if obj else "", self._topo_gen)
        hit = self._node_models.get(name)
        if hit is not None and hit[0] == key:
            return hit[1]
        d = node_data(self._nodes[name], layouts, levels)
        try:
            node = Node.model_validate({**d, "allocatable": quantities(d["allocatable"])})
        except ValidationError as err:
            self._node_models.pop(name, None)
            detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
            summary.skip(_source("nodes", ("", name)), "Node", name, REASON_INVALID, detail)
            return None
        self._node_models[name] = (key, node)
        return node

    def _device_ids(self, name: str, layouts: DeviceLayouts, levels: LevelSource) -> set[str]:
        key = self._node_models[name][0]
        hit = self._node_ids.get(name)
        if hit is not None and hit[0] == key:
            return hit[1]
        opts = self.options
        ids = device_ids(
            node_data(self._nodes[name], layouts, levels),
            layouts,
            gpu=opts.gpu_resource,
            nic=opts.nic_resource,
        )
        self._node_ids[name] = (key, ids)
        return ids

    def build(
        self,
        *,
        held: Iterable[ObjKey] = (),
        held_gangs: Iterable[str] = (),
        assumed: Mapping[ObjKey, PodPlacement] | None = None,
    ) -> Built:
        """The snapshot of the cache now.

        ``held``: pods an apply in flight holds (not planned again, whatever the cache shows);
        ``held_gangs``: gang keys (``namespace/name``) not planned this cycle (in flight,
        backing off); ``assumed``: the ledger's pods and where they were placed, counted as
        running there while the cache does not show them bound.

        Raises:
            KubeInputError: the context (resource names, levels, layouts, queues) is
                rejected by the models (never seen with valid options).
        """
        summary = ReadSummary()
        converted = self._convert_dirty(None)
        priorities = Priorities(self._registry(["priorityclasses.scheduling.k8s.io"]), summary)
        if self._prio_gen:
            self._dirty.setdefault("pods", set()).update(self._raw.get("pods", {}))
            self._prio_gen = 0
        self._priorities = priorities
        converted += self._convert_dirty(priorities)
        for read in self._read_notes.values():
            summary.skipped += read.skipped
            summary.notes += read.notes
        levels, layouts, topo_summary = self._topology()
        summary.notes += topo_summary.notes
        summary.skipped += topo_summary.skipped
        opts = self.options
        gpu, nic = opts.gpu_resource, opts.nic_resource
        parts = SnapshotParts(
            summary,
            resources={"gpu": gpu, "nic": nic},
            levels=[lv.model_dump() for lv in levels.levels],
            device_layouts={k: v.model_dump() for k, v in layouts.templates.items()},
        )
        nodes: dict[str, Node] = {}
        for name in sorted(self._nodes):
            node = self._node_model(name, layouts, levels, summary)
            if node is not None and parts.take_node(
                node, Draft({}, _source("nodes", ("", name)), "Node", name)
            ):
                nodes[name] = node
        node_devices = {n: self._device_ids(n, layouts, levels) for n in nodes}
        add_pods = bool(self._nodes) and all(
            "pods" in n["allocatable"] for n in self._nodes.values()
        )
        gang_reg = self._registry((*GANG_KINDS, *QUEUE_KINDS, "resourceflavors.kueue.x-k8s.io"))
        queues = QueueBook(gang_reg, summary)
        specs = {}
        for group, kind in GANG_OBJECTS:
            for obj in gang_reg.of(group, kind):
                spec = wl.group_spec_of(obj)
                specs[spec.key] = spec
        held_pods = set(held)
        held_gang_keys = set(held_gangs)

        # pending gangs: ours, not held, with the running pods of the same gangs
        pending = [
            p
            for key in sorted(self._ours)
            if key not in held_pods and (p := self._pods[key]).info is not None
        ]
        groups = {_group_key(p.info) for p in pending if p.info is not None}
        members = [p.info for p in pending if p.info is not None] + [
            p.info
            for p in self._pods.values()
            if p.state == "running"
            and p.info is not None
            and p.info.group is not None
            and _group_key(p.info) in groups
        ]
        assembler = GangAssembler(
            gang_reg,
            summary,
            options=opts,
            priorities=priorities,
            queues=queues,
            levels=levels,
            node_devices=node_devices,
            add_pods=add_pods,
        )
        drafts = assembler.assemble(members, Predicted())
        queue_data = queues.finish()
        parts.set_queues(queue_data)

        # running pods: cached models, then the ledger's assumed ones (before the gangs, as
        # a dump is read: what runs is counted first against MAX_PODS)
        running: list[RunningPod] = []
        seen: set[ObjKey] = set()
        for key in sorted(self._pods):
            p = self._pods[key]
            if p.state != "running" or p.info is None or p.info.node_name not in nodes:
                continue
            rp = self._running_pod(key, p, queues, specs, node_devices, layouts, add_pods)
            if rp is not None and parts.take_running(_pod_draft(key)):
                running.append(rp)
                seen.add(key)
        for key, placement in sorted((assumed or {}).items()):
            held_pod = self._pods.get(key)
            if key in seen or held_pod is None or held_pod.info is None:
                continue
            if placement.node not in nodes:
                continue
            rp = self._assumed_pod(held_pod.info, placement, queues, specs, add_pods)
            if rp is not None and parts.take_running(_pod_draft(key)):
                running.append(rp)

        out_objects: dict[str, tuple[str, str, str]] = {}
        for draft in drafts.gangs:
            if draft.name in held_gang_keys:
                continue
            if parts.add_gang(draft):
                src = draft.source.split(" ", 1)
                if src[0] in GANG_KINDS and len(src) == 2:
                    ns, _, name = src[1].partition("/")
                    out_objects[draft.name] = (src[0], ns, name)
        context: dict[str, Any] = {
            "resources": {"gpu": gpu, "nic": nic},
            "levels": [lv.model_dump() for lv in levels.levels],
            "device_layouts": {k: v.model_dump() for k, v in layouts.templates.items()},
            "queues": parts.queues,
        }
        metadata = {
            "name": "live",
            "kubernetes": {
                "levels_from": levels.source,
                "device_minors": {
                    n: {
                        dev: m
                        for kind in ("gpu", "rdma")
                        for m, dev in layouts.minors.get(n, {}).get(kind, {}).items()
                    }
                    for n in layouts.node_layout
                },
            },
        }
        snap = self._assemble(context, metadata, nodes, running, parts, summary)
        built = Built(snap, summary, converted=converted)
        built.gang_objects = out_objects
        built.hostnames = {n: node.labels.get(HOSTNAME, n) for n, node in nodes.items()}
        for g in snap.gangs:
            for role in g.roles:
                for i in range(role.count):
                    pname = role.pod_name(g.name, i)
                    member = self._pods.get((g.namespace, pname))
                    if member is not None:
                        built.pods[(g.namespace, pname)] = pod_ref(member.raw)
        for e in summary.skipped:
            if e.reason == REASON_GANG_INCOMPLETE:
                m = re.match(r"minimum (\d+), (\d+) pods", e.detail)
                if m:
                    built.waiting[e.name] = int(m[1])
        return built

    def _running_pod(
        self,
        key: ObjKey,
        p: _Pod,
        queues: QueueBook,
        specs: dict[tuple[str, str, str], wl.GroupSpec],
        node_devices: dict[str, set[str]],
        layouts: DeviceLayouts,
        add_pods: bool,
    ) -> RunningPod | None:
        info = p.info
        assert info is not None
        cache_key = (_rv(p.raw), self._queue_gen, self._topo_gen, add_pods)
        hit = self._running.get(key)
        if hit is not None and hit[0] == cache_key:
            return hit[1]
        spec = specs.get(_group_key(info)) if info.group else None
        gang = (spec.name if spec else info.group.name) if info.group else None
        queue = queues.queue_for([info], spec, None)
        node = info.node_name or ""
        ids = node_devices.get(node, set())
        try:
            devices = allocated_devices(info.annotations, layouts.minors.get(node, {}))
        except (ValueError, TypeError, AttributeError):
            devices = []
        req = {**info.requests, "pods": GPU_MILLI} if add_pods else dict(info.requests)
        try:
            rp = RunningPod.model_validate(
                {
                    "name": info.name,
                    "namespace": info.namespace,
                    "gang": gang,
                    "queue": queue,
                    "priority": info.priority,
                    "node": node,
                    "requests": quantities(req),
                    "devices": [d for d in devices if d in ids],
                    # as the dump reader keeps them: what a move of its gang must respect
                    "preemptible": Disruptions.own(info) is None,
                    "node_selector": carried_selector(info),
                    "node_affinity": [t.model_dump() for t in info.affinity],
                    "tolerations": [t.model_dump() for t in info.tolerations],
                    "owner": info.owner if isinstance(info.owner, str) else info.owner.model_dump(),
                }
            )
        except ValidationError:
            self._running[key] = (cache_key, None)
            return None
        self._running[key] = (cache_key, rp)
        return rp

    def _assemble(
        self,
        context: dict[str, Any],
        metadata: dict[str, Any],
        nodes: dict[str, Node],
        running: list[RunningPod],
        parts: SnapshotParts,
        summary: ReadSummary,
    ) -> Snapshot:
        """The snapshot of parts validated one by one, without validating them again.

        Every node, running pod and gang is a validated model; the context is validated
        here; what only the whole could break — a device two running pods hold — is
        checked here, and if it is broken the parts are added one by one instead
        (:meth:`_careful`), as a dump is read."""
        ctx = Snapshot.model_validate(context)
        holders: set[tuple[str, str]] = set()
        for rp in running:
            for dev in rp.devices:
                if (rp.node, dev) in holders:
                    return self._careful(context, metadata, nodes, running, parts, summary)
                holders.add((rp.node, dev))
        return Snapshot.model_construct(
            resources=ctx.resources,
            levels=ctx.levels,
            device_layouts=ctx.device_layouts,
            queues=ctx.queues,
            nodes=tuple(nodes.values()),
            running=tuple(running),
            gangs=tuple(parts.gangs),
            metadata=metadata,
        )

    @staticmethod
    def _assumed_pod(
        info: PodInfo,
        placement: PodPlacement,
        queues: QueueBook,
        specs: dict[tuple[str, str, str], wl.GroupSpec],
        add_pods: bool,
    ) -> RunningPod | None:
        spec = specs.get(_group_key(info)) if info.group else None
        req = {**info.requests, "pods": GPU_MILLI} if add_pods else dict(info.requests)
        try:
            return RunningPod.model_validate(
                {
                    "name": info.name,
                    "namespace": info.namespace,
                    "gang": placement.gang,
                    "queue": queues.queue_for([info], spec, None),
                    "priority": info.priority,
                    "node": placement.node,
                    "requests": quantities(req),
                    "devices": [*placement.gpus, *placement.nics],
                }
            )
        except ValidationError:
            return None

    @staticmethod
    def _careful(
        context: dict[str, Any],
        metadata: dict[str, Any],
        nodes: dict[str, Node],
        running: list[RunningPod],
        parts: SnapshotParts,
        summary: ReadSummary,
    ) -> Snapshot:
        """The slow path, when the parts do not go together (e.g. two running pods claim one
        device): add them one by one, as a dump is read, listing the ones refused."""
        careful = SnapshotParts(
            summary,
            resources=context["resources"],
            levels=context["levels"],
            device_layouts=context["device_layouts"],
        )
        careful.set_queues(
            [Draft(q.model_dump(), "Queue", "Queue", q.name) for q in context["queues"]]
        )
        for n in nodes.values():
            careful.add_node(Draft(n.model_dump(), "Node", "Node", n.name))
        for rp in running:
            careful.add_running(Draft(rp.model_dump(), "Pod", "Pod", f"{rp.namespace}/{rp.name}"))
        for g in parts.gangs:
            careful.add_gang(Draft(g.model_dump(), "Gang", "Gang", g.key))
        return careful.snapshot(metadata)

    # ------------------------------------------------------------------ views

    def complete(self, waiting: Mapping[str, int]) -> list[str]:
        """The gangs of ``waiting`` (gang key -> pods needed) that have their pods now."""
        if not waiting:
            return []
        if self._priorities is not None:
            self._convert_dirty(None)
            self._convert_dirty(self._priorities)
        counts: dict[str, int] = {}
        for p in self._pods.values():
            if p.info is not None and p.info.group is not None and p.state != "other":
                k = gang_key(p.info.namespace, p.info.group.name)
                counts[k] = counts.get(k, 0) + 1
        return [k for k, need in waiting.items() if counts.get(k, 0) >= need]

    def raw_pod(self, key: ObjKey) -> Obj | None:
        p = self._pods.get(key)
        return p.raw if p is not None else self._raw.get("pods", {}).get(key)

    def pods_of_group(self, namespace: str, group: str) -> list[Obj]:
        """Every known pod whose gang membership names ``group`` (any flavour)."""
        return [
            p.raw
            for (ns, _), p in self._pods.items()
            if ns == namespace
            and p.info is not None
            and p.info.group is not None
            and p.info.group.name == group
        ]


def _pod_draft(key: ObjKey) -> Draft:
    """What the summary calls pod ``key`` when it is left out."""
    return Draft({}, _source("pods", key), "Pod", f"{key[0]}/{key[1]}")


def _group_key(info: PodInfo) -> tuple[str, str, str]:
    if info.group is None:
        return (info.namespace, "pod", info.name)
    return (info.namespace, info.group.system, info.group.name)


def pod_ref(raw: Obj) -> PodRef:
    """The :class:`PodRef` of a pod object."""
    meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
    return PodRef(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        gates=tuple(str(g.get("name")) for g in spec.get("schedulingGates") or []),
        node_selector=dict(spec.get("nodeSelector") or {}),
        annotations=dict(meta.get("annotations") or {}),
    )
