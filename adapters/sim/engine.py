"""The discrete-event loop of ``gangplan simulate``: simulated time, cycles every period.

**Time.** Seconds from the trace's zero. Cycles fall on the grid ``k x period``. A cycle at
time t sees every arrival and every departure at or before t: jobs that arrived are pending
gangs, jobs whose work is done have left (their pods gone at their exact end time).
A gang admitted at t starts at t and holds its pods until ``t + duration / rate``
(:mod:`gangplan.adapters.sim.speed`); capacity a job frees between two cycles is used at the
next one, as a periodic scheduler would.

**Which cycles run.** A cycle runs at a tick when gangs are pending and the cluster changed
since the previous cycle: a job arrived or left, or the previous cycle bound a gang. A
cycle on an unchanged cluster would see exactly what the previous one left, so ticks
without change are skipped (``skip_unchanged``; off: every tick with pending gangs runs,
and a test checks that both give the same run for greedy on the hand-worked trace). The
run ends when nothing is pending, running or still to arrive, or when pending gangs can
no longer change (nothing runs, nothing arrives), or at ``horizon_s``.

**State kept between cycles.** The static part of the cluster (nodes, levels, layouts,
queues: built once, in the seed's node order), the pending jobs (by arrival) and the
running pods per job; each cycle's :class:`~gangplan.models.Snapshot` is assembled from
them with ``model_construct`` (no validation; the pieces were validated once, and
``validate_snapshots`` re-validates every cycle's snapshot, for tests). The tuple of running
pods is rebuilt only after a bind or a departure.

**Never fits.** A gang the cycle reports as ``never_fits`` (not even on the empty cluster)
is dropped and recorded as such, so it does not wait forever.

**Seeds** (what a seed varies; ``docs/simulate.md``): seed 0 keeps the cluster's node
order; seed s > 0 permutes the nodes with ``random.Random(s)`` — every placer breaks ties
by node order, so the seed changes tie-breaking and so fragmentation and waits; CP-SAT's
random seed is s; with ``jitter_s`` > 0 each arrival moves later by a uniform draw in
``[0, jitter_s)`` of ``random.Random(s)`` (in trace order). The same input, config and seed
give the same run (wall times aside; CP-SAT only in deterministic mode).

**Reservations and elastic gangs.** Reservation with backfill (``reserve_after_s``) is the
cycle's own (:mod:`gangplan.solver.cycle.reservations`): the snapshot carries what it reads,
each pending gang's arrival (``Gang.creation_time``) and each running pod's expected end
(``RunningPod.expected_end``, from ``SimJob.expected_duration`` when ``estimates`` gives
one). Elastic gangs (``elastic``, :mod:`gangplan.adapters.sim.elastic`) grow through the
growth gangs each snapshot carries and shrink through the plan's evictions; a resize changes
the job's rate with :meth:`RunningJob.set_rate` (work conserved: the completion is
rescheduled from the work left).
"""

from __future__ import annotations

import gc
import heapq
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gangplan.adapters.sim.elastic import elastic_job, elastic_queue
from gangplan.adapters.sim.jobs import SimInput, SimJob
from gangplan.adapters.sim.placers import CycleInput, Placer, make_placer
from gangplan.adapters.sim.speed import Slowdown, SpeedModel, SpreadSpeed
from gangplan.models import (
    GPU_MILLI,
    Eviction,
    Gang,
    PodPlacement,
    PreemptionSettings,
    ReservationSettings,
    RunningPod,
    Snapshot,
    growth_gang,
)
from gangplan.solver.judges.fairness import fair_shares
from gangplan.solver.judges.metrics import jain_index
from gangplan.solver.judges.verify import verify

__all__ = [
    "CycleRecord",
    "JobRecord",
    "RunningJob",
    "ShareSample",
    "SimConfig",
    "SimResult",
    "Simulation",
    "SimulationError",
    "simulate",
]


class SimulationError(RuntimeError):
    """A placer returned a plan the verifier refuses (or another internal fault)."""


