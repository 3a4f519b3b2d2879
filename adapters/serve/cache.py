"""The informer-style cache: each kind listed once, then watched from the list's
resourceVersion, with bookmarks; a 410 Gone relists (and tells apart what changed meanwhile).

:class:`Informer` keeps the objects of one kind as the API server sends them and calls
``on_change(kind_key, (namespace, name), object or None)`` for every change it absorbs —
the snapshot builder (:mod:`gangplan.adapters.serve.snapshot`) converts that one object
again, nothing else. A kind the cluster does not serve (404 on the list: its CRD is not
installed) is marked unserved and listed again after ``retry_unserved_s``; a dropped stream
(any other error) resumes from the last resourceVersion seen.

:class:`Cache` holds the informers of a run. ``pump()`` drives them in the caller's thread
(each watch asked for what is there now: the tests and the in-memory API); ``start()`` runs
one daemon thread per informer that watches with a server-side timeout (a live cluster).
Reads go through :meth:`Cache.locked`, so a snapshot never sees half an event. The cache
never writes to the API. The pattern is client-go's reflector and informer
(``k8s.io/client-go/tools/cache``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from gangplan.adapters.serve.api import (
    VERSIONS,
    ApiError,
    Kind,
    KubeApi,
    Obj,
    WatchEvent,
    at_served_version,
)
from gangplan.adapters.serve.clock import Clock, SystemClock

__all__ = ["Cache", "Informer", "InformerStats", "NotSynced", "ObjKey", "OnChange"]

ObjKey = tuple[str, str]
"""``(namespace, name)``; namespace ``""`` for cluster-scoped objects"""
OnChange = Callable[[str, ObjKey, "Obj | None"], None]


def obj_key(obj: Obj) -> ObjKey:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


@dataclass
class InformerStats:
    """What one informer did: lists, relists after 410, events, bookmarks, stream errors."""

    lists: int = 0
    relists_gone: int = 0
    events: int = 0
    bookmarks: int = 0
    errors: int = 0
    last_error: str = ""


@dataclass
class Informer:
    """List then watch one kind (in ``namespace``, or all namespaces)."""

    api: KubeApi
    kind: Kind
    on_change: OnChange
    lock: threading.RLock
    namespace: str | None = None
    clock: Clock = field(default_factory=SystemClock)
    retry_unserved_s: float = 300.0
    objects: dict[ObjKey, Obj] = field(default_factory=dict)
    resource_version: str | None = None
    served: bool = True
    stats: InformerStats = field(default_factory=InformerStats)
    list_error: ApiError | None = None
    """why the last list failed (None once a list succeeds, or for an unserved kind)"""
    _unserved_since: float = 0.0

    @property
    def synced(self) -> bool:
        """Listed at least once (or known to be unserved)."""
        return self.resource_version is not None or not self.served

    def step(self, timeout_s: float = 0.0) -> int:
        """List if needed, else absorb one watch stream; returns the events absorbed."""
        if not self.served:
            if self.clock.now() - self._unserved_since < self.retry_unserved_s:
                return 0
            self.served = True
        if self.resource_version is None:
            return self._relist()
        n = 0
        try:
            for ev in self.api.watch(
                self.kind, self.resource_version, namespace=self.namespace, timeout_s=timeout_s
            ):
                self.absorb(ev)
                n += 1
        except ApiError as err:
            self.stats.errors += 1
            self.stats.last_error = str(err)
            if err.status == 410:
                self.stats.relists_gone += 1
                self.resource_version = None
                return n + self._relist()
        return n

    def absorb(self, ev: WatchEvent) -> None:
        """Apply one watch event to the store (and tell ``on_change``)."""
        if ev.type == "BOOKMARK":
            self.stats.bookmarks += 1
            if ev.resource_version:
                self.resource_version = ev.resource_version
            return
        key = obj_key(ev.object)
        with self.lock:
            self.stats.events += 1
            if ev.type == "DELETED":
                if self.objects.pop(key, None) is not None:
                    self.on_change(self.kind.key, key, None)
            else:
                self.objects[key] = ev.object
                self.on_change(self.kind.key, key, ev.object)
            if ev.resource_version:
                self.resource_version = ev.resource_version

    def _relist(self) -> int:
        if self.kind.key in VERSIONS:
            # the newest version the server serves (discovery), asked at every list
            discover = getattr(self.api, "served_versions", None)
            chosen = at_served_version(
                self.kind, discover(self.kind.group) if discover is not None else None
            )
            if chosen is None:
                self.served = False
                self._unserved_since = self.clock.now()
                return 0
            self.kind = chosen
        try:
            listing = self.api.list(self.kind, self.namespace)
        except ApiError as err:
            self.stats.errors += 1
            self.stats.last_error = str(err)
            if err.status in (403, 404):
                self.served = False
                self._unserved_since = self.clock.now()
            else:
                self.list_error = err
            return 0
        self.stats.lists += 1
        self.list_error = None
        new = {obj_key(o): o for o in listing.items}
        with self.lock:
            for key in [k for k in self.objects if k not in new]:
                del self.objects[key]
                self.on_change(self.kind.key, key, None)
            for key, obj in new.items():
                old = self.objects.get(key)
                if old is None or _rv(old) != _rv(obj):
                    self.objects[key] = obj
                    self.on_change(self.kind.key, key, obj)
            self.resource_version = listing.resource_version
        return len(new)


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class NotSynced(Exception):
    """A run that needs the cluster now (``serve --once``, ``apply``) could not list every
    watched kind: ``errors`` gives ``(kind key, ApiError)`` of each list that failed."""

    def __init__(self, errors: list[tuple[str, ApiError]]):
        self.errors = errors
        super().__init__("; ".join(f"{key}: {err}" for key, err in errors) or "not synced")


class Cache:
    """The informers of one run, by :attr:`Kind.key`, sharing one lock."""

    def __init__(
        self,
        api: KubeApi,
        kinds: list[Kind],
        on_change: OnChange,
        *,
        namespaces: tuple[str, ...] = (),
        clock: Clock | None = None,
    ):
        self.lock = threading.RLock()
        self.api = api
        clk = clock or SystemClock()
        self.informers: dict[str, list[Informer]] = {}
        for kind in kinds:
            scopes: tuple[str | None, ...] = (
                namespaces if kind.namespaced and namespaces else (None,)
            )
            self.informers[kind.key] = [
                Informer(api, kind, on_change, self.lock, namespace=ns, clock=clk) for ns in scopes
            ]
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    def __iter__(self) -> Iterator[Informer]:
        for infs in self.informers.values():
            yield from infs

    def objects(self, key: str) -> dict[ObjKey, Obj]:
        """The objects of kind ``key`` (all namespaces watched); read under :meth:`locked`."""
        infs = self.informers.get(key, [])
        if len(infs) == 1:
            return infs[0].objects
        out: dict[ObjKey, Obj] = {}
        for inf in infs:
            out.update(inf.objects)
        return out

    def get(self, key: str, ns: str, name: str) -> Obj | None:
        for inf in self.informers.get(key, []):
            obj = inf.objects.get((ns, name))
            if obj is not None:
                return obj
        return None

    @contextmanager
    def locked(self) -> Iterator[None]:
        with self.lock:
            yield

    @property
    def synced(self) -> bool:
        return all(inf.synced for inf in self)

    def list_errors(self) -> list[tuple[str, ApiError]]:
        """``(kind key, error)`` of every informer not synced because its list failed."""
        return [
            (inf.kind.key, inf.list_error)
            for inf in self
            if inf.list_error is not None and not inf.synced
        ]

    def require_synced(self) -> None:
        """Raise :class:`NotSynced` (with :meth:`list_errors`) unless every kind is listed."""
        if not self.synced:
            raise NotSynced(self.list_errors())

    def pump(self) -> int:
        """One step of every informer in this thread (watches return what is there now)."""
        return sum(inf.step(0.0) for inf in self)

    def start(self, watch_timeout_s: float = 60.0) -> None:
        """One daemon thread per informer, each listing, then watching until :meth:`stop`."""
        for inf in self:
            t = threading.Thread(
                target=self._run, args=(inf, watch_timeout_s), daemon=True, name=inf.kind.key
            )
            t.start()
            self._threads.append(t)

    def _run(self, inf: Informer, timeout_s: float) -> None:
        while not self._stop.is_set():
            try:
                n = inf.step(timeout_s)
            except Exception as err:  # never let one kind stop the cache
                inf.stats.errors += 1
                inf.stats.last_error = repr(err)
                n = 0
            if n == 0:
                self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
