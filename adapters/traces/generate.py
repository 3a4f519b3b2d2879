"""Synthetic fat-tree instances for the benchmark: ``gangplan generate fat-tree``.

:func:`generate_fat_tree` returns a :class:`~gangplan.models.Snapshot` (the bench calls it
directly); :func:`fat_tree` also returns the instance file's data, written with node pools,
spread rules and one line per gang or running pod so that a 2,048-node file stays small.
Everything is deterministic for a seed (Python's :class:`random.Random`, seeded with a string,
which is hashed the same way on every platform and run).

**Cluster** (:func:`fat_tree_cluster`). ``spines x leaves_per_spine`` leaves of
``nodes_per_leaf`` nodes, on levels ``spine`` and ``leaf`` (labels
``network.gangplan.io/spine`` / ``leaf``; leaves numbered across the cluster). Node layouts:

* ``hgx8``: 8 GPUs and 8 RDMA NICs, 2 of each under each of 4 PCIe switches, 2 switches per
  NUMA node (an HGX/DGX-class server, as the embedded default instance's ``hgx8``);
* ``4gpu``: 4 GPUs and 4 NICs, 2 of each under one PCIe switch per NUMA node (a two-socket
  4-GPU server, e.g. HGX 4-GPU).

GPU models are mixed across racks: each leaf holds one model (a rack is filled with one
server type), and the leaves cycle through the layout's models by smooth weighted
round-robin, weights 4 : 3 : 1 (:data:`LAYOUTS`), so every spine of 8 leaves holds all three.
The CPU, memory and model names are illustrative shapes, not measured hardware.

**Queues.** The ``queues`` largest of the 15 Philly virtual clusters by job count in
``pollux-philly-jobs`` (:data:`gangplan.adapters.traces.stats.PHILLY`), named ``vc-<id>``.
Each queue's weight is its share of those queues' jobs, in percent (3 decimals, at least
0.001, so no queue gets weight 0, which would mean "served last"); gangs and running jobs
are charged to queues in the same proportions.

**Running load** (fraction ``load`` of the GPUs), scattered as in a cluster that has run
for days: jobs arrive and leave, and each pod went where a locality-unaware scheduler put it.

1. Running jobs are drawn from the trace's *running* mix: by Little's law the jobs of size
   s running at a moment are in proportion to (jobs of size s) x (their mean duration), that
   is to GPU-seconds(s) / s — so large, long jobs are more common among running jobs than
   among arrivals (in ITP, 8-GPU jobs are 10% of jobs but 49% of GPU time).
2. Each job is cut into pods (:func:`~gangplan.adapters.traces.common.split_gpus`) and each
   pod goes to a node drawn uniformly among those with room (the FGD paper's *Random-fit*
   baseline); a job that does not fit, or would pass the target, is drawn again (after 100
   tries, a 1-GPU job is placed: it fits wherever a GPU is free).
3. After the first fill to ``round(load x GPUs)``, the cluster churns: twice as many
   departures as there are running jobs, each a uniformly chosen job (memoryless lifetimes),
   each followed by arrivals that refill to the target. Holes left by departures are filled
   by whatever arrives next, which is what scatters free GPUs over partly used nodes.

The running GPUs are exactly ``round(load x GPUs)`` (the fill ends on jobs no larger than the
gap, and a 1-GPU job fits while any GPU is free). Running pods ask GPUs, CPU and memory (the
per-GPU rule below), no NICs, and name no devices (each node gives them its lowest free GPUs).

**Pending gangs** are drawn until their GPUs (at full size) reach ``demand x free GPUs``; the
last gang drawn is the one that crosses it. For each gang, in this order:

* size G from the trace's GPU-count histogram (``sizes``: ``itp`` or ``philly``,
  :mod:`gangplan.adapters.traces.stats`), restricted to sizes no larger than the cluster;
  pods by :func:`~gangplan.adapters.traces.common.split_gpus` (roles ``worker`` and, for a
  remainder, ``remainder``);
* queue by the shares above; priority 1000 (10%), 100 (70%) or 10 (20%): production,
  normal and batch classes (illustrative, the traces have none);
* GPU model: one third of gangs accept one model only (the share of GPU tasks with a GPU
  type constraint in Alibaba's production cluster, FGD paper Sec. 6.5), drawn in proportion
  to each model's GPUs among the models that have at least G GPUs;
* multi-pod gangs (distributed training) ask one RDMA NIC per GPU with joint allocation
  ``pcie``; if they fit in one leaf, 40% require a leaf and 40% prefer one; larger ones
  prefer a spine half of the time; 25% are elastic, accepting any size from half their pods
  (rounded up);
* arrival: ``creation_time`` grows by exponential gaps of mean 30 s.

Pods ask CPU and memory in proportion to their GPUs
(:func:`~gangplan.adapters.traces.common.per_gpu_requests`: 12 cores and 96 GiB per GPU on
both layouts).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gangplan.adapters.traces.common import (
    Converted,
    PerGpu,
    per_gpu_requests,
    pod_requests,
    snapshot_of,
    split_gpus,
)
from gangplan.adapters.traces.stats import DERIVED_BY, PHILLY, TRACES, JobTraceStats
from gangplan.models import API_VERSION, Snapshot
from gangplan.models.limits import MAX_PODS, too_many
from gangplan.models.quantity import CPU, MEMORY

__all__ = [
    "LAYOUTS",
    "MAX_DEMAND",
    "PRIORITY_CLASSES",
    "GeneratorError",
    "GpuModel",
    "NodeLayout",
    "fat_tree",
    "fat_tree_cluster",
    "generate_fat_tree",
    "queue_shares",
]

GIB = 2**30
GPU = "nvidia.com/gpu"
NIC = "rdma/hca"
SPINE_LABEL = "network.gangplan.io/spine"
LEAF_LABEL = "network.gangplan.io/leaf"

PRIORITY_CLASSES = ((1000, 1), (100, 7), (10, 2))
"""(priority, weight out of 10): production 10%, normal 70%, batch 20%."""
MODEL_CONSTRAINED = 1 / 3
REQUIRED_LEAF, PREFERRED_LEAF = 0.4, 0.4
PREFERRED_SPINE = 0.5
ELASTIC = 0.25
MEAN_GAP_S = 30.0
CHURN = 2
FILL_TRIES = 100
MAX_DEMAND = 100.0
"""The largest ``demand``: pending GPUs of 100 times the free ones (1.3 is a contended cycle);
the pods it takes must also stay within MAX_PODS (:mod:`gangplan.models.limits`)."""


class GeneratorError(ValueError):
    """Parameters the generator cannot use (named, with what is accepted)."""


@dataclass(frozen=True)
class GpuModel:
    """A server type: GPU model, CPU cores, memory (GiB), GPU product label, mix weight."""

    name: str
    cpu: int
    memory_gib: int
    product: str
    weight: int


@dataclass(frozen=True)
class NodeLayout:
    """A node's device tree (instance-file form) and the GPU models built on it."""

    name: str
    gpus: int
    nics: int
    devices: dict[str, Any]
    models: tuple[GpuModel, ...]


