"""The objective: one term per entry of the score, assembled here in one visible place.

The order of ``docs/design.md`` is enforced **tier by tier** (lexicographic optimisation):
the builder maximises one term, then adds ``term >= best value found`` and moves to the
next, each with a share of the time limit. This is exact — a lower tier can never buy back
a unit of a higher one, because the higher tier's value is fixed as a constraint before the
lower one is looked at — and it keeps coefficients small (no big-M weights, which slow
CP-SAT sharply: the CP-SAT primer, d-krupke). It is the classic method for lexicographic
multi-objective integer programs.

Terms read the variables of :class:`~gangplan.solver.model.variables.Variables` and add
the constraints that define the auxiliary ones they use (a dominant share as a max, a
shortfall, pods kept as a min, partly used nodes and leaves).

Each term is ``expr + const`` with ``expr`` a linear expression over model variables and the
value equal to the score's entry of the same name (:mod:`gangplan.solver.score`) for the
plan the solution becomes. Where an idea comes from:

* fairness: weighted shortfall below fair targets from progressive filling of dominant
  share — DRF (Ghodsi et al., NSDI'11), Volcano's ``proportion`` plugin (deserved),
  Kueue's fair sharing (weighted dominant share, weight 0 served last);
* throughput: milli-GPUs then pods admitted, per priority class (Volcano/Kueue priority);
* locality: domains used per level, required/preferred levels — Kueue TAS (KEP-2724),
  Volcano network-topology-aware scheduling (HyperNode tiers);
* fragmentation: partly used GPU nodes and leaves — after FGD (Weng et al., ATC'23), which
  scores placements by the GPU fragmentation they cause;
* stability: pods kept where the previous plan put them;
* preemption (on only): evicted pods are lost throughput of their class (fairness is
  measured on the cycle's starting usage); fewer evicted milli-GPU, then pods, then the
  most recently admitted victims first (Kueue's order among equal candidates).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from math import gcd

from ortools.sat.python import cp_model

from gangplan.models import GPU_MILLI
from gangplan.solver.fairness import FairShares
from gangplan.solver.model.indexing import Index
from gangplan.solver.model.variables import Variables
from gangplan.solver.score import score_names

__all__ = ["ObjectiveTerm", "build_terms"]


@dataclass
class ObjectiveTerm:
    """One score entry as a model term: value = expr + const (maximised)."""

    name: str
    expr: cp_model.LinearExprT | None
    const: int = 0
    modelled: bool = True
    """False: not in the model (e.g. node locality in aggregated mode); derived afterwards."""
    weight: float = 1.0
    """share of the time limit this tier gets relative to others"""
    upper: int | None = None
    """a value ``expr`` can never exceed (0 for shortfalls and spreads): a solution that
    reaches it is optimal for this tier without a solve"""


def build_terms(
    model: cp_model.CpModel, ix: Index, v: Variables, shares: FairShares, previous_pods: int
) -> list[ObjectiveTerm]:
    """Every entry of :func:`~gangplan.solver.score.score_names`, in order."""
    terms: dict[str, ObjectiveTerm] = {}
    _fairness_and_throughput(model, ix, v, shares, terms)
    _lost_throughput(ix, v, terms)
    _locality(model, ix, v, terms)
    _fragmentation(model, ix, v, terms)
    _evictions(ix, v, terms)
    _stability(model, ix, v, terms, previous_pods)
    out = []
    for name in score_names(ix.snapshot, ix.ctx.topo):
        out.append(terms.get(name, ObjectiveTerm(name, None, 0, modelled=False)))
    return out


def _fairness_and_throughput(
    model: cp_model.CpModel,
    ix: Index,
    v: Variables,
    fs: FairShares,
    terms: dict[str, ObjectiveTerm],
) -> None:
    by_class_queue: dict[tuple[int, str], list[int]] = defaultdict(list)
    for item in ix.items:
        by_class_queue[(item.gang.priority, item.gang.queue)].append(item.id)
    for c in fs.classes:
        fair: list[cp_model.LinearExprT] = []
        fair0: list[cp_model.LinearExprT] = []
        fair_const = fair0_const = 0
        for qname, t in fs.targets.get(c, {}).items():
            ids = by_class_queue.get((c, qname), [])
            base = fs.base.get(qname, {})
            base_dom = max((base.get(r, 0) for r in fs.resources), default=0)
            if not ids or t.target <= base_dom:
                short = max(0, t.target - base_dom)
                if t.weight_milli > 0:
                    fair_const -= t.weight_milli * short
                else:
                    fair0_const -= short
                continue
            lins = []
            for r in fs.resources:
                coeff = [
                    (fs.contribution(dict(ix.shapes[ix.items[i].shape].requests))[r], i)
                    for i in ids
                ]
                lin = base.get(r, 0) + sum(k * v.placed(i) for k, i in coeff if k)
                lins.append(lin)
            dom = v.dominant(c, qname)
            model.add_max_equality(dom, lins)
            gap = v.shortfall(c, qname)
            model.add(gap >= t.target - dom)
            if t.weight_milli > 0:
                fair.append(-t.weight_milli * gap)
            else:
                fair0.append(-gap)
        terms[f"p{c}.fairness"] = ObjectiveTerm(
            f"p{c}.fairness", sum(fair) if fair else None, fair_const, weight=3, upper=0
        )
        terms[f"p{c}.fairness_w0"] = ObjectiveTerm(
            f"p{c}.fairness_w0", sum(fair0) if fair0 else None, fair0_const, upper=0
        )
        ids = [it.id for it in ix.items if it.gang.priority == c]
        gpu = [
            ix.shapes[ix.items[i].shape].gpu_milli * v.placed(i)
            for i in ids
            if ix.shapes[ix.items[i].shape].gpu_milli
        ]
        pods = [v.placed(i) for i in ids]
        gpu_max = sum(ix.shapes[ix.items[i].shape].gpu_milli * ix.items[i].count for i in ids)
        terms[f"p{c}.gpu_milli"] = ObjectiveTerm(
            f"p{c}.gpu_milli", sum(gpu) if gpu else None, weight=3, upper=gpu_max
        )
        terms[f"p{c}.pods"] = ObjectiveTerm(
            f"p{c}.pods", sum(pods) if pods else None, upper=sum(ix.items[i].count for i in ids)
        )


def _lost_throughput(ix: Index, v: Variables, terms: dict[str, ObjectiveTerm]) -> None:
    """Evicted pods are lost throughput of their victim's class: ``p{c}.gpu_milli`` and
    ``p{c}.pods`` lose what they ask (a class with victims and no pending gang gets these
    two entries from its victims alone)."""
    vs = ix.victims
    if vs is None:
        return
    gpu = ix.snapshot.gpu
    by_class: dict[int, list[int]] = defaultdict(list)
    for u in vs.units:
        by_class[vs.victims[u.victim].gang.priority].append(u.id)
    for c, units in by_class.items():
        for entry in ("fairness", "fairness_w0", "gpu_milli", "pods"):
            # a class of victims alone: no fair target, nothing admitted (constant 0)
            terms.setdefault(f"p{c}.{entry}", ObjectiveTerm(f"p{c}.{entry}", None, 0))
        per_entry = {
            f"p{c}.gpu_milli": [(vs.units[u].req(gpu), u) for u in units],
            f"p{c}.pods": [(1, u) for u in units],
        }
        for name, pairs in per_entry.items():
            coeffs = [(k, u) for k, u in pairs if k]
            if not coeffs:
                continue
            kept: list[cp_model.LinearExprT] = [k * v.running(u) for k, u in coeffs]
            lost = sum(k * vs.units[u].size for k, u in coeffs)
            old = terms[name]
            expr = sum(kept) if old.expr is None else sum([old.expr, *kept])
            upper = None if old.upper is None and old.expr is not None else (old.upper or 0) + lost
            terms[name] = ObjectiveTerm(
                name, expr, old.const - lost, weight=old.weight, upper=upper
            )


def _evictions(ix: Index, v: Variables, terms: dict[str, ObjectiveTerm]) -> None:
    """Among plans equal above: minus the evicted milli-GPU, minus the evicted pods, then
    the recency ranks of the evicted pods' gangs (the most recently admitted go first)."""
    if not ix.snapshot.preemption.enabled:
        return
    vs = ix.victims
    names = ("preemption.evicted_gpu_milli", "preemption.evicted_pods", "preemption.recency")
    if vs is None:
        for name in names:
            terms[name] = ObjectiveTerm(name, None, 0)
        return
    gpu = ix.snapshot.gpu
    units = vs.units
    gpu_c = [(u.req(gpu), u) for u in units if u.req(gpu)]
    kept_gpu = sum(c * v.running(u.id) for c, u in gpu_c)
    all_gpu = sum(c * u.size for c, u in gpu_c)
    terms[names[0]] = ObjectiveTerm(names[0], kept_gpu if gpu_c else None, -all_gpu, upper=all_gpu)
    size = sum(u.size for u in units)
    terms[names[1]] = ObjectiveTerm(
        names[1], sum(v.running(u.id) for u in units), -size, upper=size
    )
    ranked = [(vs.victims[u.victim].recency, u) for u in units if vs.victims[u.victim].recency]
    terms[names[2]] = ObjectiveTerm(
        names[2],
        -sum(r * v.running(u.id) for r, u in ranked) if ranked else None,
        sum(r * u.size for r, u in ranked),
        upper=0,
    )


