"""Human views of a plan: what ``gangplan solve`` prints, and its summary numbers.

The view fits the console's width (80 columns when the output is not a terminal, or
``$COLUMNS``): short columns per gang, a pending gang's reason on the lines under its row,
word-wrapped across the width, and names never broken (a name longer than the width runs
past it rather than being split). Every string — names from the instance, reasons, notes —
is printed as text, never as rich markup or emoji codes (``"[bold]x"`` prints as it is).

At scale it stays short: pending gangs and admitted multi-pod gangs, each list the highest
priority first, :data:`ROW_CAP` rows each, then ``... N more; --all to list``; admitted
single-pod gangs are counted, not listed, once there are more gangs than :data:`ROW_CAP`.
``show_all`` lists everything.
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from gangplan.adapters.numbers import counted, number
from gangplan.models import GPU_MILLI, Gang, GangOutcome, Plan, PlanSummary, PodPlacement, Snapshot
from gangplan.solver.judges.fairness import fair_shares
from gangplan.topology import Topology, build_topology

__all__ = [
    "ROW_CAP",
    "PlanStats",
    "evicted_by_class",
    "plan_lines",
    "plan_stats",
    "render_plan",
    "score_lines",
    "status_line",
]

ROW_CAP = 50
"""Rows listed per section (pending gangs, admitted gangs, queues) unless ``show_all``."""

_REASON_INDENT = 4


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
    lowest_level: str | None = None
    """the lowest topology level (``leaf``, ``rack``), None without levels: what
    ``mean_leaves_multi`` counts, a node in no domain of it counting as one"""
    outside_multi: bool = False
    """a multi-pod gang uses a node in no domain of the lowest level"""


def _leaves(topo: Topology, nodes: Iterable[str]) -> tuple[int, int]:
    """``(domains, outside)``: the lowest level's domains the nodes use, and how many of the
    nodes join no domain of that level (``(0, 0)`` without levels)."""
    leaf = topo.leaf_level
    if leaf is None:
        return 0, 0
    found = [topo.domain_of(n, leaf) for n in set(nodes)]
    return len({d for d in found if d is not None}), sum(1 for d in found if d is None)


def _span_cell(domains: int, outside: int) -> str:
    """``2``, or ``2+1`` when one node is in no domain of the lowest level."""
    return f"{domains}+{outside}" if outside else str(domains)


def _pods_by_gang(plan: Plan) -> dict[str, list[PodPlacement]]:
    """The plan's pods by gang key, in plan order (one pass, not one scan per gang)."""
    out: dict[str, list[PodPlacement]] = defaultdict(list)
    for p in plan.pods:
        out[p.gang_key].append(p)
    return out


def plan_stats(
    snapshot: Snapshot,
    plan: Plan,
    topo: Topology | None = None,
    pods: dict[str, list[PodPlacement]] | None = None,
) -> PlanStats:
    """Summary numbers of ``plan`` (see :class:`PlanStats`); ``pods``: the plan's pods by
    gang key, when the caller has them."""
    topo = topo or build_topology(snapshot)
    by_gang = _pods_by_gang(plan) if pods is None else pods
    gpu = snapshot.gpu
    gangs = snapshot.gang_by_key
    placed = 0
    for p in plan.pods:
        g = gangs.get(p.gang_key)
        if g is not None:
            placed += g.role(p.role).requests.get(gpu, 0)
    requested = sum(r.requests.get(gpu, 0) * r.count for g in snapshot.gangs for r in g.roles)
    free = sum(sum(snapshot.free(n.name).gpu_milli.values()) for n in snapshot.nodes)
    spans = [_leaves(topo, [p.node for p in ps]) for ps in by_gang.values() if len(ps) > 1]
    lowest = topo.leaf_level
    fs = fair_shares(snapshot)
    running: dict[str, int] = defaultdict(int)
    for rp in snapshot.running:
        if rp.queue is not None:
            running[rp.queue] += rp.requests.get(gpu, 0)
    placed_q: dict[str, int] = defaultdict(int)
    added: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    # a pod the plan evicts no longer counts toward its queue's share after the plan
    by_name = {(rp.namespace, rp.name): rp for rp in snapshot.running}
    for e in plan.evictions:
        victim = by_name.get((e.namespace, e.pod))
        if victim is not None and victim.queue is not None:
            for r, v in fs.contribution(victim.requests).items():
                added[victim.queue][r] -= v
    for p in plan.pods:
        g = gangs.get(p.gang_key)
        if g is None:
            continue
        req = g.role(p.role).requests
        placed_q[g.queue] += req.get(gpu, 0)
        for r, v in fs.contribution(req).items():
            added[g.queue][r] += v
    queues = []
    for q in snapshot.queues:
        targets = ", ".join(
            f"{fs.targets[c][q.name].target / 10_000:.1f}% (p{c})"
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
        mean_leaves_multi=(sum(d + o for d, o in spans) / len(spans)) if spans and lowest else None,
        queues=queues,
        lowest_level=lowest,
        outside_multi=any(o for _, o in spans),
    )


