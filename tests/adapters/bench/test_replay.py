"""The Alibaba replay (adapters/bench/replay.py): a small replay worked out by hand for each
placer, the arrival rules, each one-pod placer against its baseline run on a snapshot, the
CP-SAT cycles, the CLI, and (when ../shared/data is there) one run on the real trace.

The hand cluster (CSV below): n0 CPU-only (16 cpu); n1 and n2 one GPU of model A each
(8 cpu): 2000 milli-GPU in all. The pods, in creation order, each 1 cpu and a GPU share:
p0 300m, p1 400m, p2 700m, p3 600m: 2000 milli-GPU, 100% of the GPUs. With target 1.1
(2200 milli-GPU) no pod is drawn after the list (each asks >= 300).
"""

from __future__ import annotations

import dataclasses
import json
import os
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from gangplan.adapters.bench.replay import (
    ReplayCluster,
    ReplayConfig,
    ReplayResult,
    arrivals,
    cycles_text,
    plan_source,
    replay,
    run_line,
    summarize,
    summary_rows,
    trace_workload,
)
from gangplan.adapters.cli import main
from gangplan.adapters.traces.alibaba import OpenbPod, read_openb_nodes, read_openb_pods
from gangplan.models import Gang, RunningPod, Snapshot, format_quantity
from gangplan.solver.context import CycleContext
from gangplan.solver.placers.baselines import BASELINES
from gangplan.solver.placers.one_pod import one_pod_placer

ROOT = Path(__file__).resolve().parents[3]
# $GANGPLAN_SHARED_DATA, else the first shared/data beside the repository or above it
DATA = Path(
    os.environ.get("GANGPLAN_SHARED_DATA")
    or next(
        (p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()),
        ROOT.parent / "shared" / "data",
    )
)
OPENB = DATA / "alibaba-gpu-v2023" / "csv"

