"""The small protocols through which :class:`~gangplan.adapters.serve.loop.ServeLoop` and its
steps see their parts (:class:`~gangplan.adapters.serve.parts.LoopParts`), so that a test can
hand the loop a double of any one of them.

Each protocol lists only what its callers use; the production classes satisfy them
structurally (no inheritance): :class:`CacheView` — :class:`~gangplan.adapters.serve.cache.Cache`;
:class:`SnapshotSource` — :class:`~gangplan.adapters.serve.snapshot.LiveSnapshot`;
:class:`Binder` — :class:`~gangplan.adapters.serve.apply.Applier`; :class:`Evicting` —
:class:`~gangplan.adapters.serve.evict.Evictor`; :class:`EventSink` —
:class:`~gangplan.adapters.serve.status.Recorder`; :class:`Guard` —
:class:`~gangplan.adapters.serve.watchdog.Watchdog`; :class:`Dispatching` —
:class:`~gangplan.adapters.serve.dispatch.Dispatcher`; :class:`Elector` —
:class:`~gangplan.adapters.serve.leader.LeaseElector` and ``AlwaysLeader``. The ledger
(:class:`~gangplan.adapters.serve.ledger.Ledger`) and the metrics
(:class:`~gangplan.adapters.serve.metrics.Metrics`) are values held in memory, used as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from gangplan.adapters.serve.api import ApiError, Obj
from gangplan.adapters.serve.apply import Outcome
from gangplan.adapters.serve.cache import ObjKey
from gangplan.adapters.serve.evict import EvictOutcome
from gangplan.adapters.serve.ledger import InFlight
from gangplan.adapters.serve.report import CycleReport
from gangplan.adapters.serve.snapshot import Built, PodRef
from gangplan.adapters.serve.status import Lookup
from gangplan.models import Plan, PodPlacement, Snapshot

__all__ = [
    "Binder",
    "CacheView",
    "Dispatching",
    "Elector",
    "EventSink",
    "Evicting",
    "Guard",
    "SnapshotSource",
]


class CacheView(Protocol):
    """The watched objects (read under :meth:`locked`) and their informers' state."""

    @property
    def synced(self) -> bool: ...

    def pump(self) -> int: ...

    def locked(self) -> AbstractContextManager[None]: ...

    def objects(self, key: str) -> dict[ObjKey, Obj]: ...

    def get(self, key: str, ns: str, name: str) -> Obj | None: ...

    def list_errors(self) -> list[tuple[str, ApiError]]: ...

    def require_synced(self) -> None: ...

    def start(self, watch_timeout_s: float = ...) -> None: ...

    def stop(self) -> None: ...


class SnapshotSource(Protocol):
    """The snapshot of the cache, with the ledger's pods held and assumed."""

    def build(
        self,
        *,
        held: Iterable[ObjKey] = ...,
        held_gangs: Iterable[str] = ...,
        assumed: Mapping[ObjKey, PodPlacement] | None = ...,
    ) -> Built: ...

    def complete(self, waiting: Mapping[str, int]) -> list[str]: ...


class Binder(Protocol):
    """Applies a gang's plan pod by pod, takes a gang back, evicts one pod; in dry-run mode
    records the requests it would send (``requests``, as Kubernetes bodies)."""

    @property
    def dry_run(self) -> bool: ...

    @property
    def mode(self) -> str: ...

    @property
    def gate(self) -> str: ...

    @property
    def requests(self) -> list[Obj]: ...

    def apply(
        self,
        flight: InFlight,
        snap: Snapshot,
        refs: dict[str, PodRef],
        hostnames: dict[str, str],
        now: float,
    ) -> Outcome: ...

    def take_back(self, flight: InFlight, pods: dict[str, Obj | None]) -> Outcome: ...

    def evict(self, ns: str, name: str, uid: str | None) -> None: ...


class Evicting(Protocol):
    """Evicts running pods together (PodDisruptionBudgets counted first)."""

    def together(self, victims: Sequence[tuple[str, str, str | None]]) -> EvictOutcome: ...


class EventSink(Protocol):
    """Events and status in the words users read (every wording lives in the recorder)."""

    def prune(self) -> None: ...

    def scheduled(self, pod: Obj, node: str, gang: str) -> bool: ...

    def taken_back(self, pods: Iterable[Obj], gang: str, delay_s: float, why: str) -> None: ...

    def preemption_stopped(self, pods: Iterable[Obj], gang: str, what: str) -> None: ...

    def recovered_refused(self, pods: Iterable[Obj], gang: str, why: str) -> str: ...

    def plan_status(self, plan: Plan, built: Built, lookup: Lookup) -> dict[str, int]: ...


class Guard(Protocol):
    """The watchdog: confirms, finishes and takes back the gangs in flight."""

    def reconcile(self, report: CycleReport, now: float) -> None: ...

    def take_back(self, flight: InFlight, why: str, report: CycleReport, now: float) -> None: ...

    def held_gangs(self, now: float) -> set[str]: ...


class Dispatching(Protocol):
    """Applies a plan's new gangs, and what is left of the gangs in flight."""

    def admit(self, plan: Plan, built: Built, report: CycleReport, now: float) -> None: ...

    def resume(self, built: Built, report: CycleReport, now: float) -> None: ...


class Elector(Protocol):
    """Leader election: ``tick`` tries to acquire or renew; ``leading`` says whether it
    still leads now."""

    identity: str

    def tick(self) -> bool: ...

    @property
    def leading(self) -> bool: ...
