"""Evicting a set of running pods together through the Eviction API (policy/v1), so that a
PodDisruptionBudget never leaves a victim half-evicted.

The Eviction API decides pod by pod: the budget that allows the first eviction may refuse
the second (429 ``TooManyRequests``, "Cannot evict pod as it would violate the pod's
disruption budget"). :func:`evict_together` therefore first counts, per
PodDisruptionBudget of the pods' namespaces, how many of the pods it selects would go, and
evicts nothing when one allows fewer (its ``status.disruptionsAllowed``; without a status,
from ``spec.minAvailable`` / ``spec.maxUnavailable`` as integers over the healthy pods it
selects — Kubernetes, "Specifying a Disruption Budget for your Application"). Then it evicts
them in order; an answer other than success (a 429 from a budget changed meanwhile, a 5xx)
**stops** it: the pods not yet evicted are left running, and the outcome says which went
and which did not, so the caller's note and Event can say what happened. Used for a
preemptor's victims (:class:`~gangplan.adapters.serve.loop.ServeLoop`) and for a move
plan's waves (:mod:`gangplan.adapters.serve.moves`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gangplan.adapters.kube.topology import match_labels
from gangplan.adapters.serve.api import KINDS, ApiError, KubeApi, Obj

__all__ = ["EvictOutcome", "EvictingApplier", "Evictor", "disruptions_allowed", "evict_together"]

PDB = KINDS["poddisruptionbudgets.policy"]
PODS = KINDS["pods"]
_FINISHED = ("Succeeded", "Failed")


class EvictingApplier(Protocol):
    """What eviction needs of the applier (:class:`~gangplan.adapters.serve.apply.Applier`):
    whether it only records (``dry_run``), and one pod's eviction (raises ``ApiError``)."""

    @property
    def dry_run(self) -> bool: ...

    def evict(self, ns: str, name: str, uid: str | None) -> None: ...


@dataclass
class EvictOutcome:
    """What :func:`evict_together` did: ``evicted`` and ``left`` (not evicted) pods as
    ``namespace/name``; ``stopped``: why it stopped ('' when every pod went)."""

    evicted: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    stopped: str = ""

    @property
    def complete(self) -> bool:
        return not self.stopped

    def message(self) -> str:
        """One sentence for a note or an Event."""
        if not self.stopped:
            return f"evicted {len(self.evicted)} pods"
        if not self.evicted:
            return f"nothing evicted: {self.stopped}"
        return (
            f"evicted {len(self.evicted)} pods ({', '.join(self.evicted)}), then stopped: "
            f"{self.stopped}; not evicted: {', '.join(self.left)}"
        )


def _selects(pdb: Obj, pod: Obj) -> bool:
    sel = (pdb.get("spec") or {}).get("selector")
    if sel is None:
        return False
    return match_labels(sel, (pod.get("metadata") or {}).get("labels") or {})


def disruptions_allowed(pdb: Obj, pods: Sequence[Obj]) -> int | None:
    """Evictions ``pdb`` allows now (module docstring); None: it says nothing usable (a
    percentage without a status), so the Eviction API alone decides."""
    status = pdb.get("status") or {}
    if isinstance(status.get("disruptionsAllowed"), int):
        return int(status["disruptionsAllowed"])
    spec = pdb.get("spec") or {}
    healthy = [
        p
        for p in pods
        if _selects(pdb, p) and (p.get("status") or {}).get("phase") not in _FINISHED
    ]
    if isinstance(spec.get("minAvailable"), int):
        return len(healthy) - int(spec["minAvailable"])
    if isinstance(spec.get("maxUnavailable"), int):
        return int(spec["maxUnavailable"])
    return None


def _preflight(api: KubeApi, victims: Sequence[tuple[str, str]]) -> str:
    """Why the budgets forbid evicting all ``victims`` at once ('' if they allow it)."""
    for ns in sorted({ns for ns, _ in victims}):
        try:
            pdbs = api.list(PDB, ns).items
            pods = api.list(PODS, ns).items
        except ApiError as err:
            return f"cannot read the PodDisruptionBudgets of namespace {ns}: {err}"
        by_name = {(p.get("metadata") or {}).get("name"): p for p in pods}
        mine = [by_name[n] for vns, n in victims if vns == ns and n in by_name]
        for pdb in pdbs:
            allowed = disruptions_allowed(pdb, pods)
            need = sum(1 for p in mine if _selects(pdb, p))
            if allowed is not None and need > allowed:
                name = (pdb.get("metadata") or {}).get("name")
                return (
                    f"PodDisruptionBudget {ns}/{name} allows {max(allowed, 0)} disruptions, "
                    f"{need} of its pods would go"
                )
    return ""


def evict_together(
    api: KubeApi,
    applier: EvictingApplier,
    victims: Sequence[tuple[str, str, str | None]],
) -> EvictOutcome:
    """Evict ``victims`` (``(namespace, name, uid)``) all, or as few as the module docstring
    says; never raises for the API."""
    out = EvictOutcome()
    names = [f"{ns}/{n}" for ns, n, _ in victims]
    if not applier.dry_run:
        why = _preflight(api, [(ns, n) for ns, n, _ in victims])
        if why:
            out.left, out.stopped = names, why
            return out
    for k, (ns, name, uid) in enumerate(victims):
        try:
            applier.evict(ns, name, uid)
        except ApiError as err:
            if err.status == 404:  # gone already: what an eviction wants
                out.evicted.append(names[k])
                continue
            out.left = names[k:]
            out.stopped = f"the Eviction API answered {err.status} for {names[k]} ({err})"
            return out
        out.evicted.append(names[k])
    return out


class Evictor:
    """:func:`evict_together` bound to one port and applier: the loop's evictor
    (:class:`~gangplan.adapters.serve.parts.LoopParts`)."""

    def __init__(self, api: KubeApi, applier: EvictingApplier):
        self.api = api
        self.applier = applier

    def together(self, victims: Sequence[tuple[str, str, str | None]]) -> EvictOutcome:
        """:func:`evict_together` of ``victims`` (``(namespace, name, uid)``)."""
        return evict_together(self.api, self.applier, victims)
