"""What ``gangplan bench`` writes: ``report.md``, ``results.csv``, ``queues.csv``,
``replay.csv`` and the PNG plots (:mod:`gangplan.adapters.bench.plots`).

:data:`METRICS` is the one list of per-run metrics: the CSV has a column for each, the
report a row for each in every instance's table, and the tests check both against it. The
score's entries follow, and for CP-SAT the bound and gap of each entry.

The report's summary gives CP-SAT's figures as ratios to the best baseline on the same
instance (the baseline of best score; for "lower is better" metrics a ratio below 1 is
CP-SAT's gain), and each benchmark target (a goal for the solver), met or not. The metric
formatting, the tables and the environment line are the reports' shared ones
(:mod:`gangplan.adapters.report`).
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from gangplan.adapters.bench.replay import cycles_text
from gangplan.adapters.bench.suites import (
    PUBLISHED_BEST_FIT,
    PUBLISHED_FGD,
    BenchResult,
    ReplayRun,
    Run,
    best_baseline,
    evaluate_targets,
    fallbacks,
)
from gangplan.adapters.report import (
    Metric,
    Value,
    csv_value,
    environment_line,
    markdown_table,
    plots_section,
)

__all__ = ["METRICS", "Metric", "write_csv", "write_outputs", "write_report"]


def _solve(attr: str) -> Callable[[Run], Value]:
    def get(r: Run) -> Value:
        s = r.metrics.solve
        return None if s is None else getattr(s, attr)

    return get


def _by_priority(r: Run) -> str:
    return ", ".join(f"p{c} {a}/{t}" for c, a, t in r.metrics.gangs)


METRICS: tuple[Metric[Run], ...] = (
    Metric("status", "status", "", lambda r: r.status, kind="text"),
    Metric("verified", "plan verified", "", lambda r: "yes" if r.verified else "NO", kind="text"),
    Metric("wall_time_s", "wall time", "s", lambda r: r.wall_time_s),
    Metric("gpus_placed", "GPUs placed", "GPUs", lambda r: r.metrics.gpus_placed),
    Metric(
        "placed_of_demand",
        "GPUs placed / demand",
        "%",
        lambda r: r.metrics.placed_of_demand,
        kind="share",
    ),
    Metric(
        "placed_of_free",
        "GPUs placed / free",
        "%",
        lambda r: r.metrics.placed_of_free,
        kind="share",
    ),
    Metric(
        "gangs_admitted",
        "gangs admitted",
        "gangs",
        lambda r: r.metrics.gangs_admitted,
        kind="count",
    ),
    Metric(
        "gangs_by_priority",
        "gangs admitted per priority",
        "admitted/pending",
        _by_priority,
        kind="text",
    ),
    Metric(
        "multi_pod_gangs",
        "multi-pod gangs admitted",
        "gangs",
        lambda r: r.metrics.multi_pod_gangs,
        kind="count",
    ),
    Metric(
        "spread_over_min",
        "spread over minimum, sum",
        "leaves",
        lambda r: r.metrics.spread_over_min,
        kind="count",
    ),
    Metric(
        "mean_spread_over_min",
        "spread over minimum, mean",
        "leaves per gang",
        lambda r: r.metrics.mean_spread_over_min,
    ),
    Metric(
        "spread_gangs",
        "gangs on more leaves than needed",
        "gangs",
        lambda r: r.metrics.spread_gangs,
        kind="count",
    ),
    Metric(
        "one_leaf_fit",
        "multi-pod gangs that fit one leaf",
        "gangs",
        lambda r: r.metrics.one_leaf_fit,
        kind="count",
    ),
    Metric(
        "one_leaf_got",
        "... and got one leaf",
        "gangs",
        lambda r: r.metrics.one_leaf_got,
        kind="count",
    ),
    Metric(
        "one_leaf_share",
        "one-leaf share",
        "%",
        lambda r: r.metrics.one_leaf_share,
        kind="share",
    ),
    Metric(
        "jain",
        "Jain's index of allocation / fair target",
        "1 = even",
        lambda r: r.metrics.jain,
    ),
    Metric(
        "min_fair_ratio",
        "worst allocation / fair target",
        "",
        lambda r: r.metrics.min_fair_ratio,
    ),
    Metric(
        "queues_below_target",
        "queues below fair target",
        "(class, queue)",
        lambda r: r.metrics.queues_below_target,
        kind="count",
    ),
    Metric("stranded_gpus", "stranded GPUs", "GPUs", lambda r: r.metrics.stranded_gpus),
    Metric(
        "partly_used_nodes",
        "partly used GPU nodes",
        "nodes",
        lambda r: r.metrics.partly_used_nodes,
        kind="count",
    ),
    Metric(
        "largest_8gpu_gang_leaf",
        "largest 8-GPU gang that fits, one leaf",
        "pods",
        lambda r: r.metrics.largest_8gpu_gang_leaf,
        kind="count",
    ),
    Metric(
        "largest_8gpu_gang_any",
        "largest 8-GPU gang that fits, anywhere",
        "pods",
        lambda r: r.metrics.largest_8gpu_gang_any,
        kind="count",
    ),
    Metric("variables", "model variables", "", _solve("variables"), kind="count"),
    Metric("constraints", "model constraints", "", _solve("constraints"), kind="count"),
    Metric(
        "throughput_gap",
        "throughput gap (p*.gpu_milli)",
        "%",
        _solve("throughput_gap"),
        kind="gap",
    ),
    Metric("max_gap", "largest gap of any tier", "%", _solve("max_gap"), kind="gap"),
    Metric("open_tiers", "tiers not proven optimal", "tiers", _solve("open_tiers"), kind="count"),
)
"""Every per-run metric, in report order (definitions: :mod:`gangplan.solver.judges.metrics`)."""


# --------------------------------------------------------------------------- formatting


def ratio(cpsat: Value, base: Value) -> float | None:
    """``cpsat / base``; 1 when both are 0; None when only ``base`` is 0 or either is missing."""
    if not isinstance(cpsat, int | float) or not isinstance(base, int | float):
        return None
    if base == 0:
        return 1.0 if cpsat == 0 else None
    return float(cpsat) / float(base)


def _fmt_ratio(cpsat: Value, base: Value) -> str:
    r = ratio(cpsat, base)
    if r is None:
        return "n/a" if cpsat is None or base is None else f"{cpsat:g} vs 0"
    return f"{r:.2f}"


def _metric(key: str) -> Metric[Run]:
    return next(m for m in METRICS if m.key == key)


def _score_relation(run: Run, best: Run | None) -> str:
    if best is None:
        return "n/a"
    first = run.score.first_difference(best.score)
    if first is None:
        return "="
    return f"> (at {first})" if best.score < run.score else f"**<** (at {first})"


# --------------------------------------------------------------------------- CSV


def _score_columns(result: BenchResult) -> list[str]:
    names: dict[str, None] = {}
    for r in result.runs:
        for n, _ in r.score.entries:
            names[n] = None
    return list(names)


def write_csv(result: BenchResult, out: Path) -> list[Path]:
    """``results.csv`` (a row per run: instance, placer, every metric, score entries, and
    CP-SAT's bound and gap per entry), ``queues.csv`` (allocation and fair target per
    class and queue) and, when the replay ran, ``replay.csv``."""
    out.mkdir(parents=True, exist_ok=True)
    tiers = _score_columns(result)
    head = [
        "instance",
        "family",
        "nodes",
        "gpus",
        "free_gpus",
        "pending_gangs",
        "pending_gpus",
        "load",
        "demand",
        "placer",
        "kind",
        "time_limit_s",
        "best_baseline",
        "score_vs_best_baseline",
        "violations",
    ]
    header = [*head, *(m.key for m in METRICS)]
    header += [f"score.{t}" for t in tiers]
    header += [f"bound.{t}" for t in tiers] + [f"gap.{t}" for t in tiers]
    path = out / "results.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in result.runs:
            info = r.instance
            best = best_baseline(result.runs_of(info.name))
            row: list[Value] = [
                info.name,
                info.family,
                info.nodes,
                info.gpus,
                info.free_gpus,
                info.pending_gangs,
                info.pending_gpus,
                info.load,
                info.demand,
                r.placer,
                r.kind,
                r.time_limit_s,
                best.placer if best else None,
                _score_relation(r, best).replace("**", ""),
                len(r.violations),
            ]
            row += [m.get(r) for m in METRICS]
            entries = dict(r.score.entries)
            row += [entries.get(t) for t in tiers]
            reported = {t.name: t for t in r.metrics.solve.tiers} if r.metrics.solve else {}
            row += [reported[t].bound if t in reported else None for t in tiers]
            row += [reported[t].gap if t in reported else None for t in tiers]
            w.writerow([csv_value(v) for v in row])
    paths = [path]
    qpath = out / "queues.csv"
    with qpath.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "instance",
                "placer",
                "priority",
                "queue",
                "allocation_pct",
                "target_pct",
                "allocation_over_target",
            ]
        )
        for r in result.runs:
            for q in r.metrics.queues:
                w.writerow(
                    [
                        r.instance.name,
                        r.placer,
                        q.priority,
                        q.queue,
                        f"{q.allocation_ppm / 10_000:.4f}",
                        f"{q.target_ppm / 10_000:.4f}",
                        csv_value(q.ratio),
                    ]
                )
    paths.append(qpath)
    if result.replay:
        rpath = out / "replay.csv"
        with rpath.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(
                [
                    "protocol",
                    "placer",
                    "seed",
                    "allocated_at_100",
                    "allocated_final",
                    "arrived_final",
                    "unallocated_gpus",
                    "failed_pods",
                    "cycles",
                    "statuses",
                    "wall_time_s",
                    "cycle_mean_s",
                    "cycle_max_s",
                ]
            )
            for x in result.replay:
                w.writerow(
                    [
                        x.protocol,
                        x.placer,
                        x.seed,
                        csv_value(x.at_100),
                        csv_value(x.final),
                        csv_value(x.arrived),
                        csv_value(x.unallocated_gpus),
                        x.failed_pods,
                        x.cycles,
                        ";".join(f"{k}={v}" for k, v in sorted(x.statuses.items())),
                        csv_value(x.wall_time_s),
                        csv_value(x.cycle_mean_s),
                        csv_value(x.cycle_max_s),
                    ]
                )
        paths.append(rpath)
    return paths


# --------------------------------------------------------------------------- report


def summary_table(result: BenchResult) -> list[str]:
    """CP-SAT against the best baseline per instance and time limit (ratios)."""
    header = [
        "instance",
        "nodes",
        "CP-SAT",
        "status",
        "best baseline",
        "score vs best",
        "GPUs placed ×",
        "gangs ×",
        "one-leaf share",
        "spread/min ×",
        "Jain ×",
        "stranded ×",
        "8-GPU gang ×",
        "thr. gap",
        "time s (×)",
    ]
    rows = []
    for info in result.instances:
        runs = result.runs_of(info.name)
        best = best_baseline(runs)
        for r in runs:
            if r.kind != "cpsat":
                continue
            b = best

            def cell(key: str, run: Run = r, base: Run | None = b) -> str:
                m = _metric(key)
                return "n/a" if base is None else _fmt_ratio(m.get(run), m.get(base))

            share = _metric("one_leaf_share")
            gap = r.metrics.solve.throughput_gap if r.metrics.solve else None
            rows.append(
                [
                    info.name,
                    f"{info.nodes:,}",
                    r.placer,
                    r.status,
                    b.placer if b else "n/a",
                    _score_relation(r, b),
                    cell("gpus_placed"),
                    cell("gangs_admitted"),
                    f"{share.show(share.get(r))} vs {share.show(share.get(b)) if b else 'n/a'}",
                    cell("spread_over_min"),
                    cell("jain"),
                    cell("stranded_gpus"),
                    cell("largest_8gpu_gang_any"),
                    "n/a" if gap is None else f"{100 * gap:.2f}%",
                    f"{r.wall_time_s:.1f} ({cell('wall_time_s')})",
                ]
            )
    return markdown_table(header, rows, "lrlllrrrrrrrrrr")


def _targets_section(result: BenchResult) -> list[str]:
    out = ["## Targets (goals for the solver, never test limits)", ""]
    for t in evaluate_targets(result):
        mark = "not measured" if t.met is None else ("**met**" if t.met else "**not met**")
        out.append(f"- {mark} — {t.text} {t.evidence}.")
    return [*out, ""]


def _instance_section(result: BenchResult) -> list[str]:
    header = [
        "instance",
        "family",
        "nodes",
        "GPUs",
        "free GPUs",
        "running pods",
        "pending gangs",
        "pending GPUs (× free)",
    ]
    rows = []
    for i in result.instances:
        times = f" ({i.pending_gpus / i.free_gpus:.2f})" if i.free_gpus else ""
        rows.append(
            [
                i.name,
                i.family,
                f"{i.nodes:,}",
                f"{i.gpus:,.0f}",
                f"{i.free_gpus:,.1f}",
                f"{i.running_pods:,}",
                f"{i.pending_gangs:,}",
                f"{i.pending_gpus:,.1f}{times}",
            ]
        )
    out = ["## Instances", "", *markdown_table(header, rows, "llrrrrrr"), ""]
    for i in result.instances:
        if i.description:
            out.append(f"- `{i.name}`: {i.description}")
    return [*out, ""]


def _tier_cell(r: Run, name: str) -> str:
    value = dict(r.score.entries).get(name)
    text = "n/a" if value is None else f"{value:,}"
    if r.metrics.solve is None:
        return text
    t = next((t for t in r.metrics.solve.tiers if t.name == name), None)
    if t is None or t.bound is None:
        return text
    gap = "" if t.gap is None else f", gap {100 * t.gap:.2f}%"
    return f"{text} (bound {t.bound:,}{gap})"


def _per_instance(result: BenchResult) -> list[str]:
    out = [
        "## Results per instance",
        "",
        "Every metric for every placer (definitions below). Score entries: the value of the "
        "plan returned; for CP-SAT, in brackets, the bound and gap it reported for the "
        "entry (none when it returned a baseline's plan).",
        "",
    ]
    for info in result.instances:
        runs = result.runs_of(info.name)
        best = best_baseline(runs)
        out += [f"### {info.name}", ""]
        if best is not None:
            out += [f"Best baseline by score: `{best.placer}`.", ""]
        header = ["metric", "unit", *(r.placer for r in runs)]
        rows = [[m.label, m.unit, *(m.show(m.get(r)) for r in runs)] for m in METRICS]
        for name, _ in runs[0].score.entries if runs else ():
            rows.append([f"score: {name}", "", *(_tier_cell(r, name) for r in runs)])
        out += markdown_table(header, rows, "ll" + "r" * len(runs))
        notes = [(r.placer, n) for r in runs for n in r.notes]
        bad = [(r.placer, v) for r in runs for v in r.violations]
        if notes:
            out += ["", "Notes:"]
            out += [f"- {p}: {n}" for p, n in dict.fromkeys(notes)]
        if bad:
            out += ["", "**Verifier violations:**"]
            out += [f"- {p}: {v}" for p, v in bad[:20]]
        out.append("")
    return out


def _mean_sd(xs: Sequence[float]) -> str:
    if not xs:
        return "n/a"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{100 * statistics.fmean(xs):.2f}% ± {100 * sd:.2f}"


def _replay_section(result: BenchResult) -> list[str]:
    runs = result.replay
    if not runs:
        return []
    out = [
        "## Alibaba replay (openb default trace, FGD protocol)",
        "",
        "gangplan's protocol: all 1,523 openb nodes in file order; pods in creation order, "
        "never leaving, each placed as it arrives or counted and dropped; further pods drawn "
        "(seeded) from the trace until arrived GPU demand reaches 130% of the GPUs; FGD's "
        "exact Δ. The paper's protocol: its 1,213 GPU nodes in a seeded random order, pods "
        "shuffled, the simulator's integer score (docs/replay.md). Shares are of the "
        "cluster's GPUs (allocated milli-GPU / 1000). CP-SAT runs on cycles of 100 arrivals "
        "at a 1 s limit (the whole cycle): batching reorders arrivals within a cycle, so it "
        "is a different setting from the one-pod placers and is reported apart.",
        "",
    ]
    header = [
        "protocol",
        "placer",
        "seeds",
        "allocated at 100% arrived",
        "allocated at 130% arrived",
        "unallocated GPUs",
        "failed pods",
        "time per run s",
        "s a cycle (max)",
        "cycle statuses",
    ]
    rows = []
    groups: dict[tuple[str, str], list[ReplayRun]] = {}
    for x in runs:
        groups.setdefault((x.protocol, x.placer), []).append(x)
    for (proto, placer), xs in groups.items():
        cyc = [x.cycle_mean_s for x in xs if x.cycle_mean_s is not None]
        top = [x.cycle_max_s for x in xs if x.cycle_max_s is not None]
        statuses: dict[str, int] = {}
        plans: dict[str, int] = {}
        for x in xs:
            for k, v in x.statuses.items():
                statuses[k] = statuses.get(k, 0) + v
            for k, v in x.plans.items():
                plans[k] = plans.get(k, 0) + v
        rows.append(
            [
                proto,
                placer + (" (100-pod cycles)" if placer == "cpsat" else ""),
                str(len(xs)),
                _mean_sd([x.at_100 for x in xs if x.at_100 is not None]),
                _mean_sd([x.final for x in xs]),
                f"{statistics.fmean(x.unallocated_gpus for x in xs):,.0f}",
                f"{statistics.fmean(x.failed_pods for x in xs):,.0f}",
                f"{statistics.fmean(x.wall_time_s for x in xs):.1f}",
                f"{statistics.fmean(cyc):.2f} ({max(top):.2f})" if cyc and top else "-",
                cycles_text(statuses, plans) or "-",
            ]
        )
    out += markdown_table(header, rows, "llrrrrrrrl")
    seeds = [x for x in runs if x.placer == "cpsat"]
    if seeds:
        out += ["", "CP-SAT per seed:", ""]
        out += markdown_table(
            ["protocol", "seed", "at 130%", "s a cycle (max)", "cycles by status and plan"],
            [
                [
                    x.protocol,
                    str(x.seed),
                    f"{100 * x.final:.2f}%",
                    f"{x.cycle_mean_s:.2f} ({x.cycle_max_s:.2f})"
                    if x.cycle_mean_s is not None and x.cycle_max_s is not None
                    else "-",
                    cycles_text(x.statuses, x.plans) or "-",
                ]
                for x in seeds
            ],
            "lrrrl",
        )
    fgd = [x.final for x in groups.get(("gangplan", "fgd"), [])]
    if fgd:
        mean = statistics.fmean(fgd)
        diff = 100 * (mean - PUBLISHED_FGD)
        out += [
            "",
            f"Our `fgd` at 130%: {100 * mean:.2f}%, against the published 95.39% "
            f"(FGD paper, 286 GPUs unallocated): {diff:+.2f} points"
            + (
                " — more than a point: gangplan's replay protocol differs from the paper's (all "
                "1,523 nodes rather than the 1,213 GPU nodes, creation order rather than "
                "shuffled, first-fit ties); docs/replay.md measures each difference."
                if abs(diff) > 1
                else "."
            )
            + f" Published best-fit: {100 * PUBLISHED_BEST_FIT:.2f}%.",
        ]
    return [*out, ""]


def _parts_section(result: BenchResult) -> list[str]:
    """Per CP-SAT run: the cycle's parts' times, the model's size, peak memory."""
    runs = [r for r in result.runs if r.kind == "cpsat"]
    if not runs:
        return []
    names = list(dict.fromkeys(k for r in runs for k in r.parts))
    header = [
        "instance",
        "nodes",
        "limit s",
        "wall s",
        "CPU s",
        "outside search s",
        *names,
        "variables",
        "constraints",
        "peak MB",
        "status",
    ]
    rows = [
        [
            r.instance.name,
            f"{r.instance.nodes:,}",
            f"{r.time_limit_s:g}",
            f"{r.wall_time_s:.2f}",
            f"{r.cpu_s:.2f}",
            f"{r.outside_search_s:.2f}",
            *(f"{r.parts[k]:.2f}" if k in r.parts else "-" for k in names),
            f"{r.model_size.get('variables', 0):,}",
            f"{r.model_size.get('constraints', 0):,}",
            f"{r.peak_mb:,.0f}",
            r.status,
        ]
        for r in runs
    ]
    out = [
        "## The cycle's parts (CP-SAT runs)",
        "",
        "Wall seconds per part of the cycle (`gangplan.solver.budget`); `outside search` is "
        "the wall time minus CP-SAT's search; CPU s: the process's CPU time in the run, "
        "every thread (on a machine shared with other work, wall time stretches, CPU time "
        "does not). Peak MB: the process's high-water mark of "
        "resident memory after the run (it never falls, so it bounds the run's own peak). "
        "Where a cycle did not fit its budget, the largest part says what took the time.",
        "",
    ]
    out += markdown_table(header, rows, "lrrrrr" + "r" * len(names) + "rrrl")
    return [*out, ""]


