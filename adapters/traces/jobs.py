"""Real gang traces as pending gangs: ``gangplan convert jobs-trace --format philly|itp``.

Two job traces, one row per job (gang width in GPUs, arrival, duration), no placement:

* ``philly``: Microsoft Philly (Jeon et al., USENIX ATC '19) as the Pollux artifact
  summarises it (``pollux-philly-jobs/philly.csv``: ``timestamp,duration,num_gpus,
  gpu_time,cluster``). Data CC BY 4.0 (Microsoft). ``cluster`` is the Philly virtual cluster,
  the tenant: the gang's queue is ``vc-<cluster>`` (prefixed so that an id such as
  ``6214e9`` never reads as a number in YAML 1.2). Gangs are named ``philly-<row>`` (the
  data row, from 1; the file has no job id). ``timestamp`` is a local date-time of unknown
  zone; arrivals are seconds after the earliest timestamp in the file.
* ``itp``: Microsoft ITP clusters from ElasticFlow (Gu et al., ASPLOS '23;
  ``itp-elasticflow/clusterNN.csv``: ``job_id,submission_time,duration,num_gpu``). MIT
  License, Copyright (c) Microsoft Corporation. No tenants: every gang goes to one queue,
  ``itp-<file stem>``. Gangs are named by ``job_id``; arrivals are ``submission_time`` (s from
  the start of collection of that cluster).

Conversion (:func:`convert_jobs`):

* **Pods.** A job of G GPUs on nodes of P GPUs (``gpus_per_node``, default 8) becomes one
  pod of G GPUs when G <= P, else floor(G/P) pods of P GPUs (role ``worker``) plus, when G is
  not a multiple of P, one pod of the remainder (role ``remainder``): 12 GPUs on 8-GPU nodes
  is 8 + 4 (:func:`~gangplan.adapters.traces.common.split_gpus`). The traces record no node
  count, so this is the fewest nodes the job can use.
* **CPU and memory** (the traces have none): in proportion to GPUs, 3/4 of the smallest
  per-GPU CPU and memory of the cluster's GPU nodes
  (:func:`~gangplan.adapters.traces.common.per_gpu_requests`).
* **No NICs, no topology constraint, priority 0**: the traces say nothing about them.
* **Arrival** is the gang's ``creation_time``; **duration** (s) goes to
  ``metadata.durations`` keyed by gang name (a gang has no duration field).
* **Window and limit**: jobs with START <= arrival < END, then the first ``limit`` by arrival
  (ties in file order).
* **Cluster**: nodes, levels, device layouts, queues and running pods of an instance file
  (``cluster``; its pending gangs are replaced), else a generated 512-node fat-tree (4 spines
  x 8 leaves x 16 ``hgx8`` nodes, :func:`gangplan.adapters.traces.generate.fat_tree_cluster`,
  nothing running). Queues of the trace that the cluster lacks are added with weight 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from gangplan.adapters.files import InputError, load_snapshot, read_data
from gangplan.adapters.traces.common import (
    Converted,
    node_shapes,
    per_gpu_requests,
    pod_requests,
    raise_problems,
    read_csv,
    snapshot_of,
    split_gpus,
)
from gangplan.models import API_VERSION, Problem, Snapshot

__all__ = [
    "DEFAULT_CLUSTER",
    "FORMATS",
    "ITP_COLUMNS",
    "PHILLY_COLUMNS",
    "TraceJob",
    "convert_jobs",
    "jobs_instance",
    "read_itp",
    "read_jobs",
    "read_philly",
    "select_jobs",
]

PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
ITP_COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")
FORMATS = ("philly", "itp")
DEFAULT_CLUSTER: tuple[int, int, int, str] = (4, 8, 16, "hgx8")
"""The fat-tree used when no cluster file is given: spines, leaves per spine, nodes per leaf,
layout (512 nodes, 4,096 GPUs)."""

_SOURCES = {
    "philly": {
        "trace": "Microsoft Philly (Jeon et al., USENIX ATC '19), per-job summary of the "
        "Pollux artifact (OSDI '21)",
        "url": "https://github.com/petuum/adaptdl/blob/osdi21-artifact/simulator/traces/philly.csv",
        "license": "data CC BY 4.0 (Microsoft, msr-fiddle/philly-traces); cite Jeon et al., "
        "ATC '19",
    },
    "itp": {
        "trace": "Microsoft ITP clusters, ElasticFlow raw traces (Gu et al., ASPLOS '23)",
        "url": "https://github.com/microsoft/elasticflow-traces",
        "license": "MIT License, Copyright (c) Microsoft Corporation",
    },
}
_TIMESTAMP = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace: ``arrival`` and ``duration`` in seconds (arrival from the trace's
    zero, see the module docstring), ``gpus`` its width, ``queue`` its tenant (None: the trace
    has none), ``row`` its data row in the file (from 1)."""

    name: str
    arrival: float
    duration: float
    gpus: int
    queue: str | None
    row: int


