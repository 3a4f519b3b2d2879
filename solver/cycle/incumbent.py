"""The incumbent: the best plan by score that the baselines and FGD's restarts make inside the
cycle's budget, the plan CP-SAT is hinted with and must beat.

:func:`build_incumbent` runs, in this order (the shares and costs are the fields of
:class:`~gangplan.solver.cycle.policy.CyclePolicy`):

1. the lead baseline (:func:`~gangplan.solver.placers.baselines.first_baseline`), which always
   runs, so there is always a plan; its measured cost predicts every later part: a check
   (``check_per_score`` times its score), the reasons (``reasons_cost``), the model's build
   (``model_cost``, ``share_model_cost`` where fgd leads) and the other baselines;
2. where ``fgd`` leads (pods ask GPU shares), FGD's first restarts
   (:mod:`gangplan.solver.placers.restarts`), within ``early_restart_share`` of the budget;
3. the other baselines, cheapest first
   (:data:`~gangplan.solver.placers.baselines.EXPECTED_COST`); one whose predicted cost does
   not fit what is left (the reasons' time and ``check_reserve`` checks kept) is skipped, and
   so is one that would leave CP-SAT less than its predicted build plus ``search_share`` of
   the budget, where CP-SAT could run after the first and whole GPUs are asked; the notes
   say so;
4. where the restarts began, the rest of them within ``restart_share`` in all, then the best
   one's descent; the best restart joins the pool as ``fgd restarts``.

With preemption on, each baseline is followed by its greedy preemption
(:mod:`gangplan.solver.placers.greedy_preemption`), inside the baseline's part and stopped at
``preemption_share`` of the budget.

Every plan is scored here (:func:`~gangplan.solver.cycle.checks.score_plan`), none is
verified: :mod:`gangplan.solver.cycle.choose` verifies the one the cycle may return, the next
best if it fails: the same incumbent as verifying every plan, at one verification instead of
one per baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gangplan.models import Eviction, Plan, PodPlacement
from gangplan.solver.budget import WORK_UNITS_PER_SECOND, Budget
from gangplan.solver.context import CycleContext
from gangplan.solver.cycle.checks import empty_score, score_plan
from gangplan.solver.cycle.policy import CyclePolicy
from gangplan.solver.cycle.reservations import place_with_holds
from gangplan.solver.judges.score import Score
from gangplan.solver.placers.baselines import BASELINES, EXPECTED_COST, first_baseline
from gangplan.solver.placers.greedy_preemption import REPRIEVE, greedy_preemption
from gangplan.solver.placers.restarts import FgdRestarts
from gangplan.solver.result import SolverConfig

__all__ = ["Candidate", "Deadline", "Incumbent", "build_incumbent", "run_placer"]


@dataclass
class Candidate:
    """One baseline's plan (or the empty plan, or the best restart's) and its score."""

    score: Score
    rank: int
    """its place in the registry's order (ties go to the first); the empty plan's is last"""
    name: str
    pods: list[PodPlacement]
    evictions: list[Eviction] = field(default_factory=list)

    def beats(self, other: Candidate) -> bool:
        """Higher score, or an equal one and earlier in the registry's order (a baseline
        equal to the empty plan, ranked ``len(BASELINES)``, does not replace it)."""
        return other.score < self.score or (
            other.score == self.score and self.rank < other.rank < len(BASELINES)
        )


@dataclass
class Incumbent:
    """The pool of plans: ``held``, verified (the empty plan to begin with), and ``pending``,
    scored but not yet verified. The incumbent is the best of them all (:attr:`top`); it is
    verified only where the cycle may return it (:func:`~gangplan.solver.cycle.choose.
    settle`), so where CP-SAT's plan scores at least as high no baseline's plan is
    verified. The costs measured on the way predict the cycle's later parts (the budget's
    clock)."""

    held: Candidate
    policy: CyclePolicy
    pending: list[Candidate] = field(default_factory=list)
    scores: dict[str, Score] = field(default_factory=dict)
    """each baseline's plan's score, by name, in the order they ran"""
    check_cost: float = 0.0
    """what a check (score and verify) of one plan costs: ``check_per_score`` times the first
    baseline's plan's score"""
    first_cost: float = 0.0
    """what the first baseline cost"""
    keep: float = 0.0
    """what is kept for the pending reasons: ``reason_share`` of the budget, or
    ``reasons_cost`` times the first baseline's cost if more"""
    model_cost: float = 0.0
    """the model's predicted build relative to :attr:`first_cost` (``model_cost``, or
    ``share_model_cost`` where ``fgd`` leads)"""

    @property
    def build_cost(self) -> float:
        """The model's predicted build."""
        return self.model_cost * self.first_cost

    def room(self, budget: Budget) -> float:
        """What is left of ``budget`` after keeping :attr:`keep` for the reasons and
        ``check_reserve`` checks of :attr:`check_cost` each."""
        return budget.left() - self.keep - self.policy.check_reserve * self.check_cost

    @property
    def top(self) -> Candidate:
        best = self.held
        for cand in self.pending:
            if cand.beats(best):
                best = cand
        return best

    @property
    def score(self) -> Score:
        return self.top.score

    @property
    def name(self) -> str:
        return self.top.name

    @property
    def pods(self) -> list[PodPlacement]:
        return self.top.pods

    @property
    def evictions(self) -> list[Eviction]:
        return self.top.evictions


