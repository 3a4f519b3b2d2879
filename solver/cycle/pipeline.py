"""One scheduling cycle: baselines, incumbent, CP-SAT, plan, reasons — inside one budget.

``solve_cycle(snapshot, previous, config)`` is the single entry point used by ``gangplan
solve``, ``replan`` and ``serve``. ``config.time_limit_s`` bounds all of it
(:mod:`gangplan.solver.budget` names the parts and says how each is counted):

1. index the snapshot (:class:`~gangplan.solver.context.CycleContext`);
2. run the baselines of :data:`~gangplan.solver.placers.baselines.BASELINES`, the one likely best
   first (:func:`~gangplan.solver.placers.baselines.first_baseline`), then cheapest first
   (:data:`~gangplan.solver.placers.baselines.EXPECTED_COST`); the first always runs, so there is
   always a plan; a later one whose predicted cost (the first's measured cost times
   the ratio of expected costs) does not fit what is left (the checks kept) is skipped, and
   the notes say so;
   so is one that would leave CP-SAT less than its predicted build plus
   :data:`SEARCH_SHARE` of the budget, when CP-SAT could run after the first (not where
   pods ask GPU shares: :data:`MODEL_COST` is calibrated on whole GPUs, and the build there
   is predicted at :data:`SHARE_MODEL_COST`);
   where ``fgd`` leads (pods ask GPU shares), FGD's restarts run right after it
   (:mod:`gangplan.solver.placers.restarts`; :func:`_restart`) and their best plan joins the pool;
   keep the best plan by :func:`~gangplan.solver.judges.score.score` as the incumbent (scored
   only: it is verified when the cycle may return it, the next best if it fails);
3. with what is left after keeping a share for the checks and the reasons, build the CP-SAT
   model, hint it with the incumbent, and optimise the score's entries tier by tier; Ctrl-C
   stops the search (the best plan found so far is kept); no time left: no model;
4. turn the counts into pods and device ids; where gangs of several pods are pending,
   gather spread gangs (:mod:`gangplan.solver.cycle.polish`, in a share of the time kept from the
   search: :data:`POLISH_COST`); verify the plan independently; if that fails, or CP-SAT's
   plan scores below the incumbent, return the incumbent and say so;
5. give every pending gang a reason (:mod:`gangplan.solver.cycle.reasons`) within its share.

With preemption on (``Snapshot.preemption.enabled``) each baseline is followed by the greedy
preemption of :mod:`gangplan.solver.placers.greedy_preemption` (inside the baseline's part), and
the plans
carry evictions.

With reservations on (``Snapshot.reservation.enabled``) the cycle first gives starving gangs
their reservations (:mod:`gangplan.solver.cycle.reservations`); every placer respects the held
capacity, the plan carries the reservations, and a reserved gang's pending reason says where
and from when.

The result reports the time each part took (``CycleResult.parts``, the plan summary's
``parts``). It never raises for "nothing fits": an empty plan with reasons is a valid answer.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gangplan.models import (
    Eviction,
    Gang,
    Plan,
    PlanSummary,
    PodPlacement,
    Snapshot,
    TierReport,
    open_status,
)
from gangplan.solver.budget import (
    WORK_UNITS_PER_SECOND,
    Budget,
    SearchStop,
    gc_paused,
    interruptible,
)
from gangplan.solver.context import CycleContext
from gangplan.solver.cycle.polish import Polished, polish_locality
from gangplan.solver.cycle.reasons import ExactCheck, explain_pending
from gangplan.solver.cycle.reservations import place_with_holds, reserved_context
from gangplan.solver.judges.score import Score, score
from gangplan.solver.judges.verify import verify
from gangplan.solver.placers.baselines import BASELINES, EXPECTED_COST, first_baseline
from gangplan.solver.placers.greedy_preemption import REPRIEVE, greedy_preemption
from gangplan.solver.placers.restarts import FgdRestarts
from gangplan.solver.result import CycleResult, CycleStatus, SolverConfig, assemble_plan

__all__ = ["PLACERS", "run_baseline", "run_baseline_in", "solve_cycle", "solve_cycle_in"]

PLACERS = ("cpsat", *BASELINES)

MIN_SEARCH_S = 0.05
"""Below this many seconds (deterministic seconds in deterministic mode) left for the model,
CP-SAT is not started: the incumbent is returned."""
REASONS_COST = 0.8
"""The pending reasons' cost relative to the first baseline's (wall time measured on
generated fat-trees of 512 to 5,120 nodes: 0.54-0.88): what is kept for them is the larger
of this and ``SolverConfig.reason_share`` of the budget."""
CHECK_PER_SCORE = 2.5
"""A check (score and verify) of a plan relative to scoring it alone: measured on the first
baseline's plan at 512 to 5,120 nodes and on openb, 1.8 to 2.8 (the verifier costs about
as much as the score, up to twice as much)."""
CHECK_RESERVE = 2
"""Checks kept in reserve after the baselines, each of :attr:`_Incumbent.check_cost`:
CP-SAT's plan, turned into pods, then verified and scored (or the incumbent verified). When
CP-SAT cannot run (what is left does not fit its predicted build), a later baseline needs
only one of them: the winner's verification."""
SEARCH_SHARE = 0.3
"""With CP-SAT able to run after the first baseline, a later baseline runs only if it leaves
the model's predicted build (:data:`MODEL_COST`) plus this share of the budget for the search
(on a 5,120-node cycle at 10 s two more baselines took the time the search needed)."""
POLISH_COST = 0.5
"""The locality polish's time (:mod:`gangplan.solver.cycle.polish`) relative to the first
baseline's cost, kept from CP-SAT's search where gangs of several pods are pending (measured
at 2,048 nodes: 0.1-0.2 s against topology-fit's 0.2-0.3 s)."""
INCUMBENT_CHECK_MARGIN = 1.5
"""The checks a polished incumbent keeps time for, in estimated checks
(:attr:`_Incumbent.check_cost`): its own check, and the error of that estimate with the
plan's assembly after the reasons (on a 5,120-node cycle at 5 s: check 0.89 s against 0.69 s
estimated, assembly 0.08 s)."""
POLISHED = "feasible; polished"
"""The status of an entry below the first locality entry the polish raised: optimised by
CP-SAT, then changed by the polish, its bound no longer proven."""
MODEL_COST = 2.5
"""The model's build (index, variables, constraints, objective, completed hint) relative to
the first baseline's cost on the same cycle (CPU time measured on generated fat-trees of 512
to 5,120 nodes: 1.7 to 2.1): CP-SAT is started only when this much and :data:`MIN_SEARCH_S`
fit what is left."""
SHARE_MODEL_COST = 10.0
""":data:`MODEL_COST` where pods ask GPU shares (``fgd`` leads): the model's build there
grows with the nodes holding shares and with the expected-fragmentation term, not with the
first baseline's cost. Measured on Alibaba replay cycles of 100 pods on 1,523 nodes: the
constraint families alone took 1.1-18 times fgd's cost, and the whole build 15-130 times
(the term left out where it is on course past the build's share); at 1 s a cycle, with
:data:`MODEL_COST`, about a quarter of the cycles started a build that had no time to
finish, some running 0.7-1.1 s before their first check. Ten keeps the model out of such
cycles and in the ones with tens of seconds (openb as one cycle at 30 s)."""


