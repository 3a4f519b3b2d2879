"""FGD's fragmentation measure: pod shapes, the target workload, ``F_n(m)`` and a scorer of
``F_n(M)`` and its change on a :class:`~gangplan.solver.placers.state.ClusterState`.

Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC '23, §3-§4; its simulator,
github.com/hkust-adsl/kubernetes-scheduler-simulator (``pkg/utils/frag.go``:
``NodeGpuShareFragAmount``, ``GetNodePodFrag``; ``pkg/simulator/plugin/fgd_score.go``), is
followed where the paper leaves a detail open. The placer that descends this measure is
:mod:`gangplan.solver.placers.fgd`.

Units: milli-GPU (one GPU device holds 1000), milli-CPU.

**Pod shape** ``m``: CPU ``c_m``, GPUs ``k_m``, milli-GPU per GPU ``g_m`` (below 1000 only for
a GPU share, ``k_m = 1``), and the GPU models it accepts (none named: any). Memory is not
part of the shape (as in the paper and the simulator); it still decides whether a pod fits.

**Node** ``n``: free milli-GPU per device ``f_1..f_G``, free CPU ``C_n``, its GPU model.

**Fragmentation of n for shape m** (milli-GPU that pods of shape ``m`` cannot use)::

    F_n(m) = sum_i f_i                    if k_m = 0 (a CPU-only pod uses no GPU: every
                                          free milli-GPU is fragment to it), or n's model is
                                          not accepted, or m does not fit n (fewer than k_m
                                          devices with f_i >= g_m, or C_n < c_m);
    F_n(m) = sum_{i : f_i < g_m} f_i      otherwise (the devices too small for one of its
                                          GPUs).

**Expected fragmentation** for a workload ``M`` of shapes with popularity ``p_m``::

    F_n(M) = sum_m p_m * F_n(m)

**The workload.** The one the snapshot declares (``Snapshot.workload``), else its pending
and running pods, one count per pod (:meth:`Workload.of_snapshot`); the score's
``fragmentation.expected`` entry measures against it (:mod:`gangplan.solver.judges.score`). A replay
gives the FGD placer the trace's distribution through the cycle's context
(:attr:`~gangplan.solver.context.CycleContext.workload`). ``popularity`` keeps the
most frequent shapes until they cover that share of the pods (the simulator's
``podPopularityThreshold``, 95 in the paper's runs) and renormalises.

Speed: ``F_n(M)`` is memoised on the node's state (model, free CPU, sorted free milli-GPU),
so identical nodes share one computation; each node's ``Δ`` per pod shape is cached against
:meth:`ClusterState.version`, so placing a pod recomputes only the node that changed.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gangplan.models import GPU_MILLI, Gang, Role, Snapshot
from gangplan.models.quantity import CPU
from gangplan.solver.placers.state import ClusterState, DeviceChoice

__all__ = ["FgdScorer", "PodShape", "Workload", "shape_fragmentation"]


@dataclass(frozen=True, order=True)
class PodShape:
    """What the fragmentation measure sees of a pod (Weng et al. §4: a "task").

    ``cpu_milli`` milli-CPU; ``gpus`` GPU devices (0: a CPU-only pod); ``gpu_milli``
    milli-GPU per device (1000 for whole GPUs, below 1000 for a share, 0 without GPUs);
    ``gpu_models`` the GPU models it accepts (empty: any).
    """

    cpu_milli: int
    gpus: int
    gpu_milli: int
    gpu_models: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, requests: Mapping[str, int], gpu_resource: str, gpu_models: Sequence[str] = ()
    ) -> PodShape:
        """The shape of a pod asking ``requests`` (base units; the GPU resource in milli-GPU:
        a share below 1000, else whole GPUs)."""
        gpu = requests.get(gpu_resource, 0)
        cpu = requests.get(CPU, 0)
        if gpu <= 0:
            return cls(cpu, 0, 0, ())
        models = tuple(sorted(gpu_models))
        if gpu < GPU_MILLI:
            return cls(cpu, 1, gpu, models)
        return cls(cpu, gpu // GPU_MILLI, GPU_MILLI, models)


@dataclass(frozen=True)
class Workload:
    """The target workload ``M``: pod shapes with integer weights (pod counts).

    Popularity ``p_m`` is ``weight_m / total``; the placer compares weighted sums
    ``sum_m weight_m * F_n(m)`` (exact integers), which order nodes as ``F_n(M)`` does.
    """

    shapes: tuple[tuple[PodShape, int], ...]

    @property
    def total(self) -> int:
        """The sum of the weights (pods)."""
        return sum(w for _, w in self.shapes)

    def probabilities(self) -> dict[PodShape, float]:
        """``p_m`` per shape (sums to 1; empty for an empty workload)."""
        total = self.total
        return {s: w / total for s, w in self.shapes} if total else {}

    @classmethod
    def from_counts(cls, counts: Mapping[PodShape, int], popularity: float = 1.0) -> Workload:
        """Shapes weighted by their counts; only the most frequent ones that together cover
        ``popularity`` (0 < p <= 1) of the pods are kept (more frequent first, ties by the
        larger shape, as the simulator's ``GetTypicalPods`` sorts them).

        Raises:
            ValueError: ``popularity`` outside (0, 1] or a negative count.
        """
        if not 0 < popularity <= 1:
            raise ValueError(f"popularity must be in (0, 1] (got {popularity})")
        if any(c < 0 for c in counts.values()):
            raise ValueError("shape counts must be >= 0")
        ranked = sorted(
            ((s, c) for s, c in counts.items() if c > 0),
            key=lambda sc: (sc[1], sc[0].cpu_milli, sc[0].gpu_milli, sc[0].gpus, sc[0].gpu_models),
            reverse=True,
        )
        total = sum(c for _, c in ranked)
        kept: list[tuple[PodShape, int]] = []
        covered = 0
        for shape, count in ranked:
            if covered >= popularity * total:
                break
            kept.append((shape, count))
            covered += count
        return cls(tuple(kept))

    @classmethod
    def from_pods(cls, shapes: Iterable[PodShape], popularity: float = 1.0) -> Workload:
        """One count per pod shape given (see :meth:`from_counts`)."""
        return cls.from_counts(Counter(shapes), popularity)

    @classmethod
    def of_snapshot(cls, snapshot: Snapshot, popularity: float = 1.0) -> Workload:
        """The workload ``snapshot`` declares (``Snapshot.workload``: shapes and weights);
        else its pending and running pods, one count per pod (a role of 4 counts 4; a
        running pod's shape names no GPU model)."""
        counts: Counter[PodShape] = Counter()
        if snapshot.workload:
            for entry in snapshot.workload:
                counts[PodShape.of(entry.requests, snapshot.gpu, entry.gpu_models)] += entry.weight
            return cls.from_counts(counts, popularity)
        for gang in snapshot.gangs:
            for role in gang.roles:
                shape = PodShape.of(role.requests, snapshot.gpu, gang.gpu_models)
                counts[shape] += role.count
        for pod in snapshot.running:
            counts[PodShape.of(pod.requests, snapshot.gpu)] += 1
        return cls.from_counts(counts, popularity)

    def reduced(self) -> tuple[tuple[PodShape, int], ...]:
        """The shapes with their weights divided by the weights' greatest common divisor
        (the same popularities, in smaller integers)."""
        unit = math.gcd(*(w for _, w in self.shapes)) if self.shapes else 1
        return tuple((s, w // unit) for s, w in self.shapes)


def shape_fragmentation(
    free_milli: Sequence[int], cpu_free: int, gpu_model: str | None, shape: PodShape
) -> int:
    """``F_n(m)``: milli-GPU of a node that pods of ``shape`` cannot use (module docstring).

    Args:
        free_milli: free milli-GPU of each GPU device of the node (0..1000).
        cpu_free: the node's free milli-CPU.
        gpu_model: the node's GPU model (None: unknown or no GPU).
        shape: the pod shape ``m``.
    """
    total = sum(free_milli)
    if total == 0 or shape.gpus == 0:
        return total
    if shape.gpu_models and gpu_model not in shape.gpu_models:
        return total
    if cpu_free < shape.cpu_milli:
        return total
    fitting = sum(1 for f in free_milli if f >= shape.gpu_milli)
    if fitting < shape.gpus:
        return total
    return sum(f for f in free_milli if f < shape.gpu_milli)


# --------------------------------------------------------------------------- scorer


class _GroupedWorkload:
    """``sum_m weight_m * F_n(m)`` (:func:`shape_fragmentation`) at the cost of the distinct
    GPU forms of the workload, not of its shapes: shapes alike in GPU count, milli-GPU per
    GPU and accepted models differ only in CPU, and for a node a shape either fits (it
    counts the devices too small for it) or not (it counts every free milli-GPU); which of
    them fit is a CPU threshold, found by bisection over their CPUs. Exactly the same
    integer as the sum over shapes."""

    def __init__(self, workload: Workload):
        by_form: dict[tuple[int, int, tuple[str, ...]], list[tuple[int, int]]] = {}
        self.cpu_only = 0
        """the weight of shapes without GPUs: every free milli-GPU is fragment to them"""
        for shape, weight in workload.shapes:
            if shape.gpus == 0:
                self.cpu_only += weight
            else:
                key = (shape.gpus, shape.gpu_milli, shape.gpu_models)
                by_form.setdefault(key, []).append((shape.cpu_milli, weight))
        self.forms: list[tuple[int, int, tuple[str, ...], list[int], list[int], int]] = []
        """(gpus, milli per GPU, models, CPUs sorted, weight of the first i of them, total)"""
        for (gpus, milli, models), shapes in by_form.items():
            shapes.sort()
            cum = [0]
            for _cpu, w in shapes:
                cum.append(cum[-1] + w)
            self.forms.append((gpus, milli, models, [c for c, _ in shapes], cum, cum[-1]))

    def fragmentation(self, model: str | None, cpu_free: int, frees: tuple[int, ...]) -> int:
        """Weighted ``F_n(M)`` of a node with GPU ``model``, ``cpu_free`` milli-CPU and
        ``frees`` milli-GPU per device, in ascending order (as every caller sorts them):
        the devices too small for a form are then a prefix, found by bisection, and their
        milli-GPU a prefix sum."""
        below = list(itertools.accumulate(frees, initial=0))  # below[i]: the i smallest
        total = below[-1]
        if total == 0:
            return 0
        devices = len(frees)
        out = self.cpu_only * total
        for gpus, milli, models, cpus, cum, weight in self.forms:
            small = bisect.bisect_left(frees, milli)  # devices with less than milli free
            if (models and model not in models) or devices - small < gpus:
                out += weight * total
                continue
            fit = cum[bisect.bisect_right(cpus, cpu_free)]  # the shapes whose CPU fits
            out += fit * below[small] + (weight - fit) * total
        return out


def _sigmoid_score(delta: float) -> int:
    """The simulator's FGD node score, ``int(100 * sigmoid(-Δ / 1000))`` (Δ in milli-GPU)."""
    x = -delta / 1000.0
    if x >= 0:
        s = 1.0 / (1.0 + math.exp(-x))
    else:
        e = math.exp(x)
        s = e / (1.0 + e)
    return int(s * 100)


class FgdScorer:
    """``F_n(M)`` and ``Δ`` on a :class:`ClusterState`, cached per node state.

    Values returned by :meth:`fragmentation` and :meth:`delta` are *weighted*: ``sum_m
    weight_m * F_n(m)``, i.e. ``F_n(M) * workload.total`` (milli-GPU x pods); divide by
    ``workload.total`` for milli-GPU (:meth:`expected_fragmentation`).
    """

    def __init__(self, state: ClusterState, workload: Workload, *, quantize: bool = False):
        self.state = state
        self.workload = workload
        self.quantize = quantize
        snapshot = state.snapshot
        self._model = {n.name: n.gpu_model for n in snapshot.nodes}
        self._total = max(1, workload.total)
        self._memo: dict[tuple[object, ...], int] = {}
        self._grouped = _GroupedWorkload(workload)
        """weighted F_n(M) by node state (model, free CPU, sorted free milli-GPU)"""
        self._now: dict[str, tuple[int, int]] = {}
        self._deltas: dict[
            tuple[str, tuple[int, int, int]], tuple[int, int | None, str | None]
        ] = {}

    # ------------------------------------------------------------------ the measure

    def _frag_of(self, model: str | None, cpu_free: int, frees: tuple[int, ...]) -> int:
        key = (model, cpu_free, frees)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._grouped.fragmentation(model, cpu_free, frees)
        return hit

    def fragmentation(self, node: str) -> int:
        """Weighted ``F_n(M)`` of ``node`` now (see the class docstring)."""
        version = self.state.version(node)
        hit = self._now.get(node)
        if hit is not None and hit[0] == version:
            return hit[1]
        st = self.state.nodes[node]
        value = self._frag_of(
            self._model[node], st.resources.get(CPU, 0), tuple(sorted(st.gpu_milli.values()))
        )
        self._now[node] = (version, value)
        return value

    def expected_fragmentation(self, node: str) -> float:
        """``F_n(M)`` of ``node`` now, in milli-GPU."""
        return self.fragmentation(node) / self._total

    def delta(
        self, node: str, cpu: int, gpus: int, gpu_milli: int
    ) -> tuple[int, str | None] | None:
        """Weighted ``Δ`` of one more pod of this shape on ``node`` now, and the device it
        takes when it is a share (None otherwise); None if its GPUs do not fit. CPU is not
        checked here (callers check every resource)."""
        key = (node, (cpu, gpus, gpu_milli))
        version = self.state.version(node)
        hit = self._deltas.get(key)
        if hit is not None and hit[0] == version:
            return None if hit[1] is None else (hit[1], hit[2])
        value = self._compute_delta(node, cpu, gpus, gpu_milli)
        self._deltas[key] = (version, *value) if value is not None else (version, None, None)
        return value

    def _compute_delta(
        self, node: str, cpu: int, gpus: int, gpu_milli: int
    ) -> tuple[int, str | None] | None:
        st = self.state.nodes[node]
        model = self._model[node]
        cpu_free = st.resources.get(CPU, 0)
        frees = [st.gpu_milli[d] for d in st.gpu_order]
        before = self.fragmentation(node)
        if gpus == 0:
            return self._frag_of(model, cpu_free - cpu, tuple(sorted(frees))) - before, None
        if gpu_milli < GPU_MILLI:
            best: tuple[int, str] | None = None
            seen: set[int] = set()
            for i, d in enumerate(st.gpu_order):
                f = frees[i]
                if f < gpu_milli or f in seen:
                    continue
                seen.add(f)
                after = list(frees)
                after[i] = f - gpu_milli
                value = self._frag_of(model, cpu_free - cpu, tuple(sorted(after))) - before
                if best is None or value < best[0]:
                    best = (value, d)
            return best
        full = sum(1 for f in frees if f == GPU_MILLI)
        if full < gpus:
            return None
        after = sorted(frees)
        # the k largest entries are full devices (1000 is the maximum): take them
        for j in range(len(after) - gpus, len(after)):
            after[j] = 0
        return self._frag_of(model, cpu_free - cpu, tuple(sorted(after))) - before, None

    def delta_of_choice(self, node: str, role: Role, choice: DeviceChoice) -> int:
        """Weighted ``Δ`` of placing one pod of ``role`` on ``node`` with these devices."""
        st = self.state.nodes[node]
        frees = dict(st.gpu_milli)
        for d in choice.gpus:
            frees[d] -= choice.gpu_milli if choice.gpu_milli is not None else GPU_MILLI
        cpu_free = st.resources.get(CPU, 0) - role.requests.get(CPU, 0)
        after = self._frag_of(self._model[node], cpu_free, tuple(sorted(frees.values())))
        return after - self.fragmentation(node)

    def rank(self, weighted_delta: int) -> float:
        """What nodes are compared by (lower is better): ``Δ``, or minus the simulator's
        integer score when ``quantize``."""
        if self.quantize:
            return -_sigmoid_score(weighted_delta / self._total)
        return weighted_delta

    # ------------------------------------------------------------------ one pod

    def best_on_node(
        self, gang: Gang, role: Role, node: str
    ) -> tuple[int, DeviceChoice | None] | None:
        """Weighted ``Δ`` and devices for one more pod of ``role`` on ``node`` now (devices
        None: whole GPUs, left to :meth:`ClusterState.choose_devices`, which takes fully
        free devices, so ``Δ`` does not depend on which); None if it does not fit."""
        state = self.state
        state.meter.add(1)  # one node evaluated (the deterministic clock's work unit)
        st = state.nodes[node]
        req = role.requests
        gpu_res, nic_res = state.gpu, state.nic
        for res, amount in req.items():
            if res != gpu_res and res != nic_res and amount > st.resources.get(res, 0):
                return None
        gpu = req.get(gpu_res, 0)
        if req.get(nic_res, 0) > 0 or (gang.joint != "none" and gpu):
            choice = state.choose_devices(gang, role, node)
            if choice is None:
                return None
            return self.delta_of_choice(node, role, choice), choice
        cpu = req.get(CPU, 0)
        if gpu <= 0:
            got = self.delta(node, cpu, 0, 0)
        elif gpu < GPU_MILLI:
            got = self.delta(node, cpu, 1, gpu)
        else:
            got = self.delta(node, cpu, gpu // GPU_MILLI, GPU_MILLI)
        if got is None:
            return None
        value, device = got
        if device is not None:
            return value, DeviceChoice(gpus=(device,), gpu_milli=gpu)
        return value, None

    def choose(
        self, gang: Gang, role: Role, nodes: Iterable[str]
    ) -> tuple[str, int, DeviceChoice | None] | None:
        """The node among ``nodes`` where one pod of ``role`` grows fragmentation least:
        ``(node, weighted Δ, devices)``, ties to the first in ``nodes``' order; None if it
        fits none."""
        best_rank: float | None = None
        best: tuple[str, int, DeviceChoice | None] | None = None
        for node in nodes:
            got = self.best_on_node(gang, role, node)
            if got is None:
                continue
            r = self.rank(got[0])
            if best_rank is None or r < best_rank:
                best_rank, best = r, (node, got[0], got[1])
        return best