class Deadline:
    """Called, says whether ``allowed`` more of the budget's clock has passed since it was
    made: wall seconds, or in deterministic mode the work the cycle's meter counts;
    ``fired``: whether it has said so."""

    def __init__(self, ctx: CycleContext, budget: Budget, allowed: float):
        self.ctx, self.budget = ctx, budget
        self.units = ctx.meter.units + allowed * WORK_UNITS_PER_SECOND
        self.at = budget.clock() + allowed
        self.fired = False

    def __call__(self) -> bool:
        if self.budget.deterministic:
            passed = self.ctx.meter.units >= self.units
        else:
            passed = self.budget.clock() >= self.at
        self.fired |= passed
        return passed


def run_placer(
    ctx: CycleContext, name: str, out_of_time: Callable[[], bool] | None = None
) -> tuple[list[PodPlacement], list[Eviction]]:
    """Baseline ``name``'s pods (under the snapshot's reservations), then, with preemption
    on, its greedy preemption's pods and evictions (stopped where ``out_of_time`` says so)."""
    pods = place_with_holds(ctx, BASELINES[name])
    return greedy_preemption(ctx, pods, reprieve=REPRIEVE.get(name, True), out_of_time=out_of_time)


def build_incumbent(
    ctx: CycleContext,
    previous: Plan | None,
    cfg: SolverConfig,
    budget: Budget,
    notes: list[str],
    policy: CyclePolicy,
) -> Incumbent:
    """The incumbent pool, its steps in the order of the module docstring."""
    rank = {name: i for i, name in enumerate(BASELINES)}
    inc = Incumbent(Candidate(empty_score(ctx, previous), len(rank), "empty plan", []), policy)
    lead = first_baseline(ctx.snapshot)
    order = sorted(BASELINES, key=lambda n: (n != lead, EXPECTED_COST.get(n, 1.0), rank[n]))
    inc.model_cost = policy.share_model_cost if lead == "fgd" else policy.model_cost
    inc.keep = cfg.reason_share * budget.limit
    _run_baseline(ctx, lead, rank[lead], inc, previous, budget, notes)
    model_need = _measure_first(inc, lead, budget)
    restarts = _early_restarts(ctx, inc, cfg, budget) if lead == "fgd" else None
    for name in order[1:]:
        if not _skipped(name, lead, inc, model_need, budget, notes):
            _run_baseline(ctx, name, rank[name], inc, previous, budget, notes)
    if restarts is not None:
        _late_restarts(ctx, restarts, inc, previous, budget, notes)
    return inc


def _run_baseline(
    ctx: CycleContext,
    name: str,
    rank: int,
    inc: Incumbent,
    previous: Plan | None,
    budget: Budget,
    notes: list[str],
) -> None:
    """Baseline ``name`` (part ``baseline.NAME``), its plan scored and added to the pool."""
    part = f"baseline.{name}"
    share = inc.policy.preemption_share
    before = ctx.meter.units
    # the greedy preemption after a baseline (preemption on) may take many times the
    # baseline's own time: it stops at preemption_share of the budget
    preempt_done = Deadline(ctx, budget, share * budget.limit)
    with budget.part(part):
        pods, evictions = run_placer(ctx, name, preempt_done)
    budget.charge(part, units=ctx.meter.units - before)
    if preempt_done.fired:
        notes.append(
            f"baseline {name}: its greedy preemption stopped for time (at "
            f"{share:.0%} of the budget); the gangs it had not tried stay pending"
        )
    spent_check = budget.spent("check")
    sc = score_plan(ctx, pods, previous, budget, evictions)
    if not inc.scores:  # the first baseline: its score's cost predicts a check's
        inc.check_cost = inc.policy.check_per_score * (budget.spent("check") - spent_check)
    inc.scores[name] = sc
    inc.pending.append(Candidate(sc, rank, name, pods, evictions))


