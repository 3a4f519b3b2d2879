"""Kubernetes bindings out: a plan becomes, pod by pod, a device annotation and a Binding.

For each placed pod, in the plan's order:

1. if it got GPUs or RDMA NICs, an **annotation patch** — a JSON merge patch for
   ``PATCH /api/v1/namespaces/{ns}/pods/{name}`` (``Content-Type:
   application/merge-patch+json``; ``kubectl patch pod NAME --type merge -p``)::

       {"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "w-0", "namespace": "ml",
                     "annotations": {"scheduling.koordinator.sh/device-allocated": "<JSON>"}}}

   The annotation value is Koordinator's ``DeviceAllocations`` (koordinator
   ``apis/extension/device_share.go``: the key the koord-scheduler writes at PreBind and
   koordlet reads to hand the devices to the containers), a map from device type to
   allocations::

       {"gpu":  [{"minor": 0, "id": "GPU-…",
                  "resources": {"koordinator.sh/gpu-core": "100",
                                "koordinator.sh/gpu-memory-ratio": "100"}}],
        "rdma": [{"minor": 1, "id": "mlx5_1", "resources": {"koordinator.sh/rdma": "100"}}]}

   ``id`` is the device id the node's device plugin or Device object uses (gangplan's
   layout id); ``minor`` the device's minor number (the Device object's, else the
   device's position among the node's GPUs, or NICs, in layout order); a whole GPU is 100
   percent of ``gpu-core`` and ``gpu-memory-ratio``, a GPU share of ``m`` milli-GPU is
   ``m / 10`` percent, rounded up; a NIC is 100 percent of ``koordinator.sh/rdma``. The key can be
   changed (``annotation_key``) for a device plugin that reads another one;

2. its core v1 **Binding**, the body of ``POST /api/v1/namespaces/{ns}/pods/{name}/binding``::

       {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "w-0", "namespace": "ml"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-3"}}

The annotation comes first so that the node agent sees the devices when the pod lands.

Only pods a cluster can take a Binding for are bound (:func:`select_bindings`): by default
the pods that exist in the dump, and of the default scheduler or gangplan. Pods predicted
from a workload's template (their controller has not created them yet;
``metadata.kubernetes.predicted_by`` of a converted snapshot) are planned, but bound only
when asked (``include_predicted``) and only where the controller's names are known (Volcano
Jobs, training-operator jobs, StatefulSets; not Deployments, ReplicaSets, batch Jobs or
JobSets, whose pods get a random suffix). Pods that name another scheduler
(``metadata.kubernetes.schedulers``, e.g. ``volcano``) are bound only when asked
(``any_scheduler``): binding them races that scheduler.

With preemption (a plan with ``evictions``), :func:`eviction_documents` comes first in the
stream: per evicted pod its policy/v1 **Eviction**, the body of ``POST
/api/v1/namespaces/{ns}/pods/{name}/eviction`` (the Eviction API honours
PodDisruptionBudgets)::

    {"apiVersion": "policy/v1", "kind": "Eviction",
     "metadata": {"name": "low-0", "namespace": "ml"}}

then, per pod of a gang the evictions make room for, its **nomination**, a merge patch of
``PATCH /api/v1/namespaces/{ns}/pods/{name}/status`` setting ``status.nominatedNodeName``
(kube-scheduler's own way of saying "this pod waits for that node while its victims go";
the scheduler then keeps that room for it from pods of lower or equal priority)::

    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "h-w-0", "namespace": "ml"},
     "status": {"nominatedNodeName": "node-3"}}

and only then the annotation patches and Bindings. The stream is in call order: whoever
applies it posts the Evictions and nominations, waits until every evicted pod is gone (its
GET returns 404, or a pod of that name with another UID), and only then binds the
preemptor's pods — a Binding to a node its victims still hold would be rejected by the
kubelet for want of room.

A :class:`Binder` carries the requests to a cluster: :class:`InMemoryBinder` records them
(tests, ``replan``); :class:`KubeBinder` uses the official client's ``patch_namespaced_pod``
and ``create_namespaced_pod_binding``. Both are idempotent: binding a pod again to the
node it is bound to succeeds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import yaml

from gangplan.models import GPU_MILLI, Plan, PodPlacement, Snapshot

__all__ = [
    "DEVICE_ANNOTATION",
    "OWN_SCHEDULERS",
    "BindOutcome",
    "BindRequest",
    "Binder",
    "BindingSelection",
    "InMemoryBinder",
    "KubeBinder",
    "Withheld",
    "bind_requests",
    "bindings_document",
    "device_allocation",
    "dump_bindings",
    "eviction_documents",
    "select_bindings",
]

DEVICE_ANNOTATION = "scheduling.koordinator.sh/device-allocated"
"""Default annotation key for device ids (Koordinator's ``AnnotationDeviceAllocated``)."""

GPU_CORE = "koordinator.sh/gpu-core"
GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
RDMA = "koordinator.sh/rdma"


@dataclass(frozen=True)
class BindRequest:
    """One pod to bind: where, the annotations to write first (empty: none), and whether the
    pod already exists (``predicted``: its controller has not created it yet)."""

    pod: str
    namespace: str
    node: str
    annotations: dict[str, str] = field(default_factory=dict)
    predicted: bool = False

    def patch_body(self) -> dict[str, Any] | None:
        """The merge patch writing the annotations, or None when there are none."""
        if not self.annotations:
            return None
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.pod,
                "namespace": self.namespace,
                "annotations": dict(self.annotations),
            },
        }

    def binding_body(self) -> dict[str, Any]:
        """The core v1 Binding (body of ``POST .../pods/{name}/binding``)."""
        return {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": self.pod, "namespace": self.namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node},
        }


