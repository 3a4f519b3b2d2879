"""``gangplan validate``, ``schema``, ``solve`` and ``verify``: an instance file in, a plan
(or its check) out. Each parses options, calls :mod:`gangplan.solver`, renders."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from gangplan.adapters.cli.common import (
    OUTPUT,
    SECONDS,
    UserError,
    echo_warnings,
    fill80,
    guard_output,
    main,
    move_cap_options,
    user_errors,
)
from gangplan.adapters.files import STDOUT, load_any_plan, load_plan, load_snapshot
from gangplan.adapters.kube.bindings import Withheld
from gangplan.adapters.numbers import counted
from gangplan.models import MovePlan, Plan, Snapshot, WaveLimits
from gangplan.solver.cycle import PLACERS
from gangplan.solver.result import MAX_SEED

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
    counts = ", ".join(
        counted(n, w)
        for n, w in (
            (len(snapshot.nodes), "node"),
            (gpus, "GPU"),
            (len(snapshot.queues), "queue"),
            (len(snapshot.gangs), "pending gang"),
            (len(snapshot.running), "running pod"),
            (len(warnings), "warning"),
        )
    )
    click.echo(fill80(f"{instance or 'default instance'}: valid — {counts}"))


@main.command()
@click.option("-o", "--output", type=OUTPUT, help="write here")
@user_errors()
def schema(output: Path | None) -> None:
    """Print the instance file's JSON Schema (generated from the models)."""
    from gangplan.adapters.files import write_output
    from gangplan.models import InstanceFile

    guard_output(output, kind=None)
    text = json.dumps(InstanceFile.model_json_schema(by_alias=True), indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        write_output(output, text)
        if str(output) != STDOUT:  # -o -: the schema alone on stdout
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
        "and pending reasons, not reading the instance or writing the plan; with "
        "--deterministic, in CP-SAT's deterministic seconds (work counted, not wall time: "
        "the wall time may be up to 30 times longer) (Ctrl-C during "
        "the search stops it and keeps the best verified "
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
    type=click.IntRange(min=0, max=MAX_SEED),
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
    "--preemption",
    is_flag=True,
    help=(
        "let pending gangs evict running gangs as their queues' preemption policies allow "
        "(default: as the instance says, off unless it sets preemption.enabled)"
    ),
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
@click.option(
    "--include-predicted",
    is_flag=True,
    help="bindings: also bind pods predicted from workloads whose controllers name pods "
    "deterministically (Volcano Jobs, training-operator jobs, StatefulSets)",
)
@click.option(
    "--bind-any-scheduler",
    is_flag=True,
    help="bindings: also bind pods whose spec.schedulerName names another scheduler "
    "(default: only default-scheduler and gangplan pods; binding others races them)",
)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="table: list every gang and queue (default: at most 50 rows per section, and no "
    "admitted single-pod gangs once there are more than 50 gangs)",
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
    preemption: bool,
    output: Path | None,
    fmt: str,
    include_predicted: bool,
    bind_any_scheduler: bool,
    show_all: bool,
) -> None:
    """Plan one scheduling cycle for INSTANCE (default: the embedded default instance)."""
    from gangplan.adapters.files import dump_data, plan_data, write_plan
    from gangplan.adapters.kube.bindings import (
        bindings_document,
        dump_bindings,
        eviction_documents,
        select_bindings,
    )
    from gangplan.adapters.render import plan_lines
    from gangplan.solver.cycle import run_baseline, solve_cycle
    from gangplan.solver.result import SolverConfig

    guard_output(output, instance, previous, kind="Plan")
    snapshot, warnings = load_snapshot(instance)
    echo_warnings(warnings)
    if preemption:
        snapshot = snapshot.with_preemption()
    prev = load_plan(previous) if previous is not None else None
    if placer == "cpsat":
        cfg = SolverConfig(
            time_limit_s=time_limit, num_workers=workers, seed=seed, deterministic=deterministic
        )
        result = solve_cycle(snapshot, prev, cfg)
    else:
        result = run_baseline(snapshot, placer, prev)
        refuse_unverified(snapshot, result.plan, placer)
    # everything that is printed is made before the plan is written, so that nothing can
    # fail after -o has replaced a file
    # the terminal's width; 80 columns (or $COLUMNS) when piped
    console = Console(highlight=False, markup=False, emoji=False)
    lines: list[tuple[str, str]] = []
    text = ""
    if fmt == "table":
        lines = plan_lines(
            snapshot,
            result.plan,
            console.width,
            show_all=show_all,
            time_limit_s=time_limit if placer == "cpsat" else None,
            deterministic=deterministic,
        )
    elif fmt == "bindings":
        # one YAML document per API body, in call order (kubectl and yaml tools read it)
        chosen = select_bindings(
            snapshot,
            result.plan,
            include_predicted=include_predicted,
            any_scheduler=bind_any_scheduler,
        )
        # with preemption: the evictions and the preemptors' nominations first
        text = dump_bindings(
            eviction_documents(result.plan)
            + bindings_document(
                snapshot,
                result.plan,
                include_predicted=include_predicted,
                any_scheduler=bind_any_scheduler,
            )
        )
        echo_warnings(withheld_warnings(chosen.withheld))
    else:
        text = dump_data(plan_data(result.plan), fmt)
    if output is not None:
        write_plan(result.plan, output)
    if fmt == "table":
        for line, style in lines:
            console.print(Text(line, style=style), soft_wrap=True)
        if output is not None and str(output) != STDOUT:
            click.echo(f"plan written to {output}")
    else:
        click.echo(text, nl=False)