NODES_CSV = """\
    sn,cpu_milli,memory_mib,gpu,model
    n0,16000,65536,0,
    n1,8000,65536,1,A
    n2,8000,65536,1,A
"""
HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
PODS_CSV = f"""\
    {HEADER}
    p2,1000,0,1,700,,LS,Running,2,,
    p0,1000,0,1,300,,LS,Running,0,,
    p3,1000,0,1,600,,LS,Running,3,,
    p1,1000,0,1,400,,LS,Running,1,,
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def hand(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path, "nodes.csv", NODES_CSV), write(tmp_path, "pods.csv", PODS_CSV)


HAND = ReplayConfig(target=1.1)


def flat(curve: tuple[tuple[float, float], ...]) -> list[float]:
    return [v for point in curve for v in point]


def test_greedy_by_hand(hand: tuple[Path, Path]) -> None:
    """Binpack, score = mean over cpu and GPU of (used + request) / allocatable:
    p0: n1 and n2 tie (1/8 + 0.3) / 2 -> n1, the first; n1 has 700m left;
    p1: n1 (2/8 + 0.7) / 2 > n2 (1/8 + 0.4) / 2 -> n1, 300m left;
    p2 (700m): only n2 holds it -> n2, 300m left;
    p3 (600m): 300m left on each -> dropped. Arrived 100% at p3: 1400 of 2000 placed."""
    r = replay(*hand, "greedy", 0, HAND)
    assert (r.trace_pods, r.extra_pods, r.placed_pods, r.failed_pods) == (4, 0, 3, 1)
    assert r.failed_gpu_milli == 600
    assert r.allocated_at == {1.0: pytest.approx(0.7)}
    assert r.final == pytest.approx(0.7) and r.unallocated_gpus == pytest.approx(0.6)
    assert r.arrived == 1.0
    # a point each time arrived passes a whole percent: 15%, 35%, 70%, 100%
    assert flat(r.curve) == pytest.approx([0.15, 0.15, 0.35, 0.35, 0.7, 0.7, 1.0, 0.7])


def test_fgd_by_hand(hand: tuple[Path, Path]) -> None:
    """Workload: one pod each of 300m, 400m, 700m, 600m (1 cpu). F of a one-GPU node with
    f free: the sum of f over the shares larger than f (they do not fit; the smaller ones
    fit and leave nothing too small on a one-GPU node).
    p0: n1 and n2 tie -> n1 (1000 -> 700: F 0 -> 0);
    p1: n1 700 -> 300: F 0 -> 3 x 300 = 900, Δ 900; n2 1000 -> 600: F 0 -> 600 (700m),
        Δ 600 -> n2;
    p2 (700m): n1 700 -> 0: F 0 -> 0 -> n1; p3 (600m): n2 600 -> 0 -> n2. All placed."""
    r = replay(*hand, "fgd", 0, HAND)
    assert (r.placed_pods, r.failed_pods) == (4, 0)
    assert r.allocated_at == {1.0: 1.0}
    assert r.final == 1.0 and r.unallocated_gpus == 0
    assert flat(r.curve) == pytest.approx([0.15, 0.15, 0.35, 0.35, 0.7, 0.7, 1.0, 1.0])


def test_topology_fit_by_hand(hand: tuple[Path, Path]) -> None:
    """BestFit: the node with the least room for the pod (pods of its shape it still
    holds), ties by name: p0: room 3 (1000 // 300) on both -> n1 (700m left); p1: n1 room
    1 (700 // 400), n2 room 2 -> n1 (300m left); p2: only n2 -> n2 (300m left); p3
    dropped: 1400 of 2000."""
    r = replay(*hand, "topology-fit", 0, HAND)
    assert (r.placed_pods, r.failed_pods, r.failed_gpu_milli) == (3, 1, 600)
    assert r.allocated_at == {1.0: pytest.approx(0.7)}
    assert r.final == pytest.approx(0.7)


def test_cpsat_cycles_by_hand(hand: tuple[Path, Path]) -> None:
    """Cycles of 2. {p0 (300m), p1 (400m)}: both fit anywhere. The expected-fragmentation
    entry (workload: the cycle's pods, 300m and 400m, one each) looks ahead: together on one
    node they leave 300 there, which a 400m pod cannot use (F = 300); apart they leave 700
    and 600, which both shapes use (F = 0). So apart, before the partly-used-node count.
    {p2 (700m), p3 (600m)}: each fits the GPU left with its own size: all placed, 2000 of
    2000 (with the partly-used-node count first, CP-SAT put p0 and p1 together and lost
    p3, as FGD's one-pod look-ahead does not)."""
    cfg = ReplayConfig(target=1.1, batch=2, time_limit_s=2.0, workers=1)
    r = replay(*hand, "cpsat", 0, cfg)
    assert r.cycles == 2 and sum(r.statuses.values()) == 2 and len(r.cycle_times_s) == 2
    assert sum(r.plans.values()) == 2  # each cycle counted once, by the plan it returned
    assert (r.placed_pods, r.failed_pods, r.failed_gpu_milli) == (4, 0, 0)
    assert r.allocated_at == {1.0: pytest.approx(1.0)}


@pytest.mark.parametrize(
    ("placer", "source"),
    [
        ("cpsat", "cpsat"),  # CP-SAT's own plan
        ("cpsat (incumbent: fgd)", "fgd"),
        ("cpsat (incumbent: fgd restarts)", "fgd restarts"),
        ("cpsat (incumbent: topology-fit, polished)", "topology-fit"),
    ],
)
def test_plan_source(placer: str, source: str) -> None:
    assert plan_source(placer) == source


def test_cycles_text() -> None:
    # statuses by name, then plans most first (ties by name)
    assert cycles_text({"incumbent": 100, "feasible": 8}, {"fgd": 29, "fgd restarts": 79}) == (
        "feasible 8, incumbent 100; plans: fgd restarts 79, fgd 29"
    )
    assert cycles_text({"incumbent": 2}, {}) == "incumbent 2"
    assert cycles_text({}, {}) == ""


def test_summary_of_runs(hand: tuple[Path, Path]) -> None:
    runs = [replay(*hand, "topology-fit", s, HAND) for s in (0, 1)]
    (s,) = summarize(runs)
    # the list alone reaches the target, so both seeds replay the same pods
    assert s.runs == 2 and s.final == (pytest.approx(0.7), 0.0)
    header, rows = summary_rows([s])
    assert header[2] == "allocated at 100% arrived"
    # every figure with its unit (issue: "allocated 100%: 93.39" lacked its %)
    assert rows[0] == [
        "topology-fit",
        "2",
        "70.00 ± 0.00%",
        "70.00 ± 0.00%",
        "0.6 ± 0.0 GPUs",
        "1 ± 0 pods",
        rows[0][6],  # seconds: measured, not worked out
        "none (one pod at a time)",
    ]
    assert rows[0][6].endswith(" s")


def _result(allocated_at: dict[float, float], arrived: int, allocated: int) -> ReplayResult:
    """A run on 10 GPUs written by hand (milli-GPU arrived and allocated)."""
    return ReplayResult(
        placer="greedy",
        seed=3,
        config=ReplayConfig(),
        nodes=2,
        capacity_gpus=10,
        trace_pods=4,
        extra_pods=0,
        placed_pods=3,
        failed_pods=1,
        failed_gpu_milli=600,
        arrived_gpu_milli=arrived,
        allocated_gpu_milli=allocated,
        allocated_at=allocated_at,
        curve=(),
        wall_time_s=2.34,
    )


def test_a_run_line_gives_every_figure_its_unit() -> None:
    # 13 of 10 GPUs arrived (130%), 9.339 allocated at 100% and 9.6 at the end: 0.4 free
    line = run_line(_result({1.0: 0.9339}, 13_000, 9_600))
    assert line == (
        "greedy seed 3: at 100% arrived: 93.39% allocated; at the end (130.0% arrived): "
        "96.00% allocated, 0.4 GPUs free; 1 pod dropped; 2.3 s"
    )


def test_a_short_run_says_the_checkpoint_was_never_reached() -> None:
    # before: "greedy seed 0: allocated , end (10.0%): ..." (an empty value)
    line = run_line(_result({}, 1_000, 999))
    assert line == (
        "greedy seed 3: at 100% arrived: never reached; at the end (10.0% arrived): "
        "9.99% allocated, 9.0 GPUs free; 1 pod dropped; 2.3 s"
    )
    header, rows = summary_rows(summarize([_result({}, 1_000, 999)]))
    assert header[2] == "allocated at 100% arrived" and rows[0][2] == "not reached"
    assert rows[0][3] == "9.99 ± 0.00%"


# --------------------------------------------------------------------------- arrivals


def pod(name: str, gpus: int = 1, milli: int = 1000, t: int = 0, row: int = 0) -> OpenbPod:
    return OpenbPod(name, 1000, 1024, gpus, milli if gpus else 0, creation_time=t, row=row)


def test_arrivals_in_creation_order_cut_at_the_target() -> None:
    # 2 GPUs, target 1.3: 2600 milli; one-GPU pods: the third would make 3000 > 2600
    pods = [pod("c", t=5, row=1), pod("a", t=1, row=2), pod("b", t=1, row=3), pod("d", t=0)]
    seq = arrivals(pods, 2, seed=0, target=1.3)
    assert [a.name for a in seq] == ["d", "a"]


def test_arrivals_after_the_list_are_drawn_from_it() -> None:
    # 10 GPUs, target 1.3 = 13000 milli; the list asks 2 x 1000 + 500: the rest is drawn
    pods = [pod("a"), pod("b", t=1), pod("s", milli=500, t=2)]
    seq = arrivals(pods, 10, seed=7, target=1.3)
    assert [a.name for a in seq[:3]] == ["a", "b", "s"]
    extra = seq[3:]
    assert [a.name.rsplit("-x", 1) for a in extra] == [
        [a.pod.name, str(i)] for i, a in enumerate(extra)
    ]
    demand = sum(a.gpu_milli for a in seq)
    # the draws stop at the first pod that would pass 13000; the largest asks 1000
    assert 13000 - 1000 < demand <= 13000
    assert arrivals(pods, 10, seed=7, target=1.3) == seq
    assert all(a.extra for a in extra) and not any(a.extra for a in seq[:3])


def test_shuffled_arrivals_are_a_seeded_permutation() -> None:
    pods = [pod(f"p{i}", t=i) for i in range(8)]
    a = arrivals(pods, 8, seed=1, target=1.0, order="shuffle")
    assert sorted(x.name for x in a) == [f"p{i}" for i in range(8)]
    assert a == arrivals(pods, 8, seed=1, target=1.0, order="shuffle")
    assert [x.name for x in a] != [f"p{i}" for i in range(8)] or [
        x.name for x in arrivals(pods, 8, seed=2, target=1.0, order="shuffle")
    ] != [x.name for x in a]


# --------------------------------------------------------------------------- one pod = baseline

CHECK_NODES = """\
    sn,cpu_milli,memory_mib,gpu,model
    c0,32000,131072,0,
    a1,16000,65536,2,A
    b1,32000,131072,4,B
    a2,8000,32768,1,A
    b2,64000,262144,8,B
    c1,8000,16384,0,
"""
CHECK_PODS = f"""\
    {HEADER}
    q00,4000,8192,1,300,,LS,Running,0,,
    q01,2000,4096,0,0,,LS,Running,1,,
    q02,8000,16384,2,1000,,LS,Running,2,,
    q03,1000,2048,1,700,B,LS,Running,3,,
    q04,6000,8192,1,1000,A,LS,Running,4,,
    q05,1000,1024,1,250,,LS,Running,5,,
    q06,16000,65536,4,1000,,LS,Running,6,,
    q07,3000,2048,1,500,,LS,Running,7,,
    q08,12000,4096,0,0,,LS,Running,8,,
    q09,2000,2048,1,300,,LS,Running,9,,
    q10,4000,8192,1,1000,,LS,Running,10,,
    q11,2000,30000,1,200,A,LS,Running,11,,
    q12,1000,1024,1,650,,LS,Running,12,,
    q13,8000,16384,8,1000,,LS,Running,13,,
    q14,2000,2048,1,450,,LS,Running,14,,
    q15,1000,1024,2,1000,A,LS,Running,15,,
    q16,4000,4096,1,800,,LS,Running,16,,
    q17,2000,4096,1,1000,,LS,Running,17,,
    q18,30000,4096,0,0,,LS,Running,18,,
    q19,1000,1024,1,100,,LS,Running,19,,
"""


@pytest.mark.parametrize("placer", ["greedy", "topology-fit", "fgd"])
def test_one_pod_placers_agree_with_the_baselines(tmp_path: Path, placer: str) -> None:
    """Pod by pod, the replay's incremental choice equals the baseline's run on a snapshot
    of the cluster as it is (placed pods running) with that one pod pending."""
    nodes = read_openb_nodes(write(tmp_path, "n.csv", CHECK_NODES))
    pods = read_openb_pods(write(tmp_path, "p.csv", CHECK_PODS))
    cluster = ReplayCluster(nodes)
    workload = trace_workload(pods)
    place = one_pod_placer(cluster.state, placer, workload)
    base = cluster.snapshot
    running: list[RunningPod] = []
    outcomes = []
    for p in sorted(pods, key=lambda p: p.arrival):
        shared = cluster.gang_of(p)
        role = shared.roles[0]
        gang = Gang(
            name=p.name,
            queue=shared.queue,
            gpu_models=shared.gpu_models,
            roles=(role.model_copy(update={"pod_names": (p.name,)}),),
        )
        snap = Snapshot(
            resources=base.resources,
            levels=base.levels,
            nodes=base.nodes,
            queues=base.queues,
            gangs=(gang,),
            running=tuple(running),
        )
        expected = BASELINES[placer](CycleContext.of(snap, workload=workload))
        got = place(shared, p.name)
        want = [(x.node, x.gpus, x.gpu_milli) for x in expected]
        have = [(got.node, got.gpus, got.gpu_milli)] if got is not None else []
        assert have == want, p.name
        outcomes.append(got is not None)
        if got is not None:
            requests = {r: format_quantity(r, v) for r, v in role.requests.items()}
            running.append(
                RunningPod(name=p.name, node=got.node, requests=requests, devices=got.gpus)
            )
    # the case is worth checking: some pods fit, some do not
    assert any(outcomes) and not all(outcomes)


# --------------------------------------------------------------------------- CLI


def test_cli_replay(hand: tuple[Path, Path], tmp_path: Path) -> None:
    nodes, pods = hand
    out = tmp_path / "runs.json"
    plot = tmp_path / "curve.png"
    result = CliRunner().invoke(
        main,
        [
            "replay",
            "alibaba",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--seeds",
            "2",
            "--target",
            "1.1",
            "--placer",
            "topology-fit",
            "--placer",
            "greedy",
            "--json",
            str(out),
            "--plot",
            str(plot),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "topology-fit" in result.stdout and "70.00 ± 0.00" in result.stdout
    # piped: plain lines within 80 columns, no box characters (it was a 145-column table)
    lines = result.stdout.splitlines()
    assert all(len(t) <= 80 for t in lines), [t for t in lines if len(t) > 80]
    assert not set("─│┃━┏┓┗┛┡┩└┘") & set(result.stdout)
    # greedy by hand (test_greedy_by_hand): 1,400 of 2,000 milli-GPU at 100% arrived and at
    # the end, 600m (p3) left unplaced, p3 dropped; the same on both seeds
    at = lines.index("greedy (2 runs)")
    assert lines[at + 1 : at + 5] == [
        "  allocated at 100% arrived  70.00 ± 0.00%",
        "  allocated at the end       70.00 ± 0.00%",
        "  unallocated GPUs           0.6 ± 0.0 GPUs",
        "  dropped pods               1 ± 0 pods",
    ]
    runs = json.loads(out.read_text())
    assert [(r["placer"], r["seed"]) for r in runs] == [
        ("topology-fit", 0),
        ("topology-fit", 1),
        ("greedy", 0),
        ("greedy", 1),
    ]
    assert runs[0]["allocated_at"] == {"100": pytest.approx(0.7)}
    assert runs[2]["final"] == pytest.approx(0.7)
    assert plot.stat().st_size > 0


def test_cli_replay_bad_file(tmp_path: Path) -> None:
    bad = write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,1,-5,0,\n")
    pods = write(tmp_path, "pods.csv", PODS_CSV)
    result = CliRunner().invoke(
        main, ["replay", "alibaba", "--nodes", str(bad), "--pods", str(pods), "--seeds", "1"]
    )
    assert result.exit_code == 1
    assert "error:" in result.output and "memory_mib" in result.output


# --------------------------------------------------------------------------- the real trace


@pytest.mark.slow
def test_fgd_on_the_openb_trace() -> None:
    """One seed of fgd on all 1,523 nodes and the 8,152 pods of the default list
    (../shared/data/alibaba-gpu-v2023/SOURCE.md: 6,212 GPUs)."""
    nodes_csv = OPENB / "openb_node_list_all_node.csv"
    pods_csv = OPENB / "openb_pod_list_default.csv"
    if not (nodes_csv.exists() and pods_csv.exists()):
        pytest.skip(
            f"{OPENB} is absent (real traces are read in place from ../shared/data, "
            "beside the repository)"
        )
    r = replay(nodes_csv, pods_csv, "fgd", 0)
    assert (r.nodes, r.capacity_gpus, r.trace_pods) == (1523, 6212, 8152)
    assert r.placed_pods + r.failed_pods == r.trace_pods + r.extra_pods
    # the draws stop at the first pod that would pass 130%; the largest asks 8 GPUs
    assert 1.3 - 8 / 6212 < r.arrived <= 1.3
    assert r.allocated_gpu_milli <= r.arrived_gpu_milli - r.failed_gpu_milli
    shares = [x for _, x in r.curve]
    assert shares == sorted(shares) and r.allocated_at[1.0] <= r.final <= 1.0
    # the paper reports 95.39% for FGD and 93.08% for best fit at 130%: a harness bug
    # (pods lost, capacity miscounted) would land far below
    assert r.final > 0.9


def test_a_cpsat_summary_gives_its_cycles_time_and_plans() -> None:
    # two runs of 2 and 1 cycles (1.0 + 3.0 and 2.0 s): a cycle takes 2.00 s on average,
    # the longest 3.00 s; their plans and statuses are added up
    base = _result({1.0: 0.5}, 10_000, 5_000)
    runs = [
        dataclasses.replace(
            base,
            placer="cpsat",
            cycles=2,
            cycle_times_s=(1.0, 3.0),
            statuses={"incumbent": 2},
            plans={"fgd restarts": 1, "fgd": 1},
        ),
        dataclasses.replace(
            base,
            placer="cpsat",
            cycles=1,
            cycle_times_s=(2.0,),
            statuses={"incumbent": 1},
            plans={"fgd restarts": 1},
        ),
    ]
    (s,) = summarize(runs)
    assert s.cycle_s == (2.0, 3.0)
    _, (row,) = summary_rows([s])
    assert row[-2].endswith(" s (2.00 s a cycle, the longest 3.00 s)")
    assert row[-1] == "incumbent 3; plans: fgd restarts 2, fgd 1"
