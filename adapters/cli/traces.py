"""``gangplan convert alibaba-gpu``, ``gangplan convert jobs-trace`` and ``gangplan generate
fat-tree``: parse options, call :mod:`gangplan.adapters.traces` (the converters and
:mod:`~gangplan.adapters.traces.generate`), write the instance.

The instance goes to ``-o FILE`` (YAML, or JSON by the ``.json`` suffix) or to stdout; a
one-line summary and any warnings go to stderr. Bad input (a missing file, a wrong CSV
header, a bad cell, a bad ``--window``) ends with ``error: FILE: row R (line L), column C:
message`` lines and exit code 1, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from gangplan.adapters.cli.common import OUTPUT
from gangplan.adapters.cli.convert import convert
from gangplan.adapters.files import InputError
from gangplan.adapters.traces.alibaba import convert_openb
from gangplan.adapters.traces.common import Converted, instance_text, parse_window, write_text
from gangplan.adapters.traces.generate import LAYOUTS, GeneratorError, fat_tree
from gangplan.adapters.traces.jobs import FORMATS, convert_jobs
from gangplan.adapters.traces.stats import TRACES
from gangplan.models import Problem

__all__ = ["alibaba_gpu", "convert", "fat_tree_command", "generate", "jobs_trace"]

_FILE = click.Path(dir_okay=False, path_type=Path)


@contextmanager
def _user_errors() -> Iterator[None]:
    """``InputError`` -> ``error:`` lines on stderr, a count, exit 1 (as ``gangplan
    validate`` reports them)."""
    try:
        yield
    except InputError as err:
        for line in err.lines():
            click.echo(f"error: {line}", err=True)
        n = len(err.problems)
        click.echo(f"{n} problem{'s' if n != 1 else ''} found", err=True)
        sys.exit(1)


def _emit(result: Converted, output: Path | None) -> None:
    for w in result.warnings:
        click.echo(f"warning: {w}", err=True)
    fmt = "json" if output is not None and output.suffix.lower() == ".json" else "yaml"
    text = instance_text(result.data, fmt)
    if output is None:
        click.echo(text, nl=False)
        click.echo(f"instance: {result.summary()}", err=True)
    else:
        write_text(output, text)
        click.echo(f"wrote {output}: {result.summary()}", err=True)


def _output_option(func: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "-o",
        "--output",
        type=OUTPUT,
        help="write the instance here (.json: JSON; else YAML); default: stdout",
    )(func)


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
@_output_option
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
    with _user_errors():
        result = convert_openb(
            nodes, pods, leaf_size=leaf_size, limit=limit, use_qos=not ignore_qos
        )
    _emit(result, output)


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
@_output_option
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
    with _user_errors():
        span = None
        if window is not None:
            try:
                span = parse_window(window)
            except ValueError as err:
                raise InputError("--window", [Problem("", str(err))]) from None
        result = convert_jobs(
            trace, fmt, gpus_per_node=gpus_per_node, limit=limit, window=span, cluster=cluster
        )
    _emit(result, output)


@click.group()
def generate() -> None:
    """Generate synthetic instances (deterministic for a seed)."""


@generate.command("fat-tree")
@click.option("--spines", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--leaves-per-spine", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--nodes-per-leaf", type=click.IntRange(min=1), default=8, show_default=True)
@click.option(
    "--layout",
    type=click.Choice(list(LAYOUTS)),
    default="hgx8",
    show_default=True,
    help="hgx8: 8 GPUs + 8 NICs, 4 PCIe switches, 2 NUMA; 4gpu: 4 GPUs + 4 NICs",
)
@click.option(
    "--demand",
    type=click.FloatRange(min=0),
    default=1.3,
    show_default=True,
    help="pending GPUs / free GPUs to reach",
)
@click.option(
    "--queues",
    type=click.IntRange(1, 15),
    default=4,
    show_default=True,
    help="the N largest Philly virtual clusters, by job count",
)
@click.option(
    "--load",
    type=click.FloatRange(0, 1),
    default=0.5,
    show_default=True,
    help="fraction of GPUs held by running pods",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--sizes",
    type=click.Choice(list(TRACES)),
    default="itp",
    show_default=True,
    help="GPU-count histogram of gangs: itp (ElasticFlow) or philly (Pollux)",
)
@_output_option
def fat_tree_command(
    spines: int,
    leaves_per_spine: int,
    nodes_per_leaf: int,
    layout: str,
    demand: float,
    queues: int,
    load: float,
    seed: int,
    sizes: str,
    output: Path | None,
) -> None:
    """A fat-tree instance: spines > leaves > nodes, mixed GPU models across racks, running
    load scattered as after days of churn, pending gangs drawn from real traces."""
    with _user_errors():
        try:
            result = fat_tree(
                spines,
                leaves_per_spine,
                nodes_per_leaf,
                layout,
                demand,
                queues,
                load,
                seed,
                sizes,
            )
        except GeneratorError as err:
            raise InputError("generate fat-tree", [Problem("", str(err))]) from None
    _emit(result, output)