def refuse_unverified(snapshot: Snapshot, plan: Plan, placer: str) -> None:
    """Every plan ``solve`` prints or writes passes ``gangplan verify``: a baseline's plan
    that does not (``solve_cycle`` only returns verified plans) is refused, nothing written.

    Raises:
        click.ClickException: the first violations, and what to run instead.
    """
    from gangplan.solver.judges.verify import verify as run_verify

    violations = run_verify(snapshot, plan)
    if violations:
        shown = "\n".join(f"  {v}" for v in violations[:5])
        more = f"\n  and {len(violations) - 5} more" if len(violations) > 5 else ""
        raise click.ClickException(
            f"placer {placer}: its plan fails the verifier, so it is not written:\n{shown}"
            f"{more}\n(--placer cpsat returns only verified plans)"
        )


def withheld_warnings(withheld: list[Withheld], examples: int = 5) -> list[str]:
    """One warning per reason a placed gang gets no Binding, naming the first ``examples``
    gangs and counting the rest."""
    by_reason: dict[str, list[Withheld]] = {}
    for w in withheld:
        by_reason.setdefault(w.reason, []).append(w)
    out = []
    for reason, ws in by_reason.items():
        names = ", ".join(w.gang for w in ws[:examples])
        more = f" and {len(ws) - examples} more" if len(ws) > examples else ""
        pods = sum(w.pods for w in ws)
        out.append(
            f"no Binding for {pods} placed pod{'s' if pods != 1 else ''} of {len(ws)} "
            f"gang{'s' if len(ws) != 1 else ''} ({names}{more}): {reason}"
        )
    return out


VIOLATION_LINES = 50
"""Violations ``verify`` prints as text; the count of the rest follows (a plan checked
against the wrong instance has thousands)."""


@main.command()
@click.argument("paths", metavar="[INSTANCE] PLAN", nargs=-1, type=_INSTANCE)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: the violations and the raw score tuple, for programs",
)
@click.option(
    "--preemption", is_flag=True, help="preemption on, as for `gangplan solve --preemption`"
)
@move_cap_options
@user_errors()
def verify(
    paths: tuple[Path, ...],
    fmt: str,
    preemption: bool,
    max_moving_per_node: int,
    max_moving_per_namespace: int | None,
) -> None:
    """Check PLAN against every hard constraint of INSTANCE (default: the embedded default
    instance); print the violations and the score (exit 1 if any violation). A move plan
    (kind: MovePlan, from gangplan replan -o) is replayed wave by wave: every wave's
    evictions and placements, then its final plan, against INSTANCE and the caps given here
    (never the plan's own)."""
    from gangplan.adapters.render import evicted_by_class, score_lines
    from gangplan.solver.judges.score import score
    from gangplan.solver.judges.verify import verify as run_verify
    from gangplan.topology import build_topology

    if len(paths) not in (1, 2):
        raise click.UsageError(f"expected [INSTANCE] PLAN, got {len(paths)} paths")
    instance, plan = (None, paths[0]) if len(paths) == 1 else paths
    snapshot, warnings = load_snapshot(instance)
    echo_warnings(warnings)
    if preemption:
        snapshot = snapshot.with_preemption()
    p = load_any_plan(plan)
    if isinstance(p, MovePlan):
        limits = WaveLimits(
            max_moving_per_node=max_moving_per_node,
            max_moving_per_namespace=max_moving_per_namespace,
        )
        _verify_moves(snapshot, p, limits, instance, plan, fmt)
        return
    violations = run_verify(snapshot, p)
    sc = score(snapshot, p)
    if fmt == "json":
        data = {
            "instance": str(instance) if instance is not None else "default instance",
            "plan": str(plan),
            "valid": not violations,
            "violations": [{"rule": v.rule, "message": v.message} for v in violations],
            "score": [[n, v] for n, v in sc.entries],
        }
        click.echo(json.dumps(data, indent=2))
    else:
        hint = _foreign_plan_hint(snapshot, p, instance)
        if hint:
            click.echo(textwrap.fill(hint, 80, subsequent_indent="  "))
        for v in violations[:VIOLATION_LINES]:
            click.echo(f"violation: {v}")
        if len(violations) > VIOLATION_LINES:
            click.echo(
                f"... and {len(violations) - VIOLATION_LINES:,} more violations "
                "(--format json lists every one)"
            )
        click.echo("score (higher is better; each line counts only where the ones above tie):")
        lowest = build_topology(snapshot).leaf_level or "leaf"
        evicted = evicted_by_class(snapshot, p)
        for line in score_lines(sc.entries, evicted=evicted, lowest_level=lowest):
            click.echo(
                textwrap.fill(
                    line,
                    80,
                    initial_indent="  ",
                    subsequent_indent="    ",
                    break_long_words=False,
                )
            )
    if violations:
        raise UserError([], f"{len(violations):,} violations")
    if fmt == "text":
        click.echo(f"plan is valid for {instance or 'the default instance'}")


