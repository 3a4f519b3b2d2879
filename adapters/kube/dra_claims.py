"""Pods that ask devices with DRA: their ResourceClaims and ResourceClaimTemplates.

A pod asks DRA devices through ``spec.resourceClaims`` (core/v1 ``PodResourceClaim``), each
naming a ``ResourceClaim`` or a ``ResourceClaimTemplate`` (``resource.k8s.io/v1``) its claim
is made from; its containers use them by name (``resources.claims``). A claim belongs to the
pod whatever its containers name, so every entry counts once.

**A pending pod** asks, per request of the claim's ``spec.devices.requests``
(``exactly``, or the first alternative of ``firstAvailable``, noted): ``count`` devices
(default 1) of its ``deviceClassName``, read as the GPU resource when the class selects GPUs
and as the NIC resource when it selects RDMA NICs (:meth:`~gangplan.adapters.kube.dra.
DraInventory.class_kind`), in milli-units as a GPU request is. Its ``selectors`` (CEL,
:mod:`gangplan.adapters.kube.cel`) are evaluated on every device of the class: the pod may go
only to nodes where at least ``count`` devices match and every device of the class matches
(gangplan chooses among a node's devices, so a node where only some match is left out, with
a note); this becomes a required node affinity on ``kubernetes.io/hostname``. A selector
gangplan cannot evaluate is noted and not applied (the pod is read as asking any devices of
the class). ``allocationMode: All`` and a class that is neither GPUs nor NICs make the pod
unreadable (:class:`~gangplan.adapters.kube.pods.PodProblem`, listed); ``adminAccess``
requests take no device and are not counted.

A claim's ``constraints`` with ``matchAttribute: resource.kubernetes.io/pcieRoot`` over a GPU
and a NIC request (or over all requests) is read as joint allocation ``pcie``; over a NUMA
attribute (``resource.kubernetes.io/numaNode``, ``dra.net/numaNode``) as ``numa``. gangplan's
joint rule (:mod:`gangplan.models`, DESIGN "joint allocation") gives a pod asking fewer NICs
than GPUs its NICs from the switches holding its GPUs, which is weaker than DRA's (all of
them under one root): the note says so.

A ResourceClaim that is already allocated (``status.allocation``) and that the pod shares
holds its devices already: the pod asks nothing more from it and may go only to that node.

**A running pod** holds the devices its claims' ``status.allocation.devices.results`` name
(``driver``, ``pool``, ``device``; :mod:`gangplan.adapters.kube.dra` maps them to the node's
device ids), and asks them: a claim is counted for the first pod of its
``status.reservedFor`` (a shared claim's devices are held once), never for a pod the claim
does not list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from gangplan.adapters.kube.cel import CelUnsupported, Selector, compile_selector, matcher
from gangplan.adapters.kube.dra import GROUP, PCIE_ROOT, STANDARD_NUMA, DraInventory
from gangplan.adapters.kube.objects import Registry
from gangplan.adapters.kube.pods import HOSTNAME, PodClaim, PodInfo, PodProblem
from gangplan.adapters.kube.summary import REASON_ASSUMED, REASON_NOT_MAPPED, ReadSummary
from gangplan.models import GPU_MILLI, NodeSelectorRequirement, NodeSelectorTerm

__all__ = ["MAX_REQUEST_COUNT", "ClaimReader"]

NUMA_ATTRIBUTES = (STANDARD_NUMA, "dra.net/numaNode", "gpu.nvidia.com/numa")
MAX_REQUEST_COUNT = 128
"""The largest ``count`` of one request (``resource.k8s.io/v1`` ``AllocationResultsMaxSize``:
an allocation names at most 128 devices)."""


@dataclass
class _Ask:
    """What a pending pod's claims add up to."""

    counts: dict[str, int]
    nodes: set[str] | None
    joint: str | None
    notes: list[tuple[str, str]]


