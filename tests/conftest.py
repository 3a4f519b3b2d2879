"""Tiny, named fixtures shared by the tests: instance data, small clusters, plans.

Clusters are written as instance-file data and loaded through ``load_instance`` so every
test also goes through the file format. Each fixture is a factory: a test passes the
queues, gangs and running pods it is about, and gets a snapshot of a cluster it can reason
about by hand.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from gangplan.models import (
    GPU_MILLI,
    GangOutcome,
    PendingReason,
    Plan,
    PodPlacement,
    Snapshot,
    load_instance,
)

API = {"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance"}
GPU = "nvidia.com/gpu"

Placement = tuple[str, str] | tuple[str, str, Mapping[str, Any]]
"""(role, node) or (role, node, {"gpus": [...], "nics": [...], "gpu_milli": m})"""


def gang(name: str, queue: str = "qa", count: int = 1, gpus: float | str = 1, **extra: Any) -> dict:
    """A one-role gang (role ``w``) of ``count`` pods with ``gpus`` GPUs each."""
    requests = {GPU: gpus} if gpus else {}
    role = {"name": "w", "count": count, "requests": requests}
    role.update(extra.pop("role", {}))
    return {"name": name, "queue": queue, "roles": [role], **extra}


def gpu_node(
    name: str, gpus: int = 4, labels: Mapping[str, str] | None = None, **extra: Any
) -> dict:
    return {"name": name, "labels": dict(labels or {}), "allocatable": {GPU: gpus}, **extra}


@pytest.fixture
def snapshot_of() -> Callable[..., Snapshot]:
    """Load instance parts (no apiVersion/kind needed); fails the test on warnings unless
    ``warnings_ok``."""

    def make(warnings_ok: bool = False, **parts: Any) -> Snapshot:
        snap, warnings = load_instance({**API, **parts})
        if not warnings_ok:
            assert warnings == []
        return snap

    return make


@pytest.fixture
def two_nodes(snapshot_of: Callable[..., Snapshot]) -> Callable[..., Snapshot]:
    """Two nodes ``n1``, ``n2`` of 4 GPUs each (8 GPUs, no other resource), no levels.

    One GPU is 1/8 of the cluster: 125,000 ppm of dominant share.
    """

    def make(
        queues: Sequence[dict], gangs: Sequence[dict], running: Sequence[dict] = ()
    ) -> Snapshot:
        return snapshot_of(
            nodes=[gpu_node("n1"), gpu_node("n2")],
            queues=list(queues),
            gangs=list(gangs),
            running=list(running),
        )

    return make


FAT_TREE_NODES = {
    # node: (spine, leaf). Leaf names repeat under each spine: a leaf is named by its path.
    "n1": ("s1", "l1"),
    "n2": ("s1", "l1"),
    "n3": ("s1", "l2"),
    "n4": ("s1", "l2"),
    "n5": ("s2", "l1"),
    "n6": ("s2", "l1"),
    "n7": ("s2", "l2"),
    "n8": ("s2", "l2"),
}


@pytest.fixture
def fat_tree(snapshot_of: Callable[..., Snapshot]) -> Callable[..., Snapshot]:
    """2 spines x 2 leaves x 2 nodes of 4 GPUs (32 GPUs, no other resource), levels
    spine > leaf by the labels ``sp`` and ``lf``; see ``FAT_TREE_NODES``.

    One GPU is 1/32 of the cluster: 31,250 ppm of dominant share.
    """

    def make(
        queues: Sequence[dict], gangs: Sequence[dict], running: Sequence[dict] = ()
    ) -> Snapshot:
        return snapshot_of(
            levels=[{"name": "spine", "node_label": "sp"}, {"name": "leaf", "node_label": "lf"}],
            nodes=[
                gpu_node(n, labels={"sp": s, "lf": lf}) for n, (s, lf) in FAT_TREE_NODES.items()
            ],
            queues=list(queues),
            gangs=list(gangs),
            running=list(running),
        )

    return make


def build_plan(snapshot: Snapshot, placed: Mapping[str, Sequence[Placement]]) -> Plan:
    """A plan with an outcome for every gang of ``snapshot`` (namespace ``default``).

    ``placed`` maps a gang name to its pods as (role, node[, devices]); the i-th pod of a
    role gets the role's i-th pod name. Without explicit devices a pod gets the lowest-listed
    GPUs of its node that running pods and earlier pods of this plan leave whole (a share
    takes the first GPU with room), and no NICs. Gangs not in ``placed`` are pending.
    """
    taken: dict[str, dict[str, int]] = {}
    pods: list[PodPlacement] = []
    outcomes: list[GangOutcome] = []
    for g in snapshot.gangs:
        per_role: dict[str, int] = defaultdict(int)
        for item in placed.get(g.name, ()):
            role_name, node = item[0], item[1]
            role = g.role(role_name)
            index = per_role[role_name]
            per_role[role_name] += 1
            free = taken.setdefault(node, dict(snapshot.free(node).gpu_milli))
            want = role.requests.get(snapshot.gpu, 0)
            devices: dict[str, Any] = dict(item[2]) if len(item) == 3 else {}  # type: ignore[misc]
            if not devices and want >= GPU_MILLI:
                whole = [d for d, m in free.items() if m == GPU_MILLI][: want // GPU_MILLI]
                devices = {"gpus": whole}
            elif not devices and want:
                dev = next(d for d, m in free.items() if m >= want)
                devices = {"gpus": [dev], "gpu_milli": want}
            for d in devices.get("gpus", ()):
                if d in free:
                    free[d] -= want if want < GPU_MILLI else GPU_MILLI
            pods.append(
                PodPlacement(
                    pod=role.pod_name(g.name, index),
                    gang=g.name,
                    namespace=g.namespace,
                    role=role_name,
                    node=node,
                    **devices,
                )
            )
        n = sum(per_role.values())
        outcomes.append(
            GangOutcome(
                gang=g.name,
                namespace=g.namespace,
                admitted=n > 0,
                placed=n,
                roles=dict(per_role),
                reason=None if n else PendingReason(kind="lost", message="not placed in this test"),
            )
        )
    return Plan(gangs=tuple(outcomes), pods=tuple(pods))


@pytest.fixture
def one_role_gang() -> Callable[..., dict]:
    """``one_role_gang("g", queue="qa", count=2, gpus=1, **gang_fields)``: see :func:`gang`."""
    return gang


@pytest.fixture
def plan_of() -> Callable[[Snapshot, Mapping[str, Sequence[Placement]]], Plan]:
    """``plan_of(snapshot, {"gang": [("w", "n1"), ...]})``: see :func:`build_plan`."""
    return build_plan


def share_gangs(
    count: int, sizes: Sequence[str | int], cpus: Sequence[int], seed: int
) -> list[dict]:
    """``count`` one-pod gangs ``g000``, ``g001``, ... of queue ``qa``, created in that
    order, each asking a GPU size of ``sizes`` (``"300m"``: a share; 1: a whole GPU) and
    cores of ``cpus``, drawn by ``random.Random(seed)``."""
    import random

    rng = random.Random(seed)
    return [
        {
            "name": f"g{i:03d}",
            "queue": "qa",
            "creation_time": i,
            "roles": [
                {
                    "name": "w",
                    "count": 1,
                    "requests": {GPU: rng.choice(sizes), "cpu": rng.choice(cpus)},
                }
            ],
        }
        for i in range(count)
    ]


@pytest.fixture
def random_share_gangs() -> Callable[..., list[dict]]:
    """``random_share_gangs(count, sizes, cpus, seed)``: see :func:`share_gangs`."""
    return share_gangs


CHILD_MEMORY = 1 << 30
"""Address space of a :func:`run_limited` child, bytes: gangplan needs under 400 MB to start
and read a small file, so a run past this is input that takes memory it should not."""
CHILD_TIMEOUT_S = 120.0
"""A child still running after this is hung (hang detection, not a speed check: the runs
take seconds)."""


def run_limited(
    *args: str, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``gangplan ARGS`` in a child process limited to :data:`CHILD_MEMORY` of address space
    (``RLIMIT_AS``), so that input which would take gigabytes fails there (a MemoryError
    traceback) instead of taking the machine's memory. A child that runs past
    :data:`CHILD_TIMEOUT_S` fails the test as hung."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))

    code = "import sys; from gangplan.adapters.cli import main; sys.argv[0] = 'gangplan'; main()"
    try:
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            preexec_fn=limit,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"gangplan {' '.join(args)}: still running after {CHILD_TIMEOUT_S:g} s (hung)")


@pytest.fixture
def gangplan_limited() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``gangplan_limited("convert", "k8s", path)``: see :func:`run_limited`."""
    return run_limited


