"""How fast a bound job runs: the spread slowdown, and where elastic rates will go.

A job's **work** is its trace duration: the seconds it took at full size on the placement
it had (the traces record no placement, so we read it as consolidated). A bound job runs
at a **rate** (work per second of simulated time) and finishes when its work is done:
``end = start + duration / rate``.

**Spread slowdown** (:class:`Slowdown`, off by default). A gang of more than one pod whose
pods sit in L leaves under S spines runs at

    rate = 1 / (1 + leaf x (L - 1) + spine x (S - 1))

so with ``leaf=0.1`` a gang on 3 racks takes 1.2 times its duration. One-pod jobs and
gangs inside one leaf run at rate 1. The factors are the user's
(``--slowdown leaf=F,spine=G``): locality sensitivity varies by model from none to large,
as Gandiva (Xiao et al., OSDI '18, §3 "DLT job characteristics: sensitivity to locality")
and Tiresias (Gu et al., NSDI '19, §2.2 "over-aggressive job consolidation" and §3.3
placement) measured, and Philly's analysis (Jeon et al., USENIX ATC '19, §3.2, "Impact of
distributed learning") found lower GPU utilisation for jobs spread over more servers.
No default is shipped: the report states the factors used and the source its user named
(``--slowdown leaf=F,spine=G,source=TEXT``).

**Elastic jobs** (not yet): the rate of an elastic job will follow its size, linearly by
default (``rate = size / full size`` times the spread factor), with its work conserved
across resizes; :meth:`SpeedModel.rate` already takes the size for that reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Slowdown", "SpeedModel", "SpreadSpeed"]


@dataclass(frozen=True)
class Slowdown:
    """Extra duration per extra leaf and per extra spine of a spread gang (shares of its
    duration, >= 0); ``source`` names where the numbers come from (free text)."""

    leaf: float = 0.0
    spine: float = 0.0
    source: str = ""

    @property
    def off(self) -> bool:
        return self.leaf == 0 and self.spine == 0

    def factor(self, leaves: int, spines: int) -> float:
        """Duration multiplier of a gang on ``leaves`` leaves under ``spines`` spines (>= 1
        each): ``1 + leaf x (leaves - 1) + spine x (spines - 1)``."""
        return 1.0 + self.leaf * max(0, leaves - 1) + self.spine * max(0, spines - 1)

    @property
    def label(self) -> str:
        """``off`` or ``leaf=0.1,spine=0.25`` (what the report prints)."""
        if self.off:
            return "off"
        return f"leaf={self.leaf:g},spine={self.spine:g}"

    @staticmethod
    def parse(text: str) -> Slowdown:
        """``off``, or comma-separated ``leaf=F``, ``spine=G``, ``source=TEXT`` (F, G finite,
        >= 0; source last, it may hold commas).

        Raises:
            ValueError: anything else, naming the bad part and what is accepted.
        """
        t = text.strip()
        if t in ("", "off", "none", "0"):
            return Slowdown()
        values: dict[str, float] = {}
        source = ""
        rest = t
        if "source=" in rest:
            rest, source = rest.split("source=", 1)
            rest = rest.rstrip(", ")
        for part in filter(None, (p.strip() for p in rest.split(","))):
            key, sep, raw = part.partition("=")
            key = key.strip()
            if not sep or key not in ("leaf", "spine"):
                raise ValueError(
                    f"{part!r}: expected leaf=F, spine=G or source=TEXT (e.g. "
                    "leaf=0.1,spine=0.25), or off"
                )
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"{part!r}: {raw!r} is not a number") from None
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{part!r}: accepted a finite number >= 0")
            values[key] = value
        return Slowdown(values.get("leaf", 0.0), values.get("spine", 0.0), source.strip())


class SpeedModel(Protocol):
    """The rate (work per second, 1 = the trace's speed) of a job bound with ``pods`` of
    its ``full_pods`` pods, over ``leaves`` leaves under ``spines`` spines."""

    def rate(self, pods: int, full_pods: int, leaves: int, spines: int) -> float: ...


@dataclass(frozen=True)
class SpreadSpeed:
    """Rate 1 / :meth:`Slowdown.factor` for a job of more than one pod, 1 otherwise (full
    size only: ``pods`` = ``full_pods`` until elastic gangs come)."""

    slowdown: Slowdown = field(default_factory=Slowdown)

    def rate(self, pods: int, full_pods: int, leaves: int, spines: int) -> float:
        if full_pods <= 1:
            return 1.0
        return (pods / full_pods) / self.slowdown.factor(leaves, spines)
