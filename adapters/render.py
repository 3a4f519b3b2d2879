"""Human views of a plan: the rich table of ``gangplan solve`` and its summary numbers."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from gangplan.models import GPU_MILLI, Plan, Snapshot
from gangplan.solver.fairness import fair_shares
from gangplan.topology import Topology, build_topology

__all__ = ["PlanStats", "plan_stats", "render_plan"]


@dataclass
class PlanStats:
    """Numbers a person checks first (GPUs in whole units; shares in percent)."""

    gpus_placed: float
    gpus_requested: float
    gpus_free: float
    gangs_admitted: int
    gangs_total: int
    mean_leaves_multi: float | None
    queues: list[tuple[str, float, float, float, str]]
    """(queue, running GPUs, placed GPUs, dominant share %, fair targets % per class)"""


def _leaves(topo: Topology, nodes: list[str]) -> int:
    leaf = topo.leaf_level
    if leaf is None:
        return 1
    return len({topo.domain_of(n, leaf) or ("alone", n) for n in nodes})


def plan_stats(snapshot: Snapshot, plan: Plan, topo: Topology | None = None) -> PlanStats:
    """Summary numbers of ``plan`` (see :class:`PlanStats`)."""
    topo = topo or build_topology(snapshot)
    gpu = snapshot.gpu
    gangs = snapshot.gang_by_key
    placed = 0
    for p in plan.pods:
        g = gangs.get(f"{p.namespace}/{p.gang}")
        if g is not None:
            placed += g.role(p.role).requests.get(gpu, 0)
    requested = sum(r.requests.get(gpu, 0) * r.count for g in snapshot.gangs for r in g.roles)
    free = sum(sum(snapshot.free(n.name).gpu_milli.values()) for n in snapshot.nodes)
    spans = []
    for o in plan.gangs:
        pods = plan.pods_of(o.key)
        if len(pods) > 1:
            spans.append(_leaves(topo, [p.node for p in pods]))
    fs = fair_shares(snapshot)
    running: dict[str, int] = defaultdict(int)
    for rp in snapshot.running:
        if rp.queue is not None:
            running[rp.queue] += rp.requests.get(gpu, 0)
    placed_q: dict[str, int] = defaultdict(int)
    added: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for p in plan.pods:
        g = gangs.get(f"{p.namespace}/{p.gang}")
        if g is None:
            continue
        req = g.role(p.role).requests
        placed_q[g.queue] += req.get(gpu, 0)
        for r, v in fs.contribution(req).items():
            added[g.queue][r] += v
    queues = []
    for q in snapshot.queues:
        targets = ", ".join(
            f"{fs.targets[c][q.name].target / 10_000:.1f} (p{c})"
            for c in fs.classes
            if q.name in fs.targets.get(c, {})
        )
        queues.append(
            (
                q.name,
                running[q.name] / GPU_MILLI,
                placed_q[q.name] / GPU_MILLI,
                fs.dominant(q.name, added[q.name]) / 10_000,
                targets or "-",
            )
        )
    return PlanStats(
        gpus_placed=placed / GPU_MILLI,
        gpus_requested=requested / GPU_MILLI,
        gpus_free=free / GPU_MILLI,
        gangs_admitted=sum(1 for o in plan.gangs if o.admitted),
        gangs_total=len(plan.gangs),
        mean_leaves_multi=(sum(spans) / len(spans)) if spans else None,
        queues=queues,
    )


def render_plan(snapshot: Snapshot, plan: Plan, console: Console) -> None:
    """Print the per-gang table and the summary of ``gangplan solve``."""
    topo = build_topology(snapshot)
    gangs = snapshot.gang_by_key
    table = Table(title="gangs", show_lines=False, expand=False)
    for col in ("gang", "queue", "prio", "status", "pods", "GPUs", "nodes", "leaves", "reason"):
        table.add_column(col, overflow="fold")
    for o in plan.gangs:
        g = gangs[o.key]
        pods = plan.pods_of(o.key)
        size = g.size
        gpus = sum(g.role(p.role).requests.get(snapshot.gpu, 0) for p in pods) / GPU_MILLI
        nodes = len({p.node for p in pods})
        status = (
            "[green]admitted[/]"
            if o.admitted
            else f"[yellow]{o.reason.kind.replace('_', ' ') if o.reason else 'pending'}[/]"
        )
        table.add_row(
            g.name if g.namespace == "default" else g.key,
            g.queue,
            str(g.priority),
            status,
            f"{len(pods)}/{size}",
            f"{gpus:g}",
            str(nodes) if pods else "",
            str(_leaves(topo, [p.node for p in pods])) if pods else "",
            "" if o.admitted or o.reason is None else o.reason.message,
        )
    console.print(table)
    st = plan_stats(snapshot, plan, topo)
    q = Table(title="queues: dominant share after the plan vs fair target per priority class")
    for col in (
        "queue",
        "running GPUs",
        "placed GPUs",
        "dominant share %",
        "fair target % (class)",
    ):
        q.add_column(col, justify="right" if col != "queue" else "left")
    for name, run, placed, share, target in st.queues:
        q.add_row(name, f"{run:g}", f"{placed:g}", f"{share:.1f}", target)
    console.print(q)
    s = plan.summary
    spread = "-" if st.mean_leaves_multi is None else f"{st.mean_leaves_multi:.2f}"
    console.print(
        f"GPUs placed {st.gpus_placed:g} / requested {st.gpus_requested:g} / free "
        f"{st.gpus_free:g}; "
        f"gangs admitted {st.gangs_admitted}/{st.gangs_total}; mean leaves spanned by multi-pod "
        f"gangs {spread}"
    )
    if s is not None:
        if all(t.status == "not optimised" for t in s.tiers):
            # a baseline placer: nothing was optimised, so nothing is proven either
            console.print(
                f"placer {s.placer} (a baseline: no optimisation, no bounds); "
                f"status {s.status}; {s.wall_time_s:.2f} s"
            )
        else:
            thr = [t.gap for t in s.tiers if t.gap is not None and t.name.endswith(".gpu_milli")]
            open_tiers = [
                t.name for t in s.tiers if t.status not in ("optimal", "constant", "not optimised")
            ]
            gap = "-" if not thr else f"{max(thr):.2%}"
            console.print(
                f"placer {s.placer}; status {s.status}; throughput gap {gap}; "
                f"tiers not proven optimal: {', '.join(open_tiers) or 'none'}; "
                f"{s.wall_time_s:.2f} s"
            )
        if s.parts:
            console.print(
                "time by part: " + ", ".join(f"{k} {v:.2f} s" for k, v in s.parts.items())
            )
        for note in s.notes:
            console.print(f"note: {note}")
