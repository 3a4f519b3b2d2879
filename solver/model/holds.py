"""The held-capacity family of the CP-SAT model (:mod:`gangplan.models.reservation`).

For each reservation R of the snapshot, each node n it holds and each resource r it holds
there:

    Σ_{items i whose gang may not backfill R} req[i, r] · x[i, n]  ≤  room(R, n, r)

with ``room`` from :class:`~gangplan.models.ReservationRules` — the same definition the
verifier checks (``solver/judges/verify_reservations.py``). Every node a reservation holds is a
block of its own (:func:`~gangplan.solver.model.indexing.build_index`), so x[i, n] exists
per node in aggregated mode too, and identical single-pod gangs are merged into one item
only when they may backfill the same reservations, so an item's gangs agree.
"""

from __future__ import annotations

import math
from functools import reduce

from ortools.sat.python import cp_model

from gangplan.solver.model.indexing import Index
from gangplan.solver.model.variables import Variables

__all__ = ["add_held_capacity"]


def add_held_capacity(m: cp_model.CpModel, ix: Index, v: Variables) -> None:
    """Add the rows of the module docstring (nothing without reservations)."""
    s = ix.snapshot
    if not s.reservations or ix.empty:
        return  # an empty-cluster check ("never fits") holds nothing
    rules = s.reservation_rules
    nidx = ix.node_index
    for res in s.reservations:
        for h in res.held:
            n = nidx.get(h.node)
            if n is None:
                continue
            b = ix.block_of_node[n]
            assert ix.blocks[b].nodes == (n,), f"held node {h.node} shares a block"
            subject = []
            for item in ix.items:
                # an item counted per node (aggregated mode) has its own block there
                ib = ix.block_holding(item.id, n)
                x = None if ib is None else v.x(item.id, ib)
                if x is not None and not rules.may_backfill(item.gang, res):
                    subject.append((ix.shapes[item.shape], x))
            if not subject:
                continue
            for r, room in rules.room(res, h).items():
                terms = [(sh.req(r), x) for sh, x in subject if sh.req(r) > 0]
                if not terms:
                    continue
                g = reduce(math.gcd, [c for c, _ in terms])
                m.add(sum((c // g) * x for c, x in terms) <= room // g)
