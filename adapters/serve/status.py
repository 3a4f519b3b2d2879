"""Status where users look: Events, the pod's ``PodScheduled`` condition, PodGroup status.

* **Events** (``events.k8s.io/v1``, as kube-scheduler writes them), worded here and nowhere
  else: ``FailedScheduling`` (Warning) on each pod of a pending gang with the plan's reason
  (:meth:`Recorder.unschedulable`); ``Scheduled`` (Normal) on each pod applied
  (:meth:`Recorder.scheduled`); ``GangTakenBack`` (Warning) when the watchdog takes a gang
  back (:meth:`Recorder.taken_back`); ``PreemptionStopped`` (Warning) on a preemptor's pods
  when its victims could not all be evicted (:meth:`Recorder.preemption_stopped`);
  ``RecoveredPlanRefused`` (Warning) on the pods of a plan a new leader drops
  (:meth:`Recorder.recovered_refused`). The same
  reason and note on the same pod is not posted again within ``interval_s`` (deduplicated
  and rate-limited, as client-go's event correlator does).
* **PodScheduled** (mode bind, where gangplan is the pod's scheduler): ``status: "False"``,
  reason ``Unschedulable`` (the reason cluster autoscalers look for) and the plan's message,
  written only when it changes.
* **PodGroup status**, per flavour, written only when it changes: Volcano — a condition of
  type ``Unschedulable`` (``status: "True"``, reason ``NotEnoughResources``) or
  ``Scheduled``; scheduler-plugins — ``phase`` ``Pending`` or ``Scheduled``; upstream
  ``scheduling.k8s.io`` PodGroup — the condition ``PodGroupInitiallyScheduled``
  (``False``/``Unschedulable`` with the message, or ``True``; once True it is left alone,
  as the API documents it terminal).

A write that fails is counted (:attr:`Recorder.failures`) and never fails a cycle.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any, Literal

from gangplan.adapters.serve.api import KINDS, ApiError, KubeApi, Obj
from gangplan.adapters.serve.clock import Clock, rfc3339, rfc3339_micro
from gangplan.adapters.serve.snapshot import Built
from gangplan.models import GangOutcome, PendingReason, Plan

__all__ = ["Recorder"]

EVENTS = KINDS["events.events.k8s.io"]
PODS = KINDS["pods"]
Lookup = Callable[[str, str, str], Obj | None]
"""``(kind key, namespace, name) -> object or None``: the cache's :meth:`get
<gangplan.adapters.serve.cache.Cache.get>`."""


class Recorder:
    """Writes Events and status through the port for one replica.

    ``controller``: the Events' ``reportingController`` (``gangplan.io/<scheduler>``);
    ``instance``: ``reportingInstance`` (this replica's identity); ``mode``: the loop's
    (``gate`` or ``bind``: how a ``Scheduled`` Event words what was done, and whether a pending
    pod's ``PodScheduled`` condition is ours to write).
    """

    def __init__(
        self,
        api: KubeApi,
        clock: Clock,
        *,
        controller: str,
        instance: str,
        interval_s: float = 60.0,
        dry_run: bool = False,
        mode: Literal["gate", "bind"] = "gate",
    ):
        self.api = api
        self.mode = mode
        self.clock = clock
        self.controller = controller
        self.instance = instance
        self.interval_s = interval_s
        self.dry_run = dry_run
        self.sent: dict[tuple[str, str, str], float] = {}
        self.posted = 0
        self.suppressed = 0
        self.failures = 0
        self._seq = itertools.count()

    def prune(self) -> None:
        """Forget deduplication entries older than the interval (keeps memory bounded)."""
        now = self.clock.now()
        for k in [k for k, t in self.sent.items() if now - t >= self.interval_s]:
            del self.sent[k]

    # ------------------------------------------------------------------ the loop's words

    def scheduled(self, pod: Obj, node: str, gang: str) -> bool:
        """``Scheduled`` (Normal): the pod of ``gang`` was ungated and pinned to (mode gate)
        or bound to (mode bind) ``node``."""
        verb = "ungated and pinned to" if self.mode == "gate" else "bound to"
        return self.event(
            pod, "Normal", "Scheduled", "Binding", f"gangplan {verb} {node} (gang {gang})"
        )

    def unschedulable(self, pods: Iterable[Obj], gang: str, reason: PendingReason | None) -> None:
        """``FailedScheduling`` (Warning) on each pod of the pending ``gang``, with the plan's
        reason; in mode bind also their ``PodScheduled=False`` condition."""
        note = f"gang {gang}: {reason.kind}: {reason.message}" if reason else "not placed"
        for raw in pods:
            self.event(raw, "Warning", "FailedScheduling", "Scheduling", note)
            if self.mode == "bind":
                self.pod_unschedulable(raw, note)

    def taken_back(self, pods: Iterable[Obj], gang: str, delay_s: float, why: str) -> None:
        """``GangTakenBack`` (Warning) on each pod of ``gang``: taken back whole, why, and
        the back-off before it is planned again."""
        note = f"gang {gang} taken back whole and re-planned (back-off {delay_s:g} s): {why}"
        for raw in pods:
            self.event(raw, "Warning", "GangTakenBack", "Scheduling", note)

    def preemption_stopped(self, pods: Iterable[Obj], gang: str, what: str) -> None:
        """``PreemptionStopped`` (Warning) on each pod of ``gang``: its victims were not all
        evicted (``what``: :meth:`~gangplan.adapters.serve.evict.EvictOutcome.message`)."""
        note = f"gangplan stopped preempting for gang {gang}: {what}"
        for raw in pods:
            self.event(raw, "Warning", "PreemptionStopped", "Preempting", note)

    def recovered_refused(self, pods: Iterable[Obj], gang: str, why: str) -> str:
        """``RecoveredPlanRefused`` (Warning) on each pod that carries the plan annotation of
        ``gang`` a new leader would not take up (``why``); returns the note, for the log."""
        note = f"recovered plan of gang {gang} dropped: {why}"
        for raw in pods:
            self.event(raw, "Warning", "RecoveredPlanRefused", "Scheduling", note)
        return note

    def plan_status(self, plan: Plan, built: Built, lookup: Lookup) -> dict[str, int]:
        """Every gang's status after ``plan``: its gang object's (:meth:`gang_outcome`), and
        for a pending gang :meth:`unschedulable` on its pods. Returns the pending gangs per
        queue (every queue of the snapshot, 0 where none)."""
        snap = built.snapshot
        pending = {q.name: 0 for q in snap.queues}
        for outcome in plan.gangs:
            ref = built.gang_objects.get(outcome.key)
            obj = lookup(*ref) if ref is not None else None
            if ref is not None and obj is not None:
                self.gang_outcome(ref[0], obj, outcome)
            gang = snap.gang_by_key.get(outcome.key)
            if outcome.admitted or gang is None:
                continue
            pending[gang.queue] = pending.get(gang.queue, 0) + 1
            names = [role.pod_name(gang.name, i) for role in gang.roles for i in range(role.count)]
            pods = [raw for n in names if (raw := lookup("pods", gang.namespace, n)) is not None]
            self.unschedulable(pods, outcome.key, outcome.reason)
        return pending

    def gang_outcome(self, kind_key: str, obj: Obj, outcome: GangOutcome) -> bool:
        """:meth:`gang_status` for ``outcome``: admitted, or pending with its reason's message."""
        reason = outcome.reason
        message = "" if outcome.admitted or reason is None else reason.message
        return self.gang_status(kind_key, obj, outcome.admitted, message)

    # ------------------------------------------------------------------ writing

    def event(self, pod: Obj, etype: str, reason: str, action: str, note: str) -> bool:
        """Post one Event about ``pod``; False if deduplicated or it failed."""
        meta = pod.get("metadata") or {}
        ns, name, uid = meta.get("namespace") or "default", meta.get("name"), meta.get("uid")
        note = note[:1024]  # the API's limit on note
        key = (str(uid or name), reason, note)
        now = self.clock.now()
        last = self.sent.get(key)
        if last is not None and now - last < self.interval_s:
            self.suppressed += 1
            return False
        self.sent[key] = now
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{int(now * 1e6):x}{next(self._seq):x}", "namespace": ns},
            "eventTime": rfc3339_micro(now),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "type": etype,
            "note": note,
            "regarding": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": ns,
                "name": name,
                **({"uid": uid} if uid else {}),
            },
        }
        return self._write(lambda: self.api.create(EVENTS, ns, body))

    def _write(self, call: Any) -> bool:
        if self.dry_run:
            return False
        try:
            call()
        except ApiError:
            self.failures += 1
            return False
        self.posted += 1
        return True

    def pod_unschedulable(self, pod: Obj, message: str) -> bool:
        """``PodScheduled=False``, reason ``Unschedulable`` (when not already so)."""
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        conds = list(status.get("conditions") or [])
        for c in conds:
            if (
                c.get("type") == "PodScheduled"
                and c.get("status") == "False"
                and c.get("reason") == "Unschedulable"
                and c.get("message") == message
            ):
                return False
        new = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": rfc3339(self.clock.now()),
        }
        body = {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},
            "status": {"conditions": [c for c in conds if c.get("type") != "PodScheduled"] + [new]},
        }
        ns, name = meta.get("namespace"), str(meta.get("name"))
        return self._write(lambda: self.api.patch(PODS, ns, name, body, status=True))

    def gang_status(self, kind_key: str, obj: Obj, admitted: bool, message: str) -> bool:
        """The gang object's status in its flavour's terms (module docstring)."""
        status = obj.get("status") or {}
        now = rfc3339(self.clock.now())
        patch: Obj | None = None
        if kind_key == "podgroups.scheduling.volcano.sh":
            ctype = "Scheduled" if admitted else "Unschedulable"
            reason = "" if admitted else "NotEnoughResources"
            conds = [c for c in status.get("conditions") or []]
            if any(
                c.get("type") == ctype and c.get("message", "") == message for c in conds
            ) and not any(
                c.get("type") == ("Unschedulable" if admitted else "Scheduled") for c in conds
            ):
                return False
            keep = [c for c in conds if c.get("type") not in ("Scheduled", "Unschedulable")]
            cond = {"type": ctype, "status": "True", "lastTransitionTime": now, "message": message}
            if reason:
                cond["reason"] = reason
            patch = {"status": {"conditions": [*keep, cond]}}
        elif kind_key in ("podgroups.scheduling.x-k8s.io", "podgroups.scheduling.sigs.k8s.io"):
            phase = "Scheduled" if admitted else "Pending"
            if status.get("phase") == phase:
                return False
            patch = {"status": {"phase": phase}}
        elif kind_key == "podgroups.scheduling.k8s.io":
            conds = [c for c in status.get("conditions") or []]
            mine = next((c for c in conds if c.get("type") == "PodGroupInitiallyScheduled"), None)
            if mine is not None and mine.get("status") == "True":
                return False  # terminal
            want = "True" if admitted else "False"
            if mine is not None and mine.get("status") == want and mine.get("message") == message:
                return False
            cond = {
                "type": "PodGroupInitiallyScheduled",
                "status": want,
                "reason": "Scheduled" if admitted else "Unschedulable",
                "message": message,
                "lastTransitionTime": now,
            }
            keep = [c for c in conds if c.get("type") != "PodGroupInitiallyScheduled"]
            patch = {"status": {"conditions": [*keep, cond]}}
        if patch is None:
            return False
        meta = obj.get("metadata") or {}
        kind = KINDS[kind_key]
        ns, name = meta.get("namespace"), str(meta.get("name"))
        return self._write(lambda: self.api.patch(kind, ns, name, patch, status=True))
