"""The cluster topology graph, built once per snapshot and frozen.

The network tree, top to bottom as the snapshot's levels give it, and inside each node its
device tree::

    root
     └─ block b1                      (levels, e.g. block > spine > leaf;
         └─ spine s2                   names unique only under their parent,
             └─ leaf l7                so a domain is named by its path)
                 └─ node n12          (the implicit lowest level, "node")
                     └─ NUMA 0
                         └─ PCIe switch P0
                             ├─ GPU G0, GPU G1
                             └─ NIC R0, NIC R1

The graph is a :class:`networkx.DiGraph` (``Topology.graph``, built on first use: the
solver reads only the tables below, and at 5,000 nodes the graph's 130,000 edges take
longer to build than a baseline takes to place the cycle) whose vertices are tuples
``("domain", level, *path)``, ``("node", name)``, ``("numa", node, numa)``,
``("pcie", node, switch)``, ``("gpu", node, id)``, ``("nic", node, id)``. The questions the
solver and the reports ask are answered from tables precomputed at build time, never by
scanning: domains of a level and their nodes, each node's domain per level, the lowest
common domain of a node set, hop distance, and per node the GPU/NIC groups that satisfy
each joint-allocation policy (Koordinator ``SamePCIe`` / ``SameNUMA``).

A node without a label (or explicit membership) for some level joins no domain of that
level; its path holds ``""`` there, and it still joins the levels it has.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import networkx as nx

from gangplan.models import GPU_MILLI, JointPolicy, Snapshot

__all__ = ["NODE_LEVEL", "Domain", "JointGroup", "Topology", "build_topology"]

NODE_LEVEL = "node"
"""The implicit lowest level: each node is a domain of its own."""


@dataclass(frozen=True, order=True)
class Domain:
    """A node set at one level, named by its path from the root: ``("s2", "l7")``."""

    level: str
    path: tuple[str, ...]
    name: str = field(init=False, compare=False, repr=False)
    """``s2/l7``: the path joined, unique in the cluster (computed once)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", "/".join(p or "-" for p in self.path))


@dataclass(frozen=True)
class JointGroup:
    """GPUs and NICs that a joint-allocation policy lets one pod pair (one PCIe switch or
    one NUMA node of one cluster node)."""

    name: str
    gpus: tuple[str, ...]
    nics: tuple[str, ...]