@dataclass(frozen=True)
class SimConfig:
    """How one run goes (every field is echoed in the report).

    ``placer``: a name of :data:`gangplan.solver.cycle.PLACERS`. ``period_s``: simulated
    seconds between cycles. ``seed``: see the module docstring. ``policy``: a name for the
    sweep axis of the options below it. ``slowdown``: the spread slowdown (off by default).
    ``time_limit_s`` / ``workers`` / ``deterministic`` / ``deterministic_time``: CP-SAT per
    cycle. ``jitter_s``: arrival jitter (0: off). ``verify``: check every plan with
    :func:`gangplan.solver.judges.verify.verify`. ``validate_snapshots``: build every cycle's
    snapshot with full validation. ``skip_unchanged``: skip ticks without change.
    ``horizon_s``: stop at this simulated time (None: when everything has run).
    ``reserve_after_s``: reservations with backfill for gangs pending longer than this
    (:mod:`gangplan.solver.cycle.reservations`; None: off). ``estimates``: what jobs declare as
    their expected duration — ``none`` (nothing: the traces record no estimate, so nothing
    is backfilled onto held capacity) or ``exact`` (the trace duration, a perfect estimate:
    an upper bound on what backfilling can do). ``elastic``: multi-GPU jobs are elastic
    gangs with a minimum of half their GPUs (:mod:`gangplan.adapters.sim.elastic`).
    """

    placer: str = "greedy"
    period_s: float = 60.0
    seed: int = 0
    policy: str = "default"
    slowdown: Slowdown = field(default_factory=Slowdown)
    time_limit_s: float = 1.0
    workers: int = 1
    deterministic: bool = False
    deterministic_time: float | None = None
    jitter_s: float = 0.0
    verify: bool = False
    validate_snapshots: bool = False
    skip_unchanged: bool = True
    horizon_s: float | None = None
    reserve_after_s: float | None = None
    estimates: str = "none"
    elastic: bool = False

    def __post_init__(self) -> None:
        if self.estimates not in ("none", "exact"):
            raise ValueError(f"estimates must be none or exact ({self.estimates!r})")
        if self.reserve_after_s is not None and not (
            self.reserve_after_s >= 0 and math.isfinite(self.reserve_after_s)
        ):
            raise ValueError(f"reserve_after must be finite and >= 0 ({self.reserve_after_s})")
        if not (self.period_s > 0 and math.isfinite(self.period_s)):
            raise ValueError(f"period must be a finite number of seconds > 0 ({self.period_s})")
        if self.jitter_s < 0 or not math.isfinite(self.jitter_s):
            raise ValueError(f"jitter must be finite and >= 0 ({self.jitter_s})")


@dataclass(frozen=True)
class JobRecord:
    """What happened to one job. ``status``: ``finished``, ``running`` (at the horizon),
    ``pending`` (never started), ``never_fits`` (dropped) or ``not_arrived`` (its arrival
    is after the horizon). Times in simulated s;
    ``wait`` = start - arrival, ``jct`` = end - arrival; ``leaves``/``spines`` its pods
    spanned and ``factor`` its duration multiplier (1 when not slowed)."""

    name: str
    queue: str
    gpus: int
    pods: int
    arrival: float
    duration: float
    row: int
    status: str
    start: float | None = None
    end: float | None = None
    leaves: int = 0
    spines: int = 0
    factor: float = 1.0
    min_pods: int | None = None
    """an elastic job's minimum (pods); None: not elastic"""
    max_pods: int = 0
    """the most pods it ran with at once"""
    resizes: int = 0
    """times it grew or shrank while running"""

    @property
    def wait(self) -> float | None:
        return None if self.start is None else self.start - self.arrival

    @property
    def jct(self) -> float | None:
        return None if self.end is None else self.end - self.arrival


@dataclass(frozen=True)
class CycleRecord:
    """One cycle: simulated time, the placer's wall time (s), pending gangs it saw, gangs
    it admitted, its status (``baseline``, ``optimal``, ``feasible``, ``incumbent``,
    ``fallback``), and GPUs held after it (whole GPUs)."""

    time: float
    wall_s: float
    pending: int
    admitted: int
    status: str
    busy_gpus: float
    reserved: int = 0
    """gangs holding a reservation in this cycle's plan"""


