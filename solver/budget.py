"""The cycle's budget: one time limit for every part of a cycle, the time each part took, and
Ctrl-C during the search.

``SolverConfig.time_limit_s`` (``gangplan solve --time-limit``) bounds the whole cycle, from
the snapshot to the plan with its reasons. The parts, in the order a cycle runs them, each
recorded under its name in :attr:`Budget.parts`:

``context``
    snapshot indexing: the topology, fair shares, node index, FGD's workload and the first
    :class:`~gangplan.solver.placers.state.ClusterState`;
``reservations``
    the reservation step (reservations on only: :mod:`gangplan.solver.cycle.reservations`;
    in deterministic mode the node evaluations of its greedy);
``baseline.NAME``
    each baseline placer, cheapest first (:data:`~gangplan.solver.placers.baselines.EXPECTED_COST`);
    a baseline whose predicted cost does not fit what is left is skipped, and the notes say so;
``restarts``
    FGD's restarts, where FGD leads the baselines (:mod:`gangplan.solver.placers.restarts`);
``check``
    scoring and verifying the baselines' plans and CP-SAT's;
``model``, ``search``, ``plan``
    building the CP-SAT model and completing the incumbent into a hint, the tier-by-tier
    search, and turning counts into pods (inside :func:`~gangplan.solver.model.builder.
    solve_model`);
``polish``
    the locality polish of CP-SAT's plan (:mod:`gangplan.solver.cycle.polish`; only where gangs
    of several pods are pending);
``reasons``
    a reason for every pending gang.

**Two clocks.** By default the budget is wall time. In deterministic mode
(``SolverConfig.deterministic``) it is counted in *deterministic seconds*, so that a test's
outcome never depends on the machine: CP-SAT's own deterministic time for the search, and
for the Python parts *work units* (:data:`WORK_UNITS_PER_SECOND` make one deterministic
second) that each part reports: a baseline the node evaluations its cluster state made
(:class:`WorkMeter`; FGD's each node it measures ``Δ`` on, too; under reservations, those
of every phase), the reservation step its greedy's, FGD's restarts theirs and
their descent's, the model its variables and constraints (its build stops at its share of
the deterministic budget, as on the wall clock), the checks the pods they read, the reasons
the gangs they explain.

**Ctrl-C.** :func:`interruptible` installs a SIGINT handler around the search only (and puts
the previous one back after): the first Ctrl-C stops CP-SAT
(``CpSolver.stop_search``, which CP-SAT honours within milliseconds) and the cycle returns
the best verified plan found so far, saying so; a second Ctrl-C raises
:class:`KeyboardInterrupt` (abort). CP-SAT's own SIGINT catching is turned off for these
solves, and each solve runs in a worker thread while the main thread waits, because Python
runs a signal handler only in the main thread and only between bytecodes — never while it is
inside a C++ call such as ``CpSolver.solve``.
"""

from __future__ import annotations

import contextlib
import gc
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

__all__ = [
    "WORK_UNITS_PER_SECOND",
    "Budget",
    "SearchStop",
    "WorkMeter",
    "gc_paused",
    "interruptible",
]

WORK_UNITS_PER_SECOND = 1_000_000
"""Work units per deterministic second: about one second of a 2-core CI machine's Python for
as many node evaluations (measured on the baselines of a 512-node fat-tree)."""


@dataclass
class WorkMeter:
    """A counter of work units that cluster states (and their copies) add to: one unit per
    node a placer evaluates (room, fit, score). Shared by every state of one cycle."""

    units: int = 0

    def add(self, units: int) -> None:
        """Count ``units`` more."""
        self.units += units