class Topology:
    """Read-only answers about the cluster tree; build with :func:`build_topology`."""

    def __init__(self, snapshot: Snapshot):
        self.levels: tuple[str, ...] = snapshot.level_names
        self._snapshot = snapshot
        self._node_domain: dict[str, dict[str, Domain]] = {}
        self._members: dict[Domain, frozenset[str]] = {}
        self._domains_at: dict[str, tuple[Domain, ...]] = {}
        self._joint: dict[tuple[str, str], tuple[JointGroup, ...]] = {}
        self._gpu_node: dict[str, int] = {}
        self._build(snapshot)

    @cached_property
    def graph(self) -> nx.DiGraph[tuple[str, ...]]:
        """The frozen graph of the module docstring (built on the first call)."""
        g: nx.DiGraph[tuple[str, ...]] = nx.DiGraph()
        s = self._snapshot
        g.add_node(("root",))
        for node in s.nodes:
            parent: tuple[str, ...] = ("root",)
            for lv in self.levels:
                dom = self._node_domain[node.name].get(lv)
                if dom is None:
                    continue
                vertex = ("domain", lv, *dom.path)
                g.add_edge(parent, vertex)
                parent = vertex
            nv = ("node", node.name)
            g.add_edge(parent, nv)
            for numa_node in s.layout_of(node).numa_nodes:
                uv = ("numa", node.name, numa_node.name)
                g.add_edge(nv, uv)
                for sw in numa_node.pcie_switches:
                    sv = ("pcie", node.name, sw.name)
                    g.add_edge(uv, sv)
                    for dev in sw.gpus:
                        g.add_edge(sv, ("gpu", node.name, dev), milli=GPU_MILLI)
                    for dev in sw.nics:
                        g.add_edge(sv, ("nic", node.name, dev))
        nx.freeze(g)
        return g

    # ------------------------------------------------------------------ build

    def _build(self, s: Snapshot) -> None:
        members: dict[Domain, set[str]] = defaultdict(set)
        for node in s.nodes:
            names = [s.domain_name(node, lv) or "" for lv in s.levels]
            chain: dict[str, Domain] = {}
            for i, lv in enumerate(s.levels):
                if not names[i]:
                    continue
                dom = Domain(lv.name, tuple(names[: i + 1]))
                chain[lv.name] = dom
                members[dom].add(node.name)
            chain[NODE_LEVEL] = Domain(NODE_LEVEL, (*names, node.name))
            members[chain[NODE_LEVEL]].add(node.name)
            self._node_domain[node.name] = chain
            layout = s.layout_of(node)
            pcie: list[JointGroup] = []
            numa: list[JointGroup] = []
            for numa_node in layout.numa_nodes:
                ngpus: list[str] = []
                nnics: list[str] = []
                for sw in numa_node.pcie_switches:
                    pcie.append(JointGroup(sw.name, sw.gpus, sw.nics))
                    ngpus += sw.gpus
                    nnics += sw.nics
                numa.append(JointGroup(numa_node.name, tuple(ngpus), tuple(nnics)))
            if node.has_device_topology:
                self._joint[(node.name, "pcie")] = tuple(pcie)
                self._joint[(node.name, "numa")] = tuple(numa)
            self._gpu_node[node.name] = len(layout.gpu_ids)
        self._members = {d: frozenset(n) for d, n in members.items()}
        by_level: dict[str, list[Domain]] = defaultdict(list)
        for d in self._members:
            by_level[d.level].append(d)
        self._domains_at = {lv: tuple(sorted(ds)) for lv, ds in by_level.items()}

    # ------------------------------------------------------------------ queries

    @property
    def all_levels(self) -> tuple[str, ...]:
        """The snapshot's levels, top down, then ``node``."""
        return (*self.levels, NODE_LEVEL)

    @property
    def leaf_level(self) -> str | None:
        """The lowest level above the node (the rack / leaf switch), or None without levels."""
        return self.levels[-1] if self.levels else None

    def domains_at(self, level: str) -> tuple[Domain, ...]:
        """Domains of ``level``, sorted by path. Raises KeyError for an unknown level."""
        if level not in self.all_levels:
            raise KeyError(f"unknown level {level!r} (levels: {', '.join(self.all_levels)})")
        return self._domains_at.get(level, ())

    def nodes_in(self, domain: Domain) -> frozenset[str]:
        """Names of the nodes inside ``domain``."""
        return self._members.get(domain, frozenset())

    def domain_of(self, node: str, level: str) -> Domain | None:
        """The node's domain at ``level``, or None if it joins none there."""
        return self._node_domain[node].get(level)

    def ancestors(self, node: str) -> dict[str, Domain]:
        """The node's domain at every level it has (``node`` included)."""
        return dict(self._node_domain[node])

    def lowest_common_domain(self, nodes: Iterable[str]) -> Domain | None:
        """The lowest domain holding every node of ``nodes`` (None: only the root does)."""
        names = list(nodes)
        if not names:
            return None
        for level in reversed(self.all_levels):
            doms = {self._node_domain[n].get(level) for n in names}
            if len(doms) == 1 and None not in doms:
                return doms.pop()
        return None

    def hops(self, a: str, b: str) -> int:
        """Edges between two nodes in the network tree (0 for the same node; 2 in one leaf)."""
        if a == b:
            return 0
        depth_a = self._depth(a)
        depth_b = self._depth(b)
        lca = self.lowest_common_domain((a, b))
        # depth of the common domain below the root: one edge per level it sits on or under
        depth_lca = (
            0
            if lca is None
            else sum(
                1
                for lv in self.levels[: self.levels.index(lca.level) + 1]
                if lv in self._node_domain[a]
            )
        )
        return depth_a + depth_b - 2 * depth_lca

    def _depth(self, node: str) -> int:
        return len(self._node_domain[node])  # present levels + the node itself

    def joint_groups(self, node: str, policy: JointPolicy) -> tuple[JointGroup, ...]:
        """GPU/NIC groups a pod under ``policy`` may pair within (one per PCIe switch or NUMA
        node); empty when the node declares no device layout (topology unknown) or for
        ``none``."""
        if policy == "none":
            return ()
        return self._joint.get((node, policy), ())

    def gpu_count(self, node: str) -> int:
        return self._gpu_node[node]


def build_topology(snapshot: Snapshot) -> Topology:
    """Build the frozen topology of ``snapshot`` (O(nodes x levels + devices))."""
    return Topology(snapshot)
