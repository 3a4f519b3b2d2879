"""The spread slowdown's arithmetic and syntax, and the rate change elastic gangs will use."""

from __future__ import annotations

import pytest

from gangplan.adapters.sim.engine import RunningJob
from gangplan.adapters.sim.speed import Slowdown, SpreadSpeed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("off", Slowdown()),
        ("leaf=0.1", Slowdown(0.1, 0.0)),
        ("leaf=0.1,spine=0.25", Slowdown(0.1, 0.25)),
        ("spine=0.5, leaf=0", Slowdown(0.0, 0.5)),
        # the source comes last and may hold commas
        ("leaf=0.2,source=Gandiva, OSDI '18, §3", Slowdown(0.2, 0.0, "Gandiva, OSDI '18, §3")),
    ],
)
def test_parse(text: str, expected: Slowdown) -> None:
    assert Slowdown.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rack=0.1", "expected leaf=F, spine=G or source=TEXT"),  # unknown level
        ("leaf", "expected leaf=F"),  # no value
        ("leaf=x", "'x' is not a number"),
        ("leaf=-0.1", "accepted a finite number >= 0"),
        ("leaf=inf", "accepted a finite number >= 0"),
    ],
)
def test_parse_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Slowdown.parse(text)


def test_factor_and_rate() -> None:
    s = Slowdown(leaf=0.1, spine=0.25)
    # 3 leaves under 2 spines: 1 + 0.1 x 2 + 0.25 x 1 = 1.45
    assert s.factor(3, 2) == pytest.approx(1.45)
    assert s.factor(1, 1) == 1.0 and s.label == "leaf=0.1,spine=0.25"
    speed = SpreadSpeed(s)
    assert speed.rate(2, 2, 3, 2) == pytest.approx(1 / 1.45)
    # a one-pod job is never slowed, wherever it is
    assert speed.rate(1, 1, 1, 1) == 1.0


def test_rate_change_conserves_work() -> None:
    """100 s of work from t=0 at rate 1; at t=40 the rate halves: 60 s of work left at 0.5
    take 120 s, so the job ends at 160 (and its completion event is renewed)."""
    run = RunningJob(
        job=None,  # type: ignore[arg-type]  # the job is not read here
        start=0.0,
        pods=(),
        leaves=1,
        spines=1,
        rate=1.0,
        work_left=100.0,
        since=0.0,
    )
    assert run.end == 100.0
    run.set_rate(40.0, 0.5)
    assert (run.work_left, run.end, run.version) == (60.0, 160.0, 1)
