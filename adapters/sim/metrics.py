"""What a run measured: completion, waiting, utilisation, fairness and cycle times.

All statistics use numpy. Percentiles are numpy's default (``method="linear"``: for n
sorted values x_0..x_{n-1}, the p-th percentile is x at the fractional rank
(n - 1) p / 100, interpolated linearly between neighbours; Hyndman and Fan's type 7).

* **JCT** (job completion time) = end - arrival, of finished jobs; **wait** (queueing
  delay) = start - arrival, of started jobs (finished or still running). Mean, p50, p95,
  p99, overall, per queue and per gang size (:data:`~gangplan.adapters.sim.jobs.SIZE_CLASSES`:
  1, 2-8, 9-32, 33+ GPUs).
* **Utilisation**: GPUs held by running pods over the cluster's GPUs, as a step function of
  simulated time; its time average over the *arrival window* (first to last arrival: the
  cluster under the trace's load) and over the *whole run* (first arrival to the last
  completion, the makespan).
* **Makespan**: last completion - first arrival (s).
* **Fairness**, sampled after each cycle: each queue's dominant share (allocation) against
  its fair target (:func:`gangplan.solver.judges.fairness.fair_shares` on the cycle's snapshot;
  only queues with pending demand have one); per queue the mean and lowest of
  allocation / target over its samples; Jain's index over the queues of positive target
  (:func:`gangplan.solver.judges.metrics.jain_index`; Jain, Chiu and Hawe, DEC-TR-301, 1984), its
  mean and lowest over the cycles that had two or more such queues.
* **Longest wait**: the started job that waited longest (name, queue, GPUs, seconds), and
  the jobs that never started; per gang-size class, the longest wait of its started jobs
  (``Group.wait_max``: the 33+ GPU class's is what reservation is for).
* **Reservations**: the cycles whose plan held capacity for a starving gang.
* **Elastic jobs** (``--elastic``): how many started, the share that ran above their
  minimum at some time (most pods at once > minimum), and the grow/shrink events.
* **Cycles**: how many ran, the placer's wall time per cycle (p50, p99, mean, total) and
  their statuses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from gangplan.adapters.sim.engine import JobRecord, SimResult
from gangplan.adapters.sim.jobs import SIZE_CLASSES, size_class
from gangplan.models import GPU_MILLI

__all__ = [
    "Group",
    "LongestWait",
    "QueueShare",
    "SimMetrics",
    "Stat",
    "run_metrics",
    "stat",
    "time_average",
]


@dataclass(frozen=True)
class Stat:
    """Count, mean and percentiles of some seconds (None where there is no value)."""

    n: int
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None


def stat(values: Iterable[float]) -> Stat:
    """:class:`Stat` of ``values`` (numpy mean and linear percentiles)."""
    a = np.fromiter(values, dtype=float)
    if a.size == 0:
        return Stat(0, None, None, None, None)
    p50, p95, p99 = (float(v) for v in np.percentile(a, [50, 95, 99]))
    return Stat(int(a.size), float(a.mean()), p50, p95, p99)


@dataclass(frozen=True)
class Group:
    """JCT and wait of one queue or one gang-size class."""

    key: str
    jobs: int
    jct: Stat
    wait: Stat
    wait_max: float | None = None
    """the longest wait of a started job of the group"""


@dataclass(frozen=True)
class QueueShare:
    """A queue's allocation / fair target over the cycles where it had a target."""

    queue: str
    samples: int
    mean_ratio: float | None
    min_ratio: float | None


@dataclass(frozen=True)
class LongestWait:
    """The started job that waited longest."""

    job: str
    queue: str
    gpus: int
    wait_s: float
    arrival: float


@dataclass(frozen=True)
class SimMetrics:
    """Every metric of one run (see the module docstring)."""

    jobs: int
    finished: int
    started: int
    never_fits: int
    unfinished: int
    jct: Stat
    wait: Stat
    by_queue: tuple[Group, ...]
    by_size: tuple[Group, ...]
    utilisation_window: float | None
    utilisation_run: float | None
    makespan_s: float | None
    jain_mean: float | None
    jain_min: float | None
    queue_shares: tuple[QueueShare, ...]
    longest_wait: LongestWait | None
    cycles: int
    cycle_p50_s: float | None
    cycle_p99_s: float | None
    cycle_mean_s: float | None
    cycle_total_s: float
    statuses: dict[str, int]
    slowed_jobs: int
    mean_factor_multi_pod: float | None
    reserved_cycles: int = 0
    """cycles whose plan held capacity for a starving gang"""
    elastic_jobs: int = 0
    """elastic jobs that started"""
    elastic_above_min: int = 0
    """... of which ran above their minimum at some time"""
    resizes: int = 0
    """times running elastic jobs grew or shrank"""


