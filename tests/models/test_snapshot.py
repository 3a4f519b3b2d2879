"""The snapshot's types (models/snapshot.py): a node without a level's label, the scheduling
terms' meaning (gang minimums, tolerations, node affinity) and the gang key. What running
pods leave free is tested in test_free.py.
"""

from __future__ import annotations

import pytest

from gangplan.models import (
    Gang,
    GangOutcome,
    Node,
    NodeSelectorRequirement,
    Plan,
    PodPlacement,
    Role,
    RunningPod,
    Taint,
    Toleration,
    load_instance,
)
from gangplan.topology import Domain, build_topology

API = {"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance"}


def load(**parts):
    return load_instance({**API, **parts})


# --------------------------------------------------------------------------- level warnings


@pytest.mark.parametrize(
    ("level", "node", "warning"),
    [
        # a level tied to a label: the node lacks the label
        (
            {"name": "leaf", "node_label": "lf"},
            {"name": "b", "labels": {"sp": "s1"}},
            "node 'b' has no label 'lf' for level 'leaf': it joins no leaf domain",
        ),
        # a level of explicit membership: the node names no domain of it
        (
            {"name": "leaf"},
            {"name": "b", "labels": {"sp": "s1"}},
            "node 'b' has no explicit membership for level 'leaf': it joins no leaf domain",
        ),
    ],
)
def test_node_without_a_level_warns_and_joins_no_domain(level, node, warning) -> None:
    snap, warnings = load(
        levels=[{"name": "spine", "node_label": "sp"}, level],
        nodes=[
            {
                "name": "a",
                "labels": {"sp": "s1", "lf": "l1"},
                "domains": {"leaf": "l1"} if "node_label" not in level else {},
            },
            node,
        ],
    )
    assert warnings == [warning]
    topo = build_topology(snap)
    assert topo.domain_of("b", "leaf") is None
    assert topo.domains_at("leaf") == (Domain("leaf", ("s1", "l1")),)
    assert topo.nodes_in(Domain("leaf", ("s1", "l1"))) == {"a"}
    # it keeps the levels it has
    assert topo.domain_of("b", "spine") == Domain("spine", ("s1",))
    assert topo.nodes_in(Domain("spine", ("s1",))) == {"a", "b"}


# --------------------------------------------------------------------------- gang minimums


@pytest.mark.parametrize(
    ("gang", "role_mins", "min_size"),
    [
        # not elastic: every role at its count; the gang at its full size 1 + 4
        ({"roles": [("launcher", 1, None), ("worker", 4, None)]}, [1, 4], 5),
        # elastic (3 < 5): roles default to 0; the launcher sets its own 1
        ({"min_member": 3, "roles": [("launcher", 1, 1), ("worker", 4, None)]}, [1, 0], 3),
        # the roles' own minimums may ask more than the gang's: 1 + 3 = 4 > 2
        ({"min_member": 2, "roles": [("launcher", 1, 1), ("worker", 4, 3)]}, [1, 3], 4),
        # min_member equal to the full size is not elastic
        ({"min_member": 5, "roles": [("launcher", 1, None), ("worker", 4, None)]}, [1, 4], 5),
    ],
)
def test_role_and_gang_minimums(gang, role_mins, min_size) -> None:
    roles = tuple(Role(name=n, count=c, min_member=m) for n, c, m in gang["roles"])
    g = Gang(name="g", queue="q", roles=roles, min_member=gang.get("min_member"))
    assert [g.role_min(r) for r in g.roles] == role_mins
    assert g.min_size == min_size
    assert g.size == 5


# --------------------------------------------------------------------------- taints, affinity


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, ("k", "v", "NoSchedule"), True),
        (
            {"key": "k", "value": "w", "effect": "NoSchedule"},
            ("k", "v", "NoSchedule"),
            False,
        ),  # value differs
        (
            {"key": "k", "operator": "Exists"},
            ("k", "v", "NoExecute"),
            True,
        ),  # any value, any effect
        (
            {"key": "k", "value": "v", "effect": "NoExecute"},
            ("k", "v", "NoSchedule"),
            False,
        ),  # effect differs
        ({"key": "j", "operator": "Exists"}, ("k", "v", "NoSchedule"), False),  # key differs
        ({"operator": "Exists"}, ("k", "v", "NoSchedule"), True),  # empty key + Exists: everything
        ({"operator": "Exists", "effect": "NoExecute"}, ("k", "v", "NoSchedule"), False),
    ],
)
def test_toleration_matching(toleration, taint, tolerated) -> None:
    key, value, effect = taint
    assert (
        Toleration(**toleration).tolerates(Taint(key=key, value=value, effect=effect)) is tolerated
    )


