"""The independent move-plan verifier: a :class:`~gangplan.models.MovePlan` replayed wave
by wave on its snapshot, every rule of ``docs/solver.md`` ("Replan: moves in waves") checked.

It imports only :mod:`gangplan.models`, :mod:`gangplan.topology` and the plan verifier
(:mod:`gangplan.solver.judges.verify`) — not the wave planner, not the replan model — so a
bug there cannot hide itself here. :func:`verify_moves` returns every violation found
(empty: the plan is valid).

**What is checked, and against what.** Everything a wave may break is judged against the
snapshot (the instance, or the live cluster) and the caller's ``limits``, never against
what the plan says of itself: the per-wave caps are the caller's (``gangplan verify
--max-moving-per-node``, ``gangplan apply``'s), the PodDisruptionBudgets the snapshot's
(:attr:`Snapshot.disruption_budgets <gangplan.models.Snapshot.disruption_budgets>`) plus the
caller's; a plan's own ``limits`` are what its planner used and are not read. Per wave,
before it runs:

* ``references`` — every evicted pod runs, now, on the node the wave names, in the gang the
  move names; its target is the same pod on a node of the snapshot; a gang moves once per
  wave; waves are numbered 0, 1, ...;
* ``gang_whole`` — a move takes every running pod of its gang, each once;
* ``preemptible`` — no moved gang that does not tolerate disruption (``preemptible: false``:
  an annotation, a label, or a PodDisruptionBudget that allows none);
* ``recreated`` — every moved pod has an owner that creates it again once evicted, under a
  name or an index that can be followed (:func:`~gangplan.models.why_not_recreated`; an
  owner the snapshot does not state is taken at its word);
* ``budgets`` — the caps on pods moving off one node and of one namespace, and on waves;
* ``disruption_budget`` — per PodDisruptionBudget, the pods it selects that the wave evicts
  are at most its ``disruptions_allowed``.

After the wave's evictions and placements, each placed pod is judged by the checks of the
plan verifier itself (:func:`~gangplan.solver.judges.verify.check_node_readiness`,
:func:`~gangplan.solver.judges.verify.check_selectors`,
:func:`~gangplan.solver.judges.verify.check_capacity`: written once, run here on the
wave's state): ``readiness`` (Ready, not cordoned, every ``NoSchedule`` / ``NoExecute`` taint
tolerated by the pod's own tolerations), ``selector`` and ``affinity`` (the pod's own
nodeSelector and required node affinity), ``gpu_model`` (a pod asking GPUs stays on the GPU
model it runs on now), ``devices`` (as many GPUs and NICs as it asks, of its node, each whole
GPU and NIC to one pod) and ``capacity`` (what the pods that stay, the pods earlier waves
placed and this wave's leave free). The wave's state is the snapshot's running pods where
the earlier waves left them, each holding the devices it holds (the snapshot's derivation
for a pod that has not moved, its target's for one that has), less the pods this wave
evicts. ``last_state``: after the last wave every running pod still runs, where ``target``
says. ``final``: the plan's ``final`` is checked by :func:`~gangplan.solver.judges.verify.
verify` in full, on the state after the last wave (rules as there).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from gangplan.models import (
    DisruptionBudget,
    Gang,
    MovePlan,
    PodPlacement,
    Role,
    RunningPod,
    Snapshot,
    Wave,
    WaveLimits,
    why_not_recreated,
)
from gangplan.solver.judges.verify import (
    Violation,
    check_capacity,
    check_node_readiness,
    check_selectors,
    verify,
    wave_context,
)

__all__ = ["MoveViolation", "after_waves", "verify_moves"]


@dataclass(frozen=True)
class MoveViolation:
    """One broken rule: ``rule`` (e.g. ``capacity``), the wave (None: the state after the
    last wave, or the final plan), and a message naming the move and the objects."""

    rule: str
    wave: int | None
    message: str

    def __str__(self) -> str:
        where = "final" if self.wave is None else f"wave {self.wave}"
        return f"[{self.rule}] {where}: {self.message}"


@dataclass
class _State:
    """Where every running pod is and the devices it holds (module docstring)."""

    snapshot: Snapshot
    node: dict[tuple[str, str], str] = field(default_factory=dict)
    devices: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    pods: dict[tuple[str, str], RunningPod] = field(default_factory=dict)
    gang: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def of(cls, snapshot: Snapshot) -> _State:
        st = cls(snapshot)
        rules = snapshot.preemption_rules
        for p in snapshot.running:
            key = (p.namespace, p.name)
            hold = snapshot.free(p.node).holds.get(key)
            st.pods[key] = p
            st.node[key] = p.node
            st.devices[key] = (*hold.gpu_milli, *hold.nics) if hold is not None else p.devices
            st.gang[key] = rules.key_of(p)
        return st

    def gang_pods(self, gang: str) -> set[tuple[str, str]]:
        return {k for k, g in self.gang.items() if g == gang}

    def running(self, nodes: set[str], without: set[tuple[str, str]]) -> list[RunningPod]:
        """The running pods on ``nodes`` but ``without``, where they are now, holding the
        devices they hold (named)."""
        return [
            self.pods[k].model_copy(update={"node": n, "devices": self.devices[k]})
            for k, n in self.node.items()
            if n in nodes and k not in without
        ]


def _limited(snapshot: Snapshot, **update: object) -> Snapshot:
    """``snapshot`` with some fields replaced, built without validation and without any
    value the original has derived (its free amounts follow its running pods)."""
    fields = {name: getattr(snapshot, name) for name in Snapshot.model_fields}
    fields.update(update)
    return Snapshot.model_construct(**fields)


@dataclass
class _Ctx:
    snapshot: Snapshot
    plan: MovePlan
    state: _State
    limits: WaveLimits
    budgets: tuple[DisruptionBudget, ...]
    wave: Wave | None = None


def check_references(ctx: _Ctx) -> Iterator[str]:
    """Every evicted pod runs, now, on the node the wave names; its target is the same pod
    (name, namespace) on a node of the snapshot; a gang moves at most once per wave."""
    assert ctx.wave is not None
    seen: set[str] = set()
    for move in ctx.wave.moves:
        if move.gang in seen:
            yield f"gang {move.gang} moves twice in one wave"
        seen.add(move.gang)
        for mp in move.pods:
            key = (mp.namespace, mp.pod)
            node = ctx.state.node.get(key)
            if node is None:
                yield f"move of {move.gang}: pod {mp.namespace}/{mp.pod} is not running"
            elif node != mp.node:
                yield (
                    f"move of {move.gang}: pod {mp.namespace}/{mp.pod} runs on {node!r}, "
                    f"not {mp.node!r}"
                )
            elif ctx.state.gang[key] != move.gang:
                yield (
                    f"move of {move.gang}: pod {mp.namespace}/{mp.pod} belongs to "
                    f"{ctx.state.gang[key]}"
                )
            if (mp.to.pod, mp.to.namespace) != (mp.pod, mp.namespace):
                yield (
                    f"move of {move.gang}: pod {mp.namespace}/{mp.pod} is placed as "
                    f"{mp.to.namespace}/{mp.to.pod}"
                )
            if mp.to.node not in ctx.snapshot.node_by_name:
                yield (
                    f"move of {move.gang}: pod {mp.namespace}/{mp.pod}: target node "
                    f"{mp.to.node!r} does not exist"
                )


def check_gang_whole(ctx: _Ctx) -> Iterator[str]:
    """A move takes every running pod of its gang, each pod once: no gang is left partly
    moved (some pods evicted, others running where they were)."""
    assert ctx.wave is not None
    for move in ctx.wave.moves:
        named = [(p.namespace, p.pod) for p in move.pods]
        if len(set(named)) != len(named):
            yield f"move of {move.gang}: a pod is moved twice"
        missing = ctx.state.gang_pods(move.gang) - set(named)
        if missing:
            left = ", ".join(sorted(f"{ns}/{n}" for ns, n in missing))
            yield f"gang {move.gang} partly moved: {left} keep running where they were"


def check_preemptible(ctx: _Ctx) -> Iterator[str]:
    """No moved gang that does not tolerate disruption (``preemptible: false``)."""
    assert ctx.wave is not None
    gangs = ctx.snapshot.preemption_rules.gangs
    for move in ctx.wave.moves:
        rg = gangs.get(move.gang)
        if rg is not None and not rg.preemptible:
            who = [p.name for p in rg.pods if not p.preemptible]
            yield (
                f"move of {move.gang}: the gang does not tolerate disruption (preemptible: "
                f"false on {', '.join(who[:3])}{', ...' if len(who) > 3 else ''})"
            )


def check_recreated(ctx: _Ctx) -> Iterator[str]:
    """Every moved pod has an owner that creates it again, where it can be followed."""
    assert ctx.wave is not None
    for move in ctx.wave.moves:
        for mp in move.pods:
            pod = ctx.state.pods.get((mp.namespace, mp.pod))
            why = why_not_recreated(pod.owner) if pod is not None else None
            if why is not None:
                yield f"move of {move.gang}: pod {mp.namespace}/{mp.pod} is {why}"


def check_wave_budgets(ctx: _Ctx) -> Iterator[str]:
    """At most ``max_moving_per_node`` pods move off one node, ``max_moving_per_namespace``
    pods of one namespace move, and the waves are at most ``max_waves`` (the caller's
    limits)."""
    assert ctx.wave is not None
    lim = ctx.limits
    per_node = Counter(p.node for p in ctx.wave.evict)
    per_ns = Counter(p.namespace for p in ctx.wave.evict)
    if lim.max_moving_per_node is not None:
        for node, k in sorted(per_node.items()):
            if k > lim.max_moving_per_node:
                yield f"{k} pods move off node {node!r} (at most {lim.max_moving_per_node})"
    if lim.max_moving_per_namespace is not None:
        for ns, k in sorted(per_ns.items()):
            if k > lim.max_moving_per_namespace:
                yield (
                    f"{k} pods of namespace {ns!r} move (at most {lim.max_moving_per_namespace})"
                )
    if lim.max_waves is not None and ctx.wave.index >= lim.max_waves:
        yield f"wave {ctx.wave.index} is past the limit of {lim.max_waves} waves"


def check_disruption_budgets(ctx: _Ctx) -> Iterator[str]:
    """Per PodDisruptionBudget (the snapshot's and the caller's), the pods it selects that
    this wave evicts are at most its ``disruptions_allowed`` (the Eviction API refuses the
    next one with 429)."""
    assert ctx.wave is not None
    moving = {(p.namespace, p.pod) for p in ctx.wave.evict}
    for b in ctx.budgets:
        k = sum(1 for name in b.pods if (b.namespace, name) in moving)
        if k > b.disruptions_allowed:
            yield (
                f"PodDisruptionBudget {b.namespace}/{b.name}: {k} of its pods evicted at once, "
                f"{b.disruptions_allowed} allowed"
            )


MOVE_CHECKS = (
    ("references", check_references),
    ("gang_whole", check_gang_whole),
    ("preemptible", check_preemptible),
    ("recreated", check_recreated),
    ("budgets", check_wave_budgets),
    ("disruption_budget", check_disruption_budgets),
)
"""The checks of a wave before it runs, by rule name (its placements are checked after)."""


def _as_gang(snapshot: Snapshot, pod: RunningPod, key: str) -> tuple[Gang, Role]:
    """A moved pod as the plan verifier's checks read it: one role of one pod, with its own
    requests, selector, affinity and tolerations, accepting the GPU model it runs on now."""
    node = snapshot.node_by_name.get(pod.node)
    model = node.gpu_model if node is not None else None
    asks_gpu = pod.requests.get(snapshot.gpu, 0) > 0
    # model_construct: requests are base units already, and the names are the pod's
    role = Role.model_construct(
        name=pod.name,
        count=1,
        requests=dict(pod.requests),
        node_selector=dict(pod.node_selector),
        node_affinity=pod.node_affinity,
        tolerations=pod.tolerations,
    )
    ns, _, name = key.partition("/")
    gang = Gang.model_construct(
        name=name,
        namespace=ns,
        queue=pod.queue or "",
        roles=(role,),
        gpu_models=(model,) if asks_gpu and model is not None else (),
    )
    return gang, role


def _placement_checks(ctx: _Ctx, k: int) -> Iterator[MoveViolation]:
    """The wave's placements judged by the plan verifier's own checks (module docstring)."""
    assert ctx.wave is not None
    s, st = ctx.snapshot, ctx.state
    gone = {(p.namespace, p.pod) for p in ctx.wave.evict if (p.namespace, p.pod) in st.pods}
    arriving: dict[str, list[tuple[str, PodPlacement, Gang, Role]]] = defaultdict(list)
    for move in ctx.wave.moves:
        for mp in move.pods:
            pod = st.pods.get((mp.namespace, mp.pod))
            if pod is None or mp.to.node not in s.node_by_name:
                continue  # check_references says so
            gang, role = _as_gang(s, pod, move.gang)
            arriving[mp.to.node].append((move.gang, mp.to, gang, role))
    if not arriving:
        return
    running = st.running(set(arriving), gone)
    wave_snap = _limited(
        s,
        nodes=tuple(s.node_by_name[n] for n in sorted(arriving)),
        running=tuple(running),
        gangs=(),
        reservations=(),
    )
    for node, group in sorted(arriving.items()):
        pods = [(p, g, r) for _gang, p, g, r in group]
        moves = sorted({gang for gang, *_ in group})
        who = f"move of {', '.join(moves)} onto node {node!r}"
        for gang_key in moves:
            mine = [(p, g, r) for gang, p, g, r in group if gang == gang_key]
            ctx_one = wave_context(wave_snap, mine)
            for check in (check_node_readiness, check_selectors):
                for v in check(ctx_one):
                    yield MoveViolation(v.rule, k, f"move of {gang_key}: {v.message}")
        for v in check_capacity(wave_context(wave_snap, pods)):
            yield MoveViolation(v.rule, k, f"{who}: {v.message}")


def _apply(ctx: _Ctx) -> None:
    """Evict every pod of the wave, then place it (only pods that run where named)."""
    assert ctx.wave is not None
    st = ctx.state
    for move in ctx.wave.moves:
        for mp in move.pods:
            key = (mp.namespace, mp.pod)
            if st.node.get(key) != mp.node or mp.to.node not in ctx.snapshot.node_by_name:
                continue
            st.node[key] = mp.to.node
            st.devices[key] = (*mp.to.gpus, *mp.to.nics)


def after_waves(snapshot: Snapshot, plan: MovePlan) -> Snapshot:
    """The snapshot after ``plan``'s waves, as this verifier replays them: every moved pod
    at its last target holding the devices given there, every other pod holding the devices
    it holds now (named). Not validated again (its parts are the snapshot's)."""
    ctx = _Ctx(snapshot, plan, _State.of(snapshot), WaveLimits(), ())
    for wave in plan.waves:
        ctx.wave = wave
        _apply(ctx)
    return _after(ctx)


def _after(ctx: _Ctx) -> Snapshot:
    st = ctx.state
    running = tuple(
        st.pods[k].model_copy(update={"node": n, "devices": st.devices[k]})
        for k, n in st.node.items()
    )
    return _limited(ctx.snapshot, running=running)


def verify_moves(
    snapshot: Snapshot,
    plan: MovePlan,
    *,
    target: dict[tuple[str, str], str] | None = None,
    limits: WaveLimits | None = None,
    final: bool = True,
) -> list[MoveViolation]:
    """Replay ``plan`` on ``snapshot`` and return every violation (empty: valid).

    ``target``: where each running pod (``(namespace, name)``) must run after the last
    wave (the plan the waves were made for); a pod it does not name must run where it ran.
    Without it, only that every running pod still runs. ``limits``: the per-wave caps and
    any PodDisruptionBudgets besides the snapshot's (default: :class:`WaveLimits`'s, 2 pods
    per node, Koordinator's default); the plan's own ``limits`` are not read. ``final``:
    also check the plan's ``final`` (when it names any gang or pod) with
    :func:`~gangplan.solver.judges.verify.verify` on the state after the waves.
    """
    lim = limits if limits is not None else WaveLimits()
    budgets = (*snapshot.disruption_budgets, *lim.budgets)
    out: list[MoveViolation] = []
    ctx = _Ctx(snapshot, plan, _State.of(snapshot), lim, budgets)
    for k, wave in enumerate(plan.waves):
        if wave.index != k:
            out.append(MoveViolation("references", k, f"wave numbered {wave.index}, expected {k}"))
        ctx.wave = wave
        for rule, check in MOVE_CHECKS:
            out += [MoveViolation(rule, k, msg) for msg in check(ctx)]
        out += list(_placement_checks(ctx, k))
        _apply(ctx)
    out += [MoveViolation("last_state", None, msg) for msg in _last_state(snapshot, ctx, target)]
    if final and (plan.final.gangs or plan.final.pods):
        after = _after(ctx)
        out += [_final(v) for v in verify(after, plan.final)]
    return out


def _final(v: Violation) -> MoveViolation:
    return MoveViolation(v.rule, None, f"final plan: {v.message}")


def _last_state(
    snapshot: Snapshot, ctx: _Ctx, target: dict[tuple[str, str], str] | None
) -> Iterator[str]:
    """Every running pod still runs, where ``target`` says (else where it ran)."""
    for p in snapshot.running:
        key = (p.namespace, p.name)
        node = ctx.state.node.get(key)
        if node is None:
            yield f"running pod {p.namespace}/{p.name} is gone"
            continue
        want = target.get(key, p.node) if target is not None else None
        if want is not None and node != want:
            yield f"pod {p.namespace}/{p.name} ends on {node!r}, the plan puts it on {want!r}"
