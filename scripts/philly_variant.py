"""Write the contended Philly cluster of ``docs/simulate.md`` as an instance file: the first
MACHINES 8-GPU machines of Philly's ``cluster_machine_list`` (file order), made into an
instance as ``gangplan simulate`` makes the whole list (``adapters/sim/cluster.py``), and,
with ``--vc``, Philly's virtual clusters as queues, each guaranteed a share of the GPUs in
proportion to its node count in ``philly_vc.csv`` (rounded down), with the preemption
policies ``within_queue: lower_priority`` and ``reclaim: any`` (what shrinking elastic jobs
needs: a queue within its guaranteed amount takes back the GPUs others borrow).

Usage::

    python scripts/philly_variant.py $D/philly/cluster_machine_list --machines 32 \\
        --vc $D/philly/philly_vc.csv -o philly-32x8-vc.yaml

Derived from the Philly trace (CC BY 4.0, Jeon et al., USENIX ATC '19): generated where it is
needed, never committed.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from gangplan.adapters.sim.cluster import philly_cluster, read_philly_machines
from gangplan.adapters.traces.common import instance_text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("machine_list", type=Path)
    ap.add_argument("--machines", type=int, default=32, help="8-GPU machines kept")
    ap.add_argument("--vc", type=Path, default=None, help="philly_vc.csv: VCs as queues")
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args()
    machines = [m for m in read_philly_machines(args.machine_list) if m.gpus == 8]
    data = philly_cluster(machines[: args.machines])
    if args.vc is not None:
        with args.vc.open(encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        nodes = sum(int(r["node num"]) for r in rows)
        gpus = 8 * min(args.machines, len(machines))
        data["queues"] = [
            {
                "name": f"vc-{r['vc']}",
                "guaranteed": {"nvidia.com/gpu": str(gpus * int(r["node num"]) // nodes)},
                "preemption": {"within_queue": "lower_priority", "reclaim": "any"},
            }
            for r in rows
        ]
    args.output.write_text(instance_text(data), encoding="utf-8")


if __name__ == "__main__":
    main()
