"""What one pod asks of the scheduler: effective requests, constraints, priority, gang hints.

Effective requests follow the API server's defaulting and the scheduler's count
(``k8s.io/component-helpers/resource.PodRequests``, as of Kubernetes 1.36):

1. a container's request for a resource it only limits is defaulted to the limit (API
   server defaulting of ``resources.requests``; how ``nvidia.com/gpu: 1`` is usually written);
2. the pod asks the sum over its containers, plus every restartable ("sidecar") init
   container (``restartPolicy: Always``); each plain init container i asks its own requests
   plus the sidecars started before it, and the pod asks at least the largest of those;
3. pod-level ``spec.resources.requests`` (defaulted from pod-level limits) replace the
   result for ``cpu``, ``memory`` and ``hugepages-*`` (PodLevelResources);
4. ``spec.overhead`` (RuntimeClass overhead) is added.

Everything is summed exactly (fractions) and rounded up to base units once, at the end
(milli-CPU, bytes, milli-units; :mod:`gangplan.models.quantity`).

Two vendor conventions are mapped onto the GPU and NIC resources of the snapshot:

* Koordinator's GPU shares — ``koordinator.sh/gpu-core``, ``koordinator.sh/gpu-memory-ratio``,
  ``koordinator.sh/gpu`` (and their ``kubernetes.io/`` forms) count percent of one GPU
  (100 = one whole GPU; Koordinator "fine-grained device scheduling"): a pod asking them
  and not the GPU resource asks ``10 × max(percent)`` milli-GPU; Koordinator's
  ``gpu-memory`` (bytes of GPU memory) is dropped with them;
* ``koordinator.sh/rdma``, when it is the NIC resource, counts percent of one NIC (100 =
  one NIC) unless the pod's ``device-allocate-hint`` says ``RequestsAsCount``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any, Literal

from gangplan.adapters.jsontext import JSONTextError, loads_bounded
from gangplan.models import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodOwner,
    Toleration,
)
from gangplan.models.quantity import QuantityError, is_byte_resource, parse_quantity

__all__ = [
    "ANN_DEVICE_ALLOCATED",
    "ANN_JOINT_ALLOCATE",
    "ANN_PLAN",
    "KOORD_GPU_PERCENT",
    "KOORD_RDMA",
    "GroupRef",
    "PodClaim",
    "PodInfo",
    "PodProblem",
    "TopologyRequest",
    "carried_selector",
    "claims_of",
    "effective_requests",
    "epoch",
    "required_terms",
    "to_base",
    "tolerations_of",
]

ANN_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
ANN_JOINT_ALLOCATE = "scheduling.koordinator.sh/device-joint-allocate"
ANN_ALLOCATE_HINT = "scheduling.koordinator.sh/device-allocate-hint"
KOORD_GPU_PERCENT = (
    "koordinator.sh/gpu-core",
    "koordinator.sh/gpu-memory-ratio",
    "koordinator.sh/gpu",
    "kubernetes.io/gpu-core",
    "kubernetes.io/gpu-memory-ratio",
    "kubernetes.io/gpu",
)
KOORD_GPU_OTHER = ("koordinator.sh/gpu-memory", "kubernetes.io/gpu-memory")
KOORD_RDMA = "koordinator.sh/rdma"
_POD_LEVEL = ("cpu", "memory")


class PodProblem(ValueError):
    """A pod (or template) that cannot be mapped; the message names the field."""


@dataclass(frozen=True)
class GroupRef:
    """A pod's gang membership: which system's group object, and its name.

    ``system``: ``volcano`` (annotation ``scheduling.k8s.io/group-name``),
    ``plugins`` (label ``scheduling.x-k8s.io/pod-group``), ``koordinator`` (label
    ``pod-group.scheduling.sigs.k8s.io``), ``upstream`` (``spec.schedulingGroup``),
    ``kueue-pods`` (label ``kueue.x-k8s.io/pod-group-name``), ``koordinator-gang``
    (annotation ``gang.scheduling.koordinator.sh/name``), or ``workload`` (a template).
    """

    system: str
    name: str


@dataclass(frozen=True)
class TopologyRequest:
    """A topology constraint still named by node label key (Kueue annotations, upstream
    PodGroup) or HyperNode tier (Volcano); resolved against the snapshot's levels later."""

    kind: str  # "required" | "preferred"
    label: str | None = None
    tier: int | None = None
    source: str = ""