def _minor(snapshot: Snapshot, node: str, dev: str, ids: tuple[str, ...]) -> int:
    meta = snapshot.metadata.get("kubernetes") if isinstance(snapshot.metadata, dict) else None
    minors = (meta or {}).get("device_minors", {}).get(node, {}) if isinstance(meta, dict) else {}
    if dev in minors:
        return int(minors[dev])
    return ids.index(dev) if dev in ids else -1


def device_allocation(
    snapshot: Snapshot, placement: PodPlacement
) -> dict[str, list[dict[str, Any]]] | None:
    """Koordinator's ``DeviceAllocations`` for one placed pod (see the module docstring), or
    None when it got no GPU or NIC."""
    if not placement.gpus and not placement.nics:
        return None
    node = snapshot.node_by_name.get(placement.node)
    layout = snapshot.layout_of(node) if node is not None else None
    gpu_ids = layout.gpu_ids if layout else ()
    nic_ids = layout.nic_ids if layout else ()
    out: dict[str, list[dict[str, Any]]] = {}
    if placement.gpus:
        milli = placement.gpu_milli if placement.gpu_milli is not None else GPU_MILLI
        percent = str(-(-milli * 100 // GPU_MILLI))  # rounded up: a 1m share is 1%, not 0
        out["gpu"] = [
            {
                "minor": _minor(snapshot, placement.node, g, gpu_ids),
                "id": g,
                "resources": {GPU_CORE: percent, GPU_MEMORY_RATIO: percent},
            }
            for g in placement.gpus
        ]
    if placement.nics:
        out["rdma"] = [
            {
                "minor": _minor(snapshot, placement.node, n, nic_ids),
                "id": n,
                "resources": {RDMA: "100"},
            }
            for n in placement.nics
        ]
    return out


def bind_requests(
    snapshot: Snapshot, plan: Plan, *, annotation_key: str = DEVICE_ANNOTATION
) -> list[BindRequest]:
    """One :class:`BindRequest` per placed pod of ``plan``, in the plan's order."""
    meta = snapshot.metadata.get("kubernetes") if isinstance(snapshot.metadata, dict) else None
    predicted = set((meta or {}).get("predicted_gangs", [])) if isinstance(meta, dict) else set()
    out = []
    for p in plan.pods:
        alloc = device_allocation(snapshot, p)
        annotations = {annotation_key: json.dumps(alloc, separators=(",", ":"))} if alloc else {}
        out.append(
            BindRequest(
                pod=p.pod,
                namespace=p.namespace,
                node=p.node,
                annotations=annotations,
                predicted=f"{p.namespace}/{p.gang}" in predicted,
            )
        )
    return out


OWN_SCHEDULERS = ("default-scheduler", "gangplan")
"""Scheduler names whose pending pods gangplan binds by default: the default scheduler's
(pending: it has not placed them) and pods that name gangplan."""


@dataclass(frozen=True)
class Withheld:
    """A placed gang whose pods get no Binding (nor device annotation), and why."""

    gang: str
    """the gang's key, ``namespace/name``"""
    pods: int
    reason: str


@dataclass
class BindingSelection:
    """The requests to carry out, in plan order, and the placed gangs withheld."""

    requests: list[BindRequest]
    withheld: list[Withheld]


def _kube_meta(snapshot: Snapshot, key: str) -> dict[str, Any]:
    meta = snapshot.metadata.get("kubernetes") if isinstance(snapshot.metadata, dict) else None
    value = meta.get(key) if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def _withheld_reason(
    key: str,
    predicted: dict[str, Any],
    schedulers: dict[str, Any],
    include_predicted: bool,
    any_scheduler: bool,
) -> str | None:
    made = predicted.get(key)
    if isinstance(made, dict):
        who = made.get("controller") or "its workload"
        naming = made.get("naming") or ""
        if not made.get("names_known"):
            why = f": {naming}" if naming else ""
            return (
                f"its pods do not exist yet ({who} creates them) and their names cannot "
                f"be known{why}"
            )
        if not include_predicted:
            return (
                f"its pods do not exist yet ({who} creates them, named {naming}); "
                "--include-predicted binds them under those names"
            )
    scheduler = schedulers.get(key)
    if scheduler and scheduler not in OWN_SCHEDULERS and not any_scheduler:
        return (
            f"its pods name the scheduler {scheduler!r} (spec.schedulerName): binding them "
            "races that scheduler; --bind-any-scheduler binds them"
        )
    return None


def select_bindings(
    snapshot: Snapshot,
    plan: Plan,
    *,
    include_predicted: bool = False,
    any_scheduler: bool = False,
    annotation_key: str = DEVICE_ANNOTATION,
) -> BindingSelection:
    """The pods of ``plan`` a cluster can take Bindings for, and the gangs withheld.

    By default only pods that exist in the dump are bound: a gang predicted from a workload
    (``metadata.kubernetes.predicted_by`` of a converted snapshot) is withheld, and with
    ``include_predicted`` only those whose controller names pods deterministically (a Volcano
    Job, a training-operator job, a StatefulSet) are bound under the predicted names. A gang
    whose pods name another scheduler than :data:`OWN_SCHEDULERS`
    (``metadata.kubernetes.schedulers``) is withheld unless ``any_scheduler``. A gang is
    bound whole or not at all. An instance file without that metadata binds every pod.
    """
    predicted = dict(_kube_meta(snapshot, "predicted_by"))
    meta = snapshot.metadata.get("kubernetes") if isinstance(snapshot.metadata, dict) else None
    listed = meta.get("predicted_gangs") if isinstance(meta, dict) else None
    for key in listed if isinstance(listed, list) else ():
        # an instance converted before predicted_by existed: its predicted gangs, named as
        # their controller would name them, bound only when asked
        predicted.setdefault(key, {"names_known": True, "naming": "as predicted"})
    schedulers = _kube_meta(snapshot, "schedulers")
    reasons: dict[str, str | None] = {}
    requests: list[BindRequest] = []
    counts: dict[str, int] = {}
    for req, p in zip(
        bind_requests(snapshot, plan, annotation_key=annotation_key), plan.pods, strict=True
    ):
        key = p.gang_key
        if key not in reasons:
            reasons[key] = _withheld_reason(
                key, predicted, schedulers, include_predicted, any_scheduler
            )
        if reasons[key] is None:
            requests.append(req)
        else:
            counts[key] = counts.get(key, 0) + 1
    withheld = [Withheld(k, n, reasons[k] or "") for k, n in counts.items()]
    return BindingSelection(requests, withheld)


def bindings_document(
    snapshot: Snapshot,
    plan: Plan,
    *,
    include_predicted: bool = False,
    any_scheduler: bool = False,
    annotation_key: str = DEVICE_ANNOTATION,
) -> list[dict[str, Any]]:
    """The bindings of ``plan`` as a list of Kubernetes bodies: per pod
    :func:`select_bindings` keeps, its annotation patch (only if it got devices), then its
    Binding (module docstring)."""
    out: list[dict[str, Any]] = []
    chosen = select_bindings(
        snapshot,
        plan,
        include_predicted=include_predicted,
        any_scheduler=any_scheduler,
        annotation_key=annotation_key,
    )
    for req in chosen.requests:
        patch = req.patch_body()
        if patch is not None:
            out.append(patch)
        out.append(req.binding_body())
    return out


def eviction_documents(plan: Plan) -> list[dict[str, Any]]:
    """The documents that come before the bindings of a plan with evictions (module
    docstring): one policy/v1 Eviction per evicted pod, in the plan's order, then one
    nomination (``status.nominatedNodeName``) per placed pod of a gang the evictions make
    room for. Empty for a plan without evictions."""
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": e.pod, "namespace": e.namespace},
        }
        for e in plan.evictions
    ]
    preemptors = {e.for_gang for e in plan.evictions}
    out += [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": p.pod, "namespace": p.namespace},
            "status": {"nominatedNodeName": p.node},
        }
        for p in plan.pods
        if p.gang_key in preemptors
    ]
    return out


