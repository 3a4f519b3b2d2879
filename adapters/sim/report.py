"""What ``gangplan simulate`` writes to ``--out DIR``, in the manner of ``gangplan bench``:
``results.csv`` (a row per run, a column per metric of :data:`METRICS`), ``groups.csv``
(JCT and wait per queue and per gang size, per run), ``report.md`` (settings, the metric
table, by gang size, by queue, fairness, cycles, plots, definitions) and the PNG plots of
:mod:`gangplan.adapters.sim.plots`.

:data:`METRICS` is the one list of per-run metrics: the CSV has a column for each and the
report a row for each; a test checks both against it. Every file is written through a
temporary file and renamed (nothing half-written). The metric formatting, the tables and
the environment block are the reports' shared ones (:mod:`gangplan.adapters.report`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gangplan.adapters.files import write_output
from gangplan.adapters.report import (
    Metric,
    Value,
    csv_value,
    environment,
    environment_line,
    load_average,
    markdown_table,
    plots_section,
)
from gangplan.adapters.sim.engine import SimResult
from gangplan.adapters.sim.metrics import Group, SimMetrics, Stat, run_metrics

__all__ = [
    "METRICS",
    "Metric",
    "Run",
    "environment",
    "write_csv",
    "write_outputs",
    "write_report",
]


@dataclass(frozen=True)
class Run:
    """One run and its metrics."""

    result: SimResult
    metrics: SimMetrics

    @staticmethod
    def of(result: SimResult) -> Run:
        return Run(result, run_metrics(result))


def _stat(which: str, field: str) -> Callable[[Run], Value]:
    def get(r: Run) -> Value:
        s: Stat = getattr(r.metrics, which)
        return getattr(s, field)  # type: ignore[no-any-return]

    return get


def _longest(field: str) -> Callable[[Run], Value]:
    def get(r: Run) -> Value:
        lw = r.metrics.longest_wait
        return None if lw is None else getattr(lw, field)

    return get


METRICS: tuple[Metric[Run], ...] = (
    Metric("jobs", "jobs", "jobs", lambda r: r.metrics.jobs, kind="count"),
    Metric("finished", "finished", "jobs", lambda r: r.metrics.finished, "higher", "count"),
    Metric(
        "never_fits", "dropped: never fit", "jobs", lambda r: r.metrics.never_fits, kind="count"
    ),
    Metric(
        "unfinished", "unfinished at the end", "jobs", lambda r: r.metrics.unfinished, kind="count"
    ),
    Metric("jct_mean_s", "JCT, mean", "s", _stat("jct", "mean"), "lower"),
    Metric("jct_p50_s", "JCT, p50", "s", _stat("jct", "p50"), "lower"),
    Metric("jct_p95_s", "JCT, p95", "s", _stat("jct", "p95"), "lower"),
    Metric("jct_p99_s", "JCT, p99", "s", _stat("jct", "p99"), "lower"),
    Metric("wait_mean_s", "wait, mean", "s", _stat("wait", "mean"), "lower"),
    Metric("wait_p50_s", "wait, p50", "s", _stat("wait", "p50"), "lower"),
    Metric("wait_p95_s", "wait, p95", "s", _stat("wait", "p95"), "lower"),
    Metric("wait_p99_s", "wait, p99", "s", _stat("wait", "p99"), "lower"),
    Metric("longest_wait_s", "longest wait", "s", _longest("wait_s"), "lower"),
    Metric(
        "longest_wait_job", "... job (GPUs, queue)", "", lambda r: _longest_text(r), kind="text"
    ),
    Metric(
        "longest_wait_33_s",
        "longest wait, 33+ GPU gangs",
        "s",
        lambda r: _size_wait_max(r, "33+"),
        "lower",
    ),
    Metric(
        "elastic_above_min",
        "elastic jobs that ran above their minimum",
        "%",
        lambda r: (
            r.metrics.elastic_above_min / r.metrics.elastic_jobs if r.metrics.elastic_jobs else None
        ),
        "higher",
        "share",
    ),
    Metric(
        "elastic_jobs",
        "elastic jobs started",
        "jobs",
        lambda r: r.metrics.elastic_jobs,
        kind="count",
    ),
    Metric("resizes", "elastic grow/shrink events", "", lambda r: r.metrics.resizes, kind="count"),
    Metric(
        "reserved_cycles",
        "cycles holding a reservation",
        "",
        lambda r: r.metrics.reserved_cycles,
        kind="count",
    ),
    Metric(
        "utilisation_window",
        "GPU utilisation, arrival window",
        "%",
        lambda r: r.metrics.utilisation_window,
        "higher",
        "share",
    ),
    Metric(
        "utilisation_run",
        "GPU utilisation, whole run",
        "%",
        lambda r: r.metrics.utilisation_run,
        "higher",
        "share",
    ),
    Metric("makespan_s", "makespan", "h", lambda r: r.metrics.makespan_s, "lower", "hours"),
    Metric(
        "jain_mean",
        "Jain's index, mean over cycles",
        "1 = even",
        lambda r: r.metrics.jain_mean,
        "higher",
    ),
    Metric("jain_min", "Jain's index, lowest", "", lambda r: r.metrics.jain_min, "higher"),
    Metric(
        "slowed_jobs",
        "multi-pod jobs slowed by spread",
        "jobs",
        lambda r: r.metrics.slowed_jobs,
        "lower",
        "count",
    ),
    Metric(
        "mean_factor_multi_pod",
        "mean duration factor, multi-pod jobs",
        "x",
        lambda r: r.metrics.mean_factor_multi_pod,
        "lower",
    ),
    Metric("cycles", "cycles run", "", lambda r: r.metrics.cycles, kind="count"),
    Metric("cycle_p50_s", "cycle wall time, p50", "s", lambda r: r.metrics.cycle_p50_s, "lower"),
    Metric("cycle_p99_s", "cycle wall time, p99", "s", lambda r: r.metrics.cycle_p99_s, "lower"),
    Metric(
        "cycle_total_s", "cycle wall time, total", "s", lambda r: r.metrics.cycle_total_s, "lower"
    ),
    Metric("run_wall_s", "run wall time", "s", lambda r: r.result.wall_time_s, "lower"),
    Metric("statuses", "cycle statuses", "", lambda r: _statuses(r), kind="text"),
)
"""Every per-run metric, in report order (definitions: :mod:`gangplan.adapters.sim.metrics`)."""


def _size_wait_max(r: Run, label: str) -> float | None:
    return next((g.wait_max for g in r.metrics.by_size if g.key == label), None)


def _longest_text(r: Run) -> str | None:
    lw = r.metrics.longest_wait
    return None if lw is None else f"{lw.job} ({lw.gpus}, {lw.queue})"


def _statuses(r: Run) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(r.metrics.statuses.items()))


# --------------------------------------------------------------------------- formatting


def _seconds(v: float | None) -> str:
    if v is None:
        return "n/a"
    if v < 120:
        return f"{v:.0f} s"
    if v < 7200:
        return f"{v / 60:.1f} min"
    return f"{v / 3600:.1f} h"


# --------------------------------------------------------------------------- CSV

HEAD = (
    "run",
    "placer",
    "policy",
    "seed",
    "period_s",
    "slowdown",
    "trace",
    "window",
    "cluster",
    "nodes",
    "gpus",
)


def _head(r: SimResult) -> list[Value]:
    c = r.config
    window = "" if r.window is None else f"{r.window[0]:g}:{r.window[1]:g}"
    return [
        r.label,
        c.placer,
        c.policy,
        c.seed,
        c.period_s,
        c.slowdown.label,
        Path(r.trace).name,
        window,
        r.cluster,
        r.nodes,
        r.capacity_gpus,
    ]


def _csv_text(rows: list[list[Value]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for row in rows:
        w.writerow([csv_value(v) for v in row])
    return buf.getvalue()


def write_csv(runs: Sequence[Run], out: Path) -> list[Path]:
    """``results.csv`` (a row per run: settings, then every metric of :data:`METRICS`) and
    ``groups.csv`` (a row per run and queue or gang-size class: jobs, JCT and wait stats)."""
    out.mkdir(parents=True, exist_ok=True)
    rows: list[list[Value]] = [[*HEAD, *(m.key for m in METRICS)]]
    rows += [[*_head(r.result), *(m.get(r) for m in METRICS)] for r in runs]
    path = out / "results.csv"
    write_output(path, _csv_text(rows))
    stats = ("n", "mean", "p50", "p95", "p99")
    grows: list[list[Value]] = [
        [
            "run",
            "placer",
            "policy",
            "seed",
            "by",
            "group",
            "jobs",
            *(f"jct_{s}" for s in stats),
            *(f"wait_{s}" for s in stats),
        ]
    ]
    for r in runs:
        c = r.result.config
        for by, groups in (("size", r.metrics.by_size), ("queue", r.metrics.by_queue)):
            for g in groups:
                grows.append(
                    [
                        r.result.label,
                        c.placer,
                        c.policy,
                        c.seed,
                        by,
                        g.key,
                        g.jobs,
                        *(getattr(g.jct, s) for s in stats),
                        *(getattr(g.wait, s) for s in stats),
                    ]
                )
    gpath = out / "groups.csv"
    write_output(gpath, _csv_text(grows))
    return [path, gpath]


# --------------------------------------------------------------------------- report


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right_from: int = 1) -> list[str]:
    """Columns before ``right_from`` left-aligned, the others right."""
    return markdown_table(header, rows, "l" * right_from + "r" * (len(header) - right_from))


def _settings(runs: Sequence[Run]) -> list[str]:
    r = runs[0].result
    c = r.config
    window = (
        "the whole trace"
        if r.window is None
        else (f"{r.window[0] / 86400:g} d to {r.window[1] / 86400:g} d after the trace's zero")
    )
    slowdowns = sorted(
        {(x.result.config.policy, x.result.config.slowdown) for x in runs}, key=lambda t: t[0]
    )
    lines = [
        "## Settings",
        "",
        f"- trace: `{Path(r.trace).name}`, jobs arriving in {window}: "
        f"{runs[0].metrics.jobs:,} jobs",
        f"- cluster: {r.cluster}, {r.nodes:,} nodes, {r.capacity_gpus:,} GPUs, empty at the start",
        f"- cycle period: {c.period_s:g} s of simulated time; ticks without change skipped: "
        f"{'yes' if c.skip_unchanged else 'no'}",
        f"- placers: {', '.join(dict.fromkeys(x.result.config.placer for x in runs))}; seeds: "
        f"{', '.join(str(s) for s in sorted({x.result.config.seed for x in runs}))} (seed 0: the "
        "cluster's node order; seed s > 0: nodes permuted by random.Random(s), CP-SAT seed s"
        + (f", arrivals jittered by up to {c.jitter_s:g} s" if c.jitter_s else "")
        + ")",
    ]
    if any(x.result.config.placer == "cpsat" for x in runs):
        lines.append(
            f"- CP-SAT: {c.time_limit_s:g} s per cycle, {c.workers} search worker(s)"
            + (", deterministic mode" if c.deterministic else "")
        )
    for policy, sd in slowdowns:
        src = f" (source named by the user: {sd.source})" if sd.source else ""
        what = (
            "off"
            if sd.off
            else (
                f"a multi-pod gang on L leaves under S spines runs 1 + {sd.leaf:g}(L-1) + "
                f"{sd.spine:g}(S-1) times its duration{src}"
            )
        )
        lines.append(f"- spread slowdown, policy `{policy}`: {what}")
    for policy, ra in sorted(
        {(x.result.config.policy, x.result.config.reserve_after_s) for x in runs},
        key=lambda t: t[0],
    ):
        what = (
            "off"
            if ra is None
            else (
                f"a gang pending longer than {ra:g} s gets a reservation (EASY backfilling: "
                "one at a time, the domain where it starts earliest given the running jobs' "
                "expected ends); expected durations: "
                + (
                    "none (nothing is backfilled onto held capacity)"
                    if c.estimates == "none"
                    else "exact (each job declares its trace duration)"
                )
            )
        )
        lines.append(f"- reservation, policy `{policy}`: {what}")
    if c.elastic:
        from gangplan.adapters.sim.elastic import EFFICIENCY

        lines.append(
            "- elastic jobs: every job of 2+ GPUs is an elastic gang, minimum half its GPUs; "
            f"efficiency model {EFFICIENCY}"
        )
    lines.append(
        "- plans verified by `gangplan.solver.judges.verify` every cycle: "
        f"{'yes' if c.verify else 'no'}"
    )
    return [*lines, ""]


def _group_rows(runs: Sequence[Run], pick: Callable[[SimMetrics], tuple[Group, ...]]) -> list[str]:
    header = [
        "run",
        "group",
        "jobs",
        "wait mean",
        "wait p95",
        "wait p99",
        "JCT mean",
        "JCT p50",
        "JCT p95",
        "JCT p99",
    ]
    rows = []
    for r in runs:
        for g in pick(r.metrics):
            if not g.jobs:
                continue
            rows.append(
                [
                    r.result.label,
                    g.key,
                    f"{g.jobs:,}",
                    _seconds(g.wait.mean),
                    _seconds(g.wait.p95),
                    _seconds(g.wait.p99),
                    _seconds(g.jct.mean),
                    _seconds(g.jct.p50),
                    _seconds(g.jct.p95),
                    _seconds(g.jct.p99),
                ]
            )
    return _table(header, rows, right_from=2)


def write_report(
    runs: Sequence[Run],
    out: Path,
    plots: Sequence[Path] = (),
    *,
    elapsed_s: float | None = None,
    env: dict[str, str] | None = None,
    notes: Sequence[str] = (),
) -> Path:
    """Write ``report.md``. ``notes``: lines for the top (e.g. what else ran on the
    machine)."""
    env = env or environment()
    took = "" if elapsed_s is None else f"; {elapsed_s / 60:.1f} minutes in all"
    lines = [
        "# gangplan simulate",
        "",
        f"{environment_line(env)}{took}. Load average (1 min) at the start: "
        f"{env.get('load', '?')}, at the end: {load_average()} (other work on the "
        "machine slows every placer alike).",
        "",
        *notes,
        *([""] if notes else []),
    ]
    if not runs:
        lines.append("No run finished.")
    else:
        lines += _settings(runs)
        lines += [
            "## Metrics per run",
            "",
            "Runs are `placer/policy/seed`. Times in simulated seconds unless marked.",
            "",
        ]
        header = ["metric", "unit", *(r.result.label for r in runs)]
        rows = [[m.label, m.unit, *(m.show(m.get(r)) for r in runs)] for m in METRICS]
        lines += _table(header, rows, right_from=2)
        lines += ["", "## By gang size (GPUs)", ""]
        lines += _group_rows(runs, lambda m: m.by_size)
        lines += ["", "## By queue", ""]
        lines += _group_rows(runs, lambda m: m.by_queue)
        lines += ["", "## Fairness: allocation / fair target per queue (cycles with a target)", ""]
        queues = sorted({q.queue for r in runs for q in r.metrics.queue_shares})
        qrows = []
        for q in queues:
            cells = []
            for r in runs:
                s = next((x for x in r.metrics.queue_shares if x.queue == q), None)
                cells.append(
                    "n/a"
                    if s is None or s.mean_ratio is None
                    else f"{s.mean_ratio:.2f} (min {s.min_ratio:.2f}, {s.samples})"
                )
            qrows.append([q, *cells])
        lines += _table(["queue", *(r.result.label for r in runs)], qrows)
        lines.append("")
    lines += plots_section(plots)
    lines += _definitions()
    path = out / "report.md"
    out.mkdir(parents=True, exist_ok=True)
    write_output(path, "\n".join(lines) + "\n")
    return path


def _definitions() -> list[str]:
    return [
        "## Definitions",
        "",
        "- JCT = end - arrival (finished jobs); wait = start - arrival (started jobs). "
        "Percentiles: numpy's linear interpolation (Hyndman-Fan type 7).",
        "- GPU utilisation: GPUs held by running pods / the cluster's GPUs, time-averaged over "
        "the arrival window (first to last arrival) and over the whole run (first arrival to "
        "the last completion). Makespan: last completion - first arrival.",
        "- Fairness: after each cycle, each queue with pending demand: its dominant share "
        "(DRF) against its fair target from `gangplan.solver.judges.fairness.fair_shares` on the "
        "cycle's snapshot; Jain's index over the queues of positive target (cycles with two "
        "or more).",
        "- Cycle wall time: the placer's own time per cycle (snapshot, baselines, CP-SAT, "
        "reasons), not the simulator's bookkeeping.",
        "",
    ]


def write_outputs(
    results: Sequence[SimResult],
    out: Path,
    *,
    elapsed_s: float | None = None,
    notes: Sequence[str] = (),
    plots: bool = True,
    env: dict[str, str] | None = None,
) -> list[Path]:
    """CSV files, plots and the report in ``out``; returns the paths written. ``env``:
    :func:`environment` taken when the runs started (default: now)."""
    from gangplan.adapters.sim.plots import write_plots

    runs = [Run.of(r) for r in results]
    paths = write_csv(runs, out)
    pngs = write_plots(runs, out) if plots and runs else []
    paths += pngs
    paths.append(write_report(runs, out, pngs, elapsed_s=elapsed_s, notes=notes, env=env))
    return paths
