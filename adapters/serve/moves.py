"""``gangplan apply MOVES.yaml``: a move plan (:class:`~gangplan.models.MovePlan`, from
``gangplan replan``) run on the cluster wave by wave, through the live loop's code path.

Per wave, in order (the plan's own definition of a wave):

1. **hold** the targets: each moved gang becomes a gang in flight of the loop's ledger
   (:class:`~gangplan.adapters.serve.ledger.InFlight`, its placements the wave's targets),
   so a ``gangplan serve`` reading the ledger keeps the room for it;
2. **evict** the wave's pods together (:func:`~gangplan.adapters.serve.evict.
   evict_together`: PodDisruptionBudgets counted first, nothing evicted when one would be
   broken; a refusal midway stops the rest);
3. wait until the gangs' controllers have created the pods again (``wait`` is called
   between polls: a sleep on a cluster, a simulation step in tests), then **place** them
   on the held targets with the loop's :class:`~gangplan.adapters.serve.apply.Applier`
   (mode gate: pinned and ungated; mode bind: bound).

A wave that does not complete stops the plan: the later waves were planned on the state it
was to leave. Pods are matched to their targets by name (a controller that recreates a pod
under the same name, as a Job or JobSet with stable pod names, or the test's controller,
does); a recreated pod under another name is not placed, and the report says so.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from gangplan.adapters.serve.api import KubeApi
from gangplan.adapters.serve.clock import Clock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.evict import evict_together
from gangplan.adapters.serve.ledger import InFlight
from gangplan.adapters.serve.snapshot import PodRef, pod_ref
from gangplan.models import GangMove, MovePlan, PodPlacement, Wave

__all__ = ["MovePlanRefused", "WaveReport", "apply_moves", "check_move_plan"]


class MovePlanRefused(Exception):
    """A move plan that contradicts itself or the cluster (:func:`check_move_plan`):
    ``lines``, one per problem; nothing is evicted then."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("; ".join(lines))


def check_move_plan(plan: MovePlan, nodes: Collection[str]) -> list[str]:
    """The plan's problems that need no eviction to see, one line each: a node that is not
    in ``nodes`` (the live cluster's), a gang or a pod moved twice in one wave, a gang
    moved by two waves, a pod whose target names another pod or namespace, a wave whose
    index is not its place in the list."""
    out: list[str] = []
    moved_in: dict[str, int] = {}
    for k, wave in enumerate(plan.waves):
        where = f"waves[{k}]"
        if wave.index != k:
            out.append(f"{where}: index {wave.index}, but it is wave {k} of the list")
        gangs: set[str] = set()
        pods: set[tuple[str, str]] = set()
        for m in wave.moves:
            if m.gang in gangs:
                out.append(f"{where}: gang {m.gang} is moved twice")
            elif m.gang in moved_in:
                out.append(f"{where}: gang {m.gang} is moved by wave {moved_in[m.gang]} already")
            gangs.add(m.gang)
            moved_in.setdefault(m.gang, k)
            for p in m.pods:
                name = f"{p.namespace}/{p.pod}"
                if (p.namespace, p.pod) in pods:
                    out.append(f"{where}: pod {name} is moved twice")
                pods.add((p.namespace, p.pod))
                if (p.to.namespace, p.to.pod) != (p.namespace, p.pod):
                    out.append(f"{where}: pod {name} has the target of {p.to.namespace}/{p.to.pod}")
                for field_, node in (("node", p.node), ("to.node", p.to.node)):
                    if node not in nodes:
                        out.append(
                            f"{where}: pod {name}: {field_} {node!r} is no node of the cluster"
                        )
    for fp in plan.final.pods:
        if fp.node not in nodes:
            out.append(
                f"final: pod {fp.namespace}/{fp.pod}: node {fp.node!r} is no node of the cluster"
            )
    return out


@dataclass
class WaveReport:
    """One wave: the pods evicted and placed, and why it stopped ('' if it completed)."""

    index: int
    evicted: list[str] = field(default_factory=list)
    placed: list[str] = field(default_factory=list)
    stopped: str = ""


def _flight(move: GangMove, now: float) -> InFlight:
    ns = move.pods[0].namespace
    return InFlight(
        key=f"moves/{move.gang}",
        namespace=ns,
        started=now,
        placements={p.pod: p.to for p in move.pods},
    )


def apply_moves(
    api: KubeApi,
    config: ServeConfig,
    plan: MovePlan,
    *,
    wait: Callable[[], None],
    polls: int = 60,
    clock: Clock | None = None,
) -> list[WaveReport]:
    """Run ``plan`` wave by wave (module docstring). ``clock``: the loop's (default the
    system's).

    Raises:
        NotSynced: a watched kind could not be listed, e.g. an API server that cannot be
            reached (:func:`~gangplan.adapters.serve.run.apply_plan`'s check; nothing is
            evicted then). Once the waves start, API errors stop a wave and are reported.
        MovePlanRefused: :func:`check_move_plan` found problems (nothing is evicted).
    """
    from gangplan.adapters.serve.run import _require_synced, make_loop

    loop = make_loop(api, config, once=True, clock=clock)
    loop.cache.pump()
    _require_synced(loop)
    with loop.cache.locked():
        nodes = {name for _ns, name in loop.cache.objects("nodes")}
    problems = check_move_plan(plan, nodes)
    if problems:
        raise MovePlanRefused(problems)
    reports: list[WaveReport] = []
    for wave in plan.waves:
        rep = _run_wave(loop, wave, wait, polls)
        reports.append(rep)
        if rep.stopped:
            break
    return reports


