"""Dispatch: the plan's admitted gangs onto the cluster, and what is left of the gangs in flight.

:meth:`Dispatcher.admit`, per gang the plan admits, in the plan's order:

1. with preemption, its **victims** (``Plan.evictions`` for it) are evicted together
   (:class:`~gangplan.adapters.serve.evict.Evictor`); if not all go, the gang is not applied
   this cycle (a note, and ``PreemptionStopped`` on its pods);
2. it enters the **ledger** as a gang in flight (its room held in the next snapshots;
   not in dry-run mode), with its pods' UIDs as planned;
3. it is **applied** (:class:`~gangplan.adapters.serve.apply.Applier`), unless it waits for
   its victims to be gone.

:meth:`Dispatcher.resume` applies the gangs in flight planned in earlier cycles whose pods are
not all applied (an API failure left them, or their victims are gone now). An apply that
finds the gang broken (a pod gone or recreated, bound by someone else) has the watchdog take
it back (:meth:`~gangplan.adapters.serve.watchdog.Watchdog.take_back`). Every API failure is
a note and a count in the report; nothing here raises for the API.
"""

from __future__ import annotations

import time

from gangplan.adapters.serve.contracts import Binder, CacheView, EventSink, Evicting, Guard
from gangplan.adapters.serve.ledger import InFlight, Ledger
from gangplan.adapters.serve.metrics import Metrics
from gangplan.adapters.serve.report import CycleReport
from gangplan.adapters.serve.snapshot import Built, PodRef, pod_ref
from gangplan.models import Plan

__all__ = ["Dispatcher"]


class Dispatcher:
    """The dispatch step of one loop (module docstring). ``dry_run``: nothing enters the
    ledger (the applier records its requests instead of sending them)."""

    def __init__(
        self,
        cache: CacheView,
        ledger: Ledger,
        applier: Binder,
        evictor: Evicting,
        recorder: EventSink,
        metrics: Metrics,
        watchdog: Guard,
        *,
        dry_run: bool,
    ):
        self.cache = cache
        self.ledger = ledger
        self.applier = applier
        self.evictor = evictor
        self.recorder = recorder
        self.metrics = metrics
        self.watchdog = watchdog
        self.dry_run = dry_run

    def admit(self, plan: Plan, built: Built, report: CycleReport, now: float) -> None:
        """Evict for, hold and apply every gang ``plan`` admits (module docstring)."""
        for outcome in plan.gangs:
            if not outcome.admitted:
                continue
            placements = {p.pod: p for p in plan.pods_of(outcome.key)}
            flight = InFlight(outcome.key, outcome.namespace, now, placements)
            if not self._evict_for(plan, flight, report):
                continue
            for name in placements:
                ref = built.pods.get((outcome.namespace, name))
                if ref is not None:
                    flight.uids[name] = ref.uid
            report.admitted.append(outcome.key)
            self.metrics.attempts.labels(result="scheduled").inc()
            if not self.dry_run:
                self.ledger.add(flight)
            if flight.victims:
                continue  # its room is held; it is applied once the victims are gone
            refs = {n: r for (ns, n), r in built.pods.items() if ns == outcome.namespace}
            self._apply(flight, built, refs, report, now)

    def resume(self, built: Built, report: CycleReport, now: float) -> None:
        """Apply what is left of the gangs in flight planned in earlier cycles."""
        for flight in list(self.ledger.gangs.values()):
            if flight.taking_back or len(flight.applied) == len(flight.placements):
                continue
            if flight.key in report.admitted:
                continue
            if flight.victims and not self._victims_gone(flight):
                continue
            refs = {}
            for name in flight.placements:
                raw = self.cache.get("pods", flight.namespace, name)
                if raw is not None:
                    refs[name] = pod_ref(raw)
            self._apply(flight, built, refs, report, now)

    def _evict_for(self, plan: Plan, flight: InFlight, report: CycleReport) -> bool:
        """Evict the victims ``plan`` names for the flight's gang, together; False: not all
        went, so the gang is not applied this cycle. The evicted pods the cache still shows
        are the flight's ``victims``."""
        mine = [e for e in plan.evictions if e.for_gang == flight.key]
        if not mine:
            return True
        victims = []
        for e in mine:
            raw = self.cache.get("pods", e.namespace, e.pod)
            uid = (raw.get("metadata") or {}).get("uid") if raw is not None else None
            victims.append((e.namespace, e.pod, uid))
        out = self.evictor.together(victims)
        report.notes.append(f"{flight.key}: preemption: {out.message()}")
        if not out.complete:
            self.metrics.attempts.labels(result="error").inc()
            pods = [self.cache.get("pods", flight.namespace, n) for n in flight.placements]
            self.recorder.preemption_stopped(
                [p for p in pods if p is not None], flight.key, out.message()
            )
            return False
        flight.victims = {(ns, n) for ns, n, _uid in victims}
        return True

    def _victims_gone(self, flight: InFlight) -> bool:
        """Drop the victims the cache no longer shows; True when none is left."""
        flight.victims = {
            (ns, n) for ns, n in flight.victims if self.cache.get("pods", ns, n) is not None
        }
        return not flight.victims

    def _apply(
        self,
        flight: InFlight,
        built: Built,
        refs: dict[str, PodRef],
        report: CycleReport,
        now: float,
    ) -> None:
        t = time.perf_counter()
        out = self.applier.apply(flight, built.snapshot, refs, built.hostnames, now)
        report.applied += len(out.done)
        self.metrics.binds.inc(len(out.done))
        self.metrics.bind_failures.inc(len(out.failed))
        report.add_failed(flight.key, "", out.failed)
        result = "error" if out.failed else "scheduled"
        self.metrics.attempt_seconds.labels(result=result).observe(time.perf_counter() - t)
        for name in out.done:
            raw = self.cache.get("pods", flight.namespace, name)
            if raw is not None:
                self.recorder.scheduled(raw, flight.placements[name].node, flight.key)
        if out.broken and not self.dry_run:
            self.watchdog.take_back(flight, out.broken, report, now)
