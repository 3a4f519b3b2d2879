"""The watchdog: each cycle it reconciles the gangs in flight with the cache — confirms, finishes
and **takes back whole** — and keeps the gangs taken back out of the next cycles.

Per gang in flight (:class:`~gangplan.adapters.serve.ledger.InFlight`), in the loop's
reconcile step:

* a pod the cache shows bound to its planned node is **confirmed**; a gang whose pods are all
  confirmed is **done** (it leaves the ledger, its back-off is forgotten);
* a gang **cannot go on** (:func:`why_broken`) when a pod was deleted, recreated (another
  UID), rejected by the kubelet (phase ``Failed``: ``OutOfgpu``,
  ``UnexpectedAdmissionError``, ...), or bound elsewhere, or a planned node is gone; it
  **times out** when not fully bound within ``bind_timeout``. Either way it is taken back
  whole (:meth:`Watchdog.take_back`): the applier removes what it applied
  (:meth:`~gangplan.adapters.serve.apply.Applier.take_back`), the recorder posts
  ``GangTakenBack`` on its pods, and the gang backs off (exponentially, capped:
  :class:`~gangplan.adapters.serve.ledger.Backoff`);
* a gang being taken back is retried each cycle until nothing of it is left, then leaves the
  ledger;
* assumed pods past ``assume_ttl`` are counted once (``gangplan_assumed_expired_total``).

Only the leader removes anything (the elector's ``leading``, asked before each removal).
"""

from __future__ import annotations

from gangplan.adapters.serve.api import Obj
from gangplan.adapters.serve.cache import ObjKey
from gangplan.adapters.serve.contracts import Binder, CacheView, Elector, EventSink
from gangplan.adapters.serve.ledger import Backoff, InFlight, Ledger
from gangplan.adapters.serve.metrics import Metrics
from gangplan.adapters.serve.report import CycleReport

__all__ = ["Watchdog", "why_broken"]


class Watchdog:
    """The take-backs of one loop (module docstring). ``bind_timeout_s``: how long a gang
    may take to be bound whole; ``assume_ttl_s``: how long an applied pod counts as running
    unseen; ``backoff``: the delays of the gangs taken back."""

    def __init__(
        self,
        cache: CacheView,
        ledger: Ledger,
        applier: Binder,
        recorder: EventSink,
        metrics: Metrics,
        elector: Elector,
        *,
        backoff: Backoff,
        bind_timeout_s: float,
        assume_ttl_s: float,
    ):
        self.cache = cache
        self.ledger = ledger
        self.applier = applier
        self.recorder = recorder
        self.metrics = metrics
        self.elector = elector
        self.backoff = backoff
        self.bind_timeout_s = bind_timeout_s
        self.assume_ttl_s = assume_ttl_s

    def reconcile(self, report: CycleReport, now: float) -> None:
        """Confirm, finish and take back the gangs in flight (module docstring); fills
        ``report.done``, ``taken_back``, ``failures`` and ``expired``."""
        nodes = self.cache.objects("nodes")
        for key, flight in list(self.ledger.gangs.items()):
            pods = self.pods_of(flight)
            if not flight.taking_back:
                why = why_broken(flight, pods, nodes)
                if flight.done:
                    self.ledger.remove(key)
                    self.backoff.succeed(key)
                    report.done.append(key)
                    continue
                timeout = not why and now - flight.started > self.bind_timeout_s
                if timeout:
                    why = f"not fully bound within bind_timeout ({self.bind_timeout_s:g} s)"
                if why:
                    self._start(flight, pods, why, report, now, timeout)
            if flight.taking_back and self.elector.leading:
                out = self.applier.take_back(flight, pods)
                report.add_failed(key, "taking back", out.failed)
                if not flight.back:
                    self.ledger.remove(key)
        report.expired = len(self.ledger.expired(now, self.assume_ttl_s))
        if report.expired:
            self.metrics.expired.inc(report.expired)

    def take_back(self, flight: InFlight, why: str, report: CycleReport, now: float) -> None:
        """Take ``flight`` back whole now, for ``why`` (an apply that found it broken)."""
        self._start(flight, self.pods_of(flight), why, report, now, timeout=False)

    def held_gangs(self, now: float) -> set[str]:
        """The gangs not planned this cycle: those in flight and those backing off."""
        return set(self.ledger.gangs) | self.backoff.waiting(now)

    def pods_of(self, flight: InFlight) -> dict[str, Obj | None]:
        """The flight's pods as the cache shows them (None: gone)."""
        return {n: self.cache.get("pods", flight.namespace, n) for n in flight.placements}

    def _start(
        self,
        flight: InFlight,
        pods: dict[str, Obj | None],
        why: str,
        report: CycleReport,
        now: float,
        timeout: bool,
    ) -> None:
        self.metrics.takebacks.labels(reason="timeout" if timeout else "broken").inc()
        delay = self.backoff.fail(flight.key, now)
        flight.reason = why
        report.taken_back.append(f"{flight.key}: {why}")
        self.recorder.taken_back(
            [p for p in pods.values() if p is not None], flight.key, delay, why
        )
        if self.elector.leading:
            out = self.applier.take_back(flight, pods)
            report.add_failed(flight.key, "taking back", out.failed)


def why_broken(flight: InFlight, pods: dict[str, Obj | None], nodes: dict[ObjKey, Obj]) -> str:
    """Why ``flight`` cannot go on as planned ("" if it can), its pods first in name order:
    deleted, recreated, rejected, bound elsewhere, its node gone. Marks the pods the cache
    shows bound to their planned node as confirmed."""
    for name, p in sorted(flight.placements.items()):
        raw = pods.get(name)
        who = f"pod {flight.namespace}/{name}"
        if raw is None:
            return f"{who} was deleted"
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        status = raw.get("status") or {}
        uid = flight.uids.get(name)
        if uid and meta.get("uid") != uid:
            return f"{who} was recreated"
        if status.get("phase") == "Failed":
            why = status.get("reason") or "Failed"
            return f"{who} was rejected on {p.node}: {why}: {status.get('message') or ''}".strip()
        node = spec.get("nodeName")
        if node == p.node:
            flight.confirmed.add(name)
        elif node:
            return f"{who} was bound to {node}, not {p.node}"
        elif ("", p.node) not in nodes:
            return f"node {p.node} is gone"
    return ""
