"""Fragmentation gradient descent (FGD): each pod goes to the node where GPU fragmentation,
measured against the workload's distribution of pod shapes, grows least.

Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC '23, §3-§4 (the placement rule); its simulator,
github.com/hkust-adsl/kubernetes-scheduler-simulator (``pkg/simulator/plugin/fgd_score.go``),
is followed where the paper leaves a detail open. The measure, ``F_n(M)``, and the scorer
are in :mod:`gangplan.solver.judges.fragmentation`.

**Placement**: a pod goes to the feasible node (and, for a share, the device) with the least
``Δ = F_n'(M) - F_n(M)``, ``n'`` being the node after the pod is placed. Ties go to the first
candidate in snapshot order: a fixed order, as in the paper's simulator, whose scheduler
(a kube-scheduler fork) takes the smallest node name among equal scores, names being
prefixed with a seeded random index (so the replay can shuffle the node order, not the
choice). ``quantize=True`` compares the simulator's integer score ``int(100 *
sigmoid(-Δ / 1000))`` instead of ``Δ`` (nodes whose ``Δ`` differ by less than about 40
milli-GPU then tie).

The workload ``M`` is the cycle context's
(:attr:`~gangplan.solver.context.CycleContext.workload`): by default the snapshot's declared
workload, else its pending and running pods — the workload of the score's
``fragmentation.expected`` entry, which FGD descends one pod at a time — or a distribution the
caller gives (the replay gives the trace's).

Gangs are placed pod by pod with rollback, as ``greedy`` does
(:mod:`gangplan.solver.placers.greedy`):
queue order from :class:`~gangplan.solver.placers.queue_order.QueueOrder`, all or nothing
below ``min_member``, an elastic gang keeps the pods beyond its minimum that fit. A required
level is honoured by trying its domains, the one where the gang's first pod grows
fragmentation least first; a required ``node`` level by trying single nodes the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from gangplan.models import Gang, PodPlacement, Role
from gangplan.solver.context import CycleContext
from gangplan.solver.judges.fragmentation import FgdScorer
from gangplan.solver.placers.queue_order import QueueOrder, admit_then_grow, pod_names
from gangplan.solver.placers.ranking import NodeRanking, may_hold, node_ranking
from gangplan.topology import NODE_LEVEL

__all__ = ["fgd", "fgd_place", "fgd_ranking"]


def fgd_place(
    scorer: FgdScorer,
    gang: Gang,
    role: Role,
    pod: str,
    nodes: Iterable[str] | None = None,
) -> PodPlacement | None:
    """Place one pod of ``role`` by FGD on its candidate nodes (``nodes`` narrows them);
    the state is updated. None if no node holds it."""
    state = scorer.state
    if nodes is not None:
        allowed = nodes if isinstance(nodes, frozenset) else frozenset(nodes)
        got = scorer.choose(gang, role, state.candidates_within(gang, role, allowed))
        if got is None:
            return None
        node, _delta, choice = got
        return state.place(gang, role, node, pod, choice)
    # the least Δ over every candidate, ties to the first in snapshot order, from a ranking
    # that computes Δ once per class of interchangeable nodes
    best = fgd_ranking(scorer, gang, role).best()
    if best is None:
        return None
    on_node = scorer.best_on_node(gang, role, best)
    assert on_node is not None
    return state.place(gang, role, best, pod, on_node[1])


def fgd_ranking(scorer: FgdScorer, gang: Gang, role: Role) -> NodeRanking[float]:
    """The candidates of ``role`` ranked by FGD's ``Δ`` of one more pod (then snapshot
    order), for this scorer's workload."""
    state = scorer.state

    def value(node: str) -> float | None:
        got = scorer.best_on_node(gang, role, node)
        return None if got is None else scorer.rank(got[0])

    # the ranking's value holds the scorer, so its id names it while the ranking lives
    return node_ranking(state, ("fgd", id(scorer)), gang, role, value)


# --------------------------------------------------------------------------- the placer