@pytest.fixture
def sigint_seen() -> Iterator[list[int]]:
    """A SIGINT handler that records instead of raising, installed as the one the cycle
    must put back (so a stray signal can never stop pytest)."""
    seen: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)

    previous = signal.signal(signal.SIGINT, record)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture
def sigint_during_search(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``arm(again=False)``: the next cycle gets a SIGINT (Ctrl-C) from a thread as soon as
    its first CP-SAT solve is running; ``again``: a second one as soon as the first is
    handled (sent from the handler itself, so it is handled next, while the search stops).
    Use with ``sigint_seen``."""
    from gangplan.solver.budget import SearchStop

    def arm(again: bool = False) -> None:
        run, request = SearchStop.run, SearchStop.request

        def run_and_signal(self: SearchStop, solver: Any, model: Any) -> Any:
            if not self.started.is_set():

                def send() -> None:
                    while self._solver is None and not self.requested:
                        threading.Event().wait(0.001)
                    os.kill(os.getpid(), signal.SIGINT)

                threading.Thread(target=send, daemon=True).start()
            return run(self, solver, model)

        def request_and_signal(self: SearchStop) -> None:
            first = not self.requested
            request(self)
            if again and first:
                os.kill(os.getpid(), signal.SIGINT)

        monkeypatch.setattr(SearchStop, "run", run_and_signal)
        monkeypatch.setattr(SearchStop, "request", request_and_signal)

    return arm
