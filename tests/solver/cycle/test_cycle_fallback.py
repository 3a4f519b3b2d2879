"""If turning CP-SAT's counts into pods and device ids ever failed, the cycle must return the
incumbent, say so in its status, and still hand out a plan that passes the verifier (issue 3).

The device step cannot fail for a solution of the model (its counts are per device and per
PCIe switch), so the failure is forced here: the disaggregation is replaced by one that gives
every pod the same GPU, which the independent verifier rejects.
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplan.adapters.files import load_snapshot
from gangplan.models import PodPlacement
from gangplan.solver.cycle import pipeline as cycle
from gangplan.solver.judges.verify import verify
from gangplan.solver.model import readback
from gangplan.solver.result import CycleStatus, SolverConfig


def test_a_failed_device_assignment_returns_the_incumbent(monkeypatch: pytest.MonkeyPatch) -> None:
    real = readback.disaggregate

    def broken(*args: Any, **kwargs: Any) -> list[PodPlacement]:
        pods = real(*args, **kwargs)
        # every GPU pod claims the first GPU of its node: devices given twice
        return [p.model_copy(update={"gpus": p.gpus[:1] * len(p.gpus)}) for p in pods]

    monkeypatch.setattr(readback, "disaggregate", broken)
    s, _ = load_snapshot(None)
    result = cycle.solve_cycle(s, config=SolverConfig(time_limit_s=2, deterministic=True))
    assert result.status is CycleStatus.FALLBACK
    assert any("failed the verifier" in n for n in result.notes)
    assert result.plan.summary is not None
    assert result.plan.summary.status == "fallback"
    assert "incumbent" in result.plan.summary.placer
    assert verify(s, result.plan) == []
    # the plan returned is the incumbent's: its score equals the best baseline's
    assert result.incumbent_score is not None
    assert result.score == result.incumbent_score
