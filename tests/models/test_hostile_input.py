"""Hostile and huge input that the models must refuse with a path, never crash on, and never
spend gigabytes on.

Each test rebuilds a reproducer found by breaking gangplan on purpose; the comment under
``before:`` says what happened then. Expected messages are written out by hand.
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplan.models import InstanceError, NodeSelectorRequirement, load_instance

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