def _verify_moves(
    snapshot: Snapshot,
    plan: MovePlan,
    limits: WaveLimits,
    instance: Path | None,
    path: Path,
    fmt: str,
) -> None:
    """``verify INSTANCE MOVES.yaml``: the move verifier's violations (exit 1 if any)."""
    from gangplan.solver.judges.verify_moves import verify_moves

    violations = verify_moves(snapshot, plan, limits=limits)
    which = str(instance) if instance is not None else "the default instance"
    if fmt == "json":
        data = {
            "instance": str(instance) if instance is not None else "default instance",
            "plan": str(path),
            "valid": not violations,
            "violations": [
                {"rule": v.rule, "wave": v.wave, "message": v.message} for v in violations
            ],
        }
        click.echo(json.dumps(data, indent=2))
    else:
        for v in violations[:VIOLATION_LINES]:
            click.echo(f"violation: {v}")
        if len(violations) > VIOLATION_LINES:
            click.echo(
                f"... and {len(violations) - VIOLATION_LINES:,} more violations "
                "(--format json lists every one)"
            )
        click.echo(
            f"move plan: {counted(len(plan.waves), 'wave')}, "
            f"{counted(plan.moved_gangs, 'gang')} ({counted(plan.moved_pods, 'pod')}) moved, "
            f"final plan of {counted(sum(1 for g in plan.final.gangs if g.admitted), 'gang')}"
        )
    if violations:
        raise UserError([], counted(len(violations), "violation"))
    if fmt == "text":
        click.echo(f"move plan is valid for {which}")


def _foreign_plan_hint(snapshot: Snapshot, plan: Plan, instance: Path | None) -> str:
    """One line when most of the plan's gangs and nodes are unknown to the instance, or most
    of the instance's gangs have no outcome in the plan: the plan was made for another one
    (e.g. verify PLAN alone checks the default instance; two generated instances share
    their gang and node names)."""
    gangs = {p.gang_key for p in plan.pods} | {o.key for o in plan.gangs}
    nodes = {p.node for p in plan.pods}
    names = len(gangs) + len(nodes)
    unknown = sum(1 for g in gangs if g not in snapshot.gang_by_key) + sum(
        1 for n in nodes if n not in snapshot.node_by_name
    )
    which = f"instance {instance}" if instance is not None else "the default instance"
    advice = "give its instance first: gangplan verify INSTANCE PLAN"
    if names and 2 * unknown > names:
        return (
            f"note: {unknown:,} of the plan's {names:,} gangs and nodes are unknown to {which}: "
            f"the plan does not seem to be for it; {advice}"
        )
    outcomes = {o.key for o in plan.gangs}
    missing = sum(1 for g in snapshot.gangs if g.key not in outcomes)
    if snapshot.gangs and 2 * missing > len(snapshot.gangs):
        return (
            f"note: {missing:,} of the {len(snapshot.gangs):,} pending gangs of {which} have no "
            f"outcome in the plan: the plan does not seem to be for it; {advice}"
        )
    return ""