PREEMPTION_SHARE = 0.25
"""With preemption on, the greedy preemption after each baseline stops once it has taken
this share of the budget (on a reviewer's 1,000-node mixed instance it took 12 s after
fgd's 1 s, at any limit)."""


RESTARTS = 8
"""At most this many FGD restarts a cycle (:mod:`gangplan.solver.placers.restarts`; on the Alibaba
replay's 100-pod cycles, 8 gained about as much as 16)."""
AFTER_FGD_COST = 2.5
"""Where fgd leads (pods ask GPU shares), the other baselines are predicted at this many
times fgd's cost at least (:data:`~gangplan.solver.placers.baselines.EXPECTED_COST` is measured on
fat-trees of whole GPUs): measured 0.7-2.9 times in the Alibaba replay's cycles, on openb
and on the second reviewer's mixed instances, where a prediction of 0.8 let topology-fit
run 2-19 times its prediction past a deterministic budget."""
RESTARTS_REASONS_MARGIN = 1.25
"""The restarts keep this many times the reasons' estimated time (on the second reviewer's
mixed instances the reasons took up to 1.4 times it, where share pods are pending; there the
baselines skipped for the restarts leave more)."""
EARLY_RESTART_SHARE = 0.25
"""The restarts run right after fgd until they have spent this share of the budget, and go
on after the other baselines (a replay cycle at 1 s: fgd 0.1 s, its first restart about as
much, the others a fifth of it; with every restart after the other baselines, half the
cycles had no time for one and the replay ended 0.3-0.8 point lower; with all of them before,
topology-fit lost its time on a tight budget and a cycle returned a worse plan)."""
FIRST_RESTART_COST = 0.7
"""The first restart relative to the ``fgd`` baseline (measured in replay cycles on 1,523
nodes: 0.52-0.60; it reuses the cycle's node classes, not fgd's rankings)."""
LATER_RESTART_COST = 0.25
"""A restart after the first, relative to the first, where the first took under
:data:`SMALL_RESTART` of the budget: the first builds the node rankings the others reuse
(measured in replay cycles of 100 pods on 1,523 nodes: 0.09 s, then 0.013-0.015 s each, a
sixth; a quarter is predicted). Where the first took more, the cycle's pods dominate and
every restart costs about as much: the second is predicted at the first's cost (on openb as
one cycle, 8,152 pods, each restart took 0.9-1.7 times fgd's cost, and with a quarter
predicted the restarts ran 1.3-1.9 times past their share, a reviewer's finding; predicting
every cycle's second at the first's cost kept the replay's restarts from a third of their
cycles, 0.2-0.4 point lower at 130%)."""
SMALL_RESTART = 0.1
"""A first restart under this share of the budget is followed by cheaper ones
(:data:`LATER_RESTART_COST`)."""
RESTART_SHARE = 0.3
"""The restarts (and their descent) stop once they have spent this share of the budget, so
that the rest stays for CP-SAT's model where it fits (with a half, a 10 s cycle on a share
instance where every gang fits spent 5 s on restarts that did not win, and CP-SAT did not
run; the replay's 1 s cycles spend about a fifth on them)."""


