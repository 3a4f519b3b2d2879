"""``gangplan simulate``: parse options, run the sweep, write the outputs, print a summary.

The simulator itself is :mod:`gangplan.adapters.sim` (which imports nothing of the command
line). User mistakes (a missing trace, a bad row, a bad window, a cluster without GPUs) end
with ``error:`` lines naming the file, the row and the field, and exit code 1 (bad option
values: click's usage error, exit 2) — never a traceback; as every command, through
:class:`~gangplan.adapters.cli.common.UserError`. Durations (``--period``, ``--time-limit``,
``--jitter``, ``--horizon``, ``--reserve-after``) and ``--window`` are read by the command
line's shared :class:`~gangplan.adapters.cli.common.Duration` and
:data:`~gangplan.adapters.cli.common.WINDOW`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from gangplan.adapters.cli.common import (
    WINDOW,
    Duration,
    UserError,
    echo_warnings,
    main,
    parse_seconds,
    user_errors,
)
from gangplan.adapters.files import InputError
from gangplan.solver.cycle import PLACERS

__all__ = ["simulate"]

F = TypeVar("F", bound=Callable[..., Any])

DURATION = Duration()
"""A simulated time > 0 (``60``, ``5m``, ``7d``)"""

CPSAT_SECONDS = Duration(max_s=86_400)
"""CP-SAT's seconds per cycle: > 0 and at most a day, as solve's ``--time-limit``"""


def _errors(func: F) -> F:
    """User mistakes (input errors) and failed runs become the command line's
    ``UserError`` (``error:`` lines, exit 1)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from gangplan.adapters.sim.engine import SimulationError
        from gangplan.adapters.sim.sweep import RayMissing, SweepError

        try:
            with user_errors():
                return func(*args, **kwargs)
        except (SimulationError, SweepError, RayMissing) as err:
            raise UserError([str(err)]) from None

    return wrapper  # type: ignore[return-value]


def _slowdowns(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> Any:
    from gangplan.adapters.sim.speed import Slowdown

    try:
        return tuple(Slowdown.parse(v) for v in value) or (Slowdown(),)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def _reserve_afters(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> Any:
    out: list[float | None] = []
    for v in value:
        if v.strip().lower() in ("off", "none"):
            out.append(None)
        else:
            try:
                out.append(parse_seconds(v, zero_ok=True))
            except ValueError as err:
                raise click.BadParameter(str(err)) from None
    return tuple(dict.fromkeys(out)) or (None,)


def _policy_name(slowdown: Any, reserve_after: float | None, elastic: bool = False) -> str:
    parts = [] if slowdown.off else [f"slow({slowdown.label})"]
    if reserve_after is not None:
        parts.append(f"reserve({reserve_after:g}s)")
    if elastic:
        parts.append("elastic")
    return "+".join(parts) or "base"


@main.command("simulate")
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--cluster",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="an instance file (its nodes, levels, layouts, queues), or Philly's "
    "cluster_machine_list (recognised by its header)",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["philly", "itp"]),
    default=None,
    help="trace format (default: itp if the header names submission_time, else philly)",
)
@click.option(
    "--placer",
    "placers",
    type=click.Choice(PLACERS),
    multiple=True,
    help="repeat for several (default: greedy)",
)
@click.option(
    "--period",
    type=DURATION,
    default="60",
    show_default=True,
    help="simulated time between cycles (s, or 5m, 1h)",
)
@click.option(
    "--window",
    type=WINDOW,
    default=None,
    help="START:END from the trace's zero, e.g. 49d:56d (jobs arriving inside)",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="first N jobs only")