ANN_PLAN = "gangplan.io/plan"
"""Pod annotation: the plan of the pod's gang, written by ``gangplan serve`` and ``apply``
when they place the pod (:mod:`gangplan.adapters.serve.ledger`)."""
HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's ``spec.resourceClaims`` (core/v1 ``PodResourceClaim``): its name
    in the pod, and the ResourceClaim it names (``resourceClaimName``) or the
    ResourceClaimTemplate it is made from (``resourceClaimTemplateName``, the claim made from
    it named in ``status.resourceClaimStatuses`` once it exists)."""

    name: str
    claim: str | None = None
    template: str | None = None
    generated: str | None = None


@dataclass
class PodInfo:
    """One pod, real or predicted from a workload template, as the reader needs it."""

    name: str
    namespace: str
    source: str
    kind: str = "Pod"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_name: str | None = None
    phase: str = "Pending"
    scheduler: str = "default-scheduler"
    requests: dict[str, int] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    priority: int = 0
    creation: float | None = None
    group: GroupRef | None = None
    queue_hint: str | None = None
    kueue_queue: str | None = None
    role_hint: str | None = None
    topology: TopologyRequest | None = None
    joint: str | None = None
    devices: tuple[str, ...] = ()
    predicted_by: str | None = None
    """a pod predicted from a workload's template: that workload (``Deployment ml/web``)"""
    name_known: bool = True
    """whether the pod's name is the one its controller will give it (False: a name the
    controller chooses, e.g. a ReplicaSet's random suffix)"""
    name_rule: str = ""
    """a predicted pod: how its controller names pods, or why its name cannot be known"""
    started: float | None = None
    """``status.startTime`` (a running pod), seconds since the Unix epoch"""
    preemption_policy: str | None = None
    """``spec.preemptionPolicy``, else its PriorityClass's (``Never``: it never preempts)"""
    deadline: float | None = None
    """``spec.activeDeadlineSeconds``: how long it may run (s), its expected duration for
    backfilling onto reserved capacity (:mod:`gangplan.models.reservation`)"""
    preemptible: bool = True
    preemptible_why: str = ""
    """why not, when not (:mod:`gangplan.adapters.kube.disruption`)"""
    owner: PodOwner | Literal["none"] = "none"
    """a real pod's controller and its index (:mod:`gangplan.adapters.kube.owners`)"""
    claims: tuple[PodClaim, ...] = ()
    """its DRA resource claims (resolved by :mod:`gangplan.adapters.kube.dra_claims`)"""


def epoch(ts: Any) -> float | None:
    """A creationTimestamp (datetime or RFC 3339 text) as seconds since the Unix epoch."""
    if ts is None:
        return None
    if isinstance(ts, datetime):
        return ts.timestamp()
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def to_base(name: str, value: Fraction) -> int:
    """An exact amount of resource ``name`` in its base unit, rounded up."""
    scaled = value if is_byte_resource(name) else value * 1000
    return math.ceil(scaled)


def _quantities(res: Mapping[str, Any] | None, where: str) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, raw in (res or {}).items():
        try:
            q = parse_quantity(raw)
        except QuantityError as err:
            raise PodProblem(f"{where}.{name}: {err}") from None
        if q < 0:
            raise PodProblem(f"{where}.{name}: {raw!r} is negative")
        out[name] = q
    return out


def _container_requests(c: Any, where: str) -> dict[str, Fraction]:
    res = c.resources
    reqs = _quantities(res.requests if res else None, f"{where}.resources.requests")
    limits = _quantities(res.limits if res else None, f"{where}.resources.limits")
    for name, q in limits.items():
        reqs.setdefault(name, q)  # API server defaulting: requests default to limits
    return reqs


def _add(into: dict[str, Fraction], res: Mapping[str, Fraction]) -> None:
    for k, v in res.items():
        into[k] = into.get(k, Fraction(0)) + v


def _max(into: dict[str, Fraction], res: Mapping[str, Fraction]) -> None:
    for k, v in res.items():
        if v > into.get(k, Fraction(-1)):
            into[k] = v