def _definitions() -> list[str]:
    out = [
        "## Definitions",
        "",
        "From `solver/judges/metrics.py` (its docstring defines each in full, with sources).",
        "",
    ]
    text = {
        "wall_time_s": "the placer's wall time; CP-SAT's includes its baselines (incumbent) "
        "and reasons",
        "placed_of_demand": "GPUs placed / GPUs of all pending gangs at full size",
        "placed_of_free": "GPUs placed / free GPUs at the cycle start",
        "spread_over_min": "leaves used minus the fewest leaves (largest first, by GPUs on the "
        "empty cluster) that could hold the gang's placed GPUs, summed over admitted multi-pod "
        "gangs",
        "one_leaf_share": "admitted multi-pod gangs in one leaf / those whose placed pods one "
        "leaf could hold alone on the free capacity at the cycle start",
        "jain": "Jain's index (Jain, Chiu, Hawe 1984) of x = allocation / fair target over the "
        "(priority class, queue) pairs with a positive target; allocation = dominant share "
        "with running usage and the plan's pods of that class (DRF)",
        "stranded_gpus": "free GPUs on GPU nodes partly used after the plan",
        "largest_8gpu_gang_any": "pods of 8 whole GPUs that still fit after the plan: sum over "
        "ready nodes of floor(whole free GPUs / 8) (one leaf: the largest such sum in a leaf)",
        "throughput_gap": "largest |bound - value| / max(1, |bound|, |value|) of the "
        "p{class}.gpu_milli entries CP-SAT reported",
    }
    for m in METRICS:
        if m.key in text:
            out.append(f"- **{m.label}** ({m.unit or 'ratio'}): {text[m.key]}.")
    return [*out, ""]


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} minutes"