# --------------------------------------------------------------------------- text layout


def _wrap(text: str, width: int, indent: int = 0, hanging: int | None = None) -> list[str]:
    """``text`` word-wrapped to ``width`` columns, first line indented ``indent``, the rest
    ``hanging`` (default: ``indent``); words are never broken (a longer word runs past)."""
    first = " " * indent
    rest = " " * (indent if hanging is None else hanging)
    return textwrap.wrap(
        text,
        width=max(width, len(first) + 20),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _columns(
    header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int], width: int = 0
) -> list[list[str]]:
    """Rows aligned in columns two spaces apart, each as wide as its widest cell; columns in
    ``right`` right-aligned. Nothing is cut; a last cell that would pass ``width`` (when
    given) is word-wrapped under its own column. One list of lines per row, the header's
    first."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    start = sum(w + 2 for w in widths[:-1]) + 2  # the rows are printed indented by 2

    def lines(cells: Sequence[str]) -> list[str]:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells[:-1], widths, strict=False))
        ]
        head = "  ".join(parts)
        last = cells[-1].rjust(widths[-1]) if len(cells) - 1 in right else cells[-1]
        if width and start + len(last) > width and start + 20 <= width:
            wrapped = _wrap(last, width - start)
            return [f"{head}  {wrapped[0]}", *(" " * (start - 2) + t for t in wrapped[1:])]
        return [f"{head}  {last}".rstrip()]

    return [lines(header), *(lines(r) for r in rows)]


def _table_width(header: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """The width of :func:`_columns`' widest line, with the rows' indent of 2."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return 2 + sum(widths) + 2 * (len(widths) - 1)


def _name(gang: Gang) -> str:
    return gang.name if gang.namespace == "default" else gang.key


def _more(hidden: int, what: str) -> str:
    return f"... {hidden:,} more {what}; --all to list"


@dataclass(frozen=True)
class _Line:
    """One printed line and the style of the whole line (``""``: plain)."""

    text: str
    style: str = ""


def _pending_section(
    snapshot: Snapshot, pending: list[GangOutcome], width: int, show_all: bool
) -> list[_Line]:
    gangs = snapshot.gang_by_key
    # the highest priority first (the instance's order within a class): a capped list keeps
    # the gangs that matter most
    pending = sorted(pending, key=lambda o: -gangs[o.key].priority)
    shown = pending if show_all else pending[:ROW_CAP]
    header: tuple[str, ...] = ("gang", "queue", "prio", "pods", "GPUs asked", "why pending")
    rows: list[tuple[str, ...]] = []
    kinds = []
    for o in shown:
        g = gangs[o.key]
        gpus = sum(r.requests.get(snapshot.gpu, 0) * r.count for r in g.roles) / GPU_MILLI
        kinds.append(o.reason.kind.replace("_", " ") if o.reason else "pending")
        rows.append((_name(g), g.queue, str(g.priority), f"0/{g.size}", f"{gpus:g}", kinds[-1]))
    # too wide for the console (long names): the kind moves to the head of the reason
    inline = _table_width(header, rows) > width
    if inline:
        header, rows = header[:-1], [r[:-1] for r in rows]
    head, *body = _columns(header, rows, right={2, 3, 4})
    out = [_Line(f"pending gangs: {len(pending):,}", "bold"), _Line("  " + head[0], "dim")]
    for o, row, kind in zip(shown, body, kinds, strict=True):
        out += [_Line("  " + t, "yellow") for t in row]
        message = o.reason.message if o.reason else "no reason given"
        if inline:
            message = f"{kind}: {message}"
        out += [_Line(t) for t in _wrap(message, width, _REASON_INDENT + 2)]
    if len(pending) > len(shown):
        out.append(_Line("  " + _more(len(pending) - len(shown), "pending gangs")))
    return out


