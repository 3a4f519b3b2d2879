"""One scheduling cycle: baselines, incumbent, CP-SAT, plan, reasons.

``solve_cycle(snapshot, previous, config)`` is the single entry point used by ``gangplan
solve``, ``replan`` and ``serve``:

1. run every baseline of :data:`~gangplan.solver.baselines.BASELINES`; keep the best plan by
   :func:`~gangplan.solver.score.score` as the incumbent;
2. build the CP-SAT model (:mod:`gangplan.solver.model`), hint it with the incumbent, and
   optimise the score's entries tier by tier within the time limit;
3. turn the counts into pods and device ids; verify the plan independently; if that fails,
   or CP-SAT's plan scores below the incumbent, return the incumbent and say so;
4. give every pending gang a reason (:mod:`gangplan.solver.reasons`).

With preemption on (``Snapshot.preemption.enabled``) each baseline is followed by the greedy
preemption of :mod:`gangplan.solver.preemption`, and the plans carry evictions.

It never raises for "nothing fits": an empty plan with reasons is a valid answer.
"""

from __future__ import annotations

import time

from gangplan.models import (
    Eviction,
    Gang,
    Plan,
    PlanSummary,
    PodPlacement,
    Snapshot,
    TierReport,
)
from gangplan.solver.baselines import BASELINES
from gangplan.solver.context import CycleContext
from gangplan.solver.preemption import REPRIEVE, greedy_preemption
from gangplan.solver.reasons import ExactCheck, explain_pending
from gangplan.solver.result import CycleResult, CycleStatus, SolverConfig, assemble_plan
from gangplan.solver.score import Score, score
from gangplan.solver.verify import verify

__all__ = ["PLACERS", "run_baseline", "run_baseline_in", "solve_cycle", "solve_cycle_in"]

PLACERS = ("cpsat", *BASELINES)


def _finish(
    ctx: CycleContext,
    pods: list[PodPlacement],
    placer: str,
    status: CycleStatus,
    started: float,
    *,
    previous: Plan | None,
    tiers: tuple[TierReport, ...] = (),
    model_size: dict[str, int] | None = None,
    notes: list[str] | None = None,
    reason_budget: float = 0.0,
    exact_check: ExactCheck | None = None,
    evictions: list[Eviction] | None = None,
) -> tuple[Plan, Score]:
    placed = {p.gang_key for p in pods}
    pending = [g for g in ctx.snapshot.gangs if g.key not in placed]
    reasons = explain_pending(ctx, pods, pending, exact_check=exact_check, budget_s=reason_budget)
    plan = assemble_plan(ctx.snapshot, pods, reasons, evictions=evictions or [])
    sc = score(ctx.snapshot, plan, previous, topology=ctx.topo, shares=ctx.shares)
    if tiers:
        # report the returned plan's own values (the model's may be looser, e.g. a spread
        # counted from an untightened 'uses' variable); keep bound, gap and status
        by_name = {t.name: t for t in tiers}
        tiers = tuple(
            by_name[n].model_copy(update={"value": v})
            if n in by_name
            else TierReport(name=n, value=v)
            for n, v in sc.entries
        )
    else:
        tiers = tuple(TierReport(name=n, value=v) for n, v in sc.entries)
    summary = PlanSummary(
        placer=placer,
        status=status.value,
        tiers=tiers,
        wall_time_s=round(time.monotonic() - started, 4),
        model_size=model_size or {},
        notes=tuple(notes or ()),
    )
    return plan.model_copy(update={"summary": summary}), sc


def run_baseline(snapshot: Snapshot, name: str, previous: Plan | None = None) -> CycleResult:
    """Run one baseline placer by name (``greedy``, ``topology-fit``, ``fgd``)."""
    return run_baseline_in(CycleContext.of(snapshot), name, previous)


def run_baseline_in(ctx: CycleContext, name: str, previous: Plan | None = None) -> CycleResult:
    """:func:`run_baseline` in a context the caller built (e.g. with FGD's workload set)."""
    started = time.monotonic()
    pods, evictions = _baseline(ctx, name)
    plan, sc = _finish(
        ctx, pods, name, CycleStatus.BASELINE, started, previous=previous, evictions=evictions
    )
    return CycleResult(
        status=CycleStatus.BASELINE,
        plan=plan,
        score=sc,
        wall_time_s=time.monotonic() - started,
    )


def _baseline(ctx: CycleContext, name: str) -> tuple[list[PodPlacement], list[Eviction]]:
    """One baseline's pods, then (preemption on) its greedy preemption's pods and evictions."""
    pods = BASELINES[name](ctx)
    return greedy_preemption(ctx, pods, reprieve=REPRIEVE.get(name, True))