def dump_bindings(items: Iterable[dict[str, Any]]) -> str:
    """A multi-document YAML stream of ``items`` (``---`` between them)."""
    return yaml.safe_dump_all(list(items), sort_keys=False, explicit_start=True)


# --------------------------------------------------------------------------- binders


@dataclass(frozen=True)
class BindOutcome:
    """What became of one request: ``ok``, and a message when not (or when already bound)."""

    pod: str
    namespace: str
    node: str
    ok: bool
    message: str = ""


class Binder(Protocol):
    """Carries one :class:`BindRequest` to a cluster: annotations first, then the Binding.
    Must be idempotent (binding a pod again to the same node succeeds)."""

    def bind(self, request: BindRequest) -> BindOutcome: ...


class InMemoryBinder:
    """Records what it is asked (``patches``, ``bindings``) and keeps each pod's node.

    A pod bound to another node already is refused, as the API server refuses it (409).
    """

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []
        self.bindings: list[dict[str, Any]] = []
        self.bound: dict[tuple[str, str], str] = {}

    def bind(self, request: BindRequest) -> BindOutcome:
        key = (request.namespace, request.pod)
        have = self.bound.get(key)
        if have is not None:
            if have == request.node:
                return BindOutcome(
                    request.pod, request.namespace, request.node, True, "already bound there"
                )
            return BindOutcome(
                request.pod,
                request.namespace,
                request.node,
                False,
                f"pod {request.namespace}/{request.pod} is already bound to {have}",
            )
        patch = request.patch_body()
        if patch is not None:
            self.patches.append(patch)
        self.bindings.append(request.binding_body())
        self.bound[key] = request.node
        return BindOutcome(request.pod, request.namespace, request.node, True)


