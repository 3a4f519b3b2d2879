"""One scheduling cycle, snapshot to plan, inside one budget.

:func:`solve_cycle` (and :func:`solve_cycle_in` on a built
:class:`~gangplan.solver.context.CycleContext`) is the entry point of ``gangplan solve``,
``serve``, ``simulate`` and the benchmarks; :func:`run_baseline` runs one baseline placer
alone. The pipeline is :mod:`.pipeline`; the reasons for pending gangs :mod:`.reasons`;
reservation and backfill :mod:`.reservations`; the locality polish of an incumbent
:mod:`.polish`.
"""

from gangplan.solver.cycle.pipeline import (
    PLACERS,
    run_baseline,
    run_baseline_in,
    solve_cycle,
    solve_cycle_in,
)

__all__ = ["PLACERS", "run_baseline", "run_baseline_in", "solve_cycle", "solve_cycle_in"]