@dataclass(frozen=True)
class ShareSample:
    """A queue's dominant share after a cycle against its fair target there (ppm, from
    :func:`gangplan.solver.judges.fairness.fair_shares` on the cycle's snapshot): only queues with
    pending demand have a target."""

    time: float
    priority: int
    queue: str
    allocation_ppm: int
    target_ppm: int


@dataclass
class SimResult:
    """One run. ``utilisation``: (time, busy milli-GPU) at every change, from the first
    arrival; ``jain``: (time, Jain's index over the queues of positive fair target) after
    each cycle, None when fewer than two queues had one."""

    config: SimConfig
    trace: str
    cluster: str
    capacity_gpus: int
    nodes: int
    window: tuple[float, float] | None
    jobs: tuple[JobRecord, ...]
    cycles: tuple[CycleRecord, ...]
    utilisation: tuple[tuple[float, int], ...]
    shares: tuple[ShareSample, ...]
    jain: tuple[tuple[float, float | None], ...]
    end_time: float
    wall_time_s: float = 0.0

    @property
    def label(self) -> str:
        """``placer/policy/seed``: the run's name in reports."""
        return f"{self.config.placer}/{self.config.policy}/s{self.config.seed}"

    def outcome(self) -> tuple[Any, ...]:
        """Everything but wall-clock times (for comparing runs made in different places)."""
        cycles = tuple(replace(c, wall_s=0.0) for c in self.cycles)
        return (
            self.config,
            self.trace,
            self.capacity_gpus,
            self.jobs,
            cycles,
            self.utilisation,
            self.shares,
            self.jain,
            self.end_time,
        )


# --------------------------------------------------------------------------- running jobs


@dataclass
class RunningJob:
    """A bound job: its pods, where they are, and its progress. ``work_left`` (s of work at
    rate 1) is counted from ``since``; ``version`` invalidates a completion event that a
    rate change replaced."""

    job: SimJob
    start: float
    pods: tuple[RunningPod, ...]
    leaves: int
    spines: int
    rate: float
    work_left: float
    since: float
    version: int = 0
    roles: dict[str, str] = field(default_factory=dict)
    """pod name -> role name (elastic jobs grow and shrink by pod)"""

    @property
    def end(self) -> float:
        """When the work is done at the current rate."""
        if self.rate <= 0:
            return math.inf
        return self.since + self.work_left / self.rate

    def set_rate(self, now: float, rate: float) -> None:
        """Change the rate at ``now`` keeping the work done so far (elastic resizes)."""
        self.work_left = max(0.0, self.work_left - (now - self.since) * self.rate)
        self.since = now
        self.rate = rate
        self.version += 1


def _extent(snapshot: Snapshot, nodes: set[str]) -> tuple[int, int]:
    """(leaves, spines) the nodes span: the lowest level above the node and the one above
    it (a node missing a level is a domain of its own; no level: each node its own leaf)."""
    levels = snapshot.levels
    if not levels:
        return len(nodes), 1
    by_name = snapshot.node_by_name
    leaves: set[tuple[str, ...]] = set()
    spines: set[tuple[str, ...]] = set()
    for n in nodes:
        node = by_name[n]
        path = tuple(snapshot.domain_name(node, lv) or f"<{n}>" for lv in levels)
        leaves.add(path)
        spines.add(path[:-1] if len(levels) > 1 else ())
    return len(leaves), len(spines)


def _tick(t: float, period: float) -> float:
    """The first cycle time k x period at or after ``t``."""
    k = math.ceil(t / period)
    tick = k * period
    while tick < t:
        k += 1
        tick = k * period
    return tick


# --------------------------------------------------------------------------- simulation


