"""What plans a cycle of the simulation: a small protocol over gangplan's cycle function.

A :class:`Placer` gets a :class:`CycleInput` — the simulated time and the cycle's snapshot —
and returns the cycle's :class:`~gangplan.solver.result.CycleResult`. Two kinds:

* :class:`CpsatPlacer`: :func:`gangplan.solver.cycle.solve_cycle` (CP-SAT, the best
  baseline as incumbent and hint, time limit per cycle);
* :class:`BaselinePlacer`: :func:`gangplan.solver.cycle.run_baseline` by name (``greedy``,
  ``topology-fit``, ``fgd``).

What reservation with backfill reads is in the snapshot itself: when each pending gang
arrived (``Gang.creation_time``), when each running pod is expected to end
(``RunningPod.expected_end``) and the ``reserve_after_s`` setting
(:mod:`gangplan.solver.cycle.reservations`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gangplan.models import Snapshot
from gangplan.solver.cycle import PLACERS, run_baseline, solve_cycle
from gangplan.solver.result import CycleResult, SolverConfig, cpsat_seed

__all__ = ["BaselinePlacer", "CpsatPlacer", "CycleInput", "Placer", "make_placer"]


@dataclass(frozen=True)
class CycleInput:
    """One cycle: ``now`` (simulated s) and the snapshot (pending gangs and running pods)."""

    now: float
    snapshot: Snapshot


class Placer(Protocol):
    """Plans one cycle. Must return a plan for ``cycle.snapshot`` (the simulator binds its
    admitted gangs and, when asked, checks it with :func:`gangplan.solver.judges.verify.verify`)."""

    name: str

    def __call__(self, cycle: CycleInput) -> CycleResult: ...


@dataclass
class BaselinePlacer:
    """A baseline of :data:`gangplan.solver.cycle.PLACERS` by name."""

    name: str

    def __call__(self, cycle: CycleInput) -> CycleResult:
        return run_baseline(cycle.snapshot, self.name)


@dataclass
class CpsatPlacer:
    """One :func:`~gangplan.solver.cycle.solve_cycle` per cycle with ``config``."""

    config: SolverConfig
    name: str = "cpsat"

    def __call__(self, cycle: CycleInput) -> CycleResult:
        return solve_cycle(cycle.snapshot, None, self.config)


def make_placer(
    name: str,
    *,
    seed: int = 0,
    time_limit_s: float = 1.0,
    workers: int = 1,
    deterministic: bool = False,
    deterministic_time: float | None = None,
) -> Placer:
    """The placer called ``name`` (one of :data:`~gangplan.solver.cycle.PLACERS`).

    CP-SAT options apply to ``cpsat`` only: ``time_limit_s`` per cycle, ``workers`` search
    workers, ``seed`` its random seed, ``deterministic`` (one worker and a deterministic
    time budget, ``deterministic_time`` units, for repeatable runs).

    Raises:
        ValueError: an unknown name (the accepted ones listed).
    """
    if name not in PLACERS:
        raise ValueError(f"unknown placer {name!r} (accepted: {', '.join(PLACERS)})")
    if name == "cpsat":
        return CpsatPlacer(
            SolverConfig(
                time_limit_s=time_limit_s,
                num_workers=workers,
                seed=cpsat_seed(seed),
                deterministic=deterministic,
                deterministic_time=deterministic_time,
            )
        )
    return BaselinePlacer(name)
