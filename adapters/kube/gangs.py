"""Pods grouped into gangs: gang objects, roles, minimums, queues, priorities, topology.

Each pod (read or predicted, :mod:`~gangplan.adapters.kube.pod_reader`) joins the gang its
:class:`~gangplan.adapters.kube.pods.GroupRef` names: a gang object of the dump
(PodGroups of Volcano, scheduler-plugins, Koordinator and upstream), a workload's implicit
gang (:mod:`~gangplan.adapters.kube.predicted`), a Kueue pod group
(``kueue.x-k8s.io/pod-group-total-count`` pods) or Koordinator gang annotations
(``gang.scheduling.koordinator.sh/min-available``); a pod naming no gang is a gang of one.

Identical pending pods of a gang (same requests, selector, affinity, tolerations, topology
and role label) form one role, whose ``pod_names`` are the pods'. When some pods of a gang
already run, they stay fixed and the pending ones form the gang with minimum
``max(1, minimum - running)``. A gang with fewer pods in the dump than its minimum is
listed (the scheduler waits for the rest), as is a gang object without pods or a pod whose
gang object is missing. Queues: :mod:`~gangplan.adapters.kube.queues`.

:class:`GangAssembler` returns :class:`~gangplan.adapters.kube.snapshot.Draft` objects —
instance-file data plus who it is — for :class:`~gangplan.adapters.kube.snapshot.SnapshotParts`
to validate one by one.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gangplan.adapters.kube import workloads as wl
from gangplan.adapters.kube.objects import KubeObject, Registry
from gangplan.adapters.kube.options import KubeOptions
from gangplan.adapters.kube.pod_reader import ANN_KOORD_GANG_MIN, ANN_KUEUE_TOTAL, group_what
from gangplan.adapters.kube.pods import PodInfo, TopologyRequest, carried_selector
from gangplan.adapters.kube.predicted import Predicted
from gangplan.adapters.kube.priorities import Priorities
from gangplan.adapters.kube.queues import QueueBook, quantities
from gangplan.adapters.kube.snapshot import Draft
from gangplan.adapters.kube.summary import (
    REASON_ASSUMED,
    REASON_FIELD_IGNORED,
    REASON_GANG_INCOMPLETE,
    REASON_GROUP_MISSING,
    REASON_INVALID,
    REASON_NO_PODS,
    REASON_NODE_MISSING,
    REASON_NOT_MAPPED,
    REASON_READ_THROUGH_PODS,
    ReadSummary,
)
from gangplan.adapters.kube.topology import LevelSource
from gangplan.models import GPU_MILLI, TopologyConstraint

__all__ = ["GANG_OBJECTS", "GangAssembler", "Gangs", "note_unknown_resources"]

GANG_OBJECTS = (
    ("scheduling.volcano.sh", "PodGroup"),
    ("scheduling.x-k8s.io", "PodGroup"),
    ("scheduling.sigs.k8s.io", "PodGroup"),
    ("scheduling.k8s.io", "PodGroup"),
)
"""The gang objects read (their pods name them, :class:`~gangplan.adapters.kube.pods.GroupRef`)."""

GangKey = tuple[str, str, str]
"""``(namespace, system, name)``: a gang while pods are grouped"""

Where = tuple[str, str, str]
"""``(source, kind, name)`` that summary entries about a gang are filed under"""


@dataclass
class _Members:
    spec: wl.GroupSpec | None
    pending: list[PodInfo] = field(default_factory=list)
    running: list[PodInfo] = field(default_factory=list)


@dataclass
class Gangs:
    """The pending gangs and running pods of a dump, in gang-key order, and the names
    (``namespace/name``) of the gangs predicted from workloads."""

    gangs: list[Draft] = field(default_factory=list)
    running: list[Draft] = field(default_factory=list)
    predicted: dict[str, dict[str, Any]] = field(default_factory=dict)
    """gang key -> the workload its pods are predicted from (``controller``), whether their
    names are the ones the controller will give them (``names_known``) and how it names
    them, or why they cannot be known (``naming``)"""
    schedulers: dict[str, str] = field(default_factory=dict)
    """gang key -> the scheduler its pods name, when not ``default-scheduler``"""


class GangAssembler:
    """Groups the pods of one dump into gangs (see the module docstring).

    ``node_devices``: the device ids of every node of the snapshot, by node name (a running
    pod on another node is listed); ``invalid_nodes``: the nodes of the dump left out as
    invalid (said so when a pod names one); ``add_pods``: every pod also asks one ``pods``
    (when every node advertises it).
    """

    def __init__(
        self,
        reg: Registry,
        summary: ReadSummary,
        *,
        options: KubeOptions,
        priorities: Priorities,
        queues: QueueBook,
        levels: LevelSource,
        node_devices: dict[str, set[str]],
        invalid_nodes: frozenset[str] = frozenset(),
        add_pods: bool,
    ):
        self._reg = reg
        self._summary = summary
        self._options = options
        self._priorities = priorities
        self._queues = queues
        self._levels = levels
        self._node_devices = node_devices
        self._invalid_nodes = invalid_nodes
        self._add_pods = add_pods

    def assemble(self, pods: list[PodInfo], predicted: Predicted) -> Gangs:
        """Every gang and running pod of ``pods`` (read and ``predicted``)."""
        specs, objects = self._gang_objects()
        specs.update(predicted.groups)
        members = self._group(pods, specs)
        self._note_unused(specs, objects, set(members), predicted.expanded)
        out = Gangs()
        names: Counter[tuple[str, str]] = Counter()
        for _key, m in sorted(members.items(), key=lambda kv: kv[0]):
            self._add(m, names, out)
        return out

    # ------------------------------------------------------------------ gang objects

    def _gang_objects(self) -> tuple[dict[GangKey, wl.GroupSpec], dict[GangKey, KubeObject]]:
        specs: dict[GangKey, wl.GroupSpec] = {}
        objects: dict[GangKey, KubeObject] = {}
        for group, kind in GANG_OBJECTS:
            for obj in self._reg.of(group, kind):
                spec = wl.group_spec_of(obj)
                specs[spec.key] = spec
                objects[spec.key] = obj
                if group == "scheduling.volcano.sh":
                    self._note_volcano_fields(obj)
        return specs, objects

    def _note_volcano_fields(self, obj: KubeObject) -> None:
        spec = obj.model.spec
        note = self._summary.note_object
        if spec.min_resources:
            note(
                obj,
                REASON_NOT_MAPPED,
                "spec.minResources: not mapped (the gang's pods say what they need)",
            )
        if spec.sub_group_policy:
            note(
                obj,
                REASON_NOT_MAPPED,
                "spec.subGroupPolicy: not mapped (no sub-gangs in the model)",
            )
        nt = spec.network_topology
        if nt is not None and nt.highest_tier_name:
            note(
                obj,
                REASON_NOT_MAPPED,
                "spec.networkTopology.highestTierName: not mapped (tiers by number only)",
            )

    def _note_unused(
        self,
        specs: dict[GangKey, wl.GroupSpec],
        objects: dict[GangKey, KubeObject],
        used: set[GangKey],
        expanded: set[tuple[str, str, str, str]],
    ) -> None:
        """A gang object no pod joined: read through its expanded owner, or listed."""
        for key in specs:
            if key in used or key not in objects:
                continue
            obj = objects[key]
            owners = [o for o in wl.owner_refs(obj) if o in expanded]
            if owners:
                self._summary.note_object(
                    obj,
                    REASON_READ_THROUGH_PODS,
                    f"read through its owner {owners[0][1]} {owners[0][3]}",
                )
            else:
                self._summary.skip_object(obj, REASON_NO_PODS)

    # ------------------------------------------------------------------ grouping

    def _group(
        self, pods: list[PodInfo], specs: dict[GangKey, wl.GroupSpec]
    ) -> dict[GangKey, _Members]:
        members: dict[GangKey, _Members] = {}
        for pod in pods:
            key = self._key_of(pod, specs, members)
            if key is None:
                continue
            members.setdefault(key, _Members(specs.get(key)))
            (members[key].running if pod.node_name else members[key].pending).append(pod)
        return members

    def _key_of(
        self, pod: PodInfo, specs: dict[GangKey, wl.GroupSpec], members: dict[GangKey, _Members]
    ) -> GangKey | None:
        """The gang ``pod`` joins (its spec added to ``specs`` if implicit); None: listed."""
        who = f"{pod.namespace}/{pod.name}"
        if pod.group is None:
            key = (pod.namespace, "pod", pod.name)
            if key in members:
                # a pod predicted from a workload, named as a pod of the dump (which is kept)
                first = (members[key].pending or members[key].running)[0]
                self._summary.skip(
                    pod.source,
                    pod.kind,
                    who,
                    REASON_INVALID,
                    f"predicted pod {who}: the name is also used by the {first.kind} of "
                    f"{first.source}",
                )
                return None
            return key
        key = (pod.namespace, pod.group.system, pod.group.name)
        if key in specs:
            return key
        spec = self._implicit_spec(pod)
        if spec is not None:
            specs[key] = spec
            return key
        if pod.node_name:
            return (pod.namespace, "running-only", pod.name)
        self._summary.skip(
            pod.source,
            pod.kind,
            who,
            REASON_GROUP_MISSING,
            f"{group_what(pod.group)} {pod.group.name!r}",
        )
        return None

    def _implicit_spec(self, pod: PodInfo) -> wl.GroupSpec | None:
        """Kueue pod groups and Koordinator gang annotations need no object."""
        assert pod.group is not None
        if pod.group.system == "kueue-pods":
            raw = pod.annotations.get(ANN_KUEUE_TOTAL, "")
            expected = int(raw) if raw.isdigit() and int(raw) > 0 else None
            if expected is None:
                self._summary.note(
                    pod.source,
                    pod.kind,
                    f"{pod.namespace}/{pod.name}",
                    REASON_ASSUMED,
                    f"annotation {ANN_KUEUE_TOTAL} missing or not a count: the pods in the dump",
                )
            return wl.GroupSpec(
                "kueue-pods",
                pod.namespace,
                pod.group.name,
                pod.source,
                "Pod",
                min_member=expected,
                expected=expected,
            )
        if pod.group.system == "koordinator-gang":
            raw = pod.annotations.get(ANN_KOORD_GANG_MIN, "")
            return wl.GroupSpec(
                "koordinator-gang",
                pod.namespace,
                pod.group.name,
                pod.source,
                "Pod",
                min_member=int(raw) if raw.isdigit() and int(raw) > 0 else None,
            )
        return None

    # ------------------------------------------------------------------ one gang

    def _add(self, m: _Members, names: Counter[tuple[str, str]], out: Gangs) -> None:
        """``m``'s running pods, then its pending pods as one gang, into ``out``."""
        spec = m.spec
        gname = spec.name if spec else (m.pending or m.running)[0].name
        if m.running:
            queue = self._queues.queue_for(m.running + m.pending, spec, None)
            minimum = spec.min_member if spec is not None else None
            for p in m.running:
                running = self._running(p, gname if spec else None, queue, minimum)
                if running is not None:
                    out.running.append(running)
        if not m.pending:
            return
        where = self._where(m)
        total = len(m.pending) + len(m.running)
        want = spec.min_member if spec and spec.min_member is not None else total
        if spec is not None and spec.expected and spec.expected > total:
            want = spec.expected
        if want > total:
            self._summary.skip(
                *where,
                REASON_GANG_INCOMPLETE,
                f"minimum {want}, {total} pods in the dump ({len(m.running)} running)",
            )
            return
        remaining = want - len(m.running)
        gang_min = None if remaining >= len(m.pending) else max(1, remaining)
        roles = self._roles(m, gang_min, want, where)
        ns = m.pending[0].namespace
        names[(ns, gname)] += 1
        if names[(ns, gname)] > 1:
            new = f"{gname}-{names[(ns, gname)]}"
            self._summary.note(
                *where, REASON_ASSUMED, f"gang name {gname!r} is taken in {ns}: named {new!r}"
            )
            gname = new
        queue = self._queues.queue_for(m.pending + m.running, spec, self._options.default_queue)
        priority = self._priority(m)
        created = (spec.creation if spec else None) or min(
            (p.creation for p in m.pending if p.creation is not None), default=0.0
        )
        topo = self._resolve(spec.topology if spec else None, where)
        if topo is None and len(roles) == 1 and roles[0].get("topology") is not None:
            topo = TopologyConstraint.model_validate(roles[0].pop("topology"))
        gang: dict[str, Any] = {
            "name": gname,
            "namespace": ns,
            "queue": queue,
            "priority": priority,
            "creation_time": created,
            "roles": roles,
            "min_member": gang_min,
            "joint": self._joint(m, where),
        }
        if any(p.preemption_policy == "Never" for p in m.pending):
            gang["preemption_policy"] = "Never"
        deadlines = [p.deadline for p in m.pending if p.deadline is not None]
        if deadlines and len(deadlines) == len(m.pending):
            # every pod bounded by activeDeadlineSeconds: the gang ends by the largest
            gang["expected_duration_s"] = max(deadlines)
        if topo is not None:
            gang["topology"] = topo.model_dump(exclude_none=True)
        for role in roles:
            req = {**role["requests"], "pods": GPU_MILLI} if self._add_pods else role["requests"]
            role["requests"] = quantities(req)
        key = f"{ns}/{gname}"
        out.gangs.append(Draft(gang, where[0], "Gang", key))
        made = [p for p in m.pending if p.predicted_by]
        if made or (spec is not None and spec.predicted):
            out.predicted[key] = {
                "controller": made[0].predicted_by if made else where[1] + " " + where[2],
                "names_known": bool(made) and all(p.name_known for p in made),
                "naming": made[0].name_rule if made else "",
            }
        others = sorted({p.scheduler for p in m.pending} - {"default-scheduler"})
        if others:
            out.schedulers[key] = others[0]

    @staticmethod
    def _where(m: _Members) -> Where:
        if m.spec is not None:
            return (m.spec.source, m.spec.kind, f"{m.spec.namespace}/{m.spec.name}")
        p0 = m.pending[0]
        return (p0.source, p0.kind, f"{p0.namespace}/{p0.name}")

    def _priority(self, m: _Members) -> int:
        spec = m.spec
        if spec is not None and (spec.priority is not None or spec.priority_class):
            return self._priorities.of(
                spec.priority,
                spec.priority_class,
                "priorityClassName",
                source=spec.source,
                kind=spec.kind,
                who=f"{spec.namespace}/{spec.name}",
            )
        return max(p.priority for p in m.pending)

    def _joint(self, m: _Members, where: Where) -> str:
        joints = sorted({p.joint for p in m.pending if p.joint})
        if len(joints) > 1:
            self._summary.note(
                *where,
                REASON_NOT_MAPPED,
                f"pods ask different joint policies {joints}: {joints[0]!r} used",
            )
        return joints[0] if joints else "none"

    def _resolve(self, req: TopologyRequest | None, where: Where) -> TopologyConstraint | None:
        """A topology request as a constraint on the snapshot's levels (None: dropped, noted)."""
        if req is None:
            return None
        levels = self._levels
        level = levels.level_for_label(req.label) if req.label else levels.tiers.get(req.tier or 0)
        if level is None:
            what = f"node label {req.label!r}" if req.label else f"HyperNode tier {req.tier}"
            self._summary.note(
                *where,
                REASON_NOT_MAPPED,
                f"{req.source}: no topology level for {what} (levels from {levels.source}): "
                "constraint dropped",
            )
            return None
        return TopologyConstraint(**{req.kind: level})

    def _roles(
        self, m: _Members, gang_min: int | None, want: int, where: Where
    ) -> list[dict[str, Any]]:
        spec = m.spec
        groups: dict[tuple[Any, ...], list[PodInfo]] = {}
        for p in sorted(m.pending, key=lambda p: (p.role_hint or "", _natural(p.name))):
            shape = (
                p.role_hint,
                tuple(sorted(p.requests.items())),
                tuple(sorted(p.node_selector.items())),
                p.affinity,
                p.tolerations,
                p.topology,
            )
            groups.setdefault(shape, []).append(p)
        roles: list[dict[str, Any]] = []
        seen: Counter[str] = Counter()
        mtm = dict(spec.min_task_member) if spec else {}
        use_task_mins = gang_min is not None and bool(mtm) and want >= sum(mtm.values())
        for shape, pods in groups.items():
            base = shape[0] or ("main" if len(m.pending) == 1 and spec is None else "pods")
            seen[base] += 1
            p0 = pods[0]
            role: dict[str, Any] = {
                "name": base if seen[base] == 1 else f"{base}-{seen[base]}",
                "count": len(pods),
                "requests": p0.requests,
                "node_selector": p0.node_selector,
                "node_affinity": [t.model_dump() for t in p0.affinity],
                "tolerations": [t.model_dump() for t in p0.tolerations],
                "pod_names": [p.name for p in pods],
            }
            self._queues.apply_flavors(role, p0, spec)
            topo = self._resolve(p0.topology, where)
            if topo is not None:
                role["topology"] = topo.model_dump(exclude_none=True)
            if use_task_mins and shape[0] in mtm:
                running = sum(1 for r in m.running if r.role_hint == shape[0])
                need = max(0, mtm[shape[0]] - running)
                role["min_member"] = min(len(pods), need)
                mtm[shape[0]] = max(0, need - len(pods)) + running
            roles.append(role)
        return roles

    def _running(
        self, p: PodInfo, gang: str | None, queue: str | None, minimum: int | None = None
    ) -> Draft | None:
        """A running pod (None: its node is not in the snapshot, listed), with what preemption
        needs: its gang's ``minimum`` (elastic victims), its start time as its gang's
        admission, and whether it tolerates disruption; and what a move needs: its own
        nodeSelector, required affinity and tolerations, and its controller
        (:mod:`gangplan.adapters.kube.owners`)."""
        who = f"{p.namespace}/{p.name}"
        ids = self._node_devices.get(p.node_name or "")
        if ids is None:
            detail = f"spec.nodeName {p.node_name!r}"
            if p.node_name in self._invalid_nodes:
                detail += " (the Node is in the dump but invalid: listed)"
            self._summary.skip(p.source, p.kind, who, REASON_NODE_MISSING, detail)
            return None
        req = {**p.requests, "pods": GPU_MILLI} if self._add_pods else dict(p.requests)
        unknown = [d for d in p.devices if d not in ids]
        if unknown:
            self._summary.note(
                p.source,
                p.kind,
                who,
                REASON_FIELD_IGNORED,
                f"devices {', '.join(unknown)} are not in node {p.node_name}'s device layout: "
                "the node's lowest-listed free GPUs are counted instead",
            )
        data = {
            "name": p.name,
            "namespace": p.namespace,
            "gang": gang,
            "queue": queue,
            "priority": p.priority,
            "node": p.node_name,
            "requests": quantities(req),
            "devices": [d for d in p.devices if d in ids],
            "admitted": p.started,
            "min_member": minimum if minimum is not None and minimum > 0 else None,
            "preemptible": p.preemptible,
            "expected_end": None
            if p.started is None or p.deadline is None
            else p.started + p.deadline,
            # where it may go if its gang moves, and who recreates it once evicted
            "node_selector": carried_selector(p),
            "node_affinity": [t.model_dump() for t in p.affinity],
            "tolerations": [t.model_dump() for t in p.tolerations],
            "owner": p.owner if isinstance(p.owner, str) else p.owner.model_dump(),
        }
        return Draft(data, p.source, "Pod", who)


def note_unknown_resources(
    summary: ReadSummary, gangs: list[Draft], nodes: list[dict[str, Any]]
) -> None:
    """Note each role that asks a resource no node of ``nodes`` advertises (it never fits)."""
    if not nodes:
        return
    advertised = {r for n in nodes for r in n["allocatable"]}
    for g in gangs:
        for r in g.data["roles"]:
            missing = sorted(set(r["requests"]) - advertised - {"pods"})
            if missing:
                summary.note(
                    "",
                    "Gang",
                    g.name,
                    REASON_NOT_MAPPED,
                    f"role {r['name']!r} asks {', '.join(missing)}, which no node "
                    "advertises: it never fits",
                )


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))
