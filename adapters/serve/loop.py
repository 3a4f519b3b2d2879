"""The live loop: a reconciler in the controller-runtime sense. A cycle every ``period`` (sooner
when a waiting gang becomes complete), each one short step after the other, each step handing
its work to a part (:class:`~gangplan.adapters.serve.parts.LoopParts`):

1. **lead**: only the replica holding the Lease acts (the elector:
   :mod:`~gangplan.adapters.serve.leader`); on becoming leader it first rebuilds the ledger
   from the cluster (:func:`~gangplan.adapters.serve.ledger.recover`);
2. **reconcile** the gangs in flight with the cache: confirmed, done, or taken back whole
   (the watchdog: :mod:`~gangplan.adapters.serve.watchdog`);
3. **snapshot** the cache (:class:`~gangplan.adapters.serve.snapshot.LiveSnapshot`): the
   pods in flight held where planned, the gangs backing off left out;
4. **solve** with ``solve_cycle`` (the previous plan given); a plan the independent verifier
   refuses is not applied;
5. **dispatch** the new gangs and what is left of those in flight (victims evicted first,
   then the applier: :mod:`~gangplan.adapters.serve.dispatch`); every API failure — 409, 429,
   5xx, a timeout — leaves the gang in flight for the next cycle (or takes it back when it
   cannot go on); the loop never raises for the API;
6. **report**: gang and pod status and Events (the recorder:
   :mod:`~gangplan.adapters.serve.status`), metrics, one JSON log line
   (:mod:`~gangplan.adapters.serve.report`).

A pod is never bound twice: it is applied at most once per plan (the ledger records it), a
bound pod is never planned (it is running), and a Binding answered 409 is read back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from gangplan.adapters.serve.api import KubeApi
from gangplan.adapters.serve.clock import Clock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.contracts import Elector
from gangplan.adapters.serve.ledger import recover
from gangplan.adapters.serve.metrics import Metrics
from gangplan.adapters.serve.parts import LoopParts, watched_kinds
from gangplan.adapters.serve.recovery import vet_recovered
from gangplan.adapters.serve.report import CycleReport, list_notes
from gangplan.adapters.serve.snapshot import ANN_PLAN, Built
from gangplan.models import Plan, Snapshot
from gangplan.solver.cycle import solve_cycle
from gangplan.solver.judges.placeable import placeable_gpus
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import SolverConfig

__all__ = ["CycleReport", "Elector", "ServeLoop", "watched_kinds"]

log = logging.getLogger("gangplan.serve")


class ServeLoop:
    """The loop of one replica (see the module docstring).

    ``parts``: what it acts through (default :meth:`LoopParts.build
    <gangplan.adapters.serve.parts.LoopParts.build>` with ``clock``, ``elector``, ``metrics``
    and ``identity``, which are ignored when ``parts`` is given); the parts are its
    attributes of the same names. ``solver``: the cycle's solver options (default:
    ``time_limit_s`` and ``workers`` of the configuration); ``emit``: where the JSON line of
    each cycle goes (default: the ``gangplan.serve`` logger).
    """

    def __init__(
        self,
        api: KubeApi,
        config: ServeConfig,
        *,
        parts: LoopParts | None = None,
        clock: Clock | None = None,
        elector: Elector | None = None,
        solver: SolverConfig | None = None,
        metrics: Metrics | None = None,
        emit: Callable[[str], None] | None = None,
        identity: str = "gangplan",
    ):
        p = parts or LoopParts.build(
            config, api, clock=clock, elector=elector, identity=identity, metrics=metrics
        )
        self.api, self.config = api, config
        self.clock, self.elector, self.cache, self.live = p.clock, p.elector, p.cache, p.live
        self.ledger, self.recorder, self.applier = p.ledger, p.recorder, p.applier
        self.evictor, self.watchdog, self.dispatcher = p.evictor, p.watchdog, p.dispatcher
        self.metrics = p.metrics
        self.solver = solver or SolverConfig(
            time_limit_s=config.time_limit_s, num_workers=config.workers
        )
        self.emit = emit or log.info
        self.previous: Plan | None = None
        self.recovered = False
        self.cycles = 0
        self.last: CycleReport | None = None
        self.last_built: Built | None = None
        self.waiting: dict[str, int] = {}
        self.threaded = False

    # ------------------------------------------------------------------ running

    def run(
        self, *, cycles: int | None = None, should_stop: Callable[[], bool] | None = None
    ) -> None:
        """Cycle until ``should_stop()`` (or ``cycles`` cycles): each ``period`` apart, or
        sooner when a waiting gang has its pods.

        Never raises for one cycle: an exception a cycle raises (a bug, an object nothing
        validated) is logged at error level with its traceback, counted in
        ``gangplan_cycle_errors_total``, and the next cycle runs as usual (a crash would
        only restart the process into the same cycle). ``KeyboardInterrupt`` and
        ``SystemExit`` still end it."""
        stop = should_stop or (lambda: False)
        n = 0
        while not stop() and (cycles is None or n < cycles):
            started = self.clock.now()
            try:
                self.cycle()
            except Exception:
                self.metrics.cycle_errors.inc()
                log.exception("cycle %d failed; the loop goes on", self.cycles)
            n += 1
            if (cycles is not None and n >= cycles) or not self._wait(started, stop):
                break

    def _wait(self, started: float, stop: Callable[[], bool]) -> bool:
        """Until ``period`` after ``started``, or a waiting gang has its pods; False: stop."""
        while self.clock.now() - started < self.config.period_s:
            if stop():
                return False
            self.clock.sleep(min(0.2, self.config.period_s))
            if not self.threaded:
                self.cache.pump()
            with self.cache.locked():
                if self.live.complete(self.waiting):
                    break
        return True

    def cycle(self) -> CycleReport:
        """One cycle: lead -> reconcile -> snapshot -> solve -> dispatch -> report (module
        docstring). Never raises for the API or the plan."""
        t0 = time.perf_counter()
        self.cycles += 1
        report = CycleReport(self.cycles, False, at=self.clock.now())
        if not self._lead(report):
            return self._finish(report, t0)
        with self.cache.locked():
            self.watchdog.reconcile(report, report.at)
            built = self._snapshot(report)
        plan = self._solve(built.snapshot, report)
        self._dispatch(plan, built, report)
        self._report(plan, built, report)
        return self._finish(report, t0)

    # ------------------------------------------------------------------ steps

    def _lead(self, report: CycleReport) -> bool:
        """Tick the elector; True when this replica leads and the cache is synced (the
        ledger rebuilt first on becoming leader), else the report says why not."""
        if not self.threaded:
            self.cache.pump()
        report.leader = self.elector.tick()
        self.metrics.leader.set(1 if report.leader else 0)
        if not report.leader or not self.cache.synced:
            self.recovered = False
            report.status = "syncing" if report.leader else "follower"
            report.notes.extend(list_notes(self.cache.list_errors()))
            return False
        if not self.recovered:
            with self.cache.locked():
                self.recover(report)
        return True

    def recover(self, report: CycleReport) -> None:
        """Rebuild the ledger from the pods' plan annotations (a restart, a new leader);
        read under ``cache.locked()``."""
        pods = [
            raw
            for raw in self.cache.objects("pods").values()
            if ANN_PLAN in ((raw.get("metadata") or {}).get("annotations") or {})
        ]
        flights = recover(pods, self.config.mode, report.notes, now=self.clock.now())
        kept, dropped = vet_recovered(flights, self.live.build().snapshot) if flights else ([], [])
        self.ledger.reset(kept)
        report.notes += [f"recovered {f.key}: {len(f.applied)} pods applied" for f in kept]
        for flight, why in dropped:
            carriers = [
                self.cache.get("pods", flight.namespace, n) for n in sorted(flight.carriers)
            ]
            live = [raw for raw in carriers if raw is not None]
            report.notes.append(self.recorder.recovered_refused(live, flight.key, why))
        self.recovered = True

    def snapshot(self, now: float) -> Built:
        """The snapshot of the cache at ``now``: the ledger's pods held and assumed where
        planned, the gangs in flight or backing off left out; read under ``cache.locked()``."""
        return self.live.build(
            held=self.ledger.held(),
            held_gangs=self.watchdog.held_gangs(now),
            assumed=self.ledger.assumed(now, self.config.assume_ttl_s),
        )

    def _snapshot(self, report: CycleReport) -> Built:
        t = time.perf_counter()
        built = self.last_built = self.snapshot(report.at)
        report.snapshot_s = time.perf_counter() - t
        report.gangs = len(built.snapshot.gangs)
        self.metrics.snapshot_seconds.observe(report.snapshot_s)
        self.waiting = built.waiting
        return built

    def _solve(self, snap: Snapshot, report: CycleReport) -> Plan | None:
        """``solve_cycle`` on ``snap`` (made preemptive when configured); None: no gang, the
        solver raised, or the verifier refused its plan (a note says which)."""
        if not snap.gangs:
            return None
        if self.config.preemption:
            snap = snap.with_preemption()
        t = time.perf_counter()
        try:
            result = solve_cycle(snap, self.previous, self.solver)
        except Exception as err:  # the loop outlives a solver bug; the cycle is skipped
            report.notes.append(f"solve_cycle failed: {err!r}")
            return None
        report.solve_s, report.status = time.perf_counter() - t, result.status.value
        self.metrics.observe_solve(report.solve_s, result.plan)
        violations = verify(snap, result.plan)
        if violations:
            report.notes.append(f"plan refused by the verifier: {violations[0]}")
            return None
        self.previous = result.plan
        return result.plan

    def _dispatch(self, plan: Plan | None, built: Built, report: CycleReport) -> None:
        """The plan's new gangs, then what is left of those in flight (while leading)."""
        if plan is not None and self.elector.leading:
            self.dispatcher.admit(plan, built, report, report.at)
        if self.elector.leading:
            self.dispatcher.resume(built, report, report.at)

    def _report(self, plan: Plan | None, built: Built, report: CycleReport) -> None:
        """Status and Events of the plan's gangs (while leading), and the cycle's gauges."""
        if plan is not None and self.elector.leading:
            pending = self.recorder.plan_status(plan, built, self.cache.get)
            report.pending = sum(pending.values())
            self.metrics.attempts.labels(result="unschedulable").inc(report.pending)
            self.metrics.set_pending(pending, {})
        report.in_flight = len(self.ledger.gangs)
        self.metrics.in_flight.set(report.in_flight)
        self.metrics.set_pending({}, placeable_gpus(built.snapshot, plan))

    def _finish(self, report: CycleReport, t0: float) -> CycleReport:
        report.cycle_s = time.perf_counter() - t0
        self.metrics.cycle_seconds.observe(report.cycle_s)
        self.recorder.prune()
        self.last = report
        self.emit(report.line())
        return report

    # ------------------------------------------------------------------ views

    @property
    def ready(self) -> bool:
        """Synced with the cluster (``/readyz``)."""
        return self.cache.synced
