"""The live loop: a cycle every ``period`` (sooner when a waiting gang becomes complete):
snapshot from the cache -> ``solve_cycle`` (the previous plan given) -> apply.

One :meth:`ServeLoop.cycle`, in order:

1. **lead**: only the replica holding the Lease writes (:mod:`~gangplan.adapters.serve.leader`);
   on becoming leader it first rebuilds the ledger from the cluster
   (:func:`~gangplan.adapters.serve.ledger.recover`);
2. **reconcile** the gangs in flight with the cache: a pod seen bound to its planned node is
   confirmed; a gang whose pods are all confirmed is done; a gang that lost a pod (deleted,
   recreated, rejected by the kubelet — ``OutOfgpu``, ``UnexpectedAdmissionError``: phase
   Failed — or bound elsewhere), lost its node, or is not fully bound within
   ``bind_timeout`` is **taken back whole** and backs off (exponentially, capped), with a
   ``GangTakenBack`` Event on its pods;
3. **snapshot** (:class:`~gangplan.adapters.serve.snapshot.LiveSnapshot`): the pods in flight
   are held where planned, gangs backing off are left out;
4. **solve** with ``solve_cycle``; a plan the independent verifier refuses is not applied;
5. **apply** the new gangs and what is left of those in flight (with ``preemption: true``, a
   gang's victims first, together, through the Eviction API; the gang then waits in the
   ledger until they are gone)
   (:class:`~gangplan.adapters.serve.apply.Applier`); every API failure — 409, 429, 5xx, a
   timeout — leaves the gang in flight for the next cycle (or takes it back when it cannot
   go on); the loop never raises for the API;
6. **status**: Events, ``PodScheduled``, PodGroup status (:mod:`~gangplan.adapters.serve.status`);
   metrics; one JSON log line.

A pod is never bound twice: it is applied at most once per plan (the ledger records it), a
bound pod is never planned (it is running), and a Binding answered 409 is read back.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from gangplan.adapters.kube.options import KubeOptions
from gangplan.adapters.serve.api import KINDS, ApiError, Kind, KubeApi, Obj
from gangplan.adapters.serve.apply import Applier
from gangplan.adapters.serve.cache import Cache, ObjKey
from gangplan.adapters.serve.clock import Clock, SystemClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.leader import AlwaysLeader
from gangplan.adapters.serve.ledger import Backoff, InFlight, Ledger, recover
from gangplan.adapters.serve.metrics import Metrics
from gangplan.adapters.serve.recovery import vet_recovered
from gangplan.adapters.serve.snapshot import ANN_PLAN, Built, LiveSnapshot, Selection, pod_ref
from gangplan.adapters.serve.status import Recorder
from gangplan.models import Plan, Snapshot
from gangplan.solver.cycle import solve_cycle
from gangplan.solver.judges.placeable import placeable_gpus
from gangplan.solver.result import SolverConfig

__all__ = ["CycleReport", "Elector", "ServeLoop", "watched_kinds"]

log = logging.getLogger("gangplan.serve")
PODS = KINDS["pods"]
REJECTED = ("OutOfgpu", "UnexpectedAdmissionError")


class Elector(Protocol):
    identity: str

    def tick(self) -> bool: ...

    @property
    def leading(self) -> bool: ...


def watched_kinds(config: ServeConfig) -> list[Kind]:
    """The kinds the cache watches: always nodes, pods, PriorityClasses, every PodGroup
    flavour, Workloads, HyperNodes, Kueue Topologies and ResourceFlavors, Koordinator
    Devices; the queue objects of ``queue_source``."""
    keys = [
        "pods",
        "nodes",
        "priorityclasses.scheduling.k8s.io",
        "podgroups.scheduling.volcano.sh",
        "podgroups.scheduling.x-k8s.io",
        "podgroups.scheduling.sigs.k8s.io",
        "podgroups.scheduling.k8s.io",
        "workloads.scheduling.k8s.io",
        "hypernodes.topology.volcano.sh",
        "topologies.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io",
        "devices.scheduling.koordinator.sh",
    ]
    keys += {
        "volcano": ["queues.scheduling.volcano.sh"],
        "kueue": ["clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io"],
        "elasticquota": ["elasticquotas.scheduling.x-k8s.io"],
        "none": [],
    }[config.queue_source]
    return [KINDS[k] for k in keys]


@dataclass
class CycleReport:
    """One cycle's numbers (the JSON log line)."""

    cycle: int
    leader: bool
    at: float = 0.0
    gangs: int = 0
    admitted: list[str] = field(default_factory=list)
    pending: int = 0
    applied: int = 0
    failures: int = 0
    failed: list[str] = field(default_factory=list)
    """each failed request: ``gang: pod: the API's answer`` (applying, or taking back)"""
    done: list[str] = field(default_factory=list)
    taken_back: list[str] = field(default_factory=list)
    expired: int = 0
    in_flight: int = 0
    snapshot_s: float = 0.0
    solve_s: float = 0.0
    cycle_s: float = 0.0
    status: str = ""
    notes: list[str] = field(default_factory=list)