@dataclass
class Budget:
    """A cycle's time limit and what each part spent (module docstring).

    ``limit``: seconds (wall), or deterministic seconds when ``deterministic``. ``parts``:
    wall seconds per part; ``work``: deterministic seconds per part (deterministic mode only).
    """

    limit: float
    deterministic: bool = False
    clock: Callable[[], float] = time.monotonic
    parts: dict[str, float] = field(default_factory=dict)
    work: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _start: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._start = self.clock()

    def elapsed(self) -> float:
        """What is spent: wall seconds since the start, or deterministic seconds charged."""
        if self.deterministic:
            return sum(self.work.values())
        return self.clock() - self._start

    def wall(self) -> float:
        """Wall seconds since the start (both modes)."""
        return self.clock() - self._start

    def left(self) -> float:
        """What is left of the limit (never below 0), in the budget's clock."""
        return max(0.0, self.limit - self.elapsed())

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Time a part (added to ``parts[name]``, in wall seconds)."""
        t0 = self.clock()
        try:
            yield
        finally:
            self.parts[name] = self.parts.get(name, 0.0) + (self.clock() - t0)

    def charge(self, name: str, *, units: float = 0.0, seconds: float = 0.0) -> None:
        """Charge ``name`` with work ``units`` and deterministic ``seconds`` (CP-SAT's); a no-op
        on the wall clock, where :meth:`part` measures."""
        if self.deterministic:
            self.work[name] = self.work.get(name, 0.0) + units / WORK_UNITS_PER_SECOND + seconds

    def spent(self, name: str) -> float:
        """What ``name`` spent, in the budget's clock."""
        return (self.work if self.deterministic else self.parts).get(name, 0.0)


class SearchStop:
    """A request to stop the search, from Ctrl-C (:func:`interruptible`) or from code.

    The search registers each CP-SAT solver it runs (:meth:`run`); :meth:`request` stops the
    one running and every later one before it starts.
    """

    def __init__(self) -> None:
        self.requested = False
        self.started = threading.Event()
        """set when the first search starts (tests send their signal after it)"""
        self.on_start: Callable[[], None] | None = None
        """called once, from the main thread, when the first search starts"""
        self._solver: Any = None
        self._lock = threading.Lock()

    def request(self) -> None:
        """Stop the running search (if any) and every later one."""
        self.requested = True
        with self._lock:
            if self._solver is not None:
                self._solver.stop_search()

    def run(self, solver: Any, model: Any) -> Any:
        """``solver.solve(model)``, stoppable: the solve runs in a worker thread while this
        (main) thread waits, so a signal handler can run and call :meth:`request`. Returns the
        solve's status; without a request it is the same as ``solver.solve(model)``."""
        solver.parameters.catch_sigint_signal = False
        if not self.started.is_set():
            self.started.set()
            if self.on_start is not None:
                self.on_start()
        if self.requested:
            solver.parameters.max_time_in_seconds = 0.0
        result: dict[str, Any] = {}
        errors: list[BaseException] = []

        def target() -> None:
            try:
                result["status"] = solver.solve(model)
            except BaseException as err:  # re-raised in the caller's thread
                errors.append(err)

        with self._lock:
            self._solver = solver
        worker = threading.Thread(target=target, name="cp-sat-search", daemon=True)
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.05)
                if self.requested:
                    solver.stop_search()  # idempotent; also covers a request made at start
        except BaseException:
            # a second Ctrl-C (abort): stop CP-SAT's threads before the exception leaves
            solver.stop_search()
            worker.join()
            raise
        finally:
            with self._lock:
                self._solver = None
        if errors:
            raise errors[0]
        return result["status"]


@contextlib.contextmanager
def interruptible(stop: SearchStop) -> Iterator[SearchStop]:
    """Install a SIGINT handler for the duration of the search (module docstring): the first
    Ctrl-C calls ``stop.request()``, the second raises :class:`KeyboardInterrupt`. The
    previous handler is put back on exit. Outside the main thread (where Python allows no
    signal handler) nothing is installed and ``stop`` still works when requested by code."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:  # installed outside Python: put Python's default back after
        previous = signal.default_int_handler

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if stop.requested:
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        stop.request()

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the duration (a cycle), then restore it.

    A cycle allocates many small objects (pods, heap entries) next to a snapshot of millions
    of objects; each full collection walks them all, which cost a third of a baseline's time
    at 5,000 nodes. Reference counting still frees what the cycle drops; what forms cycles
    waits for the next collection after the cycle. Nested use keeps the outer state.

    The first allocation after the collector resumes starts a young collection over every
    object the cycle made and still holds (1.5 s at openb's size on a loaded machine, after
    the cycle's last part, counted in no part). Moving them to the oldest generation instead
    (``gc.freeze`` then ``gc.unfreeze``) avoids it, but then CPython never starts the full
    collections that free the cycles of garbage a cycle leaves: a 600-cycle soak of the
    sidecar grew fivefold (``tests/adapters/serve/test_soak.py``), so it is not done.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
