"""The fgd placer (solver/placers/fgd.py) and its measure (solver/judges/fragmentation.py): the
fragmentation measure of Weng et al. (USENIX ATC '23, §4) on hand-made nodes and workloads,
the placement rule worked out by hand, and verified plans for gangs.

The measure, as the module docstring states it: for a node with free milli-GPU ``f_i`` per
device and free CPU ``C``, a pod shape ``m`` (``k`` GPUs of ``g`` milli, CPU ``c``) finds
``sum_{f_i < g} f_i`` unusable when it fits (``k`` devices with ``f_i >= g`` and ``C >= c``),
and every free milli-GPU when it does not fit, asks no GPU, or does not accept the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gangplan.models import Snapshot
from gangplan.solver.context import CycleContext
from gangplan.solver.cycle.pipeline import run_baseline, run_baseline_in
from gangplan.solver.judges.fragmentation import FgdScorer, PodShape, Workload, shape_fragmentation
from gangplan.solver.judges.verify import verify
from gangplan.solver.placers.baselines import BASELINES
from gangplan.solver.placers.fgd import fgd, fgd_place
from gangplan.solver.placers.state import ClusterState
from gangplan.topology import build_topology

GPU = "nvidia.com/gpu"

# A node with 4 GPUs of model A: two free, one with 500 and one with 200 milli-GPU free;
# 8000 milli-CPU free. Its free milli-GPU in all: 2700.
FREE = (1000, 1000, 500, 200)
CPU_FREE = 8000

SHARE_300 = PodShape(cpu_milli=2000, gpus=1, gpu_milli=300)
SHARE_600 = PodShape(cpu_milli=2000, gpus=1, gpu_milli=600)
ONE_GPU = PodShape(cpu_milli=2000, gpus=1, gpu_milli=1000)
CPU_ONLY = PodShape(cpu_milli=1000, gpus=0, gpu_milli=0)


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        # a CPU-only pod can use no GPU: all 2700 free milli-GPU are fragment to it
        (CPU_ONLY, 2700),
        # a 300-milli share fits (three devices hold 300); only the 200 is too small
        (SHARE_300, 200),
        # a 600-milli share fits (two free devices); the 500 and the 200 are too small
        (SHARE_600, 700),
        # one whole GPU fits; the partly used devices (500 + 200) are fragment
        (ONE_GPU, 700),
        # two whole GPUs fit (two free devices): the same 700
        (PodShape(2000, 2, 1000), 700),
        # three whole GPUs do not fit: everything is fragment
        (PodShape(2000, 3, 1000), 2700),
        # it would fit the GPUs, but asks 9000 milli-CPU of the 8000 free
        (PodShape(9000, 1, 1000), 2700),
        # it accepts only model B: the node is of no use to it
        (PodShape(2000, 1, 1000, ("B",)), 2700),
        # it accepts model A (among others): as ONE_GPU
        (PodShape(2000, 1, 1000, ("A", "B")), 700),
    ],
)
def test_shape_fragmentation_by_hand(shape: PodShape, expected: int) -> None:
    assert shape_fragmentation(FREE, CPU_FREE, "A", shape) == expected


def test_a_node_without_free_gpu_has_no_fragmentation() -> None:
    assert shape_fragmentation((), 32000, None, CPU_ONLY) == 0
    assert shape_fragmentation((0, 0), 32000, "A", ONE_GPU) == 0


def test_workload_popularity_keeps_the_most_frequent_shapes() -> None:
    a, b, c = PodShape(1000, 1, 500), PodShape(2000, 1, 1000), PodShape(1000, 0, 0)
    counts = {a: 5, b: 3, c: 2}
    # 10 pods: a alone covers 50%, a and b 80%, all three 100%
    assert Workload.from_counts(counts, 0.5).shapes == ((a, 5),)
    assert Workload.from_counts(counts, 0.8).shapes == ((a, 5), (b, 3))
    assert Workload.from_counts(counts, 0.81).shapes == ((a, 5), (b, 3), (c, 2))
    assert Workload.from_counts(counts).probabilities() == {a: 0.5, b: 0.3, c: 0.2}
    with pytest.raises(ValueError, match="popularity"):
        Workload.from_counts(counts, 0)


def test_workload_of_snapshot_counts_pods(snapshot_of: Callable[..., Snapshot]) -> None:
    snap = snapshot_of(
        nodes=[{"name": "n1", "allocatable": {"cpu": 8, GPU: 2}}],
        queues=[{"name": "q"}],
        gangs=[
            {
                "name": "g1",
                "queue": "q",
                "roles": [{"name": "w", "count": 4, "requests": {"cpu": 2, GPU: "500m"}}],
            },
            {
                "name": "g2",
                "queue": "q",
                "gpu_models": ["A"],
                "roles": [
                    {"name": "w", "count": 1, "requests": {"cpu": 1, GPU: 2}},
                    {"name": "l", "count": 1, "requests": {"cpu": 1}},
                ],
            },
        ],
    )
    wl = Workload.of_snapshot(snap)
    assert dict(wl.shapes) == {
        PodShape(2000, 1, 500): 4,
        PodShape(1000, 2, 1000, ("A",)): 1,
        # a CPU-only pod's shape names no models (it asks no GPU)
        PodShape(1000, 0, 0): 1,
    }


# --------------------------------------------------------------------------- on a cluster


def cluster(snapshot_of: Callable[..., Snapshot], gangs: list[dict[str, Any]]) -> Snapshot:
    """n1: 4 GPUs of model A, 10 cpu; running shares of 500m on gpu-2 and 800m on gpu-3
    (1 cpu each) leave FREE = (1000, 1000, 500, 200) and 8000 milli-CPU.
    n2: 4 GPUs of model A, 10 cpu, empty: (1000, 1000, 1000, 1000), 10000 milli-CPU."""
    alloc = {"cpu": 10, "memory": "64Gi", GPU: 4}
    return snapshot_of(
        nodes=[
            {"name": "n1", "gpu_model": "A", "allocatable": alloc},
            {"name": "n2", "gpu_model": "A", "allocatable": alloc},
        ],
        queues=[{"name": "q"}],
        running=[
            {"name": "r1", "node": "n1", "requests": {"cpu": 1, GPU: "500m"}, "devices": ["gpu-2"]},
            {"name": "r2", "node": "n1", "requests": {"cpu": 1, GPU: "800m"}, "devices": ["gpu-3"]},
        ],
        gangs=gangs,
    )


def share_gang(name: str, milli: str = "300m", count: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "queue": "q",
        "roles": [{"name": "w", "count": count, "requests": {"cpu": 1, GPU: milli}}],
        **extra,
    }


def test_expected_fragmentation_weights_shapes(snapshot_of: Callable[..., Snapshot]) -> None:
    snap = cluster(snapshot_of, [])
    # M: the 300-milli share twice, one whole GPU once, a CPU-only pod once (p = 2/4, 1/4, 1/4)
    wl = Workload.from_counts({SHARE_300: 2, ONE_GPU: 1, CPU_ONLY: 1})
    scorer = FgdScorer(ClusterState(snap, build_topology(snap)), wl)
    # n1: (2 * 200 + 1 * 700 + 1 * 2700) / 4 = 3800 / 4 = 950 milli-GPU
    assert scorer.fragmentation("n1") == 3800
    assert scorer.expected_fragmentation("n1") == 950
    # n2 (all free, 10000 cpu): shares and the whole GPU fit with nothing too small; the
    # CPU-only pod finds all 4000: (0 + 0 + 4000) / 4 = 1000
    assert scorer.expected_fragmentation("n2") == 1000


def test_the_pod_goes_where_fragmentation_grows_least(
    snapshot_of: Callable[..., Snapshot],
) -> None:
    """A 300m share (1 cpu) against M = {300m share: 2, one GPU: 1, CPU-only: 1}.

    Weighted F before: n1 3800, n2 4000. After (cpu 1000 less; all shapes still have CPU):
    * n1 on gpu-2 (500 -> 200): (1000, 1000, 200, 200): 2*400 + 400 + 2400 = 3600, Δ = -200
    * n1 on gpu-0 (1000 -> 700): (700, 1000, 500, 200): 2*200 + 1400 + 2400 = 4200, Δ = +400
    * n1 on gpu-3 (200): does not hold 300
    * n2 on a free GPU: (700, 1000, 1000, 1000): 0 + 700 + 3700 = 4400, Δ = +400
    So n1, device gpu-2, Δ = -200 (-50 milli-GPU expected).
    """
    snap = cluster(snapshot_of, [share_gang("p")])
    wl = Workload.from_counts({SHARE_300: 2, ONE_GPU: 1, CPU_ONLY: 1})
    state = ClusterState(snap, build_topology(snap))
    scorer = FgdScorer(state, wl)
    gang = snap.gangs[0]
    role = gang.roles[0]
    assert scorer.delta("n1", 1000, 1, 300) == (-200, "gpu-2")
    assert scorer.delta("n2", 1000, 1, 300) == (400, "gpu-0")
    placed = fgd_place(scorer, gang, role, "p-w-0")
    assert placed is not None
    assert (placed.node, placed.gpus, placed.gpu_milli) == ("n1", ("gpu-2",), 300)
    # the state changed only on n1: gpu-2 now holds 200, n1's fragmentation is 3600
    assert state.nodes["n1"].gpu_milli["gpu-2"] == 200
    assert scorer.fragmentation("n1") == 3600
    assert scorer.fragmentation("n2") == 4000


def test_fgd_picks_the_device_best_fit_would_not(snapshot_of: Callable[..., Snapshot]) -> None:
    """One node, 3 GPUs, free (1000, 350, 600); a 300m share against M = {300m share: 1,
    one GPU: 1}. Weighted F before: 0 + (350 + 600) = 950. After:
    * gpu-0 (1000 -> 700): no free device for the whole GPU: 0 + 1650 = 1650, Δ = +700
    * gpu-1 (350 -> 50): 50 + (50 + 600) = 700, Δ = -250
    * gpu-2 (600 -> 300): 0 + (350 + 300) = 650, Δ = -300
    FGD takes gpu-2 (what is left still holds a 300m share); best fit would take gpu-1."""
    snap = snapshot_of(
        nodes=[{"name": "n1", "gpu_model": "A", "allocatable": {"cpu": 10, GPU: 3}}],
        queues=[{"name": "q"}],
        running=[
            {"name": "r1", "node": "n1", "requests": {GPU: "650m"}, "devices": ["gpu-1"]},
            {"name": "r2", "node": "n1", "requests": {GPU: "400m"}, "devices": ["gpu-2"]},
        ],
        gangs=[share_gang("p")],
    )
    state = ClusterState(snap, build_topology(snap))
    scorer = FgdScorer(state, Workload.from_counts({PodShape(1000, 1, 300): 1, ONE_GPU: 1}))
    assert scorer.delta("n1", 1000, 1, 300) == (-300, "gpu-2")
    gang = snap.gangs[0]
    assert state.choose_devices(gang, gang.roles[0], "n1").gpus == ("gpu-1",)  # best fit


def test_quantized_score_is_the_simulators(snapshot_of: Callable[..., Snapshot]) -> None:
    snap = cluster(snapshot_of, [])
    wl = Workload.from_counts({SHARE_300: 1})
    scorer = FgdScorer(ClusterState(snap, build_topology(snap)), wl, quantize=True)
    # int(100 * sigmoid(-Δ / 1000)): Δ = 0 -> 50; Δ = +1000 -> 100 / (1 + e) = 26.9 -> 26;
    # Δ = -1000 -> 100 e / (1 + e) = 73.1 -> 73; ranks are minus the score
    assert [scorer.rank(d) for d in (0, 1000, -1000)] == [-50, -26, -73]


# --------------------------------------------------------------------------- the placer


def ctx_of(snap: Snapshot) -> CycleContext:
    return CycleContext.of(snap)


def test_fgd_is_a_baseline() -> None:
    assert BASELINES["fgd"] is fgd


def test_the_contexts_workload_replaces_the_snapshots(
    snapshot_of: Callable[..., Snapshot],
) -> None:
    """By default M is the snapshot's pending and running pods, one each: the pending 300m
    share and the running 500m and 800m shares (1 cpu each). n1 (1000, 1000, 500, 200): F =
    200 + 200 + 700 = 1100 (devices below 300, 500, 800). On gpu-0 (700, 1000, 500, 200): 200
    + 200 + 1400 = 1800, Δ = +700 (gpu-1 alike); on gpu-2 (1000, 1000, 200, 200): 400 + 400 +
    400 = 1200, Δ = +100; gpu-3 does not hold 300. n2 (all free, F = 0): (700, 1000, 1000,
    1000) gives 0 + 0 + 700, Δ = +700. So n1, gpu-2. Against a context's M = {300m: 1} only
    the devices below 300 count: n1 on gpu-0 keeps F = 200 (Δ = 0), on gpu-2 F = 400 (Δ =
    +200), n2 Δ = 0; ties go to the first node and device: n1, gpu-0."""
    snap = cluster(snapshot_of, [share_gang("p")])
    default = fgd(CycleContext.of(snap))
    assert (default[0].node, default[0].gpus) == ("n1", ("gpu-2",))
    wl = Workload.from_counts({SHARE_300: 1})
    given = fgd(CycleContext.of(snap, workload=wl))
    assert (given[0].node, given[0].gpus) == ("n1", ("gpu-0",))
    # the cycle's entry point takes the same context
    result = run_baseline_in(CycleContext.of(snap, workload=wl), "fgd")
    assert result.plan.pods[0].gpus == ("gpu-0",)
    assert verify(snap, result.plan) == []


def test_a_gang_is_placed_whole_or_not_at_all(snapshot_of: Callable[..., Snapshot]) -> None:
    # free whole GPUs: n1 two, n2 four, six in all: a gang of 7 one-GPU pods does not fit
    # and leaves nothing behind; the 2-pod gang after it is placed
    big = {
        "name": "big",
        "queue": "q",
        "creation_time": 0,
        "roles": [{"name": "w", "count": 7, "requests": {"cpu": 1, GPU: 1}}],
    }
    small = {
        "name": "small",
        "queue": "q",
        "creation_time": 1,
        "roles": [{"name": "w", "count": 2, "requests": {"cpu": 1, GPU: 1}}],
    }
    snap = cluster(snapshot_of, [big, small])
    pods = fgd(ctx_of(snap))
    assert sorted(p.pod for p in pods) == ["small-w-0", "small-w-1"]
    assert verify(snap, run_baseline(snap, "fgd").plan) == []


def test_an_elastic_gang_keeps_what_fits(snapshot_of: Callable[..., Snapshot]) -> None:
    # min_member 2 of 7 one-GPU pods: the six free whole GPUs take six
    gang = {
        "name": "el",
        "queue": "q",
        "min_member": 2,
        "roles": [{"name": "w", "count": 7, "requests": {"cpu": 1, GPU: 1}}],
    }
    snap = cluster(snapshot_of, [gang])
    assert len(fgd(ctx_of(snap))) == 6


def test_required_node_level_puts_the_gang_on_one_node(
    snapshot_of: Callable[..., Snapshot],
) -> None:
    # 3 one-GPU pods on one node: only n2 has three free whole GPUs
    gang = {
        "name": "g",
        "queue": "q",
        "topology": {"required": "node"},
        "roles": [{"name": "w", "count": 3, "requests": {"cpu": 1, GPU: 1}}],
    }
    snap = cluster(snapshot_of, [gang])
    pods = fgd(ctx_of(snap))
    assert [p.node for p in pods] == ["n2", "n2", "n2"]


def test_plans_verify_on_the_default_instance() -> None:
    from gangplan.adapters.files import load_snapshot

    snap, _ = load_snapshot(None)
    result = run_baseline(snap, "fgd")
    assert result.plan.pods
    assert verify(snap, result.plan) == []
