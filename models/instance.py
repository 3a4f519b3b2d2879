"""The instance file: a snapshot written by hand (``apiVersion: gangplan.io/v1alpha1``,
``kind: Instance``), in YAML or JSON.

It is the :class:`~gangplan.models.snapshot.Snapshot` plus three shorthands that keep a
4,096-node cluster to a page:

* ``node_pools``: ``count`` nodes named by a pattern (``"gpu-{index:03d}"``), sharing
  allocatable, labels, taints, GPU model and a device-layout template, spread over topology
  domains by ``spread`` rules (node *i* of the pool joins domain ``name.format(n=first + i //
  size)`` of each rule's level);
* ``device_layouts``: a device tree declared once and named by many nodes;
* ``replicas`` on a running pod: that many identical pods named ``{name}-{i}``.

:func:`load_instance` turns parsed data into a snapshot, collecting every problem at once
with its path in the file (``gangs[3].roles[0].count``); the JSON Schema is generated from
:class:`InstanceFile` (``gangplan schema``), never written by hand.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from dataclasses import dataclass
from string import Formatter
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    field_validator,
)

from gangplan.models.base import API_VERSION, GPU_MILLI, Frozen, Name
from gangplan.models.checks import Problem, SnapshotError
from gangplan.models.limits import (
    MAX_DEVICES_PER_NODE,
    MAX_NAME_LENGTH,
    NodeCount,
    PodCount,
    too_many,
)
from gangplan.models.moves import DisruptionBudget
from gangplan.models.quantity import ResourceList
from gangplan.models.reservation import Reservation, ReservationSettings
from gangplan.models.snapshot import (
    DeviceLayout,
    Gang,
    Level,
    Node,
    PreemptionSettings,
    Queue,
    ResourceNames,
    RunningPod,
    Snapshot,
    Taint,
    WorkloadShape,
)

__all__ = [
    "InstanceError",
    "InstanceFile",
    "NodePool",
    "RunningEntry",
    "SpreadRule",
    "format_loc",
    "instance_from_snapshot",
    "load_instance",
]


class SpreadRule(Frozen):
    """Puts node *i* of a pool into domain ``name.format(n=first + i // size)`` of ``level``."""

    level: Name
    size: PositiveInt = Field(description="nodes per domain of this level")
    name: str = Field(description="domain name pattern with {n}, e.g. 'leaf-{n}'")
    first: NonNegativeInt = Field(0, description="number of the first domain")

    @field_validator("name")
    @classmethod
    def _has_n(cls, v: str) -> str:
        _check_widths(v, "leaf-{n}")
        try:
            a, b = v.format(n=0), v.format(n=1)
        except (KeyError, IndexError, ValueError, TypeError, AttributeError) as err:
            raise ValueError(f"pattern {v!r} is not valid: use {{n}} (e.g. 'leaf-{{n}}')") from err
        if a == b:
            raise ValueError(f"pattern {v!r} must contain {{n}} (e.g. 'leaf-{{n}}')")
        return v


class NodePool(Frozen):
    """``count`` alike nodes: the shorthand that keeps a large cluster to a page."""

    name: str = Field(description="node name pattern with {index}, e.g. 'gpu-{index:03d}'")
    count: NodeCount
    start: NonNegativeInt = Field(0, description="index of the first node")
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    allocatable: ResourceList = Field(default_factory=dict)
    gpu_model: Name | None = None
    device_layout: Name | None = None
    spread: tuple[SpreadRule, ...] = ()

    @field_validator("name")
    @classmethod
    def _has_index(cls, v: str) -> str:
        _check_widths(v, "gpu-{index:03d}")
        try:
            a, b = v.format(index=0), v.format(index=1)
        except (KeyError, IndexError, ValueError, TypeError, AttributeError) as err:
            raise ValueError(
                f"pattern {v!r} is not valid: use {{index}} (e.g. 'gpu-{{index:03d}}')"
            ) from err
        if a == b:
            raise ValueError(f"pattern {v!r} must contain {{index}} (e.g. 'gpu-{{index:03d}}')")
        return v


class RunningEntry(RunningPod):
    """A running pod, or ``replicas`` identical ones named ``{name}-{i}``."""

    replicas: PodCount = 1


class InstanceFile(Frozen):
    """The instance file's schema (``kind: Instance``)."""

    api_version: Literal["gangplan.io/v1alpha1"] = Field("gangplan.io/v1alpha1", alias="apiVersion")
    kind: Literal["Instance"] = "Instance"
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="name, description, source; 'synthetic' lists parts not from real data",
    )
    resources: ResourceNames = Field(default_factory=ResourceNames)
    levels: tuple[Level, ...] = ()
    device_layouts: dict[Name, DeviceLayout] = Field(default_factory=dict)
    node_pools: tuple[NodePool, ...] = ()
    nodes: tuple[Node, ...] = ()
    queues: tuple[Queue, ...] = ()
    gangs: tuple[Gang, ...] = ()
    running: tuple[RunningEntry, ...] = ()
    preemption: PreemptionSettings = Field(default_factory=PreemptionSettings)
    workload: tuple[WorkloadShape, ...] = ()
    reservation: ReservationSettings = Field(default_factory=ReservationSettings)
    reservations: tuple[Reservation, ...] = ()
    disruption_budgets: tuple[DisruptionBudget, ...] = ()

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def to_snapshot(self) -> Snapshot:
        """Expand pools and replicas into a validated snapshot.

        Sizes are checked against :mod:`gangplan.models.limits` before anything is expanded.
        A mistake shared by many nodes of one pool (or replicas of one running entry) is
        reported once, with how many share it.

        Raises:
            InstanceError: every cross-reference problem, with paths in this file.
        """
        bad = list(self._spread_level_problems())
        early = list(self._size_problems())
        if early:
            raise InstanceError(bad + early)
        nodes, origins = self._expand_nodes()
        running, running_origins = self._expand_running()
        data = {
            "resources": self.resources.model_dump(),
            "levels": [lv.model_dump() for lv in self.levels],
            "device_layouts": {k: v.model_dump() for k, v in self.device_layouts.items()},
            "nodes": nodes,
            "queues": [q.model_dump() for q in self.queues],
            "gangs": [g.model_dump() for g in self.gangs],
            "running": running,
            "preemption": self.preemption.model_dump(),
            "workload": [w.model_dump() for w in self.workload],
            "reservation": self.reservation.model_dump(),
            "reservations": [r.model_dump() for r in self.reservations],
            "disruption_budgets": [b.model_dump() for b in self.disruption_budgets],
            "metadata": self.metadata,
        }
        try:
            snapshot = Snapshot.model_validate(data)
        except ValidationError as err:
            raw: list[Problem] = []
            errors = err.errors()
            locs = [tuple(e["loc"]) for e in errors]
            for e in errors:
                ctx_err = (e.get("ctx") or {}).get("error")
                if isinstance(ctx_err, SnapshotError):
                    raw.extend(ctx_err.problems)
                elif (problem := _pydantic_problem(e, Snapshot, locs)) is not None:
                    raw.append(problem)
            problems = _collapse(raw, {"nodes": origins, "running": running_origins})
            raise InstanceError(bad + problems) from None
        if bad:
            raise InstanceError(bad)
        return snapshot

    def _spread_level_problems(self) -> Iterator[Problem]:
        known = ", ".join(repr(lv.name) for lv in self.levels) or "none declared"
        names = {lv.name for lv in self.levels}
        for p, pool in enumerate(self.node_pools):
            for r, rule in enumerate(pool.spread):
                if rule.level not in names:
                    yield Problem(
                        f"node_pools[{p}].spread[{r}].level",
                        f"unknown level {rule.level!r} (accepted: {known})",
                    )

    def _size_problems(self) -> Iterator[Problem]:
        """What no real cluster has, found before anything is expanded: the bounds of
        :mod:`gangplan.models.limits`, and name patterns whose names grow too long."""
        names = self.resources
        device_resources = (names.gpu, names.nic, *names.gpu_model_resources)
        devices = sum(_devices(n.allocatable, device_resources) for n in self.nodes)
        nodes = len(self.nodes)
        for p, pool in enumerate(self.node_pools):
            nodes += pool.count
            devices += pool.count * _devices(pool.allocatable, device_resources)
            for res in device_resources:
                msg = too_many("MAX_DEVICES_PER_NODE", pool.allocatable.get(res, 0) // GPU_MILLI)
                if msg:
                    yield Problem(f"node_pools[{p}].allocatable.{res}", msg)
            yield from _pool_name_problems(pool, f"node_pools[{p}]")
        where = "node_pools" if self.node_pools else "nodes"
        if msg := too_many("MAX_NODES", nodes):
            yield Problem(where, msg)
        if msg := too_many("MAX_DEVICES", devices):
            yield Problem(where, msg)
        if msg := too_many("MAX_PODS", sum(entry.replicas for entry in self.running)):
            yield Problem("running", msg)

    def _expand_nodes(self) -> tuple[list[dict[str, Any]], list[_Origin]]:
        """The pools' nodes, then the explicit ones; with where each came from."""
        nodes: list[dict[str, Any]] = []
        origins: list[_Origin] = []
        level_by_name = {lv.name: lv for lv in self.levels}
        for p, pool in enumerate(self.node_pools):
            allocatable = _quantities(pool.allocatable)
            rules = [(r, level_by_name[r.level]) for r in pool.spread if r.level in level_by_name]
            for i in range(pool.count):
                labels = dict(pool.labels)
                domains: dict[str, str] = {}
                for rule, level in rules:
                    domain = rule.name.format(n=rule.first + i // rule.size)
                    if level.node_label:
                        labels[level.node_label] = domain
                    else:
                        domains[rule.level] = domain
                name = pool.name.format(index=pool.start + i)
                nodes.append(
                    {
                        "name": name,
                        "labels": labels,
                        "taints": pool.taints,
                        "unschedulable": pool.unschedulable,
                        "ready": pool.ready,
                        "allocatable": allocatable,
                        "gpu_model": pool.gpu_model,
                        "domains": domains,
                        "device_layout": pool.device_layout,
                    }
                )
                origins.append(_Origin(f"node_pools[{p}]", p, f"node {name!r}", name))
        for i, node in enumerate(self.nodes):
            nodes.append(node.model_dump())
            origins.append(_Origin(f"nodes[{i}]", None, "", node.name))
        return nodes, origins

    def _expand_running(self) -> tuple[list[dict[str, Any]], list[_Origin]]:
        running: list[dict[str, Any]] = []
        origins: list[_Origin] = []
        for i, entry in enumerate(self.running):
            data = entry.model_dump(exclude={"replicas"})
            group = i if entry.replicas > 1 else None
            for k in range(entry.replicas):
                name = entry.name if entry.replicas == 1 else f"{entry.name}-{k}"
                running.append({**data, "name": name})
                origins.append(_Origin(f"running[{i}]", group, "", name))
        return running, origins


@dataclass(frozen=True)
class _Origin:
    """Where an expanded node or running pod came from in the file: its ``path``; the pool
    (or running entry) ``group`` whose members share mistakes, None for an object written
    alone; how to name one member (``node 'p-3'``); and its name."""

    path: str
    group: int | None
    label: str
    name: str


@dataclass
class _Shared:
    """A mistake shared by ``count`` members of one pool or running entry, ``origin`` the
    first of them; ``rest`` the path inside the member."""

    origin: _Origin
    rest: str
    message: str
    count: int = 1

    def problem(self) -> Problem:
        o, n = self.origin, self.count
        if n == 1:
            who = f" ({o.label})" if o.label else ""
        else:
            who = f" ({o.label} and {n - 1:,} more)" if o.label else f" ({n:,} replicas)"
        return Problem(f"{o.path}{who}{self.rest}", self.message)


def _collapse(problems: list[Problem], origins: dict[str, list[_Origin]]) -> list[Problem]:
    """Rewrite ``nodes[37].x`` of the expanded snapshot to where node 37 came from in the
    file, and report a mistake shared by many members of one pool or running entry once:
    ``node_pools[0] (node 'p-0' and 49,999 more).x``, ``running[2] (12 replicas).node``.
    Members share a mistake when the path inside them and the message agree but for the
    member's own name. The order is that of each mistake's first appearance."""
    out: list[Problem | _Shared] = []
    shared: dict[tuple[str, int, str, str], _Shared] = {}
    for problem in problems:
        found = _origin_of(problem.path, origins)
        if found is None:
            out.append(problem)
            continue
        section, origin, rest = found
        if origin.group is None:
            out.append(Problem(origin.path + rest, problem.message))
            continue
        key = (section, origin.group, rest, problem.message.replace(repr(origin.name), "\0"))
        if key in shared:
            shared[key].count += 1
        else:
            shared[key] = _Shared(origin, rest, problem.message)
            out.append(shared[key])
    return [p.problem() if isinstance(p, _Shared) else p for p in out]


def _origin_of(path: str, origins: dict[str, list[_Origin]]) -> tuple[str, _Origin, str] | None:
    for section, members in origins.items():
        prefix = f"{section}["
        if path.startswith(prefix) and "]" in path:
            end = path.index("]")
            idx = path[len(prefix) : end]
            if idx.isdigit() and int(idx) < len(members):
                return section, members[int(idx)], path[end + 1 :]
    return None


def _devices(allocatable: dict[str, int], resources: tuple[str, ...]) -> int:
    """GPU and NIC devices a node declares (each resource capped at the per-node bound,
    which is reported on its own)."""
    return sum(min(allocatable.get(r, 0) // GPU_MILLI, MAX_DEVICES_PER_NODE) for r in resources)


def _pool_name_problems(pool: NodePool, path: str) -> Iterator[Problem]:
    """Name patterns whose longest name (at either end of the pool) is past 253 characters."""
    last = pool.count - 1
    longest = max(len(pool.name.format(index=pool.start + i)) for i in (0, last))
    if longest > MAX_NAME_LENGTH:
        yield Problem(
            f"{path}.name",
            f"pattern {_short(pool.name)} gives names of up to {longest} characters "
            f"(accepted: a Kubernetes name of at most {MAX_NAME_LENGTH} characters)",
        )
    for r, rule in enumerate(pool.spread):
        ends = (rule.first, rule.first + last // rule.size)
        longest = max(len(rule.name.format(n=n)) for n in ends)
        if longest > MAX_NAME_LENGTH:
            yield Problem(
                f"{path}.spread[{r}].name",
                f"pattern {_short(rule.name)} gives names of up to {longest} characters "
                f"(accepted: a name of at most {MAX_NAME_LENGTH} characters)",
            )


def _short(text: str, limit: int = 60) -> str:
    """``repr(text)``, cut to ``limit`` characters with ``...``."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def _check_widths(pattern: str, example: str) -> None:
    """Refuse a format spec that could make a name longer than 253 characters before any
    name is formatted: a width or precision above 253, or a nested field (whose width would
    come from the index itself).

    Raises:
        ValueError: naming the pattern, the width and what is accepted.
    """
    try:
        specs = [
            spec or "" for _, field, spec, _ in Formatter().parse(pattern) if field is not None
        ]
    except ValueError:
        return  # not a pattern at all: the trial format of the caller says so
    for spec in specs:
        if "{" in spec:
            raise ValueError(
                f"pattern {_short(pattern)}: a nested field in a format spec is not accepted "
                f"(e.g. {example!r})"
            )
        for run in re.findall(r"[0-9]+", spec):
            if len(run.lstrip("0")) > 3 or int(run) > MAX_NAME_LENGTH:
                width = run if len(run) <= 12 else run[:8] + "..."
                raise ValueError(
                    f"pattern {_short(pattern)}: a width of {width} cannot fit a name of at "
                    f"most {MAX_NAME_LENGTH} characters (accepted: widths up to "
                    f"{MAX_NAME_LENGTH}, e.g. {example!r})"
                )


def _quantities(res: dict[str, int]) -> dict[str, str]:
    from gangplan.models.quantity import format_quantity

    return {k: format_quantity(k, v) for k, v in res.items()}


class InstanceError(ValueError):
    """An instance that cannot become a snapshot; ``problems`` lists every one found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def yaml_scalar(value: object) -> str:
    """A non-string YAML key as YAML writes it: ``2024-01-01`` (a date), ``true`` (a
    boolean: ``yes``, ``on`` and ``true`` all read as one), ``null``; others as ``str``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return str(value)


def format_loc(loc: tuple[int | str, ...]) -> str:
    """``('gangs', 3, 'roles', 0, 'count')`` -> ``gangs[3].roles[0].count``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out:
            out += f".{part}"
        else:
            out = str(part)
    return out


def _accepted_fields(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str] | None:
    """The field names accepted at the object that ``loc`` (ending in the bad key) points into."""
    current: Any = model
    key_next = False  # the previous field is a mapping: this part is one of its keys
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if key_next:
            key_next = False
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            f = current.model_fields.get(part)
            if f is None:
                # maybe an alias
                f = next((x for x in current.model_fields.values() if x.alias == part), None)
            if f is None:
                return None
            current = _inner_model(f.annotation)
            key_next = _is_mapping(f.annotation)
        else:
            return None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or n for n, f in current.model_fields.items()]
    return None


def _is_mapping(annotation: Any) -> bool:
    """True for ``dict[...]`` (also inside ``Optional`` / ``Annotated``)."""
    import typing

    if typing.get_origin(annotation) is dict:
        return True
    return any(_is_mapping(arg) for arg in typing.get_args(annotation))


def _inner_model(annotation: Any) -> Any:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def load_instance(data: Any) -> tuple[Snapshot, list[str]]:
    """Validate parsed instance data (a dict from YAML/JSON) into a snapshot.

    Returns:
        ``(snapshot, warnings)``; warnings name each inconsistent node and resource or label.

    Raises:
        InstanceError: every problem at once, each with its path in the file and what is
            accepted (unknown fields, bad quantities, negative values, zero counts,
            duplicate names, unknown references, min_member above the full size, device ids
            used twice, device layouts that disagree with allocatable).
    """
    if data is None:
        raise InstanceError([Problem("", "the file is empty (expected a mapping, kind: Instance)")])
    if not isinstance(data, dict):
        raise InstanceError(
            [Problem("", f"the file holds a {type(data).__name__}, not a mapping (kind: Instance)")]
        )
    try:
        inst = InstanceFile.model_validate(data)
    except ValidationError as err:
        problems = validation_problems(err, InstanceFile)
        seen = {p.path for p in problems}
        refs = [p for p in _raw_reference_problems(data) if p.path not in seen]
        raise InstanceError(problems + refs) from None
    snap = inst.to_snapshot()
    return snap, snap.warnings()


def _names(data: dict[str, Any], section: str) -> list[str] | None:
    """The ``name`` of every item of a list section, or None if the section cannot be read
    (not a list, or an item without a string name: then no reference to it is judged)."""
    items = data.get(section, [])
    if not isinstance(items, list):
        return None
    names = [i.get("name") if isinstance(i, dict) else None for i in items]
    return (
        [n for n in names if isinstance(n, str)] if all(isinstance(n, str) for n in names) else None
    )


def _items(data: dict[str, Any], section: str) -> Iterator[tuple[int, dict[str, Any]]]:
    items = data.get(section, [])
    for i, item in enumerate(items if isinstance(items, list) else []):
        if isinstance(item, dict):
            yield i, item


def _raw_reference_problems(data: dict[str, Any]) -> Iterator[Problem]:
    """References to an unknown queue, level or node, judged on the raw data when some field
    of the file is invalid (so that one run reports both), wherever the names referred to can
    still be read; the same messages as the checks of a valid file (:mod:`.checks`)."""
    queues, levels = _names(data, "queues"), _names(data, "levels")
    nodes = _names(data, "nodes") if not data.get("node_pools") else None
    declared = ", ".join(map(repr, queues or [])) or "none declared"
    accepted = ", ".join(map(repr, [*(levels or []), "node"]))

    def level(value: Any, path: str) -> Iterator[Problem]:
        if levels is not None and isinstance(value, str) and value not in {*levels, "node"}:
            yield Problem(path, f"unknown level {value!r} (accepted: {accepted})")

    def queue(value: Any, path: str) -> Iterator[Problem]:
        if queues is not None and isinstance(value, str) and value not in queues:
            yield Problem(path, f"unknown queue {value!r} (declared: {declared})")

    for i, gang in _items(data, "gangs"):
        yield from queue(gang.get("queue"), f"gangs[{i}].queue")
        roles = gang.get("roles")
        places = [(f"gangs[{i}].topology", gang.get("topology"))] + [
            (f"gangs[{i}].roles[{j}].topology", r.get("topology"))
            for j, r in enumerate(roles if isinstance(roles, list) else [])
            if isinstance(r, dict)
        ]
        for where, tc in places:
            for kind in ("required", "preferred"):
                if isinstance(tc, dict):
                    yield from level(tc.get(kind), f"{where}.{kind}")
    known = ", ".join(map(repr, levels or []))
    for i, node in _items(data, "nodes"):
        domains = node.get("domains")
        if levels is None or not isinstance(domains, dict):
            continue
        for key in domains:
            if key not in levels:
                yield Problem(
                    f"nodes[{i}].domains.{key}", f"unknown level {key!r} (accepted: {known})"
                )
    for i, pod in _items(data, "running"):
        yield from queue(pod.get("queue"), f"running[{i}].queue")
        host = pod.get("node")
        if nodes is not None and isinstance(host, str) and host not in nodes:
            shown = ", ".join(map(repr, nodes[:8])) + (
                f", ... ({len(nodes)} in all)" if len(nodes) > 8 else ""
            )
            yield Problem(
                f"running[{i}].node", f"unknown node {host!r} (declared: {shown or 'none'})"
            )


def instance_from_snapshot(snapshot: Snapshot) -> dict[str, Any]:
    """The instance-file form of a snapshot (explicit nodes), ready to write as YAML/JSON.

    ``load_instance(instance_from_snapshot(s))[0] == s`` (the round trip).
    """
    data = snapshot.model_dump(mode="json", exclude={"api_version"}, exclude_defaults=True)
    return {"apiVersion": API_VERSION, "kind": "Instance", **data}


_MESSAGES = {
    "tuple_type": "should be a list",
    "list_type": "should be a list",
    "dict_type": "should be a mapping",
    "model_type": "should be a mapping",
    "model_attributes_type": "should be a mapping",
    "string_type": "should be a string",
}
_K8S_NAME_HELP = (
    "should be a Kubernetes name: lowercase letters, digits, '-' and '.', starting and "
    "ending with a letter or digit, at most 253 characters"
)


def validation_problems(err: ValidationError, model: type[BaseModel]) -> list[Problem]:
    """Pydantic's errors as :class:`Problem` s: the path in the file, what is wrong, and
    what is accepted (the fields of the object for an unknown field; plain words instead
    of Python type names)."""
    errors = err.errors()
    locs = [tuple(e["loc"]) for e in errors]
    return [p for e in errors if (p := _pydantic_problem(e, model, locs)) is not None]


def _pydantic_problem(
    e: Any, model: type[BaseModel], locs: list[tuple[Any, ...]]
) -> Problem | None:
    """One pydantic error as a :class:`Problem` (None for a ``too_short`` list whose items
    failed themselves: ``locs`` are the locations of all errors, to tell)."""
    loc = tuple(e["loc"])
    kind = e["type"]
    if kind == "too_short" and any(o[: len(loc)] == loc and o != loc for o in locs):
        return None  # the items themselves failed; their own errors say why
    msg = e["msg"]
    got = repr(e.get("input"))
    got = got if len(got) <= 60 else got[:57] + "..."
    if kind == "extra_forbidden":
        accepted = _accepted_fields(model, loc)
        msg = f"unknown field {loc[-1]!r}" + (
            f" (accepted: {', '.join(accepted)})" if accepted else ""
        )
    elif kind == "missing":
        msg = "required field is missing"
    elif kind.startswith("value_error"):
        msg = msg.removeprefix("Value error, ")
    elif kind == "string_pattern_mismatch":
        msg = f"{_K8S_NAME_HELP} (got {got})"
    elif kind == "string_type" and loc and loc[-1] == "[key]" and "input" in e:
        key = yaml_scalar(e["input"])
        what = {"bool": "a boolean", "date": "a date", "datetime": "a time"}.get(
            type(e["input"]).__name__, f"a {type(e['input']).__name__}"
        )
        # pydantic's loc holds the key as repr() or a number: name the mapping, then the key
        return Problem(
            format_loc(loc[:-2]),
            f"key {key}: YAML reads it as {what}, not a string; quote it"
            + (" as written (e.g. 'yes', 'on')" if isinstance(e["input"], bool) else f": '{key}'"),
        )
    elif kind in _MESSAGES:
        msg = f"{_MESSAGES[kind]} (got {got})"
    elif "input" in e and kind not in ("literal_error",):
        msg = f"{msg} (got {got})"
    return Problem(format_loc(loc), msg)
