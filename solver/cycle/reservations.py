"""Reservation and backfill: choosing where a starving gang will start, and making the
baselines respect held capacity.

**Choosing the reservation** (:func:`reserve`) is a separate step before the placers, not
part of the CP-SAT model, and it is a documented greedy, not an exact search. Why: it asks
a question about the future (when will the running pods have left enough room?) that the
cycle's model does not represent, for one gang at a time, and the answer is then a fixed
input that every placer and the verifier read in the same way
(:mod:`gangplan.models.reservation`). Slurm's backfill scheduler does the same: it computes
the head job's expected start ("shadow time") from the running jobs' time limits, then
backfills (EASY backfilling: Lifka, JSSPP 1995; Mu'alem and Feitelson, IEEE TPDS 12(6),
2001).

The step, for each pending gang that has waited longer than ``reserve_after_s``, in queue
order (priority, then the longest waiting), up to ``max_reservations``:

1. candidate domains: the domains of its required level; without one, every node (a
   one-pod gang: only nodes), every domain of every level, and the whole cluster;
   nodes held by an earlier reservation are left out;
2. for each domain, the earliest time t among now, the expected ends of the running pods
   in it (``RunningPod.expected_end``; ends in the past or unknown are not counted on),
   and "unknown" (every running pod gone: the nodes' allocatable) at which the gang fits
   the domain's nodes, with each node's free amount at t being what running pods leave
   now plus what the pods expected to end by t request;
3. "fits" is a greedy, by node totals (not device ids): the gang's pods (an elastic gang:
   its minimum), largest GPU request first, each on the candidate node of the domain where
   it still fits at t that has the most free *now* (GPUs, then CPU; then node order), so a
   reservation holds capacity that is already free before capacity still in use;
4. the domain with the earliest t wins; ties: the least held capacity not free now, then the
   lowest level, then the domain's name. What its pods take on each node is ``held``.

Every cycle recomputes its reservations from the snapshot (Slurm recomputes the shadow
time on every pass), so a reservation follows the running pods as they leave early or late.

**Baselines under reservations** (:func:`place_with_holds`). A pod-by-pod placer cannot
ask per gang whether it may use held capacity, so it runs in phases, each on the free
amounts the phase may use (held capacity removed where its gangs may not use it):

0. each reserved gang alone (its own capacity is not held from it);
1. every other gang, none of them using held capacity (queue order kept among them);
2. the gangs phase 1 left pending that may backfill some reservation, grouped by the
   reservations they may backfill, on what is left.

A gang that could fit only by mixing held and non-held capacity may so lose its place to a
lower gang of phase 1 (the one departure from queue order); the CP-SAT model has no phases
(:mod:`gangplan.solver.model.holds`).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

from gangplan.models import (
    GPU_MILLI,
    Gang,
    HeldNode,
    PodPlacement,
    Reservation,
    Role,
    RunningPod,
    Snapshot,
    growing_nodes,
)
from gangplan.solver.context import CycleContext
from gangplan.solver.placers.state import ClusterState
from gangplan.topology import NODE_LEVEL

__all__ = ["place_with_holds", "reserve", "reserved_context", "starving"]

CLUSTER_LEVEL = "cluster"


def starving(snapshot: Snapshot) -> list[Gang]:
    """The pending gangs that have waited longer than ``reserve_after_s`` (creation time to
    the cycle's clock), in queue order: priority (highest first), then creation time.
    Growth gangs (``models/elastic.py``) are running already and get none."""
    cfg = snapshot.reservation
    now = snapshot.preemption_rules.now
    growing = growing_nodes(snapshot)  # running already: growth waits for free room
    out = [
        g
        for g in snapshot.gangs
        if now - g.creation_time > cfg.reserve_after_s and g.key not in growing
    ]
    return sorted(out, key=lambda g: (-g.priority, g.creation_time, g.namespace, g.name))


def reserved_context(ctx: CycleContext) -> CycleContext:
    """``ctx`` with the cycle's reservations in its snapshot (:func:`reserve`; a context
    derived from it, :meth:`CycleContext.derive`), when reservations are enabled; ``ctx``
    itself otherwise."""
    s = ctx.snapshot
    if not s.reservation.enabled:
        return ctx
    made = reserve(ctx)
    if not made and not s.reservations:
        return ctx
    return ctx.derive(reservations=made)


def reserve(ctx: CycleContext) -> tuple[Reservation, ...]:
    """The cycle's reservations (module docstring): the snapshot's own for gangs still
    pending, then one per starving gang without one, up to ``max_reservations``."""
    s = ctx.snapshot
    pending = s.gang_by_key
    kept = [r for r in s.reservations if r.key in pending]
    taken = {n for r in kept for n in r.nodes}
    have = {r.key for r in kept}
    out = list(kept)
    state = ctx.state()
    releases = _releases(s)
    for gang in starving(s):
        if len(out) >= s.reservation.max_reservations:
            break
        if gang.key in have:
            continue
        res = _best_reservation(ctx, state, releases, gang, taken)
        if res is not None:
            out.append(res)
            taken |= set(res.nodes)
    return tuple(out)


# --------------------------------------------------------------------------- the greedy


def _releases(s: Snapshot) -> dict[str, list[tuple[float, RunningPod]]]:
    """node -> (expected end, pod) of its running pods expected to end after now, by end."""
    now = s.preemption_rules.now
    out: dict[str, list[tuple[float, RunningPod]]] = defaultdict(list)
    for pod in s.running:
        if pod.expected_end is not None and pod.expected_end > now:
            out[pod.node].append((pod.expected_end, pod))
    for lst in out.values():
        lst.sort(key=lambda e: e[0])
    return out


def _pods_to_hold(gang: Gang) -> list[tuple[int, Role]]:
    """(role index, role) per pod a reservation must hold: the full gang, or an elastic
    gang's minimum (each role's own minimum first, then roles in order), largest GPU
    request first."""
    counts = [gang.role_min(r) for r in gang.roles]
    extra = gang.min_size - sum(counts)
    for i, r in enumerate(gang.roles):
        add = min(extra, r.count - counts[i])
        counts[i] += add
        extra -= add
    return [(i, r) for i, r in enumerate(gang.roles) for _ in range(counts[i])]


def _domains(ctx: CycleContext, gang: Gang) -> list[tuple[int, str, str, tuple[str, ...]]]:
    """(level rank, level, domain name, nodes) candidates, lowest level first."""
    topo = ctx.topo
    names = ctx.node_names
    required = gang.topology.required if gang.topology else None
    lowest_first = [NODE_LEVEL, *reversed(topo.levels)]
    out: list[tuple[int, str, str, tuple[str, ...]]] = []
    levels = [required] if required is not None else lowest_first
    if required is None and gang.size == 1:
        levels = [NODE_LEVEL]
    for level in levels:
        rank = lowest_first.index(level) if level in lowest_first else 0
        if level == NODE_LEVEL:
            out += [(rank, level, n, (n,)) for n in names]
            continue
        for d in topo.domains_at(level):
            members = topo.nodes_in(d)
            out.append((rank, level, d.name, tuple(n for n in names if n in members)))
    if required is None and gang.size > 1:
        out.append((len(lowest_first), CLUSTER_LEVEL, "", tuple(names)))
    return out


def _best_reservation(
    ctx: CycleContext,
    state: ClusterState,
    releases: dict[str, list[tuple[float, RunningPod]]],
    gang: Gang,
    taken: set[str],
) -> Reservation | None:
    s = ctx.snapshot
    now = s.preemption_rules.now
    pods = _pods_to_hold(gang)
    pods.sort(key=lambda p: -gang.roles[p[0]].requests.get(s.gpu, 0))
    need_gpu = sum(gang.roles[i].requests.get(s.gpu, 0) for i, _ in pods)
    cands = [set(state.candidates(gang, r)) for r in gang.roles]
    now_free = {n: st.resources for n, st in state.nodes.items()}
    best: tuple[tuple[float, int, int, str], Reservation] | None = None
    for rank, level, dname, members in _domains(ctx, gang):
        nodes = [n for n in members if n not in taken and any(n in c for c in cands)]
        if not nodes:
            continue
        if sum(s.node_by_name[n].allocatable.get(s.gpu, 0) for n in nodes) < need_gpu:
            continue
        times: list[float | None] = [now]
        times += sorted({e for n in nodes for e, _ in releases.get(n, ())})
        times.append(None)
        for t in times:
            if best is not None and (t if t is not None else math.inf) > best[0][0]:
                break
            free = _free_at(s, state, releases, nodes, t)
            if sum(f.get(s.gpu, 0) for f in free.values()) < need_gpu:
                continue
            held = _fit(s, gang, pods, nodes, cands, free, now_free)
            if held is None:
                continue
            not_free = sum(
                max(0, amounts.get(s.gpu, 0) - now_free[n].get(s.gpu, 0))
                for n, amounts in held.items()
            )
            key = (t if t is not None else math.inf, not_free, rank, dname)
            if best is None or key < best[0]:
                start = None if t is None else max(t, now)
                best = (
                    key,
                    Reservation(
                        gang=gang.name,
                        namespace=gang.namespace,
                        level=level,
                        domain=dname,
                        start=start,
                        held=tuple(
                            HeldNode(node=n, resources={r: v for r, v in a.items() if v > 0})
                            for n, a in held.items()
                        ),
                    ),
                )
            break
    return None if best is None else best[1]


def _free_at(
    s: Snapshot,
    state: ClusterState,
    releases: dict[str, list[tuple[float, RunningPod]]],
    nodes: list[str],
    t: float | None,
) -> dict[str, Counter[str]]:
    """Free amounts of ``nodes`` at ``t``: now plus what pods expected to end by t request;
    at None (unknown), the nodes' allocatable."""
    out: dict[str, Counter[str]] = {}
    for n in nodes:
        if t is None:
            out[n] = Counter(s.node_by_name[n].allocatable)
            continue
        free = Counter(state.nodes[n].resources)
        for end, pod in releases.get(n, ()):
            if end > t:
                break
            free.update(pod.requests)
        out[n] = free
    return out


