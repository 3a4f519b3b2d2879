"""Choose the cycle's plan and verify it: the one place the cycle calls the verifier
(:func:`~gangplan.solver.cycle.checks.verify_plan`).

:func:`choose` returns the first of these that passes the verifier, in this order:

1. CP-SAT's plan polished (:mod:`gangplan.solver.cycle.polish`, in the time kept from the
   search), where the polish gathered a gang; else CP-SAT's own plan. One that fails the
   verifier is not returned, and the notes say so (status ``fallback``);
2. where that plan scores below the incumbent, the incumbent is verified first
   (:func:`settle`: the best plan of the pool that passes, a failing one giving way to
   the next), and CP-SAT's plan is returned only if it still scores at least as high;
3. otherwise the incumbent, polished where the polish applies and its predicted cost fits
   (``polish_cost`` times the first baseline's, after the reasons' time and
   ``incumbent_check_margin`` checks), else as it is (:func:`settle`).

The choice carries the returned plan's tier reports (:func:`~gangplan.solver.cycle.tiers.
plan_tiers`), built once from the model's and the plan's own score.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gangplan.models import Eviction, Plan, PodPlacement, TierReport
from gangplan.solver.budget import Budget
from gangplan.solver.context import CycleContext
from gangplan.solver.cycle.checks import verify_plan
from gangplan.solver.cycle.incumbent import Incumbent
from gangplan.solver.cycle.polish import Polished, polish_applies, polish_locality
from gangplan.solver.cycle.tiers import plan_tiers
from gangplan.solver.judges.score import Score
from gangplan.solver.result import CycleStatus

__all__ = ["Choice", "Searched", "choose", "settle"]


@dataclass
class Searched:
    """What CP-SAT's step left: the model's outcome (a
    :class:`~gangplan.solver.model.builder.ModelOutcome`'s status, pods, evictions, tier
    reports, model size and whether Ctrl-C stopped it) and the time kept from its search
    for the polish (0: no polish)."""

    status: CycleStatus
    pods: list[PodPlacement] | None
    evictions: list[Eviction] = field(default_factory=list)
    tiers: tuple[TierReport, ...] = ()
    polish_keep: float = 0.0
    model_size: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False


@dataclass
class Choice:
    """The plan the cycle returns: verified, scored, with its status, placer name and tier
    reports."""

    pods: list[PodPlacement]
    evictions: list[Eviction]
    score: Score
    status: CycleStatus
    placer: str
    tiers: tuple[TierReport, ...]


def choose(
    ctx: CycleContext,
    inc: Incumbent,
    searched: Searched | None,
    previous: Plan | None,
    budget: Budget,
    notes: list[str],
) -> Choice:
    """The cycle's plan (module docstring); ``searched`` None: CP-SAT did not run."""
    status = CycleStatus.INCUMBENT if searched is None else searched.status
    model = searched.tiers if searched is not None else ()
    if searched is not None and searched.pods is not None:
        got = _model_plan(ctx, inc, searched, previous, budget, notes)
        if got is None:
            status = CycleStatus.FALLBACK
        else:
            pods, sc, evictions, polished = got
            if sc < inc.score:
                settle(ctx, inc, budget, notes)  # the incumbent would win: verify it first
            if sc < inc.score:
                notes.append("CP-SAT's plan scores below the incumbent; the incumbent is returned")
                status = CycleStatus.INCUMBENT
            else:
                first = sc.first_difference(inc.score)
                notes.append(
                    f"CP-SAT's plan scores above the incumbent ({inc.name}) at {first}"
                    if first is not None
                    else f"CP-SAT's plan scores equal to the incumbent ({inc.name})"
                )
                if polished is not None and status is CycleStatus.OPTIMAL:
                    status = CycleStatus.FEASIBLE  # the entries below the polish lost their proof
                tiers = plan_tiers(model, sc, cpsat=True, polished=polished)
                return Choice(pods, evictions, sc, status, "cpsat", tiers)
    if status not in (CycleStatus.FALLBACK, CycleStatus.INCUMBENT):
        status = CycleStatus.INCUMBENT
    return _incumbent_plan(ctx, inc, model, status, previous, budget, notes)


def _model_plan(
    ctx: CycleContext,
    inc: Incumbent,
    searched: Searched,
    previous: Plan | None,
    budget: Budget,
    notes: list[str],
) -> tuple[list[PodPlacement], Score, list[Eviction], Polished | None] | None:
    """CP-SAT's plan verified: polished where the search kept time for it and the polish
    gathered a gang that passes the verifier, else its own; None if its own fails."""
    pods = searched.pods
    assert pods is not None
    if searched.polish_keep and not searched.evictions:
        reserve = inc.keep + inc.check_cost
        polished = _polished(ctx, pods, previous, budget, reserve, notes)
        if polished is not None:
            return polished[1].pods, polished[0], [], polished[1]
    sc, violation = verify_plan(ctx, pods, previous, budget, searched.evictions)
    if violation is not None:
        notes.append(
            f"CP-SAT's solution failed the verifier ({violation}); the incumbent is returned"
        )
        return None
    return pods, sc, searched.evictions, None


