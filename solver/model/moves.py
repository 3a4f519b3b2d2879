"""Moves in the CP-SAT model (``gangplan replan``; ``docs/solver.md``, "Replan: moves in waves").

A **move** evicts a whole running gang and places it anew. The replan
(:mod:`gangplan.solver.replan`) turns every running gang that may move into a victim of
the preemption model (its ``stay[v]`` boolean, :mod:`gangplan.solver.model.victims`)
and adds a pending **copy** of it (same pods, same queue and priority); :class:`MoveSpec`
in the cycle's context tells the model which copy belongs to which victim. Then family
``moves_replaced`` (:func:`add_moves`):

* a victim leaves only to be placed again: ``admit[copy] = 1 - stay[v]`` for a multi-pod
  gang; for identical single-pod gangs, which the index counts as one item,
  ``Σ_{copies in the item} (1 - stay[v]) <= placed(item) <= that + the item's other gangs``;
* the move budget: ``Σ_v (1 - stay[v]) <= max_gangs`` and
  ``Σ_v gpu_milli(v) · (1 - stay[v]) <= max_gpu_milli``.

With moves, every item may use a victim's room (a move is made for the whole plan, not for
one gang), and the rule "no eviction for nothing" does not apply to moves: the evicted
pods are not lost, they run elsewhere. The score's entries then count a move as an
eviction (lost throughput of its class) and its copy as an admission (the same throughput
back): moves cost nothing above the eviction entries, where fewer moved GPUs, then fewer
moved pods, come first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

if TYPE_CHECKING:
    from gangplan.solver.model.indexing import Index
    from gangplan.solver.model.variables import Variables

__all__ = ["MoveSpec", "add_moves"]


@dataclass(frozen=True)
class MoveSpec:
    """Which running gangs may move, the copy that re-places each, and the budget.

    ``copies``: running gang key -> its copy's gang key (a pending gang of the snapshot);
    ``max_gangs``: gangs moved at most (None: no cap); ``max_gpu_milli``: milli-GPU moved at
    most (None: no cap).
    """

    copies: dict[str, str]
    max_gangs: int | None = None
    max_gpu_milli: int | None = None


def add_moves(model: cp_model.CpModel, ix: Index, v: Variables, spec: MoveSpec) -> None:
    """Family ``moves_replaced`` (module docstring)."""
    vs = ix.victims
    if vs is None:
        return
    victim_of = {vic.gang.key: vic for vic in vs.victims}
    copy_victim = {copy: victim_of[key] for key, copy in spec.copies.items() if key in victim_of}
    linked: set[int] = set()
    for g in ix.groups:
        mine = [copy_victim[x.key] for x in g.gangs if x.key in copy_victim]
        if not mine:
            continue
        gone = sum(1 - v.stay(vic.id) for vic in mine)
        linked |= {vic.id for vic in mine}
        if g.multi:
            model.add(v.admit(g.id) == gone)
            continue
        placed = sum(v.placed(i) for i in g.items)
        model.add(placed >= gone)
        model.add(placed <= gone + (len(g.gangs) - len(mine)))
    moved: list[tuple[int, cp_model.LinearExprT]] = []
    for vic in copy_victim.values():
        if vic.id not in linked:
            model.add(v.stay(vic.id) == 1)  # its copy has no candidate node: it stays
            continue
        milli = sum(vs.units[u].size * vs.units[u].req(ix.snapshot.gpu) for u in vic.units)
        moved.append((milli, 1 - v.stay(vic.id)))
    if spec.max_gangs is not None:
        model.add(sum(e for _m, e in moved) <= spec.max_gangs)
    if spec.max_gpu_milli is not None:
        model.add(sum(m * e for m, e in moved) <= spec.max_gpu_milli)