def _locality(
    model: cp_model.CpModel, ix: Index, v: Variables, terms: dict[str, ObjectiveTerm]
) -> None:
    topo = ix.ctx.topo
    pref_terms: list[cp_model.LinearExprT] = []
    pref_modelled = True
    level_terms: dict[str, list[cp_model.LinearExprT]] = defaultdict(list)
    for g in ix.groups:
        if not g.multi:
            continue
        pref = g.gang.topology.preferred if g.gang.topology else None
        admit = v.admit(g.id)
        for lv in topo.all_levels:
            if lv not in ix.levels:
                if lv == pref:
                    pref_modelled = False
                continue
            spread = sum(v.uses_at(("g", g.id), lv)) - admit
            if lv == pref:
                pref_terms.append(-spread)
            else:
                level_terms[lv].append(-spread)
        for i in g.items:
            tc = ix.items[i].role.topology
            rpref = tc.preferred if tc else None
            if rpref is None or ix.items[i].count < 2:
                continue
            if rpref not in ix.levels:
                pref_modelled = False
                continue
            anyp = v.role_placed(i)
            placed = v.placed(i)
            model.add(placed <= ix.items[i].count * anyp)
            model.add(placed >= anyp)
            pref_terms.append(-(sum(v.uses_at(("i", i), rpref)) - anyp))
    terms["locality.preferred"] = ObjectiveTerm(
        "locality.preferred",
        sum(pref_terms) if pref_terms else None,
        modelled=pref_modelled,
        upper=0,
    )
    for lv in topo.all_levels:
        modelled = lv in ix.levels
        terms[f"locality.{lv}"] = ObjectiveTerm(
            f"locality.{lv}",
            sum(level_terms[lv]) if level_terms[lv] else None,
            modelled=modelled,
            upper=0,
        )


