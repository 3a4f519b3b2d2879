"""``gangplan simulate`` from the command line: outputs, and bad input that ends with a clear
error naming the file, row and field (exit 1; bad option values exit 2), no traceback."""

from __future__ import annotations

import csv
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from gangplan.adapters.cli import main
from gangplan.adapters.sim.report import METRICS


def run(*args: object) -> Result:
    return CliRunner().invoke(main, ["simulate", *(str(a) for a in args)])


def error_lines(result: Result, code: int = 1) -> list[str]:
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    return [line for line in result.output.splitlines() if line.startswith(("error: ", "Error: "))]


def test_writes_report_and_results(hand_trace: Path, three_nodes: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run(
        hand_trace,
        "--cluster",
        three_nodes,
        "--gpus-per-node",
        4,
        "--out",
        out,
        "--verify",
        "--no-plots",
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "results.csv").open(encoding="utf-8")))
    assert len(rows) == 1
    assert [m.key for m in METRICS] == list(rows[0])[-len(METRICS) :]
    # the hand-worked run (test_sim_metrics.py): mean JCT 412 s, longest wait 500 s
    assert float(rows[0]["jct_mean_s"]) == 412 and float(rows[0]["longest_wait_s"]) == 500
    assert rows[0]["run"] == "greedy/base/s0" and rows[0]["slowdown"] == "off"
    report = (out / "report.md").read_text(encoding="utf-8")
    for m in METRICS:
        assert f"| {m.label} |" in report
    groups = list(csv.DictReader((out / "groups.csv").open(encoding="utf-8")))
    sizes = {g["group"]: g for g in groups if g["by"] == "size"}
    assert float(sizes["2-8"]["wait_mean"]) == 200 and sizes["9-32"]["jobs"] == "0"


def test_plots_are_written(hand_trace: Path, three_nodes: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run(
        hand_trace,
        "--cluster",
        three_nodes,
        "--gpus-per-node",
        4,
        "--out",
        out,
        "--placer",
        "greedy",
        "--placer",
        "fgd",
        "--workers",
        1,
    )
    assert result.exit_code == 0, result.output
    for name in ("jct_cdf", "utilisation", "queue_shares", "wait_by_size"):
        png = out / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![{name}]({name}.png)" in (out / "report.md").read_text(encoding="utf-8")


def test_missing_trace(three_nodes: Path, tmp_path: Path) -> None:
    lines = error_lines(run(tmp_path / "nope.csv", "--cluster", three_nodes, "--out", tmp_path))
    assert lines == [f"error: {tmp_path / 'nope.csv'}: no such file"]


def test_missing_cluster(hand_trace: Path, tmp_path: Path) -> None:
    lines = error_lines(run(hand_trace, "--cluster", tmp_path / "none.yaml", "--out", tmp_path))
    assert lines == [f"error: {tmp_path / 'none.yaml'}: no such file"]


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ("5d:1d", "END must be after START"),  # end before start
        ("abc", "is not START:END"),  # no colon
        ("1x:2d", "is not a time"),  # a unit that does not exist
    ],
)
def test_bad_window(
    hand_trace: Path, three_nodes: Path, tmp_path: Path, window: str, message: str
) -> None:
    result = run(hand_trace, "--cluster", three_nodes, "--window", window, "--out", tmp_path)
    error_lines(result, code=2)
    assert "--window" in result.output and message in result.output


def test_cluster_without_gpus(hand_trace: Path, three_nodes: Path, tmp_path: Path) -> None:
    data = yaml.safe_load(three_nodes.read_text(encoding="utf-8"))
    for node in data["nodes"]:
        del node["allocatable"]["nvidia.com/gpu"]
    path = tmp_path / "cpu-only.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    lines = error_lines(run(hand_trace, "--cluster", path, "--out", tmp_path))
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {path}: nodes: no node has a GPU (3 nodes;")


def test_negative_duration(trace_of, three_nodes: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trace = trace_of([(0, 60, 1, "aa"), (10, -5, 2, "aa")], name="bad.csv")
    lines = error_lines(run(trace, "--cluster", three_nodes, "--out", tmp_path))
    assert lines == [
        f"error: {trace}: row 2 (line 3), column 'duration': -5 is out of range "
        "(accepted: a finite number >= 0)"
    ]


def test_bad_slowdown(hand_trace: Path, three_nodes: Path, tmp_path: Path) -> None:
    result = run(hand_trace, "--cluster", three_nodes, "--slowdown", "rack=0.1", "--out", tmp_path)
    error_lines(result, code=2)
    assert "expected leaf=F, spine=G or source=TEXT" in result.output


def test_nothing_half_written_on_error(hand_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(hand_trace, "--cluster", tmp_path / "none.yaml", "--out", out)
    assert not out.exists() or not any(out.iterdir())


def test_itp_trace(three_nodes: Path, tmp_path: Path) -> None:
    """An ITP file (format found from its header; one queue, itp-<stem>). At 0, a (4 GPUs)
    and b (8) fill the 12 GPUs; c (4, arrived 10) waits until both end at 100, starts at
    the tick of 120 and ends at 170. Mean JCT (100 + 100 + 160) / 3 = 120; mean wait
    (0 + 0 + 110) / 3."""
    trace = tmp_path / "cluster99.csv"
    trace.write_text(
        "job_id,submission_time,duration,num_gpu\na,0,100,4\nb,0,100,8\nc,10,50,4\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = run(trace, "--cluster", three_nodes, "--gpus-per-node", 4, "--out", out, "--no-plots")
    assert result.exit_code == 0, result.output
    row = next(csv.DictReader((out / "results.csv").open(encoding="utf-8")))
    assert float(row["jct_mean_s"]) == 120
    assert float(row["wait_mean_s"]) == pytest.approx(110 / 3, rel=1e-5)
    groups = list(csv.DictReader((out / "groups.csv").open(encoding="utf-8")))
    assert {g["group"] for g in groups if g["by"] == "queue"} == {"itp-cluster99"}


def test_instance_cluster_drops_its_gangs_and_pods(
    hand_trace: Path, three_nodes: Path, tmp_path: Path
) -> None:
    """An instance file used as the cluster starts empty: its own pending gang and running
    pod are dropped (the hand-worked schedule is unchanged)."""
    data = yaml.safe_load(three_nodes.read_text(encoding="utf-8"))
    data["queues"] = [{"name": "q"}]
    data["gangs"] = [
        {
            "name": "g",
            "queue": "q",
            "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 4}}],
        }
    ]
    data["running"] = [{"name": "p", "queue": "q", "node": "n1", "requests": {"nvidia.com/gpu": 4}}]
    path = tmp_path / "busy.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    out = tmp_path / "out"
    result = run(hand_trace, "--cluster", path, "--gpus-per-node", 4, "--out", out, "--no-plots")
    assert result.exit_code == 0, result.output
    row = next(csv.DictReader((out / "results.csv").open(encoding="utf-8")))
    assert float(row["jct_mean_s"]) == 412  # as in test_sim_metrics.py


def test_an_empty_trace_draws_no_empty_legend(
    trace_of: Callable[..., Path], three_nodes: Path, tmp_path: Path
) -> None:
    # before: matplotlib's UserWarning "No artists with labels found to put in legend", 3 times
    out = tmp_path / "out"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(
            trace_of([]),
            "--cluster",
            three_nodes,
            "--gpus-per-node",
            4,
            "--out",
            out,
            "--workers",
            1,
        )
    assert result.exit_code == 0, result.output
    assert [str(w.message) for w in caught if "legend" in str(w.message)] == []
    assert (out / "jct_cdf.png").read_bytes()[:4] == b"\x89PNG"