def _room(budget: Budget, keep: float, check_cost: float) -> float:
    """What is left of ``budget`` after keeping ``keep`` for the reasons and
    :data:`CHECK_RESERVE` checks of ``check_cost`` each (the budget's clock)."""
    return budget.left() - keep - CHECK_RESERVE * check_cost


def _polish_applies(ctx: CycleContext) -> bool:
    """Whether the locality polish (:mod:`gangplan.solver.cycle.polish`) can gather anything: a
    pending gang has more than one pod, the topology has a leaf level, and no gang holds a
    reservation."""
    if ctx.snapshot.reservations or ctx.topo.leaf_level is None:
        return False
    return any(g.size > 1 for g in ctx.snapshot.gangs)


def _polish_keep(ctx: CycleContext, inc: _Incumbent, spare: float) -> float:
    """The time kept from CP-SAT's search for the locality polish: :data:`POLISH_COST`
    times the first baseline's cost, where it applies (:func:`_polish_applies`) and
    ``spare`` (what the search could give up) holds it; else 0."""
    need = POLISH_COST * inc.first_cost
    return need if _polish_applies(ctx) and need <= spare else 0.0


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
    sc, violation = _check(ctx, got.pods, previous, budget, [])
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
    inc: _Incumbent,
    previous: Plan | None,
    budget: Budget,
    notes: list[str],
) -> tuple[Score, Polished] | None:
    """The incumbent (the best baseline's plan by score, verified or not) polished, when the
    cycle returns it: CP-SAT did not run or found nothing better. Only where the polish
    applies (:func:`_polish_applies`; the plan evicts nothing) and its predicted cost
    (:data:`POLISH_COST` times the first baseline's) fits what is left after the reasons'
    time and :data:`INCUMBENT_CHECK_MARGIN` checks; None otherwise, or when nothing was
    gathered or the polished plan failed the verifier. Its score is above the incumbent's
    (the polish keeps every entry above locality and raises one); it is checked all the
    same, and dropped if not."""
    if inc.evictions or not inc.pods or not _polish_applies(ctx):
        return None
    reserve = inc.keep + INCUMBENT_CHECK_MARGIN * inc.check_cost
    if POLISH_COST * inc.first_cost > budget.left() - reserve:
        return None
    got = _polished(ctx, inc.pods, previous, budget, reserve, notes, incumbent=True)
    if got is not None and got[0] < inc.score:  # pragma: no cover (the polish's invariant)
        notes.append("the polished incumbent scores below the incumbent; it is not used")
        return None
    return got


def _polished_tiers(
    tiers: tuple[TierReport, ...], sc: Score, polished: Polished
) -> tuple[TierReport, ...]:
    """``tiers`` with the bounds dropped below the first locality entry the polish raised:
    CP-SAT proved those bounds with the entries above fixed at its own values. That entry
    keeps its bound unless its new value (``sc``'s) passes it: the bound was then the
    model's own (pruned candidates, aggregated counts), not one of every plan. An open
    entry without a bound (e.g. ``not optimised (time)``) that the polish changed says so
    (``not optimised (time); polished``); one no placer optimises (``derived``,
    ``constant``) keeps its status."""
    first = polished.first_raised
    if first is None:
        return tiers
    names = [n for n, _ in sc.entries]
    values = dict(sc.entries)
    raised = [n for n in names if n.startswith("locality.")][first]
    below = set(names[names.index(raised) + 1 :])

    def marked(t: TierReport) -> TierReport:
        if t.name not in below and t.name != raised:
            return t
        if t.bound is not None:
            if t.name in below or values[t.name] > t.bound:
                return t.model_copy(update={"bound": None, "gap": None, "status": POLISHED})
            return t
        if open_status(t.status) and values.get(t.name, t.value) != t.value:
            return t.model_copy(update={"status": f"{t.status}; polished"})
        return t

    return tuple(marked(t) for t in tiers)


def _below(inc: _Incumbent, sc: Score, ctx: CycleContext, budget: Budget, notes: list[str]) -> bool:
    """Whether a plan of score ``sc`` (CP-SAT's, verified) scores below the incumbent; the
    incumbent is verified first where it would win (:meth:`_Incumbent.settle`: a failing
    one gives way to the next best, which CP-SAT's plan may beat)."""
    if not sc < inc.score:
        return False
    inc.settle(ctx, budget, notes)
    return sc < inc.score


def _budget_of(cfg: SolverConfig) -> Budget:
    if cfg.deterministic:
        return Budget(cfg.deterministic_time or cfg.time_limit_s, deterministic=True)
    return Budget(cfg.time_limit_s)


