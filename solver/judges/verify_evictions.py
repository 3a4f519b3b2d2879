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
* ``reclaim_total`` — reclaim is counted per queue, as Kueue counts each admitted workload
  against its ClusterQueue's nominal quota: the queue's running usage (its pods the plan
  keeps) plus the whole request of **every** gang of the queue the plan admits by reclaim
  stays within its ``guaranteed`` amount in each resource those gangs ask that it
  guarantees (each gang alone within it is not enough: two 8-GPU reclaims for a queue
  guaranteed 8);
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
not needed in this sense. An elastic gang evicted whole is held to the whole-gang rule,
and, on each node holding ``min_member`` of its pods or more, putting back that many of
them (per resource the smallest requests) must overflow too: it could not have kept its
minimum there (so a victim's pods above its minimum go before the victim whole).

**Evictions make room for a gang's minimum only** (volcano#2627: an elastic preemptor
evicted whole gangs to run its optional pods): of a gang that may evict the victim, only
pods that can be part of its minimum count — per node and resource, the most of that
resource any choice of its pods there asks that fits in a minimum (each role's own
minimum, and no more than ``min_size`` pods: :attr:`Gang.min_size <gangplan.models.Gang.
min_size>`, :meth:`Gang.role_min <gangplan.models.Gang.role_min>`); a growth gang (a running
elastic gang's room to grow, ``models/elastic.py``) counts nothing, its minimum being empty.
A gang's pods above its minimum use free room only.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from gangplan.models import (
    Gang,
    Plan,
    PodPlacement,
    Role,
    RunningGang,
    RunningPod,
    Snapshot,
    format_quantity,
    growing_nodes,
)

