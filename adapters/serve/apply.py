"""Applying a gang's plan to the cluster, pod by pod, and taking a gang back.

Mode **gate** (beside kube-scheduler; as Kueue's topology-aware scheduling does it): one
merge patch per pod, guarded by the pod's ``resourceVersion`` as the cache saw it::

    {"metadata": {"resourceVersion": "...",
                  "annotations": {"scheduling.koordinator.sh/device-allocated": "...",
                                  "gangplan.io/plan": "..."}},
     "spec": {"nodeSelector": {"kubernetes.io/hostname": "<the node's hostname label>"},
              "schedulingGates": [<the pod's other gates>]}}

Adding to ``nodeSelector`` is allowed on a gated pod since Kubernetes 1.30 ("Pod Scheduling
Readiness": mutable scheduling directives); kube-scheduler then binds the pod to that node
with all its own checks. Mode **bind** (a secondary scheduler; as Volcano does it): the same
annotations in a merge patch, then a core v1 ``Binding`` through ``pods/{name}/binding`` with
the pod's UID as a precondition. A Binding answered 409 is read back: if the pod is bound to
the planned node already, that is success (idempotent), else the gang is broken. A patch or
Binding answered 404 is read back too (a GET of the pod): only a pod that is gone (or another
one by now) breaks the gang; a pod that is still there means the request was refused on the
way (``pods/binding`` not served, a proxy, an authorizer) — a failure named as such, the
gang left in flight.

Taking a gang back (:meth:`Applier.take_back`): mode bind evicts the pods it bound (the
Eviction API: PodDisruptionBudgets apply; a 429 leaves the pod for the next cycle) and
clears the annotations of those it only annotated — including those this plan annotated
just before a Binding that failed, which the cache may not show yet (:attr:`InFlight.written
<gangplan.adapters.serve.ledger.InFlight.written>`); mode gate deletes the pods it ungated
(UID precondition), so their controller recreates them — gated again, by the pod template
or the webhook. Preemption: a plan's ``evictions`` (``Plan.evictions``, made with
``preemption: true``) go through :meth:`Applier.evict`, a gang's victims together
(:func:`~gangplan.adapters.serve.evict.evict_together`), the preemptor's capacity held in the
ledger until they are gone (:class:`~gangplan.adapters.serve.loop.ServeLoop`).

``dry_run``: nothing is sent; :attr:`Applier.requests` collects what would be, as
Kubernetes bodies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from gangplan.adapters.kube.bindings import DEVICE_ANNOTATION, device_allocation
from gangplan.adapters.serve.api import KINDS, ApiError, KubeApi, Obj
from gangplan.adapters.serve.ledger import ANN_PLAN, InFlight, plan_annotation
from gangplan.adapters.serve.snapshot import GATE, HOSTNAME, PodRef
from gangplan.models import PodPlacement, Snapshot

__all__ = ["Applier", "Outcome"]

PODS = KINDS["pods"]


@dataclass
class Outcome:
    """What applying or taking back did: pods done, and failures ``(pod, ApiError)``."""

    done: list[str] = field(default_factory=list)
    failed: list[tuple[str, ApiError]] = field(default_factory=list)
    broken: str = ""
    """non-empty: the gang cannot go on as planned (why); take it back"""


class Applier:
    """Sends the requests of one mode through the port (see the module docstring)."""

    def __init__(
        self,
        api: KubeApi,
        mode: Literal["gate", "bind"],
        *,
        gate: str = GATE,
        annotation_key: str = DEVICE_ANNOTATION,
        dry_run: bool = False,
    ):
        self.api = api
        self.mode = mode
        self.gate = gate
        self.annotation_key = annotation_key
        self.dry_run = dry_run
        self.requests: list[Obj] = []

    def _annotations(self, snap: Snapshot, p: PodPlacement, plan: str | None) -> dict[str, str]:
        out: dict[str, str] = {}
        alloc = device_allocation(snap, p)
        if alloc:
            out[self.annotation_key] = json.dumps(alloc, separators=(",", ":"))
        if plan is not None:
            out[ANN_PLAN] = plan
        return out

    def patch_body(
        self, snap: Snapshot, p: PodPlacement, ref: PodRef, plan: str | None, hostname: str
    ) -> Obj:
        """The merge patch of one pod in this mode (module docstring)."""
        meta: Obj = {"resourceVersion": ref.resource_version}
        ann = self._annotations(snap, p, plan)
        if ann:
            meta["annotations"] = ann
        body: Obj = {"metadata": meta}
        if self.mode == "gate":
            body["spec"] = {
                "nodeSelector": {HOSTNAME: hostname},
                "schedulingGates": [{"name": g} for g in ref.gates if g != self.gate],
            }
        return body

    def apply(
        self,
        flight: InFlight,
        snap: Snapshot,
        refs: dict[str, PodRef],
        hostnames: dict[str, str],
        now: float,
    ) -> Outcome:
        """Apply every pod of ``flight`` not applied yet; ``refs``: the pods as the cache
        shows them now. Stops at the first failure (the rest waits for the next cycle)."""
        out = Outcome()
        plan = plan_annotation(flight)
        for name, p in sorted(flight.placements.items()):
            if name in flight.applied:
                continue
            ref = refs.get(name)
            if ref is None:
                out.broken = f"pod {flight.namespace}/{name} is gone"
                return out
            uid = flight.uids.setdefault(name, ref.uid)
            if uid != ref.uid:
                out.broken = f"pod {flight.namespace}/{name} was recreated"
                return out
            try:
                self._apply_one(flight, snap, p, ref, plan, hostnames.get(p.node, p.node))
            except ApiError as err:
                if err.status == 404:
                    gone, err = self._not_found(ref, err)
                    if gone:
                        out.broken = f"pod {flight.namespace}/{name} {gone}"
                elif err.status == 409 and self.mode == "bind" and self._bound_elsewhere(ref, p):
                    out.broken = f"pod {flight.namespace}/{name} was bound by someone else"
                out.failed.append((name, err))
                return out
            flight.applied[name] = now
            out.done.append(name)
        return out

    def _apply_one(
        self,
        flight: InFlight,
        snap: Snapshot,
        p: PodPlacement,
        ref: PodRef,
        plan: str | None,
        hostname: str,
    ) -> None:
        ns, name = ref.namespace, ref.name
        body = self.patch_body(snap, p, ref, plan, hostname)
        if self.mode == "gate":
            self._send_patch(ns, name, body)
            return
        written = body["metadata"].get("annotations") or {}
        if any(ref.annotations.get(k) != v for k, v in written.items()):
            new = self._send_patch(ns, name, body)
            flight.written[name] = str((new.get("metadata") or {}).get("resourceVersion") or "")
        if self.dry_run:
            self.requests.append(
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name, "namespace": ns, "uid": ref.uid},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": p.node},
                }
            )
            return
        try:
            self.api.bind(ns, name, p.node, uid=ref.uid)
        except ApiError as err:
            if err.status != 409:
                raise
            current = self.api.get(PODS, ns, name)
            if (current.get("spec") or {}).get("nodeName") != p.node:
                raise
            # bound there already (a retry after a lost answer): success, bound once

    def _send_patch(self, ns: str, name: str, body: Obj) -> Obj:
        """Send (or, dry, record) one merge patch; the pod as the server returned it ({}
        when dry)."""
        if self.dry_run:
            self.requests.append(
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}}
                | {"patch": body}
            )
            return {}
        return self.api.patch(PODS, ns, name, body)

    def _not_found(self, ref: PodRef, err: ApiError) -> tuple[str, ApiError]:
        """A 404 from a patch or ``pods/binding`` tells nothing by itself: the pod may be
        gone, or the request refused on the way (the subresource not served, a proxy, an
        authorizer answering 404). GET the pod to tell: ``(why the gang is broken, err)``
        when it is gone or another pod by now, else ``("", err named as a refusal)`` — the
        gang stays in flight (retried, taken back at ``bind_timeout``)."""
        try:
            current = self.api.get(PODS, ref.namespace, ref.name)
        except ApiError as got:
            if got.status == 404:
                return "is gone", err
            return "", err
        if (current.get("metadata") or {}).get("uid") != ref.uid:
            return "was recreated", err
        return "", ApiError(
            err.status,
            err.reason,
            f"refused ({err}), yet GET finds the pod: the request was refused on the way "
            "(an endpoint not served, a proxy, an authorizer), the pod is not gone",
        )

    def _bound_elsewhere(self, ref: PodRef, p: PodPlacement) -> bool:
        try:
            current = self.api.get(PODS, ref.namespace, ref.name)
        except ApiError:
            return False
        node = (current.get("spec") or {}).get("nodeName")
        return bool(node) and node != p.node

    # ------------------------------------------------------------------ taking back

    def take_back(self, flight: InFlight, pods: dict[str, Obj | None]) -> Outcome:
        """Remove what ``flight`` applied (module docstring); ``pods``: the pods as the
        cache shows them (None: gone). Pods left (a 429, a 5xx) stay in ``flight.back``."""
        out = Outcome()
        if not flight.taking_back:
            flight.taking_back = True
            flight.back = set(flight.applied) | set(flight.confirmed) | set(flight.written)
            if self.mode == "bind":
                flight.back |= {
                    n
                    for n, raw in pods.items()
                    if raw is not None
                    and ANN_PLAN in ((raw.get("metadata") or {}).get("annotations") or {})
                }
        for name in sorted(flight.back):
            raw = pods.get(name)
            uid = flight.uids.get(name)
            if raw is None or (uid and (raw.get("metadata") or {}).get("uid") != uid):
                flight.back.discard(name)  # gone already, or another pod by now
                continue
            try:
                self._remove_one(flight.namespace, name, raw, flight.written.get(name))
            except ApiError as err:
                if err.status != 404:
                    out.failed.append((name, err))
                    continue
            flight.back.discard(name)
            out.done.append(name)
        return out

    def _remove_one(self, ns: str, name: str, raw: Obj, written: str | None = None) -> None:
        """Remove one pod of a gang taken back; ``written``: the resourceVersion of this
        plan's annotation patch, the precondition of the patch that clears it while the
        cache (``raw``) does not show it yet."""
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        uid = meta.get("uid")
        if self.mode == "gate":
            if self.dry_run:
                self.requests.append({"delete": f"pods/{ns}/{name}", "uid": uid})
                return
            self.api.delete(PODS, ns, name, uid=uid)
        elif spec.get("nodeName"):
            self.evict(ns, name, uid)
        else:
            shown = ANN_PLAN in (meta.get("annotations") or {})
            rv = meta.get("resourceVersion") if shown or not written else written
            body = {
                "metadata": {
                    "resourceVersion": rv,
                    "annotations": {ANN_PLAN: None, self.annotation_key: None},
                }
            }
            self._send_patch(ns, name, body)

    def evict(self, ns: str, name: str, uid: str | None) -> None:
        """One pod out through the Eviction API (PodDisruptionBudgets apply: 429)."""
        if self.dry_run:
            self.requests.append(
                {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": name, "namespace": ns},
                }
            )
            return
        self.api.evict(ns, name, uid=uid)