class _GangPlacer:
    """FGD pod by pod for the gangs of one snapshot, with rollback."""

    def __init__(self, ctx: CycleContext, scorer: FgdScorer, order: QueueOrder):
        self.ctx, self.scorer, self.order = ctx, scorer, order
        self.state = scorer.state

    def first_pod_delta(self, gang: Gang, role: Role, nodes: frozenset[str]) -> float | None:
        """The least ``Δ`` of one pod of ``role`` inside ``nodes`` (None: it fits none)."""
        ranking = fgd_ranking(self.scorer, gang, role)
        values = [ranking.value_of(n) for n in self.state.candidates_within(gang, role, nodes)]
        return min((v for v in values if v is not None), default=None)

    def ordered_domains(
        self,
        gang: Gang,
        role: Role,
        level: str,
        within: frozenset[str] | None,
        whole_gang: bool = False,
    ) -> list[frozenset[str]]:
        """Domains of ``level`` (single nodes for ``node``) where one pod of ``role`` fits,
        the least ``Δ`` first, ties in topology (snapshot) order; ``whole_gang``: only those
        that may hold the whole gang (:func:`~gangplan.solver.placers.ranking.may_hold`: the others
        would fail, so leaving them out changes no choice)."""
        topo = self.ctx.topo
        state = self.state
        ranked: list[tuple[float, int, frozenset[str]]] = []
        holds = may_hold(state, gang) if whole_gang else None
        if level == NODE_LEVEL:
            ranking = fgd_ranking(self.scorer, gang, role)
            member = state.candidate_set(gang, role)
            for i, node in enumerate(self.ctx.node_names):
                if (
                    node in member
                    and (within is None or node in within)
                    and (holds is None or holds(topo.domain_of(node, level)))
                ):
                    v = ranking.value_of(node)
                    if v is not None:
                        ranked.append((v, i, frozenset([node])))
        else:
            for i, dom in enumerate(topo.domains_at(level)):
                if holds is not None and not holds(dom):
                    continue
                g = topo.nodes_in(dom)
                if within is not None:
                    g = g & within
                if not g:
                    continue
                d = self.first_pod_delta(gang, role, g)
                if d is not None:
                    ranked.append((d, i, g))
        ranked.sort(key=lambda t: (t[0], t[1]))
        return [g for _, _, g in ranked]

    def place_role(
        self,
        gang: Gang,
        role: Role,
        names: list[str],
        allowed: frozenset[str] | None,
        one_node: bool,
    ) -> list[PodPlacement]:
        out: list[PodPlacement] = []
        for i in range(role.count):
            if not self.order.headroom_ok(gang, role):
                break
            nodes: Iterable[str] | None = allowed
            if one_node and out:
                nodes = (out[0].node,)
            p = fgd_place(self.scorer, gang, role, names[i], nodes)
            if p is None:
                break
            out.append(p)
            self.order.charge(gang, role)
        return out

    def undo(self, gang: Gang, pods: list[PodPlacement]) -> None:
        for p in reversed(pods):
            role = gang.role(p.role)
            self.state.remove(p, role)
            self.order.charge(gang, role, -1)

    def place_gang(self, gang: Gang, within: frozenset[str] | None) -> list[PodPlacement] | None:
        names = pod_names(gang)
        placed: list[PodPlacement] = []
        for role in gang.roles:
            req = role.topology.required if role.topology else None
            if req is None or req == NODE_LEVEL:
                placed += self.place_role(gang, role, names[role.name], within, req == NODE_LEVEL)
                continue
            got: list[PodPlacement] = []
            for dom in self.ordered_domains(gang, role, req, within):
                got = self.place_role(gang, role, names[role.name], dom, False)
                if got and len(got) >= gang.role_min(role):
                    break
                self.undo(gang, got)
                got = []
            if not got and gang.role_min(role) > 0:
                self.undo(gang, placed)
                return None
            placed += got
        per_role = Counter(p.role for p in placed)
        ok = len(placed) >= gang.min_size and all(
            per_role[r.name] >= gang.role_min(r) for r in gang.roles
        )
        if not ok or not placed:
            self.undo(gang, placed)
            return None
        return placed

    def place_anywhere(self, gang: Gang) -> list[PodPlacement] | None:
        level = gang.topology.required if gang.topology else None
        if level is None:
            return self.place_gang(gang, None)
        for dom in self.ordered_domains(gang, gang.roles[0], level, None, True):
            pods = self.place_gang(gang, dom)
            if pods:
                return pods
        return None

    def run(self) -> list[PodPlacement]:
        """Every gang in order, minimums before growth (:func:`admit_then_grow`)."""
        return admit_then_grow(self.ctx, self.order, self.state, self.place_anywhere)


def fgd(
    ctx: CycleContext, *, scorer: FgdScorer | None = None, order: QueueOrder | None = None
) -> list[PodPlacement]:
    """Fragmentation gradient descent (Weng et al., USENIX ATC '23; module docstring),
    measured against ``ctx.workload``.

    Args:
        ctx: the cycle's context.
        scorer: the measure and the state to place on (default: exact ``Δ`` on a fresh copy
            of the cycle's state, which the placed pods are left on); FGD's restarts
            (:mod:`gangplan.solver.placers.restarts`) give their own, on a state they reuse.
        order: the order gangs are placed in (default :class:`QueueOrder` of ``ctx``).

    Returns:
        The placed pods (each passes the verifier with the others).
    """
    if scorer is None:
        scorer = FgdScorer(ctx.state(), ctx.workload)
    placer = _GangPlacer(ctx, scorer, order if order is not None else QueueOrder(ctx))
    return placer.run()