def _check(
    ctx: CycleContext,
    pods: list[PodPlacement],
    previous: Plan | None,
    budget: Budget,
    evictions: list[Eviction],
    *,
    check: bool = True,
) -> tuple[Score, str | None]:
    """Score and (``check``) verify ``pods`` with ``evictions`` (part ``check``); the first
    violation, if any."""
    with budget.part("check"):
        plan = assemble_plan(ctx.snapshot, pods, {}, evictions=evictions)
        sc = score(ctx.snapshot, plan, previous, topology=ctx.topo, shares=ctx.shares)
        violations = verify(ctx.snapshot, plan, topology=ctx.topo) if check else []
    units = len(pods) + len(ctx.node_names) + len(ctx.snapshot.gangs)
    budget.charge("check", units=units if check else units // 3)
    return sc, (str(violations[0]) if violations else None)


def _verified(
    ctx: CycleContext, pods: list[PodPlacement], evictions: list[Eviction], budget: Budget
) -> str | None:
    """Verify ``pods`` with ``evictions`` (part ``check``); the first violation, if any."""
    with budget.part("check"):
        plan = assemble_plan(ctx.snapshot, pods, {}, evictions=evictions)
        violations = verify(ctx.snapshot, plan, topology=ctx.topo)
    budget.charge(
        "check", units=2 * (len(pods) + len(ctx.node_names) + len(ctx.snapshot.gangs)) // 3
    )
    return str(violations[0]) if violations else None


def _finish(
    ctx: CycleContext,
    pods: list[PodPlacement],
    sc: Score,
    placer: str,
    status: CycleStatus,
    budget: Budget,
    *,
    tiers: tuple[TierReport, ...] = (),
    model_size: dict[str, int] | None = None,
    notes: list[str] | None = None,
    reason_budget: float = 0.0,
    exact_check: ExactCheck | None = None,
    exact_spent: list[float] | None = None,
    evictions: list[Eviction] | None = None,
) -> Plan:
    """The plan of ``pods`` and ``evictions`` (scored ``sc``) with a reason for every
    pending gang and its summary; the end of every cycle, baseline or CP-SAT, so the
    cycle's states are released here (:meth:`CycleContext.release`). ``exact_spent``: in
    deterministic mode, where ``exact_check`` adds the deterministic seconds it takes (the
    reasons' clock, so they repeat from run to run)."""
    placed = {p.gang_key for p in pods}
    pending = [g for g in ctx.snapshot.gangs if g.key not in placed]
    before = ctx.meter.units
    spent = exact_spent
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
    ctx.release()  # the reasons were the cycle's last use of its states
    plan = _with_reservations(
        ctx.snapshot, assemble_plan(ctx.snapshot, pods, reasons, evictions=evictions or [])
    )
    if tiers:
        # report the returned plan's own values (the model's may be looser, e.g. a spread
        # counted from an untightened 'uses' variable); keep the bound, recompute the gap
        # and whether the value reaches it when the plan is CP-SAT's own (it meets every
        # earlier tier's fix, so the bound holds for it; an incumbent's need not)
        by_name = {t.name: t for t in tiers}
        if status in (CycleStatus.OPTIMAL, CycleStatus.FEASIBLE):  # CP-SAT's own plan
            tiers = tuple(
                by_name[n].revalued(v) if n in by_name else TierReport(name=n, value=v)
                for n, v in sc.entries
            )
        else:
            tiers = _incumbent_tiers(tiers, sc)
    else:
        tiers = tuple(TierReport(name=n, value=v) for n, v in sc.entries)
    summary = PlanSummary(
        placer=placer,
        status=status.value,
        tiers=tiers,
        wall_time_s=round(budget.wall(), 4),
        parts={k: round(v, 4) for k, v in budget.parts.items()},
        model_size=model_size or {},
        notes=tuple(_current(notes or [], tiers)),
    )
    return plan.model_copy(update={"summary": summary})


INCUMBENT_RETURNED = "; incumbent returned"
"""Appended to the status of every entry CP-SAT optimised when a baseline's plan is
returned instead of CP-SAT's."""


def _incumbent_tiers(tiers: tuple[TierReport, ...], sc: Score) -> tuple[TierReport, ...]:
    """The model's entries (``tiers``, CP-SAT's values and bounds) reported for a returned
    incumbent of score ``sc``. CP-SAT proved each entry's bound with the entries above it
    fixed at its own values, so a bound holds for the incumbent only down to the first
    entry where the incumbent's value differs from CP-SAT's: there and above, the gap is
    recomputed against the incumbent's value (``optimal`` only where it reaches the
    bound); below, and wherever the value passes the bound (the model's own, e.g. with
    pruned candidates), the bound is dropped. Every status says the incumbent was
    returned."""
    by_name = {t.name: t for t in tiers}
    out: list[TierReport] = []
    differed = False
    for n, v in sc.entries:
        t = by_name.get(n)
        if t is None:
            out.append(TierReport(name=n, value=v))
            continue
        if differed or (t.bound is not None and v > t.bound):
            status = "no bound" if t.bound is not None else t.status
            got = t.model_copy(update={"value": v, "bound": None, "gap": None, "status": status})
        else:
            got = t.revalued(v)
        out.append(got.model_copy(update={"status": got.status + INCUMBENT_RETURNED}))
        differed = differed or v != t.value
    return tuple(out)


def _current(notes: list[str], tiers: tuple[TierReport, ...]) -> list[str]:
    """``notes`` without a search note about a tier that the returned plan's own value
    shows optimal (the model's value can be looser than the plan's, e.g. a spread counted
    from an untightened ``uses`` variable: "no better solution" is then stale)."""
    optimal = {t.name for t in tiers if t.status == "optimal"}
    return [
        n
        for n in notes
        if not (
            n.startswith("tier ")
            and n.endswith(": no better solution within its time share")
            and n.removeprefix("tier ").split(":", 1)[0] in optimal
        )
    ]


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
    with budget.part("reservations"):
        ctx = reserved_context(ctx)
    with budget.part(f"baseline.{name}"):
        pods, evictions = _baseline(ctx, name)
    with budget.part("check"):
        sc = score(
            ctx.snapshot,
            assemble_plan(ctx.snapshot, pods, {}, evictions=evictions),
            previous,
            topology=ctx.topo,
            shares=ctx.shares,
        )
    notes = _held_preemption_note(ctx.snapshot)
    plan = _finish(
        ctx, pods, sc, name, CycleStatus.BASELINE, budget, notes=notes, evictions=evictions
    )
    return CycleResult(
        status=CycleStatus.BASELINE,
        plan=plan,
        score=sc,
        wall_time_s=budget.wall(),
        notes=notes,
        parts=dict(budget.parts),
    )


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


def _baseline(
    ctx: CycleContext, name: str, out_of_time: Callable[[], bool] | None = None
) -> tuple[list[PodPlacement], list[Eviction]]:
    """One baseline's pods, then (preemption on) its greedy preemption's pods and evictions
    (stopped where ``out_of_time`` says so)."""
    pods = place_with_holds(ctx, BASELINES[name])
    return greedy_preemption(ctx, pods, reprieve=REPRIEVE.get(name, True), out_of_time=out_of_time)


class _Deadline:
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


def solve_cycle(
    snapshot: Snapshot,
    previous: Plan | None = None,
    config: SolverConfig | None = None,
) -> CycleResult:
    """Solve one cycle with CP-SAT, never worse by score than the best baseline, within
    ``config.time_limit_s`` for all of it (snapshot indexing included).

    Args:
        snapshot: the cycle's snapshot.
        previous: the previous cycle's plan (stability entry of the score), or None.
        config: options; :class:`SolverConfig` defaults when None.

    Returns:
        A :class:`CycleResult` whose plan passes :func:`~gangplan.solver.judges.verify.verify`.
    """
    import gangplan.solver.model.builder  # noqa: F401  (OR-Tools loads before the clock starts)

    cfg = config or SolverConfig()
    budget = _budget_of(cfg)
    with gc_paused():
        with budget.part("context"):
            ctx = CycleContext.of(snapshot)
            ctx.state()  # the template every placer copies
        budget.charge("context", units=len(snapshot.nodes) + len(snapshot.gangs))
        return _solve(ctx, previous, cfg, budget)


def solve_cycle_in(
    ctx: CycleContext,
    previous: Plan | None = None,
    config: SolverConfig | None = None,
) -> CycleResult:
    """:func:`solve_cycle` in a context the caller built (e.g. with FGD's workload set to a
    trace's distribution, as the replay does); the budget starts here."""
    import gangplan.solver.model.builder  # noqa: F401  (OR-Tools loads before the clock starts)

    cfg = config or SolverConfig()
    with gc_paused():
        return _solve(ctx, previous, cfg, _budget_of(cfg))


@dataclass
class _Candidate:
    """One baseline's plan (or the empty plan) and its score."""

    score: Score
    rank: int
    """its place in the registry's order (ties go to the first); the empty plan's is last"""
    name: str
    pods: list[PodPlacement]
    evictions: list[Eviction] = field(default_factory=list)

    def beats(self, other: _Candidate) -> bool:
        """Higher score, or an equal one and earlier in the registry's order (a baseline
        equal to the empty plan, ranked ``len(BASELINES)``, does not replace it)."""
        return other.score < self.score or (
            other.score == self.score and self.rank < other.rank < len(BASELINES)
        )


@dataclass
class _Incumbent:
    """The baselines' best plan by score: ``held``, verified (the empty plan to begin
    with), and ``pending``, the plans scored but not yet verified. The incumbent is the
    best of them all; it is verified only when the cycle may return it (:meth:`settle`):
    where CP-SAT's plan scores at least as high, no baseline's plan is verified."""

    held: _Candidate
    pending: list[_Candidate] = field(default_factory=list)
    scores: dict[str, Score] = field(default_factory=dict)
    check_cost: float = 0.0
    """what a check (score and verify) of one plan costs, estimated from the first
    baseline's score (:data:`CHECK_PER_SCORE`; the budget's clock)"""
    first_cost: float = 0.0
    """what the first baseline cost (the budget's clock)"""
    keep: float = 0.0
    """what is kept for the pending reasons: ``reason_share`` of the budget, or
    :data:`REASONS_COST` times the first baseline's cost if more (the budget's clock)"""
    model_cost: float = MODEL_COST
    """the model's predicted build relative to :attr:`first_cost`: :data:`MODEL_COST`, or
    :data:`SHARE_MODEL_COST` where ``fgd`` leads"""

    @property
    def build_cost(self) -> float:
        """The model's predicted build (the budget's clock)."""
        return self.model_cost * self.first_cost

    @property
    def top(self) -> _Candidate:
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

    def settle(self, ctx: CycleContext, budget: Budget, notes: list[str]) -> None:
        """Verify the best pending plan (part ``check``) until one passes, which becomes
        ``held``; a failing one is dropped, and the notes say so. Whatever the budget: the
        cycle returns only a verified plan."""
        while self.pending:
            top = self.top
            if top is self.held:
                break  # the verified plan is at least as good as every plan left
            self.pending.remove(top)
            violation = _verified(ctx, top.pods, top.evictions, budget)
            if violation is not None:
                notes.append(
                    f"baseline {top.name} produced an invalid plan ({violation}); not used as "
                    "incumbent"
                )
                continue
            self.held = top
            break
        self.pending.clear()


def _incumbent(
    ctx: CycleContext, previous: Plan | None, cfg: SolverConfig, budget: Budget, notes: list[str]
) -> _Incumbent:
    """Run the baselines cheapest first within the budget (module docstring, step 2).

    Each baseline's plan is scored; none is verified here (:meth:`_Incumbent.settle`
    verifies the one the cycle may return, the next best if it fails): the same incumbent
    as verifying every plan, at one verification at most instead of one per baseline."""
    empty = assemble_plan(ctx.snapshot, [], {})
    rank = {name: i for i, name in enumerate(BASELINES)}
    best = _Incumbent(
        _Candidate(
            score(ctx.snapshot, empty, previous, topology=ctx.topo, shares=ctx.shares),
            len(rank),
            "empty plan",
            [],
        )
    )
    lead = first_baseline(ctx.snapshot)
    if lead == "fgd":
        best.model_cost = SHARE_MODEL_COST
    order = sorted(BASELINES, key=lambda n: (n != lead, EXPECTED_COST.get(n, 1.0), rank[n]))
    keep = best.keep = cfg.reason_share * budget.limit
    first_cost: float | None = None
    model_need: float | None = None
    restarts: FgdRestarts | None = None
    for name in order:
        part = f"baseline.{name}"
        if first_cost is not None:
            ratio = EXPECTED_COST.get(name, 1.0) / EXPECTED_COST.get(order[0], 1.0)
            if lead == "fgd":
                ratio = max(ratio, AFTER_FGD_COST)
            predicted = first_cost * ratio
            room = _room(budget, keep, best.check_cost)
            if room < best.build_cost + MIN_SEARCH_S:
                # CP-SAT cannot run: of the reserved checks only the winner's is left to do
                room += (CHECK_RESERVE - 1) * best.check_cost
            if predicted > room:
                left = (
                    f"the {room:.3g} s left of the budget"
                    if room > 0
                    else f"the budget ({budget.elapsed():.3g} s of {budget.limit:g} s spent)"
                )
                notes.append(
                    f"baseline {name} skipped: its predicted cost ({predicted:.3g} s) does not "
                    f"fit {left}"
                )
                continue
            if model_need is not None and predicted > room - model_need:
                notes.append(
                    f"baseline {name} skipped: its predicted cost ({predicted:.3g} s) would "
                    f"leave less than the {model_need:.3g} s kept for CP-SAT (its predicted "
                    f"build and {SEARCH_SHARE:.0%} of the budget to search)"
                )
                continue
        before = ctx.meter.units
        # the greedy preemption after a baseline (preemption on) may take many times the
        # baseline's own time: it stops at PREEMPTION_SHARE of the budget
        preempt_done = _Deadline(ctx, budget, PREEMPTION_SHARE * budget.limit)
        with budget.part(part):
            pods, evictions = _baseline(ctx, name, preempt_done)
        budget.charge(part, units=ctx.meter.units - before)
        if preempt_done.fired:
            notes.append(
                f"baseline {name}: its greedy preemption stopped for time (at "
                f"{PREEMPTION_SHARE:.0%} of the budget); the gangs it had not tried stay pending"
            )
        spent_check = budget.spent("check")
        sc, _ = _check(ctx, pods, previous, budget, evictions, check=False)
        best.scores[name] = sc
        best.pending.append(_Candidate(sc, rank[name], name, pods, evictions))
        if first_cost is None:
            first_cost = best.first_cost = budget.spent(part)
            best.check_cost = CHECK_PER_SCORE * (budget.spent("check") - spent_check)
            keep = best.keep = max(keep, REASONS_COST * first_cost)
            need = best.build_cost + SEARCH_SHARE * budget.limit
            room = _room(budget, keep, best.check_cost)
            # protect CP-SAT's time only when it can run at all (otherwise the baselines
            # make the best incumbent they can), and not where pods ask GPU shares (fgd
            # first): there the build varies 15-130 times fgd's cost (SHARE_MODEL_COST), the
            # estimate says little, and the other baselines are cheap next to it
            model_need = need if room >= need and lead != "fgd" else None
            if lead == "fgd" and _restarts_apply(ctx, best):
                # a first share of the restarts right after fgd, whose plan they improve; a
                # later baseline then runs only if AFTER_FGD_COST times fgd's cost fits what
                # is left (as a later baseline gives way to CP-SAT's search share where whole
                # GPUs are asked)
                restarts = FgdRestarts(ctx, seed=cfg.seed)
                _run_restarts(restarts, ctx, best, budget, EARLY_RESTART_SHARE * budget.limit)
    if restarts is not None:
        _restart(ctx, restarts, best, previous, budget, notes)
    return best


def _restarts_apply(ctx: CycleContext, inc: _Incumbent) -> bool:
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


def _restarts_keep(inc: _Incumbent) -> float:
    """What the restarts leave untouched (the budget's clock): :data:`RESTARTS_REASONS_MARGIN`
    times the reasons' time, the best restart's score and one check (the returned plan's
    verification). The restarts fill what they are given, so any estimate too low below
    them would overrun the budget."""
    return RESTARTS_REASONS_MARGIN * inc.keep + inc.check_cost * (1 + 1 / CHECK_PER_SCORE)


def _run_restarts(
    search: FgdRestarts,
    ctx: CycleContext,
    inc: _Incumbent,
    budget: Budget,
    cap: float,
) -> None:
    """Restarts (part ``restarts``) until :data:`RESTARTS` have run, or the next one's
    predicted cost (the first's: :data:`FIRST_RESTART_COST` times the ``fgd`` baseline's;
    the second's: :data:`LATER_RESTART_COST` times the first's where the first took under
    :data:`SMALL_RESTART` of the budget, else the first's; then the last one's) does not fit
    what is left after :func:`_restarts_keep`, or would take the restarts past ``cap`` (the
    budget's clock)."""
    predicted = (
        search.last_cost if search.tried else FIRST_RESTART_COST * budget.spent("baseline.fgd")
    )
    before = ctx.meter.units
    while search.tried < RESTARTS:
        room = budget.left() - _restarts_keep(inc)
        if predicted > room or budget.spent("restarts") + predicted > cap:
            break
        spent = budget.spent("restarts")
        with budget.part("restarts"):
            search.step()
        budget.charge("restarts", units=ctx.meter.units - before)
        before = ctx.meter.units
        predicted = search.last_cost = budget.spent("restarts") - spent
        if search.tried == 1 and predicted < SMALL_RESTART * budget.limit:
            predicted *= LATER_RESTART_COST  # the first built the node rankings
            search.last_cost = predicted


def _restart(
    ctx: CycleContext,
    search: FgdRestarts,
    inc: _Incumbent,
    previous: Plan | None,
    budget: Budget,
    notes: list[str],
) -> None:
    """FGD's restarts' second part, after every baseline (:func:`_incumbent` runs the first
    right after fgd, within :data:`EARLY_RESTART_SHARE` of the budget): more restarts
    (:func:`_run_restarts`) within :data:`RESTART_SHARE` in all; then the best one's
    descent (:meth:`FgdRestarts.descend`), which stops itself where that share or what is
    left after :func:`_restarts_keep` ends. The best restart is scored and joins
    the pool as ``fgd restarts``; it becomes the incumbent only if it scores strictly
    higher than every baseline's plan."""
    cap = RESTART_SHARE * budget.limit
    _run_restarts(search, ctx, inc, budget, cap)
    before = ctx.meter.units
    allowed = min(budget.left() - _restarts_keep(inc), cap - budget.spent("restarts"))
    if search.best is not None and allowed > 0:
        # the descent's work grows with pods x nodes used (openb: 8,152 pods on 1,523
        # nodes), so it stops itself at what is allowed, on the budget's clock
        with budget.part("restarts"):
            search.descend(out_of_time=_Deadline(ctx, budget, allowed))
        budget.charge("restarts", units=ctx.meter.units - before)
    best = search.best
    if best is None:
        notes.append(
            "FGD restarts: none run (the first's predicted cost, the fgd baseline's "
            f"{budget.spent('baseline.fgd'):.3g} s, did not fit what was left)"
        )
        return
    sc, _ = _check(ctx, best.pods, previous, budget, [], check=False)
    cand = _Candidate(sc, len(BASELINES) + 1, "fgd restarts", best.pods)
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


def _solve(
    ctx: CycleContext, previous: Plan | None, cfg: SolverConfig, budget: Budget
) -> CycleResult:
    from gangplan.solver.model.builder import build_units, gang_fits, solve_model

    with budget.part("reservations"):
        ctx = reserved_context(ctx)
    notes: list[str] = _held_preemption_note(ctx.snapshot)
    inc = _incumbent(ctx, previous, cfg, budget, notes)
    keep = inc.keep
    room = _room(budget, keep, inc.check_cost)
    build = inc.build_cost
    found: list[PodPlacement] | None = None
    found_evictions: list[Eviction] = []
    chosen = inc.score
    status = CycleStatus.INCUMBENT
    tiers: tuple[TierReport, ...] = ()
    model_size: dict[str, int] = {}
    interrupted = False
    if room < build + MIN_SEARCH_S:
        notes.append(
            f"no time left for CP-SAT ({budget.elapsed():.3g} s of the {budget.limit:g} s budget "
            f"spent before the model, {keep:.3g} s kept for the reasons and "
            f"{CHECK_RESERVE * inc.check_cost:.3g} s for {CHECK_RESERVE} checks; building the "
            f"model would take about {build:.3g} s); the incumbent is returned"
        )
    else:
        polish_keep = _polish_keep(ctx, inc, room - build - MIN_SEARCH_S)
        room -= polish_keep
        model_cfg = dataclasses.replace(cfg, deterministic_time=room) if cfg.deterministic else cfg
        stop = SearchStop()
        before = ctx.meter.units
        if cfg.interruptible:
            with interruptible(stop):
                outcome = solve_model(
                    ctx, inc.pods, previous, model_cfg, room, inc.evictions, stop=stop
                )
        else:
            outcome = solve_model(
                ctx, inc.pods, previous, model_cfg, room, inc.evictions, stop=stop
            )
        for part, seconds in outcome.parts.items():
            budget.parts[part] = budget.parts.get(part, 0.0) + seconds
        size = outcome.model_size
        budget.charge("model", units=build_units(ctx.meter.units - before, size))
        budget.charge("search", seconds=outcome.deterministic_time)
        notes += outcome.notes
        status, tiers, model_size = outcome.status, outcome.tiers, size
        interrupted = outcome.interrupted
        if interrupted:
            notes.append(
                "interrupted (Ctrl-C): the search stopped early; the best verified plan found "
                "so far is returned"
            )
        polished = None
        if outcome.pods is not None and polish_keep and not outcome.evictions:
            polished = _polished(ctx, outcome.pods, previous, budget, keep + inc.check_cost, notes)
        checked: tuple[list[PodPlacement], Score, list[Eviction]] | None = None
        if polished is not None:
            checked = (polished[1].pods, polished[0], [])
            tiers = _polished_tiers(tiers, polished[0], polished[1])
            if status is CycleStatus.OPTIMAL:
                status = CycleStatus.FEASIBLE  # the entries below the polish lost their proof
        elif outcome.pods is not None:
            sc, violation = _check(ctx, outcome.pods, previous, budget, outcome.evictions)
            if violation is not None:
                notes.append(
                    f"CP-SAT's solution failed the verifier ({violation}); the incumbent is "
                    "returned"
                )
                status = CycleStatus.FALLBACK
            else:
                checked = (outcome.pods, sc, outcome.evictions)
        if checked is not None:
            if _below(inc, checked[1], ctx, budget, notes):
                notes.append("CP-SAT's plan scores below the incumbent; the incumbent is returned")
                status = CycleStatus.INCUMBENT
            else:
                found, chosen, found_evictions = checked
                first = chosen.first_difference(inc.score)
                notes.append(
                    f"CP-SAT's plan scores above the incumbent ({inc.name}) at {first}"
                    if first is not None
                    else f"CP-SAT's plan scores equal to the incumbent ({inc.name})"
                )
    placer = "cpsat"
    if found is None:
        polished = _polished_incumbent(ctx, inc, previous, budget, notes)
        if polished is not None:
            found, chosen, found_evictions = polished[1].pods, polished[0], []
            tiers = _polished_tiers(tiers, polished[0], polished[1])
            placer = f"cpsat (incumbent: {inc.name}, polished)"
        else:
            inc.settle(ctx, budget, notes)
            found, chosen, found_evictions = inc.pods, inc.score, inc.evictions
            placer = f"cpsat (incumbent: {inc.name})"
        if status not in (CycleStatus.FALLBACK, CycleStatus.INCUMBENT):
            status = CycleStatus.INCUMBENT

    exact_spent = [0.0] if cfg.deterministic else None

    def exact_check(gang: Gang, empty: bool, seconds: float) -> bool | None:
        return gang_fits(
            ctx, gang, empty, seconds, cfg.seed, deterministic=cfg.deterministic, spent=exact_spent
        )

    plan = _finish(
        ctx,
        found,
        chosen,
        placer,
        status,
        budget,
        # CP-SAT's plan: the model's bounds hold for it; an incumbent: _incumbent_tiers
        tiers=tiers,
        model_size=model_size,
        notes=notes,
        reason_budget=max(0.0, min(budget.left(), keep)),
        exact_check=exact_check,
        exact_spent=exact_spent,
        evictions=found_evictions,
    )
    return CycleResult(
        status=status,
        plan=plan,
        score=chosen,
        incumbent_score=inc.score,
        baseline_scores=inc.scores,
        wall_time_s=budget.wall(),
        model_size=model_size,
        notes=notes,
        parts=dict(budget.parts),
        work=dict(budget.work),
        interrupted=interrupted,
    )
