"""An API server that cannot be reached: ``serve --once`` and ``apply`` end with one error
line and exit 1 (they never read the cluster, so nothing they would print is true); the
long-running loop keeps retrying with a readable note per cycle, and ``/readyz`` stays 503."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from objects import node

from gangplan.adapters.cli import main
from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.loop import ServeLoop
from gangplan.adapters.serve.memory import Fault, InMemoryApi
from gangplan.adapters.serve.run import start_http
from gangplan.solver.result import SolverConfig


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def dead(tmp_path: Path) -> tuple[Path, str]:
    url = f"https://127.0.0.1:{_closed_port()}"
    kc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": url, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kc))
    return path, url


def _plan(tmp_path: Path) -> Path:
    inst = {
        "kind": "Instance",
        "nodes": [{"name": "n0", "allocatable": {"nvidia.com/gpu": 8}}],
        "queues": [{"name": "q"}],
        "gangs": [
            {
                "name": "g",
                "queue": "q",
                "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 8}}],
            }
        ],
    }
    (tmp_path / "i.yaml").write_text(yaml.safe_dump(inst))
    out = tmp_path / "plan.yaml"
    res = CliRunner().invoke(
        main, ["solve", str(tmp_path / "i.yaml"), "--deterministic", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize("verbose", [[], ["-v"]])
def test_serve_once_says_the_server_cannot_be_reached(
    dead: tuple[Path, str], verbose: list[str]
) -> None:
    kc, url = dead
    res = CliRunner().invoke(
        main, ["serve", "--once", "--dry-run", "--kubeconfig", str(kc), *verbose]
    )
    assert res.exit_code == 1, res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: cannot reach the API server {url} (" + errors[0].split("(", 1)[1]]
    assert "Connection refused" in errors[0]
    assert "Retrying" not in res.stderr  # urllib3's retry warnings are silenced
    assert "pending gangs" not in res.stderr  # no cycle line: nothing was read
    assert res.stdout == ""


def test_apply_says_the_server_cannot_be_reached(dead: tuple[Path, str], tmp_path: Path) -> None:
    kc, url = dead
    plan = _plan(tmp_path)
    res = CliRunner().invoke(main, ["apply", str(plan), "--dry-run", "--kubeconfig", str(kc)])
    assert res.exit_code == 1, res.output
    assert f"error: cannot reach the API server {url} (" in res.stderr
    assert "not pending" not in res.stderr and "gangs applied" not in res.stderr


def test_the_long_run_keeps_retrying_and_is_not_ready(clock: FakeClock) -> None:
    api = InMemoryApi(clock)
    api.put(node("n0", gpus=8))
    api.faults.add(Fault("list", status=0, times=10_000, message="Connection refused"))
    lines: list[str] = []
    loop = ServeLoop(
        api,
        ServeConfig(),
        clock=clock,
        solver=SolverConfig(deterministic=True, deterministic_time=1.0),
        emit=lines.append,
    )
    server = start_http(loop, 0, host="127.0.0.1")
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for _ in range(3):
            report = loop.cycle()  # never raises
            assert report.status == "syncing"
            assert len(report.notes) == 1  # one readable line, not one per kind
            assert report.notes[0].startswith(
                "cannot reach the API server: Connection refused; pods and "
            )
            assert report.notes[0].endswith("kinds not listed; retrying")
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(f"{base}/readyz")
            assert err.value.code == 503
        api.faults.clear()
        report = loop.cycle()
        assert report.status != "syncing" and report.notes == []
        assert urllib.request.urlopen(f"{base}/readyz").read() == b"ok"
    finally:
        server.shutdown()
    assert len(lines) == 4


def test_apply_of_a_move_plan_says_the_server_cannot_be_reached(
    dead: tuple[Path, str], tmp_path: Path
) -> None:
    # the same check as the Plan path's, before any wave: no "wave 0: ... not running"
    kc, url = dead
    to = {"pod": "r2", "gang": "r", "role": "r0", "node": "n1", "gpus": ["gpu-0"]}
    moves = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "MovePlan",
        "final": {},
        "waves": [
            {
                "index": 0,
                "moves": [{"gang": "default/r", "pods": [{"pod": "r2", "node": "n0", "to": to}]}],
            }
        ],
    }
    path = tmp_path / "mm.yaml"
    path.write_text(yaml.safe_dump(moves))
    res = CliRunner().invoke(main, ["apply", str(path), "--dry-run", "--kubeconfig", str(kc)])
    assert res.exit_code == 1, res.output
    assert f"error: cannot reach the API server {url} (" in res.stderr
    assert "wave 0" not in res.stderr


def test_a_move_plan_without_its_final_plan_is_refused_naming_the_file(tmp_path: Path) -> None:
    # no cluster is needed to see it: refused before any connection
    path = tmp_path / "mm.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "gangplan.io/v1alpha1", "kind": "MovePlan"}))
    res = CliRunner().invoke(main, ["apply", str(path), "--dry-run"])
    assert res.exit_code == 1, res.output
    assert res.stderr.startswith(f"error: {path}: final: missing")


def test_a_move_plan_whose_waves_are_no_list_says_a_list(tmp_path: Path) -> None:
    path = tmp_path / "mm.yaml"
    bad = {"apiVersion": "gangplan.io/v1alpha1", "kind": "MovePlan", "final": {}, "waves": 3}
    path.write_text(yaml.safe_dump(bad))
    res = CliRunner().invoke(main, ["apply", str(path), "--dry-run"])
    assert res.exit_code == 1, res.output
    assert res.stderr == f"error: {path}: waves: Input should be a list\n1 problem found\n"
