"""gangplan solve through the CLI: output, formats, and user mistakes refused before any work."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gangplan.adapters.cli import main
from gangplan.adapters.files import load_plan, load_snapshot
from gangplan.solver.judges.verify import verify


def test_solve_writes_a_plan_that_verifies(tmp_path: Path) -> None:
    out = tmp_path / "plan.yaml"
    r = CliRunner().invoke(main, ["solve", "--time-limit", "2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    snapshot, _ = load_snapshot(None)
    assert verify(snapshot, load_plan(out)) == []
    assert "plan written to" in r.output


def test_ctrl_c_during_the_search_still_writes_a_verified_plan(
    tmp_path: Path, sigint_during_search: Callable[..., None], sigint_seen: list[int]
) -> None:
    out = tmp_path / "plan.yaml"
    sigint_during_search()
    r = CliRunner().invoke(main, ["solve", "--time-limit", "600", "-o", str(out)])
    assert r.exit_code == 0, r.output
    snapshot, _ = load_snapshot(None)
    plan = load_plan(out)
    assert verify(snapshot, plan) == []
    assert plan.summary is not None
    assert any(n.startswith("interrupted (Ctrl-C)") for n in plan.summary.notes)
    assert "note: interrupted (Ctrl-C)" in r.output
    assert sigint_seen == []


def test_solve_json_has_one_outcome_per_gang() -> None:
    r = CliRunner().invoke(main, ["solve", "--time-limit", "1", "--format", "json"])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.output)
    snapshot, _ = load_snapshot(None)
    assert plan["kind"] == "Plan"
    assert sorted(g["gang"] for g in plan["gangs"]) == sorted(g.name for g in snapshot.gangs)


def test_bindings_are_core_v1_objects() -> None:
    r = CliRunner().invoke(main, ["solve", "--time-limit", "1", "--format", "bindings"])
    assert r.exit_code == 0, r.output
    docs = list(yaml.safe_load_all(r.output))
    kinds = {d["kind"] for d in docs}
    assert kinds <= {"Binding", "Pod"} and "Binding" in kinds


def test_output_into_a_missing_folder_is_refused_before_solving(tmp_path: Path) -> None:
    out = tmp_path / "nope" / "plan.yaml"
    r = CliRunner().invoke(main, ["solve", "-o", str(out)])
    assert r.exit_code == 2
    assert "does not exist" in r.output
    assert not out.parent.exists()


def test_non_finite_time_limits_and_out_of_range_seeds_are_refused() -> None:
    for args in (
        ["--time-limit", "nan"],
        ["--time-limit", "inf"],
        ["--seed", "2147483648"],
        ["--workers", "0"],
    ):
        r = CliRunner().invoke(main, ["solve", *args])
        assert r.exit_code == 2, args
        assert "Traceback" not in r.output


def test_deeply_nested_json_is_a_message(tmp_path: Path) -> None:
    bad = tmp_path / "deep.json"
    bad.write_text("[" * 100_000 + "]" * 100_000)
    r = CliRunner().invoke(main, ["validate", str(bad)])
    assert r.exit_code == 1
    assert "nested too deeply" in r.output


def test_a_plan_file_must_be_a_plan(tmp_path: Path) -> None:
    # an instance given where a plan is expected: one line saying so, not pydantic's list
    inst = tmp_path / "inst.yaml"
    inst.write_text("apiVersion: gangplan.io/v1alpha1\nkind: Instance\n")
    r = CliRunner().invoke(main, ["solve", "--previous", str(inst)])
    assert r.exit_code == 1
    assert "kind: is 'Instance'; accepted: 'Plan'" in r.output


def test_a_binary_file_inside_a_dump_folder_is_listed_not_fatal(tmp_path: Path) -> None:
    # docs/kubernetes.md: the content of a dump never makes the command fail
    from gangplan.adapters.kube.read import KubeOptions, read_kube

    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00junk")
    (tmp_path / "node.yaml").write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '4', memory: 8Gi}}\n"
    )
    read = read_kube([tmp_path], KubeOptions())
    assert [n.name for n in read.snapshot.nodes] == ["n1"]


def test_reasons_are_structured_in_json_and_yaml(tmp_path: Path) -> None:
    # one gang whose role asks 16 GPUs a pod on nodes of 8: never fits, by that resource
    inst = tmp_path / "i.yaml"
    inst.write_text(
        "apiVersion: gangplan.io/v1alpha1\nkind: Instance\n"
        "nodes: [{name: n1, allocatable: {nvidia.com/gpu: 8}}]\nqueues: [{name: q}]\n"
        "gangs: [{name: g, queue: q, roles: [{name: w, count: 1, "
        "requests: {nvidia.com/gpu: 16}}]}]\n"
    )
    expected = {
        "kind": "never_fits",
        "message": "role 'w': no node has more than 8 GPUs (each pod asks 16)",
        "family": "resource",
        "role": "w",
        "resource": "nvidia.com/gpu",
        "needed": 16000,
        "available": 8000,
    }
    for fmt, parse in (("json", json.loads), ("yaml", yaml.safe_load)):
        r = CliRunner().invoke(main, ["solve", str(inst), "--placer", "greedy", "--format", fmt])
        assert r.exit_code == 0, r.output
        (gang,) = parse(r.stdout)["gangs"]
        assert gang["reason"] == expected


def test_solve_refuses_a_baseline_plan_the_verifier_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a baseline whose plan evicts for nothing (as greedy did on min-victim.yaml): r0 runs
    # on n1, an H100 node g3 (A100 only) may not use
    import gangplan.solver.cycle as cycle
    from gangplan.models import Eviction

    real = cycle.run_baseline

    def broken(*args: Any, **kw: Any) -> Any:
        result = real(*args, **kw)
        bogus = Eviction(
            pod="r0",
            namespace="default",
            gang="rg0",
            node="n1",
            for_gang="default/g3",
            kind="priority",
            reason="for nothing",
        )
        plan = result.plan.model_copy(update={"evictions": (*result.plan.evictions, bogus)})
        return dataclasses.replace(result, plan=plan)

    monkeypatch.setattr(cycle, "run_baseline", broken)
    instance = Path(__file__).parents[2] / "fixtures" / "preemption" / "min-victim.yaml"
    out = tmp_path / "p.yaml"
    r = CliRunner().invoke(main, ["solve", str(instance), "--placer", "greedy", "-o", str(out)])
    assert r.exit_code == 1
    assert "placer greedy: its plan fails the verifier, so it is not written" in r.output
    assert "[victim_priority]" in r.output
    assert not out.exists()
