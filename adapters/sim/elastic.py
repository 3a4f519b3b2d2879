"""Elastic jobs in the simulator (``gangplan simulate --elastic``).

**Which jobs, what size.** With ``--elastic`` every job of two or more GPUs becomes an
elastic gang whose minimum is half its GPUs (rounded up). Elasticity is in pods, so the job
is cut into pods of equal size: pods of P GPUs (the trace's pod rule, P = the GPUs of its
largest pod) when its G GPUs are a multiple of P larger than P, else G pods of one GPU;
CPU and memory in proportion. The minimum is then ceil(pods / 2) pods. One-GPU jobs stay
as they are.

**Its rate follows its size** (work conserved): a job's remaining work is kept across
resizes (:meth:`~gangplan.adapters.sim.engine.RunningJob.set_rate`), and its rate is
linear in its size — ``pods / full pods`` times the spread factor
(:class:`~gangplan.adapters.sim.speed.SpreadSpeed`): perfect scaling, the simplest model and
an optimistic one (Pollux, Qiao et al., OSDI '21, and ElasticFlow, Gu et al., ASPLOS '23,
measure sublinear throughput for most models). The report names it.

**Growing and shrinking** are the cycle's decisions: each cycle's snapshot carries, for
every running elastic job below its full size, its growth gang
(:func:`gangplan.models.growth_gang`), which the placers admit like any gang when there is
room; and preemption is on for elastic jobs' pods only (every other running pod is not
preemptible), so a pending gang of higher priority in the same queue, or of a queue within
its guaranteed amount reclaiming from one above its own, may take back an elastic job's
pods above its minimum (queues whose policies are the default ``never`` get
``within_queue: lower_priority`` and ``reclaim: any``). A job whose every pod is evicted goes
back to pending with its remaining work.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gangplan.adapters.sim.jobs import SimJob
from gangplan.models import GPU_MILLI, Queue, QueuePreemption, Role

__all__ = ["EFFICIENCY", "elastic_job", "elastic_queue"]

EFFICIENCY = "linear: rate = pods / full pods (times the spread factor); work conserved"
"""The efficiency model the report names."""


def elastic_job(job: SimJob, gpu: str) -> SimJob:
    """``job`` as an elastic gang (module docstring); a one-GPU job unchanged."""
    g = job.gpus
    if g < 2:
        return job
    gang = job.gang
    per_pod = max(r.requests.get(gpu, 0) for r in gang.roles) // GPU_MILLI
    unit = per_pod if per_pod and g > per_pod and g % per_pod == 0 else 1
    pods = g // unit
    total: dict[str, int] = {}
    for r in gang.roles:
        for res, v in r.requests.items():
            total[res] = total.get(res, 0) + v * r.count
    requests = {res: v // pods for res, v in total.items()}
    requests[gpu] = unit * GPU_MILLI
    role = Role.model_construct(
        name="w",
        count=pods,
        min_member=None,
        requests=requests,
        topology=None,
        node_selector={},
        node_affinity=(),
        tolerations=(),
        pod_names=None,
    )
    least = math.ceil(pods / 2)
    new = gang.model_copy(update={"roles": (role,), "min_member": least if least < pods else None})
    return replace(job, gang=new)


def elastic_queue(q: Queue) -> Queue:
    """A queue whose preemption policy is the default, given ``within_queue:
    lower_priority`` and ``reclaim: any`` (only elastic pods are preemptible)."""
    if q.preemption.within_queue != "never" or q.preemption.reclaim != "never":
        return q
    policy = QueuePreemption(within_queue="lower_priority", reclaim="any")
    return q.model_copy(update={"preemption": policy})
