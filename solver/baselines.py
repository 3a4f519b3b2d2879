"""The baseline placers by name: the registry the cycle, the CLI and the benchmark read.

``greedy``
    Volcano's ``allocate`` with gang, drf/proportion and binpack (:mod:`gangplan.solver.greedy`).
``topology-fit``
    Kueue's topology-aware BestFit (:mod:`gangplan.solver.topology_fit`).
``fgd``
    fragmentation gradient descent, Weng et al., USENIX ATC '23 (:mod:`gangplan.solver.fgd`).

Each is a function of the cycle's :class:`~gangplan.solver.context.CycleContext` returning pod
placements that pass the verifier; the cycle runs them all, in this order, and keeps the
best by :func:`~gangplan.solver.score.score` as CP-SAT's incumbent and hint (ties: the first).
A new baseline is added here, by an import and one entry.
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
