"""Who recreates a running pod once it is evicted: the rule that decides whether a gang may
move (``gangplan replan``, ``gangplan apply MOVES.yaml``).

A move evicts every pod of a running gang (policy/v1 ``Eviction``) and places the same pods
anew: "the same pods" only exist if the pod's **controller** (its ``ownerReferences`` entry
with ``controller: true``) creates them again, and only under a name or an index gangplan can
follow from the evicted pod to the new one. :class:`PodOwner` is that controller, as the
Kubernetes readers find it; :func:`why_not_recreated` is the rule, one function that every
judge reads (the replan planner's :func:`~gangplan.solver.replan.planner.why_not_movable`,
the move verifier's rule ``recreated``).

Owners that recreate an evicted pod and how the new pod is found (:data:`RECREATING`):

* ``apps/v1`` **StatefulSet** — under the same name (``<set>-<ordinal>``, its ordinal also in
  the label ``apps.kubernetes.io/pod-index``). A **LeaderWorkerSet**
  (``leaderworkerset.x-k8s.io``) runs its leaders and workers as StatefulSet pods, so its pods
  have a StatefulSet as controller and follow this rule;
* ``batch.volcano.sh`` **Job** (Volcano) — under the same name (``<job>-<task>-<index>``;
  labels ``volcano.sh/task-spec`` and ``volcano.sh/task-index``): its controller's default
  action for an evicted pod is to sync the job, creating the missing pods again;
* ``kubeflow.org`` **PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob, JAXJob** (the Kubeflow
  Training Operator) — under the same name (``<job>-<replica type>-<index>``; labels
  ``training.kubeflow.org/replica-type`` and ``training.kubeflow.org/replica-index``);
* ``batch/v1`` **Job** in ``Indexed`` completion mode — the pods of a **JobSet**
  (``jobset.x-k8s.io``; the JobSet owns Jobs, a Job owns the pods) and of Kubeflow Trainer's
  TrainJob, which runs on JobSet: under a **new name** with the same completion index
  (``batch.kubernetes.io/job-completion-index``), so the new pod is found by its owner and
  index, not by its name. A Job's evicted pod counts against its ``backoffLimit`` unless its
  ``podFailurePolicy`` ignores the ``DisruptionTarget`` condition.

Not movable, with the reason: a **bare pod** (no controller: an eviction deletes it for
good, e.g. a model server started by hand); a pod of a **ReplicaSet** (a Deployment's) or of
a non-indexed ``batch/v1`` Job (recreated under a new random name with no index, so nothing
tells which new pod is the moved one); a **DaemonSet** pod (recreated on its own node); any
other owner kind (gangplan cannot tell whether, or how, it recreates its pods).

A running pod whose owner is not stated (an instance file written by hand, ``owner`` absent)
is taken at the file's word: it moves as before. The Kubernetes readers always state it
(``owner: none`` for a bare pod). Owner references are written by controllers, but a tenant
can write them on its own pods: a forged owner can only make its own pod look movable, and
then a move of it evicts a pod of its own namespace that may not come back.
"""

from __future__ import annotations

from typing import Literal

from gangplan.models.base import Frozen, Name

__all__ = ["RECREATING", "PodOwner", "why_not_recreated"]

Follow = Literal["name", "index"]

RECREATING: dict[tuple[str, str], Follow] = {
    ("apps", "StatefulSet"): "name",
    ("batch.volcano.sh", "Job"): "name",
    **{
        ("kubeflow.org", kind): "name"
        for kind in ("PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob")
    },
    ("batch", "Job"): "index",
}
"""(API group, kind) of a controller that recreates an evicted pod -> how the new pod is
found: ``name`` (the same name) or ``index`` (its owner and the index it carries)."""

_NOT_RECREATED = {
    ("apps", "ReplicaSet"): "a ReplicaSet recreates it under a new name, with no index to follow",
    ("apps", "Deployment"): "a Deployment recreates it under a new name, with no index to follow",
    ("apps", "DaemonSet"): "a DaemonSet pod runs on its own node",
}


class PodOwner(Frozen):
    """A running pod's controller (its ``ownerReferences`` entry with ``controller: true``).

    ``api_version``: the owner's ``group/version`` (``apps/v1``; ``v1`` for the core group);
    ``kind`` and ``name``: the owner object; ``index``: the pod's index within its owner as
    the owner's own label gives it (a StatefulSet's ordinal, a Volcano task and index
    ``worker/3``, a Job's completion index), None when it gives none.
    """

    api_version: str = ""
    kind: Name
    name: Name
    index: str | None = None

    @property
    def group(self) -> str:
        """The owner's API group (``""`` for the core group)."""
        group, _, _version = self.api_version.rpartition("/")
        return group

    @property
    def follow(self) -> Follow | None:
        """How the pod it recreates is found (None: it recreates none that can be followed)."""
        how = RECREATING.get((self.group, self.kind))
        if how == "index" and self.index is None:
            return None
        return how

    def describe(self) -> str:
        """``StatefulSet train`` (``batch.volcano.sh`` Job ``train``)."""
        group = f" ({self.group})" if self.group else ""
        return f"{self.kind} {self.name}{group}"


def why_not_recreated(owner: PodOwner | Literal["none"] | None) -> str | None:
    """Why an evicted pod of ``owner`` is not created again where gangplan can follow it
    (None: it is, or ``owner`` is not stated; module docstring)."""
    if owner is None:
        return None
    if owner == "none":
        return "a bare pod (no controller recreates it once evicted)"
    if owner.follow is not None:
        return None
    key = (owner.group, owner.kind)
    if key in _NOT_RECREATED:
        return f"owned by {owner.describe()}: {_NOT_RECREATED[key]}"
    if key in RECREATING:  # an index rule without its index
        return (
            f"owned by {owner.describe()}, which recreates it under a new name; it carries no "
            "completion index to follow (not an Indexed Job)"
        )
    return (
        f"owned by {owner.describe()}: gangplan does not know whether, or under which name, "
        "that kind recreates an evicted pod"
    )
