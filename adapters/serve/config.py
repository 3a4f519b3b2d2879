"""``gangplan serve``'s configuration: one YAML file, validated by pydantic.

Every field has a default, so an empty file is a valid configuration (gate mode, a cycle
every 2 s). Unknown fields are errors (a typo is not silently ignored), and a bad value is
reported with the file, the field's path and what is accepted, e.g.
``serve.yaml: mode: is 'bnd' (accepted: 'gate', 'bind')``. A ConfigMap (``kind:
ConfigMap``, as ``deploy/configmap.yaml``) is read too: its ``data.serve.yaml``.

Durations are seconds. The fields (the defaults in ``deploy/configmap.yaml`` and
``docs/serve.md`` are these):
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from gangplan.adapters import yaml_input
from gangplan.adapters.files import InputError, read_text
from gangplan.adapters.kube.topology import (
    PRESETS,
    OptionError,
    load_template,
    parse_topology_labels,
)

__all__ = ["ConfigError", "LeaderElection", "ServeConfig", "load_config"]


class ConfigError(Exception):
    """A configuration file that cannot be read or does not validate; ``lines`` name each
    field and what is accepted."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("\n".join(lines))


class _Strict(BaseModel):
    # NaN and infinity are no durations (NaN passed every bound check but one)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class LeaderElection(_Strict):
    """Leader election through a ``coordination.k8s.io/v1`` Lease (client-go's defaults:
    15 s lease, renew every 2 s, give up after 10 s without a renewal)."""

    enabled: bool = True
    namespace: str = "gangplan-system"
    name: str = "gangplan"
    lease_duration_s: float = Field(15.0, gt=0, le=3600)
    renew_deadline_s: float = Field(10.0, gt=0, le=3600)
    retry_period_s: float = Field(2.0, gt=0, le=600)

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElection:
        """client-go's rules (``NewLeaderElector`` in ``k8s.io/client-go/tools/leaderelection/
        leaderelection.go``): ``leaseDuration > renewDeadline`` and ``renewDeadline >
        JitterFactor * retryPeriod``, with ``JitterFactor = 1.2`` — else a replica could lose
        the Lease before it gives up renewing it, and two would lead at once."""
        if self.lease_duration_s <= self.renew_deadline_s:
            raise ValueError(
                f"lease_duration_s ({self.lease_duration_s:g}) must be greater than "
                f"renew_deadline_s ({self.renew_deadline_s:g}), as client-go's leader "
                "election requires"
            )
        if self.renew_deadline_s <= JITTER_FACTOR * self.retry_period_s:
            raise ValueError(
                f"renew_deadline_s ({self.renew_deadline_s:g}) must be greater than "
                f"{JITTER_FACTOR:g} x retry_period_s ({self.retry_period_s:g}), as client-go's "
                "leader election requires"
            )
        return self


JITTER_FACTOR = 1.2
"""client-go's ``leaderelection.JitterFactor``."""

DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""What ``spec.schedulerName`` accepts: a DNS-1123 subdomain (``IsDNS1123Subdomain`` in
``k8s.io/apimachinery/pkg/util/validation/validation.go``)."""


class ServeConfig(_Strict):
    """What ``gangplan serve`` runs with (module docstring)."""

    scheduler_name: str = Field("gangplan", min_length=1, max_length=63)
    """``spec.schedulerName`` of the pods planned in mode ``bind``; also the Events'
    ``reportingController`` suffix"""
    mode: Literal["gate", "bind"] = "gate"
    """``gate``: remove the gate ``gangplan.io/placement`` and pin ``kubernetes.io/hostname``;
    ``bind``: post a Binding per pod"""
    period_s: float = Field(2.0, gt=0, le=3600)
    """seconds between cycles (sooner when a gang becomes complete)"""
    time_limit_s: float = Field(5.0, ge=0.05, le=3600)
    """the solver's wall-clock budget per cycle"""
    workers: int = Field(2, ge=1, le=256)
    """CP-SAT search workers"""
    topology_labels: str | None = None
    """a preset (``kueue``, ``gke``, ``eks``, ``topograph``, ``topograph-v0``) or
    ``[name=]key,...`` from the top level down; default: HyperNodes, else a Kueue Topology"""
    device_layout: str | None = None
    """a device layout template (``hgx8``, ``pcie4``) or file for nodes without a Device"""
    gpu_resource: str = "nvidia.com/gpu"
    nic_resource: str = "rdma/hca"
    queue_source: Literal["volcano", "kueue", "elasticquota", "none"] = "volcano"
    """which queue objects are watched"""
    default_queue: str = "default"
    namespaces: tuple[str, ...] = ()
    """plan pending pods of these namespaces only (empty: all); running pods of every
    namespace always count"""
    assume_ttl_s: float = Field(30.0, gt=0, le=86_400)
    """how long a pod gangplan ungated or bound counts as held before the cache shows it bound"""
    bind_timeout_s: float = Field(300.0, gt=0, le=86_400)
    """a gang not fully bound this long after its plan is taken back whole"""
    backoff_initial_s: float = Field(10.0, gt=0, le=86_400)
    backoff_max_s: float = Field(600.0, gt=0, le=86_400)
    dry_run: bool = False
    """print the patches and bindings instead of sending them"""
    preemption: bool = False
    """plan with the queues' preemption policies on (a gang may evict lower-priority
    running gangs): victims go through the Eviction API, together, before the preemptor"""
    event_interval_s: float = Field(60.0, ge=0, le=86_400)
    """the same FailedScheduling Event of a pod is not posted again within this time"""
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    metrics_port: int = Field(8080, ge=0, le=65_535)
    """``/metrics``, ``/healthz``, ``/readyz`` (0: no server)"""
    identity: str | None = None
    """this replica's name in the Lease (default: the pod's hostname)"""

    @field_validator("topology_labels")
    @classmethod
    def _labels(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                parse_topology_labels(v)
            except OptionError as err:
                raise ValueError(
                    f"{err} (presets: {', '.join(PRESETS)})".replace("--topology-labels ", "")
                ) from None
        return v

    @field_validator("device_layout")
    @classmethod
    def _layout(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                load_template(v)
            except OptionError as err:
                raise ValueError(str(err).removeprefix("--device-layout ")) from None
        return v

    @field_validator("scheduler_name")
    @classmethod
    def _scheduler_name(cls, v: str) -> str:
        if not DNS1123_SUBDOMAIN.fullmatch(v):
            raise ValueError(
                "not a DNS-1123 subdomain, as spec.schedulerName must be: lower-case letters, "
                "digits, '-' and '.', starting and ending with a letter or digit (e.g. "
                "'gangplan')"
            )
        return v


def load_config(path: str | Path | None) -> ServeConfig:
    """The configuration in ``path`` (YAML; None: the defaults).

    Raises:
        ConfigError: the file cannot be read, is not a YAML mapping, or a field is invalid
            (each named, with what is accepted).
    """
    if path is None:
        return ServeConfig()
    p = Path(path)
    try:
        data = yaml_input.load(read_text(p)) or {}
    except InputError as err:
        raise ConfigError(list(err.lines())) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        what = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError([f"{p}: {where}not YAML: {what}"]) from None
    if not isinstance(data, dict):
        raise ConfigError([f"{p}: the configuration must be a mapping of fields"])
    where = f"{p}"
    if data.get("kind") == "ConfigMap" and "apiVersion" in data:
        data, where = _from_config_map(data, p), f"{p}: data.{CONFIG_KEY}"
    try:
        return ServeConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError([f"{where}: {_problem(e)}" for e in err.errors()]) from None


CONFIG_KEY = "serve.yaml"
"""The key of the configuration in a ConfigMap (``deploy/configmap.yaml``)."""


def _from_config_map(cm: dict[str, Any], p: Path) -> dict[str, Any]:
    """The configuration a ConfigMap holds under ``data.serve.yaml`` (as mounted in the
    pod), so ``--config deploy/configmap.yaml`` reads what the Deployment reads."""
    text = (cm.get("data") or {}).get(CONFIG_KEY)
    if not isinstance(text, str):
        keys = ", ".join(map(str, (cm.get("data") or {}))) or "none"
        raise ConfigError([f"{p}: a ConfigMap without data.{CONFIG_KEY} (its data keys: {keys})"])
    try:
        data = yaml_input.load(text) or {}
    except yaml.YAMLError as err:
        what = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError([f"{p}: data.{CONFIG_KEY}: not YAML: {what}"]) from None
    if not isinstance(data, dict):
        raise ConfigError([f"{p}: data.{CONFIG_KEY}: the configuration must be a mapping"])
    return data


_BOUNDS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def _problem(e: Any) -> str:
    """One pydantic error in the house style: ``FIELD: is VALUE (accepted: ...)``."""
    loc = ".".join(str(x) for x in e["loc"]) or "(top)"
    kind, ctx = e["type"], e.get("ctx") or {}
    got = f"is {e['input']!r}" if "input" in e else "is wrong"
    if kind == "extra_forbidden":
        return f"{loc}: not a field (accepted: {', '.join(ServeConfig.model_fields)})"
    if kind == "missing":
        return f"{loc}: required field is missing"
    if kind == "finite_number":
        return f"{loc}: {e['input']!r} is not a number of seconds; {_accepted(e['loc'])}"
    if kind == "literal_error":
        return f"{loc}: {got} (accepted: {ctx.get('expected', '')})".replace(" or ", ", ")
    bound = next((k for k in _BOUNDS if k in ctx), None)
    if bound is not None:
        limit = ctx[bound]
        shown = f"{limit:g}" if isinstance(limit, float) else str(limit)
        return f"{loc}: {got} (accepted: a number {_BOUNDS[bound]} {shown})"
    simple = {
        "float_parsing": "a number",
        "float_type": "a number",
        "int_parsing": "a whole number",
        "int_type": "a whole number",
        "int_from_float": "a whole number",
        "bool_parsing": "true or false",
        "bool_type": "true or false",
        "string_type": "a string",
        "list_type": "a list",
        "dict_type": "a mapping",
        "model_type": "a mapping",
    }
    if kind in simple:
        return f"{loc}: {got} (accepted: {simple[kind]})"
    msg = str(e["msg"]).removeprefix("Value error, ")
    return f"{loc}: {msg}" + (f" (got {e['input']!r})" if "input" in e else "")


def _accepted(loc: tuple[int | str, ...]) -> str:
    """The range a numeric field at ``loc`` accepts, from its bounds, e.g. "a number
    greater than 0 and at most 3600"."""
    model: type[BaseModel] = ServeConfig
    info = None
    for part in loc:
        info = model.model_fields.get(str(part))
        if info is None:
            return "a finite number"
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            model = info.annotation
    words = []
    for m in info.metadata if info is not None else []:
        for attr, word in (("gt", "greater than"), ("ge", "at least"), ("lt", "below")):
            if getattr(m, attr, None) is not None:
                words.append(f"{word} {getattr(m, attr):g}")
        if getattr(m, "le", None) is not None:
            words.append(f"at most {m.le:g}")
    return "give a number " + " and ".join(words) if words else "a finite number"
