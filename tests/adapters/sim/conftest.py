"""Small traces and clusters for the simulator tests, written as the real files are.

The hand-worked trace (``hand_trace``) is five Philly rows on a cluster of three 4-GPU
nodes (``three_nodes``): n1 and n2 in leaf ``a``, n3 in leaf ``b``; pods of at most 4 GPUs
(``--gpus-per-node 4``). Its schedule is worked out in ``test_sim_replay.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"

# (seconds after 2017-10-01 00:00:00, duration s, GPUs, VC) -- job k is row k
HAND_JOBS = [
    (0, 600, 8, "aa"),  # J1
    (30, 300, 4, "aa"),  # J2
    (90, 100, 2, "aa"),  # J3
    (100, 200, 8, "aa"),  # J4
    (350, 50, 1, "bb"),  # J5
]


def philly_rows(jobs: list[tuple[float, float, int, str]]) -> str:
    """Philly CSV text for ``(offset s, duration s, GPUs, VC)`` rows."""
    lines = [PHILLY_HEADER]
    for off, dur, gpus, vc in jobs:
        minutes, s = divmod(int(off), 60)
        h, m = divmod(minutes, 60)
        lines.append(f"2017-10-01 {h:02d}:{m:02d}:{s:02d},{dur:g},{gpus},{dur * gpus:g},{vc}\n")
    return "".join(lines)


def three_nodes_data(gpus: int = 4) -> dict:
    def node(name: str, leaf: str) -> dict:
        return {
            "name": name,
            "labels": {"leaf": leaf},
            "allocatable": {"cpu": 32, "memory": "256Gi", "nvidia.com/gpu": gpus},
        }

    return {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "levels": [{"name": "leaf", "node_label": "leaf"}],
        "nodes": [node("n1", "a"), node("n2", "a"), node("n3", "b")],
    }


@pytest.fixture
def three_nodes(tmp_path: Path) -> Path:
    """Three nodes of 4 GPUs, 32 cores, 256 GiB: n1, n2 in leaf a; n3 in leaf b."""
    path = tmp_path / "three.yaml"
    path.write_text(yaml.safe_dump(three_nodes_data()), encoding="utf-8")
    return path


@pytest.fixture
def hand_trace(tmp_path: Path) -> Path:
    path = tmp_path / "hand.csv"
    path.write_text(philly_rows(HAND_JOBS), encoding="utf-8")
    return path


@pytest.fixture
def trace_of(tmp_path: Path) -> Callable[..., Path]:
    """Write a Philly CSV of ``(offset s, duration s, GPUs, VC)`` rows; returns its path."""

    def make(jobs: list[tuple[float, float, int, str]], name: str = "trace.csv") -> Path:
        path = tmp_path / name
        path.write_text(philly_rows(jobs), encoding="utf-8")
        return path

    return make