def effective_requests(spec: Any, where: str = "spec") -> dict[str, int]:
    """What the scheduler counts for a pod with this ``V1PodSpec``, in base units (see the
    module docstring for the rule and its source). Zero amounts are left out.

    Raises:
        PodProblem: a quantity that does not parse, naming its field.
    """
    total: dict[str, Fraction] = {}
    for i, c in enumerate(spec.containers or []):
        _add(total, _container_requests(c, f"{where}.containers[{i}]"))
    sidecars: dict[str, Fraction] = {}
    init_max: dict[str, Fraction] = {}
    for i, c in enumerate(spec.init_containers or []):
        reqs = _container_requests(c, f"{where}.initContainers[{i}]")
        if c.restart_policy == "Always":
            _add(total, reqs)
            _add(sidecars, reqs)
            use = dict(sidecars)
        else:
            use = dict(reqs)
            _add(use, sidecars)
        _max(init_max, use)
    _max(total, init_max)
    if spec.resources is not None:
        pod_req = _quantities(spec.resources.requests, f"{where}.resources.requests")
        pod_lim = _quantities(spec.resources.limits, f"{where}.resources.limits")
        for name, q in pod_lim.items():
            pod_req.setdefault(name, q)
        for name, q in pod_req.items():
            if name in _POD_LEVEL or name.startswith("hugepages-"):
                total[name] = q
    if spec.overhead:
        _add(total, _quantities(spec.overhead, f"{where}.overhead"))
    return {k: to_base(k, v) for k, v in sorted(total.items()) if v > 0}


def required_terms(spec: Any, where: str = "spec") -> tuple[NodeSelectorTerm, ...]:
    """The required node affinity terms (ORed) of a ``V1PodSpec``.

    Raises:
        PodProblem: a term that uses ``matchFields`` or is empty (gangplan matches node
            labels only; an empty term matches no node in Kubernetes).
    """
    aff = spec.affinity.node_affinity if spec.affinity else None
    req = aff.required_during_scheduling_ignored_during_execution if aff else None
    if req is None:
        return ()
    out = []
    for i, term in enumerate(req.node_selector_terms or []):
        path = (
            f"{where}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            f".nodeSelectorTerms[{i}]"
        )
        if term.match_fields:
            raise PodProblem(f"{path}.matchFields: node fields are not mapped (only node labels)")
        exprs = term.match_expressions or []
        if not exprs:
            raise PodProblem(f"{path}: an empty term matches no node")
        try:
            out.append(
                NodeSelectorTerm(
                    match_expressions=tuple(
                        NodeSelectorRequirement(
                            key=e.key, operator=e.operator, values=tuple(e.values or ())
                        )
                        for e in exprs
                    )
                )
            )
        except ValueError as err:
            raise PodProblem(f"{path}.matchExpressions: {_first_line(err)}") from None
    return tuple(out)


def claims_of(spec: Any, status: Any = None) -> tuple[PodClaim, ...]:
    """The pod's ``spec.resourceClaims``, with the claims ``status.resourceClaimStatuses``
    names for those made from templates."""
    made = {
        s.name: s.resource_claim_name
        for s in (getattr(status, "resource_claim_statuses", None) or [])
        if s.name
    }
    return tuple(
        PodClaim(
            c.name,
            claim=c.resource_claim_name or None,
            template=c.resource_claim_template_name or None,
            generated=made.get(c.name),
        )
        for c in (getattr(spec, "resource_claims", None) or [])
    )


def tolerations_of(spec: Any, where: str = "spec") -> tuple[Toleration, ...]:
    out = []
    for i, t in enumerate(spec.tolerations or []):
        try:
            out.append(
                Toleration(
                    key=t.key or None,
                    operator=t.operator or "Equal",
                    value=t.value or "",
                    effect=t.effect or None,
                )
            )
        except ValueError as err:
            raise PodProblem(f"{where}.tolerations[{i}]: {_first_line(err)}") from None
    return tuple(out)


def _first_line(err: Exception) -> str:
    if hasattr(err, "errors"):
        try:
            e = err.errors()[0]
            loc = ".".join(str(x) for x in e["loc"])
            return f"{loc}: {e['msg']}" if loc else e["msg"]
        except (AttributeError, IndexError, TypeError):  # pragma: no cover
            pass
    return str(err).splitlines()[0]


