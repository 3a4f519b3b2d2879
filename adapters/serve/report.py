"""One cycle's report: the numbers :class:`~gangplan.adapters.serve.loop.ServeLoop` fills step
by step and logs as one JSON line (``{"msg": "cycle", ...}``, one line per cycle, as
controller-runtime's structured logs are), and the notes of a cycle that waits for the cache.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from gangplan.adapters.serve.api import ApiError

__all__ = ["CycleReport", "list_notes"]


@dataclass
class CycleReport:
    """One cycle's numbers (the JSON log line).

    ``at``: the cycle's start (epoch seconds, the loop's clock); ``gangs``: pending gangs in
    the snapshot; ``admitted``: gang keys applied this cycle; ``pending``: gangs the plan left
    pending; ``applied`` / ``failures``: pods applied and API calls that failed (``failed`` names
    each: :meth:`add_failed`); ``done``:
    gangs seen bound whole; ``taken_back``: ``"key: why"`` of the gangs the watchdog took
    back; ``expired``: assumed pods past ``assume_ttl``; ``in_flight``: gangs in the ledger at
    the end; ``*_s``: seconds of the snapshot, the solve and the whole cycle; ``status``: the
    solve's status, or ``follower`` / ``syncing``.
    """

    cycle: int
    leader: bool
    at: float = 0.0
    gangs: int = 0
    admitted: list[str] = field(default_factory=list)
    pending: int = 0
    applied: int = 0
    failures: int = 0
    failed: list[str] = field(default_factory=list)
    """each failed request: ``gang: pod: the API's answer`` (applying, or taking back)"""
    done: list[str] = field(default_factory=list)
    taken_back: list[str] = field(default_factory=list)
    expired: int = 0
    in_flight: int = 0
    snapshot_s: float = 0.0
    solve_s: float = 0.0
    cycle_s: float = 0.0
    status: str = ""
    notes: list[str] = field(default_factory=list)

    def add_failed(self, key: str, doing: str, failed: list[tuple[str, ApiError]]) -> None:
        """Count and name each failed request of gang ``key`` (``(pod, error)``; ``doing``:
        what it was, e.g. ``taking back``, or "" for applying), in the notes too."""
        for name, err in failed:
            line = f"{key}: {name}: {doing + ': ' if doing else ''}{err}"
            self.failures += 1
            self.failed.append(line)
            self.notes.append(line)

    def line(self) -> str:
        """The cycle's JSON log line (compact, one line)."""
        return json.dumps({"msg": "cycle", **asdict(self)}, separators=(",", ":"))


def list_notes(errors: list[tuple[str, ApiError]]) -> list[str]:
    """One readable note per distinct list failure of a cycle that waits for the cache:
    ``cannot reach the API server (why); 13 kinds not listed; retrying``."""
    by: dict[str, list[str]] = {}
    for key, err in errors:
        text = err.message or err.reason
        head = "cannot reach the API server" if err.status == 0 else f"cannot list ({err.status})"
        by.setdefault(f"{head}: {text}", []).append(key)
    out = []
    for head, keys in by.items():
        what = keys[0] if len(keys) == 1 else f"{keys[0]} and {len(keys) - 1} more kinds"
        out.append(f"{head}; {what} not listed; retrying")
    return out
