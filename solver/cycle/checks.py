"""Scoring and verifying a plan inside the cycle's budget (part ``check``).

:func:`score_plan` scores a plan only: the incumbent's candidates are scored as they are
made (:mod:`gangplan.solver.cycle.incumbent`). :func:`verify_plan` scores (unless the caller
has the score already) and verifies one; :mod:`gangplan.solver.cycle.choose` is its one
caller, so the plan the cycle returns is verified in one place.

In deterministic mode a check is charged by the objects it reads: the plan's pods, the
snapshot's nodes and gangs; a score alone a third of that, a verification alone two thirds
(:mod:`gangplan.solver.budget`).
"""

from __future__ import annotations

from gangplan.models import Eviction, Plan, PodPlacement
from gangplan.solver.budget import Budget
from gangplan.solver.context import CycleContext
from gangplan.solver.judges.score import Score, score
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import assemble_plan

__all__ = ["empty_score", "score_plan", "verify_plan"]


def _units(ctx: CycleContext, pods: list[PodPlacement]) -> int:
    """A full check's work units: what the score and the verifier read."""
    return len(pods) + len(ctx.node_names) + len(ctx.snapshot.gangs)


def empty_score(ctx: CycleContext, previous: Plan | None) -> Score:
    """The empty plan's score, the floor every candidate is compared with; computed before
    the baselines, in no part and charged nothing."""
    empty = assemble_plan(ctx.snapshot, [], {})
    return score(ctx.snapshot, empty, previous, topology=ctx.topo, shares=ctx.shares)


def score_plan(
    ctx: CycleContext,
    pods: list[PodPlacement],
    previous: Plan | None,
    budget: Budget,
    evictions: list[Eviction],
) -> Score:
    """The score of ``pods`` with ``evictions`` (part ``check``), not verified."""
    with budget.part("check"):
        plan = assemble_plan(ctx.snapshot, pods, {}, evictions=evictions)
        sc = score(ctx.snapshot, plan, previous, topology=ctx.topo, shares=ctx.shares)
    budget.charge("check", units=_units(ctx, pods) // 3)
    return sc


def verify_plan(
    ctx: CycleContext,
    pods: list[PodPlacement],
    previous: Plan | None,
    budget: Budget,
    evictions: list[Eviction],
    *,
    scored: Score | None = None,
) -> tuple[Score, str | None]:
    """``pods`` with ``evictions`` scored (unless ``scored`` is their score already) and
    verified (part ``check``): the score and the first violation, None if they pass
    :func:`~gangplan.solver.judges.verify.verify`."""
    with budget.part("check"):
        plan = assemble_plan(ctx.snapshot, pods, {}, evictions=evictions)
        sc = (
            scored
            if scored is not None
            else score(ctx.snapshot, plan, previous, topology=ctx.topo, shares=ctx.shares)
        )
        violations = verify(ctx.snapshot, plan, topology=ctx.topo)
    units = _units(ctx, pods)
    budget.charge("check", units=units if scored is None else 2 * units // 3)
    return sc, (str(violations[0]) if violations else None)
