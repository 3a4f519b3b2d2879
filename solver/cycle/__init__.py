"""One scheduling cycle, snapshot to plan, inside one budget.

:func:`solve_cycle` (and :func:`solve_cycle_in` on a built
:class:`~gangplan.solver.context.CycleContext`) is the entry point of ``gangplan solve``,
``serve``, ``simulate`` and the benchmarks; :func:`run_baseline` runs one baseline placer
alone. The pipeline is :mod:`.pipeline`, its steps in order: reservation and backfill
:mod:`.reservations`; the incumbent (the baselines and FGD's restarts) :mod:`.incumbent`;
choosing and verifying the returned plan :mod:`.choose` (scoring and verifying inside the
budget :mod:`.checks`; the locality polish :mod:`.polish`); the reasons for pending gangs
:mod:`.reasons`; the tier reports :mod:`.tiers`. How the budget is shared is
:mod:`.policy`.
"""

from gangplan.solver.cycle.pipeline import (
    PLACERS,
    run_baseline,
    run_baseline_in,
    solve_cycle,
    solve_cycle_in,
)
from gangplan.solver.cycle.policy import DEFAULT_POLICY, CyclePolicy

__all__ = [
    "DEFAULT_POLICY",
    "PLACERS",
    "CyclePolicy",
    "run_baseline",
    "run_baseline_in",
    "solve_cycle",
    "solve_cycle_in",
]