def _fragmentation(
    model: cp_model.CpModel, ix: Index, v: Variables, terms: dict[str, ObjectiveTerm]
) -> None:
    """Partly used GPU nodes and leaves after the plan (running pods included)."""
    state = ix.state
    assert state is not None
    s = ix.snapshot
    topo = ix.ctx.topo
    # one unit divides every amount below exactly: GPU shares asked, and what running pods
    # leave free per node (a running 500m share leaves 1500 of 2000: not a whole GPU count)
    vs = ix.victims
    unit = GPU_MILLI
    for sh in ix.shapes:
        if sh.share:
            unit = gcd(unit, sh.share)
    for name in ix.node_names:
        unit = gcd(unit, sum(state.nodes[name].gpu_milli.values()))
    for u in vs.units if vs is not None else ():
        for _d, m in u.gpu:
            unit = gcd(unit, m)
    node_const = 0
    node_terms: list[cp_model.LinearExprT] = []
    leaf_plan: dict[object, list[cp_model.LinearExprT]] = defaultdict(list)
    leaf_run: dict[object, int] = defaultdict(int)
    leaf_total: dict[object, int] = defaultdict(int)
    leaf_ub: dict[object, int] = defaultdict(int)
    for n, name in enumerate(ix.node_names):
        gpus = topo.gpu_count(name)
        if gpus == 0:
            continue
        total = gpus * GPU_MILLI // unit
        # what the pods that are no one's victim leave (the snapshot's free, when none)
        free = sum(state.nodes[name].gpu_milli.values()) // unit
        run = total - free
        gpu_terms: list[tuple[int, cp_model.LinearExprT]] = [
            (ix.shapes[sh].gpu_milli // unit, e)
            for sh, e in v.shapes_on(n)
            if ix.shapes[sh].gpu_milli
        ]
        if vs is not None:
            gpu_terms += [(m // unit, v.running(u)) for m, u in vs.gpu_terms(s, n)]
        leaf = topo.domain_of(name, topo.leaf_level) if topo.leaf_level else None
        if leaf is not None:
            leaf_run[leaf] += run
            leaf_total[leaf] += total
        if not gpu_terms:
            if 0 < run < total:
                node_const -= 1
            continue
        plan: cp_model.LinearExprT = sum(c * e for c, e in gpu_terms)
        ub = free
        used = v.gpu_used(n)
        full = v.gpu_full(n)
        model.add(plan <= ub * used)
        model.add(plan >= used)
        model.add(plan >= free).only_enforce_if(full)
        model.add(plan <= free - 1).only_enforce_if(full.negated())
        model.add_implication(full, used)
        if run > 0:
            node_terms.append(-(1 - full))
        else:
            node_terms.append(-(used - full))
        if leaf is not None:
            leaf_plan[leaf].append(plan)
            leaf_ub[leaf] += ub
    terms["fragmentation.gpu_nodes"] = ObjectiveTerm(
        "fragmentation.gpu_nodes", sum(node_terms) if node_terms else None, node_const, upper=0
    )
    leaf_const = 0
    leaf_terms: list[cp_model.LinearExprT] = []
    for lkey, total in leaf_total.items():
        run = leaf_run[lkey]
        if not leaf_plan.get(lkey):
            if 0 < run < total:
                leaf_const -= 1
            continue
        plan = sum(leaf_plan[lkey])
        free = total - run
        used = v.leaf_used(lkey)
        full = v.leaf_full(lkey)
        model.add(plan <= leaf_ub[lkey] * used)
        model.add(plan >= used)
        model.add(plan >= free).only_enforce_if(full)
        model.add(plan <= free - 1).only_enforce_if(full.negated())
        model.add_implication(full, used)
        if run > 0:
            leaf_terms.append(-(1 - full))
        else:
            leaf_terms.append(-(used - full))
    terms["fragmentation.leaves"] = ObjectiveTerm(
        "fragmentation.leaves", sum(leaf_terms) if leaf_terms else None, leaf_const, upper=0
    )


def _stability(
    model: cp_model.CpModel,
    ix: Index,
    v: Variables,
    terms: dict[str, ObjectiveTerm],
    previous_pods: int,
) -> None:
    """Pods of the previous plan that stay on their node (exact mode only)."""
    if previous_pods == 0:
        terms["stability"] = ObjectiveTerm("stability", None, 0)
        return
    if not ix.exact:
        terms["stability"] = ObjectiveTerm("stability", None, 0, modelled=False)
        return
    kept: list[cp_model.IntVar] = []
    for item in ix.items:
        for n, k in item.previous.items():
            var = v.x(item.id, n)
            if var is None:
                continue
            keep = v.kept(item.id, n)
            model.add_min_equality(keep, [var, k])
            kept.append(keep)
    terms["stability"] = ObjectiveTerm(
        "stability",
        sum(kept) if kept else None,
        -previous_pods,
        upper=sum(item.previous.get(n, 0) for item in ix.items for n in item.previous),
    )
