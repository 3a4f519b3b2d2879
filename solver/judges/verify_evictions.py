"""The verifier's checks of a plan's evictions (``docs/solver.md``, "Preemption"):
one ``check_*`` per rule, run by :func:`gangplan.solver.judges.verify.verify` with the others.

Like the rest of the verifier it imports only :mod:`gangplan.models` (whose
:class:`~gangplan.models.PreemptionRules` define who may evict whom) — no OR-Tools, no
placer. The rules:

* ``evictions`` — evictions only with preemption on; each names a running pod of the
  snapshot, once, on its own node and gang, for a pending gang of the snapshot;
* ``victim_whole`` — a victim is a whole running gang, or an elastic gang's pods above its
  ``min_member`` (the pods it keeps: 0, or at least ``min_member``);
* ``victim_priority`` — the gang an eviction names is admitted by the plan, has a pod on a
  node the victim held, and may evict it (strictly lower priority in its queue, or a reclaim
  from a borrowing queue);
* ``eviction_needed`` — no eviction for nothing (below);
* ``victim_disruption`` — no victim that does not tolerate disruption;
* ``victim_grace`` — no victim inside its grace period.

**No eviction for nothing**, exactly: put a victim back — a whole victim gang (all its pods
where they ran), or, for an elastic gang that keeps some pods, any one of its evicted pods —
while everything else stays as the plan has it. The eviction is *needed* if then, on some
node the victim held, some resource the victim asks there (cpu, memory, milli-GPU, NICs,
any other) would exceed the node's allocatable counting only: the running pods the plan
keeps, the victim, and the plan's pods of gangs that **may evict that victim**. So the room
an eviction frees must be used by gangs allowed to take it: a gang of lower or equal
priority that fills the room does not excuse the eviction (a plan evicting for a gang that
would have fit anyway, and backfilling the room with one that may not preempt, is
refused). The check counts node totals, not device ids: an eviction that only frees a
particular GPU device (a share that blocks a whole GPU on a node whose total has room) is
not needed in this sense. An elastic gang evicted whole is held to the whole-gang rule.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Protocol

from gangplan.models import (
    Gang,
    Plan,
    PodPlacement,
    Role,
    RunningGang,
    RunningPod,
    Snapshot,
)

__all__ = [
    "EVICTION_CHECKS",
    "check_eviction_needed",
    "check_evictions",
    "check_victim_disruption",
    "check_victim_grace",
    "check_victim_priority",
    "check_victim_whole",
]


class _Ctx(Protocol):
    snapshot: Snapshot
    plan: Plan
    pods: list[tuple[PodPlacement, Gang, Role]]


def _victims(ctx: _Ctx) -> dict[str, tuple[RunningGang, list[RunningPod]]]:
    """Running gangs with at least one evicted pod: the gang and its evicted pods (only
    evictions of running pods that exist count; ``evictions`` reports the others)."""
    s = ctx.snapshot
    rules = s.preemption_rules
    evicted = ctx.plan.evicted
    out: dict[str, tuple[RunningGang, list[RunningPod]]] = {}
    for pod in s.running:
        if (pod.namespace, pod.name) in evicted:
            rg = rules.gang_of(pod)
            out.setdefault(rg.key, (rg, []))[1].append(pod)
    return out


def check_evictions(ctx: _Ctx) -> Iterator[tuple[str, str]]:
    """Evictions only with preemption on; each names an existing running pod (once), its
    node and gang as the snapshot has them, and a pending gang of the snapshot."""
    s, plan = ctx.snapshot, ctx.plan
    if plan.evictions and not s.preemption.enabled:
        yield ("evictions", f"{len(plan.evictions)} evictions, but preemption is off")
    running = {(p.namespace, p.name): p for p in s.running}
    for (ns, name), n in Counter((e.namespace, e.pod) for e in plan.evictions).items():
        if n > 1:
            yield ("evictions", f"running pod {ns}/{name} is evicted {n} times")
    for e in plan.evictions:
        pod = running.get((e.namespace, e.pod))
        if pod is None:
            yield ("evictions", f"eviction of {e.namespace}/{e.pod}, which is not running")
            continue
        if pod.node != e.node:
            yield (
                "evictions",
                f"eviction of {e.namespace}/{e.pod} names node {e.node!r}; it runs on {pod.node!r}",
            )
        if pod.gang != e.gang:
            yield (
                "evictions",
                f"eviction of {e.namespace}/{e.pod} names gang {e.gang!r}; its gang is "
                f"{pod.gang!r}",
            )
        if e.for_gang not in s.gang_by_key:
            yield (
                "evictions",
                f"eviction of {e.namespace}/{e.pod} is for {e.for_gang}, which is no pending gang",
            )


def check_victim_whole(ctx: _Ctx) -> Iterator[tuple[str, str]]:
    """A victim is a whole running gang, or an elastic gang's pods above its min_member."""
    for rg, gone in _victims(ctx).values():
        kept = rg.size - len(gone)
        if kept == 0 or kept >= rg.min_member:
            continue
        if rg.elastic:
            yield (
                "victim_whole",
                f"running gang {rg.key}: {len(gone)} of {rg.size} pods evicted, leaving {kept} "
                f"running, below its min_member {rg.min_member}",
            )
        else:
            yield (
                "victim_whole",
                f"running gang {rg.key}: {len(gone)} of its {rg.size} pods evicted (a victim "
                f"is evicted whole; the other {kept} would run on, useless)",
            )