class ClaimReader:
    """Resolves pods' DRA claims against the dump's claims, templates and slices.

    ``inventory``: the slices' devices (None: the dump has none); ``gpu`` / ``nic``: the
    snapshot's resource names; ``hostnames``: node name -> its ``kubernetes.io/hostname``
    label (the node affinity a selector becomes)."""

    def __init__(
        self,
        reg: Registry,
        inventory: DraInventory | None,
        summary: ReadSummary,
        *,
        gpu: str,
        nic: str,
        hostnames: dict[str, str],
    ):
        self._reg = reg
        self._inv = inventory or DraInventory()
        self._summary = summary
        self._gpu, self._nic = gpu, nic
        self._hostnames = hostnames
        self._selectors: dict[str, Selector | str] = {}

    def apply_all(self, pods: Iterable[PodInfo]) -> list[PodInfo]:
        """``pods`` with their claims read; a pod whose claims cannot be read is listed
        under its source and left out."""
        out: list[PodInfo] = []
        for pod in pods:
            try:
                out.append(self.apply(pod))
            except PodProblem as err:
                self._summary.skip(
                    pod.source,
                    pod.kind,
                    f"{pod.namespace}/{pod.name}",
                    REASON_NOT_MAPPED,
                    str(err),
                )
        return out

    def apply(self, pod: PodInfo) -> PodInfo:
        """``pod`` with what its claims ask (pending) or hold (running) added; ``pod``
        itself when it has no claim.

        Raises:
            PodProblem: a claim or template that is not in the dump, a request gangplan
                cannot read (the field is named).
        """
        if not pod.claims:
            return pod
        if pod.node_name:
            return self._running(pod)
        ask = self._pending_ask(pod)
        who = f"{pod.namespace}/{pod.name}"
        for reason, msg in ask.notes:
            self._summary.note(pod.source, pod.kind, who, reason, msg)
        requests = dict(pod.requests)
        for res, milli in ask.counts.items():
            requests[res] = requests.get(res, 0) + milli
        affinity = pod.affinity
        if ask.nodes is not None:
            affinity = self._restrict(pod, affinity, ask.nodes)
        joint = pod.joint
        if ask.joint and joint and ask.joint != joint:
            self._summary.note(
                pod.source,
                pod.kind,
                who,
                REASON_NOT_MAPPED,
                f"its claims' constraints ask joint {ask.joint!r}, its annotation {joint!r}: "
                f"{joint!r} used",
            )
        return replace(pod, requests=requests, affinity=affinity, joint=joint or ask.joint)

    # ------------------------------------------------------------------ pending

    def _claim_spec(self, pod: PodInfo, i: int, c: PodClaim) -> tuple[Any, Any | None]:
        """The ``ResourceClaimSpec`` an entry asks, and the claim itself when it names one."""
        where = f"spec.resourceClaims[{i}]"
        if c.claim:
            obj = self._reg.get(GROUP, "ResourceClaim", pod.namespace, c.claim)
            if obj is None:
                raise PodProblem(
                    f"{where}.resourceClaimName: ResourceClaim {pod.namespace}/{c.claim} is not "
                    "in the dump"
                )
            return obj.model.spec, obj.model
        if c.template:
            obj = self._reg.get(GROUP, "ResourceClaimTemplate", pod.namespace, c.template)
            if obj is None:
                raise PodProblem(
                    f"{where}.resourceClaimTemplateName: ResourceClaimTemplate "
                    f"{pod.namespace}/{c.template} is not in the dump"
                )
            return obj.model.spec.spec, None
        raise PodProblem(
            f"{where}: neither resourceClaimName nor resourceClaimTemplateName is given"
        )

    def _pending_ask(self, pod: PodInfo) -> _Ask:
        ask = _Ask({}, None, None, [])
        for i, c in enumerate(pod.claims):
            spec, claim = self._claim_spec(pod, i, c)
            if claim is not None and claim.status is not None and claim.status.allocation:
                node = self._allocated_node(claim)
                ask.notes.append(
                    (
                        REASON_ASSUMED,
                        f"spec.resourceClaims[{i}]: ResourceClaim {c.claim} is allocated already"
                        + (
                            f" on node {node!r}: the pod shares its devices there"
                            if node
                            else ": its devices are held; the pod asks none more"
                        ),
                    )
                )
                if node:
                    ask.nodes = {node} if ask.nodes is None else ask.nodes & {node}
                continue
            devices = spec.devices if spec is not None else None
            kinds: dict[str, str] = {}
            for j, req in enumerate((devices.requests if devices else None) or []):
                where = f"spec.resourceClaims[{i}] ({c.claim or c.template}) requests[{j}]"
                kind = self._request(pod, where, req, ask)
                if kind:
                    kinds[req.name] = kind
            for k, con in enumerate((devices.constraints if devices else None) or []):
                self._constraint(f"spec.resourceClaims[{i}] constraints[{k}]", con, kinds, ask)
        return ask

    def _request(self, pod: PodInfo, where: str, req: Any, ask: _Ask) -> str | None:
        exact = req.exactly
        if exact is None and req.first_available:
            exact = req.first_available[0]
            ask.notes.append(
                (
                    REASON_ASSUMED,
                    f"{where}: firstAvailable read as its first alternative "
                    f"({exact.name!r}, DeviceClass {exact.device_class_name!r})",
                )
            )
        if exact is None:
            raise PodProblem(f"{where}: neither exactly nor firstAvailable is given")
        if getattr(exact, "admin_access", None):
            ask.notes.append((REASON_ASSUMED, f"{where}: adminAccess takes no device: not counted"))
            return None
        if (exact.allocation_mode or "ExactCount") != "ExactCount":
            raise PodProblem(
                f"{where}.allocationMode {exact.allocation_mode!r}: gangplan reads ExactCount "
                "only (All asks every matching device of the node)"
            )
        count = 1 if exact.count is None else exact.count
        if not 1 <= count <= MAX_REQUEST_COUNT:
            raise PodProblem(
                f"{where}.count {count}: accepted 1 to {MAX_REQUEST_COUNT} (the API's limit)"
            )
        kind, why = self._inv.class_kind(exact.device_class_name)
        if kind is None:
            raise PodProblem(f"{where}: {why}")
        if getattr(exact, "capacity", None) is not None:
            ask.notes.append((REASON_NOT_MAPPED, f"{where}.capacity: not modelled (ignored)"))
        res = self._gpu if kind == "gpu" else self._nic
        ask.counts[res] = ask.counts.get(res, 0) + count * GPU_MILLI
        selectors = self._compiled(where, exact.selectors or [], ask)
        if selectors:
            nodes = self._nodes_for(where, exact.device_class_name, selectors, count, ask)
            if nodes is not None:
                ask.nodes = nodes if ask.nodes is None else ask.nodes & nodes
        return kind

    def _compiled(self, where: str, selectors: list[Any], ask: _Ask) -> list[Selector]:
        out: list[Selector] = []
        for k, sel in enumerate(selectors):
            expr = sel.cel.expression if sel.cel is not None else ""
            hit = self._selectors.get(expr)
            if hit is None:
                try:
                    hit = compile_selector(expr)
                except CelUnsupported as err:
                    hit = str(err)
                self._selectors[expr] = hit
            if isinstance(hit, str):
                ask.notes.append(
                    (
                        REASON_NOT_MAPPED,
                        f"{where}.selectors[{k}].cel.expression {expr[:200]!r}: gangplan cannot "
                        f"evaluate it ({hit}); not applied: the pod is read as asking any devices "
                        "of its class, and kube-scheduler may refuse the node gangplan picks",
                    )
                )
                continue
            out.append(hit)
        return out

    def _nodes_for(
        self, where: str, cls: str, selectors: list[Selector], count: int, ask: _Ask
    ) -> set[str] | None:
        """The nodes a request's selectors allow; None where they allow every node with
        devices of the class (no restriction)."""
        match = matcher(selectors)
        of_class = self._inv.class_devices(cls) or []
        by_node: dict[str, list[bool]] = {}
        for d in of_class:
            by_node.setdefault(d.node, []).append(match(d.cel))
        allowed = {n for n, ms in by_node.items() if all(ms) and len(ms) >= count}
        partial = sorted(n for n, ms in by_node.items() if any(ms) and not all(ms))
        if partial:
            shown = ", ".join(partial[:3]) + (", ..." if len(partial) > 3 else "")
            ask.notes.append(
                (
                    REASON_NOT_MAPPED,
                    f"{where}: its selectors match only some devices of DeviceClass {cls!r} on "
                    f"{len(partial)} node{'s' if len(partial) != 1 else ''} ({shown}): left "
                    "out, as gangplan chooses among a node's devices of a class",
                )
            )
        if allowed == set(by_node):
            return None
        return allowed

    def _constraint(self, where: str, con: Any, kinds: dict[str, str], ask: _Ask) -> None:
        names = list(con.requests or kinds)
        covered = {kinds[n] for n in names if n in kinds}
        attr = con.match_attribute
        if attr is None or covered != {"gpu", "nic"}:
            what = f"matchAttribute {attr!r}" if attr else "distinctAttribute"
            ask.notes.append(
                (
                    REASON_NOT_MAPPED,
                    f"{where}: {what} over {names} is not modelled (gangplan models matchAttribute "
                    "over a GPU and a NIC request)",
                )
            )
            return
        if attr == PCIE_ROOT:
            policy = "pcie"
        elif attr in NUMA_ATTRIBUTES:
            policy = "numa"
        else:
            ask.notes.append(
                (
                    REASON_NOT_MAPPED,
                    f"{where}: matchAttribute {attr!r} is not modelled (accepted: {PCIE_ROOT}, "
                    f"{', '.join(NUMA_ATTRIBUTES)})",
                )
            )
            return
        ask.joint = policy
        ask.notes.append(
            (
                REASON_ASSUMED,
                f"{where}: matchAttribute {attr} over GPUs and NICs read as joint allocation "
                f"{policy!r} (a pod asking fewer NICs than GPUs gets them from the "
                f"{'PCIe roots' if policy == 'pcie' else 'NUMA nodes'} holding its GPUs; DRA "
                "wants all under one)",
            )
        )

    def _restrict(
        self, pod: PodInfo, terms: tuple[NodeSelectorTerm, ...], nodes: set[str]
    ) -> tuple[NodeSelectorTerm, ...]:
        """``terms`` ANDed with "on one of ``nodes``" (by hostname label)."""
        hosts = sorted(self._hostnames[n] for n in nodes if n in self._hostnames)
        if len(hosts) < len(nodes):
            lacking = sorted(n for n in nodes if n not in self._hostnames)
            self._summary.note(
                pod.source,
                pod.kind,
                f"{pod.namespace}/{pod.name}",
                REASON_NOT_MAPPED,
                f"nodes {lacking[:3]} have no {HOSTNAME} label: left out of those its claims allow",
            )
        if not hosts:
            # no node can hold it: a hostname no node has
            req = NodeSelectorRequirement(key=HOSTNAME, operator="In", values=("",))
        else:
            req = NodeSelectorRequirement(key=HOSTNAME, operator="In", values=tuple(hosts))
        if not terms:
            return (NodeSelectorTerm(match_expressions=(req,)),)
        return tuple(NodeSelectorTerm(match_expressions=(*t.match_expressions, req)) for t in terms)

    # ------------------------------------------------------------------ running

    def _allocated_node(self, claim: Any) -> str | None:
        results = claim.status.allocation.devices.results if claim.status.allocation.devices else []
        nodes = {
            d.node
            for r in results or []
            if (d := self._inv.by_ref.get((r.driver, r.pool, r.device))) is not None
        }
        return nodes.pop() if len(nodes) == 1 else None

    def _running(self, pod: PodInfo) -> PodInfo:
        who = f"{pod.namespace}/{pod.name}"
        devices = list(pod.devices)
        requests = dict(pod.requests)
        for i, c in enumerate(pod.claims):
            name = c.claim or c.generated
            if not name:
                continue
            obj = self._reg.get(GROUP, "ResourceClaim", pod.namespace, name)
            status = obj.model.status if obj is not None else None
            if status is None or status.allocation is None:
                self._summary.note(
                    pod.source,
                    pod.kind,
                    who,
                    REASON_ASSUMED,
                    f"spec.resourceClaims[{i}]: ResourceClaim {pod.namespace}/{name} "
                    f"{'is not in the dump' if obj is None else 'is not allocated'}: "
                    "its devices are not known",
                )
                continue
            holders = [r.name for r in status.reserved_for or [] if r.resource == "pods"]
            if pod.name not in holders:
                self._summary.note(
                    pod.source,
                    pod.kind,
                    who,
                    REASON_NOT_MAPPED,
                    f"ResourceClaim {pod.namespace}/{name} is not reserved for this pod "
                    f"(status.reservedFor: {holders[:3]}): its devices are not counted for it",
                )
                continue
            if holders[0] != pod.name:
                continue  # a shared claim: its devices are held once, by its first holder
            results = status.allocation.devices.results if status.allocation.devices else []
            for r in results or []:
                d = self._inv.by_ref.get((r.driver, r.pool, r.device))
                if d is None or d.node != pod.node_name or d.kind == "other":
                    if d is None or d.kind != "other":
                        self._summary.note(
                            pod.source,
                            pod.kind,
                            who,
                            REASON_NOT_MAPPED,
                            f"ResourceClaim {pod.namespace}/{name}: device "
                            f"{r.driver}/{r.pool}/{r.device} is not a GPU or NIC of node "
                            f"{pod.node_name!r} in the slices",
                        )
                    continue
                res = self._gpu if d.kind == "gpu" else self._nic
                if d.name not in devices:
                    devices.append(d.name)
                    requests[res] = requests.get(res, 0) + GPU_MILLI
        return replace(pod, devices=tuple(devices), requests=requests)
