"""``gangplan validate``, ``schema``, ``solve`` and ``verify``: an instance file in, a plan
(or its check) out. Each parses options, calls :mod:`gangplan.solver`, renders."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console

from gangplan.adapters.cli.common import (
    OUTPUT,
    SECONDS,
    UserError,
    echo_warnings,
    main,
    user_errors,
)
from gangplan.adapters.files import load_plan, load_snapshot
from gangplan.solver.cycle import PLACERS

__all__ = ["schema", "solve", "validate", "verify"]

_INSTANCE = click.Path(dir_okay=False, path_type=Path)


@main.command()
@click.argument("instance", type=_INSTANCE, required=False)
@user_errors()
def validate(instance: Path | None) -> None:
    """Check an instance file and list every problem at once (exit 1 if any)."""
    snapshot, warnings = load_snapshot(instance)
    echo_warnings(warnings)
    gpus = sum(n.allocatable.get(snapshot.gpu, 0) for n in snapshot.nodes) // 1000
    click.echo(
        f"{instance or 'default instance'}: valid — {len(snapshot.nodes)} nodes, {gpus} GPUs, "
        f"{len(snapshot.queues)} queues, {len(snapshot.gangs)} pending gangs, "
        f"{len(snapshot.running)} running pods, {len(warnings)} warnings"
    )


@main.command()
@click.option("-o", "--output", type=OUTPUT, help="write here")
@user_errors()
def schema(output: Path | None) -> None:
    """Print the instance file's JSON Schema (generated from the models)."""
    from gangplan.adapters.files import write_text_atomically
    from gangplan.models import InstanceFile

    text = json.dumps(InstanceFile.model_json_schema(by_alias=True), indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        write_text_atomically(output, text)
        click.echo(f"wrote {output}")


@main.command()
@click.argument("instance", type=_INSTANCE, required=False)
@click.option(
    "--time-limit",
    "time_limit",
    type=SECONDS,
    default=10.0,
    show_default=True,
    help=(
        "budget of the whole cycle in seconds: indexing, baselines, model, search, checks "
        "and pending reasons (Ctrl-C during the search stops it and keeps the best verified "
        "plan so far; a second Ctrl-C aborts)"
    ),
)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=64),
    default=2,
    show_default=True,
    help="CP-SAT search workers",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=2**31 - 1),
    default=0,
    show_default=True,
    help="CP-SAT random seed",
)
@click.option(
    "--deterministic",
    is_flag=True,
    help="one worker, fixed seed, deterministic time limit (repeatable runs)",
)
@click.option("--placer", type=click.Choice(PLACERS), default="cpsat", show_default=True)
@click.option(
    "--previous",
    type=click.Path(dir_okay=False, path_type=Path),
    help="the previous cycle's plan (stability)",
)
@click.option(
    "-o",
    "--output",
    type=OUTPUT,
    help="write the plan here (YAML, or JSON by suffix); passes `gangplan verify`",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "yaml", "bindings"]),
    default="table",
    show_default=True,
    help="what to print",
)
@user_errors()
def solve(
    instance: Path | None,
    time_limit: float,
    workers: int,
    seed: int,
    deterministic: bool,
    placer: str,
    previous: Path | None,
    output: Path | None,
    fmt: str,
) -> None:
    """Plan one scheduling cycle for INSTANCE (default: the embedded default instance)."""
    from gangplan.adapters.files import dump_data, plan_data, write_plan
    from gangplan.adapters.kube.bindings import bindings_document, dump_bindings
    from gangplan.adapters.render import render_plan
    from gangplan.solver.cycle import run_baseline, solve_cycle
    from gangplan.solver.result import SolverConfig

    snapshot, warnings = load_snapshot(instance)
    echo_warnings(warnings)
    prev = load_plan(previous) if previous is not None else None
    if placer == "cpsat":
        cfg = SolverConfig(
            time_limit_s=time_limit, num_workers=workers, seed=seed, deterministic=deterministic
        )
        result = solve_cycle(snapshot, prev, cfg)
    else:
        result = run_baseline(snapshot, placer, prev)
    if output is not None:
        write_plan(result.plan, output)
    if fmt == "table":
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
        render_plan(snapshot, result.plan, console)
        if output is not None:
            click.echo(f"plan written to {output}")
    elif fmt == "bindings":
        # one YAML document per API body, in call order (kubectl and yaml tools read it)
        click.echo(dump_bindings(bindings_document(snapshot, result.plan)), nl=False)
    else:
        click.echo(dump_data(plan_data(result.plan), fmt), nl=False)


@main.command()
@click.argument("instance", type=_INSTANCE)
@click.argument("plan", type=_INSTANCE)
@user_errors()
def verify(instance: Path, plan: Path) -> None:
    """Check PLAN against every hard constraint of INSTANCE; print violations and the score."""
    from gangplan.solver.score import score
    from gangplan.solver.verify import verify as run_verify

    snapshot, warnings = load_snapshot(instance)
    echo_warnings(warnings)
    p = load_plan(plan)
    violations = run_verify(snapshot, p)
    for v in violations:
        click.echo(f"violation: {v}")
    click.echo(f"score: {score(snapshot, p)}")
    if violations:
        raise UserError([], f"{len(violations)} violations")
    click.echo("plan is valid")
