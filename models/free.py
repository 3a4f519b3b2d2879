"""Free capacity: what running pods leave on each node, per resource and per device.

Both judges of a plan trust this derivation — the verifier (``solver/judges/verify.py``) and the
cluster state the CP-SAT model and the baselines start from (``solver/placers/state.py``) count
every
placement against :class:`NodeFree` — so a mistake here is invisible to both;
``tests/models/test_free.py`` checks it against amounts worked out by hand.

The rules, per node (``docs/design.md``: node capacity is counted against each node's free
amount, allocatable minus running pods, clamped at zero):

* **resources**: allocatable minus the sum of the running pods' requests, clamped at 0; a
  running pod holding more than the node reports, or a resource the node does not advertise,
  is a warning, never an error (real clusters have both: a GPU lost after the pods started).
* **NICs** (whole devices): every NIC a running pod names is taken; then, in pod-name order,
  a pod that asks more NICs than it names gets the lowest-listed free ones.
* **GPUs**: pods naming a GPU go first, then the rest, each group in pod-name order. A whole-GPU
  pod takes the GPUs it names, then the lowest-listed wholly free ones. A share (below 1000
  milli-GPU) goes to the GPU it names, else to the partly used GPU listed lowest that has room,
  else to the lowest-listed whole GPU; a device shared beyond 1000 milli is clamped at 0
  with a warning. A pod left short of devices (a GPU or NIC lost) is a warning too.
* **one rule**: the GPUs never offer more than the node's free total of the GPU resource —
  free milli-GPU over all GPUs is cut to the free GPU amount, last-listed GPU first — so a
  placer that counts devices and a verifier that counts totals agree. (NICs need no cut: a
  pod takes at least as many NIC ids as it asks unless ids run out, so free ids never
  exceed the free NIC amount.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gangplan.models.base import GPU_MILLI
from gangplan.models.quantity import format_quantity

if TYPE_CHECKING:
    from gangplan.models.snapshot import DeviceLayout, Node, RunningPod, Snapshot

__all__ = ["FreeCapacity", "NodeFree", "PodHold", "derive_free", "free_after"]


@dataclass(frozen=True)
class PodHold:
    """The devices one running pod holds, as the derivation below gives them:
    ``gpu_milli`` per GPU device id (1000 for a whole GPU), ``nics`` the NIC ids."""

    gpu_milli: dict[str, int]
    nics: tuple[str, ...]


@dataclass
class NodeFree:
    """What running pods leave on a node (clamped at zero; see :meth:`Snapshot.free
    <gangplan.models.Snapshot.free>`).

    ``resources`` in base units; ``gpu_milli`` per GPU device id (0..1000);
    ``nics`` the free NIC ids; ``running_gpu_milli`` what running pods request of the GPU
    resource (milli-GPU, unclamped); ``holds`` the devices each running pod of the node
    holds, by ``(namespace, name)`` (what an eviction gives back).
    """

    resources: dict[str, int]
    gpu_milli: dict[str, int]
    nics: frozenset[str]
    running_gpu_milli: int = 0
    holds: dict[tuple[str, str], PodHold] = field(default_factory=dict)

    @property
    def whole_gpus(self) -> tuple[str, ...]:
        """Devices with all 1000 milli-GPU free (what a whole-GPU pod can take)."""
        return tuple(d for d, m in self.gpu_milli.items() if m == GPU_MILLI)


@dataclass
class FreeCapacity:
    """Every node's :class:`NodeFree` by node name, and the warnings for inconsistent input
    (each names the node and the resource, device or label)."""

    free: dict[str, NodeFree] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def derive_free(s: Snapshot) -> FreeCapacity:
    """Free amounts per node and device, and the warnings for inconsistent input."""
    out = FreeCapacity(warnings=list(_snapshot_warnings(s)))
    for node in s.nodes:
        out.free[node.name] = _node_free(s, node, out.warnings)
    return out


def _snapshot_warnings(s: Snapshot) -> Iterator[str]:
    if not s.nodes and s.gangs:
        yield (
            "the snapshot has no nodes: no gang can be placed (a Kubernetes dump without "
            "`kubectl get nodes`?)"
        )
    for level in s.levels:
        for node in s.nodes:
            if s.domain_name(node, level) is None:
                how = f"label {level.node_label!r}" if level.node_label else "explicit membership"
                yield (
                    f"node {node.name!r} has no {how} for level {level.name!r}: "
                    f"it joins no {level.name} domain"
                )


def free_after(s: Snapshot, node: Node, evicted: Collection[tuple[str, str]]) -> NodeFree:
    """What the running pods of ``node`` leave once the pods ``evicted`` (``(namespace,
    name)``) are gone, by the rules of the module docstring: devices are handed out as if
    every pod ran (so a pod kept holds the very devices it holds now), then only the kept
    pods' requests and devices count. The verifier and the cluster state of placers and the
    model both use it, so they agree on what an eviction frees."""
    return _node_free(s, node, [], frozenset(evicted))


def _node_free(
    s: Snapshot,
    node: Node,
    warnings: list[str],
    evicted: frozenset[tuple[str, str]] = frozenset(),
) -> NodeFree:
    layout = s.layout_of(node)
    pods = s.running_on(node.name)
    kept = [p for p in pods if (p.namespace, p.name) not in evicted]
    held: Counter[str] = Counter()
    for pod in kept:
        held.update(pod.requests)
    if not evicted:
        warnings.extend(_held_warnings(node, held))
    nic_holds = _nic_holds(s, node, layout, pods, warnings)
    gpu_holds = _gpu_holds(s, node, layout, pods, warnings)
    holds = {
        key: PodHold(gpu_holds.get(key, {}), nic_holds.get(key, ()))
        for key in ((p.namespace, p.name) for p in pods)
    }
    taken_nics = {x for p in kept for x in holds[(p.namespace, p.name)].nics}
    nics = [x for x in layout.nic_ids if x not in taken_nics]
    gpu_milli = {}
    for dev in layout.gpu_ids:
        used = sum(holds[(p.namespace, p.name)].gpu_milli.get(dev, 0) for p in kept)
        gpu_milli[dev] = max(0, GPU_MILLI - used)
    resources = {res: max(0, amount - held.get(res, 0)) for res, amount in node.allocatable.items()}
    _within_total(gpu_milli, resources.get(s.gpu, 0))
    return NodeFree(
        resources=resources,
        gpu_milli=gpu_milli,
        nics=frozenset(nics),
        running_gpu_milli=sum(pod.requests.get(s.gpu, 0) for pod in kept),
        holds=holds,
    )


def _within_total(gpu_milli: dict[str, int], total: int) -> None:
    """Lower the devices' free milli-GPU, last-listed device first, until they add up to at
    most the node's free total (allocatable minus running requests, clamped at 0).

    The two views disagree only when running pods hold more than the devices can show (a
    GPU lost after the pods started: a pod left without its devices); the node total is the
    one the kubelet enforces, so the devices never offer more than it (one free-capacity
    rule for placers, the model and the verifier)."""
    excess = sum(gpu_milli.values()) - total
    for dev in reversed(list(gpu_milli)):
        if excess <= 0:
            return
        cut = min(excess, gpu_milli[dev])
        gpu_milli[dev] -= cut
        excess -= cut


def _held_warnings(node: Node, held: Counter[str]) -> Iterator[str]:
    for res, amount in sorted(held.items()):
        have = node.allocatable.get(res)
        if have is None:
            yield (
                f"node {node.name!r}: running pods request {format_quantity(res, amount)} "
                f"{res}, which the node does not advertise"
            )
        elif amount > have:
            yield (
                f"node {node.name!r}: running pods hold {format_quantity(res, amount)} "
                f"{res} but the node reports {format_quantity(res, have)}; free clamped at 0"
            )


def _nic_holds(
    s: Snapshot, node: Node, layout: DeviceLayout, pods: Sequence[RunningPod], warnings: list[str]
) -> dict[tuple[str, str], tuple[str, ...]]:
    """The NIC ids each pod holds (by ``(namespace, name)``): every named one first, then the
    lowest-listed free ones go to pods that ask more than they name (in pod-name order)."""
    nic_ids = set(layout.nic_ids)
    named = {d for pod in pods for d in pod.devices if d in nic_ids}
    free = [x for x in layout.nic_ids if x not in named]
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for pod in sorted(pods, key=lambda p: p.name):
        want = pod.requests.get(s.nic, 0) // GPU_MILLI
        mine = [d for d in pod.devices if d in nic_ids]
        have = len(mine)
        if want > have:
            given = free[: want - have]
            del free[: len(given)]
            mine += given
            if have + len(given) < want:
                warnings.append(
                    f"node {node.name!r}: running pod {pod.name!r} holds {want} NICs but "
                    f"only {have + len(given)} NIC devices are left for it"
                )
        if mine:
            out[(pod.namespace, pod.name)] = tuple(mine)
    return out


def _gpu_holds(
    s: Snapshot, node: Node, layout: DeviceLayout, pods: Sequence[RunningPod], warnings: list[str]
) -> dict[tuple[str, str], dict[str, int]]:
    """Milli-GPU each pod holds per GPU id (by ``(namespace, name)``): pods naming their
    GPUs first, then the others; a device's free milli is 1000 minus what its holders hold,
    clamped at 0."""
    gpu_milli = {g: GPU_MILLI for g in layout.gpu_ids}
    position = {g: i for i, g in enumerate(layout.gpu_ids)}
    out: dict[tuple[str, str], dict[str, int]] = {}
    for pod in sorted(pods, key=lambda p: (not any(d in gpu_milli for d in p.devices), p.name)):
        want = pod.requests.get(s.gpu, 0)
        named = [d for d in pod.devices if d in gpu_milli]
        if want <= 0:
            continue
        if want < GPU_MILLI:
            candidates = named or sorted(
                (d for d in gpu_milli if gpu_milli[d] >= want),
                key=lambda d: (gpu_milli[d] == GPU_MILLI, position[d]),
            )
            if not candidates:
                warnings.append(
                    f"node {node.name!r}: running pod {pod.name!r} holds a GPU share but no "
                    f"GPU of the node has {want} milli free"
                )
                continue
            dev = candidates[0]
            out[(pod.namespace, pod.name)] = {dev: want}
            gpu_milli[dev] -= want
            if gpu_milli[dev] < 0:
                warnings.append(
                    f"node {node.name!r}: GPU {dev!r} is shared beyond 1000 milli-GPU; "
                    "free clamped at 0"
                )
                gpu_milli[dev] = 0
            continue
        need = want // GPU_MILLI
        taken = named[:need]
        if len(taken) < need:
            spare = [d for d in layout.gpu_ids if gpu_milli[d] == GPU_MILLI and d not in taken]
            taken += spare[: need - len(taken)]
        for d in taken:
            gpu_milli[d] = 0
        if taken:
            out[(pod.namespace, pod.name)] = dict.fromkeys(taken, GPU_MILLI)
        if len(taken) < need:
            warnings.append(
                f"node {node.name!r}: running pod {pod.name!r} holds {need} GPUs but only "
                f"{len(taken)} GPU devices are left for it (a GPU was lost?)"
            )
    return out
