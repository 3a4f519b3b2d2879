"""The independent move-plan verifier: a :class:`~gangplan.models.MovePlan` replayed wave
by wave on its snapshot, every rule of ``docs/design.md`` ("Evictions and moves") checked.

It imports only :mod:`gangplan.models` and :mod:`gangplan.topology` — not the wave planner,
not the replan model, not :mod:`gangplan.solver.judges.verify` — so a bug there cannot hide
itself here. One ``check_*`` per rule, each run on every wave; :func:`verify_moves`
returns every violation found (empty: the plan is valid).

The state is counted, not clamped: per node the requests of the pods on it, per GPU device
the milli-GPU its pods hold, per NIC its holder (running pods hold what
:meth:`Snapshot.free <gangplan.models.Snapshot.free>` derives). A wave evicts its pods,
then places them; a node that receives pods must then hold at most its allocatable of
every resource they ask, each GPU at most 1000 milli, each NIC one pod. The pending gangs
of the plan's ``final`` are placed after the last wave, by the same rule.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gangplan.models import (
    GPU_MILLI,
    GangMove,
    MovePlan,
    PodPlacement,
    PreemptionRules,
    Snapshot,
    Wave,
    format_quantity,
)

__all__ = ["MOVE_CHECKS", "MoveViolation", "verify_moves"]


@dataclass(frozen=True)
class MoveViolation:
    """One broken rule: ``rule`` (e.g. ``capacity``), the wave (None: the final state), and a
    message naming the objects."""

    rule: str
    wave: int | None
    message: str

    def __str__(self) -> str:
        where = "final" if self.wave is None else f"wave {self.wave}"
        return f"[{self.rule}] {where}: {self.message}"


@dataclass
class _Pod:
    node: str
    requests: dict[str, int]
    gpu: dict[str, int]
    nics: tuple[str, ...]
    gang: str


@dataclass
class _State:
    """Where every running pod is, and what each node holds (module docstring)."""

    snapshot: Snapshot
    pods: dict[tuple[str, str], _Pod] = field(default_factory=dict)
    used: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    gpu: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    nics: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    @classmethod
    def of(cls, snapshot: Snapshot) -> _State:
        st = cls(snapshot)
        rules = PreemptionRules(snapshot)
        for p in snapshot.running:
            hold = snapshot.free(p.node).holds.get((p.namespace, p.name))
            gpu = dict(hold.gpu_milli) if hold is not None else {}
            nics = tuple(hold.nics) if hold is not None else ()
            st.add(
                (p.namespace, p.name), _Pod(p.node, dict(p.requests), gpu, nics, rules.key_of(p))
            )
        return st

    def add(self, key: tuple[str, str], pod: _Pod) -> None:
        self.pods[key] = pod
        self.used[pod.node].update(pod.requests)
        self.gpu[pod.node].update(pod.gpu)
        self.nics[pod.node].update(pod.nics)

    def remove(self, key: tuple[str, str]) -> _Pod:
        pod = self.pods.pop(key)
        self.used[pod.node].subtract(pod.requests)
        self.gpu[pod.node].subtract(pod.gpu)
        self.nics[pod.node].subtract(pod.nics)
        return pod

    def gang_pods(self, gang: str) -> set[tuple[str, str]]:
        return {k for k, p in self.pods.items() if p.gang == gang}


def _holds(p: PodPlacement, requests: dict[str, int], gpu_name: str) -> dict[str, int]:
    """The milli-GPU per device a placement holds."""
    want = requests.get(gpu_name, 0)
    if 0 < want < GPU_MILLI:
        return {d: p.gpu_milli or want for d in p.gpus}
    return {d: GPU_MILLI for d in p.gpus}


@dataclass
class _Ctx:
    snapshot: Snapshot
    plan: MovePlan
    state: _State
    wave: Wave | None = None
    arrived: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """nodes that received pods in the step being checked -> the resources they ask"""


Check = Callable[[_Ctx], Iterator[str]]


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
            pod = ctx.state.pods.get((mp.namespace, mp.pod))
            if pod is None:
                yield f"pod {mp.namespace}/{mp.pod} of {move.gang} is not running"
            elif pod.node != mp.node:
                yield f"pod {mp.namespace}/{mp.pod} runs on {pod.node!r}, not {mp.node!r}"
            elif pod.gang != move.gang:
                yield f"pod {mp.namespace}/{mp.pod} belongs to {pod.gang}, not {move.gang}"
            if (mp.to.pod, mp.to.namespace) != (mp.pod, mp.namespace):
                yield f"pod {mp.namespace}/{mp.pod} is placed as {mp.to.namespace}/{mp.to.pod}"
            if mp.to.node not in ctx.snapshot.node_by_name:
                yield f"pod {mp.namespace}/{mp.pod}: target node {mp.to.node!r} does not exist"


def check_gang_whole(ctx: _Ctx) -> Iterator[str]:
    """A move takes every running pod of its gang, each pod once: no gang is left partly
    moved (some pods evicted, others running where they were)."""
    assert ctx.wave is not None
    for move in ctx.wave.moves:
        named = [(p.namespace, p.pod) for p in move.pods]
        if len(set(named)) != len(named):
            yield f"gang {move.gang}: a pod is moved twice"
        running = ctx.state.gang_pods(move.gang)
        missing = running - set(named)
        if missing:
            left = ", ".join(sorted(f"{ns}/{n}" for ns, n in missing))
            yield f"gang {move.gang} partly moved: {left} keep running where they were"


def check_wave_budgets(ctx: _Ctx) -> Iterator[str]:
    """At most ``max_moving_per_node`` pods move off one node, ``max_moving_per_namespace``
    pods of one namespace move, and the waves are at most ``max_waves``."""
    assert ctx.wave is not None
    lim = ctx.plan.limits
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
    """Per PodDisruptionBudget, the pods it selects that this wave evicts are at most its
    ``disruptions_allowed`` (the Eviction API refuses the next one with 429)."""
    assert ctx.wave is not None
    moving = {(p.namespace, p.pod) for p in ctx.wave.evict}
    for b in ctx.plan.limits.budgets:
        k = sum(1 for name in b.pods if (b.namespace, name) in moving)
        if k > b.disruptions_allowed:
            yield (
                f"PodDisruptionBudget {b.namespace}/{b.name}: {k} of its pods evicted at once, "
                f"{b.disruptions_allowed} allowed"
            )


def check_capacity(ctx: _Ctx) -> Iterator[str]:
    """After the step, every node that received pods holds at most its allocatable of each
    resource they ask; each of its GPUs at most 1000 milli-GPU; each NIC one pod; and every
    device given exists there."""
    s = ctx.snapshot
    for name in sorted(ctx.arrived):
        node = s.node_by_name.get(name)
        if node is None:
            continue
        layout = s.layout_of(node)
        for res in sorted(ctx.arrived[name]):
            amount = ctx.state.used[name][res]
            have = node.allocatable.get(res, 0)
            if amount > have:
                yield (
                    f"node {name!r} overcommitted: {res} {format_quantity(res, amount)} held, "
                    f"{format_quantity(res, have)} allocatable"
                )
        for dev, milli in sorted(ctx.state.gpu[name].items()):
            if milli > 0 and dev not in layout.gpu_ids:
                yield f"node {name!r}: GPU {dev!r} does not exist"
            elif milli > GPU_MILLI:
                yield f"node {name!r}: GPU {dev!r} holds {milli} milli-GPU (at most {GPU_MILLI})"
        for dev, k in sorted(ctx.state.nics[name].items()):
            if k > 0 and dev not in layout.nic_ids:
                yield f"node {name!r}: NIC {dev!r} does not exist"
            elif k > 1:
                yield f"node {name!r}: NIC {dev!r} held by {k} pods"


MOVE_CHECKS: tuple[tuple[str, Check], ...] = (
    ("references", check_references),
    ("gang_whole", check_gang_whole),
    ("budgets", check_wave_budgets),
    ("disruption_budget", check_disruption_budgets),
)
"""The checks of a wave before it runs (its capacity is checked after), by rule name."""


def _apply(ctx: _Ctx, moves: tuple[GangMove, ...]) -> None:
    """Evict every pod of ``moves``, then place them (only pods that run where named)."""
    st, gpu = ctx.state, ctx.snapshot.gpu
    taken: list[tuple[tuple[str, str], _Pod, PodPlacement]] = []
    for move in moves:
        for mp in move.pods:
            key = (mp.namespace, mp.pod)
            pod = st.pods.get(key)
            if pod is None or pod.node != mp.node or mp.to.node not in ctx.snapshot.node_by_name:
                continue
            taken.append((key, st.remove(key), mp.to))
    for key, pod, to in taken:
        st.add(key, _Pod(to.node, pod.requests, _holds(to, pod.requests, gpu), to.nics, pod.gang))
        ctx.arrived[to.node] |= {r for r, v in pod.requests.items() if v > 0}


def _place_final(ctx: _Ctx) -> None:
    """Place the final plan's pods (requests from their gangs' roles)."""
    s = ctx.snapshot
    for p in ctx.plan.final.pods:
        gang = s.gang_by_key.get(p.gang_key)
        if gang is None or p.node not in s.node_by_name:
            continue
        role = next((r for r in gang.roles if r.name == p.role), None)
        if role is None:
            continue
        req = dict(role.requests)
        ctx.state.add(
            ("final", f"{p.namespace}/{p.pod}"),
            _Pod(p.node, req, _holds(p, req, s.gpu), p.nics, p.gang_key),
        )
        ctx.arrived[p.node] |= {r for r, v in req.items() if v > 0}


def verify_moves(
    snapshot: Snapshot, plan: MovePlan, *, target: dict[tuple[str, str], str] | None = None
) -> list[MoveViolation]:
    """Replay ``plan`` on ``snapshot`` and return every violation (empty: valid).

    ``target``: where each running pod (``(namespace, name)``) must run after the last
    wave (the plan the waves were made for); a pod it does not name must run where it ran.
    Without it, only the waves and the final placements are checked.
    """
    out: list[MoveViolation] = []
    ctx = _Ctx(snapshot, plan, _State.of(snapshot))
    for k, wave in enumerate(plan.waves):
        if wave.index != k:
            out.append(MoveViolation("references", k, f"wave numbered {wave.index}, expected {k}"))
        ctx.wave, ctx.arrived = wave, defaultdict(set)
        for rule, check in MOVE_CHECKS:
            out += [MoveViolation(rule, k, msg) for msg in check(ctx)]
        _apply(ctx, wave.moves)
        out += [MoveViolation("capacity", k, msg) for msg in check_capacity(ctx)]
    out += [MoveViolation("last_state", None, msg) for msg in _last_state(snapshot, ctx, target)]
    ctx.wave, ctx.arrived = None, defaultdict(set)
    _place_final(ctx)
    out += [MoveViolation("capacity", None, msg) for msg in check_capacity(ctx)]
    return out


def _last_state(
    snapshot: Snapshot, ctx: _Ctx, target: dict[tuple[str, str], str] | None
) -> Iterator[str]:
    """Every running pod still runs, where ``target`` says (else where it ran)."""
    for p in snapshot.running:
        key = (p.namespace, p.name)
        pod = ctx.state.pods.get(key)
        if pod is None:
            yield f"running pod {p.namespace}/{p.name} is gone"
            continue
        want = target.get(key, p.node) if target is not None else None
        if want is not None and pod.node != want:
            yield f"pod {p.namespace}/{p.name} ends on {pod.node!r}, the plan puts it on {want!r}"
