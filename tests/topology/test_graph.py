"""The topology graph (topology/graph.py) on a small hand-made tree::

    root
     ├─ spine s1
     │   ├─ leaf l1: a, b
     │   └─ leaf l2: c
     └─ spine s2
         ├─ leaf l1: d        (named l1 like s1's, but another leaf)
         └─ (no leaf): e      (e has no leaf membership: it joins no leaf)

The spine comes from the label ``sp``, the leaf from explicit membership. Node ``a`` has a
declared device layout (numa0 > sw0 (g0, r0), sw1 (g1, r1); numa1 > sw2 (g2, r2)); the
others have none (2 implicit GPUs each).
"""

from __future__ import annotations

import networkx as nx
import pytest

from gangplan.models import load_instance
from gangplan.topology import NODE_LEVEL, Domain, JointGroup, Topology, build_topology

GPU = "nvidia.com/gpu"
NIC = "rdma/hca"

S1, S2 = Domain("spine", ("s1",)), Domain("spine", ("s2",))
S1L1, S1L2, S2L1 = (
    Domain("leaf", ("s1", "l1")),
    Domain("leaf", ("s1", "l2")),
    Domain("leaf", ("s2", "l1")),
)


@pytest.fixture(scope="module")
def topo() -> Topology:
    layout = {
        "numa_nodes": [
            {
                "name": "numa0",
                "pcie_switches": [
                    {"name": "sw0", "gpus": ["g0"], "nics": ["r0"]},
                    {"name": "sw1", "gpus": ["g1"], "nics": ["r1"]},
                ],
            },
            {"name": "numa1", "pcie_switches": [{"name": "sw2", "gpus": ["g2"], "nics": ["r2"]}]},
        ]
    }

    def node(name: str, spine: str, leaf: str | None, **extra: object) -> dict:
        return {
            "name": name,
            "labels": {"sp": spine},
            "domains": {"leaf": leaf} if leaf else {},
            "allocatable": {GPU: 2},
            **extra,
        }

    snap, warnings = load_instance(
        {
            "apiVersion": "gangplan.io/v1alpha1",
            "kind": "Instance",
            "levels": [{"name": "spine", "node_label": "sp"}, {"name": "leaf"}],
            "nodes": [
                node("a", "s1", "l1", devices=layout, allocatable={GPU: 3, NIC: 3}),
                node("b", "s1", "l1"),
                node("c", "s1", "l2"),
                node("d", "s2", "l1"),
                node("e", "s2", None),
            ],
        }
    )
    assert warnings == [
        "node 'e' has no explicit membership for level 'leaf': it joins no leaf domain"
    ]
    return build_topology(snap)


def test_levels(topo: Topology) -> None:
    assert topo.levels == ("spine", "leaf")
    assert topo.all_levels == ("spine", "leaf", NODE_LEVEL)
    assert topo.leaf_level == "leaf"


def test_domains_at_each_level_sorted_by_path(topo: Topology) -> None:
    assert topo.domains_at("spine") == (S1, S2)
    assert topo.domains_at("leaf") == (S1L1, S1L2, S2L1)
    # every node is a domain of the node level, under its path ("" where it has no leaf)
    assert topo.domains_at(NODE_LEVEL) == (
        Domain("node", ("s1", "l1", "a")),
        Domain("node", ("s1", "l1", "b")),
        Domain("node", ("s1", "l2", "c")),
        Domain("node", ("s2", "", "e")),
        Domain("node", ("s2", "l1", "d")),
    )
    with pytest.raises(KeyError, match="unknown level 'rack'"):
        topo.domains_at("rack")


def test_domain_names_are_paths(topo: Topology) -> None:
    assert [d.name for d in topo.domains_at("leaf")] == ["s1/l1", "s1/l2", "s2/l1"]
    assert topo.domain_of("e", NODE_LEVEL).name == "s2/-/e"


@pytest.mark.parametrize(
    ("domain", "nodes"),
    [
        (S1, {"a", "b", "c"}),
        (S2, {"d", "e"}),
        (S1L1, {"a", "b"}),
        (S1L2, {"c"}),
        (S2L1, {"d"}),  # not a and b: a leaf is named by its path
        (Domain("leaf", ("s9", "l1")), set()),
    ],
)
def test_nodes_in(topo: Topology, domain: Domain, nodes: set[str]) -> None:
    assert topo.nodes_in(domain) == nodes


