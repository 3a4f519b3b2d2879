"""Regressions for bad input found by trying to break gangplan (issue 2: every problem is
reported, with its path, before anything is solved)."""

from __future__ import annotations

from typing import Any

import pytest

from gangplan.models import InstanceError, load_instance


def _base(**extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "nodes": [{"name": "n0", "allocatable": {"cpu": 8, "nvidia.com/gpu": 8}}],
        "queues": [{"name": "q"}],
        "gangs": [],
    }
    data.update(extra)
    return data


def _problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(InstanceError) as err:
        load_instance(data)
    return [(p.path, p.message) for p in err.value.problems]


def _gang(name: str, role: str = "w", **role_extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "queue": "q",
        "roles": [{"name": role, "count": 1, "requests": {"nvidia.com/gpu": 1}, **role_extra}],
    }


def test_two_gangs_naming_the_same_pod_are_refused() -> None:
    # before: validate accepted it and every plan failed the verifier ("placed 2 times")
    got = _problems(_base(gangs=[_gang("a", pod_names=["p1"]), _gang("b", pod_names=["p1"])]))
    assert got[0][0] == "gangs[1].roles[0].pod_names"
    assert "default/p1 is also used by gangs[0].roles[0].pod_names" in got[0][1]


def test_generated_pod_names_that_collide_are_refused() -> None:
    # gang "d-w" role "0" and gang "d" role "w-0" both name their pod d-w-0-0
    got = _problems(_base(gangs=[_gang("d-w", role="0"), _gang("d", role="w-0")]))
    assert got[0][0] == "gangs[1].roles[0].name"
    assert "default/d-w-0-0" in got[0][1]


def test_a_pending_pod_named_like_a_running_pod_is_refused() -> None:
    got = _problems(
        _base(
            gangs=[_gang("g", pod_names=["r"])],
            running=[{"name": "r", "node": "n0", "requests": {"cpu": 1}}],
        )
    )
    assert got == [
        (
            "gangs[0].roles[0].pod_names",
            "pod name default/r is also used by running[0] (pod names must be unique in a "
            "namespace; pods without pod_names are named {gang}-{role}-{i})",
        )
    ]


@pytest.mark.parametrize(
    "name",
    ["Train", "a/b", "with space", "-lead", "trail-", "训练"],
)
def test_gang_names_must_be_kubernetes_names(name: str) -> None:
    got = _problems(_base(gangs=[_gang(name)]))
    assert got[0][0] == "gangs[0].name"


def test_priority_beyond_int32_and_non_finite_creation_time_are_refused() -> None:
    gang = _gang("g") | {"priority": 10**23, "creation_time": float("nan")}
    paths = [p for p, _ in _problems(_base(gangs=[gang]))]
    assert paths == ["gangs[0].priority", "gangs[0].creation_time"]


def test_model_specific_gpu_request_intersects_the_gangs_models() -> None:
    # a gang accepting only H100 that asks nvidia.com/a100 (model A100): a contradiction,
    # reported, not silently widened to H100 or A100
    data = _base(
        resources={"gpu_model_resources": {"nvidia.com/a100": "A100"}},
        gangs=[
            {
                "name": "g",
                "queue": "q",
                "gpu_models": ["H100"],
                "roles": [{"name": "w", "count": 1, "requests": {"nvidia.com/a100": 1}}],
            }
        ],
    )
    got = _problems(data)
    assert got[0][0] == "gangs[0].roles[0].requests.nvidia.com/a100"


def test_model_specific_and_generic_gpu_roles_cannot_mix() -> None:
    data = _base(
        resources={"gpu_model_resources": {"nvidia.com/a100": "A100"}},
        gangs=[
            {
                "name": "g",
                "queue": "q",
                "roles": [
                    {"name": "a", "count": 1, "requests": {"nvidia.com/a100": 1}},
                    {"name": "b", "count": 1, "requests": {"nvidia.com/gpu": 1}},
                ],
            }
        ],
    )
    assert [p for p, _ in _problems(data)] == ["gangs[0].roles[0].requests.nvidia.com/a100"]


def test_a_single_model_specific_gpu_request_becomes_gpu_with_that_model() -> None:
    data = _base(
        resources={"gpu_model_resources": {"nvidia.com/a100": "A100"}},
        gangs=[
            {
                "name": "g",
                "queue": "q",
                "gpu_models": ["A100", "H100"],
                "roles": [{"name": "w", "count": 2, "requests": {"nvidia.com/a100": 1}}],
            }
        ],
    )
    s, _ = load_instance(data)
    gang = s.gangs[0]
    assert gang.gpu_models == ("A100",)
    assert gang.roles[0].requests == {"nvidia.com/gpu": 1000}


@pytest.mark.parametrize(
    "names",
    [
        {"gpu_model_resources": {"cpu": "A100"}},  # cpu is no GPU model resource
        {"gpu_model_resources": {"rdma/hca": "A100"}},  # nor the NIC resource
        {"gpu": "cpu"},  # the GPU resource cannot be a core resource
        {"gpu": "memory"},
        {"gpu": "x.io/dev", "nic": "x.io/dev"},  # GPU and NIC resources must differ
    ],
)
def test_resource_names_that_would_corrupt_counts_are_refused(names: dict[str, Any]) -> None:
    got = _problems(_base(resources=names))
    assert got[0][0].startswith("resources")


@pytest.mark.parametrize(
    "pattern",
    ["gpu-{index[0]}", "gpu-{index.foo}", "gpu-{index:q}"],
)
def test_bad_pool_name_patterns_are_a_message_not_a_crash(pattern: str) -> None:
    got = _problems(_base(node_pools=[{"name": pattern, "count": 2}]))
    assert got[0][0] == "node_pools[0].name"
    assert "{index}" in got[0][1]
