"""The cluster topology graph (networkx), built once per snapshot, and its queries."""

from gangplan.topology.graph import NODE_LEVEL, Domain, JointGroup, Topology, build_topology

__all__ = ["NODE_LEVEL", "Domain", "JointGroup", "Topology", "build_topology"]
