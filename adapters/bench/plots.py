"""The bench's PNG plots (matplotlib, Agg backend: no display needed).

* ``quality.png`` — quality per placer per instance: GPUs placed (% of free), gangs admitted
  (% of pending), one-leaf share, spread over the minimum (mean leaves per multi-pod gang),
  Jain's index, stranded GPUs (% of the cluster's GPUs);
* ``cpsat_gap.png`` — CP-SAT's gap against its time limit, per instance: the throughput
  entries, and the largest gap of any entry;
* ``solve_time.png`` — wall time against cluster size (fat-trees, mean over loads), both on
  log scales, one line per placer;
* ``replay.png`` — the Alibaba replay, allocated against arrived GPUs (when it ran).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gangplan.adapters.bench.suites import BenchResult, Run

__all__ = ["write_plots"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


QUALITY: tuple[tuple[str, Callable[[Run], float | None]], ...] = (
    ("GPUs placed (% of free)", lambda r: _pct(r.metrics.placed_of_free)),
    (
        "gangs admitted (% of pending)",
        lambda r: (
            _pct(r.metrics.gangs_admitted / r.metrics.gangs_pending)
            if r.metrics.gangs_pending
            else None
        ),
    ),
    ("multi-pod gangs in one leaf (% of those that fit)", lambda r: _pct(r.metrics.one_leaf_share)),
    ("spread over minimum (leaves per multi-pod gang)", lambda r: r.metrics.mean_spread_over_min),
    ("Jain's index of allocation / fair target", lambda r: r.metrics.jain),
    (
        "stranded GPUs (% of the cluster's GPUs)",
        lambda r: _pct(r.metrics.stranded_gpus / r.instance.gpus) if r.instance.gpus else None,
    ),
)


def _pct(x: float | None) -> float | None:
    return None if x is None else 100 * x


def _quality(result: BenchResult, path: Path) -> None:
    plt = _pyplot()
    instances = [i.name for i in result.instances]
    placers = result.placers
    fig, axes = plt.subplots(3, 2, figsize=(max(9.0, 1.4 * len(instances) + 3), 11))
    width = 0.8 / max(1, len(placers))
    for ax, (title, get) in zip(axes.flat, QUALITY, strict=False):
        for j, placer in enumerate(placers):
            xs, ys = [], []
            for i, inst in enumerate(instances):
                run = next((r for r in result.runs_of(inst) if r.placer == placer), None)
                v = get(run) if run is not None else None
                if v is not None:
                    xs.append(i - 0.4 + width * (j + 0.5))
                    ys.append(v)
            ax.bar(xs, ys, width=width, label=placer)
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(len(instances)))
        ax.set_xticklabels(instances, rotation=30, ha="right", fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(True, axis="y", linewidth=0.3)
    axes.flat[0].legend(fontsize=7, ncol=2)
    fig.suptitle(f"gangplan bench ({result.suite.name}): quality per placer per instance")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _gap(result: BenchResult, path: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for info in result.instances:
        runs = sorted(
            (r for r in result.runs_of(info.name) if r.kind == "cpsat"),
            key=lambda r: r.time_limit_s or 0.0,
        )
        for ax, attr in zip(axes, ("throughput_gap", "max_gap"), strict=True):
            pts = [
                (r.time_limit_s, 100 * getattr(r.metrics.solve, attr))
                for r in runs
                if r.metrics.solve is not None and getattr(r.metrics.solve, attr) is not None
            ]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=info.name)
    for ax, title in zip(
        axes, ("throughput entries (p*.gpu_milli)", "largest gap of any entry"), strict=True
    ):
        ax.set_xscale("log")
        ax.set_xlabel("CP-SAT time limit (s)")
        ax.set_ylabel("gap (%)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, linewidth=0.3)
        ax.set_xticks(result.suite.cpsat_limits)
        ax.set_xticklabels([f"{t:g}" for t in result.suite.cpsat_limits])
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    fig.suptitle(
        "CP-SAT gap against time limit (a point is missing where the cycle returned "
        "a baseline's plan)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _time(result: BenchResult, path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.8, 4.6))
    sizes = sorted({i.nodes for i in result.instances if i.family == "fat-tree"})
    for placer in result.placers:
        xs, ys = [], []
        for n in sizes:
            times = [
                r.wall_time_s
                for r in result.runs
                if r.placer == placer and r.instance.family == "fat-tree" and r.instance.nodes == n
            ]
            if times:
                xs.append(n)
                ys.append(statistics.fmean(times))
        if xs:
            ax.plot(xs, ys, marker="o", label=placer)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes)
    ax.set_xticklabels([f"{n:,}" for n in sizes])
    ax.set_xlabel("nodes (8 GPUs each; fat-trees, mean over loads)")
    ax.set_ylabel("wall time (s)")
    ax.set_title("solve time against cluster size")
    ax.grid(True, which="both", linewidth=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _outside_search(result: BenchResult, path: Path) -> None:
    """Log-log: the CP-SAT cycle's wall time and its parts outside the search against
    nodes, per time limit (fat-trees, mean over loads), with the fitted slope."""
    from gangplan.adapters.bench.suites import loglog_slope, outside_search_by_size

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.8, 4.6))
    sizes: set[int] = set()
    limits = sorted({r.time_limit_s for r in result.runs if r.kind == "cpsat" and r.time_limit_s})
    for limit in limits:
        pts = outside_search_by_size(result, limit)
        if not pts:
            continue
        sizes |= {n for n, _ in pts}
        slope = loglog_slope([(float(n), t) for n, t in pts])
        label = f"outside search, {limit:g} s limit" + (
            f" (slope {slope:.2f})" if slope is not None else ""
        )
        ax.plot([n for n, _ in pts], [t for _, t in pts], marker="o", label=label)
        wall: dict[int, list[float]] = {}
        for r in result.runs:
            if r.kind == "cpsat" and r.time_limit_s == limit and r.instance.family == "fat-tree":
                wall.setdefault(r.instance.nodes, []).append(r.wall_time_s)
        xs = sorted(wall)
        ax.plot(
            xs,
            [statistics.fmean(wall[n]) for n in xs],
            marker="x",
            linestyle="--",
            label=f"whole cycle, {limit:g} s limit",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    if sizes:
        ticks = sorted(sizes)
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{n:,}" for n in ticks])
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())  # only the sizes run are labelled
    ax.set_xlabel("nodes (8 GPUs each; fat-trees, mean over loads)")
    ax.set_ylabel("wall time (s)")
    ax.set_title("CP-SAT cycle: time outside the search against cluster size")
    ax.grid(True, which="both", linewidth=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(result: BenchResult, out: Path) -> list[Path]:
    """Write the PNG plots of ``result`` into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    if result.runs:
        for name, draw in (
            ("quality", _quality),
            ("cpsat_gap", _gap),
            ("solve_time", _time),
            ("outside_search_loglog", _outside_search),
        ):
            path = out / f"{name}.png"
            draw(result, path)
            paths.append(path)
    raw = [x.raw for x in result.replay if x.raw is not None]
    if raw:
        from gangplan.adapters.bench.replay import write_plot

        path = out / "replay.png"
        write_plot(raw, path, "Alibaba openb replay (mean over seeds)")
        paths.append(path)
    return paths
