"""The simulation's PNG plots (matplotlib, Agg backend: no display needed).

* ``jct_cdf.png`` — the CDF of job completion time per run (log time axis);
* ``utilisation.png`` — GPUs held / the cluster's GPUs over simulated time, per run
  (hourly means of the step function);
* ``queue_shares.png`` — for the busiest queues (most jobs), allocation and fair target
  (dominant share, % of the cluster) after each cycle, for the first run of each placer;
* ``wait_by_size.png`` — mean and p95 wait per gang size (1, 2-8, 9-32, 33+ GPUs), per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gangplan.adapters.sim.jobs import SIZE_CLASSES
from gangplan.models import GPU_MILLI

if TYPE_CHECKING:
    from gangplan.adapters.sim.report import Run

__all__ = ["write_plots"]

QUEUES_SHOWN = 4


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _legend(ax: Any, **kw: Any) -> None:
    """The axes' legend, only when something is labelled (an empty trace draws nothing:
    no empty legend, no matplotlib warning)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kw)


def _save(fig: Any, path: Path) -> Path:
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    tmp.replace(path)
    return path


def _jct_cdf(runs: Sequence[Run], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in runs:
        jct = np.sort([j.jct for j in r.result.jobs if j.jct is not None])
        if jct.size:
            y = np.arange(1, jct.size + 1) / jct.size
            ax.step(np.maximum(jct, 1.0), y, where="post", label=r.result.label)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s, log)")
    ax.set_ylabel("share of finished jobs")
    ax.set_title("JCT CDF")
    ax.grid(alpha=0.3)
    _legend(ax, fontsize=8)
    out = _save(fig, path)
    plt.close(fig)
    return out


def _area(t: np.ndarray, v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Integral from t[0] to each x of the step function v_i on [t_i, t_{i+1})."""
    cum = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(t))))
    i = np.clip(np.searchsorted(t, x, side="right") - 1, 0, len(t) - 1)
    return cum[i] + v[i] * (x - t[i])  # type: ignore[no-any-return]


def _utilisation(runs: Sequence[Run], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for r in runs:
        res = r.result
        if not res.utilisation or not res.capacity_gpus:
            continue
        t = np.array([p[0] for p in res.utilisation], dtype=float)
        v = np.array([p[1] for p in res.utilisation], dtype=float) / (res.capacity_gpus * GPU_MILLI)
        edges = np.arange(t[0], res.end_time + 3600.0, 3600.0)
        area = _area(t, v, edges)
        days = (edges[:-1] - t[0]) / 86400
        ax.plot(days, 100 * np.diff(area) / 3600.0, label=res.label, linewidth=1)
    ax.set_xlabel("days from the first arrival")
    ax.set_ylabel("GPUs held (% of the cluster)")
    ax.set_title("GPU utilisation (hourly mean)")
    ax.grid(alpha=0.3)
    _legend(ax, fontsize=8)
    out = _save(fig, path)
    plt.close(fig)
    return out


def _queue_shares(runs: Sequence[Run], path: Path) -> Path:
    plt = _pyplot()
    firsts: dict[str, Run] = {}
    for r in runs:
        firsts.setdefault(r.result.config.placer, r)
    chosen = list(firsts.values())
    fig, axes = plt.subplots(len(chosen), 1, figsize=(8, 3 * len(chosen)), squeeze=False)
    for ax, r in zip(axes[:, 0], chosen, strict=True):
        res = r.result
        count: dict[str, int] = {}
        for j in res.jobs:
            count[j.queue] = count.get(j.queue, 0) + 1
        top = sorted(count, key=lambda q: (-count[q], q))[:QUEUES_SHOWN]
        t0 = min((j.arrival for j in res.jobs), default=0.0)
        for k, q in enumerate(top):
            samples = [s for s in res.shares if s.queue == q]
            if not samples:
                continue
            days = np.array([(s.time - t0) / 86400 for s in samples])
            color = f"C{k}"
            ax.plot(
                days,
                [s.allocation_ppm / 1e4 for s in samples],
                ".",
                ms=2,
                color=color,
                label=f"{q} allocation",
            )
            ax.plot(
                days,
                [s.target_ppm / 1e4 for s in samples],
                "-",
                lw=0.6,
                color=color,
                label=f"{q} fair target",
            )
        ax.set_title(f"queue shares, {res.label}")
        ax.set_ylabel("dominant share (%)")
        ax.grid(alpha=0.3)
        _legend(ax, fontsize=6, ncol=2)
    axes[-1, 0].set_xlabel("days from the first arrival")
    out = _save(fig, path)
    plt.close(fig)
    return out


def _wait_by_size(runs: Sequence[Run], path: Path) -> Path:
    plt = _pyplot()
    labels = [label for label, _, _ in SIZE_CLASSES]
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(runs))
    x = np.arange(len(labels))
    for k, r in enumerate(runs):
        groups = {g.key: g for g in r.metrics.by_size}
        mean = [groups[lb].wait.mean or 0.0 for lb in labels]
        p95 = [groups[lb].wait.p95 or 0.0 for lb in labels]
        bars = ax.bar(x + k * width, mean, width, label=f"{r.result.label} mean")
        ax.plot(x + k * width, p95, "v", color=bars.patches[0].get_facecolor(), ms=5)
    ax.set_xticks(x + width * (len(runs) - 1) / 2, [f"{lb} GPUs" for lb in labels])
    ax.set_ylabel("wait (s): bars mean, triangles p95")
    ax.set_title("queueing delay by gang size")
    ax.grid(alpha=0.3, axis="y")
    _legend(ax, fontsize=7)
    out = _save(fig, path)
    plt.close(fig)
    return out


def write_plots(runs: Sequence[Run], out: Path) -> list[Path]:
    """Write the four plots into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    return [
        _jct_cdf(runs, out / "jct_cdf.png"),
        _utilisation(runs, out / "utilisation.png"),
        _queue_shares(runs, out / "queue_shares.png"),
        _wait_by_size(runs, out / "wait_by_size.png"),
    ]
