"""Effective pod requests and constraints, as the API server and the scheduler count them.

Expected values follow ``k8s.io/component-helpers/resource.PodRequests`` and the API
server's defaulting of requests from limits; each case says how its number comes about.
"""

from __future__ import annotations

from typing import Any

import kubernetes.client as k8s
import pytest

from gangplan.adapters.kube.objects import ObjectInvalid, parse_official
from gangplan.adapters.kube.pods import (
    PodProblem,
    effective_requests,
    joint_policy,
    map_vendor_requests,
    required_terms,
    tolerations_of,
)

GI = 2**30


def spec(**fields: Any) -> Any:
    fields.setdefault("containers", [])
    return parse_official(k8s.V1PodSpec, fields)[0]


def c(
    name: str = "c",
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    restart: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "resources": {}}
    if requests:
        out["resources"]["requests"] = requests
    if limits:
        out["resources"]["limits"] = limits
    if restart:
        out["restartPolicy"] = restart
    return out


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # limits only: requests default to limits (how nvidia.com/gpu is usually written)
        (
            {"containers": [c(limits={"nvidia.com/gpu": 2, "cpu": "4"})]},
            {"cpu": 4000, "nvidia.com/gpu": 2000},
        ),
        # requests below limits: the requests count
        ({"containers": [c(requests={"cpu": "1"}, limits={"cpu": "4"})]}, {"cpu": 1000}),
        # two containers add up: 500m + 1.5 = 2 CPU; 1Gi + 512Mi
        (
            {
                "containers": [
                    c("a", {"cpu": "500m", "memory": "1Gi"}),
                    c("b", {"cpu": 1.5, "memory": "512Mi"}),
                ]
            },
            {"cpu": 2000, "memory": GI + 512 * 2**20},
        ),
        # a plain init container larger than the containers: the pod asks the larger (3)
        (
            {"initContainers": [c("i", {"cpu": 3})], "containers": [c("a", {"cpu": 1})]},
            {"cpu": 3000},
        ),
        # a sidecar (restartPolicy Always) adds to the containers: 1 + 2 = 3
        (
            {
                "initContainers": [c("s", {"cpu": 2}, restart="Always")],
                "containers": [c("a", {"cpu": 1})],
            },
            {"cpu": 3000},
        ),
        # sidecar 2, then an init container of 4 runs beside it: 6 > 1 + 2
        (
            {
                "initContainers": [c("s", {"cpu": 2}, restart="Always"), c("i", {"cpu": 4})],
                "containers": [c("a", {"cpu": 1})],
            },
            {"cpu": 6000},
        ),
        # an init container of 4 before the sidecar runs alone: max(4, 1 + 2) = 4
        (
            {
                "initContainers": [c("i", {"cpu": 4}), c("s", {"cpu": 2}, restart="Always")],
                "containers": [c("a", {"cpu": 1})],
            },
            {"cpu": 4000},
        ),
        # overhead is added: 1 + 250m
        ({"containers": [c("a", {"cpu": 1})], "overhead": {"cpu": "250m"}}, {"cpu": 1250}),
        # pod-level requests replace cpu and memory; extended resources stay the containers'
        (
            {
                "containers": [c("a", {"cpu": 1, "memory": "1Gi"}, {"nvidia.com/gpu": 1})],
                "resources": {"requests": {"cpu": 8}},
            },
            {"cpu": 8000, "memory": GI, "nvidia.com/gpu": 1000},
        ),
        # pod-level limits only: pod-level requests default to them
        (
            {
                "containers": [c("a", {"cpu": 1})],
                "resources": {"limits": {"cpu": 2, "memory": "4Gi"}},
            },
            {"cpu": 2000, "memory": 4 * GI},
        ),
        # exact sums: 3 x 333m = 999m; 0.1 + 0.2 = 300m exactly (no float error)
        ({"containers": [c(str(i), {"cpu": "333m"}) for i in range(3)]}, {"cpu": 999}),
        ({"containers": [c("a", {"cpu": "0.1"}), c("b", {"cpu": "0.2"})]}, {"cpu": 300}),
        # zero requests are left out
        ({"containers": [c("a", {"cpu": 1, "nvidia.com/gpu": 0})]}, {"cpu": 1000}),
    ],
)
def test_effective_requests(fields: dict[str, Any], expected: dict[str, int]) -> None:
    assert effective_requests(spec(**fields)) == expected


