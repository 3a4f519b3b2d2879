"""The benchmark's preemption section: evicted GPUs per admitted high-priority GPU, CP-SAT
against the baselines' greedy preemption (Volcano's and Kueue's), on the same instances.

An instance is a generated fat-tree (``gangplan generate fat-tree``) at a high running load:
its running gangs keep their generated priorities (classes 10, 100, 1000) and queues; every
queue lets its gangs evict lower priorities (``within_queue: lower_priority``), and
preemption is on. The pending gangs are replaced by ``gangs`` gangs of priority
:data:`HIGH` (above every running class), either

* ``generated``: the first generated pending gangs asking at least ``min_gpus`` GPUs (their
  own topology, GPU-model and joint constraints kept), or
* ``whole-node``: one pod of a whole node's GPUs each, no constraint, queues in turn — the
  classic high-priority job waiting behind low-priority ones, where every placer admits the
  same gangs and the ratio compares only how much each evicts for them.

So each high-priority gang may only make room by evicting running gangs of its own queue.

Per placer the row gives the high-priority GPUs admitted, the GPUs and pods evicted, their
ratio (lower is better: fewer GPUs given up per GPU won), the evicted GPUs by the victims'
class, and whether the plan passes the verifier (a plan that evicts for nothing does not).
The goal is CP-SAT at half the ratio of the best valid baseline or less. CP-SAT follows the
score's order: it gives up the fewest GPUs of the highest victim class first, then of the
next, so its total is not always the smallest one could find ignoring classes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gangplan.models import GPU_MILLI, Gang, Plan, Snapshot, format_quantity
from gangplan.solver.cycle import run_baseline, solve_cycle
from gangplan.solver.judges.verify import verify
from gangplan.solver.placers.baselines import BASELINES
from gangplan.solver.result import SolverConfig

__all__ = [
    "HIGH",
    "SECTIONS",
    "PreemptionRow",
    "PreemptionSpec",
    "preemption_rows",
    "preemption_scenario",
    "render_rows",
    "run_section",
]

HIGH = 10_000
"""The pending gangs' priority: above every class the generator gives running gangs."""


def _gpus(snapshot: Snapshot, gang: Gang) -> int:
    return sum(r.count * r.requests.get(snapshot.gpu, 0) for r in gang.roles) // GPU_MILLI


def preemption_scenario(
    snapshot: Snapshot,
    gangs: int = 12,
    min_gpus: int = 8,
    priority: int = HIGH,
    kind: str = "generated",
) -> Snapshot:
    """The preemption instance made from a generated ``snapshot`` (module docstring).

    Raises:
        ValueError: an unknown ``kind`` (accepted: ``generated``, ``whole-node``).
    """
    data = snapshot.model_dump(mode="python")
    if kind == "generated":
        chosen = [g for g in snapshot.gangs if _gpus(snapshot, g) >= min_gpus][:gangs]
        keep = {g.key for g in chosen}
        data["gangs"] = [
            {**g, "priority": priority}
            for g in data["gangs"]
            if f"{g['namespace']}/{g['name']}" in keep
        ]
    elif kind == "whole-node":
        data["gangs"] = _whole_node_gangs(snapshot, gangs, priority)
    else:
        raise ValueError(f"kind {kind!r} is unknown (accepted: generated, whole-node)")
    for q in data["queues"]:
        q["preemption"] = {**q["preemption"], "within_queue": "lower_priority"}
    data["preemption"] = {**data["preemption"], "enabled": True}
    return Snapshot.model_validate(data)


def _whole_node_gangs(snapshot: Snapshot, gangs: int, priority: int) -> list[dict[str, object]]:
    """``gangs`` one-pod gangs asking a whole node (its GPUs, half its cpu and memory)."""
    node = max(snapshot.nodes, key=lambda n: n.allocatable.get(snapshot.gpu, 0))
    alloc = node.allocatable
    amounts = {
        snapshot.gpu: alloc.get(snapshot.gpu, 0),
        "cpu": alloc.get("cpu", 0) // 2,
        "memory": alloc.get("memory", 0) // 2,
    }
    requests = {r: format_quantity(r, v) for r, v in amounts.items()}
    queues = [q.name for q in snapshot.queues]
    return [
        {
            "name": f"high-{i:03d}",
            "queue": queues[i % len(queues)],
            "priority": priority,
            "creation_time": float(i),
            "roles": [{"name": "w", "count": 1, "requests": requests}],
        }
        for i in range(gangs)
    ]


@dataclass(frozen=True)
class PreemptionRow:
    """One placer on one preemption instance (module docstring)."""

    instance: str
    placer: str
    high_gangs: int
    admitted_gpus: int
    evicted_gpus: int
    evicted_pods: int
    evicted_by_class: tuple[tuple[int, int], ...]
    """evicted GPUs per priority class of the victims, highest class first"""
    valid: bool
    first_violation: str
    wall_s: float

    @property
    def ratio(self) -> float | None:
        """Evicted GPUs per admitted high-priority GPU (None: nothing admitted)."""
        return self.evicted_gpus / self.admitted_gpus if self.admitted_gpus else None