def _admitted_section(
    snapshot: Snapshot,
    admitted: list[GangOutcome],
    pods: dict[str, list[PodPlacement]],
    topo: Topology,
    show_all: bool,
    many: bool,
) -> list[_Line]:
    gangs = snapshot.gang_by_key
    # the highest priority first, as the pending list (the instance's order within a class)
    admitted = sorted(admitted, key=lambda o: -gangs[o.key].priority)
    listed = admitted if show_all or not many else [o for o in admitted if o.placed > 1]
    singles = len(admitted) - len(listed)
    shown = listed if show_all else listed[:ROW_CAP]
    lowest = topo.leaf_level
    header: tuple[str, ...] = ("gang", "queue", "prio", "pods", "GPUs", "nodes")
    if lowest:
        header += (_plural(lowest),)  # the lowest level's domains: leaves, racks
    rows = []
    outside = False
    for o in shown:
        g = gangs[o.key]
        ps = pods.get(o.key, [])
        gpus = sum(g.role(p.role).requests.get(snapshot.gpu, 0) for p in ps) / GPU_MILLI
        nodes = {p.node for p in ps}
        row: tuple[str, ...] = (
            _name(g),
            g.queue,
            str(g.priority),
            f"{len(ps)}/{g.size}",
            f"{gpus:g}",
            str(len(nodes)),
        )
        if lowest:
            domains, alone = _leaves(topo, nodes)
            outside = outside or alone > 0
            row += (_span_cell(domains, alone),)
        rows.append(row)
    out = [_Line(f"admitted gangs: {len(admitted):,}", "bold")]
    if rows:
        head, *body = _columns(header, rows, right=set(range(2, len(header))))
        out.append(_Line("  " + head[0], "dim"))
        out += [_Line("  " + t, "green") for row in body for t in row]
        if outside:
            out.append(_Line(f"  (+N: N nodes in no {lowest})", "dim"))
    if len(listed) > len(shown):
        out.append(_Line("  " + _more(len(listed) - len(shown), "admitted gangs")))
    if singles:
        out.append(_Line(f"  {singles:,} admitted single-pod gangs not listed; --all to list them"))
    return out


def _eviction_section(plan: Plan, width: int, show_all: bool) -> list[_Line]:
    """The running pods the plan evicts (preemption on), with the gang each makes room for
    and why."""
    shown = plan.evictions if show_all else plan.evictions[:ROW_CAP]
    header = ("pod", "running gang", "node", "for gang", "why")
    rows = [
        (
            e.pod if e.namespace == "default" else f"{e.namespace}/{e.pod}",
            e.gang or "",
            e.node,
            e.for_gang,
            e.reason or e.kind,
        )
        for e in shown
    ]
    head, *body = _columns(header, rows, right=set(), width=width)
    out = [
        _Line(f"evictions (before the bindings): {len(plan.evictions):,}", "bold"),
        _Line("  " + head[0], "dim"),
        *(_Line("  " + t) for row in body for t in row),
    ]
    if len(plan.evictions) > len(shown):
        out.append(_Line("  " + _more(len(plan.evictions) - len(shown), "evictions")))
    return out


def _queue_section(st: PlanStats, width: int, show_all: bool) -> list[_Line]:
    shown = st.queues if show_all else st.queues[:ROW_CAP]
    header = ("queue", "running", "placed", "share", "fair target (class)")
    rows = [
        (name, number(run), number(placed), f"{share:.1f}%", target)
        for name, run, placed, share, target in shown
    ]
    head, *body = _columns(header, rows, right={1, 2, 3}, width=width)
    title = (
        "queues: GPUs running and placed, dominant share after the plan, and fair target "
        "per priority class"
    )
    out = [
        *(_Line(t, "bold") for t in _wrap(title, width, 0, 2)),
        _Line("  " + head[0], "dim"),
        *(_Line("  " + t) for row in body for t in row),
    ]
    if len(st.queues) > len(shown):
        out.append(_Line("  " + _more(len(st.queues) - len(shown), "queues")))
    return out


