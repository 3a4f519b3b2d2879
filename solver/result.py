"""What a cycle is asked (``SolverConfig``) and what it returns (``CycleResult``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from gangplan.models import (
    Eviction,
    GangOutcome,
    PendingReason,
    Plan,
    PlanSummary,
    PodPlacement,
    Snapshot,
)
from gangplan.solver.judges.score import Score

__all__ = ["MAX_SEED", "CycleResult", "CycleStatus", "SolverConfig", "assemble_plan", "cpsat_seed"]


class CycleStatus(enum.Enum):
    """How the returned plan was found."""

    OPTIMAL = "optimal"
    """CP-SAT proved every optimised tier optimal."""
    FEASIBLE = "feasible"
    """CP-SAT's plan, better than the incumbent, some tier not proven optimal in time."""
    INCUMBENT = "incumbent"
    """CP-SAT found nothing better in time: the best baseline plan is returned."""
    FALLBACK = "fallback"
    """CP-SAT's solution could not be turned into a valid plan: the incumbent is returned."""
    BASELINE = "baseline"
    """A baseline placer was asked for directly."""


@dataclass(frozen=True)
class SolverConfig:
    """Options of one cycle.

    ``time_limit_s``: the wall-clock budget of the whole cycle — snapshot indexing (in
    :func:`~gangplan.solver.cycle.solve_cycle`), baselines, model build, search, plan,
    checks and reasons (:mod:`gangplan.solver.budget`); ``num_workers``: CP-SAT
    search workers (default 2: one per core of a 2-core machine, as CI has; more workers
    than cores only compete for them);
    ``seed``; ``relative_gap``: stop a tier when within this gap; ``deterministic``: one
    worker, fixed seed, and the whole cycle counted in deterministic seconds
    (``deterministic_time`` of them: CP-SAT's deterministic time and the Python parts' work
    units) instead of wall time, for tests;
    ``reason_share``: the share of the time limit kept for the pending reasons;
    ``exact_limit``: largest (multi-pod items x nodes) for which the model keeps pods at
    node granularity (exact node locality); above it, gangs are placed per leaf and node
    counts are derived (reported in the notes); ``interruptible``: Ctrl-C (SIGINT) during the
    search stops it and returns the best verified plan so far (a second Ctrl-C aborts);
    off, the process's own SIGINT handling is left alone.
    """

    time_limit_s: float = 10.0
    num_workers: int = 2
    seed: int = 0
    relative_gap: float = 0.0
    deterministic: bool = False
    deterministic_time: float | None = None
    """the whole cycle's budget in deterministic mode, in deterministic seconds; None: the
    same number as ``time_limit_s`` (CP-SAT's deterministic unit is roughly a second)."""
    reason_share: float = 0.1
    exact_limit: int = 6_000
    max_pairs: int = 40_000
    """largest number of (item, candidate node) pairs kept; above it each item keeps the
    nodes its incumbent uses plus its best-fitting candidates (reported in the notes; the
    model may then miss a better plan). 0: keep all (exact)."""
    interruptible: bool = True

    def __post_init__(self) -> None:
        """Raises:
        ValueError: ``seed`` outside 0..2**31-1 (CP-SAT's ``random_seed`` is a 32-bit
            signed integer; a batch tool deriving seeds reduces them with
            :func:`cpsat_seed`)."""
        if not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed {self.seed} is out of range (accepted: 0 to {MAX_SEED})")


MAX_SEED = 2**31 - 1
"""The largest seed CP-SAT accepts (``SatParameters.random_seed``, int32)."""


def cpsat_seed(seed: int) -> int:
    """``seed`` (any integer a batch tool counts from, e.g. a replay's seed) as a seed
    CP-SAT accepts: modulo 2**31."""
    return seed % (MAX_SEED + 1)


@dataclass
class CycleResult:
    """A cycle's outcome: the plan, how it was found, its score and model statistics."""

    status: CycleStatus
    plan: Plan
    score: Score
    incumbent_score: Score | None = None
    baseline_scores: dict[str, Score] = field(default_factory=dict)
    wall_time_s: float = 0.0
    model_size: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    parts: dict[str, float] = field(default_factory=dict)
    """wall seconds per part of the cycle (:mod:`gangplan.solver.budget`)"""
    work: dict[str, float] = field(default_factory=dict)
    """deterministic seconds per part (deterministic mode only)"""
    interrupted: bool = False
    """Ctrl-C stopped the search: the plan is the best verified one found until then"""


def assemble_plan(
    snapshot: Snapshot,
    pods: list[PodPlacement],
    reasons: dict[str, PendingReason],
    summary: PlanSummary | None = None,
    evictions: list[Eviction] | tuple[Eviction, ...] = (),
) -> Plan:
    """A plan with one outcome per gang (snapshot order) from its placed pods and reasons,
    and the running pods it evicts."""
    by_gang: dict[str, list[PodPlacement]] = {}
    for p in pods:
        by_gang.setdefault(p.gang_key, []).append(p)
    outcomes = []
    for gang in snapshot.gangs:
        placed = by_gang.get(gang.key, [])
        roles = {r.name: sum(1 for p in placed if p.role == r.name) for r in gang.roles}
        outcomes.append(
            GangOutcome(
                gang=gang.name,
                namespace=gang.namespace,
                admitted=bool(placed),
                placed=len(placed),
                roles=roles if placed else {},
                reason=None
                if placed
                else reasons.get(gang.key, PendingReason(kind="lost", message="not placed")),
            )
        )
    return Plan(
        gangs=tuple(outcomes), pods=tuple(pods), evictions=tuple(evictions), summary=summary
    )
