"""The baseline placers by name: the registry the cycle, the CLI and the benchmark read.

``greedy``
    Volcano's ``allocate`` with gang, drf/proportion and binpack (:mod:`gangplan.solver.greedy`).
``topology-fit``
    Kueue's topology-aware BestFit (:mod:`gangplan.solver.topology_fit`).
``fgd``
    fragmentation gradient descent, Weng et al., USENIX ATC '23 (:mod:`gangplan.solver.fgd`).

Each is a function of the cycle's :class:`~gangplan.solver.context.CycleContext` returning pod
placements that pass the verifier; the cycle keeps the best by
:func:`~gangplan.solver.score.score` as CP-SAT's incumbent and hint (ties: the first in this
order). It runs them cheapest first (:data:`EXPECTED_COST`) and skips one whose predicted cost
does not fit what is left of its budget. A new baseline is added here, by an import and one
entry in each table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from gangplan.models import PodPlacement
from gangplan.solver.context import CycleContext
from gangplan.solver.fgd import fgd
from gangplan.solver.greedy import greedy
from gangplan.solver.topology_fit import topology_fit

__all__ = ["BASELINES", "Placer"]

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
        "fgd": 1.2,
        "topology-fit": 1.4,
    }
)
"""Each baseline's cost relative to ``greedy`` on the same cycle (CPU time measured on
generated fat-trees of 512 to 5,120 nodes): the cycle runs them in this order, and predicts
a baseline's cost from the first one's measured cost times the ratio."""
