"""FGD's restarts: the cycle's pending gangs placed again by FGD in other orders, with the
FGD simulator's integer score, on one cluster state; the best restart joins the cycle's
incumbent pool.

A pod-by-pod scheduler places each pod as it comes. The cycle sees its pending gangs all at
once and may place them in any order; FGD's rule is order-sensitive (each pod's node is the
one where expected fragmentation grows least *given the pods before it*), so other orders
give other plans. Each restart:

- places the gangs in :class:`~gangplan.solver.queue_order.QueueOrder` (queues by weighted
  dominant share, a queue's gangs by priority), restart 0 with a queue's gangs of one
  priority by creation time (the baselines' order), restart ``k >= 1`` in a seeded random
  order of them — priority and fair share order every restart alike;
- compares nodes by the integer score of the FGD authors' simulator,
  ``int(100 * sigmoid(-Δ / 1000))`` (``FgdScorer(quantize=True)``; Weng et al., USENIX ATC
  '23, artifact ``hkust-adsl/kubernetes-scheduler-simulator``, ``fgd_score.go``), ties to the
  first node in snapshot order: nodes whose ``Δ`` differ by less than about 40 milli-GPU
  tie, and the pods go to the first of them, which packs them. The exact ``Δ`` is what the
  ``fgd`` baseline itself compares, so it is always in the pool too.

All restarts place on one copy of the cycle's state and take their pods back after, so
the node rankings (:mod:`gangplan.solver.ranking`) are built once and only the nodes a
restart changed are ranked again by the next. Restarts are compared by a cheap key, per
priority class from the highest: milli-GPU placed, then pods placed; then the least growth
of FGD's expected fragmentation (exact ``Δ``, summed over the nodes a restart touched: the
score's ``fragmentation.expected`` entry up to a constant factor). Only the best is handed
to the cycle, which scores it by :func:`~gangplan.solver.score.score` like any baseline's
plan and keeps it only if it scores higher than every baseline's.

Measured on the Alibaba replay (``docs/replay.md``): the gain is in the orders and in the
integer score together; see that page for the numbers.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

from gangplan.models import PodPlacement
from gangplan.solver.context import CycleContext
from gangplan.solver.fgd import fgd
from gangplan.solver.fragmentation import FgdScorer
from gangplan.solver.queue_order import QueueOrder

__all__ = ["FgdRestarts", "Restart"]


@dataclass(frozen=True)
class Restart:
    """One restart's plan: its pods, its number (0: the baselines' gang order) and its key
    (higher is better; module docstring)."""

    number: int
    pods: list[PodPlacement]
    key: tuple[int, ...]


class FgdRestarts:
    """FGD's restarts on one cycle (module docstring): call :meth:`step` once per restart
    (the caller decides how many fit its budget); :attr:`best` is the best so far.

    ``seed`` seeds the orders of restarts 1, 2, ... (restart 0 is the baselines' order).
    """

    def __init__(self, ctx: CycleContext, *, seed: int = 0):
        self.ctx = ctx
        self.state = ctx.state()
        self.scorer = FgdScorer(self.state, ctx.workload, quantize=True)
        self._exact = FgdScorer(self.state, ctx.workload)
        self._rng = random.Random(seed)
        self._classes = sorted({g.priority for g in ctx.snapshot.gangs}, reverse=True)
        self._keys = [g.key for g in sorted(ctx.snapshot.gangs, key=lambda g: g.key)]
        self.tried = 0
        self.best: Restart | None = None

    def _tie(self) -> dict[str, int] | None:
        if self.tried == 0:
            return None
        keys = list(self._keys)
        self._rng.shuffle(keys)
        return {k: i for i, k in enumerate(keys)}

    def step(self) -> Restart:
        """Run the next restart; the state is as before afterwards. Returns it (and keeps
        it as :attr:`best` if its key is higher than the best's so far)."""
        ctx, state = self.ctx, self.state
        order = QueueOrder(ctx, tie=self._tie())
        pods = fgd(ctx, scorer=self.scorer, order=order)
        touched = {p.node for p in pods}
        after = sum(self._exact.fragmentation(n) for n in touched)
        by_key = ctx.snapshot.gang_by_key
        gpu = ctx.snapshot.gpu
        milli: dict[int, int] = defaultdict(int)
        count: dict[int, int] = defaultdict(int)
        for p in reversed(pods):
            gang = by_key[p.gang_key]
            role = gang.role(p.role)
            state.remove(p, role)
            milli[gang.priority] += role.requests.get(gpu, 0)
            count[gang.priority] += 1
        before = sum(self._exact.fragmentation(n) for n in touched)
        key = (*(v for c in self._classes for v in (milli[c], count[c])), before - after)
        got = Restart(self.tried, pods, key)
        self.tried += 1
        if self.best is None or got.key > self.best.key:
            self.best = got
        return got
