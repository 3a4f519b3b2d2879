"""Philly's machine list as a cluster, and short windows of the real Philly trace.

Expected numbers come from ``../shared/data/philly/SOURCE.md`` ("552 machines — 321 x
(2 GPUs, 12GB), 231 x (8 GPUs, 24GB) -> 2490 GPUs") and from rows counted here with the csv
module, never from the code under test. Racks of 16 machines of one kind: ceil(321/16) = 21
and ceil(231/16) = 15 racks; 8 racks per spine: ceil(21/8) + ceil(15/8) = 3 + 2 = 5 spines.
"""

from __future__ import annotations

import csv
import os
import textwrap
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from gangplan.adapters.files import InputError
from gangplan.adapters.sim.cluster import load_cluster, philly_cluster, read_philly_machines
from gangplan.adapters.sim.engine import SimConfig, simulate
from gangplan.adapters.sim.jobs import load_input
from gangplan.models import load_instance

ROOT = Path(__file__).resolve().parents[3]
# $GANGPLAN_SHARED_DATA, else the first shared/data beside the repository or above it
DATA = Path(
    os.environ.get("GANGPLAN_SHARED_DATA")
    or next(
        (p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()),
        ROOT.parent / "shared" / "data",
    )
)
PHILLY_JOBS = DATA / "pollux-philly-jobs" / "philly.csv"
PHILLY_MACHINES = DATA / "philly" / "cluster_machine_list"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(
            f"{path} is absent (real traces are read in place from ../shared/data, "
            "beside the repository)"
        )
    return path


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_philly_machines_real() -> None:
    spec = load_cluster(need(PHILLY_MACHINES))
    s = spec.snapshot
    assert len(s.nodes) == 552 and spec.gpus == 2490
    kinds = Counter((n.allocatable[s.gpu] // 1000, n.gpu_model) for n in s.nodes)
    assert kinds == {(2, "12GB"): 321, (8, "24GB"): 231}
    leaves = {(n.domains["spine"], n.domains["leaf"]) for n in s.nodes}
    assert len(leaves) == 21 + 15
    assert len({n.domains["spine"] for n in s.nodes}) == 5
    assert all(not s.layout_of(n).nic_ids for n in s.nodes)


def test_small_machine_list(tmp_path: Path) -> None:
    # 3 machines of one kind then 2 of another, racks of 2: kind A -> r0 (m0, m1), r1 (m2);
    # kind B starts a new rack: r2 (m3, m4); one spine per kind (racks_per_spine 8)
    path = write(
        tmp_path,
        "machines",
        """
        machineId, number of GPUs, single GPU mem
        m0,2, 12GB
        m1,2, 12GB
        m2,2, 12GB
        m3,8, 24GB
        m4,8, 24GB
    """,
    )
    snap, warnings = load_instance(philly_cluster(read_philly_machines(path), rack_size=2))
    assert warnings == []
    assert [(n.name, n.domains["spine"], n.domains["leaf"]) for n in snap.nodes] == [
        ("m0", "s0", "r0"),
        ("m1", "s0", "r0"),
        ("m2", "s0", "r1"),
        ("m3", "s1", "r2"),
        ("m4", "s1", "r2"),
    ]
    assert [n.allocatable["cpu"] for n in snap.nodes] == [16_000] * 3 + [64_000] * 2


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("m0,x, 12GB", "row 1 (line 2), column 'number of GPUs': 'x' is not a whole number"),
        ("m0,2, big", "row 1 (line 2), column 'single GPU mem': 'big' is not a size like 12GB"),
        ("m0,2", "row 1 (line 2): has 2 fields; the header has 3"),
    ],
)
def test_bad_machine_row(tmp_path: Path, row: str, message: str) -> None:
    path = write(tmp_path, "machines", f"machineId, number of GPUs, single GPU mem\n{row}\n")
    with pytest.raises(InputError) as err:
        read_philly_machines(path)
    assert list(err.value.lines()) == [f"{path}: {message}"]


def _rows_in(start: float, end: float) -> int:
    """Philly rows arriving in [start, end) s after the earliest timestamp (counted here)."""
    with need(PHILLY_JOBS).open(encoding="utf-8") as fh:
        rows = csv.DictReader(fh)
        stamps = [datetime.strptime(r["timestamp"], "%Y-%m-%d %H:%M:%S") for r in rows]
    zero = min(stamps)
    return sum(1 for t in stamps if start <= (t - zero).total_seconds() < end)


def test_philly_window_on_philly_machines() -> None:
    """Two hours of day 49 on the 552 machines: every job arrives, runs and finishes, every
    plan passes the verifier, and no pod is bigger than the machines (8 GPUs)."""
    window = (49 * 86400.0, 49 * 86400.0 + 7200)
    inp = load_input(need(PHILLY_JOBS), load_cluster(need(PHILLY_MACHINES)), window=window)
    assert len(inp.jobs) == _rows_in(*window)
    result = simulate(inp, SimConfig(placer="greedy", verify=True))
    assert {j.status for j in result.jobs} == {"finished"}
    assert all(j.start is not None and j.start >= j.arrival for j in result.jobs)
    assert all(j.end == j.start + j.duration for j in result.jobs)  # no slowdown asked