@pytest.mark.parametrize(
    ("operator", "values", "labels", "matches"),
    [
        ("In", ("a", "b"), {"k": "b"}, True),
        ("In", ("a", "b"), {"k": "c"}, False),
        ("In", ("a",), {}, False),
        ("NotIn", ("a",), {"k": "b"}, True),
        ("NotIn", ("a",), {"k": "a"}, False),
        ("NotIn", ("a",), {}, True),  # core/v1: a missing label is not in the set
        ("Exists", (), {"k": ""}, True),
        ("Exists", (), {}, False),
        ("DoesNotExist", (), {}, True),
        ("DoesNotExist", (), {"k": "x"}, False),
        ("Gt", ("5",), {"k": "6"}, True),
        ("Gt", ("5",), {"k": "5"}, False),
        ("Lt", ("5",), {"k": "-1"}, True),
        ("Lt", ("5",), {"k": "x"}, False),  # not an integer
    ],
)
def test_node_selector_requirement(operator, values, labels, matches) -> None:
    req = NodeSelectorRequirement(key="k", operator=operator, values=values)
    assert req.matches(labels) is matches


@pytest.mark.parametrize(
    ("operator", "values", "error"),
    [
        ("In", (), "operator In needs at least one value"),
        ("NotIn", (), "operator NotIn needs at least one value"),
        ("Exists", ("a",), "operator Exists takes no values"),
        ("DoesNotExist", ("a",), "operator DoesNotExist takes no values"),
        ("Gt", ("a",), "operator Gt takes exactly one integer value"),
        ("Lt", ("1", "2"), "operator Lt takes exactly one integer value"),
    ],
)
def test_node_selector_requirement_rejects(operator, values, error) -> None:
    with pytest.raises(ValueError, match=error):
        NodeSelectorRequirement(key="k", operator=operator, values=values)


def test_role_admits_checks_selector_affinity_and_taints() -> None:
    node = Node(
        name="n",
        labels={"zone": "z1"},
        taints=(
            Taint(key="gpu", value="yes", effect="NoSchedule"),
            Taint(key="spot", effect="PreferNoSchedule"),  # only a preference
        ),
    )
    tol = (Toleration(key="gpu", operator="Exists"),)
    assert Role(name="w", count=1, node_selector={"zone": "z1"}, tolerations=tol).admits(node)
    assert not Role(name="w", count=1, node_selector={"zone": "z2"}, tolerations=tol).admits(node)
    assert not Role(name="w", count=1).admits(node)  # the NoSchedule taint
    affinity = ({"match_expressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]},)
    assert not Role(name="w", count=1, node_affinity=affinity, tolerations=tol).admits(node)


# --------------------------------------------------------------------------- the gang key


def test_the_gang_key_is_namespace_slash_name_everywhere() -> None:
    # one key, "namespace/gang", whichever object names the gang
    gang = Gang(name="g", namespace="ns", queue="q", roles=(Role(name="w", count=1),))
    placement = PodPlacement(pod="g-w-0", gang="g", namespace="ns", role="w", node="n")
    outcome = GangOutcome(gang="g", namespace="ns", admitted=True, placed=1)
    running = RunningPod(name="r", namespace="ns", gang="g", node="n")
    assert gang.key == placement.gang_key == outcome.key == running.gang_key == "ns/g"
    assert RunningPod(name="r", node="n").gang_key is None  # no gang
    plan = Plan(gangs=(outcome,), pods=(placement,))
    assert plan.pods_of("ns/g") == [placement]
    assert plan.placed("g", namespace="ns") == 1
    assert plan.placed("g") == 0  # default/g is another gang
