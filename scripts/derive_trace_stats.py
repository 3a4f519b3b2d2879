#!/usr/bin/env python3
"""Derive the job-size histograms that ``gangplan.adapters.traces.stats`` embeds.

Reads the real job traces in place, under ``../shared/data`` next to the repository (or
the folder given as the first argument), and prints the dictionaries that
``adapters/traces/stats.py`` holds, so that a change can be checked by eye and pasted:

* ``itp-elasticflow/cluster*.csv`` (Microsoft ITP, ElasticFlow ASPLOS '23; MIT license):
  jobs per GPU count, and GPU-seconds (``duration x num_gpu``) per GPU count;
* ``pollux-philly-jobs/philly.csv`` (Microsoft Philly via the Pollux OSDI '21 artifact;
  data CC BY 4.0): the same two, and jobs per virtual cluster (``cluster``).

Only the standard library is used; ``tests/adapters/traces/test_generate.py`` imports
:func:`derive` and checks that the embedded constants equal its output.

Usage: ``python scripts/derive_trace_stats.py [DATA_DIR]``
"""

from __future__ import annotations

import csv
import sys
from collections import Counter
from pathlib import Path
from pprint import pformat

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _sorted(counter: Counter) -> dict:
    return dict(sorted(counter.items()))


def derive_itp(folder: Path) -> dict[str, dict]:
    """ITP: all ``cluster*.csv`` files together (columns job_id, submission_time,
    duration, num_gpu; duration in seconds)."""
    jobs: Counter = Counter()
    gpu_seconds: Counter = Counter()
    files = sorted(folder.glob("cluster*.csv"))
    if not files:
        raise FileNotFoundError(f"no cluster*.csv under {folder}")
    for path in files:
        with path.open(newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                gpus = int(row["num_gpu"])
                jobs[gpus] += 1
                gpu_seconds[gpus] += int(row["duration"]) * gpus
    return {"jobs_by_gpus": _sorted(jobs), "gpu_seconds_by_gpus": _sorted(gpu_seconds)}


def derive_philly(folder: Path) -> dict[str, dict]:
    """Philly (Pollux's ``philly.csv``: timestamp, duration, num_gpus, gpu_time, cluster;
    duration in seconds, written as floats that are all whole)."""
    jobs: Counter = Counter()
    gpu_seconds: Counter = Counter()
    queues: Counter = Counter()
    with (folder / "philly.csv").open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            gpus = int(row["num_gpus"])
            jobs[gpus] += 1
            gpu_seconds[gpus] += round(float(row["duration"]) * gpus)
            queues[row["cluster"]] += 1
    by_count = dict(sorted(queues.items(), key=lambda kv: (-kv[1], kv[0])))
    return {
        "jobs_by_gpus": _sorted(jobs),
        "gpu_seconds_by_gpus": _sorted(gpu_seconds),
        "jobs_by_queue": by_count,
    }


def derive(data_dir: Path = DEFAULT_DATA) -> dict[str, dict[str, dict]]:
    """Both traces' statistics, keyed by their folder names under ``data_dir``."""
    return {
        "itp-elasticflow": derive_itp(data_dir / "itp-elasticflow"),
        "pollux-philly-jobs": derive_philly(data_dir / "pollux-philly-jobs"),
    }


def main(argv: list[str]) -> int:
    data_dir = Path(argv[1]) if len(argv) > 1 else DEFAULT_DATA
    for name, stats in derive(data_dir).items():
        print(f"# {name} (from {data_dir / name})")
        for key, value in stats.items():
            print(f"{key} = {pformat(value, sort_dicts=False, width=96)}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