def _run_wave(loop: object, wave: Wave, wait: Callable[[], None], polls: int) -> WaveReport:
    from gangplan.adapters.serve.loop import ServeLoop

    assert isinstance(loop, ServeLoop)
    rep = WaveReport(wave.index)
    loop.cache.pump()
    now = loop.clock.now()
    victims = []
    was: dict[tuple[str, str], PodPlacement] = {}
    for p in wave.evict:
        raw = loop.cache.get("pods", p.namespace, p.pod)
        if raw is None:
            rep.stopped = f"pod {p.namespace}/{p.pod} is not running"
            return rep
        if (raw.get("spec") or {}).get("nodeName") != p.node:
            rep.stopped = f"pod {p.namespace}/{p.pod} does not run on {p.node} now"
            return rep
        victims.append((p.namespace, p.pod, (raw.get("metadata") or {}).get("uid")))
        was[(p.namespace, p.pod)] = p.to.model_copy(
            update={"node": p.node, "gpus": _held_gpus(raw), "gpu_milli": None, "nics": ()}
        )
    flights = [_flight(m, now) for m in wave.moves]
    if not loop.config.dry_run:
        for f in flights:
            loop.ledger.add(f)  # the targets are held before anything is evicted
    out = evict_together(loop.api, loop.applier, victims)
    rep.evicted = out.evicted
    old = {(ns, n): uid for ns, n, uid in victims}
    if not out.complete:
        for f in flights:
            loop.ledger.remove(f.key)
        rep.stopped = out.message()
        if out.evicted:  # put the pods that went back where they ran: no gang left partly
            back = _put_back(wave, was, out.evicted, now)
            rep.placed = _place(loop, back, old, wait, polls, rep)
            rep.stopped += "; the evicted pods are put back where they ran"
        return rep
    _place(loop, flights, old, wait, polls, rep)
    return rep


def _held_gpus(raw: dict[str, object]) -> tuple[str, ...]:
    """The GPU ids a running pod holds, from its Koordinator device annotation (none: the
    device plugin chose them; the put-back pod lets it choose again)."""
    import json

    from gangplan.adapters.kube.bindings import DEVICE_ANNOTATION

    meta = raw.get("metadata")
    ann = (meta.get("annotations") or {}) if isinstance(meta, dict) else {}
    try:
        alloc = json.loads(ann.get(DEVICE_ANNOTATION) or "{}")
    except ValueError:
        return ()
    return tuple(str(a.get("id")) for a in alloc.get("gpu") or [] if a.get("id"))


def _put_back(
    wave: Wave, was: dict[tuple[str, str], PodPlacement], evicted: list[str], now: float
) -> list[InFlight]:
    gone = set(evicted)
    out = []
    for m in wave.moves:
        pods = {
            p.pod: was[(p.namespace, p.pod)] for p in m.pods if f"{p.namespace}/{p.pod}" in gone
        }
        if pods:
            out.append(InFlight(f"moves/{m.gang}", m.pods[0].namespace, now, pods))
    return out


def _place(
    loop: object,
    flights: list[InFlight],
    old: dict[tuple[str, str], str | None],
    wait: Callable[[], None],
    polls: int,
    rep: WaveReport,
) -> list[str]:
    """Wait for the flights' pods to exist again, then place them; the pods placed."""
    from gangplan.adapters.serve.loop import ServeLoop

    assert isinstance(loop, ServeLoop)
    now = loop.clock.now()
    if not loop.config.dry_run:
        for f in flights:
            loop.ledger.add(f)
    refs = _recreated(loop, flights, old, wait, polls)
    if refs is None:
        rep.stopped = rep.stopped or "the evicted pods were not created again in time"
        return []
    with loop.cache.locked():
        built = loop.live.build(
            held=loop.ledger.held(),
            held_gangs=set(loop.ledger.gangs),
            assumed=loop.ledger.assumed(now, loop.config.assume_ttl_s),
        )
    placed: list[str] = []
    for f in flights:
        mine = {n: r for (ns, n), r in refs.items() if ns == f.namespace}
        res = loop.applier.apply(f, built.snapshot, mine, built.hostnames, loop.clock.now())
        placed += [f"{f.namespace}/{n}" for n in res.done]
        if res.failed or res.broken:
            why = res.broken or "; ".join(f"{n}: {e}" for n, e in res.failed)
            rep.stopped = rep.stopped or f"placing {f.key}: {why}"
            break
    rep.placed = placed
    return placed


def _recreated(
    loop: object,
    flights: list[InFlight],
    old: dict[tuple[str, str], str | None],
    wait: Callable[[], None],
    polls: int,
) -> dict[tuple[str, str], PodRef] | None:
    """The wave's pods once every one exists again (a new UID, no node), or None."""
    from gangplan.adapters.serve.loop import ServeLoop

    assert isinstance(loop, ServeLoop)
    want = [(f.namespace, n) for f in flights for n in f.placements]
    for _ in range(polls):
        wait()
        loop.cache.pump()
        refs: dict[tuple[str, str], PodRef] = {}
        for ns, n in want:
            raw = loop.cache.get("pods", ns, n)
            if raw is None or (raw.get("spec") or {}).get("nodeName"):
                break
            ref = pod_ref(raw)
            if ref.uid == old.get((ns, n)):
                break
            refs[(ns, n)] = ref
        else:
            return refs
    return None