def test_ancestors_and_domain_of(topo: Topology) -> None:
    assert topo.ancestors("a") == {
        "spine": S1,
        "leaf": S1L1,
        "node": Domain("node", ("s1", "l1", "a")),
    }
    # e joins no leaf
    assert topo.ancestors("e") == {"spine": S2, "node": Domain("node", ("s2", "", "e"))}
    assert topo.domain_of("e", "leaf") is None
    assert topo.domain_of("d", "leaf") == S2L1


@pytest.mark.parametrize(
    ("nodes", "lowest"),
    [
        (["a", "b"], S1L1),
        (["a", "b", "c"], S1),
        (["a", "d"], None),  # only the root holds both
        (["d", "e"], S2),  # e has no leaf, so the spine
        (["a"], Domain("node", ("s1", "l1", "a"))),
        ([], None),
    ],
)
def test_lowest_common_domain(topo: Topology, nodes: list[str], lowest: Domain | None) -> None:
    assert topo.lowest_common_domain(nodes) == lowest


@pytest.mark.parametrize(
    ("a", "b", "hops"),
    [
        ("a", "a", 0),
        ("a", "b", 2),  # a - leaf - b
        ("a", "c", 4),  # a - s1/l1 - s1 - s1/l2 - c
        ("a", "d", 6),  # a - s1/l1 - s1 - root - s2 - s2/l1 - d
        ("d", "e", 3),  # d - s2/l1 - s2 - e (e hangs from its spine)
        ("a", "e", 5),  # a - s1/l1 - s1 - root - s2 - e
    ],
)
def test_hops(topo: Topology, a: str, b: str, hops: int) -> None:
    assert topo.hops(a, b) == hops
    assert topo.hops(b, a) == hops
    # the graph agrees: hops are edges of the network tree
    assert (
        nx.shortest_path_length(topo.graph.to_undirected(as_view=True), ("node", a), ("node", b))
        == hops
    )


def test_joint_groups(topo: Topology) -> None:
    assert topo.joint_groups("a", "pcie") == (
        JointGroup("sw0", ("g0",), ("r0",)),
        JointGroup("sw1", ("g1",), ("r1",)),
        JointGroup("sw2", ("g2",), ("r2",)),
    )
    assert topo.joint_groups("a", "numa") == (
        JointGroup("numa0", ("g0", "g1"), ("r0", "r1")),
        JointGroup("numa1", ("g2",), ("r2",)),
    )
    assert topo.joint_groups("a", "none") == ()
    # b declares no layout: its PCIe topology is unknown, no joint group
    assert topo.joint_groups("b", "pcie") == ()
    assert topo.joint_groups("b", "numa") == ()


def test_gpu_count(topo: Topology) -> None:
    assert topo.gpu_count("a") == 3
    assert topo.gpu_count("b") == 2  # implicit gpu-0, gpu-1


def test_graph_holds_the_tree_and_is_frozen(topo: Topology) -> None:
    g = topo.graph
    assert nx.is_frozen(g)
    assert nx.is_tree(g.to_undirected(as_view=True))
    # a's chain from the root down to a GPU and a NIC
    chain = [
        ("root",),
        ("domain", "spine", "s1"),
        ("domain", "leaf", "s1", "l1"),
        ("node", "a"),
        ("numa", "a", "numa0"),
        ("pcie", "a", "sw1"),
        ("gpu", "a", "g1"),
    ]
    assert nx.shortest_path(g, ("root",), ("gpu", "a", "g1")) == chain
    assert g.has_edge(("pcie", "a", "sw1"), ("nic", "a", "r1"))
    # e hangs directly from its spine
    assert g.has_edge(("domain", "spine", "s2"), ("node", "e"))
    # b's implicit devices are in the graph too
    assert g.has_edge(("pcie", "b", "pcie-0"), ("gpu", "b", "gpu-1"))
    with pytest.raises(nx.NetworkXError):
        g.add_node("x")
