"""Priorities of pods and gangs: ``PriorityClass`` and Kueue ``WorkloadPriorityClass`` values.

A pod's priority is its ``spec.priority`` when set, else the value of its
``priorityClassName``, else the value of the ``globalDefault`` PriorityClass, else 0 — the
API server's admission (Kubernetes "Pod Priority and Preemption"). The two built-in classes
``system-cluster-critical`` (2,000,000,000) and ``system-node-critical`` (2,000,001,000) need
no object in the dump. A class the dump does not hold counts 0 and is noted.

A PriorityClass's ``preemptionPolicy`` (``PreemptLowerPriority``, the default, or
``Never``: scheduling.k8s.io/v1) is what the API server copies into a pod's
``spec.preemptionPolicy``; a gang whose pods say ``Never`` waits and never preempts.
"""

from __future__ import annotations

from gangplan.adapters.kube.objects import Registry
from gangplan.adapters.kube.summary import REASON_ASSUMED, ReadSummary

__all__ = ["SYSTEM_CLASSES", "Priorities"]

SYSTEM_CLASSES = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}


class Priorities:
    """The PriorityClasses and WorkloadPriorityClasses of one dump, by name."""

    def __init__(self, reg: Registry, summary: ReadSummary):
        self._summary = summary
        self._classes: dict[str, int] = {}
        self._policies: dict[str, str] = {}
        self._default: int | None = None
        self._default_policy: str | None = None
        for obj in reg.of("scheduling.k8s.io", "PriorityClass"):
            self._classes[obj.name] = obj.model.value
            if obj.model.preemption_policy:
                self._policies[obj.name] = obj.model.preemption_policy
            if obj.model.global_default:
                self._default = obj.model.value
                self._default_policy = obj.model.preemption_policy
        self._workload_classes: dict[str, int] = {
            o.name: o.model.value for o in reg.of("kueue.x-k8s.io", "WorkloadPriorityClass")
        }

    def of(
        self,
        value: int | None,
        class_name: str | None,
        where: str,
        *,
        source: str = "",
        kind: str = "",
        who: str = "",
    ) -> int:
        """The priority of ``value`` (set directly) or ``class_name``; a class not in the dump
        is noted against ``source``/``kind``/``who`` at field ``where`` and counts 0."""
        if value is not None:
            return int(value)
        if not class_name:
            return self._default or 0
        if class_name in self._classes:
            return self._classes[class_name]
        if class_name in SYSTEM_CLASSES:
            return SYSTEM_CLASSES[class_name]
        self._summary.note(
            source,
            kind,
            who,
            REASON_ASSUMED,
            f"{where}: PriorityClass {class_name!r} is not in the dump: priority 0",
        )
        return 0

    def policy(self, policy: str | None, class_name: str | None) -> str | None:
        """A pod's preemption policy: its own ``spec.preemptionPolicy`` when set, else its
        class's (the ``globalDefault`` class's without a class name); None: not said."""
        if policy:
            return policy
        if not class_name:
            return self._default_policy
        return self._policies.get(class_name)

    def workload_class(self, name: str) -> int | None:
        """The value of Kueue WorkloadPriorityClass ``name``; None if the dump lacks it."""
        return self._workload_classes.get(name)
