"""Hostile and huge input that the models must refuse with a path, never crash on, and never
spend gigabytes on.

Each test rebuilds a reproducer found by breaking gangplan on purpose; the comment under
``before:`` says what happened then. Expected messages are written out by hand.
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplan.models import InstanceError, NodeSelectorRequirement, load_instance
from gangplan.models.limits import (
    MAX_DEVICES,
    MAX_DEVICES_PER_NODE,
    MAX_NODES,
    MAX_PODS,
    MAX_PODS_PER_GANG,
)

GPU = "nvidia.com/gpu"
API = {"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance"}


def instance(**parts: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        **API,
        "nodes": [{"name": "n0", "allocatable": {"cpu": 8, GPU: 8}}],
        "queues": [{"name": "q"}],
    }
    data.update(parts)
    return data


def gang(name: str = "g", **role: Any) -> dict[str, Any]:
    return {"name": name, "queue": "q", "roles": [{"name": "w", "count": 1, **role}]}


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(InstanceError) as err:
        load_instance(data)
    return [str(p) for p in err.value.problems]


# --------------------------------------------------------------------------- Gt / Lt


def affinity(operator: str, *values: str) -> list[dict[str, Any]]:
    return [{"match_expressions": [{"key": "rank", "operator": operator, "values": list(values)}]}]


GT_LT_HELP = (
    "takes exactly one integer value (accepted: a 64-bit integer in ASCII digits with an "
    "optional sign, as Kubernetes parses it with Go's strconv.ParseInt; got "
)


@pytest.mark.parametrize(
    ("operator", "value"),
    [
        ("Gt", "--5"),  # before: passed validate ("--5".lstrip("-") is digits); solve crashed
        ("Lt", "²"),  # before: "²".isdigit() is True, int("²") raised in solve and verify
        ("Gt", "٣"),  # an Arabic-Indic digit: not ASCII
        ("Gt", "5_000"),  # Python's int() takes underscores; ParseInt does not
        ("Gt", " 5"),  # nor blanks
        ("Gt", ""),
        ("Lt", "9223372036854775808"),  # 2^63: out of int64's range
        ("Lt", "1" * 5000),  # more digits than Python's int() accepts, and out of range
    ],
)
def test_gt_lt_take_one_64_bit_integer(operator: str, value: str) -> None:
    got = problems(instance(gangs=[gang(node_affinity=affinity(operator, value))]))
    shown = repr([value]) if len(repr([value])) <= 60 else repr([value])[:57] + "..."
    assert got == [
        "gangs[0].roles[0].node_affinity[0].match_expressions[0]: operator "
        f"{operator} {GT_LT_HELP}{shown})"
    ]


@pytest.mark.parametrize(
    ("value", "bound"),
    [
        ("+5", 5),  # Go's strconv.ParseInt takes a leading '+'
        ("-9223372036854775808", -(2**63)),  # int64's lowest
        ("007", 7),  # and leading zeros
    ],
)
def test_gt_lt_accept_what_parse_int_accepts(value: str, bound: int) -> None:
    req = NodeSelectorRequirement(key="rank", operator="Gt", values=(value,))
    assert req.matches({"rank": str(bound + 1)})
    assert not req.matches({"rank": str(bound)})


@pytest.mark.parametrize(
    "label",
    [
        "--3",  # before: "--3".lstrip("-") is digits, then int("--3") crashed solve and verify
        "²",
        "٣",
        "3 ",
        "9223372036854775808",  # out of int64's range: ParseInt fails, so no match
        "9" * 5000,
    ],
)
def test_a_label_that_is_not_an_integer_does_not_match(label: str) -> None:
    # Kubernetes (labels.Requirement.Matches): a label value ParseInt refuses matches neither
    # Gt nor Lt
    for operator in ("Gt", "Lt"):
        req = NodeSelectorRequirement(key="rank", operator=operator, values=("0",))
        assert req.matches({"rank": label}) is False


def test_a_label_parse_int_takes_matches() -> None:
    req = NodeSelectorRequirement(key="rank", operator="Gt", values=("5",))
    assert req.matches({"rank": "+7"})  # +7 > 5
    assert not req.matches({"rank": "-07"})  # -7 < 5


# --------------------------------------------------------------------------- pod_names


def test_pod_names_shorter_than_count_are_reported() -> None:
    # before: validate crashed with IndexError in the pod-name check
    got = problems(instance(gangs=[gang(count=3, pod_names=["a", "b"])]))
    assert got == ["gangs[0].roles[0].pod_names: 2 pod names for count 3 (they must agree)"]


def test_pod_names_longer_than_count_are_reported() -> None:
    got = problems(instance(gangs=[gang(count=1, pod_names=["a", "b"])]))
    assert got == ["gangs[0].roles[0].pod_names: 2 pod names for count 1 (they must agree)"]


def test_duplicate_pod_names_inside_one_role_are_refused() -> None:
    # before: accepted, and `--placer greedy --format bindings` wrote two Bindings (and two
    # different device annotations) for one pod
    got = problems(instance(gangs=[gang(count=3, pod_names=["a", "b", "a"])]))
    assert got == [
        "gangs[0].roles[0].pod_names: duplicate pod name 'a' (each pod of a role needs its "
        "own name)"
    ]


# --------------------------------------------------------------------------- quantities


@pytest.mark.parametrize("value", ["٨", "３Gi", "1٠"])
def test_non_ascii_digits_in_quantities_are_refused(value: str) -> None:
    # before: Python's \d and Fraction() took them; Kubernetes' grammar has only 0-9
    got = problems(instance(nodes=[{"name": "n0", "allocatable": {"memory": value}}]))
    assert got == [
        f"nodes[0].allocatable: resource 'memory': {value!r} is not a Kubernetes quantity "
        '(accepted: "500m", "2", "1.5", "32Gi", "1e3")'
    ]


# --------------------------------------------------------------------------- name patterns


def pool(**fields: Any) -> dict[str, Any]:
    return {"name": "p-{index}", "count": 2, "allocatable": {"cpu": 4}, **fields}


NAME_LONG = "cannot fit a name of at most 253 characters"


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        # before: 500 names of 2,000,000 characters, 3 GB, then the process was killed
        ("{index:2000000}", f"a width of 2000000 {NAME_LONG}"),
        ("{index:.300f}", f"a width of 300 {NAME_LONG}"),
        ("x{index:>254}", f"a width of 254 {NAME_LONG}"),
        ("{index:9" + "9" * 5000 + "}", f"a width of 99999999... {NAME_LONG}"),
        # a width taken from the index itself: node 1,000,000 would be a megabyte long
        ("{index:{index}}", "a nested field in a format spec is not accepted"),
    ],
)
def test_a_pool_name_pattern_too_wide_is_refused_before_expanding(
    pattern: str, message: str
) -> None:
    got = problems(instance(node_pools=[pool(name=pattern, count=500)]))
    assert len(got) == 1
    assert got[0].startswith("node_pools[0].name: ")
    assert message in got[0]


def test_a_pool_whose_names_grow_too_long_is_refused_once() -> None:
    # each field fits, but two of width 200 make names of 401 characters: reported at the
    # pool, with the length and the first name cut short, not once per node
    got = problems(instance(node_pools=[pool(name="{index:0200}-{index:0200}", count=3)]))
    assert got == [
        "node_pools[0].name: pattern '{index:0200}-{index:0200}' gives names of up to 401 "
        "characters (accepted: a Kubernetes name of at most 253 characters)"
    ]


def test_a_spread_pattern_too_wide_is_refused_before_expanding() -> None:
    spread = [{"level": "leaf", "size": 1, "name": "leaf-{n:2000000}"}]
    got = problems(
        instance(levels=[{"name": "leaf", "node_label": "lf"}], node_pools=[pool(spread=spread)])
    )
    assert len(got) == 1
    assert got[0].startswith("node_pools[0].spread[0].name: ")
    assert f"a width of 2000000 {NAME_LONG}" in got[0]


def test_a_spread_whose_domain_names_grow_too_long_is_refused_once() -> None:
    # first 10^300: domain names of 305 characters ("leaf-" and 301 digits)
    spread = [{"level": "leaf", "size": 1, "name": "leaf-{n}", "first": 10**300}]
    got = problems(
        instance(levels=[{"name": "leaf", "node_label": "lf"}], node_pools=[pool(spread=spread)])
    )
    assert got == [
        "node_pools[0].spread[0].name: pattern 'leaf-{n}' gives names of up to 306 characters "
        "(accepted: a name of at most 253 characters)"
    ]


# --------------------------------------------------------------------------- counts


def test_the_bounds_are_generous_but_finite() -> None:
    # Kubernetes documents clusters of up to 5,000 nodes and 150,000 pods
    assert MAX_NODES >= 5_000 * 10
    assert MAX_PODS >= 150_000 * 5
    assert MAX_PODS_PER_GANG >= 150_000
    assert MAX_DEVICES_PER_NODE >= 8 * 16  # 8 GPUs, each shared by 16 (time-slicing)
    assert MAX_DEVICES >= MAX_NODES * 16  # 8 GPUs and 8 NICs on every node


@pytest.mark.parametrize(
    ("data", "path", "fragment"),
    [
        # before: each of these ran to MemoryError
        (
            instance(node_pools=[pool(count=10**9)]),
            "node_pools[0].count",
            f"1,000,000,000 nodes: more than gangplan accepts (at most {MAX_NODES:,} nodes "
            "in a snapshot, MAX_NODES",
        ),
        (
            instance(running=[{"name": "r", "node": "n0", "replicas": 10**9}]),
            "running[0].replicas",
            f"1,000,000,000 pods: more than gangplan accepts (at most {MAX_PODS:,} pods in a "
            "snapshot, MAX_PODS",
        ),
        (
            instance(gangs=[gang(count=10**9)]),
            "gangs[0].roles[0].count",
            f"1,000,000,000 pods: more than gangplan accepts (at most {MAX_PODS_PER_GANG:,} "
            "pods in one gang, MAX_PODS_PER_GANG",
        ),
        (
            instance(nodes=[{"name": "n0", "allocatable": {GPU: "100Mi"}}]),
            "nodes[0].allocatable.nvidia.com/gpu",
            f"104,857,600 devices: more than gangplan accepts (at most {MAX_DEVICES_PER_NODE:,} "
            "devices of one resource on a node, MAX_DEVICES_PER_NODE",
        ),
        (
            instance(nodes=[{"name": "n0", "allocatable": {"rdma/hca": "10M"}}]),
            "nodes[0].allocatable.rdma/hca",
            "10,000,000 devices: more than gangplan accepts",
        ),
        (
            # the implicit layout would name every device of every pool node
            instance(node_pools=[pool(allocatable={GPU: "100Mi"}, count=3)]),
            "node_pools[0].allocatable.nvidia.com/gpu",
            "104,857,600 devices: more than gangplan accepts",
        ),
        (
            # a model-specific GPU resource counts as the GPU resource
            instance(
                resources={"gpu_model_resources": {"nvidia.com/a100": "A100"}},
                nodes=[{"name": "n0", "allocatable": {"nvidia.com/a100": "10M"}}],
            ),
            "nodes[0].allocatable.nvidia.com/gpu",
            "10,000,000 devices: more than gangplan accepts",
        ),
    ],
)
def test_counts_no_real_cluster_has_are_refused(
    data: dict[str, Any], path: str, fragment: str
) -> None:
    got = problems(data)
    assert len(got) == 1, got
    assert got[0].startswith(f"{path}: "), got
    assert fragment in got[0], got


def test_nodes_in_all_are_bounded_before_expanding() -> None:
    # two pools, each within the bound, together above it
    half = MAX_NODES // 2 + 1
    got = problems(instance(node_pools=[pool(count=half), pool(name="o-{index}", count=half)]))
    assert got == [
        f"node_pools: {2 * half + 1:,} nodes: more than gangplan accepts (at most "
        f"{MAX_NODES:,} nodes in a snapshot, MAX_NODES in gangplan.models.limits)"
    ]


def test_running_pods_in_all_are_bounded_before_expanding() -> None:
    half = MAX_PODS // 2 + 1
    running = [{"name": f"r{i}", "node": "n0", "replicas": half} for i in range(2)]
    got = problems(instance(running=running))
    assert got == [
        f"running: {2 * half:,} pods: more than gangplan accepts (at most {MAX_PODS:,} pods "
        "in a snapshot, MAX_PODS in gangplan.models.limits)"
    ]


def test_devices_in_all_are_bounded_before_expanding() -> None:
    # MAX_NODES nodes of MAX_DEVICES_PER_NODE GPUs each: every node is allowed, their sum
    # is not (the free amounts alone would hold one entry per device)
    big = pool(count=MAX_NODES - 1, allocatable={GPU: MAX_DEVICES_PER_NODE})
    got = problems(instance(node_pools=[big]))
    total = (MAX_NODES - 1) * MAX_DEVICES_PER_NODE + 8  # and n0's 8 GPUs
    assert got == [
        f"node_pools: {total:,} devices: more than gangplan accepts (at most {MAX_DEVICES:,} "
        "GPU and NIC devices in a snapshot, MAX_DEVICES in gangplan.models.limits)"
    ]


def test_a_gang_larger_than_the_bound_is_refused() -> None:
    # two roles within the bound, their gang above it
    half = MAX_PODS_PER_GANG // 2 + 1
    roles = [{"name": "a", "count": half}, {"name": "b", "count": half}]
    got = problems(instance(gangs=[{"name": "g", "queue": "q", "roles": roles}]))
    assert got == [
        f"gangs[0]: {2 * half:,} pods: more than gangplan accepts (at most "
        f"{MAX_PODS_PER_GANG:,} pods in one gang, MAX_PODS_PER_GANG in gangplan.models.limits)"
    ]


def test_pods_in_all_are_bounded_before_the_pod_names_are_built() -> None:
    # 7 gangs of MAX_PODS_PER_GANG: each allowed, their sum above MAX_PODS
    gangs = [gang(f"g{i}", count=MAX_PODS_PER_GANG) for i in range(7)]
    got = problems(instance(gangs=gangs))
    assert got == [
        f"gangs: {7 * MAX_PODS_PER_GANG:,} pods: more than gangplan accepts (at most "
        f"{MAX_PODS:,} pods in a snapshot, MAX_PODS in gangplan.models.limits)"
    ]


# --------------------------------------------------------------------------- one line per mistake


def test_one_mistake_in_a_large_pool_is_reported_once_with_the_count() -> None:
    # before: one line per node, 50,000 identical lines (but for the node's name)
    layout = {"numa_nodes": [{"name": "u", "pcie_switches": [{"name": "s", "gpus": ["g0"]}]}]}
    data = instance(
        device_layouts={"one": layout},
        node_pools=[
            pool(count=50_000, device_layout="one", allocatable={GPU: 2, "example.com/x": "0.5"})
        ],
    )
    assert problems(data) == [
        "node_pools[0] (node 'p-0' and 49,999 more).allocatable.example.com/x: 500m is not a "
        "whole number; extended resources are counted in whole units (only the GPU resource "
        "takes a share such as 500m)",
        "node_pools[0] (node 'p-0' and 49,999 more).allocatable.nvidia.com/gpu: node 'p-0': "
        "device layout has 1 GPUs but allocatable nvidia.com/gpu is 2 (they must agree)",
    ]


def test_mistakes_of_some_pool_nodes_only_are_counted_apart() -> None:
    # "{index:x}" writes hexadecimal: p-a .. p-f hold letters, fine; but "{index:X}" writes
    # capitals, so nodes 10..15 of 16 are not Kubernetes names, 0..9 are
    got = problems(instance(node_pools=[pool(name="p-{index:X}", count=16)]))
    assert got == [
        "node_pools[0] (node 'p-A' and 5 more).name: should be a Kubernetes name: lowercase "
        "letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 "
        "characters (got 'p-A')"
    ]


def test_one_mistake_in_many_replicas_is_reported_once_with_the_count() -> None:
    # before: one line per replica, all alike
    got = problems(instance(running=[{"name": "r", "node": "n9", "replicas": 3}]))
    assert got == ["running[0] (3 replicas).node: unknown node 'n9' (declared: 'n0')"]


def test_a_mistake_of_one_node_or_one_replica_keeps_its_path() -> None:
    # one of its kind: the path names the node (pool) or the entry, as before
    got = problems(
        instance(
            node_pools=[pool(count=1, allocatable={"example.com/x": "0.5"})],
            running=[{"name": "r", "node": "n9"}],
        )
    )
    assert got == [
        "node_pools[0] (node 'p-0').allocatable.example.com/x: 500m is not a whole number; "
        "extended resources are counted in whole units (only the GPU resource takes a share "
        "such as 500m)",
        "running[0].node: unknown node 'n9' (declared: 'p-0', 'n0')",
    ]
