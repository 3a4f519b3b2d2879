"""Digest of the plans every placer returns on the standard suite's instances, in
deterministic mode, for comparing behaviour before and after a change that must not alter it.

    python scripts/plan_digest.py OUT.json [--limits 1,5] [--only NAME,...] [--skip NAME,...]
    python scripts/plan_digest.py --compare A.json B.json

For each instance (the standard suite's, the embedded default, the scenario cases under
``instances/cases``) it runs each baseline (``run_baseline``) and CP-SAT
(``solve_cycle`` with ``deterministic=True`` at each limit), and ``replan`` on the cases that
have running pods, and records per run a SHA-256 of the plan's pods (gang, pod, node,
devices), evictions, reservations, pending reasons, status, placer and score entries; wall
times and notes are left out (notes quote seconds). ``--compare`` lists the runs whose
digest differs, and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from gangplan.adapters.bench.suites import SUITES, Skipped, default_data_dir
from gangplan.adapters.files import load_snapshot
from gangplan.models import Plan, Snapshot
from gangplan.solver.cycle import run_baseline, solve_cycle
from gangplan.solver.placers.baselines import BASELINES
from gangplan.solver.result import SolverConfig

CASES = Path(__file__).resolve().parents[1] / "instances" / "cases"


def plan_record(plan: Plan, entries: Any) -> dict[str, Any]:
    """What a plan decides, without its timings."""
    summary = plan.summary
    return {
        "pods": sorted((p.gang_key, p.pod, p.node, p.gpus, p.gpu_milli, p.nics) for p in plan.pods),
        "evictions": sorted(
            json.dumps(e.model_dump(mode="json"), sort_keys=True) for e in plan.evictions
        ),
        "reservations": sorted(
            json.dumps(r.model_dump(mode="json"), sort_keys=True) for r in plan.reservations
        ),
        "reasons": sorted((o.key, o.reason.message if o.reason else None) for o in plan.gangs),
        "status": summary.status if summary else None,
        "placer": summary.placer if summary else None,
        "score": [list(e) for e in entries],
    }


def digest(record: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


def instances(only: set[str], skip: set[str]) -> list[tuple[str, Snapshot]]:
    out: list[tuple[str, Snapshot]] = [("default", load_snapshot(None)[0])]
    for path in sorted(CASES.glob("*.yaml")):
        out.append((f"case-{path.stem}", load_snapshot(path)[0]))
    data = default_data_dir()
    for spec in SUITES["standard"].instances:
        if (only and spec.name not in only) or spec.name in skip:
            continue
        try:
            out.append((spec.name, spec.build(data)))
        except Skipped as err:
            print(f"skipped {spec.name}: {err}", file=sys.stderr)
    return [(n, s) for n, s in out if not only or n in only]


def run(out: Path, limits: list[float], only: set[str], skip: set[str]) -> None:
    from gangplan.solver.replan import ReplanSettings, replan

    result: dict[str, dict[str, Any]] = {}
    for name, snap in instances(only, skip):
        for placer in BASELINES:
            t0 = time.monotonic()
            res = run_baseline(snap, placer)
            rec = plan_record(res.plan, res.score.entries)
            result[f"{name}/{placer}"] = {"digest": digest(rec), "record": rec}
            print(f"{name}/{placer}: {time.monotonic() - t0:.1f} s", file=sys.stderr)
        for limit in limits:
            t0 = time.monotonic()
            cfg = SolverConfig(time_limit_s=limit, deterministic=True, interruptible=False)
            res = solve_cycle(snap, None, cfg)
            rec = plan_record(res.plan, res.score.entries)
            result[f"{name}/cpsat@{limit:g}"] = {"digest": digest(rec), "record": rec}
            print(f"{name}/cpsat@{limit:g}: {time.monotonic() - t0:.1f} s", file=sys.stderr)
        if snap.running and name.startswith("case-"):
            cfg = SolverConfig(time_limit_s=2.0, deterministic=True, interruptible=False)
            rp = replan(snap, ReplanSettings(config=cfg))
            rec = {
                "moves": json.loads(rp.move_plan.model_dump_json()),
                "target": plan_record(rp.target, ()),
            }
            result[f"{name}/replan"] = {"digest": digest(rec), "record": rec}
        out.write_text(json.dumps(result, indent=1, sort_keys=True, default=str))


def compare(a: Path, b: Path) -> int:
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    differ = 0
    for key in sorted(set(ra) | set(rb)):
        da, db = ra.get(key, {}).get("digest"), rb.get(key, {}).get("digest")
        if da != db:
            differ += 1
            print(f"DIFFERS {key}: {da} vs {db}")
    print(f"{len(set(ra) & set(rb))} runs in both, {differ} differ")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--limits", default="1,5")
    ap.add_argument("--only", default="")
    ap.add_argument("--skip", default="")
    ap.add_argument("--compare", nargs=2)
    args = ap.parse_args()
    if args.compare:
        return compare(Path(args.compare[0]), Path(args.compare[1]))
    only = {s for s in args.only.split(",") if s}
    skip = {s for s in args.skip.split(",") if s}
    run(Path(args.out), [float(x) for x in args.limits.split(",")], only, skip)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
