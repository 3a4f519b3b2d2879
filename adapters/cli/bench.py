"""``gangplan bench``: parse, call :func:`~gangplan.adapters.bench.suites.run_suite`, write,
render."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
from rich.console import Console

from gangplan.adapters.cli.common import UserError, main

__all__ = ["bench"]


@main.command()
@click.option(
    "--suite",
    type=click.Choice(["small", "standard", "large"]),
    default="small",
    show_default=True,
    help="which instances and CP-SAT time limits",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-out"),
    show_default=True,
    help="folder for report.md, results.csv and the plots",
)
@click.option(
    "--data",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="the real traces (default: $GANGPLAN_SHARED_DATA or ../shared/data)",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=2,
    show_default=True,
    help="CP-SAT search workers",
)
@click.option("--no-progress", is_flag=True, help="no progress bar")
@click.option(
    "--replay-seeds",
    type=click.IntRange(0, 100),
    default=None,
    help="seeds of each one-pod placer in the replay (default: the suite's)",
)
@click.option(
    "--replay-cpsat-seeds",
    type=click.IntRange(0, 100),
    default=None,
    help="seeds of CP-SAT's cycles in the replay (default: the suite's)",
)
@click.option(
    "--deterministic",
    is_flag=True,
    help=(
        "CP-SAT's cycles in deterministic mode: one worker, the budget counted in "
        "deterministic seconds, not wall time (reproducible plans; for tests)"
    ),
)
@click.option(
    "--preemption",
    is_flag=True,
    help=(
        "run the preemption section instead (evicted GPUs per admitted high-priority GPU, "
        "CP-SAT against the baselines' greedy preemption); writes DIR/preemption.md"
    ),
)
@click.option(
    "--replan",
    is_flag=True,
    help=(
        "run the replan section instead (largest placeable 8-GPU-pod gang and stranded GPUs "
        "per move budget on fat-trees at 80% load; whole GPUs recovered per moved pod on "
        "openb replayed to 100%); writes DIR/replan.md"
    ),
)
def bench(
    suite: str,
    out: Path,
    data: Path | None,
    workers: int,
    no_progress: bool,
    replay_seeds: int | None,
    replay_cpsat_seeds: int | None,
    deterministic: bool,
    preemption: bool,
    replan: bool,
) -> None:
    """Run every placer on every instance of a suite; write DIR/report.md, results.csv, plots.

    The outputs are rewritten after each instance and replay run, so a long run leaves a
    partial report. Exit 1 if any plan fails the verifier or a placer raises; unmet targets
    are reported, not errors.
    """
    if replan:
        _replan_section(suite, out, data, workers)
        return
    if preemption:
        from gangplan.adapters.bench.preemption import render_rows, run_section
        from gangplan.adapters.files import write_output

        out.mkdir(parents=True, exist_ok=True)
        rows = run_section(suite, workers)
        text = "# Preemption\n\n" + render_rows(rows)
        write_output(out / "preemption.md", text)
        click.echo(text, nl=False)
        click.echo(f"wrote {out / 'preemption.md'}")
        bad = [
            f"{r.instance} cpsat: {r.first_violation}"
            for r in rows
            if r.placer == "cpsat" and not r.valid
        ]
        if bad:
            raise UserError(bad)
        return
    from gangplan.adapters.bench.report import write_outputs
    from gangplan.adapters.bench.suites import SUITES, evaluate_targets, run_suite

    err = Console(stderr=True, highlight=False)
    chosen = SUITES[suite]
    if chosen.replay is not None and (replay_seeds, replay_cpsat_seeds) != (None, None):
        replay = dataclasses.replace(
            chosen.replay,
            seeds=chosen.replay.seeds if replay_seeds is None else replay_seeds,
            cpsat_seeds=chosen.replay.cpsat_seeds
            if replay_cpsat_seeds is None
            else replay_cpsat_seeds,
        )
        chosen = dataclasses.replace(chosen, replay=replay)
    result = run_suite(
        chosen,
        data_dir=data,
        workers=workers,
        console=err,
        progress=not no_progress,
        checkpoint=lambda partial: write_outputs(partial, out),
        deterministic=deterministic,
    )
    paths = write_outputs(result, out)
    for path in paths:
        click.echo(f"wrote {path}")
    for name, why in result.skipped:
        click.echo(f"skipped {name}: {why}")
    for t in evaluate_targets(result):
        mark = "not measured" if t.met is None else ("met" if t.met else "NOT met")
        click.echo(f"target {mark}: {t.text}")
    errors = [
        *(
            f"{r.instance.name} {r.placer}: {r.violations[0]}"
            for r in result.runs
            if not r.verified
        ),
        *(f"{what}: {why}" for what, why in result.errors),
    ]
    if errors:
        raise UserError(errors)


def _replan_section(suite: str, out: Path, data: Path | None, workers: int) -> None:
    """``bench --replan``: the fat-tree rows, then openb's (skipped with a note without the
    trace), written to DIR/replan.md after each part."""
    from gangplan.adapters.bench.replan import openb_rows, render_rows, run_section
    from gangplan.adapters.bench.suites import default_data_dir
    from gangplan.adapters.files import write_output

    out.mkdir(parents=True, exist_ok=True)
    rows = run_section(suite, workers)
    text = "# Replan\n\n" + render_rows(rows)
    write_output(out / "replan.md", text)
    if suite != "small":
        more, note = openb_rows(data if data is not None else default_data_dir())
        if note is not None:
            text += f"\nopenb skipped: {note}\n"
        else:
            rows += more
            text = "# Replan\n\n" + render_rows(rows)
        write_output(out / "replan.md", text)
    click.echo(text, nl=False)
    click.echo(f"wrote {out / 'replan.md'}")
    bad = [f"{r.instance}: the move plan fails its verifier" for r in rows if not r.valid]
    if bad:
        raise UserError(sorted(set(bad)))
