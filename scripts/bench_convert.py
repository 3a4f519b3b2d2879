"""Measure ``gangplan convert k8s`` on dumps: wall time, CPU time (user + sys), peak memory
(the child's maximum resident set) and the load average, for one or more gangplan
installations side by side, with each run's ratio to the first installation's on the same
dump in the same session (the machine's load changes between sessions; ratios taken in one
session mostly do not).

Usage::

    python scripts/make_kube_dump.py -o /tmp/dump.yaml     # and -o /tmp/dump.json
    python scripts/bench_convert.py /tmp/dump.json /tmp/dump.yaml \\
        --gangplan base=/tmp/base/.venv/bin/gangplan --gangplan branch=.venv/bin/gangplan

Each run is ``GANGPLAN convert k8s --topology-labels kueue DUMP -o OUT`` in a child
process (the options after ``--`` replace ``--topology-labels kueue``); the installations
run in turn, round after round, so that a change of load hits them alike. The outputs of
one dump are compared byte for byte across installations: "same" in the last column, or
the sha256 prefix when they differ. The figures are printed as a table and, with
``--json FILE``, written as JSON.

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Run:
    """One run of one installation on one dump."""

    label: str
    dump: str
    round: int
    wall_s: float
    cpu_s: float
    user_s: float
    sys_s: float
    peak_mb: float
    load_before: float
    load_after: float
    exit_code: int
    output_sha256: str


def run_once(gangplan: str, dump: Path, options: list[str], out: Path) -> tuple[Run, str]:
    """Run one conversion; returns its figures (label and round filled in by the caller)
    and its stderr."""
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [gangplan, "convert", "k8s", *options, str(dump), "-o", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    digest = hashlib.sha256(out.read_bytes()).hexdigest() if out.exists() else ""
    run = Run(
        label="",
        dump=str(dump),
        round=0,
        wall_s=round(wall, 2),
        cpu_s=round(usage.ru_utime + usage.ru_stime, 2),
        user_s=round(usage.ru_utime, 2),
        sys_s=round(usage.ru_stime, 2),
        peak_mb=round(usage.ru_maxrss / 1024, 1),  # ru_maxrss is in KiB on Linux
        load_before=round(load_before, 2),
        load_after=round(os.getloadavg()[0], 2),
        exit_code=proc.returncode,
        output_sha256=digest,
    )
    return run, stderr


def table(runs: list[Run]) -> list[str]:
    """The runs as text lines, with each run's wall and CPU ratio to the first
    installation's run of the same dump and round."""
    first: dict[tuple[str, int], Run] = {}
    for r in runs:
        first.setdefault((r.dump, r.round), r)
    lines = [
        f"{'dump':<24} {'installation':<14} {'rnd':>3} {'wall s':>8} {'cpu s':>8} "
        f"{'peak MB':>8} {'load':>11} {'wall x':>7} {'cpu x':>6}  output"
    ]
    for r in runs:
        base = first[(r.dump, r.round)]
        same = "same" if r.output_sha256 == base.output_sha256 else r.output_sha256[:12]
        lines.append(
            f"{Path(r.dump).name:<24} {r.label:<14} {r.round:>3} {r.wall_s:>8.1f} "
            f"{r.cpu_s:>8.1f} {r.peak_mb:>8.0f} {r.load_before:>5.2f}-{r.load_after:<5.2f} "
            f"{r.wall_s / base.wall_s:>7.2f} {r.cpu_s / base.cpu_s:>6.2f}  "
            f"{same if r.exit_code == 0 else f'exit {r.exit_code}'}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dumps", nargs="+", type=Path, help="dump files (make_kube_dump.py)")
    ap.add_argument(
        "--gangplan",
        action="append",
        metavar="LABEL=PATH",
        help="an installation's gangplan executable (repeat; default: gangplan on PATH)",
    )
    ap.add_argument("--rounds", type=int, default=1, help="runs of each installation per dump")
    ap.add_argument("--json", type=Path, help="also write the runs here as JSON")
    args, extra = ap.parse_known_args(argv)
    options = [a for a in extra if a != "--"] or ["--topology-labels", "kueue"]
    installs = [
        tuple(spec.split("=", 1)) if "=" in spec else (spec, spec)
        for spec in (args.gangplan or ["gangplan"])
    ]
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="bench-convert-") as tmp:
        for dump in args.dumps:
            for rnd in range(1, args.rounds + 1):
                for label, exe in installs:
                    out = Path(tmp) / f"{label}-{rnd}-{dump.stem}.yaml"
                    run, stderr = run_once(exe, dump, options, out)
                    run.label, run.round = label, rnd
                    runs.append(run)
                    print(
                        f"{dump.name} {label} round {rnd}: {run.wall_s} s wall, {run.cpu_s} s "
                        f"CPU, {run.peak_mb:.0f} MB, load {run.load_before}",
                        file=sys.stderr,
                    )
                    if run.exit_code != 0:
                        print(stderr, file=sys.stderr)
                    out.unlink(missing_ok=True)
    print("\n".join(table(runs)))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=2) + "\n")
    return 0 if all(r.exit_code == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