def _fit(
    s: Snapshot,
    gang: Gang,
    pods: list[tuple[int, Role]],
    nodes: list[str],
    cands: list[set[str]],
    free: dict[str, Counter[str]],
    now_free: dict[str, dict[str, int]],
) -> dict[str, Counter[str]] | None:
    """The greedy of step 3 (module docstring): node -> what the gang's pods take there,
    or None if they do not all fit."""
    left = {n: Counter(free[n]) for n in nodes}
    took: dict[str, Counter[str]] = {}
    order = {n: i for i, n in enumerate(nodes)}

    def pref(n: str) -> tuple[int, int, int]:
        f = now_free[n]
        return (-f.get(s.gpu, 0), -f.get("cpu", 0), order[n])

    ranked = sorted(nodes, key=pref)
    for i, _ in pods:
        req = gang.roles[i].requests
        where = next(
            (
                n
                for n in ranked
                if n in cands[i] and all(left[n].get(r, 0) >= v for r, v in req.items())
            ),
            None,
        )
        if where is None:
            return None
        left[where].subtract(req)
        took.setdefault(where, Counter()).update(req)
    return took


# --------------------------------------------------------------------------- baselines


def _as_running(snapshot: Snapshot, pods: Iterable[PodPlacement]) -> list[RunningPod]:
    gangs = snapshot.gang_by_key
    out = []
    for p in pods:
        gang = gangs[p.gang_key]
        out.append(
            RunningPod.model_construct(
                name=p.pod,
                namespace=p.namespace,
                gang=p.gang,
                queue=gang.queue,
                priority=gang.priority,
                node=p.node,
                requests=gang.role(p.role).requests,
                devices=(*p.gpus, *p.nics),
                admitted=None,
                min_member=None,
                preemptible=True,
                expected_end=None,
            )
        )
    return out


