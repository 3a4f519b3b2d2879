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

from gangplan.models.base import API_VERSION, Frozen, Name
from gangplan.models.checks import Problem, SnapshotError
from gangplan.models.quantity import ResourceList
from gangplan.models.snapshot import (
    DeviceLayout,
    Gang,
    Level,
    Node,
    Queue,
    ResourceNames,
    RunningPod,
    Snapshot,
    Taint,
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
    count: PositiveInt
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

    replicas: PositiveInt = 1


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

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def to_snapshot(self) -> Snapshot:
        """Expand pools and replicas into a validated snapshot.

        Raises:
            InstanceError: every cross-reference problem, with paths in this file.
        """
        nodes: list[dict[str, Any]] = []
        node_paths: list[str] = []
        level_by_name = {lv.name: lv for lv in self.levels}
        bad: list[Problem] = []
        for p, pool in enumerate(self.node_pools):
            for r, rule in enumerate(pool.spread):
                if rule.level not in level_by_name:
                    known = ", ".join(repr(n) for n in level_by_name) or "none declared"
                    bad.append(
                        Problem(
                            f"node_pools[{p}].spread[{r}].level",
                            f"unknown level {rule.level!r} (accepted: {known})",
                        )
                    )
            for i in range(pool.count):
                labels = dict(pool.labels)
                domains: dict[str, str] = {}
                for rule in pool.spread:
                    level = level_by_name.get(rule.level)
                    if level is None:
                        continue  # reported once above, not once per node
                    domain = rule.name.format(n=rule.first + i // rule.size)
                    if level.node_label:
                        labels[level.node_label] = domain
                    else:
                        domains[rule.level] = domain
                nodes.append(
                    {
                        "name": pool.name.format(index=pool.start + i),
                        "labels": labels,
                        "taints": pool.taints,
                        "unschedulable": pool.unschedulable,
                        "ready": pool.ready,
                        "allocatable": _quantities(pool.allocatable),
                        "gpu_model": pool.gpu_model,
                        "domains": domains,
                        "device_layout": pool.device_layout,
                    }
                )
                node_paths.append(f"node_pools[{p}] (node {nodes[-1]['name']!r})")
        for i, node in enumerate(self.nodes):
            nodes.append(node.model_dump())
            node_paths.append(f"nodes[{i}]")
        running: list[dict[str, Any]] = []
        running_paths: list[str] = []
        for i, entry in enumerate(self.running):
            data = entry.model_dump(exclude={"replicas"})
            for k in range(entry.replicas):
                name = entry.name if entry.replicas == 1 else f"{entry.name}-{k}"
                running.append({**data, "name": name})
                running_paths.append(f"running[{i}]")
        data = {
            "resources": self.resources.model_dump(),
            "levels": [lv.model_dump() for lv in self.levels],
            "device_layouts": {k: v.model_dump() for k, v in self.device_layouts.items()},
            "nodes": nodes,
            "queues": [q.model_dump() for q in self.queues],
            "gangs": [g.model_dump() for g in self.gangs],
            "running": running,
            "metadata": self.metadata,
        }
        try:
            snapshot = Snapshot.model_validate(data)
        except ValidationError as err:
            problems: list[Problem] = []
            for e in err.errors():
                ctx_err = (e.get("ctx") or {}).get("error")
                if isinstance(ctx_err, SnapshotError):
                    problems.extend(
                        _remap(p, {"nodes": node_paths, "running": running_paths})
                        for p in ctx_err.problems
                    )
                else:
                    path = format_loc(e["loc"])
                    problems.append(
                        _remap(
                            Problem(path, e["msg"]),
                            {"nodes": node_paths, "running": running_paths},
                        )
                    )
            raise InstanceError(bad + problems) from None
        if bad:
            raise InstanceError(bad)
        return snapshot


def _quantities(res: dict[str, int]) -> dict[str, str]:
    from gangplan.models.quantity import format_quantity

    return {k: format_quantity(k, v) for k, v in res.items()}


def _remap(problem: Problem, paths: dict[str, list[str]]) -> Problem:
    """Rewrite ``nodes[37].x`` of the expanded snapshot to where node 37 came from in the file."""
    for key, origin in paths.items():
        prefix = f"{key}["
        if problem.path.startswith(prefix):
            idx_end = problem.path.index("]")
            idx = int(problem.path[len(prefix) : idx_end])
            if idx < len(origin):
                return Problem(origin[idx] + problem.path[idx_end + 1 :], problem.message)
    return problem


class InstanceError(ValueError):
    """An instance that cannot become a snapshot; ``problems`` lists every one found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


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
        raise InstanceError(validation_problems(err, InstanceFile)) from None
    snap = inst.to_snapshot()
    return snap, snap.warnings()


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
    problems = []
    errors = err.errors()
    locs = [tuple(e["loc"]) for e in errors]
    for e in errors:
        loc = tuple(e["loc"])
        kind = e["type"]
        if kind == "too_short" and any(o[: len(loc)] == loc and o != loc for o in locs):
            continue  # the items themselves failed; their own errors say why
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
        elif kind in _MESSAGES:
            msg = f"{_MESSAGES[kind]} (got {got})"
        elif "input" in e and kind not in ("literal_error",):
            msg = f"{msg} (got {got})"
        problems.append(Problem(format_loc(loc), msg))
    return problems
