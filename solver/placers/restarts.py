"""FGD's restarts: the cycle's pending gangs placed again by FGD in other orders, with the
FGD simulator's integer score, on one cluster state; the best restart joins the cycle's
incumbent pool.

A pod-by-pod scheduler places each pod as it comes. The cycle sees its pending gangs all at
once and may place them in any order; FGD's rule is order-sensitive (each pod's node is the
one where expected fragmentation grows least *given the pods before it*), so other orders
give other plans. Each restart:

- places the gangs in :class:`~gangplan.solver.placers.queue_order.QueueOrder` (queues by weighted
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
the node rankings (:mod:`gangplan.solver.placers.ranking`) are built once and only the nodes a
restart changed are ranked again by the next. Restarts are compared by a cheap key, per
priority class from the highest: milli-GPU placed, then pods placed; then the least growth
of FGD's expected fragmentation (exact ``Δ``, summed over the nodes a restart touched: the
score's ``fragmentation.expected`` entry up to a constant factor).

The best restart is then improved by a **descent that keeps its packing**
(:meth:`FgdRestarts.descend`): each of its pods of a one-pod gang is taken off and put on
the node, among those its restart already uses and that still hold a pod, where the exact
``Δ`` is least, if that is strictly less than putting it back where it was (same devices);
passes repeat until no pod moves (at most :data:`DESCENT_PASSES`). No node is opened, so
the integer score's packing stays, and the exact expected fragmentation only falls. Only
that plan is handed to the cycle, which scores it by :func:`~gangplan.solver.judges.score.score`
like any baseline's plan and keeps it only if it scores higher than every baseline's.

Measured on the Alibaba replay (``docs/replay.md``): the gain is in the orders and in the
integer score together; see that page for the numbers.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from gangplan.models import GPU_MILLI, PodPlacement
from gangplan.solver.context import CycleContext
from gangplan.solver.judges.fragmentation import FgdScorer
from gangplan.solver.placers.fgd import fgd
from gangplan.solver.placers.queue_order import QueueOrder
from gangplan.solver.placers.state import DeviceChoice

__all__ = ["DESCENT_PASSES", "FgdRestarts", "Restart"]

DESCENT_PASSES = 2
"""At most this many passes of :meth:`FgdRestarts.descend` over the best restart's pods."""


@dataclass(frozen=True)
class Restart:
    """One restart's plan: its pods, its number (0: the baselines' gang order) and its key
    (higher is better; module docstring)."""

    number: int
    pods: list[PodPlacement]
    key: tuple[int, ...]
    moved: int = 0
    """pods the descent moved (:meth:`FgdRestarts.descend`)"""
    tried: int | None = None
    """pods the descent tried (each pass counted), None if it did not run"""
    stopped: bool = False
    """the descent stopped for time before its passes ended"""
    candidates: int = 0
    """pods the descent may move (of one-pod gangs)"""

    def descent_text(self) -> str:
        """What the descent did, for the cycle's notes."""
        if self.tried is None:
            return "no time left for the descent"
        moved = f"the descent moved {self.moved:,} pod{'' if self.moved == 1 else 's'}"
        if self.stopped:
            return (
                f"{moved}, stopped for time after {self.tried:,} tries "
                f"({self.candidates:,} pods may move)"
            )
        return f"{moved} ({self.candidates:,} pods may move)"


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
        self.last_cost = 0.0
        """what the last restart cost, on the caller's clock (the caller sets it)"""

    def _tie(self) -> dict[str, int] | None:
        if self.tried == 0:
            return None
        keys = list(self._keys)
        self._rng.shuffle(keys)
        return {k: i for i, k in enumerate(keys)}

    def step(self) -> Restart:
        """Run the next restart; the state is as before afterwards. Returns it (and keeps
        it as :attr:`best` if its key is higher than the best's so far)."""
        order = QueueOrder(self.ctx, tie=self._tie())
        pods = fgd(self.ctx, scorer=self.scorer, order=order)
        got = Restart(self.tried, pods, self._taken_back(pods))
        self.tried += 1
        if self.best is None or got.key > self.best.key:
            self.best = got
        return got

    def _taken_back(self, pods: list[PodPlacement]) -> tuple[int, ...]:
        """Take ``pods`` (placed on the state) back off it; their key (module docstring)."""
        ctx, state = self.ctx, self.state
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
        return (*(v for c in self._classes for v in (milli[c], count[c])), before - after)

    def descend(
        self,
        passes: int = DESCENT_PASSES,
        out_of_time: Callable[[], bool] = lambda: False,
    ) -> Restart | None:
        """The best restart improved by the packing-keeping descent (module docstring),
        which becomes :attr:`best`; None if no restart ran. The state is as before
        afterwards. Its work grows with the restart's pods times the nodes they use (each
        node tried counts one unit on the state's meter, the deterministic clock), so it
        asks ``out_of_time`` before each pod and stops when told: the pods not yet tried
        stay where the restart put them."""
        best = self.best
        if best is None:
            return None
        ctx, state, exact = self.ctx, self.state, self._exact
        by_key = ctx.snapshot.gang_by_key
        pods = list(best.pods)
        for p in pods:
            gang = by_key[p.gang_key]
            state.place(gang, gang.role(p.role), p.node, p.pod, DeviceChoice.of(p))
        position = state.position
        used = sorted({p.node for p in pods}, key=position.__getitem__)
        movable = sum(1 for p in pods if by_key[p.gang_key].size == 1)
        moved = tried = 0
        stopped = False
        for _ in range(passes):
            moved_now = 0
            for i, p in enumerate(pods):
                gang = by_key[p.gang_key]
                if gang.size != 1:
                    continue  # a pod of a larger gang moves its gang's domains
                if out_of_time():
                    stopped = True
                    break
                tried += 1
                state.meter.add(len(used))
                role = gang.role(p.role)
                state.remove(p, role)
                here = exact.delta_of_choice(p.node, role, DeviceChoice.of(p))
                allowed = state.candidate_set(gang, role)
                target: tuple[str, int, DeviceChoice | None] | None = None
                for n in used:
                    if n == p.node or n not in allowed or self._empty(n):
                        continue
                    got = exact.best_on_node(gang, role, n)
                    if got is not None and (target is None or got[0] < target[1]):
                        target = (n, got[0], got[1])
                if target is not None and target[1] < here:
                    new = state.place(gang, role, target[0], p.pod, target[2])
                    moved_now += 1
                else:
                    new = state.place(gang, role, p.node, p.pod, DeviceChoice.of(p))
                assert new is not None  # it fitted there, or best_on_node said it fits
                pods[i] = new
            moved += moved_now
            if not moved_now or stopped:
                break
        self.best = Restart(
            best.number, pods, self._taken_back(pods), moved, tried, stopped, movable
        )
        return self.best

    def _empty(self, node: str) -> bool:
        """No pod on ``node``: its free amounts are its allocatable (every GPU whole)."""
        st = self.state.nodes[node]
        alloc = self.ctx.snapshot.node_by_name[node].allocatable
        if any(v != GPU_MILLI for v in st.gpu_milli.values()):
            return False
        return all(st.resources.get(r, 0) >= v for r, v in alloc.items())