def _limit(state: ClusterState, node: str, room: dict[str, int], gpu: str, nic: str) -> None:
    """Cut ``node``'s free amounts in ``state`` to at most ``room`` in each resource it
    names (whole GPU devices taken away last-listed first, then shares; NIC ids likewise)."""
    st = state.nodes[node]
    resources = dict(st.resources)
    gpu_milli = dict(st.gpu_milli)
    nics = [x for x in st.nic_order if x in st.nics]
    for r, cap in room.items():
        if r == gpu:
            excess = sum(gpu_milli.values()) - cap
            for d in sorted(st.gpu_order, key=lambda d: -gpu_milli[d]):
                if excess <= 0:
                    break
                cut = min(gpu_milli[d], excess)
                # whole devices go whole: a partly cut device serves no whole-GPU pod
                gpu_milli[d] -= GPU_MILLI if gpu_milli[d] == GPU_MILLI else cut
                excess -= cut
        if r == nic:
            nics = nics[: max(0, cap // GPU_MILLI)]
        resources[r] = min(resources.get(r, 0), cap)
    state.set_free(node, resources, {d: max(0, m) for d, m in gpu_milli.items()}, nics)


def place_with_holds(
    ctx: CycleContext, placer: Callable[[CycleContext], list[PodPlacement]]
) -> list[PodPlacement]:
    """Run a baseline placer under the snapshot's reservations, in the phases of the module
    docstring; without reservations, the placer itself."""
    s = ctx.snapshot
    if not s.reservations:
        return placer(ctx)
    rules = s.reservation_rules
    pending = list(s.gangs)
    by_key = s.gang_by_key
    reserved = [by_key[r.key] for r in s.reservations if r.key in by_key]
    rest = [g for g in pending if g.key not in {r.key for r in s.reservations}]
    phases: list[tuple[list[Gang], frozenset[str]]] = [([g], frozenset({g.key})) for g in reserved]
    phases.append((rest, frozenset()))
    placed: list[PodPlacement] = []
    used: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    """(reservation key, node) -> what pods of gangs that may not backfill it took"""
    for k, (gangs, exempt) in enumerate(phases):
        got = _phase(ctx, placer, gangs, exempt, placed, used)
        placed += got
        if k == len(phases) - 1:
            # phase 2: the gangs left pending that may backfill some reservation
            done = {p.gang_key for p in placed}
            groups: dict[frozenset[str], list[Gang]] = defaultdict(list)
            for g in rest:
                if g.key in done:
                    continue
                may = frozenset(r.key for r in s.reservations if rules.may_backfill(g, r))
                if may:
                    groups[may].append(g)
            for may, members in groups.items():
                placed += _phase(ctx, placer, members, may, placed, used)
    return placed


def _phase(
    ctx: CycleContext,
    placer: Callable[[CycleContext], list[PodPlacement]],
    gangs: list[Gang],
    exempt: frozenset[str],
    placed: list[PodPlacement],
    used: dict[tuple[str, str], Counter[str]],
) -> list[PodPlacement]:
    """One phase: ``gangs`` on what ``placed`` leaves, held capacity removed except for the
    reservations in ``exempt`` (keys); ``used`` is updated with what this phase's pods
    take of the reservations they are subject to."""
    s = ctx.snapshot
    if not gangs:
        return []
    rules = s.reservation_rules

    def hold(state: ClusterState) -> None:
        # the capacity this phase may not use: what each reservation not in ``exempt``
        # still holds after the pods of gangs that may not backfill it
        for res in s.reservations:
            if res.key in exempt:
                continue
            for h in res.held:
                room = rules.room(res, h)
                left = {r: max(0, v - used[(res.key, h.node)].get(r, 0)) for r, v in room.items()}
                _limit(state, h.node, left, s.gpu, s.nic)

    phase = ctx.derive(
        gangs=tuple(gangs),
        running=(*s.running, *_as_running(s, placed)),
        reservations=(),
        adjust=hold,
    )
    got = placer(phase)
    for p in got:
        gang = s.gang_by_key[p.gang_key]
        held = rules.by_node.get(p.node)
        if held is not None and not rules.may_backfill(gang, held[0]):
            used[(held[0].key, p.node)].update(gang.role(p.role).requests)
    return got