__all__ = [
    "EVICTION_CHECKS",
    "check_eviction_needed",
    "check_evictions",
    "check_victim_disruption",
    "check_victim_grace",
    "check_victim_priority",
    "check_victim_whole",
    "unneeded_evictions",
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


def check_reclaim_total(ctx: _Ctx) -> Iterator[tuple[str, str]]:
    """Per queue, its kept running usage plus every gang it admits by reclaim stays within
    its guaranteed amount (module docstring)."""
    s = ctx.snapshot
    admitted = {p.gang_key for p in ctx.plan.pods}
    by_queue: dict[str, set[str]] = defaultdict(set)
    for e in ctx.plan.evictions:
        g = s.gang_by_key.get(e.for_gang)
        if e.kind == "reclaim" and g is not None and g.key in admitted:
            by_queue[g.queue].add(g.key)
    if not by_queue:
        return
    evicted = {(e.namespace, e.pod) for e in ctx.plan.evictions}
    for qname, keys in sorted(by_queue.items()):
        queue = s.queue_by_name.get(qname)
        if queue is None:
            continue
        use: Counter[str] = Counter()
        for pod in s.running:
            if pod.queue == qname and (pod.namespace, pod.name) not in evicted:
                use.update(pod.requests)
        asks: Counter[str] = Counter()
        for key in sorted(keys):
            for role in s.gang_by_key[key].roles:
                for r, v in role.requests.items():
                    asks[r] += role.count * v
        for r in sorted(asks):
            if asks[r] <= 0 or r not in queue.guaranteed:
                continue
            total = use[r] + asks[r]
            if total > queue.guaranteed[r]:
                yield (
                    "reclaim_total",
                    f"queue {qname!r} reclaims for {', '.join(sorted(keys))}: with its running "
                    f"pods they use {format_quantity(r, total)} of {r}, above the "
                    f"{format_quantity(r, queue.guaranteed[r])} it is guaranteed (Kueue "
                    "counts every admitted workload)",
                )


def check_eviction_needed(ctx: _Ctx) -> Iterator[tuple[str, str]]:
    """No eviction for nothing (module docstring): putting a victim back must overflow a
    node it held, counting kept running pods, the victim and the pods of gangs that may
    evict it (one minimum's worth of each)."""
    victims = list(_victims(ctx).values())
    for _key, why in unneeded_evictions(ctx.snapshot, ctx.plan.evicted, victims, ctx.pods):
        yield ("eviction_needed", why)


def unneeded_evictions(
    s: Snapshot,
    evicted: set[tuple[str, str]] | frozenset[tuple[str, str]],
    victims: Sequence[tuple[RunningGang, Sequence[RunningPod]]],
    pods: Iterable[tuple[PodPlacement, Gang, Role]],
) -> Iterator[tuple[str, str]]:
    """The rule of :func:`check_eviction_needed` for some victims: ``evicted`` the
    (namespace, pod) of every running pod the plan evicts, ``victims`` the running gangs to
    check with their evicted pods, ``pods`` the plan's pods with their gang and role (at
    least those on the victims' nodes). Yields (victim key, why) per eviction made for
    nothing; the baselines' greedy preemption asks it before keeping a round's victims."""
    rules = s.preemption_rules
    pods = list(pods)
    kept: dict[str, Counter[str]] = defaultdict(Counter)
    nodes = {p.node for rg, _gone in victims for p in rg.pods}
    for pod in s.running:
        if pod.node in nodes and (pod.namespace, pod.name) not in evicted:
            kept[pod.node].update(pod.requests)
    growing = growing_nodes(s)
    for rg, gone in victims:
        on: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
        gangs: dict[str, Gang] = {}
        may: dict[str, bool] = {}
        for p, gang, role in pods:
            if gang.key not in may:
                may[gang.key] = rules.kind(gang, rg) is not None
            if may[gang.key] and gang.key not in growing:
                on[p.node][gang.key][role.name] += 1
                gangs[gang.key] = gang
        if not any(may.values()):
            continue  # no gang of the plan may evict it: victim_priority (or grace) says so
        eligible: dict[str, Counter[str]] = defaultdict(Counter)
        for node_name, per_gang in on.items():
            resources = {r for pod in rg.pods if pod.node == node_name for r in pod.requests}
            for key, counts in per_gang.items():
                for res in resources:
                    eligible[node_name][res] += _most_in_minimum(gangs[key], counts, res)
        whole = len(gone) == rg.size
        units = [list(rg.pods)] if whole else [[pod] for pod in gone]
        for unit in units:
            if not _overflows(s, _back(unit), kept, eligible):
                what = f"running gang {rg.key}" if whole else f"pod {unit[0].name!r} of {rg.key}"
                yield (
                    rg.key,
                    f"{what} is evicted for nothing: put back, it fits beside the running "
                    "pods kept and the minimums of gangs that may evict it on "
                    + ", ".join(sorted({p.node for p in unit})),
                )
        if whole and rg.elastic:
            # evicted whole where it could have kept its minimum on one of its nodes
            for node_name, back in _minimum_back(rg).items():
                if not _overflows(s, {node_name: back}, kept, eligible):
                    yield (
                        rg.key,
                        f"running gang {rg.key} is evicted whole, but its minimum of "
                        f"{rg.min_member} pods, put back on {node_name}, fits beside the "
                        "running pods kept and the minimums of gangs that may evict it",
                    )


def _most_in_minimum(gang: Gang, counts: Counter[str], resource: str) -> int:
    """The most of ``resource`` that pods of ``gang`` — ``counts`` per role, on one node —
    ask when only pods that fit in one minimum count: up to each role's own minimum
    free, then the rest of ``min_size`` from the roles asking the most of it (a greedy
    choice, optimal as every pod costs one place of the minimum)."""
    took = {r.name: min(counts[r.name], gang.role_min(r)) for r in gang.roles}
    rest = gang.min_size - sum(gang.role_min(r) for r in gang.roles)
    for r in sorted(gang.roles, key=lambda r: -r.requests.get(resource, 0)):
        more = max(0, min(rest, counts[r.name] - took[r.name]))
        took[r.name] += more
        rest -= more
    return sum(n * gang.role(name).requests.get(resource, 0) for name, n in took.items())


def _back(unit: list[RunningPod]) -> dict[str, Counter[str]]:
    """What ``unit``'s pods ask per node."""
    back: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in unit:
        back[pod.node].update(pod.requests)
    return back


def _minimum_back(rg: RunningGang) -> dict[str, Counter[str]]:
    """Per node holding at least ``min_member`` pods of elastic ``rg``: per resource, the
    sum of the ``min_member`` smallest requests of its pods there (the least its minimum
    kept there could ask; exact for identical pods)."""
    by_node: dict[str, list[RunningPod]] = defaultdict(list)
    for pod in rg.pods:
        by_node[pod.node].append(pod)
    out: dict[str, Counter[str]] = {}
    for node_name, pods in by_node.items():
        if len(pods) < rg.min_member:
            continue
        need: Counter[str] = Counter()
        for res in {r for p in pods for r in p.requests}:
            asks = sorted(p.requests.get(res, 0) for p in pods)
            need[res] = sum(asks[: rg.min_member])
        out[node_name] = need
    return out


def _overflows(
    s: Snapshot,
    back: dict[str, Counter[str]],
    kept: dict[str, Counter[str]],
    eligible: dict[str, Counter[str]],
) -> bool:
    """Would ``back`` (what some pods ask, per node), put back, overflow some resource
    they ask on their node?"""
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
    check_reclaim_total,
    check_eviction_needed,
    check_victim_disruption,
    check_victim_grace,
)
"""The eviction checks, in the order :func:`~gangplan.solver.judges.verify.verify` runs them; each
yields ``(rule, message)`` pairs."""
