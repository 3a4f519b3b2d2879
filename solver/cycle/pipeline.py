"""One scheduling cycle: snapshot to plan, inside one budget.

:func:`solve_cycle` is the entry point of ``gangplan solve``, ``serve``, ``simulate`` and
the benchmarks (``replan`` shares its parts: :mod:`gangplan.solver.replan.planner` says
which). ``config.time_limit_s`` bounds all of it (:mod:`gangplan.solver.budget` names the
parts and says how each is counted); how the budget is shared is the
:class:`~gangplan.solver.cycle.policy.CyclePolicy` it is given. Its steps, in order:

1. **context**: index the snapshot (:class:`~gangplan.solver.context.CycleContext`);
2. **reservations**: where reservations are on, give starving gangs theirs
   (:mod:`gangplan.solver.cycle.reservations`), in a context derived from the first; every
   placer then respects the held capacity, and the plan carries the reservations;
3. **incumbent**: the baselines and, where ``fgd`` leads, FGD's restarts, inside their
   shares (:mod:`gangplan.solver.cycle.incumbent`); their best plan by score is the
   incumbent, scored only;
4. **model and search**: with what is left after keeping the reasons' and the checks'
   time (and the polish's, where it applies), build the CP-SAT model, hint it with the
   incumbent and optimise the score's entries tier by tier
   (:func:`~gangplan.solver.model.builder.solve_model`); Ctrl-C stops the search (the best
   plan found so far is kept); no time left: no model;
5. **choose and verify once**: the first plan to pass the verifier of CP-SAT's (polished
   where the polish gathers a gang), the incumbent where that scores higher, the incumbent
   polished, the incumbent (:mod:`gangplan.solver.cycle.choose`);
6. **reasons**: a reason for every pending gang within its share
   (:mod:`gangplan.solver.cycle.reasons`);
7. **assemble**: the plan with its summary (tier reports: :mod:`gangplan.solver.cycle.tiers`)
   and the :class:`~gangplan.solver.result.CycleResult`.

With preemption on (``Snapshot.preemption.enabled``) each baseline is followed by its
greedy preemption (inside the baseline's part) and the plans carry evictions.

The result reports the time each part took (``CycleResult.parts``, the plan summary's
``parts``). It never raises for "nothing fits": an empty plan with reasons is a valid
answer. :func:`run_baseline` runs one baseline placer alone, through the same reservations,
reasons and assembly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

from gangplan.models import Gang, PendingReason, Plan, PlanSummary, PodPlacement, Snapshot
from gangplan.solver.budget import Budget, SearchStop, gc_paused, interruptible
from gangplan.solver.context import CycleContext
from gangplan.solver.cycle.checks import score_plan
from gangplan.solver.cycle.choose import Choice, Searched, choose
from gangplan.solver.cycle.incumbent import Incumbent, build_incumbent, run_placer
from gangplan.solver.cycle.policy import DEFAULT_POLICY, CyclePolicy
from gangplan.solver.cycle.polish import polish_applies
from gangplan.solver.cycle.reasons import ExactCheck, explain_pending
from gangplan.solver.cycle.reservations import reserved_context
from gangplan.solver.cycle.tiers import current_notes, plan_tiers
from gangplan.solver.judges.score import Score
from gangplan.solver.placers.baselines import BASELINES
from gangplan.solver.result import CycleResult, CycleStatus, SolverConfig, assemble_plan

__all__ = ["PLACERS", "run_baseline", "run_baseline_in", "solve_cycle", "solve_cycle_in"]

PLACERS = ("cpsat", *BASELINES)


def solve_cycle(
    snapshot: Snapshot,
    previous: Plan | None = None,
    config: SolverConfig | None = None,
    *,
    policy: CyclePolicy = DEFAULT_POLICY,
) -> CycleResult:
    """Solve one cycle with CP-SAT, never worse by score than the best baseline, within
    ``config.time_limit_s`` for all of it (snapshot indexing included).

    Args:
        snapshot: the cycle's snapshot.
        previous: the previous cycle's plan (stability entry of the score), or None.
        config: options; :class:`SolverConfig` defaults when None.
        policy: how the budget is shared (:mod:`gangplan.solver.cycle.policy`).

    Returns:
        A :class:`CycleResult` whose plan passes :func:`~gangplan.solver.judges.verify.verify`.
    """
    import gangplan.solver.model.builder  # noqa: F401  (OR-Tools loads before the clock starts)

    cfg = config or SolverConfig()
    budget = _budget_of(cfg)
    with gc_paused():
        ctx = _context(snapshot, budget)  # 1.
        return _cycle(ctx, previous, cfg, budget, policy)


def solve_cycle_in(
    ctx: CycleContext,
    previous: Plan | None = None,
    config: SolverConfig | None = None,
    *,
    policy: CyclePolicy = DEFAULT_POLICY,
) -> CycleResult:
    """:func:`solve_cycle` in a context the caller built (e.g. with FGD's workload set to a
    trace's distribution, as the replay does); the budget starts here."""
    import gangplan.solver.model.builder  # noqa: F401  (OR-Tools loads before the clock starts)

    cfg = config or SolverConfig()
    with gc_paused():
        return _cycle(ctx, previous, cfg, _budget_of(cfg), policy)


def _cycle(
    ctx: CycleContext, previous: Plan | None, cfg: SolverConfig, budget: Budget, policy: CyclePolicy
) -> CycleResult:
    """The cycle's steps after the context (module docstring), in order."""
    ctx = _reservations(ctx, budget)  # 2. (a context derived from the first)
    notes = _held_preemption_note(ctx.snapshot)
    inc = build_incumbent(ctx, previous, cfg, budget, notes, policy)  # 3. scored, not verified
    searched = _search(ctx, inc, previous, cfg, budget, notes, policy)  # 4. None: no time
    chosen = choose(ctx, inc, searched, previous, budget, notes)  # 5. verified here only
    reasons = _reasons(ctx, chosen.pods, budget, cfg, keep=inc.keep)  # 6.
    plan = _assemble(ctx, chosen, reasons, budget, notes, searched)  # 7.
    return CycleResult(
        status=chosen.status,
        plan=plan,
        score=chosen.score,
        incumbent_score=inc.score,
        baseline_scores=inc.scores,
        wall_time_s=budget.wall(),
        model_size=searched.model_size if searched is not None else {},
        notes=notes,
        parts=dict(budget.parts),
        work=dict(budget.work),
        interrupted=searched is not None and searched.interrupted,
    )


# --------------------------------------------------------------------------- the steps


def _budget_of(cfg: SolverConfig) -> Budget:
    if cfg.deterministic:
        return Budget(cfg.deterministic_time or cfg.time_limit_s, deterministic=True)
    return Budget(cfg.time_limit_s)


def _context(snapshot: Snapshot, budget: Budget) -> CycleContext:
    """Step 1 (part ``context``): the snapshot indexed, with the template state every
    placer copies; charged by the nodes and gangs it reads."""
    with budget.part("context"):
        ctx = CycleContext.of(snapshot)
        ctx.state()  # the template every placer copies
    budget.charge("context", units=len(snapshot.nodes) + len(snapshot.gangs))
    return ctx


def _reservations(ctx: CycleContext, budget: Budget) -> CycleContext:
    """Step 2 (part ``reservations``): ``ctx`` with the cycle's reservations
    (:func:`~gangplan.solver.cycle.reservations.reserved_context`), charged by the node
    evaluations of their greedy."""
    before = ctx.meter.units
    with budget.part("reservations"):
        ctx = reserved_context(ctx)
    if ctx.meter.units > before:
        budget.charge("reservations", units=ctx.meter.units - before)
    return ctx


def _search(
    ctx: CycleContext,
    inc: Incumbent,
    previous: Plan | None,
    cfg: SolverConfig,
    budget: Budget,
    notes: list[str],
    policy: CyclePolicy,
) -> Searched | None:
    """Step 4 (parts ``model``, ``search``, ``plan``): CP-SAT hinted with the incumbent in
    what is left after the reasons' time, ``check_reserve`` checks and the polish's time
    (:func:`_polish_keep`); None (and a note) where that does not hold the model's predicted
    build and ``min_search_s``."""
    from gangplan.solver.model.builder import build_units, solve_model

    room = inc.room(budget)
    build = inc.build_cost
    if room < build + policy.min_search_s:
        notes.append(
            f"no time left for CP-SAT ({budget.elapsed():.3g} s of the {budget.limit:g} s budget "
            f"spent before the model, {inc.keep:.3g} s kept for the reasons and "
            f"{policy.check_reserve * inc.check_cost:.3g} s for {policy.check_reserve} checks; "
            f"building the model would take about {build:.3g} s); the incumbent is returned"
        )
        return None
    polish_keep = _polish_keep(ctx, inc, room - build - policy.min_search_s, policy)
    room -= polish_keep
    model_cfg = dataclasses.replace(cfg, deterministic_time=room) if cfg.deterministic else cfg
    stop = SearchStop()
    before = ctx.meter.units
    with interruptible(stop) if cfg.interruptible else contextlib.nullcontext():
        out = solve_model(ctx, inc.pods, previous, model_cfg, room, inc.evictions, stop=stop)
    for part, seconds in out.parts.items():
        budget.parts[part] = budget.parts.get(part, 0.0) + seconds
    budget.charge("model", units=build_units(ctx.meter.units - before, out.model_size))
    budget.charge("search", seconds=out.deterministic_time)
    notes += out.notes
    if out.interrupted:
        notes.append(
            "interrupted (Ctrl-C): the search stopped early; the best verified plan found "
            "so far is returned"
        )
    return Searched(
        out.status, out.pods, out.evictions, out.tiers, polish_keep, out.model_size, out.interrupted
    )


def _polish_keep(ctx: CycleContext, inc: Incumbent, spare: float, policy: CyclePolicy) -> float:
    """The time kept from CP-SAT's search for the locality polish: ``polish_cost`` times
    the first baseline's cost, where the polish applies
    (:func:`~gangplan.solver.cycle.polish.polish_applies`) and ``spare`` (what the search
    could give up) holds it; else 0."""
    need = policy.polish_cost * inc.first_cost
    return need if polish_applies(ctx) and need <= spare else 0.0


def _reasons(
    ctx: CycleContext,
    pods: list[PodPlacement],
    budget: Budget,
    cfg: SolverConfig | None,
    *,
    keep: float = 0.0,
) -> dict[str, PendingReason]:
    """Step 6 (part ``reasons``): a reason per gang ``pods`` leave pending, within what is
    left of ``keep``; with ``cfg`` (a CP-SAT cycle), an exact check where the quick ones
    cannot tell (:func:`~gangplan.solver.model.builder.gang_fits`), on CP-SAT's
    deterministic seconds in deterministic mode, so the reasons repeat from run to run.
    The reasons are the cycle's last use of its states: they are released here
    (:meth:`CycleContext.release`)."""
    exact_check: ExactCheck | None = None
    spent = [0.0] if cfg is not None and cfg.deterministic else None
    if cfg is not None:
        from gangplan.solver.model.builder import gang_fits

        def exact_check(gang: Gang, empty: bool, seconds: float) -> bool | None:
            return gang_fits(
                ctx, gang, empty, seconds, cfg.seed, deterministic=cfg.deterministic, spent=spent
            )

    placed = {p.gang_key for p in pods}
    pending = [g for g in ctx.snapshot.gangs if g.key not in placed]
    reason_budget = max(0.0, min(budget.left(), keep)) if cfg is not None else 0.0
    before = ctx.meter.units
    with budget.part("reasons"):
        reasons = explain_pending(
            ctx,
            pods,
            pending,
            exact_check=exact_check,
            budget_s=reason_budget,
            clock=(lambda: spent[0]) if spent is not None else time.monotonic,
        )
    budget.charge(
        "reasons",
        units=ctx.meter.units - before + len(pending),
        seconds=spent[0] if spent is not None else 0.0,
    )
    ctx.release()
    return reasons


def _assemble(
    ctx: CycleContext,
    chosen: Choice,
    reasons: dict[str, PendingReason],
    budget: Budget,
    notes: list[str],
    searched: Searched | None = None,
) -> Plan:
    """Step 7: the chosen plan with its reasons, the snapshot's reservations and its
    summary (the search's notes the plan's own values contradict left out:
    :func:`~gangplan.solver.cycle.tiers.current_notes`)."""
    s = ctx.snapshot
    plan = _with_reservations(s, assemble_plan(s, chosen.pods, reasons, evictions=chosen.evictions))
    summary = PlanSummary(
        placer=chosen.placer,
        status=chosen.status.value,
        tiers=chosen.tiers,
        wall_time_s=round(budget.wall(), 4),
        parts={k: round(v, 4) for k, v in budget.parts.items()},
        model_size=searched.model_size if searched is not None else {},
        notes=tuple(current_notes(notes, chosen.tiers)),
    )
    return plan.model_copy(update={"summary": summary})


def _with_reservations(snapshot: Snapshot, plan: Plan) -> Plan:
    """``plan`` carrying the snapshot's reservations, each reserved pending gang's reason
    saying where and from when."""
    if not snapshot.reservations:
        return plan
    now = snapshot.preemption_rules.now
    by_key = {r.key: r for r in snapshot.reservations}
    outcomes = []
    for o in plan.gangs:
        res = by_key.get(o.key)
        if res is not None and o.reason is not None:
            note = f"; reserved: {res.describe(now)}"
            o = o.model_copy(
                update={"reason": o.reason.model_copy(update={"message": o.reason.message + note})}
            )
        outcomes.append(o)
    return plan.model_copy(update={"gangs": tuple(outcomes), "reservations": snapshot.reservations})


def _held_preemption_note(snapshot: Snapshot) -> list[str]:
    """The note that the baselines do not preempt while reservations are held
    (:func:`~gangplan.solver.placers.greedy_preemption.greedy_preemption`), where preemption is
    on."""
    if not (snapshot.reservations and snapshot.preemption_rules.enabled):
        return []
    return [
        "the baselines do not preempt while reservations are held (their greedy rule does "
        "not know the holds); only CP-SAT's model combines preemption and reservations"
    ]


# --------------------------------------------------------------------------- one baseline


def run_baseline(snapshot: Snapshot, name: str, previous: Plan | None = None) -> CycleResult:
    """Run one baseline placer by name (``greedy``, ``topology-fit``, ``fgd``)."""
    budget = Budget(float("inf"))
    with gc_paused():
        with budget.part("context"):
            ctx = CycleContext.of(snapshot)
        return _baseline_in(ctx, name, previous, budget)


def run_baseline_in(ctx: CycleContext, name: str, previous: Plan | None = None) -> CycleResult:
    """:func:`run_baseline` in a context the caller built (e.g. with FGD's workload set)."""
    with gc_paused():
        return _baseline_in(ctx, name, previous, Budget(float("inf")))


def _baseline_in(
    ctx: CycleContext, name: str, previous: Plan | None, budget: Budget
) -> CycleResult:
    """One baseline through the cycle's reservations, reasons and assembly: its plan is
    scored, not verified (a placer's own plan, as it made it)."""
    ctx = _reservations(ctx, budget)
    with budget.part(f"baseline.{name}"):
        pods, evictions = run_placer(ctx, name)
    sc: Score = score_plan(ctx, pods, previous, budget, evictions)
    notes = _held_preemption_note(ctx.snapshot)
    tiers = plan_tiers((), sc, cpsat=False)
    chosen = Choice(pods, evictions, sc, CycleStatus.BASELINE, name, tiers)
    plan = _assemble(ctx, chosen, _reasons(ctx, pods, budget, None), budget, notes)
    return CycleResult(
        status=CycleStatus.BASELINE,
        plan=plan,
        score=sc,
        wall_time_s=budget.wall(),
        notes=notes,
        parts=dict(budget.parts),
    )
