"""``gangplan replay alibaba``: the FGD paper's replay of the Alibaba openb trace
(:mod:`gangplan.adapters.bench.replay`). Parses options, runs each placer over the seeds, prints
a table (mean ± std over the seeds); ``--json`` writes every run, ``--plot`` the curve of
allocated against arrived GPU demand.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from gangplan.adapters.bench.replay import (
    REPLAY_PLACERS,
    ReplayConfig,
    ReplayResult,
    replay_pods,
    result_data,
    run_line,
    summarize,
    summary_rows,
    summary_text,
    write_plot,
)
from gangplan.adapters.cli.common import SECONDS, Finite, guard_output, main, user_errors
from gangplan.adapters.files import write_output
from gangplan.adapters.traces.alibaba import read_openb_nodes, read_openb_pods

__all__ = ["replay"]

_FILE = click.Path(dir_okay=False, path_type=Path)
MAX_TARGET = 10.0
"""The largest ``--target``: arrived demand of 10 times the cluster's GPUs (the paper stops at
1.3; past the cluster's size every arrival fails, so a larger target only runs longer)."""


def _progress(placer: str, seed: int) -> Callable[[int, int], None]:
    """Every tenth CP-SAT cycle, a line on stderr."""
    calls = [0]

    def report(done: int, total: int) -> None:
        calls[0] += 1
        if calls[0] % 10 == 0 or done == total:
            click.echo(f"  {placer} seed {seed}: {done}/{total} pods, {calls[0]} cycles", err=True)

    return report


@main.group()
def replay() -> None:
    """Replay a trace pod by pod and measure the GPUs allocated."""


@replay.command("alibaba")
@click.option(
    "--nodes",
    "nodes_csv",
    type=_FILE,
    required=True,
    help="node list, e.g. openb_node_list_all_node.csv",
)
@click.option(
    "--pods",
    "pods_csv",
    type=_FILE,
    required=True,
    help="pod list, e.g. openb_pod_list_default.csv",
)
@click.option(
    "--placer",
    "placers",
    type=click.Choice(REPLAY_PLACERS),
    multiple=True,
    help="repeat for several (default: greedy, fgd, topology-fit); cpsat runs in "
    "cycles of --batch arrivals, a different setting",
)
@click.option("--seeds", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option("--first-seed", type=int, default=0, show_default=True)
@click.option(
    "--target",
    type=Finite(0.01, MAX_TARGET),
    default=1.3,
    show_default=True,
    help="arrived GPU demand to reach, a share of the cluster's GPUs",
)
@click.option(
    "--order",
    type=click.Choice(["creation", "shuffle"]),
    default="creation",
    show_default=True,
    help="pod order of the list",
)
@click.option(
    "--node-order",
    type=click.Choice(["file", "shuffle"]),
    default="file",
    show_default=True,
    help="node order (score ties go to the first node)",
)
@click.option(
    "--quantize", is_flag=True, help="FGD compares the simulator's integer score, not the exact Δ"
)
@click.option(
    "--paper",
    is_flag=True,
    help="the paper's runs: --order shuffle --node-order shuffle --quantize "
    "(give the GPU-node list, openb_node_list_gpu_node.csv)",
)
@click.option(
    "--popularity",
    type=Finite(0, 1, min_open=True),
    default=0.95,
    show_default=True,
    help="share of the pods whose shapes make FGD's workload",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help="only the first N pods of the list (the pods drawn after them, up to --target, "
    "come from these N too: the run is as long)",
)
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="cpsat: arrivals per cycle",
)
@click.option(
    "--time-limit",
    type=SECONDS,
    default=1.0,
    show_default=True,
    help="cpsat: seconds per cycle, for the whole cycle (baselines, restarts, CP-SAT, reasons)",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=2,
    show_default=True,
    help="cpsat: CP-SAT search workers",
)
@click.option("--json", "json_out", type=_FILE, help="write every run here (JSON)")
@click.option("--plot", "plot_out", type=_FILE, help="write the allocation curve here (PNG)")
def alibaba(
    nodes_csv: Path,
    pods_csv: Path,
    placers: tuple[str, ...],
    seeds: int,
    first_seed: int,
    target: float,
    order: str,
    node_order: str,
    quantize: bool,
    paper: bool,
    popularity: float,
    limit: int | None,
    batch: int,
    time_limit: float,
    workers: int,
    json_out: Path | None,
    plot_out: Path | None,
) -> None:
    """Replay the Alibaba openb trace with each placer over SEEDS seeds (the FGD paper's
    protocol as gangplan runs it: pods in creation order, never leaving, then random pods
    of the list up to 130% of the GPUs; the share of GPUs allocated at 100% and 130%
    arrived)."""
    for out in (json_out, plot_out):
        guard_output(out, nodes_csv, pods_csv, kind=None)
    if paper:
        order, node_order, quantize = "shuffle", "shuffle", True
    cfg = ReplayConfig(
        target=target,
        order=order,  # type: ignore[arg-type]
        node_order=node_order,  # type: ignore[arg-type]
        quantize=quantize,
        popularity=popularity,
        limit=limit,
        batch=batch,
        time_limit_s=time_limit,
        workers=workers,
    )
    with user_errors(counted=False):
        nodes = read_openb_nodes(nodes_csv)
        pods = read_openb_pods(pods_csv)
    results: list[ReplayResult] = []
    for placer in placers or ("greedy", "fgd", "topology-fit"):
        for seed in range(first_seed, first_seed + seeds):
            r = replay_pods(nodes, pods, placer, seed, cfg, progress=_progress(placer, seed))
            results.append(r)
            click.echo(run_line(r), err=True)
    header, rows = summary_rows(summarize(results))
    title = f"{pods_csv.name} on {nodes_csv.name}: GPUs allocated (mean ± std)"
    if sys.stdout.isatty():
        table = Table(title=title)
        for h in header:
            table.add_column(h)
        for row in rows:
            table.add_row(*row)
        Console(highlight=False, markup=False, emoji=False).print(table)
    else:  # piped: plain lines at 80 columns, a block per placer (--json for programs)
        for line in summary_text(header, rows, title):
            click.echo(line)
    with user_errors(counted=False):
        if json_out is not None:
            write_output(json_out, json.dumps([result_data(r) for r in results], indent=1) + "\n")
            click.echo(f"wrote {json_out}", err=True)
        if plot_out is not None:
            write_plot(results, plot_out, f"{pods_csv.stem} on {nodes_csv.stem}")
            click.echo(f"wrote {plot_out}", err=True)
