"""Build the CP-SAT model, solve it tier by tier, and turn counts back into pods and devices.

:func:`solve_model` is the model's entry point for the cycle (and the replan); it runs three
steps, each in its own module (the layout of PyJobShop's CP-SAT backend: a model builder, a
solver, a solution reader):

1. **build** (:func:`~gangplan.solver.model.build.build_model`): index, variables, the
   constraint families and the objective terms, under a guard that owns the build's clock
   and stops a build past its bounds (the incumbent is then returned);
2. **search** (:class:`~gangplan.solver.model.search.LexicographicSearch`): the incumbent
   completed into a hint, then one solve per score entry — maximise it, fix
   ``term >= value``, next — with neighbourhood search on large models;
3. **read-back** (:func:`~gangplan.solver.model.readback.read_back`): the last solution
   that meets every tier as pods with node and device ids, and evictions.

:func:`~gangplan.solver.model.fits.gang_fits`, the reasons' exact check, and
:func:`~gangplan.solver.model.build.build_units`, the build's charge, are re-exported here
for the cycle.
"""

from __future__ import annotations

import time

from gangplan.models import Eviction, Plan, PodPlacement
from gangplan.solver.budget import SearchStop
from gangplan.solver.context import CycleContext
from gangplan.solver.model.build import build_model, build_units
from gangplan.solver.model.fits import gang_fits
from gangplan.solver.model.outcome import ModelOutcome
from gangplan.solver.model.readback import read_back
from gangplan.solver.model.search import LexicographicSearch, SearchLimits
from gangplan.solver.result import CycleStatus, SolverConfig

__all__ = ["ModelOutcome", "build_units", "gang_fits", "solve_model"]


def solve_model(
    ctx: CycleContext,
    incumbent: list[PodPlacement],
    previous: Plan | None,
    cfg: SolverConfig,
    budget_s: float,
    incumbent_evictions: list[Eviction] | None = None,
    *,
    stop: SearchStop | None = None,
) -> ModelOutcome:
    """Optimise the cycle with CP-SAT within ``budget_s`` seconds, building included (see the
    module docstring). In deterministic mode the search gets ``cfg.deterministic_time``
    deterministic seconds in all (the completion of the hint included), less the build's
    charge, shared by the tiers. ``stop``: a request to stop (Ctrl-C) ends the search; the
    best solution so far is used.

    ``incumbent_evictions``: the incumbent plan's evictions (preemption on), part of its
    hint. Returns pods and evictions (pods None when CP-SAT found no solution in time),
    tier reports, model size and the time of each part.
    """
    started = time.monotonic()
    built = build_model(ctx, cfg, previous, incumbent, budget_s, started)
    if isinstance(built, ModelOutcome):
        return built  # nothing to place, or the build stopped
    hint = built.v.hint(incumbent, incumbent_evictions)
    limits = SearchLimits(started, budget_s, built.search_budget)
    search = LexicographicSearch(built, cfg, hint, limits, stop)
    search.start()
    search_started = time.monotonic()
    found = search.run()
    parts = {"model": search_started - started, "search": time.monotonic() - search_started}
    notes = [*built.notes, *found.notes]
    if found.solution is None:
        return ModelOutcome(
            CycleStatus.INCUMBENT,
            None,
            model_size=built.size,
            notes=notes,
            parts=parts,
            deterministic_time=found.deterministic_time,
            interrupted=found.interrupted,
        )
    plan_started = time.monotonic()
    pods, evictions, tiers = read_back(ctx, built, found.solution, found.reports, previous)
    parts["plan"] = time.monotonic() - plan_started
    proven = found.optimal and not found.interrupted
    return ModelOutcome(
        CycleStatus.OPTIMAL if proven else CycleStatus.FEASIBLE,
        pods,
        evictions,
        tiers=tiers,
        model_size=built.size,
        notes=notes,
        parts=parts,
        deterministic_time=found.deterministic_time,
        interrupted=found.interrupted,
    )