def _measure_first(inc: Incumbent, lead: str, budget: Budget) -> float | None:
    """Read the first baseline's cost into ``inc`` (and the reasons' time it predicts); the
    time kept for CP-SAT (its predicted build and ``search_share`` of the budget) from the
    later baselines, or None where that is not protected."""
    p = inc.policy
    inc.first_cost = budget.spent(f"baseline.{lead}")
    inc.keep = max(inc.keep, p.reasons_cost * inc.first_cost)
    need = inc.build_cost + p.search_share * budget.limit
    # protect CP-SAT's time only when it can run at all (otherwise the baselines make the
    # best incumbent they can), and not where pods ask GPU shares (fgd first): there the
    # build varies 15-130 times fgd's cost (share_model_cost), the estimate says little, and
    # the other baselines are cheap next to it
    return need if inc.room(budget) >= need and lead != "fgd" else None


def _skipped(
    name: str,
    lead: str,
    inc: Incumbent,
    model_need: float | None,
    budget: Budget,
    notes: list[str],
) -> bool:
    """Whether the later baseline ``name`` is skipped (module docstring, step 3): its
    predicted cost, the first's times the ratio of their expected costs (``after_fgd_cost``
    at least where fgd leads), does not fit what is left, or would take CP-SAT's kept time;
    the notes say which."""
    p = inc.policy
    ratio = EXPECTED_COST.get(name, 1.0) / EXPECTED_COST.get(lead, 1.0)
    if lead == "fgd":
        ratio = max(ratio, p.after_fgd_cost)
    predicted = inc.first_cost * ratio
    room = inc.room(budget)
    if room < inc.build_cost + p.min_search_s:
        # CP-SAT cannot run: of the reserved checks only the winner's is left to do
        room += (p.check_reserve - 1) * inc.check_cost
    if predicted > room:
        left = (
            f"the {room:.3g} s left of the budget"
            if room > 0
            else f"the budget ({budget.elapsed():.3g} s of {budget.limit:g} s spent)"
        )
        notes.append(
            f"baseline {name} skipped: its predicted cost ({predicted:.3g} s) does not fit {left}"
        )
        return True
    if model_need is not None and predicted > room - model_need:
        notes.append(
            f"baseline {name} skipped: its predicted cost ({predicted:.3g} s) would leave "
            f"less than the {model_need:.3g} s kept for CP-SAT (its predicted build and "
            f"{p.search_share:.0%} of the budget to search)"
        )
        return True
    return False


# --------------------------------------------------------------------------- FGD's restarts


def _restarts_apply(ctx: CycleContext, inc: Incumbent) -> bool:
    """Whether FGD's restarts run: the ``fgd`` baseline ran (its cost predicts theirs) and
    placed a pod (if it placed none, no gang fits alone, and no order places one), and no
    reservation, preemption or move is on (their rules live in the baselines' wrappers,
    which the restarts do not run)."""
    s = ctx.snapshot
    fgd = [c for c in (inc.held, *inc.pending) if c.name == "fgd"]
    return (
        bool(fgd)
        and bool(fgd[0].pods)
        and not s.reservations
        and not s.preemption_rules.enabled
        and ctx.moves is None
        and bool(s.gangs)
    )


def _early_restarts(
    ctx: CycleContext, inc: Incumbent, cfg: SolverConfig, budget: Budget
) -> FgdRestarts | None:
    """FGD's restarts' first part (module docstring, step 2), right after fgd, whose plan
    they improve; None where they do not apply (:func:`_restarts_apply`). A later baseline
    then runs only if ``after_fgd_cost`` times fgd's cost fits what is left."""
    if not _restarts_apply(ctx, inc):
        return None
    search = FgdRestarts(ctx, seed=cfg.seed)
    _run_restarts(search, ctx, inc, budget, inc.policy.early_restart_share * budget.limit)
    return search


