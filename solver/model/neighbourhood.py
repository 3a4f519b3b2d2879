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
``admit`` is always free. The pods of gangs placed outside the parts stay where they are;
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
from collections.abc import Callable
from dataclasses import dataclass

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
    adjacent), for runs of neighbours.
    """

    by_part: dict[Part, list[int]]
    always: list[int]
    decisions: list[int]
    runs: list[Part]

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
        return cls(dict(by_part), always, decisions, runs)

    def draw(self, rng: random.Random, size: int) -> set[int]:
        """Decision variables (proto indices) of parts drawn until at least ``size`` are
        free (``always`` included)."""
        free = set(self.always)
        if not self.runs:
            return free
        if rng.random() < 0.5:
            start = rng.randrange(len(self.runs))
            order = self.runs[start:] + self.runs[:start]
        else:
            order = rng.sample(self.runs, len(self.runs))
        for part in order:
            if len(free) >= size:
                break
            free.update(self.by_part[part])
        return free


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
    it) doubles ``step``, up to :data:`MAX_STEP`."""

    size: int
    step: float = STEP

    @classmethod
    def of(cls, hood: Neighbourhoods) -> Pace:
        return cls(max(MIN_SIZE, int(START_SIZE * len(hood.decisions))))


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
) -> tuple[list[cp_model.CpSolver], float, bool]:
    """LNS on ``model`` maximising ``expr`` from ``start``'s solution (module docstring).

    ``limits(det, step)``, given the deterministic seconds the steps used so far and the
    step's wanted length (``pace.step``), gives the next step's limits, or None to stop
    (time up, or a stop requested); ``run`` solves (e.g. stoppable by Ctrl-C); ``pace`` is
    updated. Stops after :data:`STALL` steps in a row that proved their neighbourhood holds
    nothing better. Returns the solvers whose solutions improved ``expr``, best last, the
    deterministic time all steps used, and whether a step freed every decision variable and
    proved its optimum (then the tier's value is optimal).
    """
    model.maximize(expr)
    best = start
    value = best.value(expr)
    found: list[cp_model.CpSolver] = []
    det = 0.0
    steps = 0
    idle = 0
    while idle < STALL and (lim := limits(det, pace.step)) is not None:
        steps += 1
        free = hood.draw(rng, pace.size)
        if len(free) >= len(hood.decisions) and pace.size > MIN_SIZE:
            pace.size = max(MIN_SIZE, len(hood.decisions) // 2)  # the whole model: no point
            free = hood.draw(rng, pace.size)
        trial = model.clone()
        trial.clear_hints()  # type: ignore[no-untyped-call]
        proto = trial.proto
        sol = best.response_proto.solution
        for idx in hood.decisions:
            if idx not in free:
                dom = proto.variables[idx].domain
                dom.clear()
                dom.extend([sol[idx], sol[idx]])
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
        elif st == cp_model.OPTIMAL:
            idle += 1
        if st == cp_model.OPTIMAL:
            if len(free) >= len(hood.decisions):
                return found, det, True  # every decision was free: the tier is proven
            pace.size = int(pace.size * GROW)
        else:
            pace.size = max(MIN_SIZE, int(pace.size * SHRINK))
    return found, det, False
