"""The read-back (solver/model/readback.py): which pod goes to which node and device, on
instances where the model's counts leave that choice to it (worked out by hand)."""

from __future__ import annotations

from typing import Any

from gangplan.models import Plan, PodPlacement, load_instance
from gangplan.solver.context import CycleContext
from gangplan.solver.judges.verify import verify
from gangplan.solver.model.builder import solve_model
from gangplan.solver.result import CycleStatus, SolverConfig, assemble_plan

GPU = "nvidia.com/gpu"
DET = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=5.0, seed=1)


def _instance(nodes: int, gpus: int, gangs: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    return load_instance(
        {
            "apiVersion": "gangplan.io/v1alpha1",
            "kind": "Instance",
            "nodes": [
                {"name": f"n{i}", "allocatable": {GPU: gpus, "cpu": 16}} for i in range(nodes)
            ],
            "queues": [{"name": "q"}],
            "gangs": gangs,
        }
    )[0]


def _solved(snapshot, previous: Plan | None = None) -> list[PodPlacement]:  # type: ignore[no-untyped-def]
    out = solve_model(CycleContext.of(snapshot), [], previous, DET, 30.0)
    assert out.status is CycleStatus.OPTIMAL and out.pods is not None
    assert verify(snapshot, assemble_plan(snapshot, out.pods, {})) == []
    return out.pods


def test_pods_keep_the_nodes_the_previous_plan_gave_them() -> None:
    # two nodes of 4 GPUs, gang a of 2 pods x 4 GPUs: one pod per node, so the counts are
    # the same whichever pod goes where. The previous plan had a-w-0 on n1 and a-w-1 on
    # n0: each keeps its node (in node order it would be the other way round), and takes
    # all four GPUs there
    s = _instance(
        2,
        4,
        [{"name": "a", "queue": "q", "roles": [{"name": "w", "count": 2, "requests": {GPU: 4}}]}],
    )
    gpus = ("gpu-0", "gpu-1", "gpu-2", "gpu-3")
    previous = Plan(
        pods=(
            PodPlacement(pod="a-w-0", gang="a", role="w", node="n1", gpus=gpus),
            PodPlacement(pod="a-w-1", gang="a", role="w", node="n0", gpus=gpus),
        )
    )
    pods = {p.pod: (p.node, p.gpus) for p in _solved(s, previous)}
    assert pods == {"a-w-0": ("n1", gpus), "a-w-1": ("n0", gpus)}
    # without a previous plan, the first pod takes the first node
    pods = {p.pod: p.node for p in _solved(s)}
    assert pods == {"a-w-0": "n0", "a-w-1": "n1"}


def test_of_identical_single_pod_gangs_the_oldest_are_admitted() -> None:
    # one node of 2 GPUs, three one-pod gangs of 1 GPU created at 30, 10 and 20 s: one item
    # counted 0..3, two fit, and the two oldest (s2 at 10 s, s3 at 20 s) get the GPUs
    gangs = [
        {
            "name": name,
            "queue": "q",
            "creation_time": t,
            "roles": [{"name": "w", "count": 1, "requests": {GPU: 1}}],
        }
        for name, t in (("s1", 30.0), ("s2", 10.0), ("s3", 20.0))
    ]
    s = _instance(1, 2, gangs)
    pods = _solved(s)
    assert sorted(p.gang for p in pods) == ["s2", "s3"]
    assert sorted(g for p in pods for g in p.gpus) == ["gpu-0", "gpu-1"]


def test_whole_gpu_pods_take_a_nodes_free_gpus_in_order() -> None:
    # one node of 8 GPUs, gang b of 3 pods x 2 GPUs that must share it: the pods take
    # gpu-0..gpu-5 two by two, in pod order
    s = _instance(
        1,
        8,
        [{"name": "b", "queue": "q", "roles": [{"name": "w", "count": 3, "requests": {GPU: 2}}]}],
    )
    pods = {p.pod: p.gpus for p in _solved(s)}
    assert pods == {
        "b-w-0": ("gpu-0", "gpu-1"),
        "b-w-1": ("gpu-2", "gpu-3"),
        "b-w-2": ("gpu-4", "gpu-5"),
    }