def status_line(
    summary: PlanSummary,
    time_limit_s: float | None = None,
    *,
    placed: int | None = None,
    deterministic: bool = False,
) -> str:
    """How the plan was found, in words that cannot contradict each other.

    A baseline says so (no optimisation, no bounds). CP-SAT's ``optimal`` says every score
    entry it optimised was proven optimal, or that there was nothing to optimise (no gang
    could be placed, when ``placed``, the plan's pod count, is 0); ``feasible`` counts the
    entries not proven optimal within the time limit and names them; ``incumbent`` and
    ``fallback`` say which baseline's plan is returned and why. ``time_limit_s``: the
    cycle's budget (``SolverConfig.time_limit_s``: the whole cycle, not CP-SAT alone), when
    known (``deterministic``: counted in CP-SAT's deterministic seconds, so the wall time
    may differ, and the line says so; after Ctrl-C, the line says the search was stopped
    instead; a wall time past the limit is said, with the cycle's largest part); the gap
    is the largest of the GPU throughput entries' gaps to their bounds (CP-SAT's, or an
    entry's own ceiling), named with its entry, and the entries without a bound
    (neighbourhood search alone, or no time) are named instead.
    """
    s = summary
    took = f"{s.wall_time_s:.2f} s"
    unit = " deterministic-second" if deterministic else " s"
    within = (
        f" within the cycle's {time_limit_s:g}{unit} limit"
        if time_limit_s is not None
        else " within the cycle's time limit"
    )
    if deterministic:
        took = f"{took} wall (the limit counts CP-SAT's deterministic seconds)"
    elif time_limit_s is not None and s.wall_time_s > time_limit_s and s.parts:
        # the budget could not hold (e.g. the first baseline alone passes it): say where
        # the time went
        part, seconds = max(s.parts.items(), key=lambda kv: kv[1])
        took = (
            f"{took}, over the {time_limit_s:g} s limit (the largest part: {part}, {seconds:.2f} s)"
        )
    if any(t.status.endswith("(interrupted)") for t in s.tiers):
        within = " when Ctrl-C stopped the search"
    optimised = [t for t in s.tiers if t.optimised]
    if s.status == "baseline":
        return f"placer {s.placer}: a baseline (no optimisation, no bounds); {took}"
    if s.status == "optimal" and not optimised:
        why = "no gang could be placed, so " if placed == 0 else ""
        return f"placer {s.placer}: status optimal — {why}there was nothing to optimise; {took}"
    if s.status == "optimal":
        return (
            f"placer {s.placer}: status optimal — all {len(optimised)} score entries it "
            f"optimised proven optimal; {took}"
        )
    if s.status == "feasible":
        open_tiers = [t.name for t in optimised if t.open]
        thr_tiers = [t for t in optimised if t.name.endswith(".gpu_milli")]
        bounded = [t for t in thr_tiers if t.gap is not None]
        worst = max(bounded, key=lambda t: t.gap or 0.0, default=None)
        if worst is not None and not worst.gap:
            largest = "every class at its bound"
        elif worst is not None:
            largest = f"largest gap to the bound {worst.gap or 0.0:.2%} ({worst.name})"
        else:
            largest = ""
        unbounded = [t.name for t in thr_tiers if t.gap is None and t.status != "optimal"]
        if unbounded:
            # a tier improved (or kept) without a bound of the whole model: no gap to claim
            known = f", {largest} on the others" if worst else ""
            gap = f"; GPUs admitted: no bound for {', '.join(unbounded)}{known}"
        else:
            gap = f"; GPUs admitted: {largest}" if worst else ""
        return (
            f"placer {s.placer}: status feasible — {len(open_tiers)} of {len(optimised)} "
            f"score entries not proven optimal{within} ({', '.join(open_tiers)}){gap}; {took}"
        )
    base = s.placer.partition("(incumbent: ")[2].rstrip(")") or "baseline"
    base = base.removesuffix(" plan")  # "empty plan": "the empty plan", not "empty plan plan"
    if s.status == "incumbent" and s.parts and "search" not in s.parts:
        # CP-SAT did not search (no time left for its model, or its build stopped): the
        # notes say why
        return (
            f"placer {s.placer}: status incumbent — CP-SAT's model was not solved (see the "
            f"notes); the {base} plan is returned; {took}"
        )
    if s.status == "incumbent":
        return (
            f"placer {s.placer}: status incumbent — CP-SAT found no plan better than the "
            f"{base} plan{within}, which is returned; {took}"
        )
    if s.status == "fallback":
        return (
            f"placer {s.placer}: status fallback — CP-SAT's solution could not be made a "
            f"valid plan (see the notes); the {base} plan is returned; {took}"
        )
    return f"placer {s.placer}: status {s.status}; {took}"


