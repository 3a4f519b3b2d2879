"""Dominant shares and fair targets between queues (``docs/design.md``, "Fair targets").

Shares follow Dominant Resource Fairness (Ghodsi et al., NSDI'11): a queue's share of a
resource is its usage over the amount being shared, and its dominant share is the largest
of its cpu, memory and GPU shares. The amount shared is the cluster's allocatable minus
what pods of no queue hold; running usage counts.

Units. Shares are integers in **ppm** (parts per million of the shared amount). The design
counts the shortfall in milli-units of dominant share; ppm is 1000 times finer, because one
GPU of a 4,096-GPU cluster is 0.24 milli and would vanish. Each pod's contribution to a
share is rounded to the nearest ppm once (:meth:`FairShares.contribution`), so the share of
a queue is a sum of integers, the form the CP-SAT model needs; the score uses the very same
numbers.

Targets, per priority class (highest first), by weighted progressive filling (water
filling) of dominant share over the queues with pending demand in that class — as
Volcano's ``proportion`` plugin fills ``deserved`` and Kueue's fair sharing divides dominant
usage by weight:

1. every queue of positive weight rises toward its guaranteed amounts (expressed as a
   dominant share), at one common rate;
2. then queues of positive weight rise so that dominant share / weight stays equal;
3. only then queues of weight 0, equally (Kueue: weight 0 is served last).

A queue stops at its demand (all its pending gangs of the class at full size) or its max;
all queues demanding a resource stop when it runs out. The pool of a class is the shared
amount minus running usage minus the pending demand of higher classes. The target is the
dominant share reached, floored to whole ppm.

With preemption on, a queue whose ``reclaim`` policy is not ``never`` is entitled to its
guaranteed amount even where other queues have borrowed the room (Kueue's
``reclaimWithinCohort``): its target is at least the dominant share of its guaranteed
amount, capped by its running usage plus its demand and by its max
(:func:`_reclaim_floors`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from gangplan.models import Gang, Queue, Snapshot

__all__ = ["PPM", "FairShares", "QueueTarget", "fair_ceiling", "fair_shares"]

PPM = 1_000_000


@dataclass(frozen=True)
class QueueTarget:
    """A queue's fair target in one priority class, with what it was computed from (ppm)."""

    queue: str
    weight_milli: int
    base: dict[str, int]
    """running usage share per resource (ppm)"""
    demand: dict[str, int]
    """share of the class's pending demand at full size, per resource (ppm)"""
    target: int
    """dominant share the queue should reach (ppm)"""


@dataclass
class FairShares:
    """Shared totals, per-pod contributions and targets per class for one snapshot."""

    totals: dict[str, int]
    """amount shared per resource (base units): allocatable minus queueless running pods"""
    classes: tuple[int, ...]
    """priority classes of pending gangs, highest first"""
    targets: dict[int, dict[str, QueueTarget]] = field(default_factory=dict)
    base: dict[str, dict[str, int]] = field(default_factory=dict)
    demands: dict[int, dict[str, dict[str, int]]] = field(default_factory=dict)
    """pending demand per class, per queue, per resource (ppm)"""
    pools: dict[int, dict[str, int]] = field(default_factory=dict)
    """what each class shares (ppm per resource): the shared amount minus running usage
    minus higher classes' demand"""

    @cached_property
    def resources(self) -> tuple[str, ...]:
        """The resources being shared (those with a positive total; computed once)."""
        return tuple(r for r, t in self.totals.items() if t > 0)

    def contribution(self, requests: dict[str, int]) -> dict[str, int]:
        """One pod's share per resource, in ppm, rounded to the nearest (half up)."""
        return {
            r: (2 * PPM * requests.get(r, 0) + self.totals[r]) // (2 * self.totals[r])
            for r in self.resources
        }

    def dominant(self, queue: str, added: dict[str, int]) -> int:
        """Dominant share (ppm) of ``queue`` with ``added`` ppm per resource on its running base."""
        base = self.base.get(queue, {})
        return max((base.get(r, 0) + added.get(r, 0) for r in self.resources), default=0)


def _share_resources(snapshot: Snapshot) -> tuple[str, ...]:
    return ("cpu", "memory", snapshot.gpu)


