"""What the reports gangplan writes share: ``gangplan bench``'s
(:mod:`gangplan.adapters.bench.report`) and ``gangplan simulate``'s
(:mod:`gangplan.adapters.sim.report`).

* :class:`Metric` — one per-run metric: its CSV column, its report row, how to read it from
  a run and how to show it (:func:`format_value`, one rule per ``kind``);
* :func:`csv_value` — a value as a CSV cell;
* :func:`markdown_table` — a Markdown table;
* :func:`environment`, :func:`environment_line`, :func:`load_average` — where and when the
  runs ran (date, commit, machine, Python, OR-Tools, load), and the report's line for it;
* :func:`plots_section` — the report's ``## Plots`` section.
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Generic, TypeVar

__all__ = [
    "KINDS",
    "Metric",
    "Value",
    "csv_value",
    "environment",
    "environment_line",
    "format_value",
    "load_average",
    "markdown_table",
    "plots_section",
]

Value = float | int | str | None
"""A metric's value for one run (None: not measured, shown ``n/a``)"""

R = TypeVar("R")

KINDS = ("number", "count", "share", "gap", "hours", "text")
"""How a metric is shown: ``number`` (an integer with separators when whole, else 3
decimals below 10 and 1 above), ``count`` (a whole number with separators), ``share`` (0..1
in % to 1 decimal), ``gap`` (0..1 in % to 2 decimals), ``hours`` (seconds shown in hours,
1 decimal), ``text`` (as it is)"""


@dataclass(frozen=True)
class Metric(Generic[R]):
    """One per-run metric: CSV column ``key``, report ``label``, ``unit``, how to read it
    from a run (``get``), which way is better (``higher``, ``lower`` or ``""``) and how to
    show it (``kind``, one of :data:`KINDS`).

    Raises:
        ValueError: a ``kind`` not in :data:`KINDS` or a ``better`` not in ``higher``,
            ``lower``, ``""``.
    """

    key: str
    label: str
    unit: str
    get: Callable[[R], Value]
    better: str = ""
    kind: str = "number"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.key}: kind {self.kind!r} (accepted: {KINDS})")
        if self.better not in ("higher", "lower", ""):
            raise ValueError(f"metric {self.key}: better {self.better!r} (higher, lower or '')")

    def show(self, v: Value) -> str:
        """``v`` as the report shows it (:func:`format_value` of this metric's kind)."""
        return format_value(self.kind, v)


def format_value(kind: str, v: Value) -> str:
    """``v`` shown as a metric of ``kind`` (:data:`KINDS`): ``n/a`` for None; a string as
    it is; ``0.951`` as ``95.1%`` (share) or ``95.10%`` (gap); ``3214`` as ``3,214``;
    ``5400`` s as ``1.5`` (hours); a number ``12`` as ``12``, ``0.12345`` as ``0.123``,
    ``123.45`` as ``123.5``."""
    if v is None:
        return "n/a"
    if kind == "text" or isinstance(v, str):
        return str(v)
    if kind == "share":
        return f"{100 * float(v):.1f}%"
    if kind == "gap":
        return f"{100 * float(v):.2f}%"
    if kind == "count":
        return f"{int(v):,}"
    if kind == "hours":
        return f"{float(v) / 3600:,.1f}"
    x = float(v)
    if x == int(x) and abs(x) < 1e6:
        return f"{int(x):,}"
    return f"{x:.3f}" if abs(x) < 10 else f"{x:,.1f}"


def csv_value(v: Value) -> str:
    """``v`` as a CSV cell: empty for None, a float to 6 significant digits, else ``str``."""
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], align: str = ""
) -> list[str]:
    """A Markdown table's lines: ``align`` a letter per column, ``l`` (left) or ``r``
    (right; default: the first column left, the others right). A ``|`` inside a cell
    becomes ``/`` (it would end the cell)."""
    aligns = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in aligns]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    out += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
    return out


def plots_section(plots: Sequence[Path]) -> list[str]:
    """``## Plots`` and an image line per plot (its file name, beside the report); nothing
    when there are none."""
    if not plots:
        return []
    return ["## Plots", "", *(f"![{p.stem}]({p.name})" for p in plots), ""]


def _git(*args: str) -> str | None:
    """``git ARGS`` in this package's folder (None outside a repository or without git)."""
    try:
        return subprocess.run(
            ["git", *args],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def load_average() -> str:
    """The 1-minute load average to 1 decimal (other work on the machine slows every placer
    alike), or ``unknown`` where the platform has none."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:  # pragma: no cover - platforms without getloadavg
        return "unknown"


def environment() -> dict[str, str]:
    """Where and when: ``date`` (UTC, to the minute), ``commit`` (git's short hash, and
    ``(+N files modified in the working tree)`` when tracked files differ from it;
    ``unknown`` outside a repository), ``machine`` (architecture and cores), ``python``,
    ``ortools`` (its version) and ``load`` (:func:`load_average`)."""
    try:
        ortools = metadata.version("ortools")
    except metadata.PackageNotFoundError:  # pragma: no cover - ortools is a dependency
        ortools = "unknown"
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    status = _git("status", "--porcelain", "--untracked-files=no")
    if status:
        n = len(status.splitlines())
        commit += f" (+{n} file{'s' if n != 1 else ''} modified in the working tree)"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "ortools": ortools,
        "commit": commit,
        "load": load_average(),
    }


def environment_line(env: Mapping[str, str]) -> str:
    """``Run DATE at commit `COMMIT` on MACHINE, Python X, OR-Tools Y`` (``?`` for a key
    ``env`` lacks): the start of a report's first paragraph."""
    return (
        f"Run {env.get('date', '?')} at commit `{env.get('commit', '?')}` on "
        f"{env.get('machine', '?')}, Python {env.get('python', '?')}, OR-Tools "
        f"{env.get('ortools', '?')}"
    )
