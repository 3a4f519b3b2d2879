"""An in-memory API server for tests: :class:`InMemoryApi`, the port's double, with faults.

It behaves like the Kubernetes API server where the loop depends on it:

* every write bumps one global ``resourceVersion``; a merge patch or a PUT carrying a stale
  ``metadata.resourceVersion`` is refused with 409 Conflict (optimistic concurrency);
* watches replay the changes after a ``resourceVersion`` and end with a ``BOOKMARK``; once
  the change history is compacted past it (``history`` events kept), 410 Gone;
* ``pods/binding`` sets ``spec.nodeName`` once: 409 if the pod is bound, has scheduling gates
  ("pod has non-empty .spec.schedulingGates") or its UID is not the Binding's;
* pod updates follow the scheduling-gate rules (Kubernetes 1.30+, "Pod Scheduling
  Readiness"): gates may only be removed; ``spec.nodeSelector`` may only gain keys, and only
  while the pod is gated; ``spec.nodeName`` only through the binding; the rest of the spec
  is immutable (422);
* ``pods/eviction`` honours PodDisruptionBudgets (``minAvailable`` / ``maxUnavailable`` as
  counts, over the pods their selector matches that are not finished): 429 when the
  eviction would take the budget below zero, and nothing is evicted;
* deleting with a UID precondition that no longer holds is 409.

:class:`Faults` injects answers (409, 429, 500, 410 on a watch, a dropped stream) into chosen
calls, and ``delay_s`` moves a fake clock to play a slow API. :attr:`InMemoryApi.bindings`
counts successful bindings per pod UID (a pod bound twice shows 2).
"""

from __future__ import annotations

import builtins
import copy
import threading
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gangplan.adapters.serve.api import (
    KINDS,
    VERSIONS,
    ApiError,
    Kind,
    Listing,
    Obj,
    WatchEvent,
    merge_patch,
)
from gangplan.adapters.serve.clock import Clock, SystemClock, rfc3339

__all__ = ["Call", "Fault", "Faults", "InMemoryApi"]

POD = KINDS["pods"]
PDB = KINDS["poddisruptionbudgets.policy"]
_FINISHED = ("Succeeded", "Failed")


@dataclass
class Fault:
    """Answer ``status`` to the next ``times`` calls of ``verb`` (``list``, ``watch``,
    ``get``, ``patch``, ``status`` (a status patch), ``delete``, ``bind``, ``evict``,
    ``create``, ``replace``, or ``*``) on ``kind`` (a :attr:`Kind.key`; None: any) and
    ``name`` (None: any), after letting ``skip`` matching calls through. Status 0 is a
    connection that drops (a watch stream that breaks); ``delay_s``: the clock moves by this
    much first (a slow API; with status None, only slow)."""

    verb: str
    status: int | None = 500
    kind: str | None = None
    name: str | None = None
    times: int = 1
    skip: int = 0
    delay_s: float = 0.0
    message: str = "injected"

    def matches(self, verb: str, kind: str, name: str | None) -> bool:
        return (
            self.verb in ("*", verb)
            and (self.kind is None or self.kind == kind)
            and (self.name is None or self.name == name)
        )


