"""``gangplan convert``: outside input becomes an instance file.

The group, and its trace converters: ``convert alibaba-gpu`` (the Alibaba GPU trace,
:mod:`gangplan.adapters.traces.alibaba`) and ``convert jobs-trace`` (Philly and ITP job
traces, :mod:`gangplan.adapters.traces.jobs`); ``convert k8s`` registers itself from
:mod:`gangplan.adapters.cli.k8s`. Each parses options, calls the converter, writes the
instance to ``-o FILE`` (YAML, or JSON by the ``.json`` suffix) or stdout, with a one-line
summary and any warnings on stderr. Bad input (a missing file, a wrong CSV header, a bad
cell, a bad ``--window``) ends with ``error: FILE: row R (line L), column C: message`` lines
and exit code 1, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import click

from gangplan.adapters.cli.common import (
    emit_instance,
    guard_output,
    instance_output,
    main,
    user_errors,
)
from gangplan.adapters.files import InputError
from gangplan.adapters.traces.alibaba import convert_openb
from gangplan.adapters.traces.common import parse_window
from gangplan.adapters.traces.jobs import FORMATS, convert_jobs
from gangplan.models import Problem

__all__ = ["alibaba_gpu", "convert", "jobs_trace"]

_FILE = click.Path(dir_okay=False, path_type=Path)


@main.group()
def convert() -> None:
    """Convert real cluster input (traces, Kubernetes objects) into an instance file."""


@convert.command("alibaba-gpu")
@click.option(
    "--nodes",
    "nodes",
    type=_FILE,
    required=True,
    help="node list, e.g. openb_node_list_all_node.csv",
)
@click.option(
    "--pods", "pods", type=_FILE, required=True, help="pod list, e.g. openb_pod_list_default.csv"
)
@click.option("--limit", type=click.IntRange(min=1), help="keep the first N pods by creation_time")
@click.option(
    "--leaf-size",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="nodes per synthetic leaf (nodes grouped by machine type first)",
)
@click.option(
    "--ignore-qos",
    is_flag=True,
    help="priority 0 for every pod (default: LS/Guaranteed 9000, Burstable 7000, BE 5000)",
)
@instance_output
def alibaba_gpu(
    nodes: Path,
    pods: Path,
    limit: int | None,
    leaf_size: int,
    ignore_qos: bool,
    output: Path | None,
) -> None:
    """Convert the Alibaba GPU trace (cluster-trace-gpu-v2023, "openb") into an instance:
    every pod a pending gang of one pod, nodes on synthetic leaves."""
    guard_output(output, nodes, pods, kind="Instance")
    with user_errors():
        result = convert_openb(
            nodes, pods, leaf_size=leaf_size, limit=limit, use_qos=not ignore_qos
        )
    emit_instance(result, output)


@convert.command("jobs-trace")
@click.argument("trace", type=_FILE)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    required=True,
    help="philly: pollux-philly-jobs/philly.csv; itp: itp-elasticflow/clusterNN.csv",
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="P: a job of G > P GPUs becomes floor(G/P) pods of P plus the remainder",
)
@click.option("--limit", type=click.IntRange(min=1), help="keep the first N jobs of the window")
@click.option(
    "--window",
    metavar="START:END",
    help="jobs arriving in [START, END) s after the trace's zero, e.g. 30d:30d8h",
)
@click.option(
    "--cluster",
    type=_FILE,
    help="instance file to take nodes, levels, queues and running pods from "
    "(default: a generated 512-node hgx8 fat-tree)",
)
@instance_output
def jobs_trace(
    trace: Path,
    fmt: str,
    gpus_per_node: int,
    limit: int | None,
    window: str | None,
    cluster: Path | None,
    output: Path | None,
) -> None:
    """Convert a window of a Philly or ITP job trace into pending gangs on a cluster."""
    guard_output(output, trace, cluster, kind="Instance")
    with user_errors():
        span = None
        if window is not None:
            try:
                span = parse_window(window)
            except ValueError as err:
                raise InputError("--window", [Problem("", str(err))]) from None
        result = convert_jobs(
            trace, fmt, gpus_per_node=gpus_per_node, limit=limit, window=span, cluster=cluster
        )
    emit_instance(result, output)