@dataclass
class Simulation:
    """One run of ``inp`` under ``config`` (:meth:`run` once)."""

    inp: SimInput
    config: SimConfig
    placer: Placer | None = None
    speed: SpeedModel | None = None
    progress: Callable[[float, int, int], None] | None = None
    """called after each cycle with (time, pending, running)"""

    _static: dict[str, Any] = field(init=False, default_factory=dict)
    _pending: dict[str, SimJob] = field(init=False, default_factory=dict)
    _running: dict[str, RunningJob] = field(init=False, default_factory=dict)
    _pods: tuple[RunningPod, ...] | None = field(init=False, default=None)
    _events: list[tuple[float, int, str, int]] = field(init=False, default_factory=list)
    _records: dict[str, JobRecord] = field(init=False, default_factory=dict)
    _busy: int = field(init=False, default=0)
    _util: list[tuple[float, int]] = field(init=False, default_factory=list)
    _cycles: list[CycleRecord] = field(init=False, default_factory=list)
    _shares: list[ShareSample] = field(init=False, default_factory=list)
    _jain: list[tuple[float, float | None]] = field(init=False, default_factory=list)
    _seq: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        cfg = self.config
        if self.placer is None:
            self.placer = make_placer(
                cfg.placer,
                seed=cfg.seed,
                time_limit_s=cfg.time_limit_s,
                workers=cfg.workers,
                deterministic=cfg.deterministic,
                deterministic_time=cfg.deterministic_time,
            )
        if self.speed is None:
            self.speed = SpreadSpeed(cfg.slowdown)
        c = self.inp.cluster
        nodes = list(c.nodes)
        if cfg.seed:
            random.Random(cfg.seed).shuffle(nodes)
        self._static = {
            f: getattr(c, f) for f in Snapshot.model_fields if f not in ("gangs", "running")
        }
        self._static["nodes"] = tuple(nodes)
        if cfg.elastic:
            # shrinking is preemption's elastic victims: on, for elastic pods only (_bind)
            pre: PreemptionSettings = self._static["preemption"]
            self._static["preemption"] = pre.model_copy(update={"enabled": True})
            self._static["queues"] = tuple(elastic_queue(q) for q in c.queues)
        if cfg.reserve_after_s is not None:
            self._static["reservation"] = ReservationSettings(
                enabled=True, reserve_after_s=cfg.reserve_after_s
            )
        self._node_view = Snapshot.model_construct(**self._static, gangs=(), running=())

    # ------------------------------------------------------------------ the loop

    def run(self) -> SimResult:
        """Simulate until nothing is left to happen (or the horizon); return the result.

        The objects alive when the run starts (the input: thousands of gangs) are moved out
        of the garbage collector's reach for the run (:func:`gc.freeze`, undone at the end):
        every cycle allocates a topology graph, and each full collection would otherwise
        rescan the whole input (measured: a quarter of a greedy run's time)."""
        gc.collect()
        gc.freeze()
        try:
            return self._run()
        finally:
            gc.unfreeze()

    def _run(self) -> SimResult:
        started = time.perf_counter()
        cfg = self.config
        arrivals = self._arrivals()
        i = 0
        horizon = cfg.horizon_s if cfg.horizon_s is not None else math.inf
        now = _tick(arrivals[0].arrival, cfg.period_s) if arrivals else 0.0
        if arrivals:
            self._util.append((arrivals[0].arrival, 0))
        changed = True
        while now <= horizon:
            changed |= self._finish_until(now)
            while i < len(arrivals) and arrivals[i].arrival <= now:
                job = arrivals[i]
                self._pending[job.gang.key] = job
                i += 1
                changed = True
            bound = False
            if self._wants() and (changed or not cfg.skip_unchanged):
                bound = self._cycle(now)
            changed = bound
            upcoming = [self._next_end()]
            if i < len(arrivals):
                upcoming.append(arrivals[i].arrival)
            if self._wants() and (bound or not cfg.skip_unchanged):
                upcoming.append(now + cfg.period_s)
            nxt = min(upcoming)
            if nxt == math.inf or (not self._running and i == len(arrivals)):
                break  # nothing left to happen: pending gangs (if any) can never change
            now = max(now + cfg.period_s, _tick(nxt, cfg.period_s))
        if now > horizon:
            self._finish_until(horizon)  # jobs done between the last tick and the horizon
            end = horizon
        else:
            ends = [r.end for r in self._records.values() if r.end is not None]
            end = max(ends + [c.time for c in self._cycles], default=now)
        self._mark_not_arrived(arrivals[i:])
        return SimResult(
            config=cfg,
            trace=self.inp.trace,
            cluster=self.inp.cluster_source,
            capacity_gpus=self.inp.gpus,
            nodes=len(self.inp.cluster.nodes),
            window=self.inp.window,
            jobs=tuple(self._records[j.gang.key] for j in arrivals),
            cycles=tuple(self._cycles),
            utilisation=tuple(self._util),
            shares=tuple(self._shares),
            jain=tuple(self._jain),
            end_time=end,
            wall_time_s=time.perf_counter() - started,
        )

    def _arrivals(self) -> list[SimJob]:
        cfg = self.config
        jobs = list(self.inp.jobs)
        if cfg.elastic:
            jobs = [elastic_job(j, self.inp.cluster.gpu) for j in jobs]
        if cfg.estimates == "exact":
            # a perfect estimate: the trace duration (at least 1 s, as a Gang requires > 0)
            jobs = [
                replace(
                    j,
                    expected_duration=(d := max(1.0, j.duration)),
                    gang=j.gang.model_copy(update={"expected_duration_s": d}),
                )
                for j in jobs
            ]
        if cfg.jitter_s > 0:
            rng = random.Random(cfg.seed)
            jobs = [
                replace(
                    j,
                    arrival=(a := j.arrival + rng.uniform(0, cfg.jitter_s)),
                    gang=j.gang.model_copy(update={"creation_time": a}),
                )
                for j in jobs
            ]
        jobs.sort(key=lambda j: (j.arrival, j.row))
        for j in jobs:
            self._records[j.gang.key] = JobRecord(
                name=j.name,
                queue=j.queue,
                gpus=j.gpus,
                pods=j.gang.size,
                arrival=j.arrival,
                duration=j.duration,
                row=j.row,
                status="pending",
                min_pods=j.gang.min_size if j.gang.elastic else None,
            )
        return jobs

    # ------------------------------------------------------------------ one cycle

    def _snapshot(self, now: float) -> Snapshot:
        if self._pods is None:
            self._pods = tuple(p for run in self._running.values() for p in run.pods)
        gangs = tuple(job.gang for job in self._pending.values()) + self._growth()
        # the cycle's clock (reservations count waits and expected ends on it)
        settings: PreemptionSettings = self._static["preemption"]
        clock = {**self._static, "preemption": settings.model_copy(update={"now": now})}
        if self.config.validate_snapshots:
            return Snapshot(**clock, gangs=gangs, running=self._pods)
        return Snapshot.model_construct(**clock, gangs=gangs, running=self._pods)

    def _wants(self) -> bool:
        """Is there anything a cycle could admit: a pending gang, or a running elastic job
        below its full size?"""
        return bool(self._pending) or any(
            r.job.gang.elastic and len(r.pods) < r.job.gang.size for r in self._running.values()
        )

    def _growth(self) -> tuple[Gang, ...]:
        """The growth gangs of the running elastic jobs below their full size
        (:func:`gangplan.models.growth_gang`): the missing pods, named by the free indices."""
        out = []
        for run in self._running.values():
            gang = run.job.gang
            if not gang.elastic or len(run.pods) >= gang.size:
                continue
            used = {p.name for p in run.pods}
            counts: dict[str, int] = {}
            for p in run.pods:
                counts[run.roles[p.name]] = counts.get(run.roles[p.name], 0) + 1
            names = {
                r.name: [n for i in range(r.count) if (n := r.pod_name(gang.name, i)) not in used]
                for r in gang.roles
            }
            grow = growth_gang(gang, counts, names)
            if grow is not None:
                out.append(grow)
        return tuple(out)

    def _cycle(self, now: float) -> bool:
        """Plan one cycle at ``now`` and bind what it admits; True if it bound a gang."""
        assert self.placer is not None
        snap = self._snapshot(now)
        cycle = CycleInput(now=now, snapshot=snap)
        t0 = time.perf_counter()
        result = self.placer(cycle)
        wall = time.perf_counter() - t0
        plan = result.plan
        if self.config.verify:
            bad = verify(snap, plan)
            if bad:
                raise SimulationError(
                    f"cycle at t={now:g} s: placer {self.placer.name} returned a plan the "
                    f"verifier refuses: {bad[0]} ({len(bad)} violations)"
                )
        by_gang: dict[str, list[PodPlacement]] = {}
        for p in plan.pods:
            by_gang.setdefault(p.gang_key, []).append(p)
        if plan.evictions:
            self._shrink(now, plan.evictions)
        admitted = 0
        for outcome in plan.gangs:
            key = outcome.key
            if outcome.admitted and key in self._running:
                self._grow(now, self._running[key], by_gang.get(key, []))
                admitted += 1
            elif outcome.admitted and key in self._pending:
                self._bind(now, self._pending.pop(key), by_gang.get(key, []))
                admitted += 1
            elif (
                outcome.reason is not None
                and outcome.reason.kind == "never_fits"
                and key in self._pending
            ):
                del self._pending[key]
                self._records[key] = replace(self._records[key], status="never_fits")
        self._sample_shares(now, snap, by_gang)
        self._cycles.append(
            CycleRecord(
                time=now,
                wall_s=wall,
                pending=len(snap.gangs),
                admitted=admitted,
                status=result.status.value,
                busy_gpus=self._busy / GPU_MILLI,
                reserved=sum(1 for r in plan.reservations if r.key in self._pending),
            )
        )
        if self.progress is not None:
            self.progress(now, len(self._pending), len(self._running))
        return admitted > 0

    def _running_pods(
        self, now: float, job: SimJob, pods: list[PodPlacement]
    ) -> tuple[RunningPod, ...]:
        gang = job.gang
        roles = {r.name: r for r in gang.roles}
        expected_end = None if job.expected_duration is None else now + job.expected_duration
        elastic = gang.elastic
        # model_construct: the role's requests are already in base units (a validating
        # constructor would read 1000 milli-GPU as a quantity of 1000 GPUs)
        return tuple(
            RunningPod.model_construct(
                name=p.pod,
                namespace=p.namespace,
                gang=p.gang,
                queue=gang.queue,
                priority=gang.priority,
                node=p.node,
                requests=roles[p.role].requests,
                devices=(*p.gpus, *p.nics),
                admitted=now,
                min_member=gang.min_size if elastic else None,
                # elastic mode: only elastic jobs' pods may be taken back (shrink)
                preemptible=elastic or not self.config.elastic,
                expected_end=expected_end,
            )
            for p in pods
        )

    def _bind(self, now: float, job: SimJob, pods: list[PodPlacement]) -> None:
        gang = job.gang
        running = self._running_pods(now, job, pods)
        leaves, spines = _extent(self._node_view, {p.node for p in pods})
        assert self.speed is not None
        rate = self.speed.rate(len(pods), gang.size, leaves, spines)
        run = RunningJob(job, now, running, leaves, spines, rate, job.duration, now)
        run.roles = {p.pod: p.role for p in pods}
        self._running[gang.key] = run
        self._pods = None
        self._push(run)
        gpu = self.inp.cluster.gpu
        self._busy += sum(p.requests.get(gpu, 0) for p in running)
        self._util.append((now, self._busy))
        rec = self._records[gang.key]
        self._records[gang.key] = replace(
            rec,
            status="running",
            start=rec.start if rec.start is not None else now,  # a requeued job: its first
            leaves=leaves,
            spines=spines,
            factor=1.0 / rate if rate > 0 else math.inf,
            max_pods=max(rec.max_pods, len(running)),
        )

    def _resized(self, now: float, run: RunningJob) -> None:
        """After ``run``'s pods changed at ``now``: its extent, rate (work conserved) and
        completion event, the busy GPUs and the job's record."""
        assert self.speed is not None
        leaves, spines = _extent(self._node_view, {p.node for p in run.pods})
        run.leaves, run.spines = leaves, spines
        run.set_rate(now, self.speed.rate(len(run.pods), run.job.gang.size, leaves, spines))
        self._push(run)
        self._pods = None
        gpu = self.inp.cluster.gpu
        self._busy = sum(p.requests.get(gpu, 0) for r in self._running.values() for p in r.pods)
        self._util.append((now, self._busy))
        rec = self._records[run.job.gang.key]
        self._records[run.job.gang.key] = replace(
            rec,
            leaves=max(rec.leaves, leaves),
            spines=max(rec.spines, spines),
            max_pods=max(rec.max_pods, len(run.pods)),
            resizes=rec.resizes + 1,
        )

    def _grow(self, now: float, run: RunningJob, pods: list[PodPlacement]) -> None:
        """New pods of a running elastic job (its growth gang admitted); the others stay."""
        if not pods:
            return
        run.pods = (*run.pods, *self._running_pods(now, run.job, pods))
        run.roles.update({p.pod: p.role for p in pods})
        self._resized(now, run)

    def _shrink(self, now: float, evictions: tuple[Eviction, ...]) -> None:
        """Remove the evicted pods; a job left with none goes back to pending with its
        remaining work (module docstring of :mod:`gangplan.adapters.sim.elastic`)."""
        gone: dict[str, set[str]] = {}
        for e in evictions:
            if e.gang is not None:
                gone.setdefault(f"{e.namespace}/{e.gang}", set()).add(e.pod)
        for key, names in gone.items():
            run = self._running.get(key)
            if run is None:
                continue
            run.pods = tuple(p for p in run.pods if p.name not in names)
            if run.pods:
                self._resized(now, run)
                continue
            run.set_rate(now, 0.0)  # the work done so far is kept
            del self._running[key]
            self._pods = None
            job = replace(run.job, duration=run.work_left)
            self._pending[key] = job
            gpu = self.inp.cluster.gpu
            self._busy = sum(p.requests.get(gpu, 0) for r in self._running.values() for p in r.pods)
            self._util.append((now, self._busy))
            self._records[key] = replace(
                self._records[key], status="pending", resizes=self._records[key].resizes + 1
            )

    # ------------------------------------------------------------------ departures

    def _push(self, run: RunningJob) -> None:
        self._seq += 1
        heapq.heappush(self._events, (run.end, self._seq, run.job.gang.key, run.version))

    def _next_end(self) -> float:
        while self._events:
            end, _, key, version = self._events[0]
            run = self._running.get(key)
            if run is not None and run.version == version:
                return end
            heapq.heappop(self._events)  # stale: the job left or its rate changed
        return math.inf

    def _finish_until(self, now: float) -> bool:
        """Remove every job whose work is done at or before ``now``; True if any left."""
        left = False
        gpu = self.inp.cluster.gpu
        while self._next_end() <= now:
            end, _, key, _ = heapq.heappop(self._events)
            run = self._running.pop(key)
            self._pods = None
            self._busy -= sum(p.requests.get(gpu, 0) for p in run.pods)
            self._util.append((end, self._busy))
            self._records[key] = replace(self._records[key], status="finished", end=end)
            left = True
        return left

    # ------------------------------------------------------------------ fairness

    def _sample_shares(
        self, now: float, snap: Snapshot, by_gang: dict[str, list[PodPlacement]]
    ) -> None:
        fs = fair_shares(snap)
        ratios: list[float] = []
        for c in fs.classes:
            added: dict[str, dict[str, int]] = {}
            for key, pods in by_gang.items():
                gang = snap.gang_by_key[key]
                if gang.priority != c:
                    continue
                acc = added.setdefault(gang.queue, {})
                for p in pods:
                    for r, v in fs.contribution(gang.role(p.role).requests).items():
                        acc[r] = acc.get(r, 0) + v
            for qname, t in sorted(fs.targets.get(c, {}).items()):
                alloc = fs.dominant(qname, added.get(qname, {}))
                self._shares.append(ShareSample(now, c, qname, alloc, t.target))
                if t.target > 0:
                    ratios.append(alloc / t.target)
        # Jain's index says something only when two or more queues compete
        self._jain.append((now, jain_index(ratios) if len(ratios) >= 2 else None))

    # ------------------------------------------------------------------ the end

    def _mark_not_arrived(self, never_arrived: list[SimJob]) -> None:
        for job in never_arrived:
            self._records[job.gang.key] = replace(self._records[job.gang.key], status="not_arrived")


def simulate(inp: SimInput, config: SimConfig) -> SimResult:
    """Run ``inp`` under ``config`` (see the module docstring)."""
    return Simulation(inp, config).run()
