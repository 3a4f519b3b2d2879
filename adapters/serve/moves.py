"""``gangplan apply MOVES.yaml``: a move plan (:class:`~gangplan.models.MovePlan`, from
``gangplan replan``) run on the cluster wave by wave, through the live loop's code path.

**Before anything is sent** the plan is checked whole against the cluster as it is now:
:func:`check_move_plan` (the plan against itself and the cluster's node names), then the
move verifier (:func:`~gangplan.solver.judges.verify_moves.verify_moves`) replaying every
wave on the live snapshot — the same rules as ``gangplan verify INSTANCE MOVES.yaml``:
readiness, cordon, taints and tolerations, each pod's own nodeSelector and affinity, its GPU
model, devices, capacity, ``preemptible``, whole gangs, an owner that recreates the pod,
the caller's per-wave caps and the PodDisruptionBudgets of the cluster (listed now, never
the plan's own). Any violation refuses the plan, each line naming the wave, the move and
the rule; nothing is evicted. The plan's ``final`` is not applied here (``gangplan serve``
plans the pending gangs), so it is not checked.

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
was to leave. The pod that replaces an evicted one is found as its owner recreates it
(:class:`~gangplan.models.PodOwner`, :mod:`gangplan.models.owners`): under the same name (a
StatefulSet, a Volcano or Kubeflow job), or — an Indexed Job's pod, e.g. a JobSet's — as the
pod, not bound yet and with a new UID, whose controller is the same Job and whose completion
index is the same (exactly one such pod; two are not told apart and the wave stops).

**Dry run** (``dry_run`` in the configuration): the checks above run, then each wave's
requests are recorded and nothing is sent or waited for: the Evictions, then the patches
(gate) or Bindings (bind) its placements would send. A placement's request names the
evicted pod; the recreated pod it would go to does not exist yet, so its UID and
``resourceVersion`` read ``(the recreated pod's)``, and an Indexed Job's pod gets it under
its new name.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Literal, Protocol

from gangplan.adapters.kube.owners import owner_of, owner_refs
from gangplan.adapters.kube.topology import match_labels
from gangplan.adapters.serve.api import KINDS, ApiError, KubeApi, Obj
from gangplan.adapters.serve.clock import Clock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.contracts import Binder, CacheView, Evicting
from gangplan.adapters.serve.evict import disruptions_allowed
from gangplan.adapters.serve.ledger import InFlight, Ledger
from gangplan.adapters.serve.run import make_loop
from gangplan.adapters.serve.snapshot import Built, PodRef, pod_ref
from gangplan.models import (
    DisruptionBudget,
    GangMove,
    MovePlan,
    PodOwner,
    PodPlacement,
    Snapshot,
    Wave,
    WaveLimits,
)
from gangplan.solver.judges.verify_moves import verify_moves

__all__ = [
    "MoveHost",
    "MovePlanRefused",
    "WaveReport",
    "apply_moves",
    "check_move_plan",
    "live_budgets",
]

PDB = KINDS["poddisruptionbudgets.policy"]
UNKNOWN = "(the recreated pod's)"
"""The UID and resourceVersion a dry run's placement requests carry (module docstring)."""

Owners = dict[tuple[str, str], PodOwner | Literal["none"] | None]
"""Each running pod's controller by ``(namespace, name)``, as the live snapshot read it."""


class MoveHost(Protocol):
    """What running a move plan needs of the loop
    (:class:`~gangplan.adapters.serve.loop.ServeLoop` has it): its configuration and clock,
    the cache, the ledger that holds the targets, the applier and the evictor, and its
    snapshot (:meth:`~gangplan.adapters.serve.loop.ServeLoop.snapshot`)."""

    @property
    def config(self) -> ServeConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def cache(self) -> CacheView: ...

    @property
    def ledger(self) -> Ledger: ...

    @property
    def applier(self) -> Binder: ...

    @property
    def evictor(self) -> Evicting: ...

    def snapshot(self, now: float) -> Built: ...


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


def live_budgets(
    api: KubeApi, snapshot: Snapshot, namespaces: Collection[str]
) -> list[DisruptionBudget]:
    """The PodDisruptionBudgets of ``namespaces`` as the move verifier counts them: the
    snapshot's running pods each selects (by its ``spec.selector`` over the pods' labels as
    the API lists them) and the disruptions it allows now
    (:func:`~gangplan.adapters.serve.evict.disruptions_allowed`: its status, else its spec
    as integers); a budget that says nothing usable, or selects none of them, is left out.

    Raises:
        ApiError: a list failed (the caller refuses the plan: budgets it cannot read are
            not taken as none).
    """
    running = {(p.namespace, p.name) for p in snapshot.running}
    out: list[DisruptionBudget] = []
    for ns in sorted(set(namespaces)):
        pdbs = api.list(PDB, ns).items
        pods = api.list(KINDS["pods"], ns).items
        for pdb in pdbs:
            sel = (pdb.get("spec") or {}).get("selector")
            meta = pdb.get("metadata") or {}
            allowed = disruptions_allowed(pdb, pods)
            if sel is None or allowed is None:
                continue
            chosen = sorted(
                name
                for p in pods
                if (ns, name := str((p.get("metadata") or {}).get("name"))) in running
                and match_labels(sel, (p.get("metadata") or {}).get("labels") or {})
            )
            if chosen:
                out.append(
                    DisruptionBudget(
                        name=str(meta.get("name")),
                        namespace=ns,
                        pods=tuple(chosen),
                        disruptions_allowed=max(0, allowed),
                    )
                )
    return out


