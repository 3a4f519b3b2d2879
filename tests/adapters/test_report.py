"""The reports' shared parts (``adapters/report.py``), which ``gangplan bench`` and
``gangplan simulate`` both write with. Expected text worked out by hand."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from gangplan.adapters.report import (
    KINDS,
    Metric,
    Value,
    csv_value,
    environment,
    environment_line,
    format_value,
    markdown_table,
    plots_section,
)


@pytest.mark.parametrize(
    ("kind", "value", "text"),
    [
        ("number", None, "n/a"),
        ("number", 12.0, "12"),  # whole: no decimals
        ("number", 3214, "3,214"),
        ("number", 0.12345, "0.123"),  # below 10: three decimals
        ("number", 123.45, "123.5"),  # 10 and above: one (123.45 is 123.4500000000000028...)
        ("number", 2_500_000.0, "2,500,000.0"),  # whole but >= 1e6: the decimal form
        ("count", 1_523, "1,523"),
        ("share", 0.951, "95.1%"),
        ("gap", 0.0123, "1.23%"),
        ("hours", 5_400, "1.5"),  # 5400 s / 3600
        ("text", "optimal 3", "optimal 3"),
        ("count", "n/a here", "n/a here"),  # a string is shown as it is, whatever the kind
    ],
)
def test_values_as_the_reports_show_them(kind: str, value: Value, text: str) -> None:
    assert format_value(kind, value) == text


def test_csv_cells() -> None:
    assert [csv_value(v) for v in (None, 1 / 3, 7, "a,b", 1e-9)] == [
        "",
        "0.333333",
        "7",
        "a,b",
        "1e-09",
    ]


def test_a_metric_shows_its_kind_and_refuses_an_unknown_one() -> None:
    m: Metric[dict[str, float]] = Metric("u", "utilisation", "%", lambda r: r["u"], kind="share")
    assert m.show(m.get({"u": 0.5})) == "50.0%"
    assert set(KINDS) == {"number", "count", "share", "gap", "hours", "text"}
    with pytest.raises(ValueError, match="kind 'percent'"):
        Metric("u", "utilisation", "%", lambda r: None, kind="percent")
    with pytest.raises(ValueError, match="better 'up'"):
        Metric("u", "utilisation", "%", lambda r: None, "up")


def test_markdown_table() -> None:
    assert markdown_table(["run", "jobs", "JCT"], [["a|b", "3", "n/a"]]) == [
        "| run | jobs | JCT |",
        "| --- | ---: | ---: |",  # default: the first column left, the others right
        "| a/b | 3 | n/a |",  # a pipe would end the cell
    ]
    assert markdown_table(["x", "y"], [], "rl")[1] == "| ---: | --- |"


def test_plots_section() -> None:
    assert plots_section([]) == []
    assert plots_section([Path("/out/jct_cdf.png")]) == [
        "## Plots",
        "",
        "![jct_cdf](jct_cdf.png)",
        "",
    ]


def test_environment() -> None:
    env = environment()
    assert set(env) == {"date", "commit", "machine", "python", "ortools", "load"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", env["date"])
    assert env["load"] == "unknown" or math.isfinite(float(env["load"]))
    line = environment_line({"date": "D", "commit": "c0ffee", "python": "3.11"})
    assert line == "Run D at commit `c0ffee` on ?, Python 3.11, OR-Tools ?"