def plan_lines(
    snapshot: Snapshot,
    plan: Plan,
    width: int = 80,
    *,
    show_all: bool = False,
    time_limit_s: float | None = None,
    deterministic: bool = False,
) -> list[tuple[str, str]]:
    """What :func:`render_plan` prints, as ``(text, style)`` lines (see the module
    docstring); ``style`` is a rich style name or ``""``."""
    topo = build_topology(snapshot)
    pods = _pods_by_gang(plan)
    pending = [o for o in plan.gangs if not o.admitted]
    admitted = [o for o in plan.gangs if o.admitted]
    many = len(plan.gangs) > ROW_CAP
    out: list[_Line] = []
    if pending:
        out += _pending_section(snapshot, pending, width, show_all)
        out.append(_Line(""))
    out += _admitted_section(snapshot, admitted, pods, topo, show_all, many)
    out.append(_Line(""))
    if plan.evictions:
        out += _eviction_section(plan, width, show_all)
        out.append(_Line(""))
    st = plan_stats(snapshot, plan, topo, pods)
    out += _queue_section(st, width, show_all)
    out.append(_Line(""))
    summary = (
        f"gangs admitted {st.gangs_admitted:,} of {st.gangs_total:,}; GPUs placed "
        f"{number(st.gpus_placed)} of {number(st.gpus_requested)} asked "
        f"({number(st.gpus_free)} free before "
        f"the plan){_spread(st)}"
    )
    out += [_Line(t) for t in _wrap(summary, width)]
    s = plan.summary
    if s is not None:
        status = status_line(s, time_limit_s, placed=len(plan.pods), deterministic=deterministic)
        out += [_Line(t) for t in _wrap(status, width, 0, 2)]
        if s.parts:
            parts = ", ".join(f"{k} {v:.2f} s" for k, v in s.parts.items())
            out += [
                _Line(t) for t in _wrap(f"time by part, in the order run: {parts}", width, 0, 2)
            ]
        for note in s.notes:
            out += [_Line(t) for t in _wrap(f"note: {note}", width, 0, 2)]
    return [(line.text, line.style) for line in out]


def render_plan(
    snapshot: Snapshot,
    plan: Plan,
    console: Console,
    *,
    show_all: bool = False,
    time_limit_s: float | None = None,
) -> None:
    """Print the view of :func:`plan_lines` at ``console``'s width. Every line is a rich
    :class:`~rich.text.Text` (never markup), printed without rich's own wrapping."""
    for text, style in plan_lines(
        snapshot, plan, console.width, show_all=show_all, time_limit_s=time_limit_s
    ):
        console.print(Text(text, style=style), soft_wrap=True)


# --------------------------------------------------------------------------- the score


def evicted_by_class(snapshot: Snapshot, plan: Plan) -> dict[str, tuple[int, int]]:
    """The milli-GPU and pods ``plan`` evicts, by the score's class name (``p0``, the
    victim gang's priority), as :func:`gangplan.solver.judges.score.score` counts them: only with
    preemption on."""
    out: dict[str, tuple[int, int]] = {}
    if not (snapshot.preemption.enabled and plan.evictions):
        return out
    rules, evicted = snapshot.preemption_rules, plan.evicted
    for pod in snapshot.running:
        if (pod.namespace, pod.name) in evicted:
            c = f"p{rules.gang_of(pod).priority}"
            gpu, pods = out.get(c, (0, 0))
            out[c] = (gpu + pod.requests.get(snapshot.gpu, 0), pods + 1)
    return out