@dataclass
class WaveReport:
    """One wave: the pods evicted and placed (in a dry run: to be), why it stopped ('' if
    it completed), and in a dry run the requests it would send, in order."""

    index: int
    evicted: list[str] = field(default_factory=list)
    placed: list[str] = field(default_factory=list)
    stopped: str = ""
    requests: list[Obj] = field(default_factory=list)


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
    limits: WaveLimits | None = None,
) -> list[WaveReport]:
    """Run ``plan`` wave by wave (module docstring). ``clock``: the loop's (default the
    system's); ``limits``: the per-wave caps (default :class:`~gangplan.models.WaveLimits`'s:
    2 pods off one node) and any budgets besides the cluster's; the plan's own are not
    read. In a dry run ``wait`` is never called.

    Raises:
        NotSynced: a watched kind could not be listed, e.g. an API server that cannot be
            reached (:meth:`~gangplan.adapters.serve.cache.Cache.require_synced`; nothing is
            evicted then). Once the waves start, API errors stop a wave and are reported.
        MovePlanRefused: :func:`check_move_plan` or the move verifier found problems, or
            the PodDisruptionBudgets could not be read (nothing is evicted).
    """
    loop = make_loop(api, config, once=True, clock=clock)
    loop.cache.pump()
    loop.cache.require_synced()
    with loop.cache.locked():
        nodes = {name for _ns, name in loop.cache.objects("nodes")}
    problems = check_move_plan(plan, nodes)
    if problems:
        raise MovePlanRefused(problems)
    now = loop.clock.now()
    with loop.cache.locked():
        built = loop.snapshot(now)
    snap = built.snapshot
    lim = limits if limits is not None else WaveLimits()
    namespaces = {p.namespace for w in plan.waves for p in w.evict}
    try:
        budgets = live_budgets(api, snap, namespaces)
    except ApiError as err:
        raise MovePlanRefused([f"cannot read the PodDisruptionBudgets: {err}"]) from None
    lim = lim.model_copy(update={"budgets": (*lim.budgets, *budgets)})
    violations = verify_moves(snap, plan, limits=lim, final=False)
    if violations:
        raise MovePlanRefused(
            [f"the move plan does not hold on the cluster now: {v}" for v in violations]
        )
    owners: Owners = {(p.namespace, p.name): p.owner for p in snap.running}
    if loop.config.dry_run:
        return [_dry_wave(loop, wave, snap, built.hostnames, owners) for wave in plan.waves]
    reports: list[WaveReport] = []
    for wave in plan.waves:
        rep = _run_wave(loop, wave, wait, polls, owners)
        reports.append(rep)
        if rep.stopped:
            break
    return reports


def _dry_wave(
    loop: MoveHost, wave: Wave, snap: Snapshot, hostnames: dict[str, str], owners: Owners
) -> WaveReport:
    """The requests of one wave, recorded, none sent (module docstring)."""
    rep = WaveReport(wave.index)
    start = len(loop.applier.requests)
    for p in wave.evict:
        loop.applier.evict(p.namespace, p.pod, None)
        rep.evicted.append(f"{p.namespace}/{p.pod}")
    now = loop.clock.now()
    gates = (loop.applier.gate,) if loop.applier.mode == "gate" else ()
    for move in wave.moves:
        f = _flight(move, now)
        refs = {
            name: PodRef(f.namespace, name, UNKNOWN, UNKNOWN, gates, {}, {})
            for name in f.placements
        }
        res = loop.applier.apply(f, snap, refs, hostnames, now)
        rep.placed += [f"{f.namespace}/{n}" for n in res.done]
    rep.requests = loop.applier.requests[start:]
    return rep


