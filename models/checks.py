"""The snapshot's cross-checks: what no single field can tell, such as a reference to nothing,
a duplicate name, a device id used twice or a device layout that disagrees with
``allocatable``.

:func:`snapshot_problems` yields every :class:`Problem` of a snapshot at once, each with its
path (``gangs[3].roles[0].pod_names``), what is wrong and what is accepted;
:class:`~gangplan.models.snapshot.Snapshot` raises them together as a :class:`SnapshotError`
when it is built. Inconsistencies real clusters have (running pods holding more than a node
reports) are not problems but warnings: :mod:`gangplan.models.free`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gangplan.models.base import GPU_MILLI
from gangplan.models.limits import MAX_DEVICES_PER_NODE, too_many
from gangplan.models.quantity import CPU, MEMORY, format_quantity

if TYPE_CHECKING:
    from gangplan.models.snapshot import DeviceLayout, Gang, Snapshot

__all__ = ["Problem", "SnapshotError", "snapshot_problems"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input: where (``gangs[3].roles[0].count``), what is wrong,
    and what is accepted."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SnapshotError(ValueError):
    """The snapshot's objects disagree (a reference to nothing, a duplicate name, ...)."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


def snapshot_problems(s: Snapshot) -> Iterator[Problem]:
    """Every cross-reference problem of ``s``, in the order of the snapshot's sections:
    levels, device layouts, nodes, queues, gangs, pod names, running pods.

    Sizes above the bounds of :mod:`gangplan.models.limits` come first and alone: the other
    checks build things in proportion to the sizes (device names, pod names).
    """
    bounds = list(_bound_problems(s))
    if bounds:
        yield from bounds
        return
    yield from _level_problems(s)
    for name, layout in s.device_layouts.items():
        yield from _layout_problems(layout, f"device_layouts.{name}")
    yield from _node_problems(s)
    yield from _queue_problems(s)
    yield from _gang_problems(s)
    yield from _pod_name_problems(s)
    yield from _gpu_model_problems(s)
    yield from _running_problems(s)
    yield from _workload_problems(s)
    yield from _reservation_problems(s)


def _reservation_problems(s: Snapshot) -> Iterator[Problem]:
    """A reservation names a pending gang of the snapshot (one reservation each) and nodes
    of the snapshot, each node held by one reservation only."""
    seen_gangs: set[str] = set()
    held_by: dict[str, str] = {}
    for i, res in enumerate(s.reservations):
        path = f"reservations[{i}]"
        if res.key not in s.gang_by_key:
            yield Problem(f"{path}.gang", f"{res.key!r} is not a pending gang of the snapshot")
        elif res.key in seen_gangs:
            yield Problem(f"{path}.gang", f"{res.key!r} has a reservation already")
        seen_gangs.add(res.key)
        for j, h in enumerate(res.held):
            where = f"{path}.held[{j}].node"
            if h.node not in s.node_by_name:
                yield Problem(where, f"unknown node {h.node!r}")
            elif h.node in held_by and held_by[h.node] != res.key:
                yield Problem(
                    where,
                    f"node {h.node!r} is held for {held_by[h.node]!r} already "
                    "(accepted: each node held by one reservation)",
                )
            held_by.setdefault(h.node, res.key)


def _listing(names: list[str], limit: int = 8) -> str:
    """``'a', 'b', 'c'``, or the first ``limit`` of them and how many there are."""
    if not names:
        return "none"
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown if len(names) <= limit else f"{shown}, ... ({len(names)} in all)"


def _dups(names: list[str]) -> set[str]:
    return {n for n, c in Counter(names).items() if c > 1}


def _declared_queues(s: Snapshot) -> str:
    return ", ".join(repr(q.name) for q in s.queues) or "none declared"


# --------------------------------------------------------------------------- sections