def read_philly(path: str | Path) -> list[TraceJob]:
    """Read Pollux's ``philly.csv`` (file order; rows are not sorted by time).

    Raises:
        InputError: missing file, wrong header, or bad cells (row and column named).
    """
    source, _, rows, problems = read_csv(path, PHILLY_COLUMNS)
    raw: list[tuple[float, float, int, str, int]] = []
    for r in rows:
        ts = r.text("timestamp")
        try:
            when = datetime.strptime(ts, _TIMESTAMP).replace(tzinfo=UTC).timestamp()
        except ValueError:
            r.fail("timestamp", f"{ts!r} is not a date-time YYYY-MM-DD HH:MM:SS")
            when = 0.0
        duration = r.number("duration")
        gpus = r.integer("num_gpus", minimum=1)
        vc = r.text("cluster")
        if not vc:
            r.fail("cluster", "empty virtual cluster id")
        raw.append((when, duration, gpus, vc, r.row))
    raise_problems(source, problems)
    zero = min((w for w, *_ in raw), default=0.0)
    return [
        TraceJob(f"philly-{row:05d}", when - zero, duration, gpus, f"vc-{vc}", row)
        for when, duration, gpus, vc, row in raw
    ]


def read_itp(path: str | Path) -> list[TraceJob]:
    """Read one ElasticFlow ITP cluster file (``clusterNN.csv``), in file order.

    Raises:
        InputError: missing file, wrong header, bad cells, or a repeated ``job_id``.
    """
    source, _, rows, problems = read_csv(path, ITP_COLUMNS)
    jobs: list[TraceJob] = []
    first: dict[str, int] = {}
    for r in rows:
        job_id = r.text("job_id")
        if not job_id:
            r.fail("job_id", "empty job id")
        elif job_id in first:
            r.fail("job_id", f"duplicate job id {job_id!r} (first at row {first[job_id]})")
        first.setdefault(job_id, r.row)
        jobs.append(
            TraceJob(
                name=job_id,
                arrival=r.number("submission_time"),
                duration=r.number("duration"),
                gpus=r.integer("num_gpu", minimum=1),
                queue=None,
                row=r.row,
            )
        )
    raise_problems(source, problems)
    return jobs


def read_jobs(path: str | Path, fmt: Literal["philly", "itp"] | str) -> list[TraceJob]:
    """Read a job trace of format ``philly`` or ``itp``.

    Raises:
        InputError: an unknown format, or a bad file.
    """
    if fmt == "philly":
        return read_philly(path)
    if fmt == "itp":
        return read_itp(path)
    raise InputError(str(path), [Problem("", f"unknown format {fmt!r} (accepted: philly, itp)")])


def select_jobs(
    jobs: Sequence[TraceJob],
    window: tuple[float, float] | None = None,
    limit: int | None = None,
) -> list[TraceJob]:
    """Jobs with ``start <= arrival < end`` (all when ``window`` is None), by arrival (ties in
    file order), the first ``limit`` of them."""
    chosen = sorted(jobs, key=lambda j: (j.arrival, j.row))
    if window is not None:
        start, end = window
        chosen = [j for j in chosen if start <= j.arrival < end]
    return chosen if limit is None else chosen[:limit]


