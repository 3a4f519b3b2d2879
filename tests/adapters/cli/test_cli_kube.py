"""``gangplan convert k8s`` through click's CliRunner: the instance on stdout or ``-o``, the
summary of what was not read on stderr, and user mistakes as ``error:`` lines, exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from gangplan.adapters.cli import main

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "k8s" / "small-cluster.yaml"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_convert_writes_an_instance_and_the_summary(tmp_path: Path) -> None:
    out = tmp_path / "cluster.yaml"
    result = run("convert", "k8s", str(FIXTURE), "--device-layout", "hgx8", "-o", str(out))
    assert result.exit_code == 0, result.output
    err = result.stderr
    assert "not read: 2" in err
    assert "Pod: its gang object is not in the dump" in err
    assert "Pod: pod finished (Succeeded or Failed): holds no resources" in err
    # 5 nodes, 32 GPUs, 2 levels, 3 queues, 3 gangs of 3 + 3 + 1 pods, 1 running pod
    assert (
        f"wrote {out}: 5 nodes, 32 GPUs, 2 levels, 3 queues, "
        "3 pending gangs (7 pods), 1 running pod" in " ".join(err.split())
    )
    data = yaml.safe_load(out.read_text())
    assert (data["apiVersion"], data["kind"]) == ("gangplan.io/v1alpha1", "Instance")
    check = run("validate", str(out))
    assert check.exit_code == 0, check.output


def test_convert_to_stdout_as_json(tmp_path: Path) -> None:
    result = run("convert", "k8s", str(FIXTURE))
    assert result.exit_code == 0
    assert yaml.safe_load(result.stdout)["kind"] == "Instance"
    out = tmp_path / "c.json"
    assert run("convert", "k8s", str(FIXTURE), "-o", str(out)).exit_code == 0
    assert out.read_text().lstrip().startswith("{")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # a dump that is not there
        (["nope.yaml"], "error: nope.yaml: no such file or folder"),
        # a preset that does not exist (and is not a key list either)
        (["--topology-labels", "node=x", str(FIXTURE)], "'node' is the implicit lowest level"),
        # a device layout that is neither a template nor a file
        (
            ["--device-layout", "dgx9", str(FIXTURE)],
            "error: --device-layout 'dgx9': not a template",
        ),
    ],
)
def test_user_errors(args: list[str], message: str) -> None:
    result = run("convert", "k8s", *args)
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_strict_fails_on_invalid_documents(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{image: x}]}\n"
        # a node read, so that the dump is not "nothing read" (an error of its own)
        "---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
    )
    assert run("convert", "k8s", str(bad)).exit_code == 0  # listed, not fatal
    result = run("convert", "k8s", "--strict", str(bad))
    assert result.exit_code == 1
    assert (
        f"error: {bad}#0: Pod p: invalid object: spec.containers[0].name: Field required"
        in result.stderr
    )
    assert "1 problem found" in result.stderr
