"""What every gangplan model shares: the frozen pydantic base, the name types, the GPU
scale and the gang key.

Imports nothing of ours, so every other module of ``models/`` may import it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

__all__ = ["API_VERSION", "GPU_MILLI", "Frozen", "K8sName", "Name", "gang_key"]

API_VERSION = "gangplan.io/v1alpha1"
GPU_MILLI = 1000
"""Milli-GPU in one GPU device."""

Name = Annotated[str, StringConstraints(min_length=1, max_length=253)]
"""A name that need not be a Kubernetes object name (a queue, a level, a device id), at
most 253 characters."""
K8sName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
]
"""A Kubernetes object name (RFC 1123 subdomain: lowercase letters, digits, '-' and '.',
starting and ending with a letter or digit): nodes, namespaces, gangs, roles, pods."""


class Frozen(BaseModel):
    """The base of every model: immutable, and an unknown field is an error (not ignored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def gang_key(namespace: str, name: str) -> str:
    """A gang's key, ``namespace/name``: unique in a snapshot, the one way gangs are named
    across the snapshot, the plan and running pods (Kubernetes names a namespaced object
    the same way)."""
    return f"{namespace}/{name}"