def _layout(switches_per_numa: int, numa: int, per_switch: int) -> dict[str, Any]:
    nodes, k = [], 0
    for n in range(numa):
        switches = []
        for _ in range(switches_per_numa):
            ids = range(k * per_switch, (k + 1) * per_switch)
            switches.append(
                {
                    "name": f"pcie{k}",
                    "gpus": [f"gpu{i}" for i in ids],
                    "nics": [f"mlx5_{i}" for i in ids],
                }
            )
            k += 1
        nodes.append({"name": f"numa{n}", "pcie_switches": switches})
    return {"numa_nodes": nodes}


LAYOUTS: dict[str, NodeLayout] = {
    "hgx8": NodeLayout(
        name="hgx8",
        gpus=8,
        nics=8,
        devices=_layout(switches_per_numa=2, numa=2, per_switch=2),
        models=(
            GpuModel("H100", 192, 2048, "NVIDIA-H100-80GB-HBM3", 4),
            GpuModel("A100", 128, 1024, "NVIDIA-A100-SXM4-80GB", 3),
            GpuModel("H200", 192, 2048, "NVIDIA-H200", 1),
        ),
    ),
    "4gpu": NodeLayout(
        name="4gpu",
        gpus=4,
        nics=4,
        devices=_layout(switches_per_numa=1, numa=2, per_switch=2),
        models=(
            GpuModel("H100", 96, 1024, "NVIDIA-H100-SXM5-80GB", 4),
            GpuModel("A100", 64, 512, "NVIDIA-A100-SXM4-80GB", 3),
            GpuModel("L40S", 64, 512, "NVIDIA-L40S", 1),
        ),
    ),
}
"""The node layouts ``--layout`` accepts."""