def _bound_problems(s: Snapshot) -> Iterator[Problem]:
    """Sizes no real cluster has (:mod:`gangplan.models.limits`), each with the bound."""
    if msg := too_many("MAX_NODES", len(s.nodes)):
        yield Problem("nodes", msg)
    devices = 0
    for i, node in enumerate(s.nodes):
        for res in (s.gpu, s.nic):
            count = node.allocatable.get(res, 0) // GPU_MILLI
            if msg := too_many("MAX_DEVICES_PER_NODE", count):
                yield Problem(f"nodes[{i}].allocatable.{res}", msg)
            devices += min(count, MAX_DEVICES_PER_NODE)  # a node above is reported already
    if msg := too_many("MAX_DEVICES", devices):
        yield Problem("nodes", msg)
    pods = len(s.running)
    for i, gang in enumerate(s.gangs):
        pods += gang.size
        if msg := too_many("MAX_PODS_PER_GANG", gang.size):
            yield Problem(f"gangs[{i}]", msg)
    if msg := too_many("MAX_PODS", pods):
        yield Problem("gangs" if s.gangs else "running", msg)


def _level_problems(s: Snapshot) -> Iterator[Problem]:
    level_names = [lv.name for lv in s.levels]
    for i, name in enumerate(level_names):
        if name == "node":
            yield Problem(f"levels[{i}].name", "'node' is the implicit lowest level; rename it")
        elif name in _dups(level_names):
            yield Problem(f"levels[{i}].name", f"duplicate level name {name!r}")


def _node_problems(s: Snapshot) -> Iterator[Problem]:
    level_names = [lv.name for lv in s.levels]
    dup_nodes = _dups([n.name for n in s.nodes])
    layouts = ", ".join(repr(k) for k in s.device_layouts) or "none declared"
    for i, node in enumerate(s.nodes):
        path = f"nodes[{i}]"
        if node.name in dup_nodes:
            yield Problem(f"{path}.name", f"duplicate node name {node.name!r}")
        for level in node.domains:
            if level not in level_names:
                yield Problem(
                    f"{path}.domains.{level}",
                    f"unknown level {level!r} (accepted: {', '.join(map(repr, level_names))})",
                )
        if node.device_layout is not None and node.device_layout not in s.device_layouts:
            yield Problem(
                f"{path}.device_layout",
                f"unknown device layout {node.device_layout!r} (declared: {layouts})",
            )
            continue
        if node.devices is not None:
            yield from _layout_problems(node.devices, f"{path}.devices")
        yield from _whole_units(
            node.allocatable, f"{path}.allocatable", fractional_ok=set(), gpu=s.gpu
        )
        if node.has_device_topology:
            layout = s.layout_of(node)
            for res, ids, what in (
                (s.gpu, layout.gpu_ids, "GPUs"),
                (s.nic, layout.nic_ids, "NICs"),
            ):
                have = node.allocatable.get(res, 0)
                if have != GPU_MILLI * len(ids):
                    yield Problem(
                        f"{path}.allocatable.{res}",
                        f"node {node.name!r}: device layout has {len(ids)} {what} but "
                        f"allocatable {res} is {format_quantity(res, have)} (they must agree)",
                    )


def _queue_problems(s: Snapshot) -> Iterator[Problem]:
    dup_queues = _dups([q.name for q in s.queues])
    for i, q in enumerate(s.queues):
        if q.name in dup_queues:
            yield Problem(f"queues[{i}].name", f"duplicate queue name {q.name!r}")
        yield from _whole_units(q.guaranteed, f"queues[{i}].guaranteed", {s.gpu})
        yield from _whole_units(q.max, f"queues[{i}].max", {s.gpu})


def _gang_problems(s: Snapshot) -> Iterator[Problem]:
    level_names = [lv.name for lv in s.levels]
    known_levels = {*level_names, "node"}
    accepted_levels = ", ".join(repr(n) for n in [*level_names, "node"])
    queues = _declared_queues(s)
    dup_keys = _dups([g.key for g in s.gangs])
    for i, gang in enumerate(s.gangs):
        path = f"gangs[{i}]"
        if gang.key in dup_keys:
            yield Problem(f"{path}.name", f"duplicate gang {gang.key!r}")
        if gang.queue not in s.queue_by_name:
            yield Problem(f"{path}.queue", f"unknown queue {gang.queue!r} (declared: {queues})")
        constraints = [(f"{path}.topology", gang.topology)] + [
            (f"{path}.roles[{j}].topology", r.topology) for j, r in enumerate(gang.roles)
        ]
        for where, tc in constraints:
            if tc is None:
                continue
            for kind in ("required", "preferred"):
                lv = getattr(tc, kind)
                if lv is not None and lv not in known_levels:
                    yield Problem(
                        f"{where}.{kind}", f"unknown level {lv!r} (accepted: {accepted_levels})"
                    )
        if gang.min_member is not None and gang.min_member > gang.size:
            yield Problem(
                f"{path}.min_member",
                f"gang {gang.name!r}: min_member {gang.min_member} exceeds the full size "
                f"{gang.size} (accepted: 1..{gang.size})",
            )
        yield from _role_problems(s, gang, path)


