"""topology-fit's elastic gangs: the sizes Kueue's partial admission tries (KEP-420; its
``PodSetReducer``: a binary search over the pods given up, cut from the last role first,
then the reduced roles grown back), worked out by hand. Before, an elastic gang whose full
size broke its queue's max was given up at once, and one whose full size did not fit was
tried at its minimum only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from gangplan.models import Snapshot
from gangplan.solver.context import CycleContext
from gangplan.solver.judges.verify import verify
from gangplan.solver.placers.topology_fit import partial_admission_counts, topology_fit
from gangplan.solver.result import assemble_plan

GPU = "nvidia.com/gpu"


def _cluster(
    snapshot_of: Callable[..., Snapshot],
    nodes: list[dict[str, Any]],
    gang: dict[str, Any],
    queue: dict[str, Any] | None = None,
) -> Snapshot:
    return snapshot_of(
        levels=[{"name": "leaf"}],
        nodes=[{**n, "domains": {"leaf": "l1"}} for n in nodes],
        queues=[queue or {"name": "q"}],
        gangs=[{"queue": "q", **gang}],
    )


def _placed(s: Snapshot) -> list[tuple[str, str]]:
    pods = topology_fit(CycleContext.of(s))
    assert verify(s, assemble_plan(s, pods, {})) == []
    return sorted((p.role, p.node) for p in pods)


def test_an_elastic_gang_over_its_queues_max_is_admitted_at_the_largest_size_that_fits(
    snapshot_of: Callable[..., Snapshot],
) -> None:
    # 4 nodes of 4 GPUs; the gang asks 4 pods of 4 GPUs (16) and accepts 1; its queue's max
    # is 8 GPUs. Kueue searches the pods given up, 0..3: sort.Search(4) probes 2 (2 pods, 8
    # GPUs: fits), then 1 (3 pods, 12 GPUs: over the max), so it admits 2 pods; BestFit puts
    # them in the one leaf, on the two first nodes by (room, name).
    s = _cluster(
        snapshot_of,
        [{"name": f"n{i}", "allocatable": {GPU: 4}} for i in (1, 2, 3, 4)],
        {"name": "g", "min_member": 1, "roles": [{"name": "w", "count": 4, "requests": {GPU: 4}}]},
        queue={"name": "q", "max": {GPU: 8}},
    )
    assert _placed(s) == [("w", "n1"), ("w", "n2")]


def test_an_elastic_gang_too_large_for_the_cluster_gets_every_pod_that_fits(
    snapshot_of: Callable[..., Snapshot],
) -> None:
    # 3 nodes of 4 GPUs and a gang of 4 x 4 GPUs accepting 2: the search over 0..2 pods given
    # up probes 1 (3 pods: fits), then 0 (4 pods: does not), so 3 pods, one per node (the
    # minimum alone, as before, would have been 2)
    s = _cluster(
        snapshot_of,
        [{"name": f"n{i}", "allocatable": {GPU: 4}} for i in (1, 2, 3)],
        {"name": "g", "min_member": 2, "roles": [{"name": "w", "count": 4, "requests": {GPU: 4}}]},
    )
    assert _placed(s) == [("w", "n1"), ("w", "n2"), ("w", "n3")]


def _two_pools(snapshot_of: Callable[..., Snapshot]) -> Snapshot:
    # pool a: 3 nodes of 1 GPU, pool b: 4 nodes of 1 GPU; roles a and b of 4 one-GPU pods
    # each, each role at least 2, the gang at least 4, each role on its own pool
    nodes = [
        {"name": f"{pool}{i}", "labels": {"pool": pool}, "allocatable": {GPU: 1}}
        for pool, count in (("a", 3), ("b", 4))
        for i in range(count)
    ]
    roles = [
        {
            "name": pool,
            "count": 4,
            "min_member": 2,
            "requests": {GPU: 1},
            "node_selector": {"pool": pool},
        }
        for pool in ("a", "b")
    ]
    return _cluster(snapshot_of, nodes, {"name": "g", "min_member": 4, "roles": roles})


def test_kueues_order_cuts_the_last_role_first_then_grows_the_cut_roles_back(
    snapshot_of: Callable[..., Snapshot],
) -> None:
    s = _two_pools(snapshot_of)
    gang = s.gangs[0]
    probes: list[tuple[int, int]] = []

    def fits(counts: dict[str, int]) -> bool:
        probes.append((counts["a"], counts["b"]))
        return counts["a"] <= 3 and counts["b"] <= 4

    # each role may give up 2 pods, the gang 4: sort.Search(5) over the pods given up, cut
    # from b first: 2 -> (4, 2) no; 4 -> (2, 2) yes; 3 -> (3, 2) yes: 3 given up. Two roles
    # were cut, so each grows back, first to last: a to 4 -> (4, 2) no, nothing between 3
    # and 4 to try; b to 4 -> (3, 4) yes
    assert partial_admission_counts(gang, fits) == {"a": 3, "b": 4}
    assert probes == [(4, 2), (2, 2), (3, 2), (4, 2), (3, 4)]
    # and topology-fit places that: 3 pods of a, 4 of b, 7 in all
    assert Counter(role for role, _node in _placed(s)) == {"a": 3, "b": 4}


def test_no_size_fits(snapshot_of: Callable[..., Snapshot]) -> None:
    s = _two_pools(snapshot_of)
    probes: list[tuple[int, int]] = []

    def never(counts: dict[str, int]) -> bool:
        probes.append((counts["a"], counts["b"]))
        return False

    # sort.Search(5): i=0, j=5; h=2 fails -> i=3; h=4 fails -> i=5 = j: none found
    assert partial_admission_counts(s.gangs[0], never) is None
    assert probes == [(4, 2), (2, 2)]
