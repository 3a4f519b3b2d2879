"""The fat-tree generator (issue 5, "Instance generator") and its embedded trace histograms.

Expected numbers are worked out by hand in the comments (layouts, model cycle, queue
weights from the Philly VC table of ``pollux-philly-jobs/SOURCE.md``, per-GPU CPU and
memory); the histograms are checked against ``scripts/derive_trace_stats.py`` run on
``../shared/data`` (skipped, saying so, when that folder is absent).
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from gangplan.adapters.cli import main
from gangplan.adapters.files import load_snapshot
from gangplan.adapters.traces.common import instance_text
from gangplan.adapters.traces.generate import GeneratorError, fat_tree, generate_fat_tree
from gangplan.adapters.traces.stats import ITP_ELASTICFLOW, PHILLY
from gangplan.models import Snapshot

ROOT = Path(__file__).resolve().parents[3]
# $GANGPLAN_SHARED_DATA, else the first shared/data beside the repository or above it
DATA = Path(
    os.environ.get("GANGPLAN_SHARED_DATA")
    or next(
        (p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()),
        ROOT.parent / "shared" / "data",
    )
)
GPU, NIC = "nvidia.com/gpu", "rdma/hca"
GIB = 2**30


def gpus(snapshot: Snapshot) -> int:
    return sum(n.allocatable.get(GPU, 0) for n in snapshot.nodes) // 1000


def gang_gpus(gang) -> int:  # type: ignore[no-untyped-def]
    return sum(r.count * r.requests.get(GPU, 0) for r in gang.roles) // 1000


def running_gpus(snapshot: Snapshot) -> int:
    return sum(p.requests.get(GPU, 0) for p in snapshot.running) // 1000


# --------------------------------------------------------------------------- the cluster


def test_hgx8_cluster_shape() -> None:
    s = generate_fat_tree(2, 4, 8, "hgx8", load=0.0, demand=0.0)
    assert len(s.nodes) == 64 and gpus(s) == 512
    assert [lv.name for lv in s.levels] == ["spine", "leaf"]
    layout = s.device_layouts["hgx8"]
    # 8 GPUs and 8 NICs, 2 of each per PCIe switch, 2 switches per NUMA node
    assert [[(sw.gpus, sw.nics) for sw in n.pcie_switches] for n in layout.numa_nodes] == [
        [(("gpu0", "gpu1"), ("mlx5_0", "mlx5_1")), (("gpu2", "gpu3"), ("mlx5_2", "mlx5_3"))],
        [(("gpu4", "gpu5"), ("mlx5_4", "mlx5_5")), (("gpu6", "gpu7"), ("mlx5_6", "mlx5_7"))],
    ]
    # models by smooth weighted round-robin, weights H100 4, A100 3, H200 1 (total 8):
    # credits after adding / pick / after subtracting 8:
    #  1: 4 3 1 -> H100 -> -4 3 1     2: 0 6 2 -> A100 -> 0 -2 2
    #  3: 4 1 3 -> H100 -> -4 1 3     4: 0 4 4 -> A100 (tie, first) -> 0 -4 4
    #  5: 4 -1 5 -> H200 -> 4 -1 -3   6: 8 2 -2 -> H100 -> 0 2 -2
    #  7: 4 5 -1 -> A100 -> 4 -3 -1   8: 8 0 0 -> H100 -> 0 0 0
    leaf_model = {}
    for n in s.nodes:
        leaf_model.setdefault(n.labels["network.gangplan.io/leaf"], n.gpu_model)
    assert [leaf_model[f"leaf-{i}"] for i in range(8)] == [
        "H100",
        "A100",
        "H100",
        "A100",
        "H200",
        "H100",
        "A100",
        "H100",
    ]
    h100 = s.node_by_name["h100-0000"]
    assert h100.allocatable == {"cpu": 192000, "memory": 2048 * GIB, GPU: 8000, NIC: 8000}
    assert h100.labels["network.gangplan.io/spine"] == "spine-0"
    # node 32 opens leaf 4 (an H200 leaf), the first leaf of spine 1
    h200 = s.node_by_name["h200-0032"]
    assert h200.labels["network.gangplan.io/spine"] == "spine-1"
    assert h200.labels["network.gangplan.io/leaf"] == "leaf-4"
    assert s.node_by_name["a100-0008"].allocatable["cpu"] == 128000


def test_4gpu_cluster_shape() -> None:
    s = generate_fat_tree(1, 2, 3, "4gpu", load=0.0, demand=0.0)
    assert len(s.nodes) == 6 and gpus(s) == 24
    layout = s.device_layouts["4gpu"]
    # one PCIe switch per NUMA node, 2 GPUs and 2 NICs under each
    assert [[(sw.gpus, sw.nics) for sw in n.pcie_switches] for n in layout.numa_nodes] == [
        [(("gpu0", "gpu1"), ("mlx5_0", "mlx5_1"))],
        [(("gpu2", "gpu3"), ("mlx5_2", "mlx5_3"))],
    ]
    # leaves: H100 then A100 (steps 1 and 2 of the cycle above)
    assert [n.gpu_model for n in s.nodes] == ["H100"] * 3 + ["A100"] * 3


# --------------------------------------------------------------------------- queues, load, demand


def test_queues_from_philly_vcs() -> None:
    s = generate_fat_tree(2, 4, 8, queues=4)
    # the 4 largest VCs: 41,226 + 16,091 + 9,953 + 7,423 = 74,693 jobs;
    # 41,226 / 74,693 = 55.194 %, 16,091 / 74,693 = 21.543 %, 9,953 -> 13.325 %, 7,423 -> 9.938 %
    assert [(q.name, q.weight) for q in s.queues] == [
        ("vc-6214e9", 55.194),
        ("vc-11cb48", 21.543),
        ("vc-6c71a0", 13.325),
        ("vc-b436b2", 9.938),
    ]
    s15 = generate_fat_tree(1, 1, 4, queues=15)
    # all 82,247 jobs; the smallest VCs, 3 jobs: 0.00365 % -> 0.004 (never 0)
    assert len(s15.queues) == 15
    assert s15.queues[-1].weight == 0.004
    assert {g.queue for g in s15.gangs} <= {q.name for q in s15.queues}


@pytest.mark.parametrize(
    ("shape", "layout", "load", "demand"),
    [
        ((2, 4, 8), "hgx8", 0.5, 1.3),
        ((2, 4, 8), "4gpu", 0.8, 1.3),
        ((1, 2, 4), "hgx8", 0.0, 2.0),
        ((4, 8, 16), "hgx8", 0.8, 0.5),
    ],
)
def test_load_and_demand(
    shape: tuple[int, int, int], layout: str, load: float, demand: float
) -> None:
    s = generate_fat_tree(*shape, layout, demand=demand, load=load, seed=3)
    total = gpus(s)
    # the load is exact: the fill ends on jobs no larger than the gap and a 1-GPU job fits
    # while a GPU is free, so running GPUs are round(load x GPUs)
    assert running_gpus(s) == round(load * total)
    free = total - running_gpus(s)
    pending = [gang_gpus(g) for g in s.gangs]
    # pending GPUs reach demand x free, and the last gang is the one that crossed it
    assert sum(pending) >= demand * free
    assert sum(pending) - pending[-1] < demand * free
    assert s.warnings() == []


def test_running_load_is_scattered() -> None:
    s = generate_fat_tree(4, 8, 16, load=0.5, seed=0)
    partly = sum(1 for n in s.nodes if 0 < len(s.free(n.name).whole_gpus) < 8)
    # packing 2,048 GPUs onto 512 nodes would leave at most one node partly used;
    # after random-fit placement and churn, a quarter of the nodes or more are
    assert partly >= 128


def test_gang_rules() -> None:
    s = generate_fat_tree(8, 16, 16, load=0.5, seed=1)
    multi = [g for g in s.gangs if g.size > 1]
    single = [g for g in s.gangs if g.size == 1]
    assert multi and single
    for g in single:
        assert g.joint == "none" and g.topology is None and g.min_member is None
        assert NIC not in g.roles[0].requests
    leaf_gpus = 16 * 8
    for g in multi:
        assert g.joint == "pcie"
        for r in g.roles:  # one NIC per GPU
            assert r.requests[NIC] == r.requests[GPU]
        if g.topology is not None and g.topology.required == "leaf":
            assert gang_gpus(g) <= leaf_gpus
        if g.min_member is not None:
            assert g.min_member == math.ceil(g.size / 2)
    kinds = Counter(
        (g.topology.required, g.topology.preferred) if g.topology else None for g in multi
    )
    assert kinds[("leaf", None)] and kinds[(None, "leaf")] and any(g.elastic for g in multi)
    # every pod asks 12 cores and 96 GiB per GPU: the A100 node, 128 cores and 1 TiB for 8
    # GPUs, is the smallest per GPU (16 cores, 128 GiB); 3/4 of that
    for g in s.gangs:
        for r in g.roles:
            n = r.requests[GPU] // 1000
            assert (r.requests["cpu"], r.requests["memory"]) == (12000 * n, 96 * GIB * n)
    # about a third accept one GPU model only; priorities 1000 / 100 / 10 about 1 : 7 : 2
    constrained = sum(1 for g in s.gangs if g.gpu_models) / len(s.gangs)
    assert 0.28 < constrained < 0.38
    prio = Counter(g.priority for g in s.gangs)
    assert set(prio) == {1000, 100, 10}
    assert 0.65 < prio[100] / len(s.gangs) < 0.75


@pytest.mark.parametrize(
    ("sizes", "one_gpu_share"),
    [
        ("itp", 57682 / 69351),  # 83.2 % (itp-elasticflow SOURCE.md)
        ("philly", 76627 / 82247),  # 93.2 % (pollux-philly-jobs SOURCE.md)
    ],
)
def test_gang_sizes_follow_the_trace(sizes: str, one_gpu_share: float) -> None:
    s = generate_fat_tree(8, 16, 16, load=0.5, sizes=sizes, seed=2)
    share = sum(1 for g in s.gangs if gang_gpus(g) == 1) / len(s.gangs)
    # thousands of gangs: the binomial standard deviation is about half a point
    assert abs(share - one_gpu_share) < 0.03


def test_sizes_never_exceed_the_cluster() -> None:
    s = generate_fat_tree(1, 1, 1, load=0.25, demand=3.0, sizes="philly", seed=5)
    # one H100 node: 8 GPUs; 2 held (round(0.25 x 8)), 6 free -> 18 pending GPUs or more
    assert gpus(s) == 8 and running_gpus(s) == 2
    assert all(gang_gpus(g) <= 8 for g in s.gangs)
    # only H100: 192 cores and 2 TiB for 8 GPUs -> 3/4 x (24 cores, 256 GiB) per GPU
    r = s.gangs[0].roles[0]
    n = r.requests[GPU] // 1000
    assert (r.requests["cpu"], r.requests["memory"]) == (18000 * n, 192 * GIB * n)


# --------------------------------------------------------------------------- determinism, files


def test_deterministic_per_seed() -> None:
    a = fat_tree(2, 4, 8, seed=11)
    b = fat_tree(2, 4, 8, seed=11)
    c = fat_tree(2, 4, 8, seed=12)
    assert a.data == b.data and a.snapshot == b.snapshot
    assert instance_text(a.data) == instance_text(b.data)
    assert a.data["gangs"] != c.data["gangs"]
    assert generate_fat_tree(2, 4, 8, seed=11) == a.snapshot


def test_the_load_does_not_change_the_gang_sequence() -> None:
    # running and pending draws use separate random streams
    low = fat_tree(2, 4, 8, load=0.2, seed=4).data["gangs"]
    high = fat_tree(2, 4, 8, load=0.8, seed=4).data["gangs"]
    n = min(len(low), len(high))
    assert low[:n] == high[:n]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"layout": "8gpu"}, "layout '8gpu' is unknown (accepted: hgx8, 4gpu)"),
        ({"queues": 16}, "queues is 16 (accepted: 1..15)"),
        ({"load": 1.5}, "load is 1.5 (accepted: 0..1)"),
        ({"demand": -1.0}, "demand is -1 (accepted: 0..100)"),
        # a demand of inf drew gangs forever (issue 11); at most 100 x the free GPUs
        ({"demand": float("inf")}, "demand is inf (accepted: 0..100)"),
        ({"spines": 0}, "spines is 0 (accepted: >= 1)"),
        ({"sizes": "helios"}, "sizes 'helios' is unknown (accepted: itp, philly)"),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(GeneratorError) as err:
        fat_tree(**kwargs)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_cli_generate_writes_a_small_file(tmp_path: Path) -> None:
    out = tmp_path / "ft.yaml"
    args = [
        "generate",
        "fat-tree",
        "--spines",
        "2",
        "--leaves-per-spine",
        "4",
        "--nodes-per-leaf",
        "8",
        "--layout",
        "hgx8",
        "--demand",
        "1.3",
        "--queues",
        "4",
        "--load",
        "0.5",
        "--seed",
        "9",
        "-o",
        str(out),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    snap, warnings = load_snapshot(out)
    assert snap == generate_fat_tree(2, 4, 8, "hgx8", 1.3, 4, 0.5, 9) and warnings == []
    text = out.read_text(encoding="utf-8")
    # 8 node pools (one per leaf), one line each, not 64 nodes
    assert text.count("\n  - {name: ") == 8 + 4 + len(snap.gangs) + len(snap.running)
    stdout = CliRunner().invoke(main, args[:-2])
    assert stdout.exit_code == 0 and stdout.stdout == text


def test_a_gang_larger_than_every_gpu_models_share_is_left_unconstrained() -> None:
    # 8 nodes of 4 GPUs: each of the generator's GPU models has at most a few nodes, so a
    # drawn gang can ask more GPUs than any one model has; seed 1141 draws one that is
    # model-constrained (the reviewer's crash: an empty draw). Its gangs name only models
    # with enough GPUs for them.
    s = generate_fat_tree(2, 2, 2, "4gpu", seed=1141)
    per_model: dict[str | None, int] = {}
    for n in s.nodes:
        per_model[n.gpu_model] = per_model.get(n.gpu_model, 0) + n.allocatable.get(s.gpu, 0)
    for g in s.gangs:
        gpus = sum(r.count * r.requests.get(s.gpu, 0) for r in g.roles)
        for m in g.gpu_models:
            assert per_model[m] >= gpus, (g.name, m)


# --------------------------------------------------------------------------- trace histograms


def test_embedded_histograms_match_what_issue_5_states() -> None:
    # itp-elasticflow: 69,351 jobs, 83 % 1-GPU, mean 2.1 GPUs, tail to 64
    assert ITP_ELASTICFLOW.jobs == 69351
    assert round(ITP_ELASTICFLOW.jobs_by_gpus[1] / ITP_ELASTICFLOW.jobs, 2) == 0.83
    assert round(ITP_ELASTICFLOW.mean_gpus, 1) == 2.1
    assert max(ITP_ELASTICFLOW.jobs_by_gpus) == 64
    # pollux-philly-jobs: 82,247 jobs, 93 % 1-GPU, tail to 128, 15 VCs
    assert PHILLY.jobs == 82247
    assert round(PHILLY.jobs_by_gpus[1] / PHILLY.jobs, 2) == 0.93
    assert max(PHILLY.jobs_by_gpus) == 128
    assert len(PHILLY.jobs_by_queue) == 15 and sum(PHILLY.jobs_by_queue.values()) == 82247


def _derive_script() -> ModuleType:
    path = ROOT / "scripts" / "derive_trace_stats.py"
    spec = importlib.util.spec_from_file_location("derive_trace_stats", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_embedded_histograms_match_the_script() -> None:
    for folder in ("itp-elasticflow", "pollux-philly-jobs"):
        if not (DATA / folder).exists():
            pytest.skip(f"{DATA / folder} is absent (the traces live in ../shared/data)")
    derived = _derive_script().derive(DATA)
    for stats in (ITP_ELASTICFLOW, PHILLY):
        got = derived[stats.name]
        assert got["jobs_by_gpus"] == dict(stats.jobs_by_gpus)
        assert got["gpu_seconds_by_gpus"] == dict(stats.gpu_seconds_by_gpus)
    assert list(derived[PHILLY.name]["jobs_by_queue"].items()) == list(PHILLY.jobs_by_queue.items())
