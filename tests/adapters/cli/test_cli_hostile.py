"""Hostile command lines and files through the whole CLI: option values that are not finite
or too large, input that is not text or too big, and outputs that must never destroy what
stands at their path.

Each test rebuilds a reproducer found by breaking gangplan on purpose (issue 11, "No input
crashes, hangs, eats memory or destroys a file"); the comment under ``before:`` says what
happened then. Expected messages are written out by hand.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner, Result

from gangplan.adapters.cli import main


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def assert_usage_error(result: Result, message: str) -> None:
    """Exit 2 (click's usage error), the message on stderr, no traceback."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert message in result.stderr, result.stderr


# --------------------------------------------------------------------------- option values

REPLAY = ["replay", "alibaba", "--nodes", "nodes.csv", "--pods", "pods.csv"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # before: ValueError: popularity must be in (0, 1] (got nan), a traceback
        ([*REPLAY, "--popularity", "nan"], "'nan' is not a finite number"),
    ],
)
def test_option_values_that_are_not_finite_or_too_large(args: list[str], message: str) -> None:
    assert_usage_error(run(*args), message)