def time_average(points: Sequence[tuple[float, float]], start: float, end: float) -> float | None:
    """Time average over [start, end] of the step function that takes value v_i from t_i
    until the next point (0 before the first point); None when end <= start.

    ``points`` are (t_i, v_i) in nondecreasing time; several at one time: the last holds.
    """
    if end <= start:
        return None
    t = np.array([p[0] for p in points], dtype=float)
    v = np.array([p[1] for p in points], dtype=float)
    edges = np.clip(np.append(t, end), start, end)
    widths = np.diff(edges)
    total = float(np.dot(v, widths)) if t.size else 0.0
    return total / (end - start)


def _group(key: str, records: Sequence[JobRecord]) -> Group:
    waits = [r.wait for r in records if r.wait is not None]
    return Group(
        key=key,
        jobs=len(records),
        jct=stat(r.jct for r in records if r.jct is not None),
        wait=stat(waits),
        wait_max=max(waits, default=None),
    )


def run_metrics(result: SimResult) -> SimMetrics:
    """Compute :class:`SimMetrics` for one run."""
    jobs = [j for j in result.jobs if j.status != "not_arrived"]
    finished = [j for j in jobs if j.status == "finished"]
    started = [j for j in jobs if j.start is not None]
    queues = sorted({j.queue for j in jobs})
    by_queue = tuple(_group(q, [j for j in jobs if j.queue == q]) for q in queues)
    by_size = tuple(
        _group(label, [j for j in jobs if size_class(j.gpus) == label])
        for label, _, _ in SIZE_CLASSES
    )
    first = min((j.arrival for j in jobs), default=None)
    last = max((j.arrival for j in jobs), default=None)
    cap = result.capacity_gpus * GPU_MILLI
    util = [(t, b / cap) for t, b in result.utilisation] if cap else []
    u_window = time_average(util, first, last) if first is not None and last is not None else None
    u_run = time_average(util, first, result.end_time) if first is not None else None
    last_end = max((j.end for j in finished if j.end is not None), default=None)
    makespan = None if last_end is None or first is None else last_end - first
    jain = [x for _, x in result.jain if x is not None]
    ratios: dict[str, list[float]] = {}
    for s in result.shares:
        if s.target_ppm > 0:
            ratios.setdefault(s.queue, []).append(s.allocation_ppm / s.target_ppm)
    shares = tuple(
        QueueShare(q, len(r), float(np.mean(r)), float(np.min(r)))
        for q, r in sorted(ratios.items())
    )
    waited = max(started, key=lambda j: (j.wait or 0.0, -j.row), default=None)
    longest = (
        None
        if waited is None or waited.wait is None
        else LongestWait(waited.name, waited.queue, waited.gpus, waited.wait, waited.arrival)
    )
    walls = np.array([c.wall_s for c in result.cycles], dtype=float)
    multi_pod = [j.factor for j in started if j.pods > 1]
    return SimMetrics(
        jobs=len(jobs),
        finished=len(finished),
        started=len(started),
        never_fits=sum(1 for j in jobs if j.status == "never_fits"),
        unfinished=sum(1 for j in jobs if j.status in ("pending", "running")),
        jct=stat(j.jct for j in finished if j.jct is not None),
        wait=stat(j.wait for j in started if j.wait is not None),
        by_queue=by_queue,
        by_size=by_size,
        utilisation_window=u_window,
        utilisation_run=u_run,
        makespan_s=makespan,
        jain_mean=float(np.mean(jain)) if jain else None,
        jain_min=float(np.min(jain)) if jain else None,
        queue_shares=shares,
        longest_wait=longest,
        cycles=len(result.cycles),
        cycle_p50_s=float(np.percentile(walls, 50)) if walls.size else None,
        cycle_p99_s=float(np.percentile(walls, 99)) if walls.size else None,
        cycle_mean_s=float(walls.mean()) if walls.size else None,
        cycle_total_s=float(walls.sum()),
        statuses=dict(Counter(c.status for c in result.cycles)),
        slowed_jobs=sum(1 for f in multi_pod if f > 1.0),
        mean_factor_multi_pod=float(np.mean(multi_pod)) if multi_pod else None,
        reserved_cycles=sum(1 for c in result.cycles if c.reserved),
        elastic_jobs=sum(1 for j in started if j.min_pods is not None),
        elastic_above_min=sum(
            1 for j in started if j.min_pods is not None and j.max_pods > j.min_pods
        ),
        resizes=sum(j.resizes for j in jobs),
    )