def score_lines(
    entries: Sequence[tuple[str, int]],
    *,
    evicted: dict[str, tuple[int, int]] | None = None,
    lowest_level: str = "leaf",
) -> list[str]:
    """A score (:func:`gangplan.solver.judges.score.score`'s ``entries``) in a person's units, one
    line per part, most important first, in the score's order: per priority class how far
    its queues are below their fair targets (summed over the class's queues: weight x
    percentage points of dominant share, so it may pass 100; queues of weight 0
    unweighted), then the GPUs and pods admitted (at gangs' minimums and beyond) and
    (``evicted``: from
    :func:`evicted_by_class`) evicted — the score counts their difference; the extra domains
    multi-pod gangs use per level (``preferred``: at their preferred levels); the partly
    used GPU nodes and domains of ``lowest_level``; the pods moved from the previous plan.
    The score's own units: fairness in weight-milli x ppm, throughput in milli-GPU.
    """
    values = dict(entries)
    gone = evicted or {}
    classes: list[str] = []
    for name, _ in entries:
        head, _, _tail = name.partition(".")
        if head.startswith("p") and head[1:].lstrip("-").isdigit() and head not in classes:
            classes.append(head)
    out = []
    for c in classes:
        lost_milli, lost_pods = gone.get(c, (0, 0))
        # the minimums' and the growth entries together: every pod admitted in the class
        gpus = (
            values.get(f"{c}.gpu_milli", 0) + values.get(f"{c}.growth_gpu_milli", 0) + lost_milli
        ) / GPU_MILLI
        pods = values.get(f"{c}.pods", 0) + values.get(f"{c}.growth_pods", 0) + lost_pods
        short = -values.get(f"{c}.fairness", 0) / 1000 / 10_000
        short0 = -values.get(f"{c}.fairness_w0", 0) / 10_000
        zero = f", weight-0 queues {short0:.1f}" if short0 else ""
        evict = (
            f"; evicted {counted(lost_milli / GPU_MILLI, 'GPU')}, {counted(lost_pods, 'pod')}"
            if lost_pods
            else ""
        )
        out.append(
            f"priority {c[1:]}: fair-share shortfall {short:.1f}{zero}; "
            f"admitted {counted(gpus, 'GPU')}, {counted(pods, 'pod')}{evict}"
        )
    levels = [(n.removeprefix("locality."), v) for n, v in entries if n.startswith("locality.")]
    if levels:
        parts = ", ".join(f"{lv} {-v}" for lv, v in levels)
        out.append(f"locality: extra domains of multi-pod gangs: {parts}")
    nodes = -values.get("fragmentation.gpu_nodes", 0)
    leaves = -values.get("fragmentation.leaves", 0)
    partly = (
        f"{counted(nodes, 'GPU node')} and {leaves} {_plural(lowest_level, leaves)} partly used"
    )
    if "fragmentation.expected" in values:
        expected = -values["fragmentation.expected"]
        out += [
            f"fragmentation: FGD's expected fragmentation {expected:,} (milli-GPU x weight),",
            f"  then {partly}",
        ]
    else:
        out.append(f"fragmentation: {partly}")
    moved = -values.get("stability", 0)
    out.append(f"stability: {counted(moved, 'pod')} moved from the previous plan")
    if classes:
        out += [
            "(fair-share shortfall: the sum over a class's queues of weight x percentage",
            " points of dominant share below the queue's fair target, so it may pass 100)",
        ]
    return out


def _spread(st: PlanStats) -> str:
    """``; mean racks spanned by multi-pod gangs 1.50`` (nothing without levels, nor when
    no multi-pod gang is admitted)."""
    if st.lowest_level is None or st.mean_leaves_multi is None:
        return ""
    spread = f"{st.mean_leaves_multi:.2f}"
    alone = f" (a node in no {st.lowest_level} counts as one)" if st.outside_multi else ""
    return f"; mean {_plural(st.lowest_level)} spanned by multi-pod gangs {spread}{alone}"


def _plural(word: str, n: int = 2) -> str:
    """``leaf`` -> ``leaves``, ``rack`` -> ``racks``, ``switch`` -> ``switches``."""
    if n == 1:
        return word
    if word.endswith("f"):
        return word[:-1] + "ves"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"