def _run_wave(
    loop: MoveHost, wave: Wave, wait: Callable[[], None], polls: int, owners: Owners
) -> WaveReport:
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
    out = loop.evictor.together(victims)
    rep.evicted = out.evicted
    old = {(ns, n): uid for ns, n, uid in victims}
    if not out.complete:
        for f in flights:
            loop.ledger.remove(f.key)
        rep.stopped = out.message()
        if out.evicted:  # put the pods that went back where they ran: no gang left partly
            back = _put_back(wave, was, out.evicted, now)
            rep.placed = _place(loop, back, old, owners, wait, polls, rep)
            rep.stopped += "; the evicted pods are put back where they ran"
        return rep
    _place(loop, flights, old, owners, wait, polls, rep)
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
    loop: MoveHost,
    flights: list[InFlight],
    old: dict[tuple[str, str], str | None],
    owners: Owners,
    wait: Callable[[], None],
    polls: int,
    rep: WaveReport,
) -> list[str]:
    """Wait for the flights' pods to exist again, then place them; the pods placed."""
    now = loop.clock.now()
    if not loop.config.dry_run:
        for f in flights:
            loop.ledger.add(f)
    refs, why = _recreated(loop, flights, old, owners, wait, polls)
    if refs is None:
        rep.stopped = rep.stopped or f"the evicted pods were not created again in time ({why})"
        return []
    flights = [_renamed(f, refs) for f in flights]
    for f in flights:  # an Indexed Job's pods under their new names
        loop.ledger.add(f)
    with loop.cache.locked():
        built = loop.snapshot(now)
    placed: list[str] = []
    for f in flights:
        mine = {r.name: r for (ns, _n), r in refs.items() if ns == f.namespace}
        res = loop.applier.apply(f, built.snapshot, mine, built.hostnames, loop.clock.now())
        placed += [f"{f.namespace}/{n}" for n in res.done]
        if res.failed or res.broken:
            why = res.broken or "; ".join(f"{n}: {e}" for n, e in res.failed)
            rep.stopped = rep.stopped or f"placing {f.key}: {why}"
            break
    rep.placed = placed
    return placed


def _renamed(flight: InFlight, refs: dict[tuple[str, str], PodRef]) -> InFlight:
    """``flight`` with each evicted pod's placement under the name of the pod that
    replaced it."""
    placements = {}
    for name, to in flight.placements.items():
        ref = refs.get((flight.namespace, name))
        new = ref.name if ref is not None else name
        placements[new] = to if new == name else to.model_copy(update={"pod": new})
    return InFlight(flight.key, flight.namespace, flight.started, placements)


def _recreated(
    loop: MoveHost,
    flights: list[InFlight],
    old: dict[tuple[str, str], str | None],
    owners: Owners,
    wait: Callable[[], None],
    polls: int,
) -> tuple[dict[tuple[str, str], PodRef] | None, str]:
    """The pod that replaced each of the wave's pods (by the evicted pod's
    ``(namespace, name)``) once every one exists, or None and why not."""
    want = [(f.namespace, n) for f in flights for n in f.placements]
    why = ""
    for _ in range(polls):
        wait()
        loop.cache.pump()
        with loop.cache.locked():
            refs, why = _find_recreated(loop.cache.objects("pods"), want, old, owners)
        if refs is not None:
            return refs, ""
    return None, why


def _find_recreated(
    pods: dict[tuple[str, str], Obj],
    want: list[tuple[str, str]],
    old: dict[tuple[str, str], str | None],
    owners: Owners,
) -> tuple[dict[tuple[str, str], PodRef] | None, str]:
    """One look at the cache's ``pods`` for the pods that replace ``want`` (module
    docstring); None and the first pod not found yet, and why."""
    refs: dict[tuple[str, str], PodRef] = {}
    by_index: dict[tuple[str, str, str, str, str | None], list[Obj]] | None = None
    for ns, n in want:
        owner = owners.get((ns, n))
        if isinstance(owner, PodOwner) and owner.follow == "index":
            if by_index is None:
                by_index = _by_owner_index(pods)
            key = (ns, owner.group, owner.kind, owner.name, owner.index)
            fresh = [r for r in by_index.get(key, []) if _fresh(r, old.get((ns, n)))]
            if len(fresh) != 1:
                what = f"{owner.describe()} index {owner.index}"
                if not fresh:
                    return None, f"no new pod of {what} for {ns}/{n} yet"
                names = ", ".join(sorted(pod_ref(r).name for r in fresh))
                return None, f"{len(fresh)} new pods of {what} for {ns}/{n}: {names}"
            raw = fresh[0]
        else:
            found = pods.get((ns, n))
            if found is None or not _fresh(found, old.get((ns, n))):
                return None, f"{ns}/{n} not created again yet"
            raw = found
        refs[(ns, n)] = pod_ref(raw)
    return refs, ""


def _fresh(raw: Obj, old_uid: str | None) -> bool:
    """A pod created after the eviction: another UID, not bound yet."""
    meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
    return not spec.get("nodeName") and meta.get("uid") != old_uid


def _by_owner_index(
    pods: dict[tuple[str, str], Obj],
) -> dict[tuple[str, str, str, str, str | None], list[Obj]]:
    """The cache's pods by (namespace, their controller's group, kind and name, their
    index), as :func:`~gangplan.adapters.kube.owners.owner_of` reads them."""
    out: dict[tuple[str, str, str, str, str | None], list[Obj]] = {}
    for (ns, name), raw in pods.items():
        meta = raw.get("metadata") or {}
        owner = owner_of(
            owner_refs(meta.get("ownerReferences")),
            name,
            meta.get("labels") or {},
            meta.get("annotations") or {},
        )
        if isinstance(owner, PodOwner):
            key = (ns, owner.group, owner.kind, owner.name, owner.index)
            out.setdefault(key, []).append(raw)
    return out
