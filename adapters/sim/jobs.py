"""Trace jobs as simulated jobs: one pending gang each, built once, plus its duration.

The jobs come from the job-trace readers and converter of
:mod:`gangplan.adapters.traces.jobs` (``gangplan convert jobs-trace``): Philly
(``pollux-philly-jobs/philly.csv``, virtual clusters as queues) or ITP
(``itp-elasticflow/clusterNN.csv``, one queue). The converter's rule cuts a job of G GPUs
into pods for nodes of P GPUs (one pod when G <= P, else floor(G/P) pods of P plus one of
the remainder) and gives each pod CPU and memory in proportion to its GPUs; the whole
window is validated once as one instance, so every gang is a valid
:class:`~gangplan.models.Gang` before the simulation starts.

A :class:`SimJob` keeps what the simulator needs beside the gang: arrival (s, from the
trace's zero), ``duration`` (s of work at full size on one leaf, as the trace recorded it),
GPUs, queue, and the data row it came from.

``expected_duration`` is what the job declares it will take, for reservation with backfill
(a gang may use held capacity only if it is expected to finish before the reservation
starts): None (unknown, as the traces give no estimate) unless the run's ``estimates`` is
``exact`` (:class:`~gangplan.adapters.sim.engine.SimConfig`); the engine turns it into the
running pods' ``expected_end``. An elastic job's minimum is its gang's ``min_member``
(:mod:`gangplan.adapters.sim.elastic`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangplan.adapters.files import InputError
from gangplan.adapters.sim.cluster import ClusterSpec
from gangplan.adapters.traces.jobs import TraceJob, jobs_instance, read_jobs, select_jobs
from gangplan.models import Gang, InstanceError, Problem, Snapshot, load_instance

__all__ = ["SIZE_CLASSES", "SimInput", "SimJob", "detect_format", "load_input", "size_class"]

SIZE_CLASSES: tuple[tuple[str, int, int | None], ...] = (
    ("1", 1, 1),
    ("2-8", 2, 8),
    ("9-32", 9, 32),
    ("33+", 33, None),
)
"""Gang-size classes of the report, in GPUs: (label, lowest, highest or None)."""


def size_class(gpus: int) -> str:
    """The :data:`SIZE_CLASSES` label of a job of ``gpus`` GPUs (``"33+"`` for 64)."""
    for label, lo, hi in SIZE_CLASSES:
        if gpus >= lo and (hi is None or gpus <= hi):
            return label
    return SIZE_CLASSES[0][0]  # gpus < 1 cannot come from the readers


@dataclass(frozen=True)
class SimJob:
    """One trace job: its gang (pods by the 8 + 4 rule), arrival and duration (s)."""

    name: str
    queue: str
    arrival: float
    duration: float
    gpus: int
    gang: Gang
    row: int
    expected_duration: float | None = None
    """Declared duration (s) for reservation with backfill; None: unknown."""

    @property
    def size_class(self) -> str:
        return size_class(self.gpus)


@dataclass(frozen=True)
class SimInput:
    """Everything a run needs: the cluster (nodes, levels, layouts, queues: a snapshot
    without gangs or running pods), the jobs by arrival, and where they came from."""

    cluster: Snapshot
    jobs: tuple[SimJob, ...]
    trace: str
    cluster_source: str
    window: tuple[float, float] | None
    warnings: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        """Whole GPUs of the cluster."""
        s = self.cluster
        return sum(n.allocatable.get(s.gpu, 0) for n in s.nodes) // 1000


def detect_format(path: str | Path) -> str:
    """``itp`` when the CSV header names ``submission_time``, else ``philly``."""
    try:
        with Path(path).open(encoding="utf-8") as fh:
            header = fh.readline(1 << 16)  # a header line; never a whole /dev/zero
    except (OSError, UnicodeDecodeError):
        return "philly"  # the reader reports the file's problem
    return "itp" if "submission_time" in header else "philly"


def load_input(
    trace: str | Path,
    cluster: ClusterSpec,
    *,
    fmt: str | None = None,
    window: tuple[float, float] | None = None,
    limit: int | None = None,
    gpus_per_node: int = 8,
) -> SimInput:
    """Read a job trace and make its jobs for ``cluster``.

    Args:
        fmt: ``philly`` or ``itp``; None: :func:`detect_format`.
        window: ``(start, end)`` s from the trace's zero: jobs with start <= arrival < end.
        limit: the first ``limit`` jobs of the window by arrival.
        gpus_per_node: P of the pod rule.

    Raises:
        InputError: a missing or bad trace (file, row and column named: e.g. a negative
            duration), or gangs that do not validate against the cluster.
    """
    fmt = fmt or detect_format(trace)
    jobs = read_jobs(trace, fmt)
    chosen = select_jobs(jobs, window, limit)
    stem = Path(trace).stem
    try:
        data = jobs_instance(
            chosen,
            cluster.data,
            cluster.snapshot,
            fmt=fmt,
            gpus_per_node=gpus_per_node,
            default_queue=f"itp-{stem}",
            name=f"simulate-{stem}",
        )
    except ValueError as err:
        raise InputError(cluster.source, [Problem("", str(err))]) from None
    snapshot = _validated(f"{trace} on {cluster.source}", data)
    by_name = snapshot.gang_by_key
    sim = tuple(_sim_job(j, by_name[f"default/{j.name}"]) for j in chosen)
    static = Snapshot.model_construct(
        **{f: getattr(snapshot, f) for f in Snapshot.model_fields if f not in ("gangs", "running")}
    )
    warnings = list(cluster.warnings)
    if not sim:
        warnings.append(f"{trace}: no job in the window")
    return SimInput(
        cluster=static,
        jobs=sim,
        trace=str(trace),
        cluster_source=cluster.source,
        window=window,
        warnings=tuple(warnings),
    )


def _validated(source: str, data: dict[str, Any]) -> Snapshot:
    try:
        snapshot, _ = load_instance(data)
    except InstanceError as err:
        raise InputError(source, err.problems) from None
    return snapshot


def _sim_job(job: TraceJob, gang: Gang) -> SimJob:
    return SimJob(
        name=job.name,
        queue=gang.queue,
        arrival=job.arrival,
        duration=job.duration,
        gpus=job.gpus,
        gang=gang,
        row=job.row,
    )


def jobs_from(gangs: Sequence[tuple[Gang, float, float, int]]) -> tuple[SimJob, ...]:
    """Jobs from ``(gang, arrival, duration, gpus)`` tuples (tests and Python users who
    build their own gangs); rows count from 1 in the given order."""
    return tuple(
        SimJob(g.name, g.queue, a, d, n, g.model_copy(update={"creation_time": a}), i)
        for i, (g, a, d, n) in enumerate(gangs, start=1)
    )
