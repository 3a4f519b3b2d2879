"""Queue max binds only the resources a gang asks, and a max on a model-specific GPU resource
binds the pods it maps to (issue 9).

Volcano's capacity plugin admits a task when ``allocated + request <= capability`` in the
dimensions the task requests (``queueAllocatable``, ``pkg/scheduler/plugins/capacity/
capacity.go``), and Kueue checks quota for each resource a PodSet requests
(``fitsResourceQuota``, ``pkg/scheduler/flavorassigner/flavorassigner.go``): a queue over its
CPU max does not block a gang that asks no CPU. Every expected value is worked out by hand
beside its instance, and every placer (CP-SAT and each baseline) is held to it.
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplan.models import PodPlacement, Snapshot, load_instance
from gangplan.solver.cycle.pipeline import run_baseline, solve_cycle
from gangplan.solver.judges.verify import verify
from gangplan.solver.placers.baselines import BASELINES
from gangplan.solver.result import SolverConfig, assemble_plan

API = {"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance"}
GPU = "nvidia.com/gpu"
CFG = SolverConfig(time_limit_s=20, deterministic=True, deterministic_time=5.0)
PLACERS = ("cpsat", *BASELINES)


def _one(name: str, requests: dict[str, Any], queue: str = "qa", count: int = 1) -> dict:
    return {
        "name": name,
        "queue": queue,
        "roles": [{"name": "w", "count": count, "requests": requests}],
    }


def _load(data: dict[str, Any]) -> Snapshot:
    s, warnings = load_instance({**API, **data})
    assert warnings == []
    return s


def _run(s: Snapshot, placer: str) -> tuple[set[str], dict[str, tuple[str, str]]]:
    """Admitted gang names and (kind, message) of each pending gang, for one placer."""
    result = solve_cycle(s, config=CFG) if placer == "cpsat" else run_baseline(s, placer)
    assert verify(s, result.plan) == []
    admitted = {o.gang for o in result.plan.gangs if o.admitted}
    reasons = {
        o.gang: (o.reason.kind, o.reason.message) for o in result.plan.gangs if o.reason is not None
    }
    return admitted, reasons


# --------------------------------------------------------------------------- CPU max, GPU gang

# One node of 4 GPUs and 8 CPUs. Queue qa has a max of 4 CPUs, and a running pod of qa holds 6:
# qa is 2 CPUs over its max. Pending: "gpu-only" asks 1 GPU and no CPU: it asks nothing qa is
# over, so it is admitted (qa's CPU use stays 6, unchanged). "with-cpu" asks 1 GPU and 1 CPU: 6
# + 1 = 7 > 4, so it is blocked by qa's headroom (it would fit the node: 2 CPUs and 3 GPUs are
# free, and on the empty cluster qa's max of 4 CPUs holds its 1).
OVER_CPU = {
    "nodes": [{"name": "n1", "allocatable": {GPU: 4, "cpu": 8}}],
    "queues": [{"name": "qa", "max": {"cpu": 4}}],
    "running": [{"name": "r", "node": "n1", "queue": "qa", "requests": {"cpu": 6}}],
    "gangs": [_one("gpu-only", {GPU: 1}), _one("with-cpu", {GPU: 1, "cpu": 1})],
}


@pytest.mark.parametrize("placer", PLACERS)
def test_a_gpu_only_gang_is_not_blocked_by_a_queue_over_its_cpu_max(placer: str) -> None:
    admitted, reasons = _run(_load(OVER_CPU), placer)
    assert admitted == {"gpu-only"}
    kind, msg = reasons["with-cpu"]
    assert kind == "blocked"
    assert "queue qa would exceed its max of 4 cpu: running pods use 6" in msg, msg


def test_the_verifier_holds_an_admitted_pod_to_the_max_of_what_it_asks_only() -> None:
    s = _load(OVER_CPU)
    gpu_only = PodPlacement(
        pod="gpu-only-w-0", gang="gpu-only", role="w", node="n1", gpus=("gpu-0",)
    )
    with_cpu = PodPlacement(
        pod="with-cpu-w-0", gang="with-cpu", role="w", node="n1", gpus=("gpu-1",)
    )
    assert verify(s, assemble_plan(s, [gpu_only], {})) == []
    bad = verify(s, assemble_plan(s, [gpu_only, with_cpu], {}))
    assert [v.rule for v in bad] == ["queue_max"]
    assert "cpu use 7 exceeds its max 4" in bad[0].message


# --------------------------------------------------------------------------- model-specific max

# nvidia.com/a100 maps to model A100. n1 advertises 4 nvidia.com/a100 (4 GPUs of model A100);
# n2 has 4 nvidia.com/gpu of model H100. Queue qa: max 2 nvidia.com/a100; a running pod of qa
# holds 1 A100 GPU on n1, so 1 more A100 GPU is allowed.
#   a100-two  asks 2 nvidia.com/a100: 1 + 2 = 3 > 2        -> blocked by qa's headroom
#   a100-one  asks 1 nvidia.com/a100: 1 + 1 = 2 <= 2       -> admitted
#   any-two   asks 2 nvidia.com/gpu (any model): it asks no A100 GPU -> admitted (6 free GPUs)
# With both A100 gangs the queue would hold 4 A100 GPUs, so only a100-one can be admitted.
MODEL_MAX = {
    "resources": {"gpu_model_resources": {"nvidia.com/a100": "A100"}},
    "nodes": [
        {"name": "n1", "allocatable": {"nvidia.com/a100": 4, "cpu": 16}},
        {"name": "n2", "gpu_model": "H100", "allocatable": {GPU: 4, "cpu": 16}},
    ],
    "queues": [{"name": "qa", "max": {"nvidia.com/a100": 2}}],
    "running": [
        {"name": "r", "node": "n1", "queue": "qa", "requests": {"nvidia.com/a100": 1, "cpu": 1}}
    ],
    "gangs": [
        _one("a100-two", {"nvidia.com/a100": 2, "cpu": 1}),
        _one("a100-one", {"nvidia.com/a100": 1, "cpu": 1}),
        _one("any-two", {GPU: 2, "cpu": 1}),
    ],
}


@pytest.mark.parametrize("placer", PLACERS)
def test_a_max_on_a_model_specific_gpu_resource_binds_the_pods_it_maps_to(placer: str) -> None:
    admitted, reasons = _run(_load(MODEL_MAX), placer)
    assert admitted == {"a100-one", "any-two"}
    kind, msg = reasons["a100-two"]
    assert kind == "blocked"
    assert "queue qa would exceed its max of 2 nvidia.com/a100: running pods use 1" in msg, msg
    assert "the gang needs at least 2" in msg


def test_the_verifier_counts_model_specific_gpus() -> None:
    s = _load(MODEL_MAX)

    def pod(gang: str, node: str, gpus: tuple[str, ...]) -> PodPlacement:
        return PodPlacement(pod=f"{gang}-w-0", gang=gang, role="w", node=node, gpus=gpus)

    # n1's GPU gpu-0 is held by the running pod (the lowest-listed free GPU)
    ok = [pod("a100-one", "n1", ("gpu-1",)), pod("any-two", "n1", ("gpu-2", "gpu-3"))]
    assert verify(s, assemble_plan(s, ok, {})) == []
    both = [pod("a100-one", "n1", ("gpu-1",)), pod("a100-two", "n1", ("gpu-2", "gpu-3"))]
    bad = verify(s, assemble_plan(s, both, {}))
    assert [v.rule for v in bad] == ["queue_max"]
    assert "nvidia.com/a100 use 4 exceeds its max 2" in bad[0].message


def test_a_queues_gpu_use_is_said_in_gpus() -> None:
    # qa: max 1 GPU; two one-pod gangs of 750m each on n1 (one 4-GPU node): 1.5 GPUs used,
    # said as 1.5 (the quantity would read 1500m)
    s = _load(
        {
            "nodes": [{"name": "n1", "allocatable": {"cpu": 8, GPU: 4}}],
            "queues": [{"name": "qa", "max": {GPU: 1}}],
            "gangs": [_one("a", {GPU: "750m"}), _one("b", {GPU: "750m"})],
        }
    )
    pods = [
        PodPlacement(pod=f"{g}-w-0", gang=g, role="w", node="n1", gpus=(d,), gpu_milli=750)
        for g, d in (("a", "gpu-0"), ("b", "gpu-1"))
    ]
    bad = verify(s, assemble_plan(s, pods, {}))
    assert [v.message for v in bad] == ["queue 'qa': nvidia.com/gpu use 1.5 exceeds its max 1"]