def joint_policy(annotations: Mapping[str, str]) -> tuple[str | None, str | None]:
    """Koordinator's ``device-joint-allocate`` as a gangplan joint policy.

    Returns ``(policy, note)``: ``pcie`` for ``requiredScope: SamePCIe``, ``numa`` for
    ``SameNUMA``; ``None`` with a note when the annotation is absent, malformed, or asks
    no required scope (a preference, which gangplan's joint allocation does not model).
    """
    raw = annotations.get(ANN_JOINT_ALLOCATE)
    if raw is None:
        return None, None
    try:
        data = loads_bounded(raw)
    except JSONTextError as err:
        return None, f"annotation {ANN_JOINT_ALLOCATE}: {err}; ignored"
    if not isinstance(data, dict):
        return None, f"annotation {ANN_JOINT_ALLOCATE}: not a JSON object; ignored"
    types = set(data.get("deviceTypes") or [])
    scope = data.get("requiredScope")
    if not {"gpu", "rdma"} <= types:
        return (
            None,
            f"annotation {ANN_JOINT_ALLOCATE}: deviceTypes {sorted(types)} is not gpu and rdma; "
            "ignored",
        )
    if scope == "SamePCIe":
        return "pcie", None
    if scope == "SameNUMA":
        return "numa", None
    if scope is None:
        return None, (
            f"annotation {ANN_JOINT_ALLOCATE}: no requiredScope (Koordinator then only prefers "
            "shared topology); not mapped to a joint policy"
        )
    return (
        None,
        f"annotation {ANN_JOINT_ALLOCATE}: requiredScope {scope!r} is not SamePCIe or SameNUMA; "
        "ignored",
    )


def map_vendor_requests(
    requests: dict[str, int], annotations: Mapping[str, str], *, gpu: str, nic: str
) -> tuple[dict[str, int], list[str]]:
    """Koordinator GPU percentages and RDMA percentages onto ``gpu`` and ``nic`` (see the
    module docstring). Returns the new requests and notes on what was mapped."""
    out = dict(requests)
    notes: list[str] = []
    percent = [out.pop(k) for k in KOORD_GPU_PERCENT if k in out]
    dropped = [k for k in KOORD_GPU_OTHER if out.pop(k, None) is not None]
    if percent:
        milli = max(percent) // 100  # base units are milli-units: "100" -> 100000 -> 1000 milli-GPU
        if gpu in out:
            notes.append(f"Koordinator GPU shares ignored: the pod also asks {gpu}")
        elif milli:
            out[gpu] = milli
            notes.append(
                f"Koordinator GPU shares ({max(percent) // 1000}%) read as {milli} milli-GPU "
                f"of {gpu}"
            )
    elif dropped:
        notes.append(f"{', '.join(dropped)} dropped (GPU memory is not modelled)")
    if nic == KOORD_RDMA and nic in out and not _requests_as_count(annotations):
        out[nic] = math.ceil(out[nic] / 100_000) * 1000
    return out, notes


def _requests_as_count(annotations: Mapping[str, str]) -> bool:
    try:
        hint = loads_bounded(annotations.get(ANN_ALLOCATE_HINT, "{}"))
    except JSONTextError:
        return False
    rdma = hint.get("rdma") if isinstance(hint, dict) else None
    return isinstance(rdma, dict) and rdma.get("allocateStrategy") == "RequestsAsCount"


def allocated_devices(
    annotations: Mapping[str, str], minors: Mapping[str, Mapping[int, str]]
) -> list[str]:
    """Device ids held by a running pod, from Koordinator's ``device-allocated`` annotation
    (``{"gpu": [{"minor": 0, ...}], "rdma": [{"minor": 1, "id": "..."}]}``): ``id`` when
    given, else the node's device of that ``minor`` (``minors[type][minor]``).

    Raises:
        ValueError: the annotation is too large or too deep (:func:`loads_bounded`), not
            JSON, or not an object of lists of objects.
    """
    raw = annotations.get(ANN_DEVICE_ALLOCATED)
    if not raw:
        return []
    data = loads_bounded(raw)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    out: list[str] = []
    for dtype in ("gpu", "rdma"):
        for alloc in data.get(dtype) or []:
            dev = alloc.get("id") or minors.get(dtype, {}).get(int(alloc.get("minor", -1)))
            if dev:
                out.append(str(dev))
    return out


def carried_selector(pod: PodInfo) -> dict[str, str]:
    """The nodeSelector a running pod's replacement keeps once it is evicted, as far as the
    pod shows it: its own, less the ``kubernetes.io/hostname`` pin that gangplan's gate
    mode added when it placed the pod (the pod carries :data:`ANN_PLAN`; the pod its
    controller recreates comes from the template, gated and without that pin). A selector
    on the hostname of a pod gangplan did not place is the pod's own and stays. A tenant can
    write the annotation on its own pod: that only frees its own pod's pin."""
    if ANN_PLAN in pod.annotations and HOSTNAME in pod.node_selector:
        return {k: v for k, v in pod.node_selector.items() if k != HOSTNAME}
    return dict(pod.node_selector)
