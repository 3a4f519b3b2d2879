"""Turning documents into typed Kubernetes objects, one registry per dump.

Core objects are validated with the official ``kubernetes`` client's models (pydantic,
``kubernetes.client.V1Pod`` etc.), custom resources with :mod:`gangplan.adapters.kube.crds`.
Two leniencies, both as the API server itself behaves and both listed in the summary:

* a number where a quantity is expected (``cpu: 2`` in a manifest) is read as the quantity
  ``"2"`` (``resource.Quantity`` unmarshals JSON numbers);
* a field the client's models do not know is ignored, as the API server drops unknown
  fields under ``fieldValidation=Warn`` (each one is a note).

Everything else that does not validate makes the object invalid: it is listed with the
path of each bad field (``spec.containers[0].name: Field required``) and not read.

Objects of the same kind, namespace and name replace earlier ones, as ``kubectl apply -f
FOLDER`` would leave them (files in path order); each replaced one is listed. An object
with ``metadata.generateName`` and no name gets the prefix plus a 5-character suffix
derived from its source (the API server's would be random).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes.client as k8s
from pydantic import BaseModel, ValidationError

from gangplan.adapters.kube import crds
from gangplan.adapters.kube.docs import Document
from gangplan.adapters.kube.summary import (
    REASON_ASSUMED,
    REASON_DUPLICATE,
    REASON_FIELD_IGNORED,
    REASON_INVALID,
    REASON_KIND_NOT_READ,
    REASON_VERSION_NOT_READ,
    ReadSummary,
)
from gangplan.models.instance import format_loc

__all__ = [
    "KINDS",
    "KubeObject",
    "ObjectInvalid",
    "Registry",
    "display_kind",
    "parse_official",
    "read_objects",
]

_QUANTITY_MAPS = frozenset(
    {"requests", "limits", "allocatable", "capacity", "overhead", "allocatedResources"}
)


class ObjectInvalid(ValueError):
    """An object (or an embedded template) that does not validate; ``problems`` name fields."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


def display_kind(group: str, kind: str) -> str:
    """``Pod`` for the core group, ``Kind.group`` otherwise (``PodGroup.scheduling.volcano.sh``),
    as kubectl qualifies a resource whose name two groups share."""
    return f"{kind}.{group}" if group else kind


