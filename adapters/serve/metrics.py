"""Prometheus metrics of the live loop (``prometheus-client``), served on ``/metrics``.

Named after kube-scheduler's where one exists (``scheduler_schedule_attempts_total``,
``scheduler_scheduling_attempt_duration_seconds``, ``scheduler_pending_pods``), with the
prefix ``gangplan_`` and counted per gang, not per pod:

=============================================  ================================================
``gangplan_schedule_attempts_total{result}``   gangs tried per cycle: ``scheduled`` (admitted),
                                               ``unschedulable`` (pending with a reason),
                                               ``error`` (an apply failed)
``gangplan_scheduling_attempt_duration_seconds  a gang's attempt, snapshot to applied (the
{result}``                                     cycle's time, per gang tried)
``gangplan_pending_gangs{queue}``              gangs pending after the cycle, per queue
``gangplan_cycle_duration_seconds``            one cycle, end to end
``gangplan_snapshot_duration_seconds``         building the snapshot from the cache
``gangplan_solve_duration_seconds``            ``solve_cycle``
``gangplan_solve_gap``                         the first optimised score entry's relative gap
``gangplan_binds_total`` / ``_bind_failures``  pods applied (ungated or bound) / failed calls
``gangplan_takebacks_total{reason}``           gangs the watchdog took back: ``timeout``,
                                               ``broken`` (a pod or node gone, a rejection)
``gangplan_assumed_expired_total``             ledger entries that expired (``assume_ttl``)
``gangplan_gangs_in_flight``                   gangs being applied (the assumed ledger)
``gangplan_queue_placeable_gpus{queue}``       GPUs the next cycle could still give the
                                               queue: free GPUs on nodes its gangs may use,
                                               within its max and its fair target
``gangplan_leader``                            1 on the replica that holds the Lease
``gangplan_cycle_errors_total``                cycles that raised (logged with the
                                               traceback; the loop goes on)
=============================================  ================================================
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gangplan.models import Plan

__all__ = ["Metrics"]

_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)


class Metrics:
    """The metrics of one loop, in their own registry (``registry``)."""

    def __init__(self, registry: CollectorRegistry | None = None):
        r = self.registry = registry or CollectorRegistry()
        self.attempts = Counter(
            "gangplan_schedule_attempts", "Gangs tried, by result", ["result"], registry=r
        )
        self.attempt_seconds = Histogram(
            "gangplan_scheduling_attempt_duration_seconds",
            "A gang's scheduling attempt, snapshot to applied",
            ["result"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.pending = Gauge(
            "gangplan_pending_gangs", "Gangs pending after the cycle", ["queue"], registry=r
        )
        self.cycle_seconds = Histogram(
            "gangplan_cycle_duration_seconds", "One cycle", buckets=_BUCKETS, registry=r
        )
        self.snapshot_seconds = Histogram(
            "gangplan_snapshot_duration_seconds",
            "Building the snapshot from the cache",
            buckets=_BUCKETS,
            registry=r,
        )
        self.solve_seconds = Histogram(
            "gangplan_solve_duration_seconds", "solve_cycle", buckets=_BUCKETS, registry=r
        )
        self.gap = Gauge("gangplan_solve_gap", "Relative gap of the first score entry", registry=r)
        self.binds = Counter("gangplan_binds", "Pods ungated or bound", registry=r)
        self.bind_failures = Counter(
            "gangplan_bind_failures", "Failed patch or bind calls", registry=r
        )
        self.takebacks = Counter(
            "gangplan_takebacks", "Gangs taken back whole", ["reason"], registry=r
        )
        self.expired = Counter("gangplan_assumed_expired", "Assumed pods that expired", registry=r)
        self.in_flight = Gauge("gangplan_gangs_in_flight", "Gangs being applied", registry=r)
        self.placeable = Gauge(
            "gangplan_queue_placeable_gpus",
            "GPUs the next cycle could still give the queue",
            ["queue"],
            registry=r,
        )
        self.leader = Gauge("gangplan_leader", "1 if this replica leads", registry=r)
        self.cycle_errors = Counter(
            "gangplan_cycle_errors", "Cycles that raised an exception", registry=r
        )
        self._queues: set[str] = set()

    def observe_solve(self, seconds: float, plan: Plan) -> None:
        """One ``solve_cycle``: its duration, and the gap of the first score entry that has
        one (0 when none has)."""
        self.solve_seconds.observe(seconds)
        tiers = plan.summary.tiers if plan.summary else ()
        gaps = [t.gap for t in tiers if t.gap]
        self.gap.set(gaps[0] if gaps else 0.0)

    def set_pending(self, per_queue: dict[str, int], placeable: dict[str, float]) -> None:
        """Set the per-queue gauges; queues no longer seen go to 0."""
        for q in self._queues - set(per_queue):
            self.pending.labels(queue=q).set(0)
        for q, n in per_queue.items():
            self.pending.labels(queue=q).set(n)
        for q, g in placeable.items():
            self.placeable.labels(queue=q).set(g)
        self._queues |= set(per_queue)
