"""The snapshot of a dump, assembled object by object.

Each node, running pod and gang read from a dump is validated as it is added — against
the snapshot's own rules (:class:`gangplan.models.Snapshot`: field types, known levels and
queues, whole extended resources, device layouts that agree with ``allocatable``, a device
held by one pod, ...) — by a snapshot of the validated context (resource names, levels,
device layouts, queues) and that one object, plus any running pods it must not collide
with. An object the models reject is left out and listed under its own source, kind and
name with the problem; the rest converts. Pod names must also be unique in a namespace
across running pods and pending gangs (they become Bindings), which is checked here as
gangs are added.

The snapshot-wide bounds (:class:`~gangplan.adapters.kube.bounds.SnapshotBounds`: at most
``MAX_NODES`` nodes, ``MAX_DEVICES`` devices, ``MAX_PODS`` pods) are counted as parts are
added: a part that would pass one is left out and listed, the parts before it stay.

The context comes first (:class:`SnapshotParts` raises :class:`KubeInputError` if the
models reject it), then nodes, then queues (:meth:`SnapshotParts.set_queues`), then running
pods (each against its node), then gangs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from gangplan.adapters.kube.bounds import SnapshotBounds, node_device_count
from gangplan.adapters.kube.options import KubeInputError
from gangplan.adapters.kube.summary import REASON_INVALID, ReadSummary
from gangplan.models import DisruptionBudget, Gang, Node, RunningPod, Snapshot, SnapshotError
from gangplan.models.instance import format_loc

__all__ = ["Draft", "SnapshotParts"]


@dataclass(frozen=True)
class Draft:
    """One node, gang or running pod as instance-file data, and what the summary calls it
    (``source``: ``file#doc``; ``kind``: ``Node``, ``Gang``, ``Pod``; ``name``:
    ``namespace/name`` or the node's name)."""

    data: dict[str, Any]
    source: str
    kind: str
    name: str


def _problems(err: ValidationError) -> list[tuple[str, str]]:
    """``(path, message)`` of every problem of a snapshot's validation error."""
    out: list[tuple[str, str]] = []
    for e in err.errors():
        ctx_err = (e.get("ctx") or {}).get("error")
        if isinstance(ctx_err, SnapshotError):
            out += [(p.path, p.message) for p in ctx_err.problems]
        else:
            out.append((format_loc(tuple(e["loc"])), e["msg"]))
    return out


class SnapshotParts:
    """The parts of one snapshot, each validated as it is added (see the module docstring).

    ``resources``, ``levels`` and ``device_layouts`` are the snapshot's fields of those names
    (instance-file data).

    Raises:
        KubeInputError: the context itself is rejected by the models.
    """

    def __init__(
        self,
        summary: ReadSummary,
        *,
        resources: dict[str, Any],
        levels: list[dict[str, Any]],
        device_layouts: dict[str, Any],
    ):
        self._summary = summary
        ctx = self._validated(
            {"resources": resources, "levels": levels, "device_layouts": device_layouts}
        )
        self._context: dict[str, Any] = {
            "resources": ctx.resources,
            "levels": ctx.levels,
            "device_layouts": ctx.device_layouts,
            "queues": (),
        }
        self.nodes: dict[str, Node] = {}
        self.running: list[RunningPod] = []
        self.budgets: list[DisruptionBudget] = []
        self.gangs: list[Gang] = []
        self.bounds = SnapshotBounds()
        self._holders: dict[tuple[str, str], list[RunningPod]] = {}
        self._pod_names: dict[tuple[str, str], str] = {}

    @staticmethod
    def _validated(data: dict[str, Any]) -> Snapshot:
        try:
            return Snapshot.model_validate(data)
        except ValidationError as err:
            raise KubeInputError(
                "the dump reads into an inconsistent snapshot: "
                + "; ".join(f"{path}: {msg}" for path, msg in _problems(err))
            ) from None

    def _probe(self, draft: Draft, section: str, index: int, **parts: Any) -> Snapshot | None:
        """The snapshot of the context and ``parts``, where ``draft`` is
        ``parts[section][index]``; None if the models reject it: then ``draft`` is listed
        with every problem (the context and the other parts are valid by construction)."""
        try:
            return Snapshot.model_validate({**self._context, **parts})
        except ValidationError as err:
            prefix = f"{section}[{index}]."
            detail = "; ".join(
                f"{path.removeprefix(prefix)}: {msg}" for path, msg in _problems(err)
            )
            self._summary.skip(draft.source, draft.kind, draft.name, REASON_INVALID, detail)
            return None

    def add_node(self, draft: Draft) -> bool:
        """Add a node; False (listed) if the models reject it or it would take the snapshot
        past a bound."""
        probe = self._probe(draft, "nodes", 0, nodes=(draft.data,))
        if probe is None or not self.take_node(probe.nodes[0], draft):
            return False
        self.nodes[probe.nodes[0].name] = probe.nodes[0]
        return True

    def take_node(self, node: Node, draft: Draft) -> bool:
        """Count ``node`` (valid) against the snapshot-wide bounds; False (``draft``
        listed) if it would pass one. :meth:`add_node` calls it; a reader that validates
        its nodes itself (the live snapshot) calls it for each."""
        resources = self._context["resources"]
        devices = node_device_count(node.allocatable, gpu=resources.gpu, nic=resources.nic)
        return self._within(self.bounds.take_node(devices), draft)

    def take_running(self, draft: Draft) -> bool:
        """Count one running pod against ``MAX_PODS``; False (``draft`` listed) if it
        would pass it (:meth:`add_running` calls it)."""
        return self._within(self.bounds.take_pods(1), draft)

    def _within(self, problem: str | None, draft: Draft) -> bool:
        if problem is None:
            return True
        self._summary.skip(draft.source, draft.kind, draft.name, REASON_INVALID, problem)
        return False

    def set_queues(self, queues: list[Draft]) -> None:
        """Set the queues (before any running pod or gang is added): each validated with the
        context, a queue the models reject (a name over 253 characters, a fractional amount
        of an extended resource) left out and listed under the object it comes from; a gang
        of a queue left out is then left out too, naming the queue.

        Raises:
            KubeInputError: the queues kept, valid one by one, are not together (never seen).
        """
        kept = [
            probe.queues[0]
            for draft in queues
            if (probe := self._probe(draft, "queues", 0, queues=(draft.data,))) is not None
        ]
        self._context["queues"] = self._validated({**self._context, "queues": kept}).queues

    @property
    def queues(self) -> tuple[Any, ...]:
        """The queues kept by :meth:`set_queues` (validated ``Queue`` models)."""
        return tuple(self._context["queues"])

    def add_running(self, draft: Draft) -> bool:
        """Add a running pod, checked with its node and the pods holding its devices; False
        (listed) if the models reject it or it would take the snapshot past ``MAX_PODS``."""
        node_name = str(draft.data.get("node"))
        host = self.nodes.get(node_name)
        holders = list(
            {
                id(p): p
                for dev in draft.data.get("devices") or ()
                for p in self._holders.get((node_name, str(dev)), ())
            }.values()
        )
        probe = self._probe(
            draft,
            "running",
            len(holders),
            nodes=(host,) if host is not None else (),
            running=(*holders, draft.data),
        )
        if probe is None or not self.take_running(draft):
            return False
        pod = probe.running[-1]
        self.running.append(pod)
        for dev in pod.devices:
            self._holders.setdefault((pod.node, dev), []).append(pod)
        self._pod_names[(pod.namespace, pod.name)] = f"running pod {pod.namespace}/{pod.name}"
        return True

    def add_gang(self, draft: Draft) -> bool:
        """Add a gang; False (listed) if the models reject it or one of its pod names is
        taken in its namespace (by a running pod or an earlier gang), or its pods would take
        the snapshot past ``MAX_PODS``."""
        probe = self._probe(draft, "gangs", 0, gangs=(draft.data,))
        if probe is None:
            return False
        gang = probe.gangs[0]
        names = [
            (j, role, role.pod_name(gang.name, k))
            for j, role in enumerate(gang.roles)
            for k in range(role.count)
        ]
        taken = [
            f"roles[{j}].{'pod_names' if role.pod_names else 'name'}: pod name "
            f"{gang.namespace}/{name} is also used by {holder}"
            for j, role, name in names
            if (holder := self._pod_names.get((gang.namespace, name))) is not None
        ]
        if taken:
            self._summary.skip(
                draft.source,
                draft.kind,
                draft.name,
                REASON_INVALID,
                "; ".join(taken) + " (pod names must be unique in a namespace)",
            )
            return False
        if not self._within(self.bounds.take_pods(gang.size), draft):
            return False
        for _, _, name in names:
            self._pod_names[(gang.namespace, name)] = f"gang {gang.key}"
        self.gangs.append(gang)
        return True

    def snapshot(self, metadata: dict[str, Any]) -> Snapshot:
        """The snapshot of every part added.

        Raises:
            KubeInputError: the parts, valid one by one, are not together (never seen: each
                rule across parts is checked as they are added).
        """
        return self._validated(
            {
                **self._context,
                "nodes": tuple(self.nodes.values()),
                "running": tuple(self.running),
                "gangs": tuple(self.gangs),
                "disruption_budgets": tuple(self.budgets),
                "metadata": metadata,
            }
        )