def solve_cycle(
    snapshot: Snapshot,
    previous: Plan | None = None,
    config: SolverConfig | None = None,
) -> CycleResult:
    """Solve one cycle with CP-SAT, never worse by score than the best baseline.

    Args:
        snapshot: the cycle's snapshot.
        previous: the previous cycle's plan (stability entry of the score), or None.
        config: options; :class:`SolverConfig` defaults when None.

    Returns:
        A :class:`CycleResult` whose plan passes :func:`~gangplan.solver.verify.verify`.
    """
    return solve_cycle_in(CycleContext.of(snapshot), previous, config)


def solve_cycle_in(
    ctx: CycleContext,
    previous: Plan | None = None,
    config: SolverConfig | None = None,
) -> CycleResult:
    """:func:`solve_cycle` in a context the caller built (e.g. with FGD's workload set to a
    trace's distribution, as the replay does)."""
    from gangplan.solver.model.builder import gang_fits, solve_model

    cfg = config or SolverConfig()
    started = time.monotonic()
    snapshot, topo = ctx.snapshot, ctx.topo
    notes: list[str] = []

    baseline_scores: dict[str, Score] = {}
    empty = assemble_plan(snapshot, [], {})
    best: tuple[Score, str, list[PodPlacement], list[Eviction]] = (
        score(snapshot, empty, previous, topology=topo, shares=ctx.shares),
        "empty plan",
        [],
        [],
    )
    for name in BASELINES:
        pods, evictions = _baseline(ctx, name)
        plan = assemble_plan(snapshot, pods, {}, evictions=evictions)
        sc = score(snapshot, plan, previous, topology=topo, shares=ctx.shares)
        baseline_scores[name] = sc
        if verify(snapshot, plan, topology=topo):
            notes.append(f"baseline {name} produced an invalid plan; not used as incumbent")
            continue
        if best[0] < sc:
            best = (sc, name, pods, evictions)
    incumbent_score, incumbent_name, incumbent_pods, incumbent_evictions = best

    budget = max(0.05, cfg.time_limit_s * (1 - cfg.reason_share))
    outcome = solve_model(ctx, incumbent_pods, previous, cfg, budget, incumbent_evictions)
    notes += outcome.notes
    status = outcome.status
    found: list[PodPlacement] | None = outcome.pods
    found_evictions = outcome.evictions
    placer_name = "cpsat"
    if found is not None:
        trial = assemble_plan(snapshot, found, {}, evictions=found_evictions)
        violations = verify(snapshot, trial, topology=topo)
        if violations:
            notes.append(
                "CP-SAT's solution failed the verifier "
                f"({violations[0]}); the incumbent is returned"
            )
            status, found = CycleStatus.FALLBACK, None
        else:
            sc = score(snapshot, trial, previous, topology=topo, shares=ctx.shares)
            if sc < incumbent_score:
                notes.append("CP-SAT's plan scores below the incumbent; the incumbent is returned")
                status, found = CycleStatus.INCUMBENT, None
    if found is None:
        found = incumbent_pods
        found_evictions = incumbent_evictions
        placer_name = f"cpsat (incumbent: {incumbent_name})"
        if status not in (CycleStatus.FALLBACK, CycleStatus.INCUMBENT):
            status = CycleStatus.INCUMBENT
    reason_budget = max(0.0, cfg.time_limit_s - (time.monotonic() - started))

    def exact_check(gang: Gang, empty: bool, seconds: float) -> bool | None:
        return gang_fits(ctx, gang, empty, seconds, cfg.seed)

    plan, sc = _finish(
        ctx,
        found,
        placer_name,
        status,
        started,
        previous=previous,
        # the model's bounds hold whatever plan is returned; the values are the plan's own
        tiers=outcome.tiers
        if status in (CycleStatus.OPTIMAL, CycleStatus.FEASIBLE)
        else tuple(
            t.model_copy(update={"status": f"{t.status}; incumbent returned"})
            for t in outcome.tiers
        ),
        model_size=outcome.model_size,
        notes=notes,
        reason_budget=min(reason_budget, cfg.time_limit_s * cfg.reason_share),
        exact_check=exact_check,
        evictions=found_evictions,
    )
    return CycleResult(
        status=status,
        plan=plan,
        score=sc,
        incumbent_score=incumbent_score,
        baseline_scores=baseline_scores,
        wall_time_s=time.monotonic() - started,
        model_size=outcome.model_size,
        notes=notes,
    )