def _role_problems(s: Snapshot, gang: Gang, path: str) -> Iterator[Problem]:
    role_names = [r.name for r in gang.roles]
    for j, role in enumerate(gang.roles):
        if role.name in _dups(role_names):
            yield Problem(f"{path}.roles[{j}].name", f"duplicate role name {role.name!r}")
        if role.min_member is not None and role.min_member > role.count:
            yield Problem(
                f"{path}.roles[{j}].min_member",
                f"role {role.name!r}: min_member {role.min_member} exceeds count "
                f"{role.count} (accepted: 0..{role.count})",
            )
        if role.pod_names is not None and len(role.pod_names) != role.count:
            yield Problem(
                f"{path}.roles[{j}].pod_names",
                f"{len(role.pod_names)} pod names for count {role.count} (they must agree)",
            )
        for name in sorted(_dups(list(role.pod_names or ()))):
            yield Problem(
                f"{path}.roles[{j}].pod_names",
                f"duplicate pod name {name!r} (each pod of a role needs its own name)",
            )
        rpath = f"{path}.roles[{j}].requests"
        yield from _whole_units(role.requests, rpath, {s.gpu})
        g = role.requests.get(s.gpu, 0)
        if g > GPU_MILLI and g % GPU_MILLI:
            yield Problem(
                f"{rpath}.{s.gpu}",
                f"{format_quantity(s.gpu, g)} GPUs: a pod asks a share of one GPU "
                "(below 1) or whole GPUs, not both",
            )
        if role.requests.get(s.nic, 0) and gang.joint != "none" and g < GPU_MILLI:
            yield Problem(
                f"{path}.joint",
                f"joint allocation {gang.joint!r} needs whole GPUs in role {role.name!r}",
            )


def _pod_name_problems(s: Snapshot) -> Iterator[Problem]:
    """Pod names are unique per namespace, pending and running alike (they become Bindings)."""
    dup_keys = _dups([g.key for g in s.gangs])
    seen_pods: dict[tuple[str, str], str] = {}
    for i, pod in enumerate(s.running):
        seen_pods.setdefault((pod.namespace, pod.name), f"running[{i}]")
    for i, gang in enumerate(s.gangs):
        if gang.key in dup_keys:
            continue  # reported as a duplicate gang already
        for j, role in enumerate(gang.roles):
            if role.name in _dups([r.name for r in gang.roles]):
                continue  # reported as a duplicate role already
            if role.pod_names is not None and len(role.pod_names) != role.count:
                continue  # reported as pod names that disagree with the count already
            where = f"gangs[{i}].roles[{j}]." + ("pod_names" if role.pod_names else "name")
            for k in range(role.count):
                name = role.pod_name(gang.name, k)
                first = seen_pods.setdefault((gang.namespace, name), where)
                if first != where:
                    yield Problem(
                        where,
                        f"pod name {gang.namespace}/{name} is also used by {first} (pod names "
                        "must be unique in a namespace; pods without pod_names are named "
                        "{gang}-{role}-{i})",
                    )


def _gpu_model_problems(s: Snapshot) -> Iterator[Problem]:
    mapping = s.resources.gpu_model_resources
    if not mapping:
        return
    for i, gang in enumerate(s.gangs):
        for j, role in enumerate(gang.roles):
            for res in role.requests:
                if res in mapping:
                    yield Problem(
                        f"gangs[{i}].roles[{j}].requests.{res}",
                        f"{res} (GPU model {mapping[res]}) cannot be mixed with other GPU "
                        "requests or models in one gang, nor with a gpu_models list that "
                        f"excludes {mapping[res]} (accepted: every GPU role of the gang asks "
                        "the same model-specific resource, or all ask the GPU resource with "
                        "gpu_models)",
                    )