@dataclass(frozen=True)
class KubeObject:
    """One object read: its group, version, kind, namespace (``""`` if cluster-scoped),
    name, source (``file#i``), typed model, and the fields ignored while reading it."""

    group: str
    version: str
    kind: str
    namespace: str
    name: str
    source: str
    model: Any

    @property
    def display_kind(self) -> str:
        return display_kind(self.group, self.kind)

    @property
    def key(self) -> str:
        """``namespace/name`` (namespaced) or ``name`` (cluster-scoped)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


# --------------------------------------------------------------------------- validation


def _format_errors(errors: list[Any], prefix: str = "") -> list[str]:
    out = []
    for e in errors:
        loc = format_loc(tuple(e["loc"]))
        path = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] not in ("missing", "value_error") and "input" in e:
            got = repr(e["input"])
            msg += f" (got {got if len(got) <= 60 else got[:57] + '...'})"
        out.append(f"{path}: {msg}" if path else msg)
    return out


def _normalize_quantities(data: Any, parent: str = "") -> Any:
    """``data`` with numbers under resource maps written as quantity strings: ``data``
    itself where nothing changes, else a copy of what changes (and of the containers above
    it) sharing the rest — never a change to ``data``. Only containers are walked into."""
    if isinstance(data, dict):
        if parent in _QUANTITY_MAPS:
            if not any(_is_number(v) for v in data.values()):
                return data
            return {k: _number_text(v) if _is_number(v) else v for k, v in data.items()}
        out: dict[Any, Any] | None = None
        for k, v in data.items():
            if isinstance(v, dict | list):
                new = _normalize_quantities(v, k if isinstance(k, str) else str(k))
                if new is not v:
                    if out is None:
                        out = dict(data)
                    out[k] = new
        return data if out is None else out
    if isinstance(data, list):
        changed: list[Any] | None = None
        for i, v in enumerate(data):
            if isinstance(v, dict | list):
                new = _normalize_quantities(v, parent)
                if new is not v:
                    if changed is None:
                        changed = list(data)
                    changed[i] = new
        return data if changed is None else changed
    return data


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _number_text(v: int | float) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _delete(data: Any, loc: tuple[int | str, ...]) -> None:
    for part in loc[:-1]:
        data = data[part]
    del data[loc[-1]]


def parse_official(model: type[BaseModel], data: Any, prefix: str = "") -> tuple[Any, list[str]]:
    """Validate ``data`` with an official client model (e.g. ``kubernetes.client.V1Pod``).

    Returns:
        ``(object, ignored)`` where ``ignored`` lists the unknown fields dropped
        (``spec.foo``), each prefixed with ``prefix``.

    Raises:
        ObjectInvalid: every other problem, each naming its field.
    """
    if not isinstance(data, dict):
        where = f"{prefix}: " if prefix else ""
        raise ObjectInvalid([f"{where}must be a mapping (got {type(data).__name__})"])
    work = _normalize_quantities(data)  # shares what it does not change with data
    owned = False  # whether work is a copy of its own, that fields may be deleted from
    ignored: list[str] = []
    for _ in range(4):
        try:
            return model.model_validate(work), ignored
        except ValidationError as err:
            errors = err.errors()
            extras = [tuple(e["loc"]) for e in errors if e["type"] == "extra_forbidden"]
            if len(extras) < len(errors) or not extras:
                bad = [e for e in errors if e["type"] != "extra_forbidden"]
                raise ObjectInvalid(_format_errors(bad, prefix)) from None
            if not owned:
                work, owned = copy.deepcopy(work), True
            for loc in sorted(extras, key=len, reverse=True):
                try:
                    _delete(work, loc)
                except (KeyError, IndexError, TypeError):
                    raise ObjectInvalid(_format_errors(errors, prefix)) from None
                path = format_loc(loc)
                ignored.append(f"{prefix}.{path}" if prefix else path)
    raise ObjectInvalid([f"{prefix or 'object'}: could not be validated"])  # pragma: no cover


def _parse_crd(model: type[BaseModel]) -> Callable[[dict[str, Any]], tuple[Any, list[str]]]:
    def parse(data: dict[str, Any]) -> tuple[Any, list[str]]:
        try:
            return model.model_validate(data), []
        except ValidationError as err:
            raise ObjectInvalid(_format_errors(err.errors())) from None

    return parse


def _parse_core(model: type[BaseModel]) -> Callable[[dict[str, Any]], tuple[Any, list[str]]]:
    def parse(data: dict[str, Any]) -> tuple[Any, list[str]]:
        return parse_official(model, data)

    return parse


@dataclass(frozen=True)
class KindSpec:
    """How to read one (group, kind): accepted versions, scope, and the parser."""

    versions: frozenset[str]
    namespaced: bool
    parse: Callable[[dict[str, Any]], tuple[Any, list[str]]]


def _k(
    versions: str, namespaced: bool, parse: Callable[[dict[str, Any]], tuple[Any, list[str]]]
) -> KindSpec:
    return KindSpec(frozenset(versions.split()), namespaced, parse)


_KUBEFLOW = _parse_crd(crds.KubeflowJob)

KINDS: dict[tuple[str, str], KindSpec] = {
    ("", "Pod"): _k("v1", True, _parse_core(k8s.V1Pod)),
    ("", "Node"): _k("v1", False, _parse_core(k8s.V1Node)),
    ("scheduling.k8s.io", "PriorityClass"): _k(
        "v1 v1beta1 v1alpha1", False, _parse_core(k8s.V1PriorityClass)
    ),
    ("scheduling.k8s.io", "PodGroup"): _k(
        "v1alpha2 v1alpha3", True, _parse_core(k8s.V1alpha3PodGroup)
    ),
    ("policy", "PodDisruptionBudget"): _k("v1", True, _parse_core(k8s.V1PodDisruptionBudget)),
    ("batch", "Job"): _k("v1", True, _parse_core(k8s.V1Job)),
    ("apps", "ReplicaSet"): _k("v1", True, _parse_core(k8s.V1ReplicaSet)),
    ("apps", "Deployment"): _k("v1", True, _parse_core(k8s.V1Deployment)),
    ("apps", "StatefulSet"): _k("v1", True, _parse_core(k8s.V1StatefulSet)),
    ("scheduling.volcano.sh", "PodGroup"): _k("v1beta1", True, _parse_crd(crds.VolcanoPodGroup)),
    ("scheduling.volcano.sh", "Queue"): _k("v1beta1", False, _parse_crd(crds.VolcanoQueue)),
    ("batch.volcano.sh", "Job"): _k("v1alpha1", True, _parse_crd(crds.VolcanoJob)),
    ("topology.volcano.sh", "HyperNode"): _k("v1alpha1", False, _parse_crd(crds.HyperNode)),
    ("scheduling.x-k8s.io", "PodGroup"): _k("v1alpha1", True, _parse_crd(crds.PluginsPodGroup)),
    ("scheduling.x-k8s.io", "ElasticQuota"): _k("v1alpha1", True, _parse_crd(crds.ElasticQuota)),
    ("scheduling.sigs.k8s.io", "PodGroup"): _k("v1alpha1", True, _parse_crd(crds.PluginsPodGroup)),
    ("scheduling.sigs.k8s.io", "ElasticQuota"): _k("v1alpha1", True, _parse_crd(crds.ElasticQuota)),
    ("kueue.x-k8s.io", "Topology"): _k(
        "v1alpha1 v1beta1 v1beta2", False, _parse_crd(crds.Topology)
    ),
    ("kueue.x-k8s.io", "ClusterQueue"): _k("v1beta1 v1beta2", False, _parse_crd(crds.ClusterQueue)),
    ("kueue.x-k8s.io", "LocalQueue"): _k("v1beta1 v1beta2", True, _parse_crd(crds.LocalQueue)),
    ("kueue.x-k8s.io", "ResourceFlavor"): _k(
        "v1beta1 v1beta2", False, _parse_crd(crds.ResourceFlavor)
    ),
    ("kueue.x-k8s.io", "WorkloadPriorityClass"): _k(
        "v1beta1 v1beta2", False, _parse_crd(crds.WorkloadPriorityClass)
    ),
    ("kubeflow.org", "PyTorchJob"): _k("v1", True, _KUBEFLOW),
    ("kubeflow.org", "TFJob"): _k("v1", True, _KUBEFLOW),
    ("kubeflow.org", "MPIJob"): _k("v1 v2beta1", True, _KUBEFLOW),
    ("kubeflow.org", "XGBoostJob"): _k("v1", True, _KUBEFLOW),
    ("kubeflow.org", "PaddleJob"): _k("v1", True, _KUBEFLOW),
    ("kubeflow.org", "JAXJob"): _k("v1", True, _KUBEFLOW),
    ("kubeflow.org", "MXJob"): _k("v1", True, _KUBEFLOW),
    ("jobset.x-k8s.io", "JobSet"): _k("v1alpha2", True, _parse_crd(crds.JobSet)),
    ("scheduling.koordinator.sh", "Device"): _k("v1alpha1", False, _parse_crd(crds.Device)),
    ("resource.k8s.io", "ResourceSlice"): _k("v1", False, _parse_core(k8s.V1ResourceSlice)),
    ("resource.k8s.io", "DeviceClass"): _k("v1", False, _parse_core(k8s.V1DeviceClass)),
    ("resource.k8s.io", "ResourceClaim"): _k("v1", True, _parse_core(k8s.ResourceV1ResourceClaim)),
    ("resource.k8s.io", "ResourceClaimTemplate"): _k(
        "v1", True, _parse_core(k8s.V1ResourceClaimTemplate)
    ),
}
"""Every (API group, kind) gangplan reads, with the versions it accepts. Any other object
is listed in the summary as "kind not read" (or "apiVersion not read")."""
# the upstream PodGroup's v1beta1 has its own model in the client
_UPSTREAM_PG_BETA = _parse_core(k8s.V1beta1PodGroup)


class Registry:
    """The objects of one dump, by (group, kind), in read order."""

    def __init__(self) -> None:
        self._by_kind: dict[tuple[str, str], dict[tuple[str, str], KubeObject]] = {}

    def add(self, obj: KubeObject) -> KubeObject | None:
        """Add ``obj``; returns the object it replaces (same kind, namespace and name)."""
        bucket = self._by_kind.setdefault((obj.group, obj.kind), {})
        key = (obj.namespace, obj.name)
        old = bucket.pop(key, None)
        bucket[key] = obj
        return old

    def of(self, group: str, kind: str) -> list[KubeObject]:
        return list(self._by_kind.get((group, kind), {}).values())

    def get(self, group: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        return self._by_kind.get((group, kind), {}).get((namespace, name))

    def __iter__(self) -> Iterator[KubeObject]:
        for bucket in self._by_kind.values():
            yield from bucket.values()


def _split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def _generated_suffix(source: str) -> str:
    digest = hashlib.sha256(source.encode()).digest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the API server's alphabet (no vowels, 0, 1, 3)
    return "".join(alphabet[b % len(alphabet)] for b in digest[:5])


def read_objects(docs: Iterable[Document], summary: ReadSummary) -> Registry:
    """Validate every document into a :class:`KubeObject`; list the rest in ``summary``.
    ``docs`` is read once, in order (an iterator: each document may be let go of once it
    is validated); the documents are never changed."""
    reg = Registry()
    for doc in docs:
        obj = _read_one(doc, summary)
        if obj is None:
            continue
        old = reg.add(obj)
        if old is not None:
            summary.skip(
                old.source, old.display_kind, old.key, REASON_DUPLICATE, f"by {obj.source}"
            )
    for obj in reg:
        summary.count(obj)
    return reg


def _read_one(doc: Document, summary: ReadSummary) -> KubeObject | None:
    data = doc.data
    group, version = _split_api_version(str(data["apiVersion"]))
    kind = str(data["kind"])
    shown = display_kind(group, kind)
    raw_meta = data.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    raw_name = str(meta.get("name") or meta.get("generateName") or "")
    spec = KINDS.get((group, kind))
    if spec is None:
        summary.skip(
            doc.source, shown, raw_name, REASON_KIND_NOT_READ, f"apiVersion {data['apiVersion']}"
        )
        return None
    if group == "scheduling.k8s.io" and kind == "PodGroup" and version == "v1beta1":
        spec = KindSpec(frozenset({"v1beta1"}), True, _UPSTREAM_PG_BETA)
    if version not in spec.versions:
        summary.skip(
            doc.source,
            shown,
            raw_name,
            REASON_VERSION_NOT_READ,
            f"{data['apiVersion']} (accepted: "
            f"{', '.join(f'{group}/{v}' if group else v for v in sorted(spec.versions))})",
        )
        return None
    try:
        model, ignored = spec.parse(data)
    except ObjectInvalid as err:
        summary.skip(doc.source, shown, raw_name, REASON_INVALID, "; ".join(err.problems))
        return None
    metadata = model.metadata
    name = getattr(metadata, "name", None) if metadata is not None else None
    namespace = (getattr(metadata, "namespace", None) or "default") if spec.namespaced else ""
    if not name:
        prefix = getattr(metadata, "generate_name", None) if metadata is not None else None
        if not prefix:
            summary.skip(
                doc.source, shown, "", REASON_INVALID, "metadata.name: required field is missing"
            )
            return None
        name = prefix + _generated_suffix(doc.source)
        summary.note(
            doc.source,
            shown,
            f"{namespace}/{name}" if namespace else name,
            REASON_ASSUMED,
            f"metadata.name = generateName {prefix!r} + a 5-character suffix "
            "(the API server's is random)",
        )
    for path in ignored:
        summary.note(
            doc.source,
            shown,
            f"{namespace}/{name}" if namespace else name,
            REASON_FIELD_IGNORED,
            f"{path}: not a field of {kind} {version} in the official client's model "
            "(dropped, as the API server drops unknown fields)",
        )
    return KubeObject(group, version, kind, namespace, name, doc.source, model)
