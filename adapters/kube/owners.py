"""A pod's controller and its index within it, read from the pod itself: what decides
whether its gang may move and how the pod that replaces it is found
(:mod:`gangplan.models.owners` has the rule and the kinds).

The controller is the ``metadata.ownerReferences`` entry with ``controller: true`` (at most
one, the API server enforces it); none: a bare pod (``owner: none``). The index is the one
the owner's controller writes on its pods:

* ``apps/v1`` StatefulSet: the label ``apps.kubernetes.io/pod-index`` (Kubernetes 1.28+),
  else the ordinal that ends the pod's name (``<set>-<ordinal>``);
* ``batch.volcano.sh`` Job: ``volcano.sh/task-spec`` and ``volcano.sh/task-index`` (labels
  or annotations, ``github.com/volcano-sh/apis``, ``pkg/apis/batch/v1alpha1/labels.go``), as
  ``<task>/<index>``;
* ``kubeflow.org`` training jobs: the labels ``training.kubeflow.org/replica-type`` and
  ``training.kubeflow.org/replica-index``, as ``<type>/<index>``;
* ``batch/v1`` Job: ``batch.kubernetes.io/job-completion-index`` (label since 1.28,
  annotation since 1.21; an Indexed Job's pods only).

Everything here is what the pod says; a tenant can write any of it on its own pods
(:mod:`gangplan.models.owners` says what that can and cannot do).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from gangplan.models import PodOwner

__all__ = ["INDEX_LABELS", "owner_of", "owner_refs"]

LABEL_STS_INDEX = "apps.kubernetes.io/pod-index"
VOLCANO_TASK = "volcano.sh/task-spec"
VOLCANO_INDEX = "volcano.sh/task-index"
KUBEFLOW_TYPE = "training.kubeflow.org/replica-type"
KUBEFLOW_INDEX = "training.kubeflow.org/replica-index"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_LABELS = (
    LABEL_STS_INDEX,
    VOLCANO_TASK,
    VOLCANO_INDEX,
    KUBEFLOW_TYPE,
    KUBEFLOW_INDEX,
    JOB_INDEX,
)
"""Every label (or annotation) an index is read from"""

_ORDINAL = re.compile(r"-(\d+)$")


def owner_refs(refs: Iterable[Any] | None) -> list[tuple[str, str, str, bool]]:
    """``(apiVersion, kind, name, controller)`` of each owner reference, from
    ``V1OwnerReference`` objects or plain mappings (a raw object); malformed entries are
    left out."""
    out: list[tuple[str, str, str, bool]] = []
    for r in refs or ():
        if isinstance(r, Mapping):
            api, kind, name, ctl = (
                r.get("apiVersion"),
                r.get("kind"),
                r.get("name"),
                r.get("controller"),
            )
        else:
            api, kind, name, ctl = (
                getattr(r, "api_version", None),
                getattr(r, "kind", None),
                getattr(r, "name", None),
                getattr(r, "controller", None),
            )
        if isinstance(kind, str) and kind and isinstance(name, str) and name:
            out.append((api if isinstance(api, str) else "", kind, name, ctl is True))
    return out


def owner_of(
    refs: list[tuple[str, str, str, bool]],
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> PodOwner | Literal["none"]:
    """The pod's controller with its index (module docstring), or ``"none"``."""
    ctl = next((r for r in refs if r[3]), None)
    if ctl is None:
        return "none"
    api, kind, owner, _ = ctl
    group = api.rpartition("/")[0]

    def value(key: str) -> str | None:
        v = labels.get(key) or annotations.get(key)
        return str(v) if v else None

    index: str | None = None
    if (group, kind) == ("apps", "StatefulSet"):
        index = value(LABEL_STS_INDEX)
        if index is None and (m := _ORDINAL.search(name)):
            index = m[1]
    elif (group, kind) == ("batch.volcano.sh", "Job"):
        task, i = value(VOLCANO_TASK), value(VOLCANO_INDEX)
        index = f"{task}/{i}" if task and i else None
    elif group == "kubeflow.org":
        rtype, i = value(KUBEFLOW_TYPE), value(KUBEFLOW_INDEX)
        index = f"{rtype}/{i}" if rtype and i else None
    elif (group, kind) == ("batch", "Job"):
        index = value(JOB_INDEX)
    try:
        return PodOwner(api_version=api, kind=kind, name=owner, index=index)
    except ValueError:  # a name past the model's bounds: nothing it says can be followed
        return "none"
