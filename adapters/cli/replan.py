"""``gangplan replan``: the cycle with running gangs allowed to move, the frontier of what
each move budget buys, and the move plan in waves (:mod:`gangplan.solver.replan`). Parses
options, calls, renders."""

from __future__ import annotations

from pathlib import Path

import click

from gangplan.adapters.cli.common import (
    OUTPUT,
    SECONDS,
    UserError,
    echo_warnings,
    guard_output,
    main,
    user_errors,
)
from gangplan.adapters.files import STDOUT, dump_data, load_snapshot, write_output
from gangplan.adapters.numbers import counted

__all__ = ["frontier_lines", "replan"]

_INSTANCE = click.Path(dir_okay=False, path_type=Path)


def frontier_lines(result: object) -> list[str]:
    """The frontier as a table: per move budget, what it buys; then the move plan, the
    final plan and the notes, each line within 80 columns."""
    from gangplan.solver.replan import ReplanResult

    assert isinstance(result, ReplanResult)
    cols = ("budget", "moved", "GPUs", "admitted", "largest", "stranded")
    head = " ".join(f"{c:>{w}}" for c, w in zip(cols, (6, 5, 5, 8, 7, 8), strict=True))
    where = f"one {result.leaf_level}" if result.leaf_level else "the cluster"
    out = _wrapped(
        "frontier per move budget (largest: GPUs of the largest gang of whole-node pods "
        f"that fits in {where}; stranded: free GPUs no such pod can use; score: its first "
        "entry that differs from budget 0's, most important first; fair-share gap: weight x "
        "percentage points of dominant share below the fair targets)",
        indent="",
    )
    out.append(head + "  score")
    level = result.leaf_level or "leaf"
    weight, final_weight = result.workload_weight
    base = result.frontier[0].score if result.frontier else None
    for p in result.frontier:
        row = (
            f"{p.budget:>6} {p.moved_gangs:>5} {p.moved_gpus:>5} {p.admitted:>8} "
            f"{p.largest_gang_gpus:>7} {p.stranded_gpus:>8}"
        )
        diff = _against(base, p.score, level, weight)
        out += [f"{row}  {diff}"] if len(row) + 2 + len(diff) <= 80 else [row, f"{'':>8}{diff}"]
    mp = result.move_plan
    left = f"; {counted(len(mp.left_out), 'move')} left out" if mp.left_out else ""
    out.append(
        f"move plan: {counted(mp.moved_gangs, 'gang')} ({counted(mp.moved_pods, 'pod')}) "
        f"in {counted(len(mp.waves), 'wave')}{left}"
    )
    for x in mp.left_out:
        out += _wrapped(f"  left out {x.gang}: {x.reason}", indent="    ")
    if result.final_score is not None:
        admitted = len({p.gang_key for p in mp.final.pods})
        diff = _against(result.base_score, result.final_score, level, final_weight)
        out += _wrapped(f"final plan: {counted(admitted, 'gang')} admitted; score: {diff}")
    if not result.movable:
        why = _why(result) if result.not_movable else "none runs"
        out += _wrapped(f"no running gang may move: {why}")
    elif result.not_movable:
        n = len(result.not_movable)
        out += _wrapped(f"{counted(n, 'gang')} not movable: " + _why(result))
    for note in result.notes:
        out += _wrapped(f"note: {note}")
    return out


def _against(base: object, score: object, level: str = "leaf", weight: int = 1) -> str:
    """``score``'s first entry that differs from ``base``'s, in a person's units
    (:func:`_entry`), or ``same``."""
    from gangplan.solver.judges.score import Score

    if not isinstance(base, Score) or not isinstance(score, Score) or base is score:
        return "-"
    was = dict(zip(base.names, base.values, strict=True))
    for name, value in zip(score.names, score.values, strict=True):
        if was.get(name, 0) != value:
            return _entry(name, was.get(name, 0), value, level, weight)
    for name, value in was.items():  # an entry only the base has
        if value and name not in score.names:
            return _entry(name, value, 0, level, weight)
    return "same"


