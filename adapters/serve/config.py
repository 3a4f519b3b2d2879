"""``gangplan serve``'s configuration: one YAML file, validated by pydantic.

Every field has a default, so an empty file is a valid configuration (gate mode, a cycle
every 2 s). Unknown fields are errors (a typo is not silently ignored), and a bad value is
reported with the file, the field's path and what is accepted, e.g.
``serve.yaml: mode: is 'bnd' (accepted: 'gate', 'bind')``; an unknown key is answered with
the fields of its own level. Types are checked as written (``true`` is no port number, ``1``
no boolean); resource names must be distinct extended resources (no ``cpu``); namespace and
Lease names follow Kubernetes' name rules. A ConfigMap (``kind:
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
    StrictBool,
    StrictInt,
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

    enabled: StrictBool = True
    namespace: str = "gangplan-system"
    """the Lease's namespace (a DNS-1123 label)"""
    name: str = "gangplan"
    """the Lease's name (a DNS-1123 subdomain)"""
    lease_duration_s: float = Field(15.0, gt=0, le=3600)
    renew_deadline_s: float = Field(10.0, gt=0, le=3600)
    retry_period_s: float = Field(2.0, gt=0, le=600)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        return _dns_label(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _dns_subdomain(v, "a Lease's name")

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
"""What ``spec.schedulerName`` and an object's name accept: a DNS-1123 subdomain
(``IsDNS1123Subdomain`` in ``k8s.io/apimachinery/pkg/util/validation/validation.go``)."""

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
"""What a namespace's name accepts: a DNS-1123 label of at most 63 characters
(``IsDNS1123Label``, same file)."""

QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
"""The name part of a qualified name, at most 63 characters (``IsQualifiedName``, same file)."""


def _dns_label(v: str) -> str:
    if len(v) > 63 or not DNS1123_LABEL.fullmatch(v):
        raise ValueError(
            f"{v!r} is not a namespace name (a DNS-1123 label: at most 63 lower-case letters, "
            "digits and '-', starting and ending with a letter or digit)"
        )
    return v


def _dns_subdomain(v: str, what: str) -> str:
    if len(v) > 253 or not DNS1123_SUBDOMAIN.fullmatch(v):
        raise ValueError(
            f"{v!r} is not {what} (a DNS-1123 subdomain: lower-case letters, digits, '-' and "
            "'.', starting and ending with a letter or digit)"
        )
    return v


def extended_resource_problem(name: str) -> str | None:
    """Why ``name`` is not an extended resource name (None: it is one), by the rule of
    ``IsExtendedResourceName`` (``k8s.io/kubernetes/pkg/apis/core/v1/helper/helpers.go``): a
    qualified name ``domain/name`` outside the ``kubernetes.io`` domain, not starting with
    ``requests.``. A name without a domain (``cpu``, ``memory``, ``pods``,
    ``ephemeral-storage``, ``hugepages-2Mi``) is a core resource the kubelet accounts for
    itself: no device plugin advertises it, and a pod's request of it is no GPU."""
    if not name:
        return "is empty"
    if "/" not in name:
        return "is a core resource (no domain/ prefix), not a device plugin's"
    if "kubernetes.io/" in name:
        return "is in the kubernetes.io domain, Kubernetes' own resources"
    if name.startswith("requests."):
        return "starts with 'requests.', a ResourceQuota's prefix"
    prefix, _, rest = name.partition("/")
    quota_prefix = f"requests.{prefix}"
    if (
        len(quota_prefix) > 253
        or not DNS1123_SUBDOMAIN.fullmatch(quota_prefix)
        or len(rest) > 63
        or not QUALIFIED_NAME.fullmatch(rest)
    ):
        return (
            "is not a qualified name (a DNS-1123 subdomain, '/', and a name of letters, "
            "digits, '-', '_' and '.')"
        )
    return None


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
    workers: StrictInt = Field(2, ge=1, le=256)
    """CP-SAT search workers"""
    topology_labels: str | None = None
    """a preset (``kueue``, ``gke``, ``eks``, ``topograph``, ``topograph-v0``) or
    ``[name=]key,...`` from the top level down; default: HyperNodes, else a Kueue Topology"""
    device_layout: str | None = None
    """a device layout template (``hgx8``, ``pcie4``) or file for nodes without a Device"""
    gpu_resource: str = "nvidia.com/gpu"
    """the GPUs' extended resource name (a device plugin's, e.g. ``amd.com/gpu``)"""
    nic_resource: str = "rdma/hca"
    """the RDMA NICs' extended resource name; distinct from ``gpu_resource``"""
    queue_source: Literal["volcano", "kueue", "elasticquota", "none"] = "volcano"
    """which queue objects are watched"""
    default_queue: str = Field("default", min_length=1)
    namespaces: tuple[str, ...] = Field((), strict=False)
    """plan pending pods of these namespaces only (empty: all); running pods of every
    namespace always count"""
    assume_ttl_s: float = Field(30.0, gt=0, le=86_400)
    """how long a pod gangplan ungated or bound counts as held before the cache shows it bound"""
    bind_timeout_s: float = Field(300.0, gt=0, le=86_400)
    """a gang not fully bound this long after its plan is taken back whole"""
    backoff_initial_s: float = Field(10.0, gt=0, le=86_400)
    backoff_max_s: float = Field(600.0, gt=0, le=86_400)
    dry_run: StrictBool = False
    """print the patches and bindings instead of sending them"""
    preemption: StrictBool = False
    """plan with the queues' preemption policies on (a gang may evict lower-priority
    running gangs): victims go through the Eviction API, together, before the preemptor"""
    event_interval_s: float = Field(60.0, ge=0, le=86_400)
    """the same FailedScheduling Event of a pod is not posted again within this time"""
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    metrics_port: StrictInt = Field(8080, ge=0, le=65_535)
    """``/metrics``, ``/healthz``, ``/readyz`` (0: no server)"""
    identity: str | None = Field(None, min_length=1)
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

    @field_validator("gpu_resource", "nic_resource")
    @classmethod
    def _resource(cls, v: str) -> str:
        why = extended_resource_problem(v)
        if why is not None:
            example = "'nvidia.com/gpu'"
            raise ValueError(f"{v!r} {why}; give an extended resource name such as {example}")
        return v

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for ns in v:
            _dns_label(ns)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ServeConfig:
        if self.gpu_resource == self.nic_resource:
            raise ValueError(
                f"gpu_resource and nic_resource are both {self.gpu_resource!r}: a device is a "
                "GPU or a NIC, so give two distinct resource names"
            )
        if self.backoff_initial_s > self.backoff_max_s:
            raise ValueError(
                f"backoff_initial_s ({self.backoff_initial_s:g}) is above backoff_max_s "
                f"({self.backoff_max_s:g}): the first wait would already pass the longest"
            )
        return self

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
    cm_data = cm.get("data") or {}
    if not isinstance(cm_data, dict):
        raise ConfigError(
            [
                f"{p}: data: is a {type(cm_data).__name__}, not a mapping (a ConfigMap's data "
                f"maps keys to strings, the configuration under {CONFIG_KEY})"
            ]
        )
    text = cm_data.get(CONFIG_KEY)
    if text is None:
        keys = ", ".join(map(str, cm_data)) or "none"
        raise ConfigError([f"{p}: a ConfigMap without data.{CONFIG_KEY} (its data keys: {keys})"])
    if not isinstance(text, str):
        raise ConfigError(
            [
                f"{p}: data.{CONFIG_KEY}: is a {type(text).__name__}, not a string (a "
                "ConfigMap's data values are strings: write the configuration as a block, "
                f"'{CONFIG_KEY}: |')"
            ]
        )
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
        fields = ", ".join(_model_at(e["loc"][:-1]).model_fields)
        return f"{loc}: not a field (accepted: {fields})"
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
        "tuple_type": "a list",
        "dict_type": "a mapping",
        "model_type": "a mapping",
    }
    if kind in simple:
        return f"{loc}: {got} (accepted: {simple[kind]})"
    if kind == "string_too_short":
        return f"{loc}: {got} (accepted: a non-empty string)"
    msg = str(e["msg"]).removeprefix("Value error, ")
    if not e["loc"]:
        return msg  # a rule across fields: the message names them
    echo = "input" in e and repr(e["input"]) not in msg
    return f"{loc}: {msg}" + (f" (got {e['input']!r})" if echo else "")


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel]:
    """The model whose fields are at ``loc`` (``()``: the top level; ``("leader_election",)``:
    :class:`LeaderElection`)."""
    model: type[BaseModel] = ServeConfig
    for part in loc:
        info = model.model_fields.get(str(part))
        if info is None or not (
            isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
        ):
            break
        model = info.annotation
    return model


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