def write_report(result: BenchResult, out: Path, plots: Sequence[Path] = ()) -> Path:
    """Write ``report.md`` (summary, targets, instances, every metric per instance, the
    replay, plots, definitions)."""
    env = result.environment
    verified = sum(1 for r in result.runs if r.verified)
    lines = [
        f"# gangplan bench — suite `{result.suite.name}`",
        "",
        f"{environment_line(env)}; {_duration(result.elapsed_s)} in all "
        f"(budget: {result.suite.budget or 'none'}). CP-SAT at "
        + ", ".join(f"{t:g} s" for t in result.suite.cpsat_limits)
        + f"; baselines: {', '.join(r for r in result.placers if not r.startswith('cpsat'))}. "
        f"Plans verified: {verified} of {len(result.runs)}. Fallbacks: {fallbacks(result)}. "
        "Load average (1 min): "
        f"{env.get('load', '?')} (other work on the machine slows every placer).",
        "",
        "## Summary: CP-SAT against the best baseline on the same instance",
        "",
        "Ratios are CP-SAT / best baseline (the baseline of best score). Higher is better for "
        "GPUs placed, gangs, Jain's index and the largest 8-GPU gang; lower is better for "
        "spread over minimum, stranded GPUs and time. One-leaf share: CP-SAT vs the best "
        "baseline. `score vs best`: `=`, `>` or `<` by the lexicographic score, at the first "
        "entry that differs. `thr. gap`: CP-SAT's gap on the throughput entries, against the "
        "model's bound, also where the cycle returned the incumbent after CP-SAT ran (n/a "
        "where the cycle reports none: CP-SAT did not run). `time s (×)`: "
        "CP-SAT's wall time (the whole cycle) and, in parentheses, its ratio to the best "
        "baseline's time alone (not to the limit).",
        "",
        *summary_table(result),
        "",
        *_targets_section(result),
    ]
    if result.errors:
        lines += ["## Errors (placers that raised; the suite went on)", ""]
        lines += [f"- {what}: `{why}`" for what, why in result.errors]
        lines.append("")
    if result.skipped:
        lines += ["## Skipped", ""]
        lines += [f"- {name}: {why}" for name, why in result.skipped]
        lines.append("")
    lines += _instance_section(result)
    lines += _per_instance(result)
    lines += _parts_section(result)
    lines += _replay_section(result)
    lines += plots_section(plots)
    lines += _definitions()
    path = out / "report.md"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def write_outputs(result: BenchResult, out: Path) -> list[Path]:
    """CSV files, plots and the report; returns the paths written."""
    from gangplan.adapters.bench.plots import write_plots

    paths = write_csv(result, out)
    plots = write_plots(result, out)
    paths += plots
    paths.append(write_report(result, out, plots))
    return paths