def _entry(name: str, a: int, b: int, level: str, weight: int) -> str:
    """One score entry's change ``a -> b`` in a person's units (as
    :func:`gangplan.adapters.render.score_lines` converts them): fairness in weight x
    percentage points of dominant share (its unit is weight-milli x ppm), throughput in GPUs
    and pods, locality in extra domains, ``fragmentation.expected`` in GPUs (milli-GPU x
    weight over ``weight``, the workload's total weight), moves in GPUs and pods."""
    head, _, tail = name.partition(".")

    def num(x: float) -> str:
        return f"{x:,.1f}".removesuffix(".0")

    if head.startswith("p") and head[1:].lstrip("-").isdigit():
        if tail == "fairness":
            return f"{head} fair-share gap {num(-a / 1e7)} -> {num(-b / 1e7)}"
        if tail == "fairness_w0":
            return f"{head} weight-0 gap {num(-a / 1e4)} -> {num(-b / 1e4)}"
        if tail == "gpu_milli":
            return f"{head} GPUs admitted {num(a / 1000)} -> {num(b / 1000)}"
        if tail == "pods":
            return f"{head} pods admitted {a} -> {b}"
        if tail == "growth_gpu_milli":
            return f"{head} GPUs beyond minimums {num(a / 1000)} -> {num(b / 1000)}"
        if tail == "growth_pods":
            return f"{head} pods beyond minimums {a} -> {b}"
    units = {
        "fragmentation.expected": ("expected fragm.", -1 / 1000 / weight, " GPUs"),
        "fragmentation.gpu_nodes": ("partly used GPU nodes", -1, ""),
        "fragmentation.leaves": (f"partly used {level}s", -1, ""),
        "preemption.evicted_gpu_milli": ("GPUs moved", -1 / 1000, ""),
        "preemption.evicted_pods": ("pods moved", -1, ""),
        "preemption.recency": ("recency of the moved", 1, ""),
        "stability": ("pods off their previous node", -1, ""),
    }
    if name in units:
        label, k, unit = units[name]
        return f"{label} {num(a * k)} -> {num(b * k)}{unit}"
    if head == "locality":
        what = "preferred-level" if tail == "preferred" else tail
        return f"extra {what} domains {-a} -> {-b}"
    return f"{name} {a:,} -> {b:,}"


def _why(result: object) -> str:
    """The reasons gangs may not move, counted, naming the gangs a wave budget keeps."""
    from gangplan.solver.replan import ReplanResult

    assert isinstance(result, ReplanResult)
    by: dict[str, list[str]] = {}
    for key, why in result.not_movable.items():
        by.setdefault(why, []).append(key)
    parts = []
    for why, keys in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        named = (
            ""
            if why == "not preemptible"
            else f" ({', '.join(keys[:3])}{', ...' * (len(keys) > 3)})"
        )
        parts.append(f"{len(keys)} {why}{named}")
    return ", ".join(parts)


def _wrapped(line: str, indent: str = "  ") -> list[str]:
    """``line`` wrapped at 80 columns, continuation lines indented by ``indent``."""
    import textwrap

    return textwrap.wrap(
        line, 80, subsequent_indent=indent, break_on_hyphens=False, drop_whitespace=True
    )


@main.command()
@click.argument("instance", type=_INSTANCE, required=False)
@click.option(
    "--max-moved-gangs",
    type=click.IntRange(min=0),
    help="largest move budget (default: every movable gang)",
)
@click.option(
    "--max-moved-gpus", type=click.IntRange(min=0), help="GPUs moved at most, at every budget"
)
@click.option(
    "--max-moving-per-node",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="pods moving off one node per wave (Koordinator's default)",
)
@click.option(
    "--max-moving-per-namespace",
    type=click.IntRange(min=1),
    help="pods of one namespace moving per wave (default: no cap)",
)
@click.option(
    "--candidates",
    type=click.IntRange(min=1),
    help="running gangs offered to the model (default: every movable one)",
)
@click.option(
    "--pod-gpus",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="pod size of the frontier's largest gang",
)
@click.option(
    "--time-limit",
    type=SECONDS,
    default=20.0,
    show_default=True,
    help="seconds for the whole frontier",
)
@click.option("--deterministic", is_flag=True, help="one worker, deterministic time (for tests)")
@click.option("-o", "--output", type=OUTPUT, help="write the move plan (kind: MovePlan) here")
@user_errors()
def replan(
    instance: Path | None,
    max_moved_gangs: int | None,
    max_moved_gpus: int | None,
    max_moving_per_node: int,
    max_moving_per_namespace: int | None,
    candidates: int | None,
    pod_gpus: int,
    time_limit: float,
    deterministic: bool,
    output: Path | None,
) -> None:
    """Move running gangs of INSTANCE to make room: the frontier per move budget, and the
    move plan of the best one, in waves."""
    from gangplan.models import WaveLimits
    from gangplan.solver.replan import ReplanSettings
    from gangplan.solver.replan import replan as run
    from gangplan.solver.result import SolverConfig

    guard_output(output, instance, kind=None)
    snapshot, warnings = load_snapshot(instance)
    echo_warnings(warnings)
    settings = ReplanSettings(
        max_moved_gangs=max_moved_gangs,
        max_moved_gpus=max_moved_gpus,
        pod_gpus=pod_gpus,
        max_candidates=candidates,
        limits=WaveLimits(
            max_moving_per_node=max_moving_per_node,
            max_moving_per_namespace=max_moving_per_namespace,
        ),
        config=SolverConfig(time_limit_s=time_limit, deterministic=deterministic),
    )
    result = run(snapshot, settings)
    lines = frontier_lines(result)
    problems = [str(v) for v in result.violations] + result.plan_violations
    if problems:  # no budget's plan verifies, not even budget 0's: nothing is written
        for line in lines:
            click.echo(line)
        raise UserError(["no budget's move plan passes its verifier:", *problems])
    if output is not None:
        data = result.move_plan.model_dump(mode="json", by_alias=True, exclude_none=True)
        write_output(output, dump_data(data, "json" if output.suffix == ".json" else "yaml"))
    for line in lines:
        click.echo(line)
    if output is not None and str(output) != STDOUT:
        click.echo(f"move plan written to {output}")
