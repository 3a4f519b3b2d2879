"""A soak of bounded length: 600 cycles in fake time on a simulated cluster of 4 nodes of
8 GPUs, gangs of 1-4 pods of 1-8 GPUs arriving every third cycle for 500 cycles and running
20 s, then 100 cycles to drain. Checked: the memory the loop keeps does not grow from the
warm-up to the end (tracemalloc, the loop's own allocations: the in-memory API and the
simulators are left out); every admitted gang ends fully bound; the final state passes the
verifier. The p99 cycle time is reported (printed), not asserted.

Found by this soak, outside this room: ``solver/placers/state.py`` memoises role shapes in a module
dict keyed by ``id(role)`` (``_SHAPE_KEYS``), which grows by every role of every cycle and
keeps the roles alive. It is emptied before each measurement (so the loop's own memory is
what is measured) and its size is printed, for the solver's owners."""

from __future__ import annotations

import random
import tracemalloc

from kubesim import Controller, Kubelet, Scheduler, final_check
from objects import node

from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.loop import ServeLoop
from gangplan.adapters.serve.memory import InMemoryApi
from gangplan.solver.result import SolverConfig

EVENTS = KINDS["events.events.k8s.io"]


def _loop_bytes(snap: tracemalloc.Snapshot) -> int:
    """Bytes allocated from gangplan's own files, the test doubles left out."""
    keep = [
        tracemalloc.Filter(True, "*/adapters/*"),
        tracemalloc.Filter(True, "*/solver/*"),
        tracemalloc.Filter(True, "*/models/*"),
        tracemalloc.Filter(False, "*/adapters/serve/memory.py"),
        tracemalloc.Filter(False, "*/tests/*"),
    ]
    stats = snap.filter_traces(keep[:3]).filter_traces(keep[3:]).statistics("filename")
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


def test_soak_600_cycles(capsys: object) -> None:
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
    admitted: set[str] = set()
    done: set[str] = set()
    times: list[float] = []
    tracemalloc.start(1)
    warm = end = 0
    memo_sizes: list[int] = []
    for c in range(600):
        if c < 500 and c % 3 == 0:
            ctl.add(f"g{c}", rng.randint(1, 4), gpus=rng.choice([1, 2, 4, 8]))
        r = loop.cycle()
        times.append(r.cycle_s)
        admitted.update(r.admitted)
        done.update(r.done)
        sched.step()
        kubelet.step()
        ctl.step()
        for e in api.objects(EVENTS):  # the API server's TTL on Events
            api.remove(EVENTS, "ml", e["metadata"]["name"])
        clock.advance(2.0)
        if c in (150, 599):
            memo_sizes.append(_empty_solver_memo())
            measured = _loop_bytes(tracemalloc.take_snapshot())
            warm, end = (measured, end) if c == 150 else (warm, measured)
    tracemalloc.stop()
    assert len(admitted) > 100  # the soak did place gangs
    assert admitted <= done  # every admitted gang ended fully bound
    assert not loop.ledger.gangs and not ctl.gangs
    assert end < warm * 1.5 + 512 * 1024, (warm, end)
    times.sort()
    p99 = times[int(0.99 * len(times))]
    print(
        f"\nsoak: 600 cycles, {len(admitted)} gangs admitted and finished, "
        f"p99 cycle {p99 * 1000:.0f} ms, median {times[len(times) // 2] * 1000:.0f} ms, "
        f"loop memory {warm / 1024:.0f} KiB at cycle 150, {end / 1024:.0f} KiB at 600; "
        f"solver role-shape memo: {memo_sizes} entries at cycles 150 and 600"
    )
    assert final_check(api) == []
