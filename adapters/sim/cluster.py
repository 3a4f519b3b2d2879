"""The simulated cluster: an instance file, or Philly's machine list made into one.

``--cluster FILE`` is either

* an instance file (YAML or JSON, ``docs/instance-format.md``): its nodes, levels, device
  layouts and queues are the cluster; its pending gangs and running pods are ignored (the
  simulation starts empty) — e.g. ``gangplan generate fat-tree ... -o ft.yaml``, or the
  openb nodes from ``gangplan convert alibaba-gpu``;
* or Philly's machine list (``cluster_machine_list`` of the Philly trace, Jeon et al.,
  USENIX ATC '19, github.com/msr-fiddle/philly-traces; header
  ``machineId, number of GPUs, single GPU mem``), recognised by that header and made into
  an instance by :func:`philly_cluster`.

**Philly's machines** (552: 321 with 2 GPUs of 12 GB, 231 with 8 GPUs of 24 GB, 2,490
GPUs). The list gives the GPU count and GPU memory only, so the rest is synthetic and
says so in ``metadata.synthetic``:

* CPU and memory: 8 cores and 64 GiB per GPU on every machine (the trace's jobs ask none;
  :mod:`gangplan.adapters.traces.jobs` then asks 3/4 of that per GPU, so GPUs, not CPU,
  decide where a pod fits);
* GPU model: ``<mem>GB`` from the list's memory column (``12GB``, ``24GB``), so that the
  two kinds of machine never share a node class;
* device layout: one PCIe switch holding every GPU of the machine, no RDMA NICs (the trace
  has no device data);
* topology: the trace publishes none (its README: no rack or switch data). Machines are
  grouped by kind (GPU count and memory, kinds in order of first appearance), file order
  inside a kind, ``rack_size`` machines per rack (level ``leaf``, default 16; each kind
  starts a new rack, as the openb converter groups machine types), and ``racks_per_spine``
  racks per spine (level ``spine``, default 8, each kind again starting a new spine). With
  the defaults: 21 racks of 2-GPU machines (3 spines), 15 of 8-GPU machines (2 spines).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gangplan.adapters.files import InputError, load_snapshot, read_data, read_text
from gangplan.models import (
    API_VERSION,
    GPU_MILLI,
    InstanceError,
    Problem,
    Snapshot,
    load_instance,
)

__all__ = [
    "PHILLY_HEADER",
    "ClusterSpec",
    "PhillyMachine",
    "load_cluster",
    "philly_cluster",
    "read_philly_machines",
]

PHILLY_HEADER = ("machineId", "number of GPUs", "single GPU mem")
CORES_PER_GPU = 8
GIB_PER_GPU = 64


@dataclass(frozen=True)
class PhillyMachine:
    """One row of Philly's machine list: name, GPU count, GPU memory in GB, data row."""

    name: str
    gpus: int
    gpu_mem_gb: int
    row: int


@dataclass
class ClusterSpec:
    """The cluster a simulation runs on: the instance data (plain dict), its validated
    snapshot (no gangs, no running pods), where it came from, and warnings."""

    data: dict[str, Any]
    snapshot: Snapshot
    source: str
    warnings: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        """Whole GPUs of the cluster (allocatable milli-GPU / 1000)."""
        s = self.snapshot
        return sum(n.allocatable.get(s.gpu, 0) for n in s.nodes) // GPU_MILLI


