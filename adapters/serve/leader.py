"""Leader election through a ``coordination.k8s.io/v1`` Lease, over the API port.

The algorithm is client-go's ``leaderelection`` (``k8s.io/client-go/tools/leaderelection``):
a candidate creates the Lease, or takes it over when its holder has not renewed it within
``leaseDurationSeconds`` (as this candidate observed it: the time it last saw the record
change, never the holder's clock); the leader renews it every ``retry_period`` and gives up
leading when it could not renew within ``renew_deadline`` (so it stops writing before
another replica may take over: ``renew_deadline < lease_duration``). Every write is a PUT
guarded by the Lease's ``resourceVersion``, so two candidates cannot both win (409).
``leaseTransitions`` counts changes of holder.

The official client's ``kubernetes.leaderelection`` implements the same algorithm but runs
it in its own threads on the wall clock, blocking in ``run()``; here it is one
:meth:`LeaseElector.tick` per call on the loop's :class:`~gangplan.adapters.serve.clock.Clock`,
so a failover can be tested in fake time.
"""

from __future__ import annotations

import contextlib
from typing import Any

from gangplan.adapters.serve.api import KINDS, ApiError, KubeApi
from gangplan.adapters.serve.clock import Clock, parse_time, rfc3339_micro

__all__ = ["AlwaysLeader", "LeaseElector"]

LEASES = KINDS["leases.coordination.k8s.io"]


class AlwaysLeader:
    """No election (one replica, ``serve --once``, ``apply``)."""

    identity = "single"

    def tick(self) -> bool:
        return True

    @property
    def leading(self) -> bool:
        return True


class LeaseElector:
    """One candidate for the Lease ``namespace/name`` (see the module docstring)."""

    def __init__(
        self,
        api: KubeApi,
        clock: Clock,
        identity: str,
        *,
        namespace: str,
        name: str,
        lease_duration_s: float = 15.0,
        renew_deadline_s: float = 10.0,
        retry_period_s: float = 2.0,
    ):
        self.api, self.clock, self.identity = api, clock, identity
        self.namespace, self.name = namespace, name
        self.lease_duration_s = lease_duration_s
        self.renew_deadline_s = renew_deadline_s
        self.retry_period_s = retry_period_s
        self._leading = False
        self._last_renew = 0.0
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._last_try = float("-inf")

    @property
    def leading(self) -> bool:
        """Leading now: renewed within ``renew_deadline`` (checked on the clock)."""
        if self._leading and self.clock.now() - self._last_renew > self.renew_deadline_s:
            self._leading = False
        return self._leading

    def tick(self) -> bool:
        """Try to acquire or renew (at most once per ``retry_period``); whether it leads."""
        now = self.clock.now()
        if now - self._last_try < self.retry_period_s:
            return self.leading
        self._last_try = now
        with contextlib.suppress(ApiError):  # a failed renewal: leading lapses later
            self._try(now)
        return self.leading

    def _spec(self, now: float, acquired: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration_s),
            "acquireTime": acquired,
            "renewTime": rfc3339_micro(now),
            "leaseTransitions": transitions,
        }

    def _try(self, now: float) -> None:
        try:
            lease = self.api.get(LEASES, self.namespace, self.name)
        except ApiError as err:
            if err.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, rfc3339_micro(now), 0),
            }
            self.api.create(LEASES, self.namespace, body)
            self._won(now)
            return
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration_s)
        if holder and holder != self.identity and now - self._observed_at < duration:
            self._leading = False
            return
        transitions = int(spec.get("leaseTransitions") or 0)
        acquired = spec.get("acquireTime") or rfc3339_micro(now)
        if holder != self.identity:
            transitions += 1
            acquired = rfc3339_micro(now)
        new = {**lease, "spec": self._spec(now, acquired, transitions)}
        self.api.replace(LEASES, self.namespace, self.name, new)
        self._won(now)

    def _won(self, now: float) -> None:
        self._leading = True
        self._last_renew = now

    def release(self) -> None:
        """Give the Lease up on a clean shutdown (the other replica need not wait)."""
        if not self._leading:
            return
        try:
            lease = self.api.get(LEASES, self.namespace, self.name)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = {**lease["spec"], "holderIdentity": None, "leaseDurationSeconds": 1}
                spec = {k: v for k, v in spec.items() if v is not None}
                self.api.replace(LEASES, self.namespace, self.name, {**lease, "spec": spec})
        except ApiError:
            pass
        self._leading = False


def renew_time(lease: dict[str, Any]) -> float | None:
    """The Lease's ``renewTime`` in epoch seconds."""
    return parse_time((lease.get("spec") or {}).get("renewTime"))