def _incumbent_plan(
    ctx: CycleContext,
    inc: Incumbent,
    model: tuple[TierReport, ...],
    status: CycleStatus,
    previous: Plan | None,
    budget: Budget,
    notes: list[str],
) -> Choice:
    """The incumbent, polished where that applies and fits (:func:`_polished_incumbent`),
    else verified as it is (:func:`settle`)."""
    got = _polished_incumbent(ctx, inc, previous, budget, notes)
    if got is not None:
        sc, polished = got
        tiers = plan_tiers(model, sc, cpsat=False, polished=polished)
        placer = f"cpsat (incumbent: {inc.name}, polished)"
        return Choice(polished.pods, [], sc, status, placer, tiers)
    settle(ctx, inc, budget, notes)
    tiers = plan_tiers(model, inc.score, cpsat=False)
    placer = f"cpsat (incumbent: {inc.name})"
    return Choice(inc.pods, inc.evictions, inc.score, status, placer, tiers)


def settle(ctx: CycleContext, inc: Incumbent, budget: Budget, notes: list[str]) -> None:
    """Verify the pool's best pending plan until one passes, which becomes ``inc.held``; a
    failing one is dropped, and the notes say so; then no plan is pending. Whatever the
    budget: the cycle returns only a verified plan."""
    while inc.pending:
        top = inc.top
        if top is inc.held:
            break  # the verified plan is at least as good as every plan left
        inc.pending.remove(top)
        _, violation = verify_plan(ctx, top.pods, None, budget, top.evictions, scored=top.score)
        if violation is not None:
            notes.append(
                f"baseline {top.name} produced an invalid plan ({violation}); not used as incumbent"
            )
            continue
        inc.held = top
        break
    inc.pending.clear()


def _polished(
    ctx: CycleContext,
    pods: list[PodPlacement],
    previous: Plan | None,
    budget: Budget,
    reserve: float,
    notes: list[str],
    incumbent: bool = False,
) -> tuple[Score, Polished] | None:
    """``pods`` (CP-SAT's plan, or with ``incumbent`` the incumbent's, as the notes say)
    polished (part ``polish``), scored and verified (part ``check``); None when no gang was
    gathered, or the polished plan failed the verifier (said in the notes): the caller
    checks ``pods`` as they are. The polish stops when ``budget`` has no more than
    ``reserve`` left."""
    whose = "the incumbent's" if incumbent else "CP-SAT's"
    before = ctx.meter.units
    with budget.part("polish"):
        got = polish_locality(ctx, pods, out_of_time=lambda: budget.left() <= reserve)
    budget.charge("polish", units=ctx.meter.units - before + len(pods))
    if not got.gathered:
        if got.spread:
            notes.append(
                f"locality polish: none of the {got.spread:,} spread gang"
                f"{'s' if got.spread != 1 else ''} in {whose} plan gathered "
                f"({budget.parts.get('polish', 0.0):.2f} s): no exchange with one-pod gangs "
                "nor placement again raised their locality"
            )
        return None
    sc, violation = verify_plan(ctx, got.pods, previous, budget, [])
    if violation is not None:
        notes.append(
            f"the locality polish's plan failed the verifier ({violation}); CP-SAT's own plan "
            "is checked instead"
            if not incumbent
            else f"the incumbent, polished, failed the verifier ({violation}); the incumbent "
            "is checked as it is (a baseline's plan that fails gives way to the next)"
        )
        return None
    where = f"in {whose} plan" if incumbent else "after the search"
    notes.append(
        f"locality polish: {len(got.gathered):,} spread gang"
        f"{'s' if len(got.gathered) != 1 else ''} gathered into fewer domains {where} "
        f"({budget.parts.get('polish', 0.0):.2f} s); the entries below the first one it "
        "raised have no bound"
    )
    return sc, got


def _polished_incumbent(
    ctx: CycleContext,
    inc: Incumbent,
    previous: Plan | None,
    budget: Budget,
    notes: list[str],
) -> tuple[Score, Polished] | None:
    """The incumbent (the pool's best plan by score, verified or not) polished, when the
    cycle returns it: CP-SAT did not run or found nothing better. Only where the polish
    applies (:func:`~gangplan.solver.cycle.polish.polish_applies`; the plan evicts nothing)
    and its predicted cost (``polish_cost`` times the first baseline's) fits what is left
    after the reasons' time and ``incumbent_check_margin`` checks; None otherwise, or when
    nothing was gathered or the polished plan failed the verifier. Its score is above the
    incumbent's (the polish keeps every entry above locality and raises one); it is checked
    all the same, and dropped if not."""
    p = inc.policy
    if inc.evictions or not inc.pods or not polish_applies(ctx):
        return None
    reserve = inc.keep + p.incumbent_check_margin * inc.check_cost
    if p.polish_cost * inc.first_cost > budget.left() - reserve:
        return None
    got = _polished(ctx, inc.pods, previous, budget, reserve, notes, incumbent=True)
    if got is not None and got[0] < inc.score:  # pragma: no cover (the polish's invariant)
        notes.append("the polished incumbent scores below the incumbent; it is not used")
        return None
    return got