def _running_problems(s: Snapshot) -> Iterator[Problem]:
    queues = _declared_queues(s)
    node_names = [n.name for n in s.nodes]
    dup_pods = _dups([f"{p.namespace}/{p.name}" for p in s.running])
    used_whole: dict[tuple[str, str], str] = {}
    for i, pod in enumerate(s.running):
        path = f"running[{i}]"
        if f"{pod.namespace}/{pod.name}" in dup_pods:
            yield Problem(f"{path}.name", f"duplicate running pod {pod.name!r}")
        if pod.queue is not None and pod.queue not in s.queue_by_name:
            yield Problem(f"{path}.queue", f"unknown queue {pod.queue!r} (declared: {queues})")
        host = s.node_by_name.get(pod.node)
        if host is None:
            yield Problem(
                f"{path}.node", f"unknown node {pod.node!r} (declared: {_listing(node_names)})"
            )
            continue
        yield from _whole_units(pod.requests, f"{path}.requests", {s.gpu})
        if host.device_layout is not None and host.device_layout not in s.device_layouts:
            continue
        layout = s.layout_of(host)
        gpu_ids, nic_ids = set(layout.gpu_ids), set(layout.nic_ids)
        whole = pod.requests.get(s.gpu, 0) >= GPU_MILLI
        for dev in pod.devices:
            if dev not in gpu_ids and dev not in nic_ids:
                yield Problem(
                    f"{path}.devices",
                    f"device {dev!r} does not exist on node {host.name!r} (its devices: "
                    f"{_listing([*layout.gpu_ids, *layout.nic_ids])})",
                )
            elif dev in nic_ids or whole:
                owner = used_whole.get((host.name, dev))
                if owner is not None:
                    yield Problem(
                        f"{path}.devices",
                        f"device {dev!r} on node {host.name!r} is already held by {owner!r}",
                    )
                used_whole[(host.name, dev)] = pod.name


# --------------------------------------------------------------------------- helpers


def _layout_problems(layout: DeviceLayout, path: str) -> Iterator[Problem]:
    ids = [*layout.gpu_ids, *layout.nic_ids]
    for dev in sorted(_dups(ids)):
        yield Problem(path, f"device id {dev!r} used twice")
    switches = [sw.name for _, sw in layout.switches()]
    for sw in sorted(_dups(switches)):
        yield Problem(path, f"PCIe switch name {sw!r} used twice")
    numas = [n.name for n in layout.numa_nodes]
    for n in sorted(_dups(numas)):
        yield Problem(path, f"NUMA node name {n!r} used twice")


def _whole_units(
    res: dict[str, int], path: str, fractional_ok: set[str], gpu: str | None = None
) -> Iterator[Problem]:
    for name, amount in res.items():
        if name in (CPU, MEMORY) or name in fractional_ok:
            continue
        if amount % GPU_MILLI and name == gpu:
            yield Problem(
                f"{path}.{name}",
                f"{amount / GPU_MILLI:g} GPUs is not a whole number; a node's GPUs are counted "
                "in whole devices (a share such as 500m is for a pod's request)",
            )
        elif (
            amount % GPU_MILLI and not name.startswith("hugepages-") and name != "ephemeral-storage"
        ):
            yield Problem(
                f"{path}.{name}",
                f"{format_quantity(name, amount)} is not a whole number; extended resources "
                "are counted in whole units (only the GPU resource takes a share such as 500m)",
            )


def _workload_problems(s: Snapshot) -> Iterator[Problem]:
    """A declared workload's pod shapes ask what a pod may ask: a share of one GPU or whole
    GPUs, and extended resources in whole units."""
    for i, entry in enumerate(s.workload):
        path = f"workload[{i}].requests"
        yield from _whole_units(entry.requests, path, {s.gpu})
        g = entry.requests.get(s.gpu, 0)
        if g > GPU_MILLI and g % GPU_MILLI:
            yield Problem(
                f"{path}.{s.gpu}",
                f"{format_quantity(s.gpu, g)} GPUs: a pod asks a share of one GPU "
                "(below 1) or whole GPUs, not both",
            )
