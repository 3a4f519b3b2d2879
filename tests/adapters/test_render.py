"""What ``gangplan solve`` prints: a view that fits 80 columns, names never broken, reasons
wrapped across the width, capped at scale, a status line that cannot contradict itself, and
every string printed as text (never rich markup).

Plans here are written by hand (not by a placer), so each expected line follows from the
plan itself; every plan passes the verifier.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from gangplan.adapters.cli import main
from gangplan.adapters.render import ROW_CAP, plan_lines, render_plan, status_line
from gangplan.models import (
    GangOutcome,
    PendingReason,
    Plan,
    PlanSummary,
    PodPlacement,
    Snapshot,
    TierReport,
)
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import assemble_plan

GPU = "nvidia.com/gpu"


def gang(name: str, queue: str = "qa", count: int = 1, gpus: int = 1, **extra: Any) -> dict:
    """A one-role gang (role ``w``) of ``count`` pods of ``gpus`` GPUs each."""
    role = {"name": "w", "count": count, "requests": {GPU: gpus} if gpus else {}}
    role.update(extra.pop("role", {}))
    return {"name": name, "queue": queue, "roles": [role], **extra}


def gpu_node(name: str, gpus: int = 4) -> dict:
    return {"name": name, "allocatable": {GPU: gpus, "cpu": 8}}


LONG_NAME = "a-rather-long-gang-name-0001"
LONG = (
    "needs 4 pods (4 x 8 GPUs; 32 GPUs at full size) inside one leaf; the largest free "
    "leaf (spine-0/leaf-2) holds 3 of them (running pods hold the rest)"
)


def _text(lines: list[tuple[str, str]]) -> list[str]:
    return [t for t, _ in lines]


@pytest.fixture
def small(snapshot_of: Callable[..., Snapshot]) -> tuple[Snapshot, Plan]:
    """Two 4-GPU nodes; gang ``a-rather-long-gang-name-0001`` (2 x 2 GPUs) admitted on n1,
    gang ``b`` (1 x 4 GPUs) pending with a long reason."""
    snap = snapshot_of(
        nodes=[gpu_node("n1"), gpu_node("n2")],
        queues=[{"name": "qa"}],
        gangs=[gang(LONG_NAME, count=2, gpus=2), gang("b", gpus=4)],
    )
    plan = Plan(
        gangs=(
            GangOutcome(gang=LONG_NAME, admitted=True, placed=2, roles={"w": 2}),
            GangOutcome(gang="b", admitted=False, reason=PendingReason(kind="lost", message=LONG)),
        ),
        pods=(
            PodPlacement(pod=f"{LONG_NAME}-w-{i}", gang=LONG_NAME, role="w", node="n1")
            for i in range(2)
        ),
    )
    # the plan names no devices: give them as the verifier expects (GPUs by id)
    plan = _with_devices(snap, plan)
    assert verify(snap, plan) == []
    return snap, plan


def _with_devices(snap: Snapshot, plan: Plan) -> Plan:
    used: dict[str, int] = {}
    pods = []
    for p in plan.pods:
        g = snap.gang_by_key[p.gang_key]
        n = g.role(p.role).requests.get(snap.gpu, 0) // 1000
        layout = snap.layout_of(snap.node_by_name[p.node])
        start = used.get(p.node, 0)
        ids = layout.gpu_ids[start : start + n] if layout else ()
        used[p.node] = start + n
        pods.append(p.model_copy(update={"gpus": tuple(ids)}))
    return plan.model_copy(update={"pods": tuple(pods)})


def test_the_view_fits_80_columns_with_the_reason_under_its_row(
    small: tuple[Snapshot, Plan],
) -> None:
    snap, plan = small
    lines = _text(plan_lines(snap, plan, 80))
    assert all(len(t) <= 80 for t in lines), [t for t in lines if len(t) > 80]
    # worked out by hand: columns two spaces apart, each as wide as its widest cell
    assert lines[:5] == [
        "pending gangs: 1",
        "  gang  queue  prio  pods  GPUs asked  why pending",
        "  b     qa        0   0/1           4  lost",
        "      needs 4 pods (4 x 8 GPUs; 32 GPUs at full size) inside one leaf; the",
        "      largest free leaf (spine-0/leaf-2) holds 3 of them (running pods hold the",
    ]
    assert lines[5] == "      rest)"
    # no levels: no column of domains spanned (it showed "leaves 1")
    assert lines[7:10] == [
        "admitted gangs: 1",
        "  gang                          queue  prio  pods  GPUs  nodes",
        "  a-rather-long-gang-name-0001  qa        0   2/2     4      1",
    ]
    # the summary: 4 of the 8 GPUs asked placed; 8 free before the plan; no levels, so no
    # mean of domains spanned
    at = next(i for i, t in enumerate(lines) if t.startswith("gangs admitted"))
    assert lines[at] == "gangs admitted 1 of 2; GPUs placed 4 of 8 asked (8 free before the plan)"


def test_domains_spanned_are_named_for_the_lowest_level_and_count_nodes_outside() -> None:
    """levels: [rack] only; r1 holds n1 and n2, n3 is in no rack. Gang a (3 x 1 GPU) on n1,
    n2, n3 spans 1 rack plus 1 node in none: the cell says 1+1, and the mean counts that
    node as one more: 2.00."""
    snap = Snapshot.model_validate(
        {
            "levels": [{"name": "rack"}],
            "nodes": [
                {"name": "n1", "domains": {"rack": "r1"}, "allocatable": {"nvidia.com/gpu": 1}},
                {"name": "n2", "domains": {"rack": "r1"}, "allocatable": {"nvidia.com/gpu": 1}},
                {"name": "n3", "allocatable": {"nvidia.com/gpu": 1}},
            ],
            "queues": [{"name": "q"}],
            "gangs": [
                {
                    "name": "a",
                    "queue": "q",
                    "roles": [{"name": "w", "count": 3, "requests": {"nvidia.com/gpu": 1}}],
                }
            ],
        }
    )
    plan = Plan(
        gangs=(GangOutcome(gang="a", admitted=True, placed=3, roles={"w": 3}),),
        pods=tuple(
            PodPlacement(pod=f"a-w-{i}", gang="a", role="w", node=f"n{i + 1}", gpus=("gpu-0",))
            for i in range(3)
        ),
    )
    assert verify(snap, plan) == []
    lines = _text(plan_lines(snap, plan, 80))
    at = lines.index("admitted gangs: 1")
    assert lines[at + 1 : at + 4] == [
        "  gang  queue  prio  pods  GPUs  nodes  racks",
        "  a     q         0   3/3     3      3    1+1",
        "  (+N: N nodes in no rack)",
    ]
    at = next(i for i, t in enumerate(lines) if t.startswith("gangs admitted"))
    assert " ".join(lines[at : at + 3]).startswith(
        "gangs admitted 1 of 1; GPUs placed 3 of 3 asked (3 free before the plan); mean "
        "racks spanned by multi-pod gangs 2.00 (a node in no rack counts as one)"
    )


def test_names_are_never_broken_even_when_the_width_is_too_small(
    small: tuple[Snapshot, Plan],
) -> None:
    snap, plan = small
    lines = _text(plan_lines(snap, plan, 30))
    # the gang name is whole on its row, though the row is wider than 30 columns
    assert any("a-rather-long-gang-name-0001" in t for t in lines)
    # the reason's words are each whole: joined again, the lines give the message back,
    # headed by its kind (the table is too wide for a column of its own)
    start = lines.index("  b     qa        0   0/1           4") + 1
    reason = []
    for t in lines[start:]:
        if not t.startswith("      "):
            break
        reason.append(t.strip())
    assert " ".join(reason) == f"lost: {LONG}"


def test_long_gang_and_queue_names_still_fit_80_columns(
    snapshot_of: Callable[..., Snapshot],
) -> None:
    """A gang name of 29 characters and a queue name of 20 (Kueue's samples): the pending
    table would be 2 + 29 + 2 + 20 + 2 + 4 + 2 + 4 + 2 + 10 + 2 + 11 = 90 columns with its
    'why pending' column, so the kind heads the reason instead; the queue table's titles
    are short enough for its last column at 2 + 20 + 2 + 7 + 2 + 6 + 2 + 5 + 2 + 19 = 67."""
    gang = "sample-job-partial-admission1"
    queue = "worker-cluster-queue"
    snap = snapshot_of(
        nodes=[gpu_node("n1", gpus=1)],
        queues=[{"name": queue}],
        gangs=[
            {
                "name": gang,
                "queue": queue,
                "roles": [{"name": "w", "count": 1, "requests": {GPU: 2}}],
            }
        ],
    )
    plan = Plan(
        gangs=(
            GangOutcome(
                gang=gang,
                admitted=False,
                reason=PendingReason(
                    kind="never_fits", message="needs 2 GPUs on one node; the largest node has 1"
                ),
            ),
        )
    )
    lines = _text(plan_lines(snap, plan, 80))
    assert all(len(t) <= 80 for t in lines), [t for t in lines if len(t) > 80]
    assert lines[1:4] == [
        "  gang                           queue                 prio  pods  GPUs asked",
        f"  {gang}  {queue}     0   0/1           2",
        "      never fits: needs 2 GPUs on one node; the largest node has 1",
    ]
    at = lines.index("  queue                 running  placed  share  fair target (class)")
    assert lines[at - 2 : at] == [
        "queues: GPUs running and placed, dominant share after the plan, and fair target",
        "  per priority class",
    ]


def test_at_scale_rows_are_capped_and_single_pod_gangs_counted(
    snapshot_of: Callable[..., Snapshot],
) -> None:
    # 60 pending gangs of one pod, 60 admitted gangs of one pod and 1 admitted of two pods
    n_pending, n_single = ROW_CAP + 10, ROW_CAP + 10
    nodes = [gpu_node(f"n{i}", gpus=8) for i in range(16)]
    gangs = (
        [gang(f"p{i}", gpus=0, role={"requests": {"cpu": 1}}) for i in range(n_pending)]
        + [gang(f"s{i}", gpus=1) for i in range(n_single)]
        + [gang("m", count=2, gpus=1)]
    )
    snap = snapshot_of(nodes=nodes, queues=[{"name": "qa"}], gangs=gangs)
    outcomes = [
        GangOutcome(gang=f"p{i}", admitted=False, reason=PendingReason(kind="lost", message="x"))
        for i in range(n_pending)
    ]
    pods = []
    for i in range(n_single):
        outcomes.append(GangOutcome(gang=f"s{i}", admitted=True, placed=1, roles={"w": 1}))
        pods.append(PodPlacement(pod=f"s{i}-w-0", gang=f"s{i}", role="w", node=f"n{i // 8}"))
    outcomes.append(GangOutcome(gang="m", admitted=True, placed=2, roles={"w": 2}))
    pods += [PodPlacement(pod=f"m-w-{k}", gang="m", role="w", node="n15") for k in range(2)]
    plan = _with_devices(snap, Plan(gangs=tuple(outcomes), pods=tuple(pods)))
    assert verify(snap, plan) == []

    lines = _text(plan_lines(snap, plan, 80))
    assert sum(1 for t in lines if t.startswith("  p") and t.endswith("lost")) == ROW_CAP
    assert "  ... 10 more pending gangs; --all to list" in lines
    # the only multi-pod gang is listed; the 60 single-pod ones are counted
    assert sum(1 for t in lines if t.startswith("  s")) == 0
    assert any(t.startswith("  m  ") for t in lines)
    assert "  60 admitted single-pod gangs not listed; --all to list them" in lines

    every = _text(plan_lines(snap, plan, 80, show_all=True))
    assert sum(1 for t in every if t.startswith("  p") and t.endswith("lost")) == n_pending
    assert sum(1 for t in every if t.startswith("  s")) == n_single
    assert not any("--all" in t for t in every)


def test_a_capped_pending_list_shows_the_highest_priority_first(
    snapshot_of: Callable[..., Snapshot],
) -> None:
    # ROW_CAP + 5 pending gangs of priority 0 named before 3 of priority 1000: the three
    # are listed first, then the first ROW_CAP - 3 of the others, in the instance's order
    low = [gang(f"a{i:03d}", gpus=0, role={"requests": {"cpu": 1}}) for i in range(ROW_CAP + 5)]
    high = [gang(f"z{i}", gpus=0, priority=1000, role={"requests": {"cpu": 1}}) for i in range(3)]
    snap = snapshot_of(nodes=[gpu_node("n0")], queues=[{"name": "qa"}], gangs=low + high)
    plan = Plan(
        gangs=tuple(
            GangOutcome(
                gang=g["name"], admitted=False, reason=PendingReason(kind="lost", message="x")
            )
            for g in low + high
        )
    )
    rows = [t.split()[0] for t in _text(plan_lines(snap, plan, 80)) if t.endswith("lost")]
    assert rows == ["z0", "z1", "z2", *(f"a{i:03d}" for i in range(ROW_CAP - 3))]


def test_the_admitted_list_shows_the_highest_priority_first(
    snapshot_of: Callable[..., Snapshot],
) -> None:
    # a (priority 0) named before z (priority 1000), both 2 x 1 GPU on n1: z's row first
    snap = snapshot_of(
        nodes=[gpu_node("n1")],
        queues=[{"name": "qa"}],
        gangs=[gang("a", count=2), gang("z", count=2, priority=1000)],
    )
    pods = [
        PodPlacement(pod=f"{g}-w-{i}", gang=g, role="w", node="n1", gpus=(f"gpu-{2 * j + i}",))
        for j, g in enumerate(("a", "z"))
        for i in range(2)
    ]
    plan = assemble_plan(snap, pods, {})
    rows = [
        t.split()[0]
        for t in _text(plan_lines(snap, plan, 80))
        if t.startswith("  a ") or t.startswith("  z ")
    ]
    assert rows == ["z", "a"]


BRACKETS = "[/q]"


def test_brackets_in_names_and_notes_print_as_text(snapshot_of: Callable[..., Snapshot]) -> None:
    # issue 11: a queue named "[/q]" crashed the table (rich.errors.MarkupError), "[bold]x"
    # became styling, and "[capacity] node ..." printed as "( node ..."
    snap = snapshot_of(
        nodes=[gpu_node("n1")],
        queues=[{"name": BRACKETS}, {"name": "[bold]x"}],
        gangs=[gang("a", queue=BRACKETS), gang("b", queue="[bold]x", gpus=8)],
    )
    plan = _with_devices(
        snap,
        Plan(
            gangs=(
                GangOutcome(gang="a", admitted=True, placed=1, roles={"w": 1}),
                GangOutcome(
                    gang="b",
                    admitted=False,
                    reason=PendingReason(kind="never_fits", message="[red]needs 8 GPUs[/red]"),
                ),
            ),
            pods=(PodPlacement(pod="a-w-0", gang="a", role="w", node="n1"),),
            summary=PlanSummary(
                placer="greedy", status="baseline", notes=("[capacity] node n1 :smile:",)
            ),
        ),
    )
    out = io.StringIO()
    render_plan(snap, plan, Console(file=out, width=80, color_system=None))
    text = out.getvalue()
    assert BRACKETS in text and "[bold]x" in text
    assert "[red]needs 8 GPUs[/red]" in text
    assert "note: [capacity] node n1 :smile:" in text


def test_a_queue_named_with_brackets_solves_and_prints(tmp_path: Path) -> None:
    # issue 11's reproducer, through the CLI: exit 0, the name printed as it is
    inst = tmp_path / "i.yaml"
    inst.write_text(
        "apiVersion: gangplan.io/v1alpha1\nkind: Instance\n"
        "levels: [{name: '[lvl]'}]\n"
        "nodes: [{name: n1, domains: {'[lvl]': '[/d]'}, allocatable: {nvidia.com/gpu: 2}}]\n"
        "queues: [{name: '[/q]'}]\n"
        "gangs: [{name: g, queue: '[/q]', roles: [{name: w, count: 2, "
        "requests: {nvidia.com/gpu: 1}}]}]\n"
    )
    out = tmp_path / "plan.yaml"
    r = CliRunner().invoke(main, ["solve", str(inst), "--placer", "greedy", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "  [/q]" in r.output and out.exists()


def test_nothing_is_written_when_the_view_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the view is made before -o is written: if making it fails, no file has been replaced
    import gangplan.adapters.render as render

    def broken(*args: Any, **kwargs: Any) -> list[tuple[str, str]]:
        raise RuntimeError("view failed")

    monkeypatch.setattr(render, "plan_lines", broken)
    out = tmp_path / "plan.yaml"
    out.write_text("keep me\n")
    r = CliRunner().invoke(main, ["solve", "--placer", "greedy", "-o", str(out)])
    assert r.exit_code != 0
    assert out.read_text() == "keep me\n"


# --------------------------------------------------------------------------- status line


def _summary(status: str, placer: str = "cpsat", tiers: tuple[TierReport, ...] = ()) -> PlanSummary:
    return PlanSummary(placer=placer, status=status, tiers=tiers, wall_time_s=1.5)


def test_status_when_nothing_can_be_placed_does_not_call_cpsat_a_baseline() -> None:
    # before: "placer cpsat (a baseline: no optimisation, no bounds); status optimal"
    tiers = (TierReport(name="p0.gpu_milli", value=0),)
    line = status_line(_summary("optimal", tiers=tiers), 10, placed=0)
    assert line == (
        "placer cpsat: status optimal — no gang could be placed, so there was nothing to "
        "optimise; 1.50 s"
    )


def test_feasible_with_every_gpu_entry_at_its_bound_names_no_gap() -> None:
    # the GPU entries all reached their bounds (gap 0): no "largest gap 0.00%" of one class
    tiers = (
        TierReport(name="p1.gpu_milli", value=8000, bound=8000, gap=0.0, status="optimal"),
        TierReport(name="p0.gpu_milli", value=4000, bound=4000, gap=0.0, status="optimal"),
        TierReport(name="locality.leaf", value=-3, bound=-1, gap=0.6667, status="feasible"),
    )
    line = status_line(_summary("feasible", tiers=tiers), 10)
    assert line == (
        "placer cpsat: status feasible — 1 of 3 score entries not proven optimal within the "
        "cycle's 10 s limit (locality.leaf); GPUs admitted: every class at its bound; 1.50 s"
    )


def test_feasible_says_what_is_not_proven_in_what_time() -> None:
    tiers = (
        TierReport(name="p1.gpu_milli", value=6000, bound=8000, gap=0.25, status="feasible"),
        TierReport(name="p0.gpu_milli", value=8000, bound=8000, gap=0.0, status="optimal"),
        TierReport(name="locality.leaf", value=-3, bound=-1, gap=0.6667, status="feasible"),
        TierReport(name="fragmentation.fgd", value=-5, status="not optimised (time)"),
        TierReport(name="stability", value=0, status="constant"),
    )
    line = status_line(_summary("feasible", tiers=tiers), 10)
    # 4 entries optimised (the constant one is not), 3 of them not proven optimal; the
    # largest throughput gap (p1's 25%, not p0's 0) is named with its entry
    assert line == (
        "placer cpsat: status feasible — 3 of 4 score entries not proven optimal within the "
        "cycle's 10 s limit (p1.gpu_milli, locality.leaf, fragmentation.fgd); GPUs admitted: "
        "largest gap to the bound 25.00% (p1.gpu_milli); 1.50 s"
    )
    # in deterministic mode the limit is in deterministic seconds, and the line says so
    line = status_line(_summary("feasible", tiers=tiers), 10, deterministic=True)
    assert "within the cycle's 10 deterministic-second limit" in line
    assert line.endswith("1.50 s wall (the limit counts CP-SAT's deterministic seconds)")
    # after Ctrl-C the entries left are "interrupted": no claim about the limit
    stopped = (
        *tiers[:3],
        TierReport(name="fragmentation.fgd", value=-5, status="not optimised (interrupted)"),
    )
    line = status_line(_summary("feasible", tiers=stopped), 30)
    assert "not proven optimal when Ctrl-C stopped the search (" in line and "30 s" not in line


def test_baseline_incumbent_and_fallback_say_whose_plan_is_returned() -> None:
    assert status_line(_summary("baseline", placer="greedy")) == (
        "placer greedy: a baseline (no optimisation, no bounds); 1.50 s"
    )
    line = status_line(_summary("incumbent", placer="cpsat (incumbent: fgd)"), 5)
    assert (
        "CP-SAT found no plan better than the fgd plan within the cycle's 5 s limit, which is "
        "returned" in line
    )
    line = status_line(_summary("fallback", placer="cpsat (incumbent: greedy)"), 5)
    assert "the greedy plan is returned" in line and "optimal" not in line
    # CP-SAT never searched (its parts have no "search"): no claim that it found nothing
    unsolved = _summary("incumbent", placer="cpsat (incumbent: fgd)").model_copy(
        update={"parts": {"baseline.fgd": 0.4, "check": 0.1}}
    )
    line = status_line(unsolved, 0.5)
    assert "found no plan" not in line
    assert "CP-SAT's model was not solved (see the notes)" in line
    assert "the fgd plan is returned" in line
    searched = unsolved.model_copy(update={"parts": {"baseline.fgd": 0.4, "search": 4.0}})
    assert "CP-SAT found no plan better than the fgd plan" in status_line(searched, 5)


def test_cli_status_line_of_an_instance_where_nothing_fits(tmp_path: Path) -> None:
    inst = tmp_path / "i.yaml"
    inst.write_text(
        "apiVersion: gangplan.io/v1alpha1\nkind: Instance\n"
        "nodes: [{name: n1, allocatable: {nvidia.com/gpu: 8}}]\nqueues: [{name: q}]\n"
        "gangs: [{name: g, queue: q, roles: [{name: w, count: 1, "
        "requests: {nvidia.com/gpu: 16}}]}]\n"
    )
    r = CliRunner().invoke(main, ["solve", str(inst), "--time-limit", "1"])
    assert r.exit_code == 0, r.output
    # the status line does not call CP-SAT's plan a baseline's (the parts' times after it
    # name the baselines that ran, as parts)
    status, _, parts = r.output.partition("time by part, in the order run:")
    assert "baseline" not in status and "baseline.greedy" in parts
    assert "no gang could be placed, so there was nothing to" in r.output
    assert all(len(t) <= 80 for t in r.output.splitlines())


def test_the_score_in_a_persons_units() -> None:
    from gangplan.adapters.render import score_lines

    entries = (
        ("p10.fairness", -258_064_000),  # weight 1 (1000 milli) x 258,064 ppm short
        ("p10.fairness_w0", -50_000),  # 50,000 ppm: 5% short, unweighted
        ("p10.gpu_milli", 12_500),
        ("p10.pods", 1),
        ("locality.preferred", -1),
        ("locality.leaf", -4),
        ("locality.node", -14),
        ("fragmentation.gpu_nodes", -1),
        ("fragmentation.leaves", -2),
        ("stability", -3),
    )
    assert score_lines(entries) == [
        "priority 10: fair-share shortfall 25.8, weight-0 queues 5.0; admitted 12.5 GPUs, 1 pod",
        "locality: extra domains of multi-pod gangs: preferred 1, leaf 4, node 14",
        "fragmentation: 1 GPU node and 2 leaves partly used",
        "stability: 3 pods moved from the previous plan",
        "(fair-share shortfall: the sum over a class's queues of weight x percentage",
        " points of dominant share below the queue's fair target, so it may pass 100)",
    ]
    # the lowest level's own name: racks, not leaves
    assert score_lines(entries, lowest_level="rack")[2] == (
        "fragmentation: 1 GPU node and 2 racks partly used"
    )
    # with FGD's entry (it ranks first among the fragmentation entries): its value first
    with_fgd = (*entries[:7], ("fragmentation.expected", -884_000), *entries[7:])
    assert score_lines(with_fgd)[2:4] == [
        "fragmentation: FGD's expected fragmentation 884,000 (milli-GPU x weight),",
        "  then 1 GPU node and 2 leaves partly used",
    ]


def test_the_score_shows_evictions_apart_from_admissions() -> None:
    """Class 0 admits 4 GPUs in 2 pods and evicts 8 GPUs in 1 pod: the score counts the
    difference (-4,000 milli-GPU, +1 pod); the line gives both parts."""
    from gangplan.adapters.render import score_lines

    entries = (
        ("p0.fairness", 0),
        ("p0.fairness_w0", 0),
        ("p0.gpu_milli", 4_000 - 8_000),
        ("p0.pods", 2 - 1),
    )
    lines = score_lines(entries, evicted={"p0": (8_000, 1)})
    assert lines[0] == (
        "priority 0: fair-share shortfall 0.0; admitted 4 GPUs, 2 pods; evicted 8 GPUs, 1 pod"
    )


def test_evicted_pods_leave_their_queue_s_share_after_the_plan() -> None:
    """Case 12 (instances/cases): node n has 5 CPUs; running gang l (3 x 1 CPU, queue q) is
    evicted whole for gang h (3 x 1 CPU, queue q). After the plan q holds h's 3 CPUs only:
    3 / 5 = 60.0% dominant share (not l's 3 + h's 3 = 120%)."""
    from gangplan.adapters.files import load_snapshot
    from gangplan.adapters.render import plan_stats
    from gangplan.models import Eviction

    snap, _ = load_snapshot(
        Path(__file__).parents[2] / "instances/cases/12-preempt-whole-victim.yaml"
    )
    pods = [
        PodPlacement(pod="h-launcher-0", gang="h", role="launcher", node="n"),
        PodPlacement(pod="h-worker-0", gang="h", role="worker", node="n"),
        PodPlacement(pod="h-worker-1", gang="h", role="worker", node="n"),
    ]
    evictions = [
        Eviction(pod=f"l-{i}", gang="l", node="n", for_gang="default/h", kind="priority")
        for i in range(3)
    ]
    plan = Plan(
        gangs=(GangOutcome(gang="h", admitted=True, placed=3, roles={"launcher": 1, "worker": 2}),),
        pods=tuple(pods),
        evictions=tuple(evictions),
    )
    assert verify(snap, plan) == []
    (queue,) = plan_stats(snap, plan).queues
    assert queue[0] == "q"
    assert queue[3] == pytest.approx(60.0)


def test_a_cycle_past_its_limit_says_so_and_names_its_largest_part() -> None:
    # 1.5 s against a 1 s limit, of which the fgd baseline took 0.9 s (a reviewer's case:
    # the first baseline alone passes a short limit, and the line said only "1.50 s")
    s = PlanSummary(
        placer="cpsat (incumbent: fgd)",
        status="incumbent",
        wall_time_s=1.5,
        parts={"context": 0.1, "baseline.fgd": 0.9, "check": 0.3, "reasons": 0.2},
    )
    assert status_line(s, 1).endswith(
        "1.50 s, over the 1 s limit (the largest part: baseline.fgd, 0.90 s)"
    )
    # within the limit, nothing is added
    assert status_line(s, 2).endswith("the fgd plan is returned; 1.50 s")


def test_the_empty_plan_returned_is_not_called_the_empty_plan_plan() -> None:
    s = PlanSummary(
        placer="cpsat (incumbent: empty plan)",
        status="incumbent",
        wall_time_s=0.5,
        parts={"context": 0.1, "baseline.fgd": 0.2},
    )
    line = status_line(s, 1)
    assert "the empty plan is returned" in line and "plan plan" not in line
