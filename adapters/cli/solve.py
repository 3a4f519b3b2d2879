"""The ``gangplan`` command line (click): parses options, calls, renders. No logic lives here.

User mistakes (a missing file, a bad field, an unknown option value) end with a message
naming the file, the object and the field, and exit code 1 — never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from gangplan.adapters.cli.common import OUTPUT, SECONDS
from gangplan.adapters.files import InputError, load_plan, load_snapshot

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])


err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def user_errors(func: F) -> F:
    """Turn input errors into ``file: path: message`` lines on stderr and exit 1."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except InputError as err:
            for line in err.lines():
                click.echo(f"error: {line}", err=True)
            n = len(err.problems)
            click.echo(f"{n} problem{'s' if n != 1 else ''} found", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def echo_warnings(warnings: list[str]) -> None:
    for w in warnings:
        click.echo(f"warning: {w}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gangplan")
def main() -> None:
    """gangplan: gang-atomic, RDMA-local, fair batch placement for Kubernetes GPU clusters."""


@main.command()
@click.argument("instance", type=click.Path(dir_okay=False, path_type=Path), required=False)
@user_errors
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
@user_errors
def schema(output: Path | None) -> None:
    """Print the instance file's JSON Schema (generated from the models)."""
    from gangplan.models import InstanceFile

    text = json.dumps(InstanceFile.model_json_schema(by_alias=True), indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        from gangplan.adapters.files import write_text_atomically

        write_text_atomically(output, text)
        click.echo(f"wrote {output}")


@main.command()
@click.argument("instance", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option(
    "--time-limit",
    "time_limit",
    type=SECONDS,
    default=10.0,
    show_default=True,
    help=(
        "CP-SAT budget in seconds, all tiers; the baseline placers that seed it and the "
        "pending reasons run on top (at 2,000+ nodes they add several seconds)"
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
@click.option(
    "--placer",
    type=click.Choice(["cpsat", "greedy", "topology-fit", "fgd"]),
    default="cpsat",
    show_default=True,
)
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
@user_errors
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
        try:
            result = run_baseline(snapshot, placer, prev)
        except KeyError:
            raise click.UsageError(f"placer {placer!r} is not available in this build") from None
    if output is not None:
        write_plan(result.plan, output)
    if fmt == "table":
        render_plan(
            snapshot,
            result.plan,
            Console(highlight=False, width=None if sys.stdout.isatty() else 200),
        )
        if output is not None:
            click.echo(f"plan written to {output}")
    elif fmt == "bindings":
        from gangplan.adapters.kube.bindings import bindings_document, dump_bindings

        # one YAML document per API body, in call order (kubectl and yaml tools read it)
        click.echo(dump_bindings(bindings_document(snapshot, result.plan)), nl=False)
    else:
        click.echo(dump_data(plan_data(result.plan), fmt), nl=False)


@main.command()
@click.argument("instance", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("plan", type=click.Path(dir_okay=False, path_type=Path))
@user_errors
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
        click.echo(f"{len(violations)} violations", err=True)
        sys.exit(1)
    click.echo("plan is valid")


# Command groups defined in their own modules, imported last (they import nothing from here).
# Importing cli_traces also registers `convert alibaba-gpu` and `convert jobs-trace`.
import gangplan.adapters.cli.k8s  # noqa: E402, F401  (registers `convert k8s`)
from gangplan.adapters.cli.convert import convert  # noqa: E402
from gangplan.adapters.cli.traces import generate  # noqa: E402

main.add_command(convert)
main.add_command(generate)
main.add_command(__import__("gangplan.adapters.cli.bench", fromlist=["bench"]).bench)
main.add_command(__import__("gangplan.adapters.cli.replay", fromlist=["replay"]).replay)


if __name__ == "__main__":  # pragma: no cover
    main()
