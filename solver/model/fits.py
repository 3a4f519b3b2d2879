"""The exact "does this gang fit alone" check the cycle's reasons ask
(:func:`gang_fits`): the model of one gang, on the empty cluster or in what running pods
leave, solved for feasibility."""

from __future__ import annotations

from ortools.sat.python import cp_model

from gangplan.models import Gang
from gangplan.solver.context import CycleContext
from gangplan.solver.model.constraints import Constraints
from gangplan.solver.model.indexing import build_index
from gangplan.solver.model.variables import Variables
from gangplan.solver.result import SolverConfig

__all__ = ["gang_fits"]


def gang_fits(
    ctx: CycleContext,
    gang: Gang,
    empty: bool,
    seconds: float,
    seed: int = 0,
    *,
    deterministic: bool = False,
    spent: list[float] | None = None,
) -> bool | None:
    """Exact check for the reasons: can ``gang`` alone be admitted (on the empty cluster
    when ``empty``, else in what running pods leave), within its queue's max?

    ``seconds``: wall seconds, or with ``deterministic`` CP-SAT's deterministic seconds (so
    the answer repeats from run to run); ``spent[0]``, if given, is increased by the
    deterministic seconds the check took.

    Returns True / False, or None when CP-SAT cannot tell within ``seconds``.
    """
    ix = build_index(ctx, SolverConfig(max_pairs=0), None, gangs=[gang], empty=empty)
    if gang.key in ix.left_out or not ix.items:
        return False
    model = cp_model.CpModel()
    v = Variables(model, ix)
    Constraints(model, ix, v).add_all()
    group = ix.groups[0]
    if group.multi:
        model.add(v.admit(group.id) == 1)
    else:
        model.add(v.placed(group.items[0]) >= 1)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    if deterministic:
        solver.parameters.max_deterministic_time = max(0.01, seconds)
    else:
        solver.parameters.max_time_in_seconds = max(0.01, seconds)
    st = solver.solve(model)
    if spent is not None:
        spent[0] += solver.response_proto.deterministic_time
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return True
    if st == cp_model.INFEASIBLE:
        return False
    return None
