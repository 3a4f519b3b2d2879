"""``gangplan verify INSTANCE MOVES.yaml`` through click's CliRunner: a move plan from
``gangplan replan -o`` passes; a forged one fails naming the wave, the move and the rule;
the per-node cap is the command line's, never the plan file's (issue 26, finding 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from gangplan.adapters.cli import main

GPU = "nvidia.com/gpu"


def _instance(**r1n2: Any) -> dict[str, Any]:
    """2 racks of 2 nodes of 8 GPUs (model h100); a (one pod of 8 GPUs) runs on r1n1, b on
    r2n1; ``r1n2`` takes the given node fields (cordoned, NotReady, ...)."""

    def node(name: str, rack: str) -> dict[str, Any]:
        out = {"name": name, "labels": {"rack": rack}, "allocatable": {GPU: 8}, "gpu_model": "h100"}
        return {**out, **(r1n2 if name == "r1n2" else {})}

    def run(name: str, node: str) -> dict[str, Any]:
        return {
            "name": f"{name}-0",
            "gang": name,
            "queue": "q",
            "node": node,
            "requests": {GPU: 8},
            "owner": {"api_version": "apps/v1", "kind": "StatefulSet", "name": name, "index": "0"},
        }

    return {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "levels": [{"name": "leaf", "node_label": "rack"}],
        "nodes": [node(f"{r}n{i}", r) for r in ("r1", "r2") for i in (1, 2)],
        "queues": [{"name": "q"}],
        "running": [run("a", "r1n1"), run("b", "r2n1")],
    }


def _moves(to: str = "r1n2", gpus: int = 8, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    """One wave moving a-0 from r1n1 to ``to`` with ``gpus`` device ids there."""
    target = {
        "pod": "a-0",
        "gang": "a",
        "namespace": "default",
        "role": "a",
        "node": to,
        "gpus": [f"gpu-{i}" for i in range(gpus)],
    }
    pod = {"pod": "a-0", "namespace": "default", "node": "r1n1", "to": target}
    out: dict[str, Any] = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "MovePlan",
        "waves": [{"index": 0, "moves": [{"gang": "default/a", "pods": [pod]}]}],
        "final": {},
    }
    if limits is not None:
        out["limits"] = limits
    return out


def _verify(tmp_path: Path, inst: dict[str, Any], moves: dict[str, Any], *args: str) -> Any:
    i, m = tmp_path / "inst.yaml", tmp_path / "moves.yaml"
    i.write_text(yaml.safe_dump(inst))
    m.write_text(yaml.safe_dump(moves))
    return CliRunner().invoke(main, ["verify", str(i), str(m), *args])


def test_a_valid_move_plan_passes(tmp_path: Path) -> None:
    # before: every MovePlan was refused ("kind: is 'MovePlan'; accepted: 'Plan'")
    res = _verify(tmp_path, _instance(), _moves())
    assert res.exit_code == 0, res.output
    assert "move plan: 1 wave, 1 gang (1 pod) moved" in res.stdout
    assert res.stdout.rstrip().endswith("move plan is valid for " + str(tmp_path / "inst.yaml"))


def test_a_plan_from_replan_passes_verify(tmp_path: Path) -> None:
    # the round trip: replan -o writes it, verify reads it back and finds it valid
    inst = _instance()
    inst["gangs"] = [
        {
            "name": "big",
            "queue": "q",
            "topology": {"required": "leaf"},
            "roles": [{"name": "w", "count": 2, "requests": {GPU: 8}}],
        }
    ]
    i, m = tmp_path / "inst.yaml", tmp_path / "moves.yaml"
    i.write_text(yaml.safe_dump(inst))
    res = CliRunner().invoke(main, ["replan", str(i), "--deterministic", "-o", str(m)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["verify", str(i), str(m)])
    assert res.exit_code == 0, res.output
    assert "1 gang (1 pod) moved, final plan of 1 gang" in res.stdout


def test_forged_targets_fail_naming_the_wave_the_move_and_the_rule(tmp_path: Path) -> None:
    # each target node is wrong in one way; the rule that says so, worked out by hand
    cases = [
        ({"unschedulable": True}, 8, "readiness", "unschedulable"),
        ({"ready": False}, 8, "readiness", "not ready"),
        (
            {"taints": [{"key": "maint", "value": "x", "effect": "NoExecute"}]},
            8,
            "readiness",
            "maint",
        ),
        ({"gpu_model": "a100"}, 8, "gpu_model", "a100"),
        ({}, 0, "devices", ""),  # 8 GPUs asked, no device ids given
    ]
    for fields, gpus, rule, word in cases:
        res = _verify(tmp_path, _instance(**fields), _moves(gpus=gpus))
        assert res.exit_code == 1, (fields, res.output)
        lines = [x for x in res.stdout.splitlines() if x.startswith("violation: ")]
        mine = [x for x in lines if x.startswith(f"violation: [{rule}] wave 0: move of default/a")]
        assert mine and word in mine[0].lower(), (fields, lines)
        assert res.stderr == "1 violation\n"


def test_the_per_node_cap_is_the_command_lines_not_the_plans(tmp_path: Path) -> None:
    # b's gang: 3 pods of 2 GPUs on r2n1, all moved to r2n2 in one wave. At the default cap
    # (2 per node) that is one pod too many, whatever the plan file says its limits were.
    inst = _instance()
    inst["running"] = [
        {
            "name": f"b-{k}",
            "gang": "b",
            "queue": "q",
            "node": "r2n1",
            "requests": {GPU: 2},
            "owner": {
                "api_version": "apps/v1",
                "kind": "StatefulSet",
                "name": "b",
                "index": str(k),
            },
        }
        for k in range(3)
    ]

    def pod(k: int) -> dict[str, Any]:
        gpus = [f"gpu-{2 * k}", f"gpu-{2 * k + 1}"]
        to = {"pod": f"b-{k}", "gang": "b", "role": "b", "node": "r2n2", "gpus": gpus}
        return {"pod": f"b-{k}", "node": "r2n1", "to": to}

    moves = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "MovePlan",
        "waves": [
            {"index": 0, "moves": [{"gang": "default/b", "pods": [pod(k) for k in range(3)]}]}
        ],
        "final": {},
        "limits": {"max_moving_per_node": 10},  # the forger's own cap: not read
    }
    res = _verify(tmp_path, inst, moves, "--format", "json")
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    assert data["valid"] is False
    assert {"rule": "budgets", "wave": 0, "message": "3 pods move off node 'r2n1' (at most 2)"} in (
        data["violations"]
    )
    res = _verify(tmp_path, inst, moves, "--max-moving-per-node", "3")
    assert res.exit_code == 0, res.output


def test_a_bare_pod_and_an_undisruptable_gang_may_not_move(tmp_path: Path) -> None:
    inst = _instance()
    inst["running"][0]["owner"] = "none"
    res = _verify(tmp_path, inst, _moves())
    assert res.exit_code == 1
    assert "violation: [recreated] wave 0: move of default/a: pod default/a-0 is a bare pod" in (
        res.stdout
    )
    inst = _instance()
    inst["running"][0]["preemptible"] = False
    res = _verify(tmp_path, inst, _moves())
    assert res.exit_code == 1
    assert "violation: [preemptible] wave 0: move of default/a: the gang does not tolerate" in (
        res.stdout
    )


def test_a_move_plan_file_with_a_bad_field_is_named(tmp_path: Path) -> None:
    moves = _moves()
    moves["waves"] = 3
    res = _verify(tmp_path, _instance(), moves)
    assert res.exit_code == 1
    assert f"error: {tmp_path / 'moves.yaml'}: waves: Input should be a list" in res.stderr
    assert "Traceback" not in res.output
