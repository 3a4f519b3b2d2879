"""``TierReport.revalued``: a tier's report given the returned plan's own value (worked by
hand: gap = (bound - value) / max(1, |value|, |bound|))."""

from __future__ import annotations

from gangplan.models import TierReport


def test_a_value_that_reaches_the_bound_is_optimal() -> None:
    r = TierReport(name="p0.gpu_milli", value=30, bound=100, gap=0.7, status="feasible")
    out = r.revalued(100)
    assert (out.value, out.gap, out.status) == (100, 0.0, "optimal")


def test_a_value_below_the_bound_is_no_longer_optimal() -> None:
    r = TierReport(name="p0.gpu_milli", value=100, bound=100, gap=0.0, status="optimal")
    out = r.revalued(80)  # (100 - 80) / 100
    assert (out.value, out.gap, out.status) == (80, 0.2, "feasible")


def test_negative_entries_use_the_larger_magnitude() -> None:
    r = TierReport(name="p0.fairness", value=-500, bound=0, gap=1.0, status="feasible")
    out = r.revalued(-250)  # (0 - -250) / max(1, 250, 0) = 1.0
    assert (out.gap, out.status) == (1.0, "feasible")
    r2 = TierReport(name="locality.leaf", value=-3, bound=-1, gap=0.5, status="feasible")
    assert r2.revalued(-2).gap == 0.5  # (-1 - -2) / max(1, 2, 1)


def test_without_a_bound_only_the_value_changes() -> None:
    r = TierReport(name="locality.node", value=-4, status="derived (not in the model)")
    out = r.revalued(-2)
    assert (out.value, out.bound, out.gap, out.status) == (-2, None, None, r.status)


def test_other_statuses_are_kept_below_the_bound() -> None:
    r = TierReport(name="p0.pods", value=5, bound=9, gap=0.444444, status="not improved (time)")
    out = r.revalued(6)  # (9 - 6) / 9
    assert (out.gap, out.status) == (0.333333, "not improved (time)")
