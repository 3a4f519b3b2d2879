"""``gangplan replan``: which few moves of running gangs defragment the cluster.

:func:`replan` (:mod:`.planner`) searches target plans under growing move budgets;
:mod:`.waves` orders a target's moves into safe waves. The move plan it returns is checked
by the independent move verifier, :mod:`gangplan.solver.judges.verify_moves`.
"""

from gangplan.solver.replan.planner import (
    ReplanResult,
    ReplanSettings,
    movable_gangs,
    move_snapshot,
    replan,
)

__all__ = ["ReplanResult", "ReplanSettings", "movable_gangs", "move_snapshot", "replan"]
