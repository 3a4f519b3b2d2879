"""Time for the live loop: the system's, or a fake one that tests move by hand.

Everything in :mod:`gangplan.adapters.serve` that waits or compares times (the cycle period,
``assume_ttl``, ``bind_timeout``, back-off, Lease renewals, Event rate limits) asks a
:class:`Clock`, so the fault tests and the soak run hundreds of cycles in seconds without
sleeping.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock", "rfc3339", "rfc3339_micro"]


class Clock(Protocol):
    """``now()``: seconds since the Unix epoch (timestamps written to objects);
    ``sleep(s)``: wait (a fake clock moves instead)."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The machine's clock."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that moves only when told: :meth:`sleep` and :meth:`advance` add seconds."""

    def __init__(self, start: float = 1_800_000_000.0):
        self._t = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._t += max(0.0, seconds)

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)


def rfc3339(t: float) -> str:
    """``2027-01-15T08:00:00Z``: a Kubernetes ``Time`` (seconds)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(t: float) -> str:
    """``2027-01-15T08:00:00.123456Z``: a Kubernetes ``MicroTime``."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> float | None:
    """A Kubernetes ``Time`` or ``MicroTime`` as epoch seconds (None if absent or bad)."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
