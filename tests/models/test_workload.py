"""The instance's optional ``workload``: pod shapes and weights for the fragmentation entry."""

from __future__ import annotations

from typing import Any

import pytest

from gangplan.models import InstanceError, instance_from_snapshot, load_instance

API = {"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance"}


def test_a_declared_workload_is_read_and_written_back() -> None:
    data = {
        **API,
        "resources": {"gpu_model_resources": {"nvidia.com/a100": "A100"}},
        "workload": [
            {"requests": {"cpu": 4, "nvidia.com/gpu": "500m"}, "weight": 3},
            {"requests": {"nvidia.com/a100": 2}},  # reads as 2 GPUs of model A100, weight 1
        ],
    }
    s, warnings = load_instance(data)
    assert warnings == []
    assert [(w.requests, w.gpu_models, w.weight) for w in s.workload] == [
        ({"cpu": 4000, "nvidia.com/gpu": 500}, (), 3),
        ({"nvidia.com/gpu": 2000}, ("A100",), 1),
    ]
    again, _ = load_instance(instance_from_snapshot(s))
    assert again == s


def test_no_workload_is_the_default() -> None:
    s, _ = load_instance(API)
    assert s.workload == ()
    assert "workload" not in instance_from_snapshot(s)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        # a weight is a positive integer
        ({"requests": {"nvidia.com/gpu": 1}, "weight": 0}, "workload[0].weight"),
        # and a bounded one (the score's weights stay small integers)
        ({"requests": {"nvidia.com/gpu": 1}, "weight": 10**7}, "workload[0].weight"),
        # a pod asks a share of one GPU or whole GPUs, never both
        ({"requests": {"nvidia.com/gpu": "1500m"}}, "share of one GPU"),
        # an unknown field is named
        ({"requests": {}, "popularity": 0.5}, "popularity"),
    ],
)
def test_a_bad_workload_entry_is_refused_by_path(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(InstanceError, match="workload"):
        load_instance({**API, "workload": [entry]})
    with pytest.raises(InstanceError) as err:
        load_instance({**API, "workload": [entry]})
    assert message in str(err.value)