class ServeLoop:
    """The loop of one replica (see the module docstring).

    ``solver``: the cycle's solver options (default: ``time_limit_s`` and ``workers`` of the
    configuration); ``elector``: leader election (default: always leader); ``emit``: where
    the JSON line of each cycle goes (default: the ``gangplan.serve`` logger).
    """

    def __init__(
        self,
        api: KubeApi,
        config: ServeConfig,
        *,
        clock: Clock | None = None,
        elector: Elector | None = None,
        solver: SolverConfig | None = None,
        metrics: Metrics | None = None,
        emit: Callable[[str], None] | None = None,
        identity: str = "gangplan",
    ):
        self.api = api
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.elector: Elector = elector or AlwaysLeader()
        self.solver = solver or SolverConfig(
            time_limit_s=config.time_limit_s, num_workers=config.workers
        )
        self.metrics = metrics or Metrics()
        self.emit = emit or log.info
        self.selection = Selection(
            mode=config.mode, scheduler_name=config.scheduler_name, namespaces=config.namespaces
        )
        self.live = LiveSnapshot(
            KubeOptions(
                topology_labels=config.topology_labels,
                device_layout=config.device_layout,
                gpu_resource=config.gpu_resource,
                nic_resource=config.nic_resource,
                default_queue=config.default_queue,
            ),
            self.selection,
        )
        self.cache = Cache(api, watched_kinds(config), self.live.on_change, clock=self.clock)
        self.ledger = Ledger()
        self.backoff = Backoff(config.backoff_initial_s, config.backoff_max_s)
        self.applier = Applier(api, config.mode, dry_run=config.dry_run)
        self.recorder = Recorder(
            api,
            self.clock,
            controller=f"gangplan.io/{config.scheduler_name}",
            instance=identity,
            interval_s=config.event_interval_s,
            dry_run=config.dry_run,
        )
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
        n = 0
        while not (should_stop and should_stop()) and (cycles is None or n < cycles):
            started = self.clock.now()
            try:
                self.cycle()
            except Exception:
                self.metrics.cycle_errors.inc()
                log.exception("cycle %d failed; the loop goes on", self.cycles)
            n += 1
            if cycles is not None and n >= cycles:
                break
            while self.clock.now() - started < self.config.period_s:
                if should_stop and should_stop():
                    return
                self.clock.sleep(min(0.2, self.config.period_s))
                if not self.threaded:
                    self.cache.pump()
                with self.cache.locked():
                    if self.live.complete(self.waiting):
                        break

    def cycle(self) -> CycleReport:
        """One cycle (module docstring). Never raises for the API or the plan."""
        t0 = time.perf_counter()
        self.cycles += 1
        now = self.clock.now()
        report = CycleReport(self.cycles, False, at=now)
        if not self.threaded:
            self.cache.pump()
        leading = self.elector.tick()
        self.metrics.leader.set(1 if leading else 0)
        report.leader = leading
        if not leading or not self.cache.synced:
            self.recovered = False
            report.status = "follower" if not leading else "syncing"
            report.notes.extend(_list_notes(self.cache.list_errors()))
            return self._finish(report, t0)
        with self.cache.locked():
            if not self.recovered:
                self._recover(report)
            self._reconcile(report, now)
            t1 = time.perf_counter()
            built = self.live.build(
                held=self.ledger.held(),
                held_gangs=set(self.ledger.gangs) | self.backoff.waiting(now),
                assumed=self.ledger.assumed(now, self.config.assume_ttl_s),
            )
            report.snapshot_s = time.perf_counter() - t1
        self.last_built = built
        self.waiting = built.waiting
        self.metrics.snapshot_seconds.observe(report.snapshot_s)
        snap = built.snapshot
        report.gangs = len(snap.gangs)
        plan = self._solve(snap, report)
        if plan is not None and self.elector.leading:
            self._apply_new(plan, built, report, now)
        if self.elector.leading:
            self._continue(built, report, now)
            if plan is not None:
                self._status(plan, built, report)
        report.in_flight = len(self.ledger.gangs)
        self.metrics.in_flight.set(report.in_flight)
        self._placeable(snap, plan)
        return self._finish(report, t0)

    def _finish(self, report: CycleReport, t0: float) -> CycleReport:
        report.cycle_s = time.perf_counter() - t0
        self.metrics.cycle_seconds.observe(report.cycle_s)
        self.recorder.prune()
        self.last = report
        self.emit(json.dumps({"msg": "cycle", **asdict(report)}, separators=(",", ":")))
        return report

    # ------------------------------------------------------------------ steps

    def _recover(self, report: CycleReport) -> None:
        """Rebuild the ledger from the pods' plan annotations (a restart, a new leader)."""
        pods = [
            raw
            for raw in self.cache.objects("pods").values()
            if ANN_PLAN in ((raw.get("metadata") or {}).get("annotations") or {})
        ]
        self.ledger = Ledger()
        flights = recover(pods, self.config.mode, report.notes, now=self.clock.now())
        kept, dropped = vet_recovered(flights, self.live.build().snapshot) if flights else ([], [])
        for flight in kept:
            self.ledger.add(flight)
            report.notes.append(f"recovered {flight.key}: {len(flight.applied)} pods applied")
        for flight, why in dropped:
            note = f"recovered plan of gang {flight.key} dropped: {why}"
            report.notes.append(note)
            for name in sorted(flight.carriers):
                raw = self.cache.get("pods", flight.namespace, name)
                if raw is not None:
                    self.recorder.event(raw, "Warning", "RecoveredPlanRefused", "Scheduling", note)
        self.recovered = True

    def _pods_of(self, flight: InFlight) -> dict[str, Obj | None]:
        return {n: self.cache.get("pods", flight.namespace, n) for n in flight.placements}

    def _reconcile(self, report: CycleReport, now: float) -> None:
        nodes = self.cache.objects("nodes")
        for key, flight in list(self.ledger.gangs.items()):
            pods = self._pods_of(flight)
            if not flight.taking_back:
                why = self._broken(flight, pods, nodes)
                if not why and now - flight.started > self.config.bind_timeout_s:
                    why = f"not fully bound within bind_timeout ({self.config.bind_timeout_s:g} s)"
                    self.metrics.takebacks.labels(reason="timeout").inc()
                elif why:
                    self.metrics.takebacks.labels(reason="broken").inc()
                if flight.done:
                    self.ledger.remove(key)
                    self.backoff.succeed(key)
                    report.done.append(key)
                    continue
                if why:
                    self._start_take_back(flight, pods, why, report, now)
            if flight.taking_back and self.elector.leading:
                out = self.applier.take_back(flight, pods)
                _failed(report, flight.key, "taking back", out.failed)
                if not flight.back:
                    self.ledger.remove(key)
        report.expired = len(self.ledger.expired(now, self.config.assume_ttl_s))
        if report.expired:
            self.metrics.expired.inc(report.expired)

    def _broken(
        self, flight: InFlight, pods: dict[str, Obj | None], nodes: dict[ObjKey, Obj]
    ) -> str:
        """Why ``flight`` cannot go on as planned ("" if it can); marks confirmed pods."""
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
                return (
                    f"{who} was rejected on {p.node}: {why}: {status.get('message') or ''}".strip()
                )
            node = spec.get("nodeName")
            if node == p.node:
                flight.confirmed.add(name)
            elif node:
                return f"{who} was bound to {node}, not {p.node}"
            elif ("", p.node) not in nodes:
                return f"node {p.node} is gone"
        return ""

    def _start_take_back(
        self,
        flight: InFlight,
        pods: dict[str, Obj | None],
        why: str,
        report: CycleReport,
        now: float,
    ) -> None:
        delay = self.backoff.fail(flight.key, now)
        flight.reason = why
        report.taken_back.append(f"{flight.key}: {why}")
        note = f"gang {flight.key} taken back whole and re-planned (back-off {delay:g} s): {why}"
        for raw in pods.values():
            if raw is not None:
                self.recorder.event(raw, "Warning", "GangTakenBack", "Scheduling", note)
        if self.elector.leading:
            out = self.applier.take_back(flight, pods)
            _failed(report, flight.key, "taking back", out.failed)

    def _solve(self, snap: Snapshot, report: CycleReport) -> Plan | None:
        from gangplan.solver.judges.verify import verify

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
        report.solve_s = time.perf_counter() - t
        report.status = result.status.value
        self.metrics.solve_seconds.observe(report.solve_s)
        gaps = [t.gap for t in (result.plan.summary.tiers if result.plan.summary else ()) if t.gap]
        self.metrics.gap.set(gaps[0] if gaps else 0.0)
        violations = verify(snap, result.plan)
        if violations:
            report.notes.append(f"plan refused by the verifier: {violations[0]}")
            return None
        self.previous = result.plan
        return result.plan

    def _apply_new(self, plan: Plan, built: Built, report: CycleReport, now: float) -> None:
        for outcome in plan.gangs:
            if not outcome.admitted:
                continue
            placements = {p.pod: p for p in plan.pods_of(outcome.key)}
            flight = InFlight(outcome.key, outcome.namespace, now, placements)
            if not self._evict_for(plan, outcome.key, flight, report):
                continue
            for name in placements:
                ref = built.pods.get((outcome.namespace, name))
                if ref is not None:
                    flight.uids[name] = ref.uid
            report.admitted.append(outcome.key)
            self.metrics.attempts.labels(result="scheduled").inc()
            if not self.config.dry_run:
                self.ledger.add(flight)
            if flight.victims:
                continue  # its room is held; it is applied once the victims are gone
            refs = {n: r for (ns, n), r in built.pods.items() if ns == outcome.namespace}
            self._apply(flight, built, refs, report, now)

    def _evict_for(self, plan: Plan, key: str, flight: InFlight, report: CycleReport) -> bool:
        """Evict the victims ``plan`` names for gang ``key``, together
        (:func:`~gangplan.adapters.serve.evict.evict_together`); False: not all went, so
        the gang is not applied this cycle (a note and a ``PreemptionStopped`` Event on its
        pods say what happened). The evicted pods the cache still shows are the flight's
        ``victims``."""
        from gangplan.adapters.serve.evict import evict_together

        mine = [e for e in plan.evictions if e.for_gang == key]
        if not mine:
            return True
        victims = []
        for e in mine:
            raw = self.cache.get("pods", e.namespace, e.pod)
            uid = (raw.get("metadata") or {}).get("uid") if raw is not None else None
            victims.append((e.namespace, e.pod, uid))
        out = evict_together(self.api, self.applier, victims)
        report.notes.append(f"{key}: preemption: {out.message()}")
        if not out.complete:
            self.metrics.attempts.labels(result="error").inc()
            for name in flight.placements:
                raw = self.cache.get("pods", flight.namespace, name)
                if raw is not None:
                    self.recorder.event(
                        raw,
                        "Warning",
                        "PreemptionStopped",
                        "Preempting",
                        f"gangplan stopped preempting for gang {key}: {out.message()}",
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

    def _continue(self, built: Built, report: CycleReport, now: float) -> None:
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

    def _apply(
        self, flight: InFlight, built: Built, refs: dict[str, Any], report: CycleReport, now: float
    ) -> None:
        t = time.perf_counter()
        out = self.applier.apply(flight, built.snapshot, refs, built.hostnames, now)
        report.applied += len(out.done)
        self.metrics.binds.inc(len(out.done))
        self.metrics.bind_failures.inc(len(out.failed))
        _failed(report, flight.key, "", out.failed)
        result = "error" if out.failed else "scheduled"
        self.metrics.attempt_seconds.labels(result=result).observe(time.perf_counter() - t)
        for name in out.done:
            raw = self.cache.get("pods", flight.namespace, name)
            if raw is not None:
                p = flight.placements[name]
                verb = "ungated and pinned to" if self.config.mode == "gate" else "bound to"
                self.recorder.event(
                    raw,
                    "Normal",
                    "Scheduled",
                    "Binding",
                    f"gangplan {verb} {p.node} (gang {flight.key})",
                )
        if out.broken and not self.config.dry_run:
            pods = self._pods_of(flight)
            self.metrics.takebacks.labels(reason="broken").inc()
            self._start_take_back(flight, pods, out.broken, report, now)

    def _status(self, plan: Plan, built: Built, report: CycleReport) -> None:
        per_queue: dict[str, int] = {}
        snap = built.snapshot
        for outcome in plan.gangs:
            gang = snap.gang_by_key.get(outcome.key)
            obj_ref = built.gang_objects.get(outcome.key)
            if obj_ref is not None:
                obj = self.cache.get(obj_ref[0], obj_ref[1], obj_ref[2])
                if obj is not None:
                    msg = (
                        ""
                        if outcome.admitted
                        else (outcome.reason.message if outcome.reason else "")
                    )
                    self.recorder.gang_status(obj_ref[0], obj, outcome.admitted, msg)
            if outcome.admitted or gang is None:
                continue
            report.pending += 1
            per_queue[gang.queue] = per_queue.get(gang.queue, 0) + 1
            self.metrics.attempts.labels(result="unschedulable").inc()
            reason = outcome.reason
            note = (
                f"gang {outcome.key}: {reason.kind}: {reason.message}" if reason else "not placed"
            )
            for role in gang.roles:
                for i in range(role.count):
                    raw = self.cache.get("pods", gang.namespace, role.pod_name(gang.name, i))
                    if raw is None:
                        continue
                    self.recorder.event(raw, "Warning", "FailedScheduling", "Scheduling", note)
                    if self.config.mode == "bind":
                        self.recorder.pod_unschedulable(raw, note)
        for q in snap.queues:
            per_queue.setdefault(q.name, 0)
        self.metrics.set_pending(per_queue, {})

    def _placeable(self, snap: Snapshot, plan: Plan | None) -> None:
        """``gangplan_queue_placeable_gpus``
        (:func:`~gangplan.solver.judges.placeable.placeable_gpus`)."""
        self.metrics.set_pending({}, placeable_gpus(snap, plan))

    # ------------------------------------------------------------------ views

    @property
    def ready(self) -> bool:
        """Synced with the cluster (``/readyz``)."""
        return self.cache.synced


def _failed(report: CycleReport, key: str, doing: str, failed: list[tuple[str, ApiError]]) -> None:
    """Count and name each failed request of gang ``key`` in ``report`` (its notes too)."""
    for name, err in failed:
        line = f"{key}: {name}: {doing + ': ' if doing else ''}{err}"
        report.failures += 1
        report.failed.append(line)
        report.notes.append(line)


def _list_notes(errors: list[tuple[str, ApiError]]) -> list[str]:
    """One readable note per distinct list failure of a cycle that waits for the cache:
    ``cannot reach the API server (why); 13 kinds not listed; retrying``."""
    by: dict[str, list[str]] = {}
    for key, err in errors:
        text = err.message or err.reason
        head = "cannot reach the API server" if err.status == 0 else f"cannot list ({err.status})"
        by.setdefault(f"{head}: {text}", []).append(key)
    out = []
    for head, keys in by.items():
        what = keys[0] if len(keys) == 1 else f"{keys[0]} and {len(keys) - 1} more kinds"
        out.append(f"{head}; {what} not listed; retrying")
    return out