_REASONS = {
    0: "ConnectionReset",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class Faults:
    """The faults armed on an :class:`InMemoryApi` (first matching fault wins)."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self.fired: Counter[str] = Counter()

    def add(self, fault: Fault) -> Fault:
        self._faults.append(fault)
        return fault

    def clear(self) -> None:
        self._faults.clear()

    def check(self, verb: str, kind: str, name: str | None, clock: Clock) -> None:
        for f in self._faults:
            if f.times <= 0 or not f.matches(verb, kind, name):
                continue
            if f.skip > 0:
                f.skip -= 1
                return
            f.times -= 1
            if f.delay_s:
                clock.sleep(f.delay_s)
            if f.status is not None:
                self.fired[f"{verb} {f.status}"] += 1
                raise ApiError(
                    f.status,
                    _REASONS.get(f.status, "Error"),
                    f.message,
                    retry_after=1.0 if f.status == 429 else None,
                )
            return


@dataclass(frozen=True)
class Call:
    """One write request the API received: verb, kind key, namespace, name and body."""

    verb: str
    kind: str
    namespace: str | None
    name: str | None
    body: Obj | None = None


@dataclass
class _Store:
    objects: dict[str, dict[tuple[str, str], Obj]] = field(default_factory=dict)


class InMemoryApi:
    """The port (:class:`~gangplan.adapters.serve.api.KubeApi`) over objects in memory.

    ``history``: watch events kept before older resourceVersions answer 410;
    ``record``: keep the last that many write calls in :attr:`calls` (0: none);
    ``on_write``: called after every successful write with its :class:`Call` (the HTTP
    stand-in validates bodies there).
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        history: int = 10_000,
        record: int = 100_000,
        on_write: Callable[[Call], None] | None = None,
    ):
        self.clock: Clock = clock or SystemClock()
        self.faults = Faults()
        self.served: dict[str, tuple[str, ...]] = {}
        """API group -> the versions served of it, where a test sets them (discovery)"""
        self.calls: deque[Call] = deque(maxlen=record or None)
        self._record = record > 0
        self.bindings: Counter[str] = Counter()
        self.on_write = on_write
        self._store = _Store()
        self._rv = 0
        self._log: deque[tuple[int, str, str, Obj]] = deque()
        self._history = history
        self._compacted = 0
        self._cond = threading.Condition(threading.RLock())

    # ------------------------------------------------------------------ helpers

    def _bucket(self, kind: Kind) -> dict[tuple[str, str], Obj]:
        return self._store.objects.setdefault(kind.key, {})

    @staticmethod
    def _ns(kind: Kind, namespace: str | None) -> str:
        return (namespace or "default") if kind.namespaced else ""

    def _emit(self, kind: Kind, etype: str, obj: Obj) -> None:
        self._log.append((self._rv, kind.key, etype, copy.deepcopy(obj)))
        while len(self._log) > self._history:
            self._compacted = self._log.popleft()[0]
        self._cond.notify_all()

    def _bump(self, obj: Obj) -> None:
        self._rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)

    def _note(self, call: Call) -> None:
        if self._record:
            self.calls.append(call)
        if self.on_write is not None:
            self.on_write(call)

    def _find(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        obj = self._bucket(kind).get((self._ns(kind, namespace), name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{kind.key} "{name}" not found')
        return obj

    def compact(self) -> None:
        """Forget every watch event so far (watches from an older resourceVersion: 410)."""
        with self._cond:
            self._log.clear()
            self._compacted = self._rv

    @property
    def resource_version(self) -> int:
        return self._rv

    # ------------------------------------------------------------------ reads

    def served_versions(self, group: str) -> tuple[str, ...] | None:
        """``served[group]`` where set, else every version :data:`KINDS` and
        :data:`VERSIONS` give the group."""
        if group in self.served:
            return self.served[group]
        versions = {k.version for k in KINDS.values() if k.group == group}
        versions |= {v for key, vs in VERSIONS.items() if KINDS[key].group == group for v in vs}
        return tuple(sorted(versions))

    def list(self, kind: Kind, namespace: str | None = None) -> Listing:
        with self._cond:
            self.faults.check("list", kind.key, None, self.clock)
            if kind.version not in (self.served_versions(kind.group) or ()):
                raise ApiError(404, "NotFound", f"{kind.api_version} is not served")
            items = [
                copy.deepcopy(o)
                for (ns, _), o in sorted(self._bucket(kind).items())
                if namespace is None or not kind.namespaced or ns == namespace
            ]
            return Listing(items, str(self._rv))

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        *,
        namespace: str | None = None,
        timeout_s: float = 60.0,
    ) -> Iterator[WatchEvent]:
        with self._cond:
            self.faults.check("watch", kind.key, None, self.clock)
            since = int(resource_version or 0)
            if since < self._compacted:
                raise ApiError(
                    410, "Expired", f"too old resource version: {since} ({self._compacted})"
                )
        return self._stream(kind, since, namespace, timeout_s)

    def _stream(
        self, kind: Kind, since: int, namespace: str | None, timeout_s: float
    ) -> Iterator[WatchEvent]:
        import time

        deadline = time.monotonic() + timeout_s
        last = since
        while True:
            with self._cond:
                if last < self._compacted:
                    raise ApiError(410, "Expired", f"too old resource version: {last}")
                batch = [
                    (rv, etype, obj)
                    for rv, key, etype, obj in self._log
                    if rv > last
                    and key == kind.key
                    and (
                        namespace is None
                        or not kind.namespaced
                        or obj["metadata"].get("namespace") == namespace
                    )
                ]
                current = self._rv
                if not batch and time.monotonic() < deadline:
                    self._cond.wait(min(0.5, max(0.0, deadline - time.monotonic())))
                    continue
            for rv, etype, obj in batch:
                yield WatchEvent(etype, copy.deepcopy(obj))  # type: ignore[arg-type]
                last = rv
            if time.monotonic() >= deadline:
                last = max(last, current)
                yield WatchEvent(
                    "BOOKMARK",
                    {
                        "apiVersion": kind.api_version,
                        "kind": kind.kind,
                        "metadata": {"resourceVersion": str(last)},
                    },
                )
                return

    def get(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        with self._cond:
            self.faults.check("get", kind.key, name, self.clock)
            return copy.deepcopy(self._find(kind, namespace, name))

    # ------------------------------------------------------------------ writes

    def create(self, kind: Kind, namespace: str | None, body: Obj) -> Obj:
        with self._cond:
            meta = body.get("metadata") or {}
            name = meta.get("name") or ""
            self.faults.check("create", kind.key, name, self.clock)
            if not name and meta.get("generateName"):
                name = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
            if not name:
                raise ApiError(422, "Invalid", "metadata.name: Required value")
            ns = self._ns(kind, namespace or meta.get("namespace"))
            bucket = self._bucket(kind)
            if (ns, name) in bucket:
                raise ApiError(409, "AlreadyExists", f'{kind.key} "{name}" already exists')
            obj = copy.deepcopy(body)
            obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
            m = obj.setdefault("metadata", {})
            m["name"] = name
            if kind.namespaced:
                m["namespace"] = ns
            m["uid"] = str(uuid.uuid4())
            m.setdefault("creationTimestamp", rfc3339(self.clock.now()))
            self._bump(obj)
            bucket[(ns, name)] = obj
            self._emit(kind, "ADDED", obj)
            self._note(Call("create", kind.key, ns or None, name, copy.deepcopy(body)))
            return copy.deepcopy(obj)

    def replace(self, kind: Kind, namespace: str | None, name: str, body: Obj) -> Obj:
        with self._cond:
            self.faults.check("replace", kind.key, name, self.clock)
            cur = self._find(kind, namespace, name)
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv != cur["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {kind.key} "{name}": the object has '
                    "been modified; please apply your changes to the latest version",
                )
            obj = copy.deepcopy(body)
            obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
            for k in ("uid", "creationTimestamp", "name", "namespace"):
                if k in cur["metadata"]:
                    obj.setdefault("metadata", {})[k] = cur["metadata"][k]
            self._bump(obj)
            self._bucket(kind)[(self._ns(kind, namespace), name)] = obj
            self._emit(kind, "MODIFIED", obj)
            self._note(Call("replace", kind.key, namespace, name, copy.deepcopy(body)))
            return copy.deepcopy(obj)

    def patch(
        self, kind: Kind, namespace: str | None, name: str, patch: Obj, *, status: bool = False
    ) -> Obj:
        with self._cond:
            self.faults.check("status" if status else "patch", kind.key, name, self.clock)
            cur = self._find(kind, namespace, name)
            rv = (patch.get("metadata") or {}).get("resourceVersion")
            if rv is not None and rv != cur["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {kind.key} "{name}": the object has '
                    "been modified; please apply your changes to the latest version",
                )
            new = merge_patch(cur, patch)
            if status:  # the status subresource changes only the status
                new = {**cur, "status": new.get("status")}
            else:
                new["status"] = cur.get("status")
                if kind.key == "pods":
                    self._check_pod_update(cur, new)
            for k in ("uid", "creationTimestamp", "name", "namespace"):
                if k in cur["metadata"]:
                    new["metadata"][k] = cur["metadata"][k]
            if new.get("status") is None:
                new.pop("status", None)
            self._bump(new)
            self._bucket(kind)[(self._ns(kind, namespace), name)] = new
            self._emit(kind, "MODIFIED", new)
            verb = "status" if status else "patch"
            self._note(Call(verb, kind.key, namespace, name, copy.deepcopy(patch)))
            return copy.deepcopy(new)

    @staticmethod
    def _check_pod_update(cur: Obj, new: Obj) -> None:
        old_spec, spec = cur.get("spec") or {}, new.get("spec") or {}
        old_gates = [g.get("name") for g in old_spec.get("schedulingGates") or []]
        gates = [g.get("name") for g in spec.get("schedulingGates") or []]
        if any(g not in old_gates for g in gates):
            raise ApiError(422, "Invalid", "spec.schedulingGates: only deletion is allowed")
        old_sel, sel = old_spec.get("nodeSelector") or {}, spec.get("nodeSelector") or {}
        if sel != old_sel:
            if not old_gates:
                raise ApiError(
                    422, "Invalid", "spec.nodeSelector: may be changed only on a gated pod"
                )
            if any(old_sel.get(k) != v for k, v in old_sel.items() if sel.get(k) != v):
                raise ApiError(422, "Invalid", "spec.nodeSelector: only additions are allowed")
        rest = {k: v for k, v in spec.items() if k not in ("schedulingGates", "nodeSelector")}
        old_rest = {
            k: v for k, v in old_spec.items() if k not in ("schedulingGates", "nodeSelector")
        }
        if rest != old_rest:
            changed = sorted(k for k in set(rest) | set(old_rest) if rest.get(k) != old_rest.get(k))
            raise ApiError(422, "Invalid", f"spec: Forbidden: pod updates may not change {changed}")

    def delete(
        self, kind: Kind, namespace: str | None, name: str, *, uid: str | None = None
    ) -> None:
        with self._cond:
            self.faults.check("delete", kind.key, name, self.clock)
            cur = self._find(kind, namespace, name)
            if uid is not None and cur["metadata"].get("uid") != uid:
                raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}")
            self._remove(kind, namespace, name)
            self._note(Call("delete", kind.key, namespace, name))

    def _remove(self, kind: Kind, namespace: str | None, name: str) -> None:
        obj = self._bucket(kind).pop((self._ns(kind, namespace), name))
        self._bump(obj)
        self._emit(kind, "DELETED", obj)

    def bind(self, namespace: str, pod: str, node: str, *, uid: str | None = None) -> None:
        with self._cond:
            self.faults.check("bind", "pods", pod, self.clock)
            cur = self._find(POD, namespace, pod)
            meta, spec = cur["metadata"], cur.setdefault("spec", {})
            if uid is not None and meta.get("uid") != uid:
                raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}")
            if spec.get("nodeName"):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods/binding "{pod}": pod {pod} is '
                    f"already assigned to node {spec['nodeName']!r}",
                )
            if spec.get("schedulingGates"):
                raise ApiError(
                    409,
                    "Conflict",
                    f"pod {namespace}/{pod} has non-empty .spec.schedulingGates",
                )
            new = copy.deepcopy(cur)
            new["spec"]["nodeName"] = node
            status = new.setdefault("status", {})
            conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": rfc3339(self.clock.now()),
                }
            )
            status["conditions"] = conds
            self._bump(new)
            self._bucket(POD)[(namespace, pod)] = new
            self.bindings[str(meta.get("uid"))] += 1
            self._emit(POD, "MODIFIED", new)
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": pod, "namespace": namespace, **({"uid": uid} if uid else {})},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            self._note(Call("bind", "pods", namespace, pod, body))

    def evict(self, namespace: str, pod: str, *, uid: str | None = None) -> None:
        with self._cond:
            self.faults.check("evict", "pods", pod, self.clock)
            cur = self._find(POD, namespace, pod)
            if uid is not None and cur["metadata"].get("uid") != uid:
                raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}")
            for pdb in self._bucket(PDB).values():
                if pdb["metadata"].get("namespace") != namespace:
                    continue
                allowed = self._disruptions_allowed(pdb, cur)
                if allowed is not None and allowed <= 0:
                    raise ApiError(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        retry_after=10.0,
                    )
            body = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": pod, "namespace": namespace},
                **({"deleteOptions": {"preconditions": {"uid": uid}}} if uid else {}),
            }
            self._remove(POD, namespace, pod)
            self._note(Call("evict", "pods", namespace, pod, body))

    def _disruptions_allowed(self, pdb: Obj, pod: Obj) -> int | None:
        """Evictions ``pdb`` still allows now, or None if it does not select ``pod``."""
        sel = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        labels = pod["metadata"].get("labels") or {}
        if not sel or any(labels.get(k) != v for k, v in sel.items()):
            return None
        ns = pod["metadata"].get("namespace")
        healthy = [
            p
            for (pns, _), p in self._bucket(POD).items()
            if pns == ns
            and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in sel.items())
            and (p.get("status") or {}).get("phase") not in _FINISHED
        ]
        spec = pdb.get("spec") or {}
        if isinstance(spec.get("minAvailable"), int):
            return len(healthy) - int(spec["minAvailable"])
        if isinstance(spec.get("maxUnavailable"), int):
            return int(spec["maxUnavailable"])
        return None

    # ------------------------------------------------------------------ test helpers

    def objects(self, kind: Kind) -> builtins.list[Obj]:
        """Copies of every stored object of ``kind`` (no fault, no record)."""
        with self._cond:
            return [copy.deepcopy(o) for _, o in sorted(self._bucket(kind).items())]

    def put(self, obj: Obj) -> Obj:
        """Create or overwrite ``obj`` as a controller would (no fault, no record)."""
        with self._cond:
            api, kind_name = obj["apiVersion"], obj["kind"]
            kind = next(k for k in KINDS.values() if (k.api_version, k.kind) == (api, kind_name))
            meta = obj.setdefault("metadata", {})
            key = (self._ns(kind, meta.get("namespace")), meta["name"])
            if kind.namespaced:
                meta["namespace"] = key[0]
            old = self._bucket(kind).get(key)
            meta.setdefault("uid", old["metadata"]["uid"] if old else str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", rfc3339(self.clock.now()))
            new = copy.deepcopy(obj)
            self._bump(new)
            self._bucket(kind)[key] = new
            self._emit(kind, "MODIFIED" if old else "ADDED", new)
            return copy.deepcopy(new)

    def remove(self, kind: Kind, namespace: str | None, name: str) -> None:
        """Delete as a controller or the kubelet would (no fault, no record)."""
        with self._cond:
            self._remove(kind, namespace, name)
