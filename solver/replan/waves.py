"""The wave planner: order the moves of a target plan into safe waves
(:class:`~gangplan.models.MovePlan`, whose module docstring defines a wave).

Once the target is known this is a small scheduling problem. A move *m* **needs** move *m'*
when *m*'s targets lie on nodes where *m'*'s pods run now; a wave may hold a move only if
its placements fit what the earlier waves left minus the wave's own evictions, within the
per-wave budgets (:class:`~gangplan.models.WaveLimits`) and PodDisruptionBudgets.

Greedy list scheduling, wave after wave:

1. add every remaining move that fits on its own (budgets, then room), in the order given
   (the replan's: most GPUs first), until none does;
2. if none fits alone, try each remaining move together with the moves it needs,
   transitively (a **cycle** of moves that need each other's room — a swap — fits only in
   one wave, evictions first); add the first such group that fits;
3. close the wave and start the next, until no move is left or none can start.

A move that still cannot start — a cycle larger than the per-wave budgets allow, or a
target that waits for a move left out — is **left out** (no temporary spot is taken: the
gang keeps running where it is), with the reason; the pending gangs of the final plan
whose room it was to free stay pending. Every wave the planner returns is replayed and
checked by :func:`gangplan.solver.judges.verify_moves.verify_moves`, which shares no code with
it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gangplan.models import (
    GPU_MILLI,
    GangMove,
    GangOutcome,
    LeftOut,
    MovedPod,
    MovePlan,
    PendingReason,
    Plan,
    PodPlacement,
    Snapshot,
    Wave,
    WaveLimits,
)

__all__ = ["plan_waves"]


@dataclass
class _Ledger:
    """Per node: requests held, milli-GPU per device, holders per NIC."""

    snapshot: Snapshot
    used: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    gpu: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    nics: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    @classmethod
    def of(cls, snapshot: Snapshot) -> _Ledger:
        led = cls(snapshot)
        for p in snapshot.running:
            hold = snapshot.free(p.node).holds.get((p.namespace, p.name))
            led.used[p.node].update(p.requests)
            if hold is not None:
                led.gpu[p.node].update(hold.gpu_milli)
                led.nics[p.node].update(hold.nics)
        return led

    def _devices(self, p: PodPlacement, req: dict[str, int]) -> dict[str, int]:
        want = req.get(self.snapshot.gpu, 0)
        milli = p.gpu_milli if (p.gpu_milli is not None and 0 < want < GPU_MILLI) else GPU_MILLI
        return {d: milli for d in p.gpus}

    def change(
        self,
        p: PodPlacement,
        req: dict[str, int],
        sign: int,
        devices: dict[str, int],
        nics: Iterable[str],
    ) -> None:
        for r, v in req.items():
            self.used[p.node][r] += sign * v
        for d, m in devices.items():
            self.gpu[p.node][d] += sign * m
        for x in nics:
            self.nics[p.node][x] += sign

    def place(self, p: PodPlacement, req: dict[str, int], sign: int = 1) -> None:
        self.change(p, req, sign, self._devices(p, req), p.nics)

    def fits(self, node: str, asked: set[str]) -> bool:
        alloc = self.snapshot.node_by_name[node].allocatable
        if any(self.used[node][r] > alloc.get(r, 0) for r in asked):
            return False
        if any(m > GPU_MILLI for m in self.gpu[node].values()):
            return False
        return all(k <= 1 for k in self.nics[node].values())


@dataclass
class _Move:
    gang: str
    pods: list[tuple[str, str, dict[str, int], dict[str, int], tuple[str, ...], PodPlacement]]
    """(namespace, pod, requests, milli per device held, NICs held, target)"""
    gpus: int
    node_of: dict[tuple[str, str], str]
    """(namespace, pod) -> the node it runs on now"""

    @property
    def sources(self) -> set[str]:
        return set(self.node_of.values())

    @property
    def targets(self) -> set[str]:
        return {p[5].node for p in self.pods}


def _moves(snapshot: Snapshot, targets: dict[str, list[PodPlacement]]) -> list[_Move]:
    by_key = {(p.namespace, p.name): p for p in snapshot.running}
    out = []
    for gang, placements in targets.items():
        pods = []
        node_of = {}
        for t in placements:
            rp = by_key[(t.namespace, t.pod)]
            hold = snapshot.free(rp.node).holds.get((rp.namespace, rp.name))
            pods.append(
                (
                    rp.namespace,
                    rp.name,
                    dict(rp.requests),
                    dict(hold.gpu_milli) if hold else {},
                    tuple(hold.nics) if hold else (),
                    t,
                )
            )
            node_of[(rp.namespace, rp.name)] = rp.node
        gpus = sum(req.get(snapshot.gpu, 0) for _ns, _n, req, *_ in pods)
        out.append(_Move(gang, pods, gpus, node_of))
    return out


@dataclass
class _Wave:
    limits: WaveLimits
    moves: list[_Move] = field(default_factory=list)
    per_node: Counter[str] = field(default_factory=Counter)
    per_ns: Counter[str] = field(default_factory=Counter)
    per_budget: Counter[int] = field(default_factory=Counter)

    def within_budgets(self, group: Sequence[_Move]) -> bool:
        lim = self.limits
        node, ns, bud = Counter(self.per_node), Counter(self.per_ns), Counter(self.per_budget)
        for m in group:
            for pns, name, *_ in m.pods:
                node[m.node_of[(pns, name)]] += 1
                ns[pns] += 1
                for i, b in enumerate(lim.budgets):
                    if b.namespace == pns and name in b.pods:
                        bud[i] += 1
        if lim.max_moving_per_node is not None and any(
            k > lim.max_moving_per_node for k in node.values()
        ):
            return False
        if lim.max_moving_per_namespace is not None and any(
            k > lim.max_moving_per_namespace for k in ns.values()
        ):
            return False
        return all(bud[i] <= b.disruptions_allowed for i, b in enumerate(lim.budgets))

    def add(self, group: Sequence[_Move]) -> None:
        for m in group:
            self.moves.append(m)
            for pns, name, *_ in m.pods:
                self.per_node[m.node_of[(pns, name)]] += 1
                self.per_ns[pns] += 1
                for i, b in enumerate(self.limits.budgets):
                    if b.namespace == pns and name in b.pods:
                        self.per_budget[i] += 1


def _try(led: _Ledger, wave: _Wave, group: Sequence[_Move]) -> bool:
    """Add ``group`` to ``wave`` if the budgets allow it and its placements fit what the
    ledger holds once its pods are evicted (the ledger is changed only on success)."""
    if not wave.within_budgets(group):
        return False
    for m in group:
        for ns, name, req, dev, nics, _t in m.pods:
            led.change(
                PodPlacement(pod=name, namespace=ns, gang="", role="", node=m.node_of[(ns, name)]),
                req,
                -1,
                dev,
                nics,
            )
    for m in group:
        for _ns, _n, req, _dev, _nics, t in m.pods:
            led.place(t, req)
    asked: dict[str, set[str]] = defaultdict(set)
    for m in group:
        for _ns, _n, req, _dev, _nics, t in m.pods:
            asked[t.node] |= {r for r, v in req.items() if v > 0}
    if all(led.fits(n, a) for n, a in asked.items()):
        wave.add(group)
        return True
    for m in group:
        for ns, name, req, dev, nics, t in m.pods:
            led.place(t, req, -1)
            led.change(
                PodPlacement(pod=name, namespace=ns, gang="", role="", node=m.node_of[(ns, name)]),
                req,
                1,
                dev,
                nics,
            )
    return False


def _needed(m: _Move, remaining: list[_Move]) -> list[_Move]:
    """``m`` and the remaining moves it needs, transitively (module docstring)."""
    group = [m]
    seen = {m.gang}
    k = 0
    while k < len(group):
        want = group[k].targets
        for other in remaining:
            if other.gang not in seen and want & other.sources:
                seen.add(other.gang)
                group.append(other)
        k += 1
    return group


def plan_waves(
    snapshot: Snapshot,
    targets: dict[str, list[PodPlacement]],
    final: Plan,
    limits: WaveLimits | None = None,
) -> MovePlan:
    """The waves that move every gang of ``targets`` (running gang key -> the target
    placement of each of its pods, named as the running pods) and then place ``final``'s
    pending gangs; see the module docstring for the order and for what is left out.

    Raises:
        KeyError: a target names a pod that does not run in ``snapshot``.
    """
    lim = limits or WaveLimits()
    led = _Ledger.of(snapshot)
    remaining = sorted(_moves(snapshot, targets), key=lambda m: (-m.gpus, m.gang))
    waves: list[Wave] = []
    while remaining and (lim.max_waves is None or len(waves) < lim.max_waves):
        wave = _Wave(lim)
        progress = True
        while progress:
            progress = False
            for m in list(remaining):
                if _try(led, wave, [m]):
                    remaining.remove(m)
                    progress = True
            if progress:
                continue
            for m in list(remaining):
                group = _needed(m, remaining)
                if len(group) > 1 and _try(led, wave, group):
                    for g in group:
                        remaining.remove(g)
                    progress = True
                    break
        if not wave.moves:
            break
        waves.append(_wave(len(waves), wave, snapshot))
    left = [LeftOut(gang=m.gang, reason=_why(m, lim, waves)) for m in remaining]
    return MovePlan(
        waves=tuple(waves),
        final=_final(led, snapshot, final, left),
        left_out=tuple(left),
        limits=lim,
    )


def _wave(index: int, wave: _Wave, snapshot: Snapshot) -> Wave:
    moves = []
    for m in wave.moves:
        pods = tuple(
            MovedPod(pod=name, namespace=ns, node=m.node_of[(ns, name)], to=t)
            for ns, name, _req, _dev, _nics, t in m.pods
        )
        moves.append(GangMove(gang=m.gang, pods=pods, gpus=m.gpus))
    return Wave(index=index, moves=tuple(moves))


def _why(m: _Move, lim: WaveLimits, waves: list[Wave]) -> str:
    if lim.max_waves is not None and len(waves) >= lim.max_waves:
        return f"the plan reached its limit of {lim.max_waves} waves"
    if not _Wave(lim).within_budgets([m]):
        return "the gang alone exceeds a per-wave budget (pods per node or namespace, or a PDB)"
    return (
        "its targets are never free in time: they wait for moves that need its own room "
        "(a cycle larger than one wave's budgets) or for moves left out"
    )


def _final(led: _Ledger, snapshot: Snapshot, final: Plan, left: list[LeftOut]) -> Plan:
    """``final`` with each pending gang placed after the last wave if all its pods fit,
    else pending (its room depended on a move left out)."""
    if not left:
        return final
    by_gang: dict[str, list[PodPlacement]] = defaultdict(list)
    for p in final.pods:
        by_gang[p.gang_key].append(p)
    kept: list[PodPlacement] = []
    dropped: set[str] = set()
    for key, pods in by_gang.items():
        gang = snapshot.gang_by_key[key]
        reqs = [dict(gang.role(p.role).requests) for p in pods]
        for p, req in zip(pods, reqs, strict=True):
            led.place(p, req)
        asked: dict[str, set[str]] = defaultdict(set)
        for p, req in zip(pods, reqs, strict=True):
            asked[p.node] |= {r for r, v in req.items() if v > 0}
        if all(led.fits(n, a) for n, a in asked.items()):
            kept += pods
            continue
        for p, req in zip(pods, reqs, strict=True):
            led.place(p, req, -1)
        dropped.add(key)
    names = ", ".join(x.gang for x in left[:5])
    gangs = tuple(
        g
        if g.key not in dropped
        else GangOutcome(
            gang=g.gang,
            namespace=g.namespace,
            admitted=False,
            reason=PendingReason(
                kind="lost",
                family="lost",
                message=f"its room was to be freed by moves left out of the waves ({names})",
            ),
        )
        for g in final.gangs
    )
    return final.model_copy(update={"pods": tuple(kept), "gangs": gangs})