def jobs_instance(
    jobs: Sequence[TraceJob],
    cluster: dict[str, Any],
    cluster_snapshot: Snapshot,
    *,
    fmt: str,
    gpus_per_node: int = 8,
    default_queue: str = "jobs",
    name: str = "jobs",
    extra_metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Instance data: ``cluster`` (instance data) with ``jobs`` as its pending gangs.

    Args:
        cluster_snapshot: the validated ``cluster`` (for the per-GPU CPU and memory).
        fmt: ``philly`` or ``itp`` (recorded as the source).
        gpus_per_node: P of the pod rule.
        default_queue: the queue of jobs whose trace has no tenant.

    Raises:
        ValueError: the cluster has no GPU node; ``gpus_per_node`` < 1.
    """
    if gpus_per_node < 1:
        raise ValueError(f"GPUs per node must be >= 1 (got {gpus_per_node})")
    per_gpu = per_gpu_requests(node_shapes(cluster_snapshot))
    gpu = cluster_snapshot.gpu
    gangs = []
    durations: dict[str, float] = {}
    for job in jobs:
        shapes = split_gpus(job.gpus, gpus_per_node)
        gangs.append(
            {
                "name": job.name,
                "queue": job.queue or default_queue,
                "creation_time": job.arrival,
                "roles": [
                    {"name": role, "count": s.count, "requests": pod_requests(per_gpu, s.gpus, gpu)}
                    for role, s in zip(("worker", "remainder"), shapes, strict=False)
                ],
            }
        )
        durations[job.name] = job.duration
    queues = [dict(q) for q in cluster.get("queues") or ()]
    known = {q.get("name") for q in queues}
    for q in dict.fromkeys(g["queue"] for g in gangs):
        if q not in known:
            queues.append({"name": q, "weight": 1})
    data = {k: v for k, v in cluster.items() if k not in ("gangs", "queues", "metadata")}
    data.setdefault("apiVersion", API_VERSION)
    data.setdefault("kind", "Instance")
    metadata: dict[str, Any] = {
        "name": name,
        "description": f"{len(gangs)} jobs of the {fmt} trace as pending gangs",
        "source": dict(_SOURCES[fmt]),
        **(extra_metadata or {}),
        "synthetic": [
            f"pods: a job of G GPUs is one pod when G <= {gpus_per_node}, else floor(G/"
            f"{gpus_per_node}) pods of {gpus_per_node} GPUs plus one pod of the remainder",
            f"CPU and memory: {per_gpu.cpu_milli // 1000} cores and "
            f"{per_gpu.memory // 2**30} GiB per GPU (3/4 of the smallest per-GPU share of "
            "the cluster's GPU nodes); the trace has none",
            "no RDMA NICs, no topology constraint, priority 0: the trace has none",
        ],
        "durations": durations,
    }
    if cluster.get("metadata"):
        metadata["cluster"] = cluster["metadata"]
    return {
        "apiVersion": data.pop("apiVersion"),
        "kind": data.pop("kind"),
        "metadata": metadata,
        **data,
        "queues": queues,
        "gangs": gangs,
    }


def convert_jobs(
    path: str | Path,
    fmt: Literal["philly", "itp"] | str,
    *,
    gpus_per_node: int = 8,
    limit: int | None = None,
    window: tuple[float, float] | None = None,
    cluster: str | Path | None = None,
) -> Converted:
    """Read a job trace and make the instance of its window (see the module docstring).

    Raises:
        InputError: a bad trace or cluster file (naming the file, row and column), or an
            instance that does not validate.
    """
    from gangplan.adapters.traces.generate import fat_tree_cluster

    jobs = read_jobs(path, fmt)
    if cluster is not None:
        cluster_snapshot, _ = load_snapshot(cluster)
        _, cluster_data = read_data(cluster)
        where = f"cluster file {Path(cluster).name}"
    else:
        cluster_data = fat_tree_cluster(*DEFAULT_CLUSTER)
        cluster_snapshot, _ = snapshot_of("<generated cluster>", cluster_data)
        cluster_data["metadata"] = {
            "name": "fat-tree-4x8x16-hgx8",
            "description": "generated by gangplan.adapters.traces.generate.fat_tree_cluster",
        }
        where = "generated fat-tree 4x8x16 hgx8 (512 nodes)"
    chosen = select_jobs(jobs, window, limit)
    stem = Path(path).stem
    extra: dict[str, Any] = {"file": Path(path).name, "cluster_from": where}
    if window is not None:
        extra["window_s"] = [window[0], window[1] if window[1] != float("inf") else None]
    if limit is not None:
        extra["limit"] = limit
    try:
        data = jobs_instance(
            chosen,
            cluster_data,
            cluster_snapshot,
            fmt=fmt,
            gpus_per_node=gpus_per_node,
            default_queue=f"itp-{stem}",
            name=f"{fmt}-{stem}",
            extra_metadata=extra,
        )
    except ValueError as err:
        raise InputError(str(cluster or "<generated cluster>"), [Problem("", str(err))]) from None
    snapshot, warnings = snapshot_of(f"{path} on {where}", data)
    gpu = snapshot.gpu
    widest = max((n.allocatable.get(gpu, 0) // 1000 for n in snapshot.nodes), default=0)
    total = sum(n.allocatable.get(gpu, 0) for n in snapshot.nodes) // 1000
    if widest < min(gpus_per_node, max((j.gpus for j in chosen), default=0)):
        warnings.append(
            f"no node of the cluster has {gpus_per_node} GPUs (the widest has {widest}): "
            "pods that large never fit; set --gpus-per-node"
        )
    too_big = [j for j in chosen if j.gpus > total]
    if too_big:
        warnings.append(
            f"{len(too_big)} jobs ask more GPUs than the cluster's {total} (they never fit)"
        )
    if not chosen:
        warnings.append(f"{path}: no job in the window")
    return Converted(data=data, snapshot=snapshot, warnings=warnings)