def _row(name: str, placer: str, s: Snapshot, plan: Plan, wall: float) -> PreemptionRow:
    high = {g.key for g in s.gangs if g.priority == HIGH}
    admitted = sum(
        s.gang_by_key[p.gang_key].role(p.role).requests.get(s.gpu, 0)
        for p in plan.pods
        if p.gang_key in high
    )
    held = {(p.namespace, p.name): p.requests.get(s.gpu, 0) for p in s.running}
    evicted = sum(held.get((e.namespace, e.pod), 0) for e in plan.evictions)
    by_class: dict[int, int] = {}
    gone = plan.evicted
    for pod in s.running:
        if (pod.namespace, pod.name) in gone:
            c = s.preemption_rules.gang_of(pod).priority
            by_class[c] = by_class.get(c, 0) + pod.requests.get(s.gpu, 0) // GPU_MILLI
    violations = verify(s, plan)
    return PreemptionRow(
        instance=name,
        placer=placer,
        high_gangs=len(high),
        admitted_gpus=admitted // GPU_MILLI,
        evicted_gpus=evicted // GPU_MILLI,
        evicted_pods=len(plan.evictions),
        evicted_by_class=tuple(sorted(by_class.items(), reverse=True)),
        valid=not violations,
        first_violation=str(violations[0]) if violations else "",
        wall_s=round(wall, 2),
    )


def preemption_rows(
    name: str, snapshot: Snapshot, config: SolverConfig | None = None
) -> list[PreemptionRow]:
    """Every baseline (with its greedy preemption) and CP-SAT (``config``, default 20 s on 2
    workers) on one preemption instance."""
    rows = []
    for placer in BASELINES:
        started = time.monotonic()
        result = run_baseline(snapshot, placer)
        rows.append(_row(name, placer, snapshot, result.plan, time.monotonic() - started))
    started = time.monotonic()
    cfg = config or SolverConfig(time_limit_s=20.0, num_workers=2)
    result = solve_cycle(snapshot, config=cfg)
    rows.append(_row(name, "cpsat", snapshot, result.plan, time.monotonic() - started))
    return rows


@dataclass(frozen=True)
class PreemptionSpec:
    """One preemption instance of a section: the fat-tree's shape, load and seed, and the
    high-priority gangs (:func:`preemption_scenario`)."""

    spines: int
    leaves_per_spine: int
    nodes_per_leaf: int
    load: float
    seed: int
    kind: str
    gangs: int

    @property
    def name(self) -> str:
        nodes = self.spines * self.leaves_per_spine * self.nodes_per_leaf
        return f"ft{nodes}-{round(self.load * 100)}%-{self.kind}{self.gangs}-s{self.seed}"


def _specs(nodes: tuple[int, int, int], seeds: range) -> tuple[PreemptionSpec, ...]:
    return tuple(
        PreemptionSpec(*nodes, 0.8, seed, kind, gangs)
        for seed in seeds
        for kind, gangs in (("whole-node", 24), ("generated", 12))
    )


SECTIONS: dict[str, tuple[tuple[PreemptionSpec, ...], float]] = {
    "small": (_specs((1, 4, 16), range(1)), 10.0),
    "standard": (_specs((4, 8, 16), range(3)), 20.0),
    "large": (_specs((4, 8, 16), range(5)), 30.0),
}
"""Per suite: the preemption instances (512 nodes at 80% load beyond ``small``) and CP-SAT's
time limit."""


def run_section(suite: str, workers: int = 2) -> list[PreemptionRow]:
    """Every instance of the suite's preemption section, every placer on each."""
    from gangplan.adapters.traces.generate import generate_fat_tree

    specs, limit = SECTIONS[suite]
    rows: list[PreemptionRow] = []
    for spec in specs:
        base = generate_fat_tree(
            spines=spec.spines,
            leaves_per_spine=spec.leaves_per_spine,
            nodes_per_leaf=spec.nodes_per_leaf,
            load=spec.load,
            seed=spec.seed,
        )
        s = preemption_scenario(base, gangs=spec.gangs, kind=spec.kind)
        rows += preemption_rows(spec.name, s, SolverConfig(time_limit_s=limit, num_workers=workers))
    return rows


def render_rows(rows: list[PreemptionRow]) -> str:
    """The rows as a Markdown table, with CP-SAT's ratio over the best valid baseline's."""
    lines = [
        "| instance | placer | high gangs | admitted high GPUs | evicted GPUs | by class | "
        "evicted pods | evicted / admitted | valid | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
        valid = "yes" if r.valid else f"no ({r.first_violation[:60]})"
        classes = ", ".join(f"p{c}: {g}" for c, g in r.evicted_by_class) or "-"
        lines.append(
            f"| {r.instance} | {r.placer} | {r.high_gangs} | {r.admitted_gpus} | "
            f"{r.evicted_gpus} | {classes} | {r.evicted_pods} | {ratio} | {valid} | {r.wall_s} |"
        )
    for inst in dict.fromkeys(r.instance for r in rows):
        mine = [r for r in rows if r.instance == inst]
        cp = next((r for r in mine if r.placer == "cpsat"), None)
        base = [r for r in mine if r.placer != "cpsat" and r.valid and r.ratio is not None]
        if cp is None or cp.ratio is None or not base:
            continue
        best = min(base, key=lambda r: r.ratio or 0.0)
        assert best.ratio is not None
        rel = "-" if best.ratio == 0 else f"{cp.ratio / best.ratio:.2f}"
        lines.append("")
        lines.append(
            f"{inst}: CP-SAT evicts {cp.ratio:.3f} GPUs per admitted GPU, the best valid "
            f"baseline ({best.placer}) {best.ratio:.3f}: ratio {rel} (goal: 0.5 or less); "
            f"admitted {cp.admitted_gpus} vs {best.admitted_gpus} high-priority GPUs"
        )
    return "\n".join(lines) + "\n"