def _restarts_keep(inc: Incumbent) -> float:
    """What the restarts leave untouched: ``restarts_reasons_margin`` times the reasons'
    time, the best restart's score and one check (the returned plan's verification). The
    restarts fill what they are given, so any estimate too low below them would overrun
    the budget."""
    p = inc.policy
    return p.restarts_reasons_margin * inc.keep + inc.check_cost * (1 + 1 / p.check_per_score)


def _run_restarts(
    search: FgdRestarts,
    ctx: CycleContext,
    inc: Incumbent,
    budget: Budget,
    cap: float,
) -> None:
    """Restarts (part ``restarts``) until ``max_restarts`` have run, or the next one's
    predicted cost (the first's: ``first_restart_cost`` times the ``fgd`` baseline's; the
    second's: ``later_restart_cost`` times the first's where the first took under
    ``small_restart_share`` of the budget, else the first's; then the last one's) does not
    fit what is left after :func:`_restarts_keep`, or would take the restarts past ``cap``."""
    p = inc.policy
    predicted = (
        search.last_cost if search.tried else p.first_restart_cost * budget.spent("baseline.fgd")
    )
    before = ctx.meter.units
    while search.tried < p.max_restarts:
        room = budget.left() - _restarts_keep(inc)
        if predicted > room or budget.spent("restarts") + predicted > cap:
            break
        spent = budget.spent("restarts")
        with budget.part("restarts"):
            search.step()
        budget.charge("restarts", units=ctx.meter.units - before)
        before = ctx.meter.units
        predicted = search.last_cost = budget.spent("restarts") - spent
        if search.tried == 1 and predicted < p.small_restart_share * budget.limit:
            predicted *= p.later_restart_cost  # the first built the node rankings
            search.last_cost = predicted


def _late_restarts(
    ctx: CycleContext,
    search: FgdRestarts,
    inc: Incumbent,
    previous: Plan | None,
    budget: Budget,
    notes: list[str],
) -> None:
    """FGD's restarts' second part, after every baseline (module docstring, step 4): more
    restarts (:func:`_run_restarts`) within ``restart_share`` in all; then the best one's
    descent (:meth:`FgdRestarts.descend`), which stops itself where that share or what is
    left after :func:`_restarts_keep` ends. The best restart is scored and joins the pool as
    ``fgd restarts``; it becomes the incumbent only if it scores strictly higher than every
    baseline's plan."""
    cap = inc.policy.restart_share * budget.limit
    _run_restarts(search, ctx, inc, budget, cap)
    before = ctx.meter.units
    allowed = min(budget.left() - _restarts_keep(inc), cap - budget.spent("restarts"))
    if search.best is not None and allowed > 0:
        # the descent's work grows with pods x nodes used (openb: 8,152 pods on 1,523
        # nodes), so it stops itself at what is allowed, on the budget's clock
        with budget.part("restarts"):
            search.descend(out_of_time=Deadline(ctx, budget, allowed))
        budget.charge("restarts", units=ctx.meter.units - before)
    best = search.best
    if best is None:
        why = (
            "the policy allows none: max_restarts 0"
            if inc.policy.max_restarts <= 0
            else "the first's predicted cost, the fgd baseline's "
            f"{budget.spent('baseline.fgd'):.3g} s, did not fit what was left"
        )
        notes.append(f"FGD restarts: none run ({why})")
        return
    sc = score_plan(ctx, best.pods, previous, budget, [])
    cand = Candidate(sc, len(BASELINES) + 1, "fgd restarts", best.pods)
    top = inc.top
    inc.pending.append(cand)
    unit = "deterministic s" if budget.deterministic else "s"
    runs = (
        f"FGD restarts: {search.tried} run ({budget.spent('restarts'):.2f} {unit}); "
        f"{best.descent_text()}"
    )
    theirs = "the empty plan" if top.name == "empty plan" else f"{top.name}'s plan"
    if cand.beats(top):
        notes.append(
            f"{runs}; the best (restart {best.number}) scores above the baselines' best, "
            f"{theirs}, at {sc.first_difference(top.score)}"
        )
    else:
        notes.append(f"{runs}; none scores above the baselines' best, {theirs}")