def test_bad_quantity_names_the_field() -> None:
    s = spec(containers=[c("a"), c("b", {"cpu": "3 * 16"})])
    with pytest.raises(PodProblem, match=r"spec\.containers\[1\]\.resources\.requests\.cpu"):
        effective_requests(s)


def test_official_model_reports_the_path() -> None:
    with pytest.raises(ObjectInvalid) as err:
        parse_official(
            k8s.V1Pod,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "x"},
                "spec": {"containers": [{"image": "busybox"}]},
            },
        )
    assert err.value.problems == ["spec.containers[0].name: Field required"]


def test_numbers_as_quantities_and_unknown_fields() -> None:
    pod, ignored = parse_official(
        k8s.V1Pod,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "x", "futureField": 1},
            "spec": {
                "containers": [{"name": "a", "resources": {"limits": {"cpu": 2, "memory": 1.5}}}]
            },
        },
    )
    assert pod.spec.containers[0].resources.limits == {"cpu": "2", "memory": "1.5"}
    assert ignored == ["metadata.futureField"]


def test_required_node_affinity_and_tolerations() -> None:
    s = spec(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "gpu", "operator": "In", "values": ["h100", "a100"]}
                            ]
                        },
                        {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
                    ]
                }
            }
        },
        tolerations=[{"operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoSchedule"}],
    )
    terms = required_terms(s)
    assert [[(e.key, e.operator, e.values) for e in t.match_expressions] for t in terms] == [
        [("gpu", "In", ("h100", "a100"))],
        [("zone", "Exists", ())],
    ]
    tols = tolerations_of(s)
    assert [(t.key, t.operator, t.value, t.effect) for t in tols] == [
        (None, "Exists", "", None),
        ("k", "Equal", "v", "NoSchedule"),
    ]


@pytest.mark.parametrize(
    ("term", "message"),
    [
        # node fields (DaemonSet pods' metadata.name) cannot be matched by label
        (
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
            "matchFields",
        ),
        # an empty term matches no node in Kubernetes
        ({}, "matches no node"),
        # In needs values
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "matchExpressions"),
    ],
)
def test_unmappable_affinity(term: dict[str, Any], message: str) -> None:
    s = spec(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    )
    with pytest.raises(PodProblem, match=message):
        required_terms(s)


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        # gpu-core 50 (percent) -> half a GPU
        (
            {"koordinator.sh/gpu-core": 50_000, "koordinator.sh/gpu-memory-ratio": 50_000},
            {"nvidia.com/gpu": 500},
        ),
        # kubernetes.io/gpu 200 -> two whole GPUs; gpu-memory dropped with it
        (
            {"kubernetes.io/gpu": 200_000, "kubernetes.io/gpu-memory": 16 * GI},
            {"nvidia.com/gpu": 2000},
        ),
        # the GPU resource itself wins over Koordinator's shares
        ({"nvidia.com/gpu": 1000, "koordinator.sh/gpu-core": 100_000}, {"nvidia.com/gpu": 1000}),
    ],
)
def test_koordinator_gpu_shares(requests: dict[str, int], expected: dict[str, int]) -> None:
    out, notes = map_vendor_requests(requests, {}, gpu="nvidia.com/gpu", nic="rdma/hca")
    assert out == expected
    assert notes


@pytest.mark.parametrize(
    ("annotation", "policy"),
    [
        ('{"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}', "pcie"),
        ('{"deviceTypes": ["gpu", "rdma"], "requiredScope": "SameNUMA"}', "numa"),
        ('{"deviceTypes": ["gpu", "rdma"]}', None),  # a preference only
        ('{"deviceTypes": ["gpu"], "requiredScope": "SamePCIe"}', None),  # no NICs
        ("{not json", None),
    ],
)
def test_joint_policy(annotation: str, policy: str | None) -> None:
    got, note = joint_policy({"scheduling.koordinator.sh/device-joint-allocate": annotation})
    assert got == policy
    assert (note is None) == (policy is not None)
