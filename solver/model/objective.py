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
value equal to the score's entry of the same name (:mod:`gangplan.solver.judges.score`) for the
plan the solution becomes. Where an idea comes from:

* fairness: weighted shortfall below fair targets from progressive filling of dominant
  share — DRF (Ghodsi et al., NSDI'11), Volcano's ``proportion`` plugin (deserved),
  Kueue's fair sharing (weighted dominant share, weight 0 served last);
* throughput: milli-GPUs then pods admitted, per priority class (Volcano/Kueue priority),
  gangs' minimums before any growth (Volcano schedules every job's ``minAvailable`` before
  any elastic pod; Optimus and ElasticFlow grow admitted jobs only);
* locality: domains used per level, required/preferred levels — Kueue TAS (KEP-2724),
  Volcano network-topology-aware scheduling (HyperNode tiers);
* fragmentation: FGD's expected fragmentation (Weng et al., "Beware of Fragmentation",
  USENIX ATC '23, §3-§4) — per node, the free milli-GPU the workload's pod shapes cannot
  use, weighted by popularity — then partly used GPU nodes and leaves;
* stability: pods kept where the previous plan put them;
* preemption (on only): evicted pods are lost throughput of their class (fairness is
  measured on the cycle's starting usage); fewer evicted milli-GPU, then pods, then the
  most recently admitted victims first (Kueue's order among equal candidates).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from math import gcd
from typing import Any

from ortools.sat.python import cp_model

from gangplan.models import GPU_MILLI, growing_nodes, minimum_counts, running_minimum_gpu
from gangplan.models.quantity import CPU
from gangplan.solver.judges.fairness import FairShares
from gangplan.solver.judges.fragmentation import PodShape, Workload, shape_fragmentation
from gangplan.solver.judges.score import CLASS_ENTRIES, score_names
from gangplan.solver.model.indexing import Index
from gangplan.solver.model.variables import Variables, var_bounds

__all__ = ["BuildStopped", "ObjectiveTerm", "build_terms"]


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
    note: str = ""
    """why a term that could be modelled was left out (the cycle's notes say it)"""


class BuildStopped(Exception):
    """Raised by a build's check (``after_each`` of :func:`build_terms`) to stop the build:
    ``why`` (e.g. "on course for 15.01 s, over the 13.41 s the build may take"), the
    builder's ``outcome`` to return, and whether the stop is a ``projection`` (the time is
    not yet spent, so leaving the group being built out can still save the build)."""

    def __init__(self, why: str, outcome: object = None, projection: bool = True) -> None:
        super().__init__(why)
        self.why, self.outcome, self.projection = why, outcome, projection


PROJECT_FROM = 0.1
"""A group of objective terms built node by node (expected fragmentation) is projected to
its end in time once this share of its work is built (:func:`_fragmentation_work`; the
build guard's check, :class:`~gangplan.solver.model.build.BuildGuard`)."""
VARIABLES_PER_WORK = 1
"""Variables per unit of :func:`_fragmentation_work`, which bounds them from above (on
openb the term had 0.71 variables per unit, 467,597 for 661,341): a term whose start
plus this many per unit could pass the model's bound is built from a saved copy of the
model, so it can be left out rather than stop the build."""


def build_terms(
    model: cp_model.CpModel,
    ix: Index,
    v: Variables,
    shares: FairShares,
    previous_pods: int,
    after_each: Callable[[str, float], None] | None = None,
    max_variables: int | None = None,
) -> list[ObjectiveTerm]:
    """Every entry of :func:`~gangplan.solver.judges.score.score_names`, in order.

    ``after_each``: called with each group of terms' name and the share of it built so far
    (1.0 once it is built; a long group calls it as it goes), so the builder can stop a
    model that grows, or is on course to grow, past its bounds by raising from it.
    ``max_variables``: the model's bound; the expected-fragmentation term is left out of
    the model (derived from the plan afterwards, with a note) when it would take the model
    past it, so the entries above and below it are still optimised. That term is built
    last (the returned list is in the score's order whatever the build order), so its
    decision sees every other term."""
    terms: dict[str, ObjectiveTerm] = {}
    check = after_each or (lambda _name, _share: None)
    _fairness_and_throughput(model, ix, v, shares, terms)
    check("fairness and throughput", 1.0)
    _lost_throughput(ix, v, terms)
    _locality(model, ix, v, terms)
    check("locality", 1.0)
    _fragmentation(model, ix, v, terms)
    _evictions(ix, v, terms)
    _stability(model, ix, v, terms, previous_pods)
    check("fragmentation, evictions and stability", 1.0)
    _expected_fragmentation(model, ix, v, terms, check, max_variables)
    check("expected fragmentation", 1.0)
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
    minimum = _minimums(model, ix, v)
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
                lin = base.get(r, 0) + sum(k * minimum[i] for k, i in coeff if k)
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
        milli = {i: ix.shapes[ix.items[i].shape].gpu_milli for i in ids}
        # admission before growth: the minimums' pods, then the pods beyond them
        adm = [i for i in ids if not _is_zero(minimum[i])]
        grow = [i for i in ids if minimum[i] is not v.placed(i)]
        bound = {i: _bound(minimum[i], ix.items[i].count) for i in ids}
        gpu = [milli[i] * minimum[i] for i in adm if milli[i]]
        terms[f"p{c}.gpu_milli"] = ObjectiveTerm(
            f"p{c}.gpu_milli",
            sum(gpu) if gpu else None,
            weight=3,
            upper=sum(milli[i] * bound[i] for i in adm),
        )
        terms[f"p{c}.pods"] = ObjectiveTerm(
            f"p{c}.pods",
            sum(minimum[i] for i in adm) if adm else None,
            upper=sum(bound[i] for i in adm),
        )
        ggpu = [milli[i] * (v.placed(i) - minimum[i]) for i in grow if milli[i]]
        terms[f"p{c}.growth_gpu_milli"] = ObjectiveTerm(
            f"p{c}.growth_gpu_milli",
            sum(ggpu) if ggpu else None,
            upper=sum(milli[i] * ix.items[i].count for i in grow),
        )
        terms[f"p{c}.growth_pods"] = ObjectiveTerm(
            f"p{c}.growth_pods",
            sum(v.placed(i) - minimum[i] for i in grow) if grow else None,
            upper=sum(ix.items[i].count for i in grow),
        )


def _is_zero(e: cp_model.LinearExpr | int) -> bool:
    return isinstance(e, int) and e == 0


def _bound(e: cp_model.LinearExpr | int, count: int) -> int:
    """An upper bound of an item's minimum expression (its count where unknown)."""
    if isinstance(e, int):
        return e
    return count


def _minimums(
    model: cp_model.CpModel, ix: Index, v: Variables
) -> dict[int, cp_model.LinearExpr | int]:
    """Per item, its pods counted in its gang's minimum (the score's ``min(placed_r, M_r)``,
    :func:`~gangplan.models.minimum_counts`): all of them for a single-pod gang or a role
    wholly in the minimum (``placed``); none for a growth gang or a role with no share of
    the minimum; ``M_r * admit`` where the role's own minimum is that share (the gang
    constraints hold ``placed >= M_r * admit``); else ``minimum[i]`` with
    ``minimum <= placed`` and ``minimum <= M_r * admit``, which every term reading it wants
    as large as it can be (so it is the min at the optimum of the ``p{c}.pods`` tier; below
    it a term is never higher than the score's entry)."""
    growing = growing_nodes(ix.snapshot)
    gpu = ix.snapshot.gpu
    out: dict[int, cp_model.LinearExpr | int] = {}
    counts: dict[int, dict[str, int]] = {}
    for item in ix.items:
        group = ix.groups[item.group]
        if not group.multi:
            out[item.id] = v.placed(item.id)
            continue
        gang = group.gang
        if group.id not in counts:
            counts[group.id] = minimum_counts(gang, gpu, growth=gang.key in growing)
        share = counts[group.id][item.role.name]
        if share >= item.count:
            out[item.id] = v.placed(item.id)
        elif share == 0:
            out[item.id] = 0
        elif share <= gang.role_min(item.role):
            out[item.id] = share * v.admit(group.id)
        else:
            m = v.minimum(item.id, share)
            model.add(m <= v.placed(item.id))
            model.add(m <= share * v.admit(group.id))
            out[item.id] = m
    return out


def _lost_throughput(ix: Index, v: Variables, terms: dict[str, ObjectiveTerm]) -> None:
    """Evicted pods are lost throughput of their victim's class: ``p{c}.gpu_milli`` and
    ``p{c}.pods`` lose what they ask (a class with victims and no pending gang gets these
    two entries from its victims alone)."""
    vs = ix.victims
    if vs is None:
        return
    gpu = ix.snapshot.gpu
    by_class: dict[int, list[int]] = defaultdict(list)
    for unit in vs.units:
        by_class[vs.victims[unit.victim].gang.priority].append(unit.id)
    for c, units in by_class.items():
        for entry in CLASS_ENTRIES:
            # a class of victims alone: no fair target, nothing admitted (constant 0)
            terms.setdefault(f"p{c}.{entry}", ObjectiveTerm(f"p{c}.{entry}", None, 0))
        # a victim that is not elastic loses its minimum (all its pods) or nothing; an
        # elastic one's lost pods count in growth, and evicted whole (stay 0) it moves its
        # minimum (min_member pods, the fewest GPUs) from growth to the minimums' entries
        rigid = [u for u in units if not vs.victims[vs.units[u].victim].elastic]
        bendy = [u for u in units if vs.victims[vs.units[u].victim].elastic]
        minima: dict[int, tuple[int, int]] = {}
        for u in bendy:
            w = vs.units[u].victim
            if w not in minima:
                g = vs.victims[w].gang
                minima[w] = (g.min_member, running_minimum_gpu(g.pods, g.min_member, gpu))
        # (coefficient, kept expression, its value when nothing is evicted)
        per_entry: dict[str, list[tuple[int, cp_model.LinearExprT, int]]] = {
            f"p{c}.gpu_milli": [
                (vs.units[u].req(gpu), v.running(u), vs.units[u].size) for u in rigid
            ]
            + [(mg, v.stay(w), 1) for w, (_m, mg) in minima.items()],
            f"p{c}.pods": [(1, v.running(u), vs.units[u].size) for u in rigid]
            + [(m, v.stay(w), 1) for w, (m, _mg) in minima.items()],
            f"p{c}.growth_gpu_milli": [
                (vs.units[u].req(gpu), v.running(u), vs.units[u].size) for u in bendy
            ]
            + [(-mg, v.stay(w), 1) for w, (_m, mg) in minima.items()],
            f"p{c}.growth_pods": [(1, v.running(u), vs.units[u].size) for u in bendy]
            + [(-m, v.stay(w), 1) for w, (m, _mg) in minima.items()],
        }
        for name, triples in per_entry.items():
            coeffs = [(k, e, n) for k, e, n in triples if k]
            if not coeffs:
                continue
            kept: list[cp_model.LinearExprT] = [k * e for k, e, _n in coeffs]
            lost = sum(k * n for k, _e, n in coeffs)
            most = sum(k * n for k, _e, n in coeffs if k > 0)
            old = terms[name]
            expr = sum(kept) if old.expr is None else sum([old.expr, *kept])
            upper = None if old.upper is None and old.expr is not None else (old.upper or 0) + most
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
    growing = growing_nodes(ix.snapshot)
    for g in ix.groups:
        if not g.multi:
            continue
        pref = g.gang.topology.preferred if g.gang.topology else None
        admit = v.admit(g.id)
        base = growing.get(g.gang.key)
        for lv in topo.all_levels:
            if lv not in ix.levels:
                if lv == pref:
                    pref_modelled = False
                continue
            if base:
                spread = _growth_spread(ix, v, g.id, lv, base)
            else:
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


@dataclass
class _Affine:
    """``const + Σ coef·var``, with bounds from the variables' domains."""

    model: cp_model.CpModel
    const: int
    terms: list[tuple[int, cp_model.IntVar]]
    _seen: tuple[int, int, int, int] | None = field(default=None, repr=False, compare=False)
    """``(const, len(terms), lo, hi)`` of the last :meth:`_range`: terms are only ever
    appended and domains do not change while the model is built, so the bounds hold while
    ``const`` and the number of terms do (a device's bounds are read once per threshold)"""
    _made: tuple[int, int, cp_model.LinearExprT] | None = field(
        default=None, repr=False, compare=False
    )
    """``(const, len(terms), expression)`` of the last :meth:`expr`, by the same rule"""

    def _range(self) -> tuple[int, int]:
        seen = self._seen
        if seen is not None and seen[0] == self.const and seen[1] == len(self.terms):
            return seen[2], seen[3]
        lo = hi = self.const
        for c, var in self.terms:
            low, high = var_bounds(var)
            a, b = c * low, c * high
            lo, hi = lo + min(a, b), hi + max(a, b)
        self._seen = (self.const, len(self.terms), lo, hi)
        return lo, hi

    @property
    def lo(self) -> int:
        return self._range()[0]

    @property
    def hi(self) -> int:
        return self._range()[1]

    def expr(self) -> cp_model.LinearExprT:
        if not self.terms:
            return self.const
        made = self._made
        if made is not None and made[0] == self.const and made[1] == len(self.terms):
            return made[2]
        coefs = [c for c, _ in self.terms]
        out = cp_model.LinearExpr.weighted_sum([v for _, v in self.terms], coefs) + self.const
        self._made = (self.const, len(self.terms), out)
        return out

    def plus(self, other: _Affine, k: int = 1) -> _Affine:
        return _Affine(
            self.model,
            self.const + k * other.const,
            self.terms + [(k * c, var) for c, var in other.terms],
        )


Fits = bool | cp_model.IntVar
"""A condition after the plan: known (True / False) or a model boolean."""


def _kept(v: Variables, unit: int, per_pod: int) -> tuple[int, cp_model.IntVar]:
    """``per_pod`` times the pods victim unit ``unit`` keeps running, as one
    ``(coefficient, variable)`` term: ``keep[u]`` for an elastic victim, else
    ``size(u)·stay[v]``."""
    vs = v.victims
    assert vs is not None
    u = vs.units[unit]
    if vs.victims[u.victim].elastic:
        return per_pod, v.keep(unit)
    return per_pod * u.size, v.stay(u.victim)


Measures = dict[tuple[str | None, int, tuple[int, ...]], int]
"""(GPU model, free milli-CPU, free milli-GPU per device sorted) -> ``Σ_m w_m F_n(m)`` of a
node in that state, for the cycle's weights (:func:`_measure`)."""


def _measure(
    memo: Measures,
    weights: tuple[tuple[PodShape, int], ...],
    gpu_model: str | None,
    cpu: int,
    frees: tuple[int, ...],
) -> int:
    """``Σ_m w_m F_n(m)`` (:func:`~gangplan.solver.judges.fragmentation.shape_fragmentation`) of a
    node of ``gpu_model`` with ``cpu`` milli-CPU and ``frees`` (sorted) milli-GPU free: a
    function of these alone, so computed once per distinct state in ``memo`` — nodes fall
    into few such states, and each node under :meth:`_NodeFragmentation._by_taken` asks for
    one per number of GPUs the plan may take."""
    key = (gpu_model, cpu, frees)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = sum(w * shape_fragmentation(frees, cpu, gpu_model, m) for m, w in weights)
    return hit


class _NodeFragmentation:
    """``Σ_m w_m F_n(m)`` of one node the cycle can touch, as an affine expression over the
    model's variables (:func:`_expected_fragmentation`); ``measures``: the cycle's memo of
    :func:`_measure`."""

    def __init__(
        self,
        model: cp_model.CpModel,
        ix: Index,
        v: Variables,
        n: int,
        measures: Measures | None = None,
    ):
        self.m, self.ix, self.v, self.n = model, ix, v, n
        self.measures: Measures = {} if measures is None else measures
        state = ix.state
        assert state is not None
        name = ix.node_names[n]
        self.st = state.nodes[name]
        self.gpu_model = ix.snapshot.node_by_name[name].gpu_model
        on = v.shapes_on(n)
        shapes = ix.shapes
        vs = ix.victims
        cpu_terms = [(-shapes[sh].req(CPU), e) for sh, e in on if shapes[sh].req(CPU)]
        # the state leaves victims' capacity free: the pods they keep take it back
        held_cpu = (
            [_kept(v, u, c) for c, u in vs.resource_terms(ix.snapshot, n, CPU)]
            if vs is not None
            else []
        )
        self.victim_cpu = bool(held_cpu)
        cpu_terms += [(-c, var) for c, var in held_cpu]
        self.cpu = _Affine(model, self.st.resources.get(CPU, 0), cpu_terms)
        self._cpu_lo: int | None = None
        """``self.cpu.lo``, read once by :meth:`_cpu_known`"""
        # bounds for "free CPU >= c follows from the GPU condition" (_cpu_known)
        self.cpu_only = sum(
            shapes[sh].req(CPU) * _Affine(model, 0, [(1, e)]).hi
            for sh, e in on
            if not shapes[sh].gpu_milli
        )
        # the largest CPU per milli-GPU of the GPU shapes that may go here, as the fraction
        # cpu_per_milli[0] / cpu_per_milli[1] (0/1 without one), compared by integers
        self.cpu_per_milli = (0, 1)
        for sh, _e in on:
            p, q = shapes[sh].req(CPU), shapes[sh].gpu_milli
            if q and p * self.cpu_per_milli[1] > self.cpu_per_milli[0] * q:
                self.cpu_per_milli = (p, q)
        self.free0 = sum(self.st.gpu_milli.values())
        self.devices: list[tuple[str, _Affine]] | None = None
        if v.has_whole(n):
            self.devices = []
            for d in self.st.gpu_order:
                terms: list[tuple[int, cp_model.IntVar]] = []
                for sh, _e in on:
                    var = v.share(sh, n, d) if shapes[sh].share else None
                    if var is not None:
                        terms.append((-shapes[sh].share, var))
                w = v.whole(n, d)
                if w is not None:
                    terms.append((-GPU_MILLI, w))
                if vs is not None:
                    terms += [
                        (-c, var) for c, var in (_kept(v, u, m) for m, u in vs.device_terms(n, d))
                    ]
                self.devices.append((d, _Affine(model, self.st.gpu_milli[d], terms)))
            self.total = _Affine(model, 0, [])
            for _d, a in self.devices:
                self.total = self.total.plus(a)
        else:
            # no shares and no victims' GPUs here (:meth:`Variables.has_whole`): whole GPUs
            # come from fully free devices, which are alike
            assert vs is None or not vs.gpu_terms(ix.snapshot, n)
            self.taken = _Affine(
                model, 0, [(shapes[sh].whole, e) for sh, e in on if shapes[sh].whole]
            )
            self.full = sum(1 for f in self.st.gpu_milli.values() if f == GPU_MILLI)
            self.total = _Affine(model, self.free0, []).plus(self.taken, -GPU_MILLI)
        self._at: dict[int, tuple[_Affine, _Affine]] = {}
        self._ok: dict[tuple[object, ...], Fits] = {}

    def _threshold(self, a: _Affine, at_least: int, what: tuple[object, ...]) -> Fits:
        """``a ≥ at_least`` after the plan: known, or a ``frag_ok`` boolean reified."""
        if what in self._ok:
            return self._ok[what]
        lo, hi = a._range()
        got: Fits
        if at_least <= 0 or lo >= at_least:  # what the plan leaves is never negative
            got = True
        elif hi < at_least:
            got = False
        else:
            got = self.v.frag_ok(self.n, what)
            self.m.add(a.expr() >= at_least).only_enforce_if(got)
            self.m.add(a.expr() <= at_least - 1).only_enforce_if(got.Not())
        self._ok[what] = got
        return got

    def _cpu_known(self, c: int, k: int, g: int) -> bool | None:
        """Is "free CPU ≥ c" known wherever "k devices with ≥ g free" holds? True / False, or
        None (the model must say). When k devices keep g free, the plan's GPU pods use at most
        ``free0 − k·g`` milli-GPU, hence at most that times the largest CPU per milli-GPU of
        the shapes that may go here, besides the CPU-only pods."""
        top = self.cpu.const
        if c <= 0:
            return True
        if c > top:
            return False
        if self._cpu_lo is None:
            self._cpu_lo = self.cpu.lo  # the least free CPU the plan may leave (fixed here)
        if self._cpu_lo >= c:
            return True
        if self.victim_cpu:
            return None  # what victims keep is not bounded by the GPU condition
        # top − (cpu_only + p/q · gpu_used) ≥ c, multiplied by q > 0
        p, q = self.cpu_per_milli
        left = (top - self.cpu_only - c) * q
        return True if left >= p * max(0, self.free0 - k * g) else None

    def at(self, g: int) -> tuple[_Affine, _Affine]:
        """(devices with ≥ g milli free, their free milli in all) after the plan."""
        hit = self._at.get(g)
        if hit is not None:
            return hit
        m, v, n = self.m, self.v, self.n
        count = _Affine(m, 0, [])
        amount = _Affine(m, 0, [])
        if self.devices is None:
            partial = [f for f in self.st.gpu_milli.values() if g <= f < GPU_MILLI]
            fulls = _Affine(m, self.full, []).plus(self.taken, -1)
            count = _Affine(m, len(partial), []).plus(fulls)
            amount = _Affine(m, sum(partial), []).plus(fulls, GPU_MILLI)
        else:
            for d, f in self.devices:
                lo, hi = f._range()
                if lo >= g:
                    count.const += 1
                    amount = amount.plus(f)
                elif hi >= g:
                    ge = v.frag_ge(n, d, g)
                    m.add(f.expr() >= g).only_enforce_if(ge)
                    m.add(f.expr() <= g - 1).only_enforce_if(ge.Not())
                    part = v.frag_part(n, d, g)
                    m.add(part == f.expr()).only_enforce_if(ge)
                    m.add(part == 0).only_enforce_if(ge.Not())
                    count.terms.append((1, ge))
                    amount.terms.append((1, part))
        self._at[g] = (count, amount)
        return count, amount

    def value(self, weights: tuple[tuple[PodShape, int], ...]) -> _Affine:
        """``Σ_m w_m F_n(m) = W·T_n − Σ_{m fits} w_m·A_n(g_m)`` (W the weights' sum), or, on
        a node without shares where no shape's CPU is in doubt, ``Σ_j F_n(j)·[j GPUs taken]``
        (:meth:`_by_taken`)."""
        groups: dict[tuple[int, int, int], int] = defaultdict(int)
        for shape, w in weights:
            if shape.gpus and (not shape.gpu_models or self.gpu_model in shape.gpu_models):
                groups[(shape.cpu_milli, shape.gpus, shape.gpu_milli)] += w
        if self.devices is None and all(self._cpu_known(*key) is not None for key in groups):
            return self._by_taken(weights)
        out = _Affine(self.m, 0, []).plus(self.total, sum(w for _, w in weights))
        # shapes whose condition is the same literal (or always true) and whose g is the
        # same share one product: (fits, g) -> [weight, a key naming the variable]
        merged: dict[tuple[object, int], list[Any]] = {}
        for key, w in sorted(groups.items()):
            c, k, g = key
            count, _amount = self.at(g)
            gpus = self._threshold(count, k, ("gpus", k, g))
            known = self._cpu_known(c, k, g)
            cpu = self._threshold(self.cpu, c, ("cpu", c)) if known is None else known
            if gpus is False or cpu is False:
                continue
            conds = [x for x in (gpus, cpu) if not isinstance(x, bool)]
            fits: Fits = True
            if len(conds) == 1:
                fits = conds[0]
            elif conds:
                fits = self.v.frag_fits(self.n, key)
                self.m.add_bool_and(conds).only_enforce_if(fits)
                self.m.add_bool_or([x.Not() for x in conds]).only_enforce_if(fits.Not())
            slot = (True if isinstance(fits, bool) else fits.index, g)
            if slot in merged:
                merged[slot][0] += w
            else:
                merged[slot] = [w, key, fits]
        for (_f, g), (w, key, fits) in merged.items():
            _count, amount = self.at(g)
            if isinstance(fits, bool):
                out = out.plus(amount, -w)
                continue
            use = self.v.frag_use(self.n, key, max(0, amount.hi))
            self.m.add(use == amount.expr()).only_enforce_if(fits)
            self.m.add(use == 0).only_enforce_if(fits.Not())
            out.terms.append((-w, use))
        return out

    def _by_taken(self, weights: tuple[tuple[PodShape, int], ...]) -> _Affine:
        """A node without shares whose every shape's CPU condition is known
        (:meth:`_cpu_known`): its measure depends only on how many fully free devices the
        plan takes, j, so it is ``Σ_j F_n(j)·frag_taken[n, j]`` (``Σ_j frag_taken = 1``,
        ``Σ_j j·frag_taken = taken``), ``F_n(j)`` computed as the score computes it, with
        the node's free CPU before the plan (where a shape's CPU matters, it is known)."""
        m = self.m
        lo, hi = self.taken._range()
        lo, hi = max(0, lo), min(self.full, hi)
        partial = [f for f in self.st.gpu_milli.values() if f < GPU_MILLI]
        cpu = self.cpu.const

        def f_of(j: int) -> int:
            frees = tuple(sorted([*partial, *([GPU_MILLI] * (self.full - j)), *([0] * j)]))
            return _measure(self.measures, weights, self.gpu_model, cpu, frees)

        if lo >= hi:
            return _Affine(m, f_of(lo), [])
        flags = [(j, self.v.frag_taken(self.n, j)) for j in range(lo, hi + 1)]
        m.add_exactly_one([x for _j, x in flags])
        m.add(sum(j * x for j, x in flags) == self.taken.expr())
        return _Affine(m, 0, [(f_of(j), x) for j, x in flags])


def _fragmentation_work(
    ix: Index, v: Variables, weights: tuple[tuple[PodShape, int], ...]
) -> dict[int, int]:
    """Node index -> at least the variables :class:`_NodeFragmentation` adds there, for nodes
    some pod of the cycle may use: ``1 + full + 4·groups + 2·crossings``. ``full``: its fully
    free GPUs (``frag_taken`` has at most ``full + 1`` flags); ``groups``: the workload's
    distinct GPU shapes ``(c, k, g)`` it may take (``frag_ok`` for the GPU and CPU
    conditions, ``frag_fits`` and ``frag_use``: at most four each); ``crossings``, where GPU
    shares may go: per device, the shapes' distinct ``g`` at most its free milli-GPU
    (``frag_ge`` and ``frag_part`` each). The builder projects the term's size and time from
    the share of this work done, and a term whose whole bound fits is never at risk."""
    state = ix.state
    assert state is not None
    sizes = sorted({m.gpu_milli for m, _w in weights if m.gpus})
    groups: dict[str | None, int] = {}
    out: dict[int, int] = {}
    for n, name in enumerate(ix.node_names):
        st = state.nodes[name]
        if not st.gpu_order or not v.shapes_on(n):
            continue
        model = ix.snapshot.node_by_name[name].gpu_model
        if model not in groups:
            groups[model] = len(
                {
                    (m.cpu_milli, m.gpus, m.gpu_milli)
                    for m, _w in weights
                    if m.gpus and (not m.gpu_models or model in m.gpu_models)
                }
            )
        frees = st.gpu_milli.values()
        work = 1 + sum(1 for f in frees if f == GPU_MILLI) + 4 * groups[model]
        if v.has_whole(n):
            work += 2 * sum(bisect_right(sizes, f) for f in frees)
        out[n] = work
    return out


def _expected_fragmentation(
    model: cp_model.CpModel,
    ix: Index,
    v: Variables,
    terms: dict[str, ObjectiveTerm],
    check: Callable[[str, float], None] = lambda _name, _share: None,
    max_variables: int | None = None,
) -> None:
    """``fragmentation.expected``: minus ``Σ_n Σ_m w_m F_n(m)`` after the plan, exactly as
    :func:`~gangplan.solver.judges.score.expected_fragmentation` counts it (the workload of
    ``Workload.of_snapshot``, weights reduced by their gcd).

    ``F_n(m) = T_n − fits(n, m)·A_n(g_m)``, ``T_n`` the node's free milli-GPU after the plan,
    ``A_n(g)`` the free milli of its devices with at least ``g`` free, ``fits`` "free CPU ≥
    c_m and at least k_m such devices" (FGD's measure, ``solver/judges/fragmentation.py``; a shape
    whose GPU models the node lacks, or that asks no GPU, has ``F_n(m) = T_n``). Per device
    that GPU shares may use and per distinct ``g``, ``frag_ge`` is reified from the device's
    free milli (known from ``share`` and ``whole``), ``frag_part`` = free × ``frag_ge``;
    on nodes without shares the fully free devices are alike and counted. ``frag_fits`` and
    ``frag_use`` = ``A_n(g)`` × ``frag_fits`` by enforcement literals (exact, both ways,
    bounded by the node's GPUs × 1000). Nodes no pod of the cycle may go to are a constant.

    Where the term could take the model past ``max_variables`` (its work bounds its size,
    :func:`_fragmentation_work`), it is built from a saved copy of the model; when the model
    passes the bound, the model is restored to the copy and the term left out
    (``modelled=False``, a note): on openb's 1,523 nodes with GPU shares it alone would have
    467,597 variables.
    """
    name = "fragmentation.expected"
    s = ix.snapshot
    weights = Workload.of_snapshot(s).reduced()
    if not weights:
        terms[name] = ObjectiveTerm(name, None, 0)
        return
    state = ix.state
    assert state is not None
    const = 0
    var_terms: list[tuple[int, cp_model.IntVar]] = []
    memo: Measures = {}
    work = _fragmentation_work(ix, v, weights)
    total_work, done = sum(work.values()), 0
    start = len(model.proto.variables)
    saved: cp_model.CpModel | None = None
    if max_variables is not None and start + VARIABLES_PER_WORK * total_work > max_variables:
        saved = cp_model.CpModel()
        saved.proto.copy_from(model.proto)
    check(name, 0.0)  # the term's work begins here (after the copy)
    for n, node_name in enumerate(ix.node_names):
        st = state.nodes[node_name]
        if not st.gpu_order:
            continue
        gpu_model = s.node_by_name[node_name].gpu_model
        if not v.shapes_on(n):
            cpu_free, gpu_free = st.resources.get(CPU, 0), st.gpu_milli
            if ix.victims is not None and n in ix.victims.by_node:
                # no pod of the cycle may go here, so no victim here is evicted
                # (constraint family evictions_needed): the snapshot's own free amounts
                free = s.free(node_name)
                cpu_free, gpu_free = free.resources.get(CPU, 0), free.gpu_milli
            const += _measure(memo, weights, gpu_model, cpu_free, tuple(sorted(gpu_free.values())))
            continue
        value = _NodeFragmentation(model, ix, v, n, memo).value(weights)
        # a model too large stops here, not at the end: a node with GPU shares adds hundreds
        # of variables (milliseconds of building), a check costs about a microsecond
        now = len(model.proto.variables)
        done += work.get(n, 0)
        share = done / total_work if total_work else 1.0
        # left out when the model passes the bound (its real size, not a projection: nodes
        # of one kind first make any projection from them err), or when the builder's check
        # would stop the build for time: the rest of the model may still be solved
        why = None
        if saved is not None and max_variables is not None and now > max_variables:
            why = f"the model had {now:,} variables, over its bound of {max_variables:,}"
        else:
            try:
                check("expected fragmentation", share)
            except BuildStopped as stop:
                if saved is None or not stop.projection:
                    raise  # the time is spent already: leaving the term out saves nothing
                why = f"its build was {stop.why}"
        if why is not None and saved is not None:
            model.proto.copy_from(saved.proto)
            model.rebuild_constant_map()
            v.forget_from(start)
            terms[name] = ObjectiveTerm(
                name,
                None,
                0,
                modelled=False,
                note=(
                    f"{name} left out of the model: {int(100 * share)}% into it, {why}; "
                    "the entry is scored after the solve, and the entries below it are "
                    "optimised without it"
                ),
            )
            return
        const += value.const
        var_terms += value.terms
    expr = (
        cp_model.LinearExpr.weighted_sum([x for _, x in var_terms], [-c for c, _ in var_terms])
        if var_terms
        else None
    )
    terms[name] = ObjectiveTerm(
        name,
        expr,
        -const,
        upper=const,  # the entry is never positive: expr + const ≤ 0
    )


def _growth_spread(
    ix: Index, v: Variables, group: int, level: str, base: list[str]
) -> cp_model.LinearExprT:
    """A growth gang's spread at ``level``: the domains its new pods use that its running
    pods (on ``base``) do not (the score's count, ``solver/judges/score.py``)."""
    nidx = ix.node_index
    held = {ix.domain_of_block[level][ix.block_of_node[nidx[n]]] for n in base if n in nidx}
    keys = {
        ix.domain_of_block[level][b] for i in ix.groups[group].items for b, _ in v.item_blocks(i)
    }
    return sum(v.uses(("g", group), level, k) for k in sorted(keys - held, key=str))


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