def fair_shares(snapshot: Snapshot) -> FairShares:
    """Compute totals, running bases and the fair target of every queue in every class."""
    resources = _share_resources(snapshot)
    totals = {r: sum(n.allocatable.get(r, 0) for n in snapshot.nodes) for r in resources}
    for pod in snapshot.running:
        if pod.queue is None:
            for r in resources:
                totals[r] -= pod.requests.get(r, 0)
    totals = {r: max(0, t) for r, t in totals.items()}
    classes = tuple(sorted({g.priority for g in snapshot.gangs}, reverse=True))
    fs = FairShares(totals=totals, classes=classes)
    active = fs.resources

    running: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in snapshot.running:
        if pod.queue is not None:
            for r in active:
                running[pod.queue][r] += pod.requests.get(r, 0)
    # a queue never holds more than all of a resource (clamped: a cluster whose running
    # pods hold more than it reports is the snapshot's warning, not a share above 100%)
    fs.base = {
        q.name: {
            r: min(PPM, (2 * PPM * running[q.name][r] + totals[r]) // (2 * totals[r]))
            for r in active
        }
        for q in snapshot.queues
    }
    used = {r: sum(fs.base[q][r] for q in fs.base) for r in active}

    by_class: dict[int, dict[str, list[Gang]]] = defaultdict(lambda: defaultdict(list))
    for g in snapshot.gangs:
        by_class[g.priority][g.queue].append(g)

    higher = {r: 0 for r in active}
    for c in classes:
        demand: dict[str, dict[str, int]] = {}
        for qname, gangs in by_class[c].items():
            d = {r: 0 for r in active}
            for g in gangs:
                for role in g.roles:
                    contrib = fs.contribution(role.requests)
                    for r in active:
                        d[r] += role.count * contrib[r]
            demand[qname] = d
        pool = {r: max(0, PPM - used[r] - higher[r]) for r in active}
        fs.demands[c], fs.pools[c] = demand, pool
        fs.targets[c] = _fill(snapshot, fs, demand, pool)
        for d in demand.values():
            for r in active:
                higher[r] += d[r]
    if snapshot.preemption.enabled:
        _reclaim_floors(snapshot, fs)
    return fs


def fair_ceiling(snapshot: Snapshot, fs: FairShares, queue: str, resource: str) -> int:
    """The dominant share (ppm) ``queue`` would be filled to if it asked for all of
    ``resource`` besides its pending demand: the water filling of its highest pending
    priority class (the lowest class, or the whole free pool when nothing is pending) run
    again with that demand, the other queues' demand as it is, and its max applied.

    What an autoscaler may ask for: the queue's share when it grows until its fair
    share, its max or the free room stops it (the room an elastic job's workers could be
    given). ``resource`` must be one of :attr:`FairShares.resources`, else ``ValueError``.
    """
    active = fs.resources
    if resource not in active:
        raise ValueError(f"{resource!r} is not shared (shared: {', '.join(active)})")
    mine = [g.priority for g in snapshot.gangs if g.queue == queue]
    if mine:
        c = max(mine)
    elif fs.classes:
        c = fs.classes[-1]
    else:
        c = 0
    if c in fs.pools:
        pool = dict(fs.pools[c])
        demand = {q: dict(d) for q, d in fs.demands[c].items()}
    else:  # nothing pending at all: the class shares what running pods leave
        pool = {r: max(0, PPM - sum(fs.base[q].get(r, 0) for q in fs.base)) for r in active}
        demand = {}
    extra = demand.setdefault(queue, {r: 0 for r in active})
    extra[resource] = PPM
    return _fill(snapshot, fs, demand, pool)[queue].target


def _reclaim_floors(snapshot: Snapshot, fs: FairShares) -> None:
    """Raise the target of every queue that may reclaim to its guaranteed floor (module
    docstring): the dominant share it reaches rising toward its guaranteed amount along its
    demand, stopped by its demand or its max."""
    active = fs.resources
    for targets in fs.targets.values():
        for qname, t in targets.items():
            q = snapshot.queue_by_name[qname]
            if q.preemption.reclaim == "never":
                continue
            g = [PPM * q.guaranteed[r] / fs.totals[r] for r in active if q.guaranteed.get(r)]
            if not g:
                continue
            f = _Filler(qname, q.weight, dict(t.base), dict(t.demand), _t_max(fs, q, t))
            floor = int(f.dominant(f.t_at(max(g))) + 1e-6)
            if floor > t.target:
                targets[qname] = QueueTarget(qname, t.weight_milli, t.base, t.demand, floor)


def _t_max(fs: FairShares, q: Queue, t: QueueTarget) -> float:
    """How far (0..1 of its demand) the queue may rise before its max stops it."""
    t_max = 1.0
    for r in fs.resources:
        cap = q.max.get(r)
        if cap is not None and t.demand[r] > 0:
            cap_ppm = PPM * cap / fs.totals[r]
            t_max = min(t_max, max(0.0, (cap_ppm - t.base[r]) / t.demand[r]))
    return t_max


# --------------------------------------------------------------------------- water filling


@dataclass
class _Filler:
    name: str
    weight: float
    base: dict[str, int]
    demand: dict[str, int]
    t_max: float
    t: float = 0.0

    def dominant(self, t: float) -> float:
        return max((self.base[r] + t * self.demand[r] for r in self.base), default=0.0)

    def t_at(self, level: float) -> float:
        """Smallest t in [0, t_max] whose dominant share reaches ``level`` (t_max if none)."""
        best = self.t_max
        for r, d in self.demand.items():
            if d > 0:
                best = min(best, max(0.0, (level - self.base[r]) / d))
        if max(self.base.values(), default=0) >= level:
            return 0.0
        return max(best, 0.0)


def _fill(
    snapshot: Snapshot,
    fs: FairShares,
    demand: dict[str, dict[str, int]],
    pool: dict[str, int],
) -> dict[str, QueueTarget]:
    active = fs.resources
    fillers: dict[str, _Filler] = {}
    for qname, d in demand.items():
        q = snapshot.queue_by_name[qname]
        base = fs.base[qname]
        t_max = 1.0
        for r in active:
            cap = q.max.get(r)
            if cap is not None and d[r] > 0:
                cap_ppm = PPM * cap / fs.totals[r]
                t_max = min(t_max, max(0.0, (cap_ppm - base[r]) / d[r]))
        fillers[qname] = _Filler(qname, q.weight, dict(base), dict(d), t_max)
    left = {r: float(v) for r, v in pool.items()}

    positive = [f for f in fillers.values() if f.weight > 0]
    zero = [f for f in fillers.values() if f.weight == 0]
    guaranteed: dict[str, float] = {}
    for f in positive:
        q = snapshot.queue_by_name[f.name]
        g = [PPM * q.guaranteed[r] / fs.totals[r] for r in active if q.guaranteed.get(r)]
        guaranteed[f.name] = max(g, default=0.0)
    # phase 1: up to guaranteed, one common rate; 2: by weight; 3: weight 0, equally
    _raise(positive, {f.name: 1.0 for f in positive}, left, ceiling=guaranteed)
    _raise(positive, {f.name: f.weight for f in positive}, left, ceiling=None)
    _raise(zero, {f.name: 1.0 for f in zero}, left, ceiling=None)

    out = {}
    for f in fillers.values():
        q = snapshot.queue_by_name[f.name]
        out[f.name] = QueueTarget(
            queue=f.name,
            weight_milli=q.weight_milli,
            base=dict(f.base),
            demand=dict(f.demand),
            target=int(f.dominant(f.t) + 1e-6),
        )
    return out


def _raise(
    fillers: Iterable[_Filler],
    weight: dict[str, float],
    left: dict[str, float],
    ceiling: dict[str, float] | None,
) -> None:
    """Raise the fillers' dominant shares together, in proportion to ``weight``, until each
    hits its demand, its max, its ``ceiling`` or a resource it needs runs out."""
    active = [f for f in fillers if f.t < f.t_max]
    while active:

        def cost(level: float, group: list[_Filler] = active) -> dict[str, float]:
            use = {r: 0.0 for r in left}
            for f in group:
                target = level * weight[f.name]
                if ceiling is not None:
                    target = min(target, ceiling[f.name])
                t = max(f.t, min(f.t_max, f.t_at(target)))
                for r in use:
                    use[r] += (t - f.t) * f.demand.get(r, 0)
            return use

        def fits(level: float) -> bool:
            return all(u <= left[r] + 1e-9 for r, u in cost(level).items())

        hi = (
            max(
                (f.dominant(f.t_max) / weight[f.name] for f in active if weight[f.name] > 0),
                default=0.0,
            )
            + 1.0
        )
        lo = 0.0
        if fits(hi):
            lo = hi
        else:
            for _ in range(100):
                mid = (lo + hi) / 2
                if fits(mid):
                    lo = mid
                else:
                    hi = mid
        use = cost(lo)
        for f in active:
            target = lo * weight[f.name]
            if ceiling is not None:
                target = min(target, ceiling[f.name])
            f.t = max(f.t, min(f.t_max, f.t_at(target)))
        for r in left:
            left[r] = max(0.0, left[r] - use[r])
        saturated = {r for r, v in left.items() if v <= 1e-6}
        still = []
        for f in active:
            done = f.t >= f.t_max - 1e-12
            if ceiling is not None:
                done = done or f.dominant(f.t) >= ceiling[f.name] - 1e-6
            blocked = any(f.demand.get(r, 0) > 0 for r in saturated)
            if not done and not blocked:
                still.append(f)
        if len(still) == len(active):
            break  # no progress possible (numerical floor)
        active = still
