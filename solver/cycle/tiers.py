"""The returned plan's report per score entry (``PlanSummary.tiers``), built once from the
model's reports, the returned plan's own score and how that plan was found.

CP-SAT optimises the score's entries tier by tier and proves each entry's bound with the
entries above it fixed at its own values (:mod:`gangplan.solver.model.builder`). What holds
for the plan the cycle returns (:func:`plan_tiers`):

- **CP-SAT's own plan**: every entry reports the plan's own value (the model's may be
  looser, e.g. a spread counted from an untightened ``uses`` variable) with the model's
  bound, the gap recomputed, ``optimal`` exactly where the value reaches the bound;
- **an incumbent** (a baseline's plan, returned instead of CP-SAT's): a bound holds only down
  to the first entry where the incumbent's value differs from CP-SAT's; there and above the
  gap is recomputed against the incumbent's value; below, and wherever the value passes the
  bound (the model's own, e.g. with pruned candidates), the bound is dropped (``no bound``);
  every status says so (:data:`INCUMBENT_RETURNED`);
- **polished** (either plan changed by the locality polish, :mod:`gangplan.solver.cycle.
  polish`): the entries below the first locality entry the polish raised lose their bound
  (:data:`POLISHED`), and that entry too where its new value passes the bound; an open entry
  without a bound whose value the polish changed says ``; polished``.

A cycle that ran no model reports the plan's values alone. :func:`current_notes` drops the
search's notes that the returned plan's own values contradict.
"""

from __future__ import annotations

from gangplan.models import TierReport, open_status
from gangplan.solver.cycle.polish import Polished
from gangplan.solver.judges.score import Score

__all__ = ["INCUMBENT_RETURNED", "POLISHED", "current_notes", "plan_tiers"]

POLISHED = "feasible; polished"
"""The status of an entry below the first locality entry the polish raised: optimised by
CP-SAT, then changed by the polish, its bound no longer proven."""
INCUMBENT_RETURNED = "; incumbent returned"
"""Appended to the status of every entry CP-SAT optimised when a baseline's plan is
returned instead of CP-SAT's."""


def plan_tiers(
    model: tuple[TierReport, ...],
    sc: Score,
    *,
    cpsat: bool,
    polished: Polished | None = None,
) -> tuple[TierReport, ...]:
    """The report per entry of ``sc`` (the returned plan's score, in its order) from the
    model's reports ``model`` (empty: no model ran): CP-SAT's own plan (``cpsat``) or an
    incumbent, changed by the polish (``polished``) or not (module docstring)."""
    if not model:
        return tuple(TierReport(name=n, value=v) for n, v in sc.entries)
    marked = _polish_marks(sc, polished)
    by_name = {t.name: marked(t) for t in model}
    if cpsat:
        return tuple(
            by_name[n].revalued(v) if n in by_name else TierReport(name=n, value=v)
            for n, v in sc.entries
        )
    out: list[TierReport] = []
    differed = False
    for n, v in sc.entries:
        t = by_name.get(n)
        if t is None:
            out.append(TierReport(name=n, value=v))
            continue
        if differed or (t.bound is not None and v > t.bound):
            status = "no bound" if t.bound is not None else t.status
            got = t.model_copy(update={"value": v, "bound": None, "gap": None, "status": status})
        else:
            got = t.revalued(v)
        out.append(got.model_copy(update={"status": got.status + INCUMBENT_RETURNED}))
        differed = differed or v != t.value
    return tuple(out)


def _polish_marks(sc: Score, polished: Polished | None) -> _Marks:
    """What the polish does to a model's report (module docstring): nothing where it raised
    no locality entry."""
    first = polished.first_raised if polished is not None else None
    if first is None:
        return _Marks(None, frozenset(), {})
    names = [n for n, _ in sc.entries]
    raised = [n for n in names if n.startswith("locality.")][first]
    return _Marks(raised, frozenset(names[names.index(raised) + 1 :]), dict(sc.entries))


class _Marks:
    """A model's report as the polish leaves it: the entries below ``raised`` lose their
    bound, ``raised`` too where its new value passes it; an open entry without a bound
    that changed says so; an entry no placer optimises (``derived``, ``constant``) keeps
    its status."""

    def __init__(self, raised: str | None, below: frozenset[str], values: dict[str, int]):
        self.raised, self.below, self.values = raised, below, values

    def __call__(self, t: TierReport) -> TierReport:
        if self.raised is None or (t.name not in self.below and t.name != self.raised):
            return t
        if t.bound is not None:
            if t.name in self.below or self.values[t.name] > t.bound:
                return t.model_copy(update={"bound": None, "gap": None, "status": POLISHED})
            return t
        if open_status(t.status) and self.values.get(t.name, t.value) != t.value:
            return t.model_copy(update={"status": f"{t.status}; polished"})
        return t


def current_notes(notes: list[str], tiers: tuple[TierReport, ...]) -> list[str]:
    """``notes`` without a search note about a tier that the returned plan's own value
    shows optimal (the model's value can be looser than the plan's, e.g. a spread counted
    from an untightened ``uses`` variable: "no better solution" is then stale)."""
    optimal = {t.name for t in tiers if t.status == "optimal"}
    return [
        n
        for n in notes
        if not (
            n.startswith("tier ")
            and n.endswith(": no better solution within its time share")
            and n.removeprefix("tier ").split(":", 1)[0] in optimal
        )
    ]
