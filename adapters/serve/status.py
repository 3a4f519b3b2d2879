"""Status where users look: Events, the pod's ``PodScheduled`` condition, PodGroup status.

* **Events** (``events.k8s.io/v1``, as kube-scheduler writes them): ``FailedScheduling``
  (Warning) on each pod of a pending gang with the plan's reason; ``Scheduled`` (Normal) on
  each pod of an admitted gang; ``GangTakenBack`` (Warning) when the watchdog takes a gang
  back. The same reason and note on the same pod is not posted again within
  ``interval_s`` (deduplicated and rate-limited, as client-go's event correlator does).
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
from typing import Any

from gangplan.adapters.serve.api import KINDS, ApiError, KubeApi, Obj
from gangplan.adapters.serve.clock import Clock, rfc3339, rfc3339_micro

__all__ = ["Recorder"]

EVENTS = KINDS["events.events.k8s.io"]
PODS = KINDS["pods"]


class Recorder:
    """Writes Events and status through the port for one replica.

    ``controller``: the Events' ``reportingController`` (``gangplan.io/<scheduler>``);
    ``instance``: ``reportingInstance`` (this replica's identity).
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
    ):
        self.api = api
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
