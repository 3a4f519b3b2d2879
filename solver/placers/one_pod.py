"""One pod at a time: the node each baseline gives one pod on a cluster state, and placers
that place pod after pod on one long-lived state (the replay's protocol).

The gang placers call the same functions for each pod they place, so a gang of one pod is
placed exactly as the one-pod placer places it:

``greedy``
    Volcano binpack (github.com/volcano-sh/volcano, ``binpack`` plugin): the node with the
    highest binpack score — the mean over the resources the pod asks of (used + request) /
    allocatable — ties to the first in node order; the devices are
    :meth:`ClusterState.choose_devices`' (a share to the device with the least free
    milli-GPU that holds it).
``topology-fit``
    Kueue's BestFit (KEP-2724) for one pod: the lowest level is the node, and the node with
    the least room (pods of this shape it can still hold, counted up to :data:`ROOM_LIMIT`)
    that holds it, ties by name.
``fgd``
    Fragmentation gradient descent (Weng et al., USENIX ATC '23): :func:`~gangplan.solver.
    fgd.fgd_place` against a workload.

Interchangeable nodes (same :meth:`ClusterState.signature`) get one evaluation per class,
and the best node is kept in a :class:`~gangplan.solver.placers.ranking.NodeRanking` that ranks
again
only the nodes that changed: its answer is a scan's — the first of the best in snapshot order
(``greedy``, ``fgd``), the smallest name among the best (``topology-fit``) — at the cost of the
changes, not of the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gangplan.models import Gang, PodPlacement, Role
from gangplan.solver.judges.fragmentation import FgdScorer, Workload
from gangplan.solver.placers.fgd import fgd_place
from gangplan.solver.placers.ranking import node_ranking
from gangplan.solver.placers.state import ClusterState

__all__ = [
    "ONE_POD_PLACERS",
    "ROOM_LIMIT",
    "PodPlacer",
    "best_greedy_node",
    "binpack_score",
    "greedy_node",
    "one_pod_placer",
    "topology_fit_node",
]

ROOM_LIMIT = 64
"""How far ``topology-fit`` counts a node's room for a pod (BestFit needs only the order of
rooms, and few nodes hold more pods of one shape)."""

ONE_POD_PLACERS = ("greedy", "topology-fit", "fgd")
"""The placers :func:`one_pod_placer` knows."""

PodPlacer = Callable[[Gang, str], PodPlacement | None]
"""Places one pod (its gang, of one role, and its name) and returns the placement, or None
if it fits nowhere."""


def binpack_score(state: ClusterState, role: Role, node: str) -> float:
    """Volcano binpack: mean over the resources the pod asks of (used + request) /
    allocatable, in [0, 1] when it fits (0 for a pod that asks nothing the node has)."""
    st = state.nodes[node]
    alloc = state.snapshot.node_by_name[node].allocatable
    total = 0.0
    n = 0
    for r, req in role.requests.items():
        cap = alloc.get(r, 0)
        if req <= 0 or cap <= 0:
            continue
        used = cap - st.resources.get(r, 0)
        total += (used + req) / cap
        n += 1
    return total / n if n else 0.0


def greedy_node(state: ClusterState, gang: Gang, role: Role, nodes: Iterable[str]) -> str | None:
    """The node of ``nodes`` (in their order) where one more pod of ``role`` fits with the
    highest binpack score, ties to the first; None if it fits none."""
    best_node = None
    best_score = -1.0
    for n in state.fitting(gang, role, nodes):
        s = binpack_score(state, role, n)
        if s > best_score:
            best_node, best_score = n, s
    return best_node


def best_greedy_node(state: ClusterState, gang: Gang, role: Role) -> str | None:
    """:func:`greedy_node` over every candidate of ``role``, in snapshot order: the highest
    binpack score among the nodes where one more pod fits, ties to the first."""

    def value(node: str) -> float | None:
        if not state.fits(gang, role, node):
            return None
        return -binpack_score(state, role, node)

    return node_ranking(state, "greedy", gang, role, value).best()


def topology_fit_node(state: ClusterState, gang: Gang, role: Role) -> str | None:
    """Kueue BestFit for one pod: the candidate node with the least room for pods of
    ``role`` (counted up to :data:`ROOM_LIMIT`) that still holds one, ties by name; None
    if none holds it."""

    def value(node: str) -> int | None:
        room = state.pod_capacity(gang, role, node, ROOM_LIMIT)
        return room if room >= 1 else None

    return node_ranking(state, "topology-fit", gang, role, value, by_name=True).best()


def one_pod_placer(
    state: ClusterState, placer: str, workload: Workload, *, quantize: bool = False
) -> PodPlacer:
    """A function placing one pod at a time on ``state`` (which it updates) with ``placer``
    (one of :data:`ONE_POD_PLACERS`; module docstring). ``workload`` is FGD's target;
    ``quantize``: FGD compares the simulator's integer score.

    Raises:
        ValueError: an unknown placer (the message lists the known ones).
    """
    if placer == "greedy":

        def place_greedy(gang: Gang, name: str) -> PodPlacement | None:
            role = gang.roles[0]
            node = best_greedy_node(state, gang, role)
            return None if node is None else state.place(gang, role, node, name)

        return place_greedy
    if placer == "topology-fit":

        def place_topology_fit(gang: Gang, name: str) -> PodPlacement | None:
            role = gang.roles[0]
            node = topology_fit_node(state, gang, role)
            return None if node is None else state.place(gang, role, node, name)

        return place_topology_fit
    if placer == "fgd":
        scorer = FgdScorer(state, workload, quantize=quantize)

        def place_fgd(gang: Gang, name: str) -> PodPlacement | None:
            return fgd_place(scorer, gang, gang.roles[0], name)

        return place_fgd
    raise ValueError(f"no one-pod placer {placer!r} (accepted: {', '.join(ONE_POD_PLACERS)})")
