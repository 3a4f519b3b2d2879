"""The command line's shared durations and windows (``adapters/cli/common.py``): what
``gangplan simulate`` reads its ``--period``, ``--time-limit``, ``--jitter``, ``--horizon``,
``--reserve-after`` and ``--window`` with. Expected seconds worked out by hand."""

from __future__ import annotations

import math

import click
import pytest
from click.testing import CliRunner

from gangplan.adapters.cli.common import WINDOW, Duration, parse_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("5m", 300.0),
        ("2.5h", 9_000.0),
        ("1h30m", 5_400.0),  # 3600 + 1800
        ("7d", 604_800.0),  # 7 x 86400
        ("10d8h", 892_800.0),  # 864000 + 28800
    ],
)
def test_durations_with_units(text: str, seconds: float) -> None:
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        ("0", {}, "'0': accepted a time > 0 (e.g. 60, 5m, 7d)"),
        ("5x", {}, "'5x' is not a time"),
        ("-1", {"zero_ok": True}, "'-1' is not a time"),
        ("9" * 400, {}, "accepted a time > 0"),  # float('9' * 400) is inf
        ("2d", {"max_s": 86_400}, "'2d': accepted a time > 0 and at most 1d (86400 s)"),
        ("91m", {"max_s": 5_400}, "at most 90m (5400 s)"),
    ],
)
def test_bad_durations_say_what_is_accepted(text: str, kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_seconds(text, **kwargs)


def test_zero_only_where_allowed() -> None:
    assert parse_seconds("0", zero_ok=True) == 0.0
    assert parse_seconds("1d", max_s=86_400) == 86_400.0  # the bound itself is accepted


@click.command()
@click.option("--every", type=Duration(max_s=3_600), default="60")
@click.option("--window", type=WINDOW, default=None)
def _probe(every: float, window: tuple[float, float] | None) -> None:
    click.echo(f"{every!r} {window!r}")


def test_the_option_types_convert_and_refuse_as_usage_errors() -> None:
    runner = CliRunner()
    ok = runner.invoke(_probe, ["--window", "1d:"])
    assert ok.exit_code == 0 and ok.output == f"60.0 (86400.0, {math.inf!r})\n"
    ok = runner.invoke(_probe, ["--every", "1h", "--window", ":90m"])
    assert ok.output == "3600.0 (0.0, 5400.0)\n"
    bad = runner.invoke(_probe, ["--every", "61m"])
    assert bad.exit_code == 2 and "Invalid value for '--every'" in bad.output
    assert "at most 1h (3600 s)" in bad.output and "Traceback" not in bad.output
    bad = runner.invoke(_probe, ["--window", "2d:1d"])
    assert bad.exit_code == 2 and "END must be after START" in bad.output
