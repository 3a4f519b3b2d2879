"""Which running pods tolerate disruption: what makes a running gang no one's victim.

A running pod is **not preemptible** (``RunningPod.preemptible: false``) when, in this order:

* its annotation ``gangplan.io/preemptible`` is ``"false"`` (gangplan's own);
* its annotation ``volcano.sh/preemptable`` is ``"false"`` (Volcano, ``PodPreemptable`` in
  ``pkg/apis/scheduling/v1beta1``; the ``preempt`` and ``reclaim`` actions skip such pods);
* its label ``quota.scheduling.koordinator.sh/preemptible`` is ``"false"`` (Koordinator's
  ElasticQuota, v1.4: a non-preemptible pod is kept within its quota's min and never
  preempted);
* a policy/v1 **PodDisruptionBudget** of its namespace selects it and allows no disruption:
  its ``status.disruptionsAllowed`` is 0, or, without a status, ``maxUnavailable`` is 0 (or
  0%) or ``minAvailable`` is 100% or at least the number of running pods it selects (the
  Eviction API would refuse the eviction: Kubernetes, "Specifying a Disruption Budget for
  your Application").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from gangplan.adapters.kube.objects import KubeObject, Registry
from gangplan.adapters.kube.pods import PodInfo
from gangplan.adapters.kube.topology import match_labels
from gangplan.models import DisruptionBudget

__all__ = [
    "ANN_GANGPLAN_PREEMPTIBLE",
    "ANN_VOLCANO_PREEMPTABLE",
    "LABEL_KOORD_PREEMPTIBLE",
    "Disruptions",
]

ANN_GANGPLAN_PREEMPTIBLE = "gangplan.io/preemptible"
ANN_VOLCANO_PREEMPTABLE = "volcano.sh/preemptable"
LABEL_KOORD_PREEMPTIBLE = "quota.scheduling.koordinator.sh/preemptible"


def _selects(selector: Any, labels: dict[str, str]) -> bool:
    """Does a ``V1LabelSelector`` select a pod with ``labels``? (An empty selector selects
    every pod of the namespace, as policy/v1 PodDisruptionBudget says.)"""
    if selector is None:
        return False
    as_dict = {
        "matchLabels": selector.match_labels,
        "matchExpressions": [
            {"key": r.key, "operator": r.operator, "values": r.values}
            for r in selector.match_expressions or ()
        ],
    }
    return match_labels(as_dict, labels)


def _percent(value: Any) -> float | None:
    text = str(value)
    if text.endswith("%"):
        try:
            return float(text[:-1])
        except ValueError:
            return None
    return None


def _allows_none(pdb: Any, selected: int) -> bool:
    """Does the budget allow no disruption of the ``selected`` running pods?"""
    status = pdb.status
    if status is not None and status.disruptions_allowed is not None:
        return int(status.disruptions_allowed) <= 0
    spec = pdb.spec
    if spec is None:
        return False
    if spec.max_unavailable is not None:
        pct = _percent(spec.max_unavailable)
        return pct == 0 if pct is not None else str(spec.max_unavailable) == "0"
    if spec.min_available is not None:
        pct = _percent(spec.min_available)
        if pct is not None:
            return pct >= 100
        try:
            return int(str(spec.min_available)) >= selected
        except ValueError:
            return False
    return False


def _allowed(pdb: Any, selected: int) -> int | None:
    """The disruptions ``pdb`` allows over ``selected`` running pods
    (:meth:`Disruptions.budgets`); None: it says nothing usable."""
    status = pdb.status
    if status is not None and status.disruptions_allowed is not None:
        return int(status.disruptions_allowed)
    spec = pdb.spec
    for value, is_min in ((spec.min_available, True), (spec.max_unavailable, False)):
        if value is None:
            continue
        pct = _percent(value)
        try:
            n = math.ceil(pct * selected / 100) if pct is not None else int(str(value))
        except ValueError:
            return None
        return selected - n if is_min else n
    return None


class Disruptions:
    """The PodDisruptionBudgets of a dump, to say which running pods are preemptible."""

    def __init__(self, reg: Registry):
        self._budgets: list[KubeObject] = list(reg.of("policy", "PodDisruptionBudget"))

    def mark(self, pods: Iterable[PodInfo]) -> None:
        """Set ``preemptible`` (and why not) on every running pod of ``pods``."""
        running = [p for p in pods if p.node_name]
        for pod in running:
            why = self.own(pod)
            if why is not None:
                pod.preemptible, pod.preemptible_why = False, why
        for obj in self._budgets:
            spec = obj.model.spec
            if spec is None:
                continue
            chosen = [
                p
                for p in running
                if p.namespace == obj.namespace and _selects(spec.selector, p.labels)
            ]
            if chosen and _allows_none(obj.model, len(chosen)):
                for p in chosen:
                    if p.preemptible:
                        p.preemptible = False
                        p.preemptible_why = (
                            f"PodDisruptionBudget {obj.namespace}/{obj.name} allows no disruption"
                        )

    def budgets(self, running: Iterable[tuple[str, str, dict[str, str]]]) -> list[DisruptionBudget]:
        """The budgets that select some of ``running`` (``(namespace, name, labels)`` of the
        snapshot's running pods), as a move plan counts them: the pods each selects and the
        disruptions it allows now — its ``status.disruptionsAllowed``, else, without a
        status, from its spec over the running pods it selects (``minAvailable``: those pods
        less it; ``maxUnavailable``: it; a percentage of those pods, rounded up, as the
        disruption controller scales it). A budget that says nothing usable is left out."""
        pods = list(running)
        out: list[DisruptionBudget] = []
        for obj in self._budgets:
            spec = obj.model.spec
            if spec is None:
                continue
            chosen = [
                name
                for ns, name, labels in pods
                if ns == obj.namespace and _selects(spec.selector, labels)
            ]
            if not chosen:
                continue
            allowed = _allowed(obj.model, len(chosen))
            if allowed is not None:
                out.append(
                    DisruptionBudget(
                        name=obj.name,
                        namespace=obj.namespace,
                        pods=tuple(sorted(chosen)),
                        disruptions_allowed=max(0, allowed),
                    )
                )
        return out

    @staticmethod
    def own(pod: PodInfo) -> str | None:
        """Why ``pod`` itself says it tolerates no disruption (its annotations or label),
        None if it does not say so."""
        if pod.annotations.get(ANN_GANGPLAN_PREEMPTIBLE) == "false":
            return f"annotation {ANN_GANGPLAN_PREEMPTIBLE}: false"
        if pod.annotations.get(ANN_VOLCANO_PREEMPTABLE) == "false":
            return f"annotation {ANN_VOLCANO_PREEMPTABLE}: false"
        if pod.labels.get(LABEL_KOORD_PREEMPTIBLE) == "false":
            return f"label {LABEL_KOORD_PREEMPTIBLE}: false"
        return None
