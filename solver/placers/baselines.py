"""The baseline placers by name: the registry the cycle, the CLI and the benchmark read.

``greedy``
    Volcano's ``allocate`` with gang, drf/proportion and binpack
    (:mod:`gangplan.solver.placers.greedy`).
``topology-fit``
    Kueue's topology-aware BestFit (:mod:`gangplan.solver.placers.topology_fit`).
``fgd``
    fragmentation gradient descent, Weng et al., USENIX ATC '23
    (:mod:`gangplan.solver.placers.fgd`).

Each is a function of the cycle's :class:`~gangplan.solver.context.CycleContext` returning pod
placements that pass the verifier; the cycle keeps the best by
:func:`~gangplan.solver.judges.score.score` as CP-SAT's incumbent and hint (ties: the first in this
order). It runs first the one likely best for the cycle (:func:`first_baseline`), then the
others cheapest first (:data:`EXPECTED_COST`), and skips one whose predicted cost does not fit
what is left of its budget. A new baseline is added here, by an import and one entry in each
table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from gangplan.models import GPU_MILLI, PodPlacement, Snapshot
from gangplan.solver.context import CycleContext
from gangplan.solver.placers.fgd import fgd
from gangplan.solver.placers.greedy import greedy
from gangplan.solver.placers.topology_fit import topology_fit

__all__ = ["BASELINES", "EXPECTED_COST", "Placer", "first_baseline"]

Placer = Callable[[CycleContext], list[PodPlacement]]
"""A baseline: the cycle's context in, the pods it places out (the context's states are
copies: a placer changes only its own)."""

BASELINES: Mapping[str, Placer] = MappingProxyType(
    {
        "greedy": greedy,
        "topology-fit": topology_fit,
        "fgd": fgd,
    }
)
"""Every baseline by name, read-only; the cycle keeps the best of all as CP-SAT's incumbent."""

EXPECTED_COST: Mapping[str, float] = MappingProxyType(
    {
        "greedy": 1.0,
        "topology-fit": 1.0,
        "fgd": 1.25,
    }
)
"""Each baseline's cost relative to ``greedy`` on the same cycle (wall time measured on
generated fat-trees of 512 to 5,120 nodes at loads 50% and 80%: topology-fit 0.87-1.06, fgd
1.02-1.26; fgd's upper end is taken, a prediction too low overruns the budget): the cycle
runs them cheapest first (ties in this order), and predicts a baseline's cost from the first
one's measured cost times the ratio."""


def first_baseline(snapshot: Snapshot) -> str:
    """The baseline to run first, so that a budget too short for all of them still keeps the
    one likely best: ``fgd`` when a pending pod asks a GPU share (FGD's measure is about the
    GPU shares left over; on the Alibaba openb trace, one cycle or a replay, its plan scored
    best), else ``topology-fit`` when a pending gang of several pods prefers or requires a
    level (Kueue's BestFit keeps such gangs in few domains; it scored best on the generated
    fat-trees at 2,048 nodes, ``gangplan bench``), else ``greedy``, the cheapest."""
    gpu = snapshot.gpu
    multi_topo = False
    for gang in snapshot.gangs:
        for role in gang.roles:
            if 0 < role.requests.get(gpu, 0) < GPU_MILLI:
                return "fgd"
        if gang.size > 1 and (
            (gang.topology and (gang.topology.preferred or gang.topology.required))
            or any(r.topology and (r.topology.preferred or r.topology.required) for r in gang.roles)
        ):
            multi_topo = True
    return "topology-fit" if multi_topo else "greedy"