@click.option("--seeds", type=click.IntRange(1, 1000), default=1, show_default=True)
@click.option("--first-seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("simulate-out"),
    show_default=True,
    help="folder for report.md, results.csv, groups.csv and the plots",
)
@click.option(
    "--slowdown",
    "slowdowns",
    multiple=True,
    callback=_slowdowns,
    help="spread slowdown: off, or leaf=F,spine=G[,source=TEXT] (each a policy; repeat to "
    "sweep; default off)",
)
@click.option(
    "--reserve-after",
    "reserve_afters",
    multiple=True,
    callback=_reserve_afters,
    help="reservations with backfill for gangs pending longer than this (s, or 10m), or off "
    "(repeat to sweep, e.g. --reserve-after off --reserve-after 10m; default off)",
)
@click.option(
    "--estimates",
    type=click.Choice(["none", "exact"]),
    default="none",
    show_default=True,
    help="jobs' expected durations for backfill: none, or exact (the trace's, a perfect estimate)",
)
@click.option(
    "--elastic",
    is_flag=True,
    help="multi-GPU jobs are elastic gangs, minimum half their GPUs: they grow into free "
    "GPUs and shrink when others wait (rate linear in size, work conserved)",
)
@click.option("--ray", "ray_address", default=None, help="run the sweep on Ray (local: start one)")
@click.option(
    "--workers", type=click.IntRange(1, 256), default=None, help="worker processes (at most 256)"
)
@click.option(
    "--time-limit",
    type=CPSAT_SECONDS,
    default="1",
    show_default=True,
    help="CP-SAT s per cycle (at most 86400)",
)
@click.option("--search-workers", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--deterministic", is_flag=True, help="CP-SAT in deterministic mode (repeatable)")
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=8, show_default=True)
@click.option(
    "--rack-size",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="machines per synthetic rack (Philly's machine list only)",
)
@click.option(
    "--jitter", type=Duration(zero_ok=True), default="0", help="seeded arrival jitter, max s"
)
@click.option("--horizon", type=DURATION, default=None, help="stop at this simulated time")
@click.option("--verify", is_flag=True, help="check every plan with the independent verifier")
@click.option("--no-plots", is_flag=True)
@_errors
def simulate(
    trace: Path,
    cluster: Path,
    fmt: str | None,
    placers: tuple[str, ...],
    period: float,
    window: tuple[float, float] | None,
    limit: int | None,
    seeds: int,
    first_seed: int,
    out: Path,
    slowdowns: tuple[Any, ...],
    reserve_afters: tuple[float | None, ...],
    estimates: str,
    elastic: bool,
    ray_address: str | None,
    workers: int | None,
    time_limit: float,
    search_workers: int,
    deterministic: bool,
    gpus_per_node: int,
    rack_size: int,
    jitter: float,
    horizon: float | None,
    verify: bool,
    no_plots: bool,
) -> None:
    """Replay the job TRACE on a cluster over simulated time (arrivals, cycles, departures)
    and write report.md, results.csv, groups.csv and plots to --out."""
    from gangplan.adapters.sim.cluster import load_cluster
    from gangplan.adapters.sim.engine import SimConfig
    from gangplan.adapters.sim.jobs import load_input
    from gangplan.adapters.sim.report import environment, write_outputs
    from gangplan.adapters.sim.sweep import Policy, run_sweep, sweep_configs

    started = time.monotonic()
    env = environment()  # the commit and the load when the runs start
    spec = load_cluster(cluster, rack_size=rack_size)
    inp = load_input(trace, spec, fmt=fmt, window=window, limit=limit, gpus_per_node=gpus_per_node)
    echo_warnings(inp.warnings)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(str(out), [_problem(f"cannot create the folder: {err}")]) from None
    base = SimConfig(
        period_s=period,
        time_limit_s=time_limit,
        workers=search_workers,
        deterministic=deterministic,
        jitter_s=jitter,
        verify=verify,
        horizon_s=horizon,
        estimates=estimates,
        elastic=elastic,
    )
    policies = [
        Policy(_policy_name(s, ra, elastic), (("slowdown", s), ("reserve_after_s", ra)))
        for s in slowdowns
        for ra in reserve_afters
    ]
    configs = sweep_configs(
        base, placers or ("greedy",), range(first_seed, first_seed + seeds), policies
    )
    click.echo(
        f"{len(inp.jobs):,} jobs on {spec.source} ({len(inp.cluster.nodes)} nodes, "
        f"{inp.gpus:,} GPUs); {len(configs)} run{'s' if len(configs) != 1 else ''}",
        err=True,
    )

    def done(r: Any) -> None:
        click.echo(f"  done {r.label}: {len(r.cycles):,} cycles, {r.wall_time_s:.1f} s", err=True)

    results = run_sweep(inp, configs, workers=workers, ray_address=ray_address, done=done)
    paths = write_outputs(
        results, out, elapsed_s=time.monotonic() - started, plots=not no_plots, env=env
    )
    _summary(results)
    for p in paths:
        click.echo(f"wrote {p}")


def _problem(message: str) -> Any:
    from gangplan.models import Problem

    return Problem("", message)


def _summary(results: list[Any]) -> None:
    from gangplan.adapters.sim.metrics import run_metrics

    click.echo(
        "run | finished | JCT mean s | wait mean s | wait p99 s | util (window) | cycles "
        "| cycle p50/p99 s | wall s"
    )
    for r in results:
        m = run_metrics(r)

        def f(x: float | None, p: str = ".0f") -> str:
            return "n/a" if x is None else format(x, p)

        util = None if m.utilisation_window is None else 100 * m.utilisation_window
        click.echo(
            f"{r.label} | {m.finished:,}/{m.jobs:,} | {f(m.jct.mean)} | {f(m.wait.mean)} | "
            f"{f(m.wait.p99)} | {f(util, '.1f')}% "
            f"| {m.cycles:,} | {f(m.cycle_p50_s, '.3f')}/{f(m.cycle_p99_s, '.3f')} | "
            f"{r.wall_time_s:.1f}"
        )
