"""gangplan solve / verify with preemption: the switch, the plan's evictions, and the bindings
stream with Evictions first (instances/cases/11-preempt-idle-node.yaml, worked out in its
header: l-0 goes, h takes n1 and n2)."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from gangplan.adapters.cli import main
from gangplan.adapters.files import load_plan

CASE = Path(__file__).resolve().parents[3] / "instances" / "cases" / "11-preempt-idle-node.yaml"
FAST = ["--deterministic", "--time-limit", "5"]


def _without_preemption(tmp_path: Path) -> Path:
    """Case 11 with preemption off in the file (the queue's policy kept)."""
    data = yaml.safe_load(CASE.read_text(encoding="utf-8"))
    data["preemption"] = {"enabled": False}
    path = tmp_path / "case11-off.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_the_flag_turns_preemption_on(tmp_path: Path) -> None:
    path = _without_preemption(tmp_path)
    off, on = tmp_path / "off.yaml", tmp_path / "on.yaml"
    r = CliRunner().invoke(main, ["solve", str(path), *FAST, "-o", str(off)])
    assert r.exit_code == 0, r.output
    assert load_plan(off).evictions == () and load_plan(off).placed("h") == 0
    r = CliRunner().invoke(main, ["solve", str(path), *FAST, "--preemption", "-o", str(on)])
    assert r.exit_code == 0, r.output
    plan = load_plan(on)
    assert [e.pod for e in plan.evictions] == ["l-0"] and plan.placed("h") == 2
    assert "evictions" in r.output
    # the plan verifies with preemption on, and not without it
    ok = CliRunner().invoke(main, ["verify", str(path), str(on), "--preemption"])
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(main, ["verify", str(path), str(on)])
    assert bad.exit_code != 0 and "preemption is off" in bad.output


def test_bindings_put_evictions_first_then_nominations_then_bindings() -> None:
    r = CliRunner().invoke(main, ["solve", str(CASE), *FAST, "--format", "bindings"])
    assert r.exit_code == 0, r.output
    docs = list(yaml.safe_load_all(r.output))
    assert docs[0] == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "l-0", "namespace": "default"},
    }
    nominations = [d for d in docs if "status" in d]
    assert sorted(d["metadata"]["name"] for d in nominations) == ["h-worker-0", "h-worker-1"]
    assert sorted(d["status"]["nominatedNodeName"] for d in nominations) == ["n1", "n2"]
    bindings = [i for i, d in enumerate(docs) if d["kind"] == "Binding"]
    assert len(bindings) == 2
    assert max(i for i, d in enumerate(docs) if "status" in d) < min(bindings)
    # each pod's nomination names the node its Binding targets
    target = {d["metadata"]["name"]: d["target"]["name"] for d in docs if d["kind"] == "Binding"}
    assert {d["metadata"]["name"]: d["status"]["nominatedNodeName"] for d in nominations} == target
