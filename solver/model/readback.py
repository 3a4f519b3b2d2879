"""The read-back: a model solution as pods with node and device ids, and evictions.

:func:`read_back` takes the search's solution (:class:`~gangplan.solver.model.search.
SearchResult`): :meth:`~gangplan.solver.model.variables.Variables.read` gives its counts,
each tier's report is restated at that solution, and :func:`solution_plan` turns the counts
into pods (:func:`disaggregate`) and, with victims, into evictions. Counts per node, per
joint group and per GPU device become pods with node and device ids; the per-device and
per-group counts are exact, so this step cannot fail for a solution of the model. The cycle
still verifies the result and returns the incumbent if it ever does fail.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from gangplan.models import GPU_MILLI, Eviction, Gang, Plan, PodPlacement, TierReport
from gangplan.solver.context import CycleContext
from gangplan.solver.model.build import BuiltModel
from gangplan.solver.model.indexing import Index
from gangplan.solver.model.variables import Solution
from gangplan.solver.model.victims import after_state, evicted_pods, plan_evictions
from gangplan.solver.placers.state import ClusterState

__all__ = ["disaggregate", "read_back", "solution_plan"]


def read_back(
    ctx: CycleContext,
    built: BuiltModel,
    solution: cp_model.CpSolver,
    reports: list[TierReport],
    previous: Plan | None,
) -> tuple[list[PodPlacement], list[Eviction], tuple[TierReport, ...]]:
    """``solution`` (a solver holding a full solution of ``built``'s model) as pods and
    evictions (:func:`solution_plan`), and the tier ``reports`` restated at its values."""
    counts = built.v.read(solution)
    terms = {t.name: t for t in built.terms if t.expr is not None}
    tiers = list(reports)
    for k, r in enumerate(tiers):
        t = terms.get(r.name)
        if t is not None and t.expr is not None:
            tiers[k] = r.revalued(int(solution.value(t.expr)) + t.const)
    pods, evictions = solution_plan(ctx, built.ix, counts, previous)
    return pods, evictions, tuple(tiers)


def solution_plan(
    ctx: CycleContext, ix: Index, solution: Solution, previous: Plan | None
) -> tuple[list[PodPlacement], list[Eviction]]:
    """A model solution as pods with devices and, with victims, the evictions: the pods
    victims keep stay (``stay``, ``keep``), the plan's pods go into what they leave."""
    if ix.victims is None:
        return disaggregate(ix, solution, previous), []
    kept = {
        u.id: solution.get("keep", u.id)
        if ix.victims.victims[u.victim].elastic
        else u.size * solution.get("stay", u.victim)
        for u in ix.victims.units
    }
    gone = evicted_pods(ix.victims, kept)
    state = after_state(ctx, [p for pods_ in gone.values() for p in pods_])
    pods = disaggregate(ix, solution, previous, state)
    return pods, plan_evictions(ctx, ix.victims, gone, pods)


# --------------------------------------------------------------------------- counts -> pods


@dataclass
class _Slot:
    node: str
    gpus: tuple[str, ...]
    gpu_milli: int | None
    nics: tuple[str, ...]


@dataclass
class _NodeCounts:
    """What a solution puts on one node: pods per shape, the GPUs ``whole`` gives to
    whole-GPU pods (None: the node has no ``whole`` variables) and the ``share`` counts."""

    pods: dict[int, int] = field(default_factory=dict)
    """shape -> pods (only counts above 0)"""
    whole: set[str] | None = None
    shares: list[tuple[int, str, int]] = field(default_factory=list)
    """(shape, device, pods), in key order"""


def _counts_by_node(sol: Solution) -> dict[int, _NodeCounts]:
    """The solution's per-node counts, grouped by node in one pass over each kind (per node,
    a scan of every count would make turning counts into pods quadratic in the nodes)."""
    out: dict[int, _NodeCounts] = defaultdict(_NodeCounts)
    for (s, n), c in sol.z.items():
        if c > 0:
            out[n].pods[s] = c
    for (n, d), val in sol.items("whole"):
        nc = out[n]
        if nc.whole is None:
            nc.whole = set()
        if val:
            nc.whole.add(d)
    for (s, n, d), c in sorted(sol.items("share")):
        if c > 0:
            out[n].shares.append((s, d, c))
    return out


def _node_slots(
    ix: Index, sol: Solution, n: int, state: ClusterState, here: _NodeCounts
) -> dict[int, list[_Slot]]:
    """Device choices for every pod the solution puts on node ``n`` (``here``: its counts,
    :func:`_counts_by_node`), by shape."""
    name = ix.node_names[n]
    st = state.nodes[name]
    slots: dict[int, list[_Slot]] = defaultdict(list)
    counts = here.pods
    if not counts:
        return slots
    taken_gpu: set[str] = set()
    taken_nic: set[str] = set()
    whole_ok = here.whole

    def free_whole(ids: tuple[str, ...] | list[str]) -> list[str]:
        out = [d for d in ids if st.gpu_milli[d] == GPU_MILLI and d not in taken_gpu]
        if whole_ok is not None:
            out = [d for d in out if d in whole_ok]
        return out

    # 1. joint shapes, group by group
    for s, c in sorted(counts.items()):
        shape = ix.shapes[s]
        if shape.joint == "none":
            continue
        groups = st.groups.get(shape.joint, {})
        gpu_pool: list[str] = []
        nic_pool: list[str] = []
        pairs: list[tuple[list[str], list[str]]] = []
        for gname, (gpus, nics) in groups.items():
            a = sol.get("joint", (s, n, gname))
            b = a if shape.nics == shape.whole else sol.get("joint_nic", (s, n, gname))
            if a == 0 and b == 0:
                continue
            g_ids = free_whole(gpus)[:a]
            n_ids = [x for x in nics if x in st.nics and x not in taken_nic][:b]
            taken_gpu.update(g_ids)
            taken_nic.update(n_ids)
            pairs.append((g_ids, n_ids))
        # hand GPUs (and, with equal counts, their NICs) to pods in group order
        if shape.nics == shape.whole:
            flat = [(g, nn) for g_ids, n_ids in pairs for g, nn in zip(g_ids, n_ids, strict=False)]
            for k in range(c):
                chunk = flat[k * shape.whole : (k + 1) * shape.whole]
                slots[s].append(
                    _Slot(name, tuple(g for g, _ in chunk), None, tuple(x for _, x in chunk))
                )
        else:
            for g_ids, n_ids in pairs:
                gpu_pool += g_ids
                nic_pool += n_ids
            for k in range(c):
                slots[s].append(
                    _Slot(
                        name,
                        tuple(gpu_pool[k * shape.whole : (k + 1) * shape.whole]),
                        None,
                        tuple(nic_pool[k * shape.nics : (k + 1) * shape.nics]),
                    )
                )
    # 2. GPU shares, device by device
    for s, d, c in here.shares:
        shape = ix.shapes[s]
        for _ in range(c):
            nic_ids = [x for x in st.nic_order if x in st.nics and x not in taken_nic][: shape.nics]
            taken_nic.update(nic_ids)
            slots[s].append(_Slot(name, (d,), shape.share, tuple(nic_ids)))
    # 3. whole GPUs without a joint policy, and pods without GPUs
    for s, c in sorted(counts.items()):
        shape = ix.shapes[s]
        if shape.joint != "none" or shape.share:
            continue
        for _ in range(c):
            g_ids = free_whole(list(st.gpu_order))[: shape.whole]
            taken_gpu.update(g_ids)
            nic_ids = [x for x in st.nic_order if x in st.nics and x not in taken_nic][: shape.nics]
            taken_nic.update(nic_ids)
            slots[s].append(_Slot(name, tuple(g_ids), None, tuple(nic_ids)))
    return slots


def disaggregate(
    ix: Index, sol: Solution, previous: Plan | None, state: ClusterState | None = None
) -> list[PodPlacement]:
    """Pods with node and device ids from a solution's counts (see the module docstring).

    ``state``: what the pods go into (with preemption, what the running pods the solution
    keeps leave); default the index's state. Raises ``RuntimeError`` where the counts of an
    aggregated block leave no slot for an item's pod (the cycle then returns the incumbent)."""
    # the free amounts the model counted against (the index's trials leave them as found)
    state = state or ix.state
    assert state is not None and not ix.empty
    slots = _slots(ix, sol, state)
    assign = _exact_nodes(sol) if ix.exact else _aggregated_nodes(ix, sol, slots)
    prev_node: dict[tuple[str, str], str] = {}
    if previous is not None:
        prev_node = {(p.namespace, p.pod): p.node for p in previous.pods}
    used: dict[tuple[int, int], int] = defaultdict(int)
    pods: list[PodPlacement] = []
    for i in sorted(assign):
        item = ix.items[i]
        s = item.shape
        for g, pod, n in _pods_on_nodes(ix, i, assign[i], prev_node):
            slot = slots[(s, n)][used[(s, n)]]
            used[(s, n)] += 1
            pods.append(
                PodPlacement(
                    pod=pod,
                    gang=g.name,
                    namespace=g.namespace,
                    role=item.role.name,
                    node=slot.node,
                    gpus=slot.gpus,
                    gpu_milli=slot.gpu_milli,
                    nics=slot.nics,
                )
            )
    return pods


def _slots(ix: Index, sol: Solution, state: ClusterState) -> dict[tuple[int, int], list[_Slot]]:
    """(shape, node) -> the device choices of every pod the solution puts there."""
    by_node = _counts_by_node(sol)
    nodes_used = sorted(n for n, here in by_node.items() if here.pods)
    slots: dict[tuple[int, int], list[_Slot]] = {}
    for n in nodes_used:
        for s, lst in _node_slots(ix, sol, n, state, by_node[n]).items():
            slots[(s, n)] = lst
    return slots


def _exact_nodes(sol: Solution) -> dict[int, list[int]]:
    """Exact mode: item -> a node per pod, from the per-node counts ``x``."""
    assign: dict[int, list[int]] = defaultdict(list)
    for (i, b), c in sorted(sol.items("x")):
        assign[i] += [b] * c
    return assign


def _aggregated_nodes(
    ix: Index, sol: Solution, slots: dict[tuple[int, int], list[_Slot]]
) -> dict[int, list[int]]:
    """Aggregated mode: item -> a node per pod. Every item may use every node of its block
    (indexing), so any slot of its shape there will do; items counted per node take their
    own node's slots first, then multi-pod gangs' items, larger counts first, each taking
    the node of its block with the most slots left."""
    assign: dict[int, list[int]] = defaultdict(list)
    left = {key: len(v) for key, v in slots.items()}
    counted = [(i, b, c) for (i, b), c in sol.items("x") if c > 0]
    for i, b, c in counted:
        if ix.items[i].node_level:
            n = ix.blocks[b].nodes[0]
            s = ix.items[i].shape
            if left.get((s, n), 0) < c:
                raise RuntimeError(f"disaggregation: no slot left for item {ix.items[i].name}")
            assign[i] += [n] * c
            left[(s, n)] -= c
    order = sorted(
        (t for t in counted if not ix.items[t[0]].node_level),
        key=lambda t: (not ix.groups[ix.items[t[0]].group].multi, -t[2], t[0], t[1]),
    )
    for i, b, c in order:
        s = ix.items[i].shape
        need = c
        while need > 0:
            cands = [n for n in ix.blocks[b].nodes if left.get((s, n), 0) > 0]
            if not cands:
                raise RuntimeError(f"disaggregation: no slot left for item {ix.items[i].name}")
            n = max(cands, key=lambda n: (left[(s, n)], -n))
            take = min(need, left[(s, n)])
            assign[i] += [n] * take
            left[(s, n)] -= take
            need -= take
    return assign


def _pods_on_nodes(
    ix: Index, i: int, nodes: list[int], prev_node: dict[tuple[str, str], str]
) -> list[tuple[Gang, str, int]]:
    """Item ``i``'s pods (gang, pod name) on ``nodes`` (a node per pod): pods that stay where
    the previous plan had them (``prev_node``: (namespace, pod) -> node) get those nodes
    first; of identical single-pod gangs, the oldest are admitted."""
    item = ix.items[i]
    if len(item.gangs) > 1 or ix.groups[item.group].multi is False:
        names = [(g, g.roles[0].pod_name(g.name, 0)) for g in item.gangs]
    else:
        g = item.gang
        names = [(g, item.role.pod_name(g.name, k)) for k in range(item.role.count)]
    chosen: list[tuple[Gang, str, int]] = []
    pool = list(nodes)
    rest = []
    for g, pod in names:
        pn = prev_node.get((g.namespace, pod))
        if pn is not None and ix.node_index.get(pn) in pool:
            n = ix.node_index[pn]
            pool.remove(n)
            chosen.append((g, pod, n))
        else:
            rest.append((g, pod))
    for (g, pod), n in zip(rest, pool, strict=False):
        chosen.append((g, pod, n))
    return chosen
