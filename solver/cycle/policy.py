"""The cycle's tuning rules, one frozen object: how the budget is shared between the baselines,
FGD's restarts, CP-SAT's model and search, the locality polish, the checks and the reasons.

Each field states its rule. Every cost is relative to a cost measured earlier in the same
cycle (the first baseline's, or fgd's), and every share is of the cycle's budget
(``SolverConfig.time_limit_s``, or its deterministic seconds in deterministic mode), so the
rules hold on both clocks (:mod:`gangplan.solver.budget`). The measurements that chose each
value are in ``docs/bench.md``, "Cycle policy: how each constant was chosen".

:data:`DEFAULT_POLICY` is what :func:`~gangplan.solver.cycle.solve_cycle` uses unless given
another (``solve_cycle(..., policy=dataclasses.replace(DEFAULT_POLICY, max_restarts=0))``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_POLICY", "CyclePolicy"]


@dataclass(frozen=True)
class CyclePolicy:
    """How one cycle shares its budget (module docstring). Costs are ratios, shares are
    fractions of the budget, ``min_search_s`` is in the budget's seconds."""

    min_search_s: float = 0.05
    """CP-SAT is started only if at least this many seconds (deterministic seconds in
    deterministic mode) are left for its search after its predicted build; else the
    incumbent is returned."""
    reasons_cost: float = 0.8
    """The pending reasons are predicted at this many times the first baseline's cost; what
    is kept for them is the larger of that and ``SolverConfig.reason_share`` of the budget."""
    check_per_score: float = 2.5
    """A check of one plan (score and verify) is predicted at this many times the first
    baseline's plan's score alone."""
    check_reserve: int = 2
    """Checks kept in reserve after the baselines (CP-SAT's plan, then the incumbent's); where
    CP-SAT cannot run, a later baseline needs only one of them: the winner's verification."""
    search_share: float = 0.3
    """Where CP-SAT can run after the first baseline (whole GPUs asked), a later baseline runs
    only if it leaves the model's predicted build plus this share of the budget to search."""
    polish_cost: float = 0.5
    """The locality polish is predicted at this many times the first baseline's cost; that
    much is kept from CP-SAT's search where gangs of several pods are pending."""
    incumbent_check_margin: float = 1.5
    """A polished incumbent keeps time for this many checks after the reasons' time: its own
    check and the error of that estimate with the plan's assembly."""
    model_cost: float = 2.5
    """The model's build (index, variables, constraints, objective, completed hint) is
    predicted at this many times the first baseline's cost."""
    share_model_cost: float = 10.0
    """The model's build where pods ask GPU shares (``fgd`` leads) is predicted at this many
    times fgd's cost: the build there grows with the nodes holding shares and the
    expected-fragmentation term, not with the first baseline's cost."""
    preemption_share: float = 0.25
    """With preemption on, the greedy preemption after each baseline stops once it has taken
    this share of the budget; the gang being tried is undone, those not tried stay pending."""
    max_restarts: int = 8
    """At most this many FGD restarts a cycle (:mod:`gangplan.solver.placers.restarts`)."""
    after_fgd_cost: float = 2.5
    """Where fgd leads, a later baseline is predicted at this many times fgd's cost at least
    (the registry's expected costs are measured on whole GPUs)."""
    restarts_reasons_margin: float = 1.25
    """The restarts leave untouched this many times the reasons' kept time (plus the best
    restart's score and one check): they fill what they are given."""
    early_restart_share: float = 0.25
    """The restarts run right after fgd until they have spent this share of the budget, and
    go on after the other baselines."""
    first_restart_cost: float = 0.7
    """The first restart is predicted at this many times the ``fgd`` baseline's cost."""
    later_restart_cost: float = 0.25
    """Where the first restart took under ``small_restart_share`` of the budget, the second is
    predicted at this many times the first (the first built the node rankings the others
    reuse); otherwise at the first's cost. Every later one at the last one's cost."""
    small_restart_share: float = 0.1
    """A first restart under this share of the budget is followed by cheaper ones
    (``later_restart_cost``)."""
    restart_share: float = 0.3
    """The restarts (and their descent) stop once they have spent this share of the budget,
    so that the rest stays for CP-SAT's model where it fits."""


DEFAULT_POLICY = CyclePolicy()
"""The policy every cycle uses unless given another."""