# --------------------------------------------------------------------------- the cluster


@dataclass(frozen=True)
class _Shape:
    """The cluster as the generator sees it: node names, models, leaves, spines."""

    layout: NodeLayout
    names: tuple[str, ...]
    models: tuple[GpuModel, ...]  # per node
    leaf_models: tuple[GpuModel, ...]  # per leaf
    nodes_per_leaf: int
    leaves_per_spine: int
    spines: int

    @property
    def gpus(self) -> int:
        return len(self.names) * self.layout.gpus

    def per_gpu(self) -> PerGpu:
        return per_gpu_requests(
            (m.cpu * 1000, m.memory_gib * GIB, self.layout.gpus) for m in set(self.leaf_models)
        )

    def model_gpus(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for m in self.leaf_models:
            out[m.name] = out.get(m.name, 0) + self.nodes_per_leaf * self.layout.gpus
        return out


def _leaf_models(layout: NodeLayout, leaves: int) -> list[GpuModel]:
    """Smooth weighted round-robin over the layout's models (nginx's algorithm): each step
    adds each model's weight to its credit, takes the model of highest credit (first on
    ties) and takes the total weight from its credit. Weights 4:3:1 give the cycle
    H100, A100, H100, A100, H200, H100, A100, H100 (for hgx8)."""
    credit = [0] * len(layout.models)
    total = sum(m.weight for m in layout.models)
    out = []
    for _ in range(leaves):
        credit = [c + m.weight for c, m in zip(credit, layout.models, strict=True)]
        best = max(range(len(credit)), key=lambda i: (credit[i], -i))
        credit[best] -= total
        out.append(layout.models[best])
    return out


def _check(name: str, value: float, low: float, high: float | None = None) -> None:
    if value < low or (high is not None and value > high) or math.isnan(value):
        accepted = f"{low:g}..{high:g}" if high is not None else f">= {low:g}"
        raise GeneratorError(f"{name} is {value:g} (accepted: {accepted})")


def _shape(spines: int, leaves_per_spine: int, nodes_per_leaf: int, layout: str) -> _Shape:
    if layout not in LAYOUTS:
        raise GeneratorError(f"layout {layout!r} is unknown (accepted: {', '.join(LAYOUTS)})")
    _check("spines", spines, 1)
    _check("leaves per spine", leaves_per_spine, 1)
    _check("nodes per leaf", nodes_per_leaf, 1)
    if msg := too_many("MAX_NODES", spines * leaves_per_spine * nodes_per_leaf):
        raise GeneratorError(msg)
    lay = LAYOUTS[layout]
    leaves = spines * leaves_per_spine
    leaf_models = _leaf_models(lay, leaves)
    width = max(4, len(str(leaves * nodes_per_leaf - 1)))
    names, models = [], []
    for leaf, model in enumerate(leaf_models):
        for k in range(nodes_per_leaf):
            names.append(f"{model.name.lower()}-{leaf * nodes_per_leaf + k:0{width}d}")
            models.append(model)
    return _Shape(
        lay,
        tuple(names),
        tuple(models),
        tuple(leaf_models),
        nodes_per_leaf,
        leaves_per_spine,
        spines,
    )


def _cluster_data(shape: _Shape) -> dict[str, Any]:
    lay, n = shape.layout, shape.nodes_per_leaf
    width = max(4, len(str(len(shape.names) - 1)))
    pools = []
    for leaf, model in enumerate(shape.leaf_models):
        spine = leaf // shape.leaves_per_spine
        pools.append(
            {
                "name": f"{model.name.lower()}-{{index:0{width}d}}",
                "count": n,
                "start": leaf * n,
                "gpu_model": model.name,
                "device_layout": lay.name,
                "allocatable": {
                    CPU: str(model.cpu),
                    MEMORY: f"{model.memory_gib}Gi",
                    GPU: str(lay.gpus),
                    NIC: str(lay.nics),
                },
                "labels": {"nvidia.com/gpu.product": model.product},
                "spread": [
                    {"level": "spine", "size": n, "name": "spine-{n}", "first": spine},
                    {"level": "leaf", "size": n, "name": "leaf-{n}", "first": leaf},
                ],
            }
        )
    return {
        "apiVersion": API_VERSION,
        "kind": "Instance",
        "metadata": {},
        "resources": {"gpu": GPU, "nic": NIC},
        "levels": [
            {"name": "spine", "node_label": SPINE_LABEL},
            {"name": "leaf", "node_label": LEAF_LABEL},
        ],
        "device_layouts": {lay.name: lay.devices},
        "node_pools": pools,
    }


def fat_tree_cluster(
    spines: int, leaves_per_spine: int, nodes_per_leaf: int, layout: str = "hgx8"
) -> dict[str, Any]:
    """Instance data for the cluster alone (levels, device layout, node pools; no queues,
    gangs or running pods), e.g. for ``convert jobs-trace`` to fill with a trace's jobs.

    Raises:
        GeneratorError: an unknown layout, a count below 1, or more nodes than ``MAX_NODES``
            (:mod:`gangplan.models.limits`).
    """
    return _cluster_data(_shape(spines, leaves_per_spine, nodes_per_leaf, layout))


# --------------------------------------------------------------------------- queues


def queue_shares(queues: int, stats: JobTraceStats = PHILLY) -> dict[str, float]:
    """The ``queues`` largest tenants of ``stats`` by job count -> their share of those
    queues' jobs (summing to 1). Queue names are ``vc-<id>``.

    Raises:
        GeneratorError: ``queues`` outside 1..(tenants in the trace).
    """
    _check("queues", queues, 1, len(stats.jobs_by_queue))
    top = list(stats.jobs_by_queue.items())[:queues]
    total = sum(n for _, n in top)
    return {f"vc-{name}": n / total for name, n in top}


def _queue_data(shares: dict[str, float]) -> list[dict[str, Any]]:
    return [
        {"name": name, "weight": max(0.001, round(100 * share, 3))}
        for name, share in shares.items()
    ]


# --------------------------------------------------------------------------- running load


class _FreeIndex:
    """Nodes bucketed by free GPUs, for uniform random choice among nodes with room."""

    def __init__(self, nodes: int, per_node: int):
        self.per_node = per_node
        self.free = [per_node] * nodes
        self.buckets: list[list[int]] = [[] for _ in range(per_node + 1)]
        self.buckets[per_node] = list(range(nodes))
        self.pos = list(range(nodes))

    def pick(self, need: int, rng: random.Random) -> int | None:
        """A node drawn uniformly among those with >= ``need`` free GPUs, or None."""
        sizes = [len(self.buckets[k]) for k in range(need, self.per_node + 1)]
        total = sum(sizes)
        if total == 0:
            return None
        r = rng.randrange(total)
        for k, size in zip(range(need, self.per_node + 1), sizes, strict=True):
            if r < size:
                return self.buckets[k][r]
            r -= size
        raise AssertionError("unreachable")

    def add(self, node: int, delta: int) -> None:
        """Change the node's free GPUs by ``delta`` (negative: taken)."""
        old = self.free[node]
        bucket, i = self.buckets[old], self.pos[node]
        last = bucket.pop()
        if last != node:
            bucket[i] = last
            self.pos[last] = i
        new = old + delta
        self.free[node] = new
        self.pos[node] = len(self.buckets[new])
        self.buckets[new].append(node)


@dataclass
class _Job:
    ident: int
    gpus: int
    pods: list[tuple[int, int]]  # (node index, GPUs)
    queue: str
    priority: int


class _Draw:
    """Weighted draws with integer weights (exact and platform-independent)."""

    def __init__(self, weights: dict[Any, int]):
        self.values = list(weights)
        self.cum: list[int] = []
        total = 0
        for w in weights.values():
            total += w
            self.cum.append(total)

    def __call__(self, rng: random.Random) -> Any:
        r = rng.randrange(self.cum[-1])
        lo, hi = 0, len(self.cum) - 1
        while lo < hi:  # first index whose cumulative weight exceeds r
            mid = (lo + hi) // 2
            if self.cum[mid] > r:
                hi = mid
            else:
                lo = mid + 1
        return self.values[lo]


def _share_draw(shares: dict[str, float]) -> _Draw:
    return _Draw({name: max(1, round(share * 1_000_000)) for name, share in shares.items()})


_PRIORITY = _Draw(dict(PRIORITY_CLASSES))


def _running_jobs(
    shape: _Shape, stats: JobTraceStats, load: float, shares: dict[str, float], seed: int
) -> list[_Job]:
    """The running jobs left after the fill-and-churn process of the module docstring."""
    rng = random.Random(f"gangplan-generate-running-{seed}")
    per_node = shape.layout.gpus
    mix = {s: max(1, secs // s) for s, secs in stats.gpu_seconds_by_gpus.items() if s <= shape.gpus}
    draw_size, draw_queue = _Draw(mix), _share_draw(shares)
    index = _FreeIndex(len(shape.names), per_node)
    target = round(load * shape.gpus)
    used = 0
    jobs: list[_Job] = []
    counter = 0

    def place(size: int) -> list[tuple[int, int]] | None:
        pods: list[tuple[int, int]] = []
        for pod in split_gpus(size, per_node):
            for _ in range(pod.count):
                node = index.pick(pod.gpus, rng)
                if node is None:
                    for n, g in pods:
                        index.add(n, g)
                    return None
                index.add(node, -pod.gpus)
                pods.append((node, pod.gpus))
        return pods

    def arrive() -> None:
        nonlocal used, counter
        pods = None
        size = 1
        for _ in range(FILL_TRIES):
            size = draw_size(rng)
            if size <= target - used:
                pods = place(size)
                if pods is not None:
                    break
        if pods is None:
            size, pods = 1, place(1)
            if pods is None:  # pragma: no cover - only when no GPU is free
                raise AssertionError("no free GPU below the target")
        counter += 1
        jobs.append(_Job(counter, size, pods, draw_queue(rng), _PRIORITY(rng)))
        used += size

    def fill() -> None:
        while used < target:
            arrive()

    fill()
    for _ in range(CHURN * len(jobs)):
        i = rng.randrange(len(jobs))
        job = jobs[i]
        jobs[i] = jobs[-1]
        jobs.pop()
        for node, g in job.pods:
            index.add(node, g)
        used -= job.gpus
        fill()
    return sorted(jobs, key=lambda j: j.ident)


def _running_data(shape: _Shape, jobs: Sequence[_Job], per_gpu: PerGpu) -> list[dict[str, Any]]:
    out = []
    for job in jobs:
        for k, (node, gpus) in enumerate(job.pods):
            out.append(
                {
                    "name": f"run-{job.ident:05d}-{k}",
                    "gang": f"run-{job.ident:05d}",
                    "queue": job.queue,
                    "priority": job.priority,
                    "node": shape.names[node],
                    "requests": pod_requests(per_gpu, gpus, GPU),
                }
            )
    return out


# --------------------------------------------------------------------------- pending gangs


def _pending_gangs(
    shape: _Shape,
    stats: JobTraceStats,
    goal: float,
    shares: dict[str, float],
    per_gpu: PerGpu,
    seed: int,
) -> tuple[list[dict[str, Any]], int]:
    """Gangs drawn until their GPUs reach ``goal``; returns (gangs, their GPUs)."""
    rng = random.Random(f"gangplan-generate-pending-{seed}")
    per_node = shape.layout.gpus
    leaf_gpus = shape.nodes_per_leaf * per_node
    draw_size = _Draw({s: n for s, n in stats.jobs_by_gpus.items() if s <= shape.gpus})
    draw_queue = _share_draw(shares)
    model_gpus = shape.model_gpus()
    gangs: list[dict[str, Any]] = []
    total, clock, all_pods = 0, 0.0, 0
    while total < goal:
        size = draw_size(rng)
        shapes = split_gpus(size, per_node)
        pods = sum(p.count for p in shapes)
        all_pods += pods
        if msg := too_many("MAX_PODS", all_pods):
            raise GeneratorError(f"demand {goal:,.0f} GPUs: the gangs drawn so far have {msg}")
        gang: dict[str, Any] = {
            "name": f"job-{len(gangs):05d}",
            "queue": draw_queue(rng),
            "priority": _PRIORITY(rng),
        }
        if rng.random() < MODEL_CONSTRAINED:
            fits = {m: g for m, g in model_gpus.items() if g >= size}
            if fits:  # on a small cluster no model may have the gang's GPUs: any model then
                gang["gpu_models"] = [_Draw(fits)(rng)]
        multi = pods > 1
        if multi:
            gang["joint"] = "pcie"
            r = rng.random()
            if size <= leaf_gpus:
                if r < REQUIRED_LEAF:
                    gang["topology"] = {"required": "leaf"}
                elif r < REQUIRED_LEAF + PREFERRED_LEAF:
                    gang["topology"] = {"preferred": "leaf"}
            elif r < PREFERRED_SPINE:
                gang["topology"] = {"preferred": "spine"}
            if rng.random() < ELASTIC:
                gang["min_member"] = math.ceil(pods / 2)
        clock += rng.expovariate(1 / MEAN_GAP_S)
        gang["creation_time"] = round(clock, 3)
        roles = []
        for name, pod in zip(("worker", "remainder"), shapes, strict=False):
            roles.append(
                {
                    "name": name,
                    "count": pod.count,
                    "requests": pod_requests(per_gpu, pod.gpus, GPU, NIC if multi else None),
                }
            )
        gang["roles"] = roles
        gangs.append(gang)
        total += size
    return gangs, total


# --------------------------------------------------------------------------- entry points


def fat_tree(
    spines: int = 2,
    leaves_per_spine: int = 4,
    nodes_per_leaf: int = 8,
    layout: Literal["hgx8", "4gpu"] | str = "hgx8",
    demand: float = 1.3,
    queues: int = 4,
    load: float = 0.5,
    seed: int = 0,
    sizes: Literal["itp", "philly"] | str = "itp",
) -> Converted:
    """A fat-tree instance as the module docstring describes it.

    Args:
        spines, leaves_per_spine, nodes_per_leaf: the tree (>= 1 each).
        layout: ``hgx8`` (8 GPUs + 8 NICs) or ``4gpu`` (4 GPUs + 4 NICs).
        demand: pending GPUs over free GPUs to reach (0..:data:`MAX_DEMAND`; 1.3: a
            contended cycle), in at most ``MAX_PODS`` pods.
        queues: how many of the 15 Philly VCs (1..15).
        load: fraction of GPUs held by running pods (0..1).
        seed: the random seed; equal arguments give equal instances.
        sizes: the GPU-count histogram gangs are drawn from: ``itp`` or ``philly``.

    Returns:
        The instance data (node pools, one line per gang), the validated snapshot, and no
        warnings.

    Raises:
        GeneratorError: a parameter out of range (named, with what is accepted).
    """
    shape = _shape(spines, leaves_per_spine, nodes_per_leaf, layout)
    _check("demand", demand, 0, MAX_DEMAND)
    _check("load", load, 0, 1)
    if sizes not in TRACES:
        raise GeneratorError(f"sizes {sizes!r} is unknown (accepted: {', '.join(TRACES)})")
    stats = TRACES[sizes]
    shares = queue_shares(queues)
    per_gpu = shape.per_gpu()
    running = _running_jobs(shape, stats, load, shares, seed)
    used = sum(j.gpus for j in running)
    free = shape.gpus - used
    # each pod has at most a node's GPUs: refuse a demand that needs more pods than MAX_PODS
    fewest = math.ceil(demand * free / shape.layout.gpus)
    if fewest > MAX_PODS:
        raise GeneratorError(
            f"demand {demand:g} x {free:,} free GPUs needs at least {fewest:,} pods of at most "
            f"{shape.layout.gpus} GPUs: more than gangplan accepts (at most {MAX_PODS:,} pods "
            "in a snapshot, MAX_PODS in gangplan.models.limits)"
        )
    gangs, pending = _pending_gangs(shape, stats, demand * free, shares, per_gpu, seed)
    data = _cluster_data(shape)
    name = f"fat-tree-{spines}x{leaves_per_spine}x{nodes_per_leaf}-{layout}-seed{seed}"
    data["metadata"] = {
        "name": name,
        "description": (
            f"Generated fat-tree: {len(shape.names)} {layout} nodes, {shape.gpus} GPUs, "
            f"{used} held by running pods, {len(gangs)} pending gangs asking {pending} GPUs "
            f"({pending / free if free else 0:.3f} x the {free} free)"
        ),
        "generator": {
            "command": "gangplan generate fat-tree",
            "spines": spines,
            "leaves_per_spine": leaves_per_spine,
            "nodes_per_leaf": nodes_per_leaf,
            "layout": layout,
            "demand": demand,
            "queues": queues,
            "load": load,
            "seed": seed,
            "sizes": sizes,
        },
        "synthetic": ["everything: generated by gangplan (see gangplan.adapters.traces.generate)"],
        "trace_stats": {
            "gang_sizes": f"{stats.name}: {stats.trace}; {stats.license}",
            "queues": f"{PHILLY.name} virtual clusters by job count: {PHILLY.license}",
            "derived_by": DERIVED_BY,
        },
        "summary": {
            "gpus": shape.gpus,
            "running_gpus": used,
            "free_gpus": free,
            "pending_gpus": pending,
            "pending_gangs": len(gangs),
            "multi_pod_gangs": sum(1 for g in gangs if "joint" in g),
        },
    }
    data["queues"] = _queue_data(shares)
    data["gangs"] = gangs
    data["running"] = _running_data(shape, running, per_gpu)
    snapshot, warnings = snapshot_of(f"<generated {name}>", data)
    return Converted(data=data, snapshot=snapshot, warnings=warnings)


def generate_fat_tree(
    spines: int = 2,
    leaves_per_spine: int = 4,
    nodes_per_leaf: int = 8,
    layout: Literal["hgx8", "4gpu"] | str = "hgx8",
    demand: float = 1.3,
    queues: int = 4,
    load: float = 0.5,
    seed: int = 0,
    sizes: Literal["itp", "philly"] | str = "itp",
) -> Snapshot:
    """The snapshot of :func:`fat_tree` (same arguments), for the benchmark."""
    return fat_tree(
        spines, leaves_per_spine, nodes_per_leaf, layout, demand, queues, load, seed, sizes
    ).snapshot
