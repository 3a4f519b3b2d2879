"""No state outlives a cycle: solver/ keeps no module-level cache, and after many cycles on
snapshots that are then dropped, nothing of them stays alive and no module-level container
of gangplan has grown. (A process that runs a million cycles must not grow.)"""

from __future__ import annotations

import gc
import importlib
import pkgutil
import weakref
from collections.abc import Iterator
from types import ModuleType

from gangplan.adapters.traces.generate import generate_fat_tree
from gangplan.models import Snapshot
from gangplan.solver.context import CycleContext
from gangplan.solver.cycle.pipeline import run_baseline, solve_cycle
from gangplan.solver.judges.fragmentation import Workload
from gangplan.solver.placers.one_pod import one_pod_placer
from gangplan.solver.result import SolverConfig

CONTAINERS = (dict, list, set, bytearray)
DET = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=0.2, seed=0)


def _modules() -> Iterator[ModuleType]:
    for name in ("gangplan.models", "gangplan.topology", "gangplan.solver"):
        pkg = importlib.import_module(name)
        yield pkg
        for info in pkgutil.walk_packages(pkg.__path__, f"{name}."):
            yield importlib.import_module(info.name)


def _mutable_globals() -> dict[tuple[str, str], int]:
    """Every module-level container (dict, list, set, weak mappings, ...) with its size."""
    out = {}
    for mod in _modules():
        for key, value in vars(mod).items():
            if key.startswith("__"):
                continue
            weak = type(value).__name__ in ("WeakKeyDictionary", "WeakValueDictionary", "WeakSet")
            if isinstance(value, CONTAINERS) or weak:
                out[(mod.__name__, key)] = len(value)
    return out


def test_solver_modules_hold_no_mutable_globals() -> None:
    """Caches belong to a cycle's context or state, never to a module of solver/."""
    found = [f"{m}.{k}" for (m, k) in _mutable_globals() if m.startswith("gangplan.solver")]
    assert found == []


def _snapshot(seed: int) -> Snapshot:
    return generate_fat_tree(spines=1, leaves_per_spine=2, nodes_per_leaf=2, load=0.4, seed=seed)


def _cycle(seed: int) -> list[weakref.ref[object]]:
    """One cycle of everything a loop runs (CP-SAT with reasons, every baseline, a replay-
    like one-pod placer on a state); returns weak references to what it was given."""
    s = _snapshot(seed)
    solve_cycle(s, None, DET)
    for name in ("greedy", "topology-fit", "fgd"):
        run_baseline(s, name)
    ctx = CycleContext.of(s)
    wl = Workload.of_snapshot(s)
    for placer in ("greedy", "topology-fit", "fgd"):
        place = one_pod_placer(ctx.state(), placer, wl)
        for g in s.gangs:
            if g.size == 1:
                place(g, "p")
    return [weakref.ref(s), weakref.ref(ctx), weakref.ref(wl)] + [
        weakref.ref(r) for g in s.gangs for r in g.roles
    ]


def test_many_cycles_leave_nothing_behind() -> None:
    _cycle(0)  # warm up imports and lazy module state
    gc.collect()
    before = _mutable_globals()
    refs = [ref for seed in range(1, 13) for ref in _cycle(seed)]
    gc.collect()
    alive = [r() for r in refs if r() is not None]
    assert alive == [], f"{len(alive)} objects of past cycles are still alive: {alive[:3]}"
    after = _mutable_globals()
    grown = {k: (before.get(k, 0), n) for k, n in after.items() if n > before.get(k, 0)}
    assert grown == {}
