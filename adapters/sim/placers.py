"""What plans a cycle of the simulation: a small protocol over gangplan's cycle function.

A :class:`Placer` gets a :class:`CycleInput` — the cycle's snapshot and the simulated
facts a snapshot has no field for yet — and returns the cycle's
:class:`~gangplan.solver.result.CycleResult`. Two kinds:

* :class:`CpsatPlacer`: :func:`gangplan.solver.cycle.solve_cycle` (CP-SAT, the best
  baseline as incumbent and hint, time limit per cycle);
* :class:`BaselinePlacer`: :func:`gangplan.solver.cycle.run_baseline` by name (``greedy``,
  ``topology-fit``, ``fgd``).

``CycleInput.pending_since`` and ``CycleInput.expected_end`` are there for reservation with
backfill (a gang pending longer than ``reserve_after`` gets capacity held from when running
gangs are expected to end): when the snapshot gains reservations, a placer turns these into
them. Today's placers do not read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gangplan.models import Snapshot
from gangplan.solver.cycle import PLACERS, run_baseline, solve_cycle
from gangplan.solver.result import CycleResult, SolverConfig, cpsat_seed

__all__ = ["BaselinePlacer", "CpsatPlacer", "CycleInput", "Placer", "make_placer"]


@dataclass(frozen=True)
class CycleInput:
    """One cycle: ``now`` (simulated s), the snapshot (pending gangs and running pods),
    when each pending gang arrived (``namespace/name`` -> s), and when each running gang is
    expected to end (None: unknown — the traces give no estimate)."""

    now: float
    snapshot: Snapshot
    pending_since: dict[str, float] = field(default_factory=dict)
    expected_end: dict[str, float | None] = field(default_factory=dict)


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