def check_victim_priority(ctx: _Ctx) -> Iterator[tuple[str, str]]:
    """Each eviction names a gang the plan admits, with a pod on a node the victim held,
    that may evict the victim (strictly lower priority in its queue, or a reclaim), and says
    which of the two."""
    s = ctx.snapshot
    rules = s.preemption_rules
    nodes_of: dict[str, set[str]] = defaultdict(set)
    for p, gang, _role in ctx.pods:
        nodes_of[gang.key].add(p.node)
    running = {(p.namespace, p.name): p for p in s.running}
    for e in ctx.plan.evictions:
        pod = running.get((e.namespace, e.pod))
        preemptor = s.gang_by_key.get(e.for_gang)
        if pod is None or preemptor is None:
            continue  # check_evictions reports it
        rg = rules.gang_of(pod)
        who = f"eviction of {e.namespace}/{e.pod} (running gang {rg.key}, priority {rg.priority})"
        if e.for_gang not in nodes_of:
            yield ("victim_priority", f"{who} is for {e.for_gang}, which the plan does not admit")
            continue
        if not nodes_of[e.for_gang] & {p.node for p in rg.pods}:
            yield (
                "victim_priority",
                f"{who} is for {e.for_gang}, which has no pod on a node the victim held",
            )
        kind = rules.kind(preemptor, rg)
        if kind is None and rules.evictable(rg):
            yield (
                "victim_priority",
                f"{who}: {e.for_gang} (queue {preemptor.queue!r}, priority "
                f"{preemptor.priority}) may not evict it (a victim has strictly lower "
                "priority in the same queue whose within_queue allows it, or belongs to a "
                "borrowing queue under reclaim)",
            )
        elif kind is not None and kind != e.kind:
            yield ("victim_priority", f"{who} says {e.kind!r}; the rule that allows it is {kind!r}")


def check_eviction_needed(ctx: _Ctx) -> Iterator[tuple[str, str]]:
    """No eviction for nothing (module docstring): putting a victim back must overflow a
    node it held, counting kept running pods, the victim and the pods of gangs that may
    evict it."""
    s = ctx.snapshot
    rules = s.preemption_rules
    evicted = ctx.plan.evicted
    kept: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in s.running:
        if (pod.namespace, pod.name) not in evicted:
            kept[pod.node].update(pod.requests)
    for rg, gone in _victims(ctx).values():
        eligible: dict[str, Counter[str]] = defaultdict(Counter)
        may: dict[str, bool] = {}
        for p, gang, role in ctx.pods:
            if gang.key not in may:
                may[gang.key] = rules.kind(gang, rg) is not None
            if may[gang.key]:
                eligible[p.node].update(role.requests)
        if not any(may.values()):
            continue  # no gang of the plan may evict it: victim_priority (or grace) says so
        whole = len(gone) == rg.size
        units = [list(rg.pods)] if whole else [[pod] for pod in gone]
        for unit in units:
            if not _overflows(s, unit, kept, eligible):
                what = f"running gang {rg.key}" if whole else f"pod {unit[0].name!r} of {rg.key}"
                yield (
                    "eviction_needed",
                    f"{what} is evicted for nothing: put back, it fits beside the running "
                    "pods kept and the pods of gangs that may evict it on "
                    + ", ".join(sorted({p.node for p in unit})),
                )


def _overflows(
    s: Snapshot,
    unit: list[RunningPod],
    kept: dict[str, Counter[str]],
    eligible: dict[str, Counter[str]],
) -> bool:
    """Would ``unit``'s pods, put back, overflow some resource they ask on their node?"""
    back: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in unit:
        back[pod.node].update(pod.requests)
    for node_name, req in back.items():
        node = s.node_by_name.get(node_name)
        if node is None:
            continue
        for res, amount in req.items():
            if amount <= 0 or res not in node.allocatable:
                continue
            total = kept[node_name][res] + amount + eligible[node_name][res]
            if total > node.allocatable[res]:
                return True
    return False


def check_victim_disruption(ctx: _Ctx) -> Iterator[tuple[str, str]]:
    """No victim that does not tolerate disruption (``preemptible: false``: an annotation,
    Volcano's ``preemptable``, Koordinator's label, or a PodDisruptionBudget)."""
    for rg, _gone in _victims(ctx).values():
        if not rg.preemptible:
            yield (
                "victim_disruption",
                f"running gang {rg.key} does not tolerate disruption but is evicted",
            )


def check_victim_grace(ctx: _Ctx) -> Iterator[tuple[str, str]]:
    """No victim within its grace period of its own admission (no ping-pong)."""
    rules = ctx.snapshot.preemption_rules
    for rg, _gone in _victims(ctx).values():
        if rules.in_grace(rg):
            yield ("victim_grace", f"running gang {rg.key} is evicted: {rules.why_not(rg)}")


EVICTION_CHECKS = (
    check_evictions,
    check_victim_whole,
    check_victim_priority,
    check_eviction_needed,
    check_victim_disruption,
    check_victim_grace,
)
"""The eviction checks, in the order :func:`~gangplan.solver.judges.verify.verify` runs them; each
yields ``(rule, message)`` pairs."""
