"""``gangplan replan`` through click's CliRunner: the frontier printed, the move plan written
and read back, bad input refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from gangplan.adapters.cli import main
from gangplan.models import MovePlan, load_instance
from gangplan.solver.judges.verify_moves import verify_moves

GPU = "nvidia.com/gpu"


def _racks() -> dict[str, Any]:
    """2 racks of 2 nodes of 8 GPUs; a (8 GPUs) runs on r1n1, b (8 GPUs) on r2n1; pending
    big: 2 pods of 8 GPUs in one rack. Without a move each rack has one free node (big
    waits); moving a (or b) to the other rack frees a rack: one move admits big."""

    def run(name: str, node: str) -> dict[str, Any]:
        return {"name": name, "gang": name, "queue": "q", "node": node, "requests": {GPU: 8}}

    return {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "levels": [{"name": "leaf", "node_label": "rack"}],
        "nodes": [
            {"name": f"{r}n{i}", "labels": {"rack": r}, "allocatable": {GPU: 8}}
            for r in ("r1", "r2")
            for i in (1, 2)
        ],
        "queues": [{"name": "q"}],
        "running": [run("a", "r1n1"), run("b", "r2n1")],
        "gangs": [
            {
                "name": "big",
                "queue": "q",
                "topology": {"required": "leaf"},
                "roles": [{"name": "w", "count": 2, "requests": {GPU: 8}}],
            }
        ],
    }


def test_replan_prints_the_frontier_and_writes_the_move_plan(tmp_path: Path) -> None:
    inst = tmp_path / "racks.yaml"
    inst.write_text(yaml.safe_dump(_racks()))
    out = tmp_path / "moves.yaml"
    res = CliRunner().invoke(
        main, ["replan", str(inst), "--max-moved-gangs", "1", "--deterministic", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    rows = [line.split() for line in res.output.splitlines() if line[:6].strip().isdigit()]
    # budget 0: nothing moves, nothing admitted, the largest leaf gang is 8 GPUs (one free
    # node per rack); budget 1: one move of 8 GPUs frees a rack (16 GPUs), big admitted
    assert [r[:6] for r in rows] == [
        ["0", "0", "0", "0", "8", "0"],
        ["1", "1", "8", "1", "16", "0"],
    ]
    plan = MovePlan.model_validate(yaml.safe_load(out.read_text()))
    assert plan.moved_gangs == 1 and len(plan.waves) == 1
    s = load_instance(_racks())[0]
    assert verify_moves(s, plan) == []
    assert {p.gang for p in plan.final.pods} == {"big"}


def test_replan_refuses_a_missing_file(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["replan", str(tmp_path / "nope.yaml")])
    assert res.exit_code != 0
    assert "nope.yaml" in res.output
    assert "Traceback" not in res.output


def test_the_frontier_speaks_in_a_persons_units_within_80_columns(tmp_path: Path) -> None:
    data = _racks()
    data["levels"] = [{"name": "rack", "node_label": "rack"}]
    data["gangs"][0]["topology"] = {"required": "rack"}
    inst = tmp_path / "racks.yaml"
    inst.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(
        main, ["replan", str(inst), "--max-moved-gangs", "1", "--deterministic"]
    )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "fits in one rack;" in " ".join(lines)  # the lowest level's name, not "leaf"
    # q's dominant share: 16 of 32 GPUs run, big's 16 more are its demand, its fair target
    # is all 32: 50 percentage points short at weight 1 before the move, none after
    (row,) = [line for line in lines if line.startswith("     1 ")]
    assert row.endswith("  p0 fair-share gap 50 -> 0")
    assert "move plan: 1 gang (1 pod) in 1 wave" in lines
    assert "final plan: 1 gang admitted; score: p0 fair-share gap 50 -> 0" in lines


def test_replan_says_why_no_gang_may_move(tmp_path: Path) -> None:
    # a tolerates no disruption; b runs two pods on r2n1, over a wave's 1 pod per node
    data = _racks()
    data["running"][0]["preemptible"] = False
    data["running"][1]["requests"] = {GPU: 4}
    data["running"].append({**data["running"][1], "name": "b-1"})
    inst = tmp_path / "racks.yaml"
    inst.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(
        main, ["replan", str(inst), "--max-moving-per-node", "1", "--deterministic"]
    )
    assert res.exit_code == 0, res.output
    rows = [line for line in res.output.splitlines() if line[:6].strip().isdigit()]
    assert len(rows) == 1 and rows[0].split()[0] == "0"  # budget 0 only
    text = " ".join(line.strip() for line in res.output.splitlines())  # wrapped at 80
    assert (
        "no running gang may move: 1 not preemptible, 1 over the per-node budget (default/b)"
        in text
    )
