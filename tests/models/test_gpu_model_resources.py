"""Model-specific GPU resources (``resources.gpu_model_resources``, docs/design.md "GPU share"):
a request for ``nvidia.com/a100`` is a request for the GPU resource on an A100 node."""

from __future__ import annotations

from typing import Any

from gangplan.models import instance_from_snapshot, load_instance

GIB = 2**30


def _instance() -> dict[str, Any]:
    # one A100 node advertising 8 nvidia.com/a100; a running pod holds 6 of them
    return {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "resources": {"gpu_model_resources": {"nvidia.com/a100": "A100"}},
        "nodes": [{"name": "n1", "allocatable": {"cpu": 8, "nvidia.com/a100": 8}}],
        "queues": [{"name": "q"}],
        "gangs": [
            {
                "name": "g",
                "queue": "q",
                "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/a100": 2}}],
            }
        ],
        "running": [{"name": "r", "node": "n1", "queue": "q", "requests": {"nvidia.com/a100": 6}}],
    }


def test_node_and_gang_are_mapped() -> None:
    s, _ = load_instance(_instance())
    assert s.node_by_name["n1"].allocatable == {"cpu": 8000, "nvidia.com/gpu": 8000}
    assert s.node_by_name["n1"].gpu_model == "A100"
    assert s.gangs[0].roles[0].requests == {"nvidia.com/gpu": 2000}
    assert s.gangs[0].gpu_models == ("A100",)


def test_running_pod_model_specific_request_holds_gpus() -> None:
    """Regression: a running pod's nvidia.com/a100 request was left unmapped, so the node
    showed all 8 GPUs free (6 are held) and warned that it does not advertise nvidia.com/a100."""
    s, warnings = load_instance(_instance())
    assert warnings == []
    assert s.running[0].requests == {"nvidia.com/gpu": 6000}
    free = s.free("n1")
    assert free.resources == {"cpu": 8000, "nvidia.com/gpu": 2000}
    assert len(free.whole_gpus) == 2
    assert free.running_gpu_milli == 6000


def test_round_trip_after_mapping() -> None:
    s, _ = load_instance(_instance())
    again, warnings = load_instance(instance_from_snapshot(s))
    assert again == s
    assert warnings == []