class KubeBinder:
    """Binds through the Kubernetes API with the official client.

    ``api``: a ``kubernetes.client.CoreV1Api`` (default: one from the local kubeconfig, or
    the in-cluster service account). Not exercised against a live API server in this
    repository's tests (none runs here); its calls are checked with a stand-in API.
    """

    def __init__(self, api: Any = None, *, dry_run: bool = False, field_manager: str = "gangplan"):
        if api is None:  # pragma: no cover - needs a cluster
            from kubernetes import client, config

            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
            api = client.CoreV1Api()
        self.api = api
        self.dry_run = "All" if dry_run else None
        self.field_manager = field_manager

    def bind(self, request: BindRequest) -> BindOutcome:
        from kubernetes.client import V1Binding, V1ObjectMeta, V1ObjectReference
        from kubernetes.client.exceptions import ApiException

        try:
            patch = request.patch_body()
            if patch is not None:
                self.api.patch_namespaced_pod(
                    request.pod,
                    request.namespace,
                    {"metadata": {"annotations": patch["metadata"]["annotations"]}},
                    dry_run=self.dry_run,
                    field_manager=self.field_manager,
                )
            body = V1Binding(
                api_version="v1",
                kind="Binding",
                metadata=V1ObjectMeta(name=request.pod, namespace=request.namespace),
                target=V1ObjectReference(api_version="v1", kind="Node", name=request.node),
            )
            self.api.create_namespaced_pod_binding(
                request.pod,
                request.namespace,
                body,
                dry_run=self.dry_run,
                field_manager=self.field_manager,
                _preload_content=False,
            )
        except ApiException as err:
            if err.status == 409:
                try:
                    current = self.api.read_namespaced_pod(request.pod, request.namespace)
                    node = current.spec.node_name if current.spec else None
                except ApiException:
                    node = None
                if node == request.node:
                    return BindOutcome(
                        request.pod, request.namespace, request.node, True, "already bound there"
                    )
            return BindOutcome(
                request.pod,
                request.namespace,
                request.node,
                False,
                f"{err.status} {err.reason}".strip(),
            )
        return BindOutcome(request.pod, request.namespace, request.node, True)
