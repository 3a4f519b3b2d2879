"""The API port: every call the live loop makes to the Kubernetes API, behind one protocol.

:class:`KubeApi` is small on purpose — list and watch (the cache), get, merge patch (pods,
their status, gang objects' status), delete, bind (``pods/binding``), evict
(``pods/eviction``), create an Event, and get / create / replace a Lease (leader election).
Objects cross it as plain JSON dicts, exactly as the API server sends them (camelCase
fields, quantities as strings), so nothing is converted twice.

Two implementations: :class:`~gangplan.adapters.serve.memory.InMemoryApi` (tests: behaves like
the API server where it matters, with fault injection) and
:class:`~gangplan.adapters.serve.client.OfficialApi` (the official ``kubernetes`` client).

Errors are :class:`ApiError` with the HTTP status the API server would answer: 404 not found,
409 conflict (a stale ``resourceVersion``, a pod already bound, a UID precondition), 410 gone
(a watch from a compacted ``resourceVersion``: relist), 422 invalid, 429 too many requests
(an eviction a PodDisruptionBudget forbids, or API priority and fairness), 5xx; status 0 is
a connection that failed or a watch stream that dropped. Kubernetes API conventions:
"Concurrency Control and Consistency", "Watch bookmarks", "Efficient detection of changes".
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "KINDS",
    "ApiError",
    "Kind",
    "KubeApi",
    "Listing",
    "Obj",
    "WatchEvent",
    "kind_of",
    "merge_patch",
]

Obj = dict[str, Any]
"""A Kubernetes object as the API server sends it: plain JSON (camelCase fields, quantities as
strings). Every module of the live loop names objects with this one alias."""


@dataclass(frozen=True)
class Kind:
    """One resource the loop reads or writes: API group (``""`` for core), version, plural
    (the URL segment), kind, and whether it lives in a namespace."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, else ``group/version``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """``pods``, ``podgroups.scheduling.volcano.sh`` (kubectl's fully qualified name)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The URL path of the collection (in ``namespace``) or of one object."""
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        ns = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{base}{ns}/{self.plural}" + (f"/{name}" if name else "")


def _k(api_version: str, plural: str, kind: str, namespaced: bool = True) -> Kind:
    group, _, version = api_version.rpartition("/")
    return Kind(group, version, plural, kind, namespaced)


KINDS: dict[str, Kind] = {
    k.key: k
    for k in (
        _k("v1", "pods", "Pod"),
        _k("v1", "nodes", "Node", False),
        _k("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", False),
        _k("scheduling.volcano.sh/v1beta1", "podgroups", "PodGroup"),
        _k("scheduling.volcano.sh/v1beta1", "queues", "Queue", False),
        _k("scheduling.x-k8s.io/v1alpha1", "podgroups", "PodGroup"),
        _k("scheduling.x-k8s.io/v1alpha1", "elasticquotas", "ElasticQuota"),
        _k("scheduling.sigs.k8s.io/v1alpha1", "podgroups", "PodGroup"),
        _k("scheduling.k8s.io/v1beta1", "podgroups", "PodGroup"),
        _k("scheduling.k8s.io/v1beta1", "workloads", "Workload"),
        _k("topology.volcano.sh/v1alpha1", "hypernodes", "HyperNode", False),
        _k("kueue.x-k8s.io/v1beta1", "topologies", "Topology", False),
        _k("kueue.x-k8s.io/v1beta1", "resourceflavors", "ResourceFlavor", False),
        _k("kueue.x-k8s.io/v1beta1", "clusterqueues", "ClusterQueue", False),
        _k("kueue.x-k8s.io/v1beta1", "localqueues", "LocalQueue"),
        _k("scheduling.koordinator.sh/v1alpha1", "devices", "Device", False),
        _k("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget"),
        _k("events.k8s.io/v1", "events", "Event"),
        _k("coordination.k8s.io/v1", "leases", "Lease"),
    )
}
"""Every resource of the port, by :attr:`Kind.key`. Kubernetes 1.37 serves the upstream
``PodGroup`` and ``Workload`` at ``scheduling.k8s.io/v1beta1`` (KEP-4671, beta in 1.37)."""


VERSIONS: dict[str, tuple[str, ...]] = {
    key: ("v1beta2", "v1beta1")
    for key in (
        "topologies.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io",
        "clusterqueues.kueue.x-k8s.io",
        "localqueues.kueue.x-k8s.io",
    )
}
"""Kinds a server may serve at several versions, newest first: Kueue serves v1beta2 from
0.15 and will stop serving v1beta1 (the readers of ``convert k8s`` accept both). The
informer asks discovery which the server serves (:func:`at_served_version`)."""


def at_served_version(kind: Kind, served: Collection[str] | None) -> Kind | None:
    """``kind`` at the newest of its :data:`VERSIONS` in ``served`` (the versions discovery
    says the server serves of its group); ``kind`` itself when it has one version or
    discovery said nothing (``served`` None); None when none of its versions is served."""
    versions = VERSIONS.get(kind.key)
    if versions is None or served is None:
        return kind
    for v in versions:
        if v in served:
            return Kind(kind.group, v, kind.plural, kind.kind, kind.namespaced)
    return None


def kind_of(key: str) -> Kind:
    """The :class:`Kind` of ``key`` (``pods``, ``podgroups.scheduling.volcano.sh``).

    Raises:
        KeyError: not a resource of the port.
    """
    return KINDS[key]


class ApiError(Exception):
    """An answer of the API server that is not a success.

    ``status``: the HTTP status (0: the connection or the watch stream failed);
    ``reason``: the ``Status`` reason (``Conflict``, ``NotFound``, ``Gone``,
    ``TooManyRequests``, ...); ``retry_after``: seconds, when the server said (429).
    """

    def __init__(
        self, status: int, reason: str, message: str = "", retry_after: float | None = None
    ):
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")

    @property
    def transient(self) -> bool:
        """A failure worth retrying later as it is (429, 5xx, a dropped connection)."""
        return self.status in (0, 429) or self.status >= 500


@dataclass(frozen=True)
class Listing:
    """A list's items and the collection's ``resourceVersion`` (where a watch starts)."""

    items: list[Obj]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    """One watch event: ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK`` (then ``object``
    carries only ``metadata.resourceVersion``)."""

    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
    object: Obj

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


class KubeApi(Protocol):
    """The calls of the live loop. Every method raises :class:`ApiError` on failure."""

    def served_versions(self, group: str) -> tuple[str, ...] | None:
        """The versions the server serves of API ``group`` (discovery, ``GET /apis``);
        None when discovery did not answer."""
        ...

    def list(self, kind: Kind, namespace: str | None = None) -> Listing:
        """All objects of ``kind`` (in ``namespace``, or all namespaces)."""
        ...

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        *,
        namespace: str | None = None,
        timeout_s: float = 60.0,
    ) -> Iterator[WatchEvent]:
        """Changes after ``resource_version``, with bookmarks, until the server ends the
        stream (``timeout_s``; 0: what is there now — over HTTP, a watch of a
        second, as a server cannot be asked for less). Raises ApiError 410 when that
        resourceVersion is too old (relist)."""
        ...

    def get(self, kind: Kind, namespace: str | None, name: str) -> Obj: ...

    def patch(
        self, kind: Kind, namespace: str | None, name: str, patch: Obj, *, status: bool = False
    ) -> Obj:
        """A JSON merge patch (RFC 7386) of the object or (``status``) its status
        subresource. A ``metadata.resourceVersion`` in the patch is a precondition (409)."""
        ...

    def delete(
        self, kind: Kind, namespace: str | None, name: str, *, uid: str | None = None
    ) -> None:
        """Delete; ``uid`` is a precondition (409 if the object is another one by now)."""
        ...

    def bind(self, namespace: str, pod: str, node: str, *, uid: str | None = None) -> None:
        """POST a core v1 ``Binding`` to ``pods/{pod}/binding``: 409 if the pod is bound."""
        ...

    def evict(self, namespace: str, pod: str, *, uid: str | None = None) -> None:
        """POST a policy/v1 ``Eviction`` to ``pods/{pod}/eviction``: 429 if a
        PodDisruptionBudget forbids it now (nothing is evicted then)."""
        ...

    def create(self, kind: Kind, namespace: str | None, body: Obj) -> Obj:
        """Create an object (Events, Leases): 409 if it exists."""
        ...

    def replace(self, kind: Kind, namespace: str | None, name: str, body: Obj) -> Obj:
        """PUT the whole object; its ``metadata.resourceVersion`` must be current (409)."""
        ...


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch of ``target`` (returns a new value; ``None`` deletes)."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
