"""Large neighbourhood search around the best solution, for one tier of the lexicographic loop.

On a large cycle (thousands of nodes) one CP-SAT solve of the whole model, hinted with the
incumbent, seldom improves a tier within its share of the budget: the search spends it in
presolve or in the hint's neighbourhood without a better solution. LNS (Shaw, "Using
Constraint Programming and Local Search Methods to Solve Vehicle Routing Problems", CP 1998;
Pisinger and Ropke, "Large Neighborhood Search", Handbook of Metaheuristics, 2010) instead
fixes every decision variable to the best solution's value except those of a neighbourhood,
re-solves that small problem, keeps it when it is better, and repeats with another
neighbourhood. CP-SAT's own LNS workers do this inside one solve; on 2 workers its portfolio
has few of them, and none that know the cluster's topology.

A neighbourhood here is a set of *parts* of the cluster: the leaf domains (the lowest level,
a rack), or for nodes in no leaf, runs of :data:`CHUNK` nodes. Freeing a part frees every
decision variable that counts pods there (``x`` of its blocks, ``z``, ``joint``,
``joint_nic``, ``share``, ``whole``) and the victims running there (``stay``, ``keep``);
``admit`` is always free. The auxiliary variables that describe one node or one domain
(``zsum``, ``joint_any``, ``gpu_used``, ``leaf_used``, ``uses``, ``kept``, the ``frag_*`` of
FGD's measure, ...) are fixed with the parts they describe: fixing any variable at the best
solution's value keeps that solution feasible, and these change only with the pods of their
own node or domain, or with the eviction of a victim running there (a node's variables go
with every part of its victims); ``uses``, bounded from below only, is fixed only at 0
(:data:`AT_ZERO_ONLY`). So a step's model has only the neighbourhood's variables free and
CP-SAT's presolve removes the rest at once (on a 5,120-node cycle a step took 0.15 s instead
of 0.38 s to prove the same neighbourhood, and 0.09 s instead of 0.29 s another: most of a
step's time was the presolve of auxiliary variables left free for nothing). The pods of
gangs placed outside the parts stay where they are;
pending gangs may enter the parts, gangs placed in them may leave, move or be dropped, so
one step can swap the gangs of two queues (fairness), fill a stranded node (throughput) or
gather a gang into one leaf (locality). Parts are drawn at random (seeded), half the time
as a run of neighbouring leaves (one spine), half the time from anywhere; the neighbourhood
grows after a step that proved its optimum quickly and shrinks after one that ran out of
time (adaptive LNS, Pisinger and Ropke).

Every step's solution is a solution of the whole model (the same variables, with more
fixed), so the tiers fixed before stay met; a step's bound is only the neighbourhood's and is
never reported as the tier's.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from gangplan.solver.model.indexing import Index
from gangplan.solver.model.variables import Variables

__all__ = ["CHUNK", "Neighbourhoods", "Pace", "StepLimits", "improve"]

CHUNK = 16
"""Nodes in no leaf domain are split into parts of this many consecutive nodes."""
MIN_DECISIONS = 4_000
"""Below this many decision variables the whole model is searched (LNS is not used)."""
START_SIZE = 0.1
"""The first neighbourhood frees about this share of the decision variables (at least
:data:`MIN_SIZE`)."""
MIN_SIZE = 200
GROW, SHRINK = 1.5, 0.7
STEP = 0.3
"""The first steps' length (seconds; deterministic seconds in deterministic mode)."""
MAX_STEP = 2.0
STALL = 2
"""Steps in a row that prove their neighbourhood holds nothing better, after which a tier
stops its search and leaves its time to the next tiers (on a 5,120-node cycle the first
tiers' neighbourhoods are often exhausted while later tiers still improve)."""
STEP_PARAMS: tuple[tuple[str, int], ...] = (("cp_model_probing_level", 0), ("symmetry_level", 0))
"""CP-SAT parameters of every step: most of a step's time is the presolve of the whole model
(its fixed variables removed); probing and symmetry detection there cost more than they save
on a neighbourhood of about a thousand free variables (measured on a 2,048-node fat-tree at
10 s: more steps, and a better fairness entry, without them)."""


