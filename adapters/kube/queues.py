"""Queues from Kubernetes objects, and the queue of each gang.

========================================  ==================================================
Kubernetes                                gangplan ``Queue``
========================================  ==================================================
Volcano ``Queue``                         ``weight`` (0 -> 1, Volcano's webhook default),
                                          ``deserved`` (else ``guarantee.resource``) as
                                          guaranteed, ``capability`` as max
Kueue ``ClusterQueue``                    ``fairSharing.weight`` (a quantity, default 1);
                                          guaranteed = nominal quotas summed over flavors;
                                          max = nominal + ``borrowingLimit`` (no cohort: the
                                          nominal quota, as such a queue cannot borrow; a
                                          flavor without a borrowing limit: uncapped)
scheduler-plugins ``ElasticQuota``        queue ``namespace/name``: ``min`` as guaranteed,
                                          ``max`` as max; every pod of the namespace is
                                          charged to it (capacity scheduling)
========================================  ==================================================

Preemption policies (``Queue.preemption``, in force with preemption on): a ClusterQueue's
``spec.preemption.withinClusterQueue`` ``LowerPriority`` is ``within_queue:
lower_priority`` (``LowerOrNewerEqualPriority`` too, noted: the newer-equal part is not
modelled), ``reclaimWithinCohort`` ``LowerPriority`` / ``Any`` is ``reclaim:
lower_priority`` / ``any`` (Kueue's defaults, ``Never``, are ours); ``borrowWithinCohort`` is
noted, not mapped. A Volcano Queue's ``reclaimable: false`` is ``reclaimable: false``;
whether Volcano preempts or reclaims at all is its scheduler's ``actions`` setting, which a
dump does not hold: its queues keep ``within_queue`` and ``reclaim`` at ``never``.

A gang's queue is, in this order: its gang object's (Volcano ``spec.queue``, Kubeflow
``schedulingPolicy.queue``), the pod's ``scheduling.volcano.sh/queue-name`` annotation, its
Kueue ``kueue.x-k8s.io/queue-name`` label (LocalQueue -> ClusterQueue), the ElasticQuota of
its namespace, else the default. A queue named but not in the dump is created with weight 1
and no limits, and listed in the notes.

Kueue injects its ResourceFlavor's ``nodeLabels`` and ``tolerations`` into the pods it admits;
:meth:`QueueBook.apply_flavors` does the same for a ClusterQueue's flavors (several flavors:
any of them, as required node affinity terms).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import ValidationError

from gangplan.adapters.kube import workloads as wl
from gangplan.adapters.kube.objects import KubeObject, Registry
from gangplan.adapters.kube.pods import PodInfo
from gangplan.adapters.kube.snapshot import Draft
from gangplan.adapters.kube.summary import (
    REASON_ASSUMED,
    REASON_FIELD_IGNORED,
    REASON_INVALID,
    REASON_NOT_MAPPED,
    ReadSummary,
)
from gangplan.models import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Queue,
    Toleration,
    format_quantity,
)
from gangplan.models.quantity import QuantityError, parse_quantity, to_base_units

__all__ = ["QueueBook", "quantities"]


def quantities(res: dict[str, int]) -> dict[str, Any]:
    """Base-unit amounts as canonical quantity strings (what the models parse back)."""
    return {k: format_quantity(k, int(v)) for k, v in res.items()}


_q = quantities


class QueueBook:
    """The queues of a dump, and the rules that give a gang its queue."""

    def __init__(self, reg: Registry, summary: ReadSummary):
        self.reg = reg
        self.summary = summary
        self.queues: dict[str, dict[str, Any]] = {}
        self.sources: dict[str, str] = {}
        self.origins: dict[str, tuple[str, str, str]] = {}
        """queue name -> (source, kind, name) of the object it comes from, for the summary"""
        self.assumed: dict[str, str] = {}
        self._read()

    def _note(self, obj: KubeObject, reason: str, detail: str) -> None:
        self.summary.note(obj.source, obj.display_kind, obj.key, reason, detail)

    def _skip(self, obj: KubeObject, reason: str, detail: str = "") -> None:
        self.summary.skip(obj.source, obj.display_kind, obj.key, reason, detail)

    def finish(self) -> list[Draft]:
        """Every queue, the assumed ones added (and noted), sorted by name, each as a
        :class:`~gangplan.adapters.kube.snapshot.Draft` naming the object it comes from (an
        assumed queue: the object that names it)."""
        for name, source in self.assumed.items():
            if name not in self.queues:
                self.queues[name] = {"name": name}
                self.origins[name] = (source, "Queue", name)
                self.summary.note(
                    source,
                    "Queue",
                    name,
                    REASON_ASSUMED,
                    "named but not in the dump: weight 1, no guaranteed, no max",
                )
        return [Draft(self.queues[name], *self.origins[name]) for name in sorted(self.queues)]

    def _define(self, obj: KubeObject, name: str, q: dict[str, Any]) -> None:
        if name in self.queues:
            self._note(
                obj,
                REASON_NOT_MAPPED,
                f"queue name {name!r} is already defined by {self.sources[name]}: not used",
            )
            return
        try:
            Queue.model_validate({"name": name, **q})
        except ValidationError as err:
            e = err.errors()[0]
            field = ".".join(str(x) for x in e["loc"])
            self._skip(obj, REASON_INVALID, f"{field}: {e['msg']} (got {e.get('input')!r})")
            return
        self.queues[name] = {"name": name, **q}
        self.sources[name] = f"{obj.display_kind} {obj.key}"
        self.origins[name] = (obj.source, obj.display_kind, obj.key)

    def _read(self) -> None:
        for obj in self.reg.of("scheduling.volcano.sh", "Queue"):
            spec = obj.model.spec
            guaranteed = spec.deserved or (spec.guarantee.resource if spec.guarantee else {})
            self._define(
                obj,
                obj.name,
                {
                    "weight": spec.weight or 1,
                    "guaranteed": _q(guaranteed),
                    "max": _q(spec.capability),
                    "preemption": {"reclaimable": spec.reclaimable is not False},
                },
            )
            meta = obj.model.metadata
            hier = [
                k
                for k in ("volcano.sh/hierarchy", "volcano.sh/hierarchy-weights")
                if k in meta.annotations
            ]
            if hier or spec.parent:
                self._note(
                    obj,
                    REASON_NOT_MAPPED,
                    f"{', '.join(hier) or 'spec.parent'}: hierarchical queues are not modelled yet",
                )
            if obj.model.status.state in ("Closed", "Closing"):
                self._note(
                    obj,
                    REASON_NOT_MAPPED,
                    f"status.state {obj.model.status.state}: the queue is read as open",
                )
        self.flavors = {o.name: o for o in self.reg.of("kueue.x-k8s.io", "ResourceFlavor")}
        for f in self.flavors.values():
            if f.model.spec.node_taints:
                self._note(
                    f,
                    REASON_NOT_MAPPED,
                    "spec.nodeTaints: not mapped (the nodes' own taints are read from the Nodes)",
                )
        self.cq_flavors: dict[str, list[str]] = {}
        for obj in self.reg.of("kueue.x-k8s.io", "ClusterQueue"):
            q, flavors = self._cluster_queue(obj)
            if q is not None:
                self._define(obj, obj.name, q)
                self.cq_flavors[obj.name] = flavors
        self.local_queues: dict[tuple[str, str], str] = {
            (o.namespace, o.name): o.model.spec.cluster_queue
            for o in self.reg.of("kueue.x-k8s.io", "LocalQueue")
        }
        self.eq_by_ns: dict[str, str] = {}
        for group in ("scheduling.x-k8s.io", "scheduling.sigs.k8s.io"):
            for obj in self.reg.of(group, "ElasticQuota"):
                name = f"{obj.namespace}/{obj.name}"
                self._define(
                    obj, name, {"guaranteed": _q(obj.model.spec.min), "max": _q(obj.model.spec.max)}
                )
                if obj.namespace in self.eq_by_ns:
                    self._note(
                        obj,
                        REASON_NOT_MAPPED,
                        f"namespace {obj.namespace} already has ElasticQuota "
                        f"{self.eq_by_ns[obj.namespace]}",
                    )
                else:
                    self.eq_by_ns[obj.namespace] = name

    def _cluster_queue(self, obj: KubeObject) -> tuple[dict[str, Any] | None, list[str]]:
        spec = obj.model.spec
        nominal: dict[str, int] = defaultdict(int)
        borrow: dict[str, int | None] = {}
        flavors: list[str] = []
        for gi, rg in enumerate(spec.resource_groups):
            for fi, fl in enumerate(rg.flavors):
                flavors.append(fl.name)
                for ri, r in enumerate(fl.resources):
                    where = f"spec.resourceGroups[{gi}].flavors[{fi}].resources[{ri}]"
                    try:
                        nominal[r.name] += to_base_units(r.name, r.nominal_quota)
                        if r.borrowing_limit is None:
                            borrow[r.name] = None
                        elif r.name not in borrow or borrow[r.name] is not None:
                            borrow[r.name] = (borrow.get(r.name) or 0) + to_base_units(
                                r.name, r.borrowing_limit
                            )
                    except QuantityError as err:
                        self._skip(obj, REASON_INVALID, f"{where}: {err}")
                        return None, []
        weight = 1.0
        if spec.fair_sharing is not None and spec.fair_sharing.weight is not None:
            try:
                weight = float(parse_quantity(spec.fair_sharing.weight))
            except QuantityError as err:
                self._note(obj, REASON_ASSUMED, f"spec.fairSharing.weight: {err}; weight 1")
        cohort = obj.model.cohort_of
        maxes: dict[str, int] = {}
        for res, nom in nominal.items():
            if not cohort:
                maxes[res] = nom  # a ClusterQueue without a cohort cannot borrow
            elif borrow.get(res) is not None:
                maxes[res] = nom + (borrow[res] or 0)
        return {
            "weight": weight,
            "guaranteed": _q({k: v for k, v in nominal.items() if v}),
            "max": _q(maxes),
            "preemption": self._kueue_preemption(obj),
        }, flavors

    def _kueue_preemption(self, obj: KubeObject) -> dict[str, str]:
        """A ClusterQueue's ``spec.preemption`` as our policy (module docstring)."""
        pre = obj.model.spec.preemption
        if pre is None:
            return {}
        out: dict[str, str] = {}
        within = pre.within_cluster_queue or "Never"
        if within == "LowerOrNewerEqualPriority":
            self._note(
                obj,
                REASON_ASSUMED,
                "spec.preemption.withinClusterQueue LowerOrNewerEqualPriority: read as "
                "LowerPriority (equal priorities are never preempted here)",
            )
        if within in ("LowerPriority", "LowerOrNewerEqualPriority"):
            out["within_queue"] = "lower_priority"
        reclaim = {"LowerPriority": "lower_priority", "Any": "any"}.get(
            pre.reclaim_within_cohort or "Never"
        )
        if reclaim is not None:
            out["reclaim"] = reclaim
        if pre.borrow_within_cohort is not None:
            self._note(obj, REASON_NOT_MAPPED, "spec.preemption.borrowWithinCohort: not modelled")
        return out

    def kueue_queue(self, pod: PodInfo | None, ns: str, lq: str, source: str) -> str:
        cq = self.local_queues.get((ns, lq))
        if cq:
            if cq not in self.queues:
                self.assumed.setdefault(cq, source)
            return cq
        name = f"{ns}/{lq}"
        if name not in self.assumed:
            self.summary.note(
                source,
                "LocalQueue.kueue.x-k8s.io",
                name,
                REASON_ASSUMED,
                f"LocalQueue {name} is not in the dump: queue {name!r} assumed",
            )
        self.assumed.setdefault(name, source)
        return name

    def queue_for(
        self, pods: list[PodInfo], spec: wl.GroupSpec | None, default: str | None
    ) -> str | None:
        src = spec.source if spec else (pods[0].source if pods else "")
        if spec is not None and spec.queue:
            name = spec.queue
        elif any(p.queue_hint for p in pods):
            name = next(p.queue_hint for p in pods if p.queue_hint)
        elif spec is not None and spec.kueue_queue:
            return self.kueue_queue(None, spec.namespace, spec.kueue_queue, src)
        elif any(p.kueue_queue for p in pods):
            p0 = next(p for p in pods if p.kueue_queue)
            return self.kueue_queue(p0, p0.namespace, p0.kueue_queue or "", src)
        elif pods and pods[0].namespace in self.eq_by_ns:
            return self.eq_by_ns[pods[0].namespace]
        elif default is None:
            return None
        else:
            name = default
        if name not in self.queues:
            self.assumed.setdefault(name, src)
        return name

    def apply_flavors(self, role: dict[str, Any], pod: PodInfo, spec: wl.GroupSpec | None) -> None:
        """Kueue injects its ResourceFlavor's node labels and tolerations into the pods it
        admits; a ClusterQueue with several flavors lets a pod go to any of them."""
        lq = (spec.kueue_queue if spec else None) or pod.kueue_queue
        if not lq:
            return
        cq = self.local_queues.get((pod.namespace, lq))
        flavors = [
            self.flavors[f]
            for f in dict.fromkeys(self.cq_flavors.get(cq or "", []))
            if f in self.flavors
        ]
        if not flavors:
            return
        label_sets = [f.model.spec.node_labels for f in flavors]
        if all(label_sets):
            if len(label_sets) == 1:
                for k, v in label_sets[0].items():
                    role["node_selector"].setdefault(k, v)
            else:
                terms = [
                    NodeSelectorTerm(
                        match_expressions=tuple(
                            NodeSelectorRequirement(key=k, operator="In", values=(v,))
                            for k, v in sorted(ls.items())
                        )
                    )
                    for ls in label_sets
                ]
                existing: list[NodeSelectorTerm | None] = [
                    NodeSelectorTerm.model_validate(t) for t in role["node_affinity"]
                ] or [None]
                role["node_affinity"] = [
                    (
                        t
                        if e is None
                        else NodeSelectorTerm(
                            match_expressions=e.match_expressions + t.match_expressions
                        )
                    ).model_dump()
                    for e in existing
                    for t in terms
                ]
        tols = list(role["tolerations"])
        for f in flavors:
            for i, t in enumerate(f.model.spec.tolerations):
                try:
                    tol = Toleration(
                        key=t.get("key") or None,
                        operator=t.get("operator", "Equal"),
                        value=t.get("value", ""),
                        effect=t.get("effect") or None,
                    ).model_dump()
                except ValidationError as err:
                    self.summary.note(
                        f.source,
                        f.display_kind,
                        f.key,
                        REASON_FIELD_IGNORED,
                        f"spec.tolerations[{i}]: {err.errors()[0]['msg']}",
                    )
                    continue
                if tol not in tols:
                    tols.append(tol)
        role["tolerations"] = tols