def _is_philly_list(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as fh:
            first = fh.readline(1 << 16)  # a header line; never a whole /dev/zero
    except (OSError, UnicodeDecodeError):
        return False
    return tuple(c.strip() for c in first.split(",")) == PHILLY_HEADER


def read_philly_machines(path: str | Path) -> list[PhillyMachine]:
    """Read Philly's ``cluster_machine_list`` (values may have a leading space, as in the
    official README: ``m0,2, 12GB``).

    Raises:
        InputError: a missing file, a wrong header, or a bad row (row and column named).
    """
    p = Path(path)
    source = str(p)
    lines = read_text(p).splitlines()
    header = tuple(c.strip() for c in lines[0].split(",")) if lines else ()
    if header != PHILLY_HEADER:
        raise InputError(
            source, [Problem("line 1 (header)", f"expected {', '.join(PHILLY_HEADER)}")]
        )
    out: list[PhillyMachine] = []
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, line in enumerate(lines[1:], start=1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        where = f"row {i} (line {i + 1})"
        if len(cells) != 3:
            problems.append(Problem(where, f"has {len(cells)} fields; the header has 3"))
            continue
        name, gpus, mem = cells
        if not name:
            problems.append(Problem(f"{where}, column 'machineId'", "empty machine id"))
        elif name in seen:
            problems.append(
                Problem(f"{where}, column 'machineId'", f"duplicate {name!r} (row {seen[name]})")
            )
        seen.setdefault(name, i)
        if not gpus.isdigit():
            problems.append(
                Problem(f"{where}, column 'number of GPUs'", f"{gpus!r} is not a whole number")
            )
            continue
        digits = mem.upper().removesuffix("GB").strip()
        if not digits.isdigit():
            problems.append(
                Problem(f"{where}, column 'single GPU mem'", f"{mem!r} is not a size like 12GB")
            )
            continue
        out.append(PhillyMachine(name, int(gpus), int(digits), i))
        if len(problems) > 20:
            break
    if problems:
        raise InputError(source, problems[:20])
    return out


def philly_cluster(
    machines: list[PhillyMachine], *, rack_size: int = 16, racks_per_spine: int = 8
) -> dict[str, Any]:
    """Instance data for Philly's machines (see the module docstring for what is synthetic).

    Machines without GPUs are kept (they hold no trace job). Machine ids become node names
    in lower case (``m0``).

    Raises:
        ValueError: ``rack_size`` or ``racks_per_spine`` below 1.
    """
    if rack_size < 1 or racks_per_spine < 1:
        raise ValueError(
            f"rack size and racks per spine must be >= 1 ({rack_size}, {racks_per_spine})"
        )
    kinds: dict[tuple[int, int], list[PhillyMachine]] = {}
    for m in machines:
        kinds.setdefault((m.gpus, m.gpu_mem_gb), []).append(m)
    layouts: dict[str, Any] = {}
    nodes: list[dict[str, Any]] = []
    rack = spine = 0
    for (gpus, mem), group in kinds.items():
        layout = f"philly-{gpus}gpu"
        if gpus and layout not in layouts:
            layouts[layout] = {
                "numa_nodes": [
                    {
                        "name": "numa-0",
                        "pcie_switches": [
                            {"name": "pcie-0", "gpus": [f"gpu-{k}" for k in range(gpus)]}
                        ],
                    }
                ]
            }
        for k, m in enumerate(group):
            r = rack + k // rack_size
            node: dict[str, Any] = {
                "name": m.name.lower(),
                "allocatable": {
                    "cpu": str(CORES_PER_GPU * max(1, gpus)),
                    "memory": f"{GIB_PER_GPU * max(1, gpus)}Gi",
                    "nvidia.com/gpu": str(gpus),
                },
                "domains": {
                    "spine": f"s{spine + (r - rack) // racks_per_spine}",
                    "leaf": f"r{r}",
                },
            }
            if gpus:
                node["gpu_model"] = f"{mem}GB"
                node["device_layout"] = layout
            nodes.append(node)
        racks = math.ceil(len(group) / rack_size)
        rack += racks
        spine += math.ceil(racks / racks_per_spine)
    return {
        "apiVersion": API_VERSION,
        "kind": "Instance",
        "metadata": {
            "name": "philly-machines",
            "description": f"Philly's {len(machines)} machines (cluster_machine_list)",
            "source": {
                "trace": "Microsoft Philly (Jeon et al., USENIX ATC '19), cluster_machine_list",
                "url": "https://github.com/msr-fiddle/philly-traces",
                "license": "data CC BY 4.0 (Microsoft); cite Jeon et al., ATC '19",
            },
            "synthetic": [
                f"CPU and memory: {CORES_PER_GPU} cores and {GIB_PER_GPU} GiB per GPU "
                "(the list has neither)",
                "device layout: one PCIe switch per machine, no RDMA NICs",
                f"racks of {rack_size} machines of one kind, {racks_per_spine} racks per "
                "spine (the trace publishes no topology)",
            ],
        },
        "levels": [{"name": "spine"}, {"name": "leaf"}],
        "device_layouts": layouts,
        "nodes": nodes,
        "queues": [],
    }


def load_cluster(path: str | Path, *, rack_size: int = 16) -> ClusterSpec:
    """The cluster of ``path``: Philly's machine list (by its header) or an instance file.
    Its gangs and running pods are dropped (the simulation starts empty).

    Raises:
        InputError: a missing or bad file (naming the file and the field), or a cluster
            without a GPU (nothing of a GPU trace could run).
    """
    p = Path(path)
    if p.is_file() and _is_philly_list(p):
        data = philly_cluster(read_philly_machines(p), rack_size=rack_size)
        try:
            snapshot, warnings = load_instance(data)
        except InstanceError as err:  # pragma: no cover - our own data
            raise InputError(str(p), err.problems) from None
        source = f"Philly machine list {p.name}"
    else:
        load_snapshot(p)  # every problem of the file at once, named by field
        _, raw = read_data(p)
        data = {k: v for k, v in raw.items() if k not in ("gangs", "running")}
        try:
            snapshot, warnings = load_instance(data)
        except InstanceError as err:
            raise InputError(str(p), err.problems) from None
        source = f"instance file {p.name}"
    spec = ClusterSpec(data=data, snapshot=snapshot, source=source, warnings=list(warnings))
    if spec.gpus == 0:
        raise InputError(
            str(p),
            [
                Problem(
                    "nodes",
                    f"no node has a GPU ({len(snapshot.nodes)} nodes; allocatable "
                    f"{snapshot.gpu} is 0 or absent everywhere): no job of a GPU trace can run "
                    "(accepted: a cluster with at least one GPU node)",
                )
            ],
        )
    return spec