Part = object
"""A leaf domain, or ``("chunk", k)``."""


@dataclass
class Neighbourhoods:
    """The model's decision variables grouped by the part of the cluster they count pods in.

    ``by_part``: part -> proto indices of its decision variables; ``always``: decision
    variables free in every neighbourhood (``admit``); ``decisions``: every decision
    variable's proto index; ``runs``: the parts in topology order (neighbouring leaves
    adjacent), for runs of neighbours; ``aux_by_part``: part -> proto indices of the
    auxiliary variables of its nodes and domains (module docstring), fixed with it (a
    variable of a domain over several parts, or of a node where a victim over several
    parts runs, is listed under each).
    """

    by_part: dict[Part, list[int]]
    always: list[int]
    decisions: list[int]
    runs: list[Part]
    aux_by_part: dict[Part, list[int]] = field(default_factory=dict)
    at_zero_only: frozenset[int] = frozenset()
    """auxiliary variables fixed only where the best solution has them at 0"""
    _copy: FixedCopy | None = field(default=None, init=False, repr=False)

    def fixed_copy(self, model: cp_model.CpModel, solution: Sequence[int]) -> FixedCopy:
        """The model's :class:`FixedCopy`, made on first use and synced with ``model`` and
        ``solution`` (the best solution now) after."""
        if self._copy is None:
            always = set(self.always)
            local = [i for i in self.local() if i not in always]
            self._copy = FixedCopy(model, local, solution, self.at_zero_only)
        else:
            self._copy.sync(model, solution)
        return self._copy

    @classmethod
    def of(cls, ix: Index, v: Variables) -> Neighbourhoods:
        """Group ``v``'s decision variables by part (module docstring)."""
        topo = ix.ctx.topo
        leaf_level = topo.leaf_level
        part_of: list[Part] = []
        for n, name in enumerate(ix.node_names):
            leaf = topo.domain_of(name, leaf_level) if leaf_level else None
            part_of.append(leaf if leaf is not None else ("chunk", n // CHUNK))
        by_part: dict[Part, list[int]] = defaultdict(list)
        always: list[int] = []
        decisions: list[int] = []

        def node_var(node: int, var: cp_model.IntVar) -> None:
            by_part[part_of[node]].append(var.index)
            decisions.append(var.index)

        kinds = v.by_kind()
        for (_i, b), var in kinds["x"].items():
            parts = {part_of[n] for n in ix.blocks[b].nodes}
            for p in parts:
                by_part[p].append(var.index)
            decisions.append(var.index)
        for var in kinds["admit"].values():
            always.append(var.index)
            decisions.append(var.index)
        for kind in ("z", "joint", "joint_nic", "share", "whole"):
            for key, var in kinds[kind].items():
                node_var(key[1] if kind != "whole" else key[0], var)
        victims = ix.victims
        if victims is not None:
            for u, var in kinds["keep"].items():
                node_var(victims.units[u].node, var)
            for vic, var in kinds["stay"].items():
                parts = {part_of[victims.units[u].node] for u in victims.victims[vic].units}
                for p in parts:
                    by_part[p].append(var.index)
                decisions.append(var.index)
        order = {p: k for k, p in enumerate(dict.fromkeys(part_of))}
        runs = sorted(by_part, key=lambda p: order[p])
        loose = frozenset(var.index for kind in AT_ZERO_ONLY for var in kinds[kind].values())
        return cls(dict(by_part), always, decisions, runs, _aux_by_part(ix, v, part_of), loose)

    def draw(self, rng: random.Random, size: int) -> set[int]:
        """Decision variables (proto indices) of parts drawn until at least ``size`` are
        free (``always`` included)."""
        return self.draw_parts(rng, size)[0]

    def draw_parts(self, rng: random.Random, size: int) -> tuple[set[int], list[Part]]:
        """:meth:`draw`, and the parts drawn."""
        free = set(self.always)
        parts: list[Part] = []
        if not self.runs:
            return free, parts
        if rng.random() < 0.5:
            start = rng.randrange(len(self.runs))
            order = self.runs[start:] + self.runs[:start]
        else:
            order = rng.sample(self.runs, len(self.runs))
        for part in order:
            if len(free) >= size:
                break
            free.update(self.by_part[part])
            parts.append(part)
        return free, parts

    def local(self) -> list[int]:
        """Every variable a step fixes unless its part is drawn: the decisions of every part
        and the auxiliary variables of their nodes and domains (no duplicates)."""
        out = dict.fromkeys(i for vs in self.by_part.values() for i in vs)
        out.update(dict.fromkeys(i for vs in self.aux_by_part.values() for i in vs))
        return list(out)


NODE_AT: tuple[tuple[str, int], ...] = (
    ("zsum", 1),
    ("joint_any", 1),
    ("gpu_used", -1),
    ("gpu_full", -1),
    ("kept", 1),
    ("frag_ge", 0),
    ("frag_part", 0),
    ("frag_ok", 0),
    ("frag_fits", 0),
    ("frag_use", 0),
    ("frag_taken", 0),
)
"""Auxiliary kinds that describe one node: where the node's dense index is in the key
(``-1``: the key is the node). The table of :mod:`gangplan.solver.model.variables`."""
DOMAIN_KINDS = ("uses", "leaf_used", "leaf_full")
"""Auxiliary kinds that describe one domain (the key's last element, or the key itself)."""
AT_ZERO_ONLY = ("uses",)
"""Kinds fixed only where the best solution has them at 0, and left free at 1: the model
bounds ``uses`` from below only (``x <= count * uses``), so a solution may hold a 1 for a
domain without a pod of its owner, which a fixed part must still be able to drop (the
locality tiers count it). At 0 nothing of the owner is in the domain, and a step that does
not free the domain cannot put anything there."""


def _aux_by_part(ix: Index, v: Variables, part_of: list[Part]) -> dict[Part, list[int]]:
    """The auxiliary variables of each part's nodes and domains (:class:`Neighbourhoods`).

    A node's variables are listed under its own part and under every part of each victim
    running on it: freeing any of a victim's parts frees its ``stay``, and evicting it
    changes the node flags and FGD's measure of all its nodes (a victim over several leaves
    could not be evicted otherwise). A domain's parts are those of its nodes (through the
    blocks it holds, at every level, and the leaves). A variable whose domain is not found
    is left out (free in every step)."""
    node_parts: list[set[Part]] = [{p} for p in part_of]
    victims = ix.victims
    if victims is not None:
        for vic in victims.victims:
            nodes = {victims.units[u].node for u in vic.units}
            parts = {part_of[n] for n in nodes}
            for n in nodes:
                node_parts[n] |= parts
    parts_of_domain: dict[object, set[Part]] = defaultdict(set)
    for keys in ix.domain_of_block.values():
        for b, dom in enumerate(keys):
            for n in ix.blocks[b].nodes:
                parts_of_domain[dom] |= node_parts[n]
    topo = ix.ctx.topo
    if topo.leaf_level:
        for n, name in enumerate(ix.node_names):
            leaf = topo.domain_of(name, topo.leaf_level)
            if leaf is not None:
                parts_of_domain[leaf] |= node_parts[n]
    out: dict[Part, list[int]] = defaultdict(list)
    kinds = v.by_kind()
    for kind, at in NODE_AT:
        for key, var in kinds[kind].items():
            for p in node_parts[key if at < 0 else key[at]]:
                out[p].append(var.index)
    for kind in DOMAIN_KINDS:
        for key, var in kinds[kind].items():
            dom = key[-1] if kind == "uses" else key
            for p in parts_of_domain.get(dom, ()):
                out[p].append(var.index)
    return dict(out)


@dataclass
class StepLimits:
    """How long one step may run: wall seconds, or deterministic seconds (deterministic
    mode), and with how many workers."""

    seconds: float
    deterministic: float | None
    workers: int
    seed: int


@dataclass
class Pace:
    """What the steps have learnt about the model, kept from tier to tier: how many
    decision variables a neighbourhood frees (``size``) and how long a step is given
    (``step``: seconds, deterministic seconds in deterministic mode). A step that ends with
    no solution at all (not even the hint back: the presolve of a large model outlasted
    it) doubles ``step``, up to :data:`MAX_STEP`.

    ``size`` is learnt per kind of entry (``kind``: the entry's name without its priority
    class, e.g. ``fairness`` for ``p100.fairness``; a kind's first steps start from the size
    the last step left), since how large a neighbourhood a step
    can prove depends on what it optimises: on a 5,120-node cycle the throughput entries'
    steps proved 6,700 free decisions in 0.3 s, while a fairness step ran out of time on
    10,000 (with one size for all, the fairness tier inherited it and its one step was
    wasted). ``step`` is one for the model: it measures the presolve, whatever the entry.
    """

    start: int
    step: float = STEP
    kind: str = ""
    sizes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, hood: Neighbourhoods) -> Pace:
        return cls(max(MIN_SIZE, int(START_SIZE * len(hood.decisions))))

    @property
    def size(self) -> int:
        """The size learnt for ``kind``; for a kind without steps yet, the size the last
        step left (``start`` before the first)."""
        return self.sizes.get(self.kind, self.last)

    @size.setter
    def size(self, value: int) -> None:
        self.sizes[self.kind] = self.last = value

    def __post_init__(self) -> None:
        self.last = self.start


def improve(
    model: cp_model.CpModel,
    expr: cp_model.LinearExprT,
    start: cp_model.CpSolver,
    hood: Neighbourhoods,
    pace: Pace,
    *,
    limits: Callable[[float, float], StepLimits | None],
    run: Callable[[cp_model.CpSolver, cp_model.CpModel], object],
    rng: random.Random,
) -> tuple[list[cp_model.CpSolver], float, bool, bool]:
    """LNS on ``model`` maximising ``expr`` from ``start``'s solution (module docstring).

    ``limits(det, step)``, given the deterministic seconds the steps used so far and the
    step's wanted length (``pace.step``), gives the next step's limits, or None to stop
    (time up, or a stop requested); ``run`` solves (e.g. stoppable by Ctrl-C); ``pace`` is
    updated. Stops after :data:`STALL` steps in a row that proved their neighbourhood holds
    nothing better. Returns the solvers whose solutions improved ``expr``, best last, the
    deterministic time all steps used, whether a step freed every decision variable and
    proved its optimum (then the tier's value is optimal), and whether the search stopped
    because :data:`STALL` steps in a row proved nothing better (not for want of time).
    """
    model.maximize(expr)
    best = start
    value = best.value(expr)
    found: list[cp_model.CpSolver] = []
    det = 0.0
    steps = 0
    idle = 0
    copy: FixedCopy | None = None
    while idle < STALL and (lim := limits(det, pace.step)) is not None:
        steps += 1
        if copy is None:
            copy = hood.fixed_copy(model, best.response_proto.solution)
        free, parts = hood.draw_parts(rng, pace.size)
        if len(free) >= len(hood.decisions) and pace.size > MIN_SIZE:
            pace.size = max(MIN_SIZE, len(hood.decisions) // 2)  # the whole model: no point
            free, parts = hood.draw_parts(rng, pace.size)
        if len(free) >= len(hood.decisions):
            freed = set(copy.local.tolist())  # the whole model, parts without decisions too
        else:
            freed = free.union(*(hood.aux_by_part.get(p, ()) for p in parts))
        trial = copy.model.clone()
        proto = trial.proto
        for idx in freed:
            dom = proto.variables[idx].domain
            dom.clear()
            dom.extend(copy.original[idx].domain)
        sol = best.response_proto.solution
        hint = proto.solution_hint
        hint.vars.extend(range(len(sol)))
        hint.values.extend(sol)
        solver = cp_model.CpSolver()
        p = solver.parameters
        p.random_seed = lim.seed + steps
        p.num_workers = lim.workers
        p.max_time_in_seconds = max(0.01, lim.seconds)
        for k, val in STEP_PARAMS:
            setattr(p, k, val)
        if lim.deterministic is not None:
            p.max_deterministic_time = max(0.001, lim.deterministic)
        st = run(solver, trial)
        det += solver.response_proto.deterministic_time
        if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            given = lim.deterministic if lim.deterministic is not None else lim.seconds
            if st == cp_model.UNKNOWN and given >= 0.99 * pace.step:
                # out of its full time before any solution: a longer step (a step cut short
                # by the tier's end says nothing about the pace)
                pace.step = min(MAX_STEP, pace.step * 2)
            else:
                idle += 1  # never expected (the hint is feasible); not a reason to spin
            pace.size = max(MIN_SIZE, int(pace.size * SHRINK))
            continue
        if solver.value(expr) > value:
            best, value = solver, solver.value(expr)
            found.append(solver)
            idle = 0
            copy.update(best.response_proto.solution)
        elif st == cp_model.OPTIMAL:
            idle += 1
        if st == cp_model.OPTIMAL:
            if len(free) >= len(hood.decisions):
                return found, det, True, False  # every decision was free: proven
            pace.size = int(pace.size * GROW)
        else:
            pace.size = max(MIN_SIZE, int(pace.size * SHRINK))
    return found, det, False, idle >= STALL


class FixedCopy:
    """A copy of the model with every part's variables fixed at the best solution's values
    (:meth:`Neighbourhoods.local`; ``always`` left free; ``at_zero_only`` fixed only at 0,
    :data:`AT_ZERO_ONLY`), from which each step frees its parts. Fixing some 75,000
    variables costs about 0.1 s in Python, more than a step's presolve saves, so the copy
    is made once per model and kept in step with it: the constraints the tier loop adds
    (each tier's fix) and the objective are copied over, and only the variables whose best
    value changed are fixed again."""

    def __init__(
        self,
        model: cp_model.CpModel,
        local: list[int],
        solution: Sequence[int],
        at_zero_only: frozenset[int] = frozenset(),
    ):
        self.original = model.proto.variables
        """the model's own domains (the tier loop never changes them)"""
        self.model = model.clone()
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        self.at_zero_only = at_zero_only
        self.local = np.asarray(local, dtype=np.int64)
        self.values = np.asarray(solution, dtype=np.int64)[self.local]
        self._fix(self.local, self.values)

    def sync(self, model: cp_model.CpModel, solution: Sequence[int]) -> None:
        """Take ``model``'s new constraints and objective, and fix what ``solution`` moved."""
        mine, theirs = self.model.proto.constraints, model.proto.constraints
        for k in range(len(mine), len(theirs)):
            mine.add().copy_from(theirs[k])
        self.model.proto.objective.copy_from(model.proto.objective)
        self.update(solution)

    def update(self, solution: Sequence[int]) -> None:
        """A better ``solution`` (a step's, or the next tier's best): fix again what moved
        (the freed parts, and the variables left free at 1)."""
        now = np.asarray(solution, dtype=np.int64)[self.local]
        moved = np.flatnonzero(now != self.values)
        self._fix(self.local[moved], now[moved])
        self.values = now

    def _fix(self, indices: np.ndarray, values: np.ndarray) -> None:
        variables = self.model.proto.variables
        loose = self.at_zero_only
        for idx, val in zip(indices.tolist(), values.tolist(), strict=True):
            dom = variables[idx].domain
            dom.clear()
            if val != 0 and idx in loose:
                dom.extend(self.original[idx].domain)
            else:
                dom.extend([val, val])
