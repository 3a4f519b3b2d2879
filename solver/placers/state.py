"""Mutable cluster state for placers that go pod by pod: free amounts per node, per GPU
device (milli-GPU) and free RDMA NICs, with device choice that honours joint allocation.

Used by the baselines, by the replay (one pod placed updates one node; nothing is rebuilt)
and by the CP-SAT cycle to turn counts into device ids. It is not used by the verifier,
which recomputes everything from the snapshot on its own.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gangplan.models import GPU_MILLI, Gang, Node, PodPlacement, Role, Snapshot
from gangplan.solver.budget import WorkMeter
from gangplan.topology import Topology

__all__ = ["ClusterState", "DeviceChoice", "NodeState", "static_ok"]


@dataclass(frozen=True)
class DeviceChoice:
    """Devices for one pod: whole GPUs, or one GPU share of ``gpu_milli``; and NICs."""

    gpus: tuple[str, ...] = ()
    gpu_milli: int | None = None
    nics: tuple[str, ...] = ()

    @classmethod
    def of(cls, placement: PodPlacement) -> DeviceChoice:
        """The devices ``placement`` names (to place it again as it was, or take it off)."""
        return cls(placement.gpus, placement.gpu_milli, placement.nics)


@dataclass
class NodeState:
    """Free amounts of one node (base units), per GPU device and per joint group."""

    name: str
    resources: dict[str, int]
    gpu_milli: dict[str, int]
    nics: set[str]
    gpu_order: tuple[str, ...]
    nic_order: tuple[str, ...] = ()
    groups: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = field(
        default_factory=dict
    )
    """policy -> group name -> (gpus, nics); filled only for nodes with a declared layout"""
    group_of: dict[str, dict[str, str]] = field(default_factory=dict)
    """policy -> device id -> group name"""

    def whole_free(self) -> list[str]:
        """The fully free GPUs, in device order."""
        return [d for d in self.gpu_order if self.gpu_milli[d] == GPU_MILLI]


def static_ok(snapshot: Snapshot, gang: Gang, role: Role, node: Node, topo: Topology) -> bool:
    """Everything but capacity: readiness, taints, selectors, affinity, GPU model, a declared
    layout for joint allocation, and a domain at each required level."""
    if not node.ready or node.unschedulable or not role.admits(node):
        return False
    gpu = role.requests.get(snapshot.gpu, 0)
    if gpu and gang.gpu_models and node.gpu_model not in gang.gpu_models:
        return False
    if gang.joint != "none" and role.requests.get(snapshot.nic, 0) and not node.has_device_topology:
        return False
    for tc in (gang.topology, role.topology):
        if (
            tc is not None
            and tc.required is not None
            and tc.required != "node"
            and topo.domain_of(node.name, tc.required) is None
        ):
            return False
    return True


def _static_key(snapshot: Snapshot, gang: Gang, role: Role) -> tuple[object, ...]:
    """Everything :func:`static_ok` looks at, so gangs that agree share one candidate list."""
    return (
        tuple(sorted(role.node_selector.items())),
        role.node_affinity,
        role.tolerations,
        gang.gpu_models if role.requests.get(snapshot.gpu, 0) else (),
        gang.joint != "none" and bool(role.requests.get(snapshot.nic, 0)),
        gang.topology.required if gang.topology else None,
        role.topology.required if role.topology else None,
    )


def _layout_key(topology: Topology, node: str) -> tuple[object, ...]:
    """Which PCIe switches (by name) each NUMA node of ``node`` holds: with the free amounts
    per switch, what a joint allocation's answer depends on."""
    switches = topology.joint_groups(node, "pcie")
    return tuple(
        (
            numa.name,
            tuple(
                sorted(
                    sw.name for sw in switches if {*sw.gpus, *sw.nics} <= {*numa.gpus, *numa.nics}
                )
            ),
        )
        for numa in topology.joint_groups(node, "numa")
    )


class ClusterState:
    """Free capacity of every node, updated pod by pod (``place`` / ``remove``)."""

    def __init__(
        self,
        snapshot: Snapshot,
        topology: Topology,
        *,
        empty: bool = False,
        meter: WorkMeter | None = None,
        indexed: bool = True,
    ):
        """``empty``: start from allocatable, as if no pod ran (for "never fits" reasons);
        ``meter``: where node evaluations are counted (work units of the cycle's budget);
        ``indexed``: answer placers' queries from node classes kept up to date
        (:mod:`gangplan.solver.placers.ranking`); False: by scanning every node (the reference)."""
        self.snapshot = snapshot
        self.meter = meter if meter is not None else WorkMeter()
        self.indexed = indexed
        self.position = {n.name: i for i, n in enumerate(snapshot.nodes)}
        """node name -> its index in snapshot order"""
        self.all_nodes = frozenset(self.position)
        """every node's name (one set object for the whole cycle)"""
        self.topo = topology
        self.gpu = snapshot.gpu
        self.nic = snapshot.nic
        self.nodes: dict[str, NodeState] = {}
        for node in snapshot.nodes:
            free = snapshot.free(node.name)
            layout = snapshot.layout_of(node)
            st = NodeState(
                name=node.name,
                resources=dict(node.allocatable if empty else free.resources),
                gpu_milli={d: GPU_MILLI for d in layout.gpu_ids} if empty else dict(free.gpu_milli),
                nics=set(layout.nic_ids) if empty else set(free.nics),
                gpu_order=layout.gpu_ids,
                nic_order=layout.nic_ids,
            )
            for policy in ("pcie", "numa"):
                groups = topology.joint_groups(node.name, policy)
                if groups:
                    st.groups[policy] = {g.name: (g.gpus, g.nics) for g in groups}
                    st.group_of[policy] = {d: g.name for g in groups for d in (*g.gpus, *g.nics)}
            self.nodes[node.name] = st
        self._static: dict[tuple[object, ...], tuple[str, ...]] = {}
        self._cands_of: dict[tuple[int, int], tuple[Gang, Role, tuple[str, ...]]] = {}
        self._shared: dict[object, Any] = {}
        """what copies share once it is built (node kinds, signatures of unchanged nodes)"""
        self.shared = self._shared
        """the same, for :mod:`gangplan.solver.placers.ranking`'s static tables"""
        self._origin: object = "empty" if empty else "free"
        """what the free amounts were copied from while no node changed (see :meth:`copy`)"""
        self._within: dict[tuple[int, frozenset[str]], tuple[str, ...]] = {}
        self._sets: dict[int, frozenset[str]] = {}
        self._shape_keys: dict[tuple[int, str], tuple[object, ...]] = {}
        """(id(role), joint) -> (requests, joint, role): the role is kept, so its id is not
        reused while the entry lives (as long as this state and its copies)"""
        self._alloc_sig = {
            n.name: (
                n.gpu_model,
                tuple(sorted(n.allocatable.items())),
                _layout_key(topology, n.name),
            )
            for n in snapshot.nodes
        }
        self._fresh()

    def _fresh(self) -> None:
        """The caches that follow the free amounts (empty for a new or copied state)."""
        self._version: dict[str, int] = {}
        self._classes: dict[int, list[Any]] = {}
        self._log: list[str] = []
        """nodes in the order they changed (for :meth:`classes` and rankings to catch up)"""
        self._cap_cache: dict[tuple[object, ...], tuple[int, int]] = {}
        self._sig: dict[str, tuple[int, tuple[object, ...], tuple[object, ...] | None]] = {}
        self._base_sig = self._shared.setdefault(("signatures", self._origin), {})
        """signatures of unchanged nodes, shared by the copies of one unchanged state"""
        self._rankings: dict[object, Any] = {}

    def copy(self, *, empty: bool = False, indexed: bool | None = None) -> ClusterState:
        """An independent state with the same free amounts (``empty``: every node's
        allocatable, as if no pod ran), at the cost of copying each node's free resources,
        GPU milli and NICs. What never changes (device order, joint groups, allocatable
        signatures, the candidate lists of :meth:`candidates`) is shared with this state, so
        a cycle derives it once for all its placers."""
        new = ClusterState.__new__(ClusterState)
        new.snapshot, new.topo, new.gpu, new.nic = self.snapshot, self.topo, self.gpu, self.nic
        new.meter = self.meter
        new.indexed = self.indexed if indexed is None else indexed
        new.position = self.position
        new.all_nodes = self.all_nodes
        alloc = self.snapshot.node_by_name
        new.nodes = {
            name: NodeState(
                name=st.name,
                resources=dict(alloc[name].allocatable if empty else st.resources),
                gpu_milli=dict.fromkeys(st.gpu_order, GPU_MILLI) if empty else dict(st.gpu_milli),
                nics=set(st.nic_order if empty else st.nics),
                gpu_order=st.gpu_order,
                nic_order=st.nic_order,
                groups=st.groups,
                group_of=st.group_of,
            )
            for name, st in self.nodes.items()
        }
        new._static = self._static
        new._cands_of = self._cands_of
        new._shared = new.shared = self._shared
        # a copy of an unchanged state (or an empty one) starts as its source did: the
        # signatures of its unchanged nodes are the source's
        new._origin = "empty" if empty else (self._origin if not self._log else object())
        new._within = self._within
        new._sets = self._sets
        new._shape_keys = self._shape_keys
        new._alloc_sig = self._alloc_sig
        new._fresh()
        return new

    # ------------------------------------------------------------------ filters

    def _shape_key(self, gang: Gang, role: Role) -> tuple[object, ...]:
        """What decides how many pods fit a node (requests and joint policy), not who asks."""
        memo = (id(role), gang.joint)
        key = self._shape_keys.get(memo)
        if key is None or key[2] is not role:
            key = (tuple(sorted(role.requests.items())), gang.joint, role)
            self._shape_keys[memo] = key
        return key[:2]

    def candidates(self, gang: Gang, role: Role) -> tuple[str, ...]:
        """Nodes that pass :func:`static_ok` for this role, in snapshot order (cached: the same
        tuple object for every role that agrees on what :func:`static_ok` reads)."""
        memo = self._cands_of.get((id(gang), id(role)))
        if memo is not None and memo[0] is gang and memo[1] is role:
            return memo[2]
        key = _static_key(self.snapshot, gang, role)
        if key not in self._static and not self.indexed:
            self._static[key] = tuple(
                n.name
                for n in self.snapshot.nodes
                if static_ok(self.snapshot, gang, role, n, self.topo)
            )
        if key not in self._static:
            # nodes alike in everything static_ok reads answer alike: one call per kind
            kind_of, first = self._node_kinds()
            ok = [static_ok(self.snapshot, gang, role, node, self.topo) for node in first]
            self._static[key] = tuple(
                n.name for n, kind in zip(self.snapshot.nodes, kind_of, strict=True) if ok[kind]
            )
            self.meter.units += len(first)
        cands = self._static[key]
        # the gang and role are kept with the entry, so their ids are not reused while it lives
        self._cands_of[(id(gang), id(role))] = (gang, role, cands)
        return cands

    def _node_kinds(self) -> tuple[list[int], list[Node]]:
        """Each node's kind (a small integer) — alike in everything :func:`static_ok` reads
        of a node: readiness, labels, taints, GPU model, a declared layout, the levels it has
        a domain at — and one node of each kind (computed once per cycle)."""
        kinds: tuple[list[int], list[Node]] | None = self._shared.get("kinds")
        if kinds is None:
            topo = self.topo
            levels = topo.levels
            ids: dict[Hashable, int] = {}
            kind_of: list[int] = []
            first: list[Node] = []
            for node in self.snapshot.nodes:
                key = (
                    node.ready,
                    node.unschedulable,
                    tuple(sorted(node.labels.items())),
                    tuple((t.key, t.value, t.effect) for t in node.taints),
                    node.gpu_model,
                    node.has_device_topology,
                    tuple(topo.domain_of(node.name, lv) is not None for lv in levels),
                )
                kind = ids.get(key)
                if kind is None:
                    kind = ids[key] = len(first)
                    first.append(node)
                kind_of.append(kind)
            kinds = self._shared["kinds"] = (kind_of, first)
        return kinds

    def candidates_within(self, gang: Gang, role: Role, within: frozenset[str]) -> tuple[str, ...]:
        """The role's candidates inside ``within`` (e.g. one domain's nodes), in snapshot
        order; at the cost of ``within``'s size, not the cluster's (cached)."""
        cands = self.candidates(gang, role)
        key = (id(cands), within)
        hit = self._within.get(key)
        if hit is None:
            if len(within) * 4 < len(cands):
                member = self._static_set(cands)
                pos = self.position
                hit = tuple(sorted((n for n in within if n in member), key=pos.__getitem__))
            else:
                hit = tuple(n for n in cands if n in within)
            self._within[key] = hit
        return hit

    def candidate_set(self, gang: Gang, role: Role) -> frozenset[str]:
        """:meth:`candidates` as a set (cached)."""
        return self._static_set(self.candidates(gang, role))

    def _static_set(self, cands: tuple[str, ...]) -> frozenset[str]:
        """``cands`` (a :meth:`candidates` tuple, alive as long as the cache) as a set."""
        hit = self._sets.get(id(cands))
        if hit is None:
            hit = self._sets[id(cands)] = frozenset(cands)
        return hit

    # ------------------------------------------------------------------ capacity

    def choose_devices(self, gang: Gang, role: Role, node: str) -> DeviceChoice | None:
        """Devices for one more pod of ``role`` on ``node`` now, or None if it does not fit.

        Whole GPUs come from fully free devices, best fit by joint group; a share goes to
        the device with the least free milli-GPU that still holds it; with a joint policy and
        as many NICs as GPUs, each group gives as many NICs as GPUs (Koordinator SamePCIe).
        """
        st = self.nodes[node]
        req = role.requests
        for res, amount in req.items():
            if res in (self.gpu, self.nic):
                continue
            if amount > st.resources.get(res, 0):
                return None
        gpu = req.get(self.gpu, 0)
        nic = req.get(self.nic, 0) // GPU_MILLI
        if gpu and gpu < GPU_MILLI:
            fitting = [d for d in st.gpu_order if st.gpu_milli[d] >= gpu]
            if not fitting:
                return None
            dev = min(fitting, key=lambda d: (st.gpu_milli[d], st.gpu_order.index(d)))
            nics = self._any_nics(st, nic)
            if nics is None:
                return None
            return DeviceChoice(gpus=(dev,), gpu_milli=gpu, nics=nics)
        need = gpu // GPU_MILLI
        if gang.joint != "none" and nic:
            return self._joint_choice(st, gang.joint, need, nic)
        free = st.whole_free()
        if len(free) < need:
            return None
        gpus = tuple(self._best_fit_gpus(st, free, need))
        nics = self._any_nics(st, nic)
        if nics is None:
            return None
        return DeviceChoice(gpus=gpus, nics=nics)

    def _any_nics(self, st: NodeState, k: int) -> tuple[str, ...] | None:
        if k == 0:
            return ()
        if len(st.nics) < k:
            return None
        return tuple(n for n in st.nic_order if n in st.nics)[:k]

    @staticmethod
    def _best_fit_gpus(st: NodeState, free: list[str], need: int) -> list[str]:
        """Take whole GPUs from the groups with the fewest free first (keep groups whole)."""
        if need == 0:
            return []
        of = st.group_of.get("pcie")
        if not of:
            return free[:need]
        by_group: dict[str, list[str]] = {}
        for d in free:
            by_group.setdefault(of.get(d, ""), []).append(d)
        exact = [g for g, ds in by_group.items() if len(ds) >= need]
        if exact:
            g = min(exact, key=lambda g: (len(by_group[g]), g))
            return by_group[g][:need]
        out: list[str] = []
        for _g, ds in sorted(by_group.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            out += ds[: need - len(out)]
            if len(out) == need:
                break
        return out

    def _joint_choice(self, st: NodeState, policy: str, need: int, nic: int) -> DeviceChoice | None:
        groups = st.groups.get(policy)
        if not groups:
            return None
        avail = {
            g: (
                [d for d in gpus if st.gpu_milli[d] == GPU_MILLI],
                [n for n in nics if n in st.nics],
            )
            for g, (gpus, nics) in groups.items()
        }
        if nic == need:
            pairs = {g: min(len(a), len(b)) for g, (a, b) in avail.items()}
            if sum(pairs.values()) < need:
                return None
            single = [g for g, p in pairs.items() if p >= need]
            if single:
                order = [min(single, key=lambda g: (pairs[g], g))]
            else:
                order = sorted(pairs, key=lambda g: (-pairs[g], g))
            gpus: list[str] = []
            nics: list[str] = []
            for g in order:
                take = min(pairs[g], need - len(gpus))
                gpus += avail[g][0][:take]
                nics += avail[g][1][:take]
                if len(gpus) == need:
                    break
            return DeviceChoice(gpus=tuple(gpus), nics=tuple(nics))
        # fewer (or more) NICs than GPUs: NICs only from groups holding the pod's GPUs
        order = sorted(avail, key=lambda g: (-len(avail[g][0]), g))
        picked: list[str] = []
        chosen: list[str] = []
        for g in order:
            if len(picked) == need:
                break
            ids = avail[g][0][: need - len(picked)]
            if ids:
                picked += ids
                chosen.append(g)
        if len(picked) < need:
            return None
        pool = [n for g in chosen for n in avail[g][1]]
        if len(pool) < nic:
            return None
        return DeviceChoice(gpus=tuple(picked), nics=tuple(pool[:nic]))

    def pod_capacity(self, gang: Gang, role: Role, node: str, limit: int | None = None) -> int:
        """How many more pods of ``role`` fit on ``node`` now (by trial, up to ``limit``).

        Cached per node until the node changes (``place`` / ``remove``)."""
        cap = limit if limit is not None else role.count
        self.meter.units += 1
        key = (node, self._shape_key(gang, role), cap)
        hit = self._cap_cache.get(key)
        version = self._version.get(node, 0)
        if hit is not None and hit[0] == version:
            return hit[1]
        value = self._class_capacity(gang, role, node, cap, key[1])
        self._cap_cache[key] = (version, value)
        return value

    def capacities(self, gang: Gang, role: Role, nodes: Iterable[str], limit: int) -> list[int]:
        """:meth:`pod_capacity` of each node of ``nodes`` (up to ``limit``), in their order,
        with the lookups hoisted out of the loop."""
        shape = self._shape_key(gang, role)
        cache = self._cap_cache
        versions = self._version
        out = []
        if not isinstance(nodes, (list, tuple)):
            nodes = list(nodes)
        self.meter.units += len(nodes)
        for node in nodes:
            key = (node, shape, limit)
            hit = cache.get(key)
            version = versions.get(node, 0)
            if hit is not None and hit[0] == version:
                out.append(hit[1])
            else:
                value = self._class_capacity(gang, role, node, limit, shape)
                cache[key] = (version, value)
                out.append(value)
        return out

    def candidate_capacities(self, gang: Gang, role: Role, limit: int) -> list[int]:
        """:meth:`capacities` of the role's :meth:`candidates` (up to ``limit``), in their
        order, computed once per class of interchangeable candidates (:meth:`classes`:
        nodes with one signature hold as many pods of any shape) and spread to its members:
        the cost of the classes, a few dozen, not of the candidates, thousands, besides one
        write per candidate. Reference mode: :meth:`capacities` node by node."""
        cands = self.candidates(gang, role)
        if not self.indexed:
            return self.capacities(gang, role, cands, limit)
        shape = self._shape_key(gang, role)
        self.meter.units += len(cands)
        entry = self._class_entry(cands)
        pos: dict[str, int] = entry[1]
        out = [0] * len(cands)
        for members in entry[2].values():
            value = self._class_capacity(gang, role, members[0], limit, shape)
            if value:
                for n in members:
                    out[pos[n]] = value
        return out

    def fits(self, gang: Gang, role: Role, node: str) -> bool:
        """Does one more pod of ``role`` fit on ``node`` now?"""
        return self.pod_capacity(gang, role, node, 1) >= 1

    def fitting(self, gang: Gang, role: Role, nodes: Iterable[str]) -> list[str]:
        """The nodes of ``nodes`` where one more pod of ``role`` fits now, in their order
        (:meth:`fits` for many nodes, with the lookups hoisted out of the loop)."""
        shape = self._shape_key(gang, role)
        cache = self._cap_cache
        versions = self._version
        out = []
        if not isinstance(nodes, (list, tuple)):
            nodes = list(nodes)
        self.meter.units += len(nodes)
        for node in nodes:
            hit = cache.get((node, shape, 1))
            version = versions.get(node, 0)
            if hit is not None and hit[0] == version:
                ok = hit[1] >= 1
            else:
                value = self._class_capacity(gang, role, node, 1, shape)
                cache[(node, shape, 1)] = (version, value)
                ok = value >= 1
            if ok:
                out.append(node)
        return out

    def _class_capacity(
        self, gang: Gang, role: Role, node: str, cap: int, shape: tuple[object, ...]
    ) -> int:
        """:meth:`_pod_capacity`, once per class of nodes: nodes with one :meth:`signature`
        hold as many pods of a shape (a direct room, or a trial up to ``cap``), so the answer
        is kept per signature for every state of the cycle (reference mode: per node)."""
        if not self.indexed:
            return self._pod_capacity(gang, role, node, cap)
        sig = self._signature(node, self.joint_pairs(gang, role))
        memo: dict[Hashable, int] = self._shared.setdefault("rooms", {})
        if self.exact_room(gang, role):
            room = memo.get((sig, shape))
            if room is None:
                counted = self._room(gang, role, node)
                assert counted is not None
                room = memo[(sig, shape)] = counted
            return min(cap, room)
        hit = memo.get((sig, shape, cap))
        if hit is None:
            hit = memo[(sig, shape, cap)] = self._trial_capacity(gang, role, node, cap)
        return hit

    def _pod_capacity(self, gang: Gang, role: Role, node: str, limit: int | None = None) -> int:
        cap = limit if limit is not None else role.count
        room = self._room(gang, role, node)
        if room is not None:
            return min(cap, room)
        return self._trial_capacity(gang, role, node, cap)

    def exact_room(self, gang: Gang, role: Role) -> bool:
        """Is the room for pods of ``role`` counted directly (:meth:`_room`), not by trial?
        Only a joint policy with fewer (or more) NICs than GPUs is counted by trial."""
        nic = role.requests.get(self.nic, 0) // GPU_MILLI
        gpu = role.requests.get(self.gpu, 0)
        if gang.joint == "none" or not nic or (gpu and gpu < GPU_MILLI):
            return True
        return nic == gpu // GPU_MILLI

    def _room(self, gang: Gang, role: Role, node: str) -> int | None:
        """Pods of one shape that fit a node, counted directly (None: count by trial).

        Exact for one shape: every other resource bounds it by ``free // request``; whole GPUs
        by the fully free devices; a share by ``sum(free milli // share)`` over devices; with
        a joint policy and as many NICs as GPUs, by the GPU/NIC pairs within groups (a pod
        may take pairs from several groups). Fewer NICs than GPUs under a joint policy is
        counted by trial placement instead.
        """
        st = self.nodes[node]
        req = role.requests
        room = 1 << 30
        for res, amount in req.items():
            if amount <= 0 or res in (self.gpu, self.nic):
                continue
            room = min(room, st.resources.get(res, 0) // amount)
        gpu = req.get(self.gpu, 0)
        nic = req.get(self.nic, 0) // GPU_MILLI
        if gpu and gpu < GPU_MILLI:
            room = min(room, sum(m // gpu for m in st.gpu_milli.values()))
            if nic:
                room = min(room, len(st.nics) // nic)
            return room
        need = gpu // GPU_MILLI
        if gang.joint != "none" and nic:
            if nic != need:
                return None
            groups = st.groups.get(gang.joint)
            if not groups:
                return 0
            pairs = sum(
                min(
                    sum(1 for d in gpus if st.gpu_milli[d] == GPU_MILLI),
                    sum(1 for x in nics if x in st.nics),
                )
                for gpus, nics in groups.values()
            )
            return min(room, pairs // need)
        if need:
            room = min(room, sum(1 for m in st.gpu_milli.values() if m == GPU_MILLI) // need)
        if nic:
            room = min(room, len(st.nics) // nic)
        return room

    def _trial_capacity(self, gang: Gang, role: Role, node: str, cap: int) -> int:
        """Pods placed one by one until one does not fit, then taken back: the node ends as
        it was, so the trial changes neither its version nor the change log."""
        placed: list[tuple[str, DeviceChoice]] = []
        while len(placed) < cap:
            choice = self.choose_devices(gang, role, node)
            if choice is None:
                break
            self._take(node, role, choice, log=False)
            placed.append((node, choice))
        for n, choice in placed:
            self._give_back(n, role, choice, log=False)
        return len(placed)

    # ------------------------------------------------------------------ changes

    # ------------------------------------------------------------------ equivalent nodes

    def _signature(self, node: str, joint: bool = True) -> tuple[object, ...]:
        """Everything a pod-by-pod placer's answer about one pod on ``node`` depends on
        besides static filters (fit, room, binpack score, FGD's Δ): GPU model, allocatable
        and device layout, free amounts, the multiset of free milli-GPU per device, free
        NICs, and (``joint``, for pods under a joint policy that ask NICs) per PCIe switch in
        name order its free whole GPUs and NICs — a NUMA node's are their sums; devices are
        interchangeable inside a switch. Cached until the node changes."""
        version = self._version.get(node, 0)
        hit = self._sig.get(node)
        if hit is None or hit[0] != version:
            hit = self._base_sig.get(node) if version == 0 else None
            if hit is None:
                st = self.nodes[node]
                light = (
                    self._alloc_sig[node],
                    tuple(st.resources.items()),  # in the node's own order: alike nodes agree
                    tuple(sorted(st.gpu_milli.values())),
                    len(st.nics),
                )
                hit = (version, light, None)
                self.meter.units += 1
                if version == 0:
                    self._base_sig[node] = hit
            self._sig[node] = hit
        if not joint:
            return hit[1]
        full = hit[2]
        if full is None:
            st = self.nodes[node]
            gm, free_nics = st.gpu_milli, st.nics
            switches = tuple(
                (name, [gm[d] for d in gpus].count(GPU_MILLI), len(free_nics.intersection(nics)))
                for name, (gpus, nics) in sorted(st.groups.get("pcie", {}).items())
            )
            full = (hit[1], switches)
            self._sig[node] = hit = (hit[0], hit[1], full)
            if hit[0] == 0:
                self._base_sig[node] = hit
        return full

    signature = _signature

    def joint_pairs(self, gang: Gang, role: Role) -> bool:
        """Does a pod of ``role`` take NICs under a joint policy (so that its answers depend
        on each PCIe switch's free devices, :meth:`signature` with ``joint``)?"""
        return gang.joint != "none" and role.requests.get(self.nic, 0) > 0

    def changes_since(self, mark: int) -> tuple[set[str], int]:
        """The nodes changed (a pod placed or removed) since ``mark``, a position in the
        change log, and the log's position now (the next call's ``mark``)."""
        log = self._log
        return set(log[mark:]), len(log)

    @property
    def mark(self) -> int:
        """The change log's position now (see :meth:`changes_since`)."""
        return len(self._log)

    def release(self) -> None:
        """Drop the cached rankings (:meth:`ranking`), which refer back to this state: the
        state is then freed by reference counting, not left to the garbage collector
        (:meth:`gangplan.solver.context.CycleContext.release`)."""
        self._rankings.clear()

    def ranking(self, key: object, make: Callable[[], Any]) -> Any:
        """The object stored under ``key`` for this state, made by ``make()`` on first use
        (rankings and per-domain counts of :mod:`gangplan.solver.placers.ranking`; they follow the
        state's changes, so a copy starts without any)."""
        hit = self._rankings.get(key)
        if hit is None:
            hit = self._rankings[key] = make()
        return hit

    def classes(self, nodes: tuple[str, ...]) -> list[list[str]]:
        """``nodes`` grouped into classes of interchangeable nodes (same :meth:`_signature`),
        each class in the order of ``nodes``, classes by their first member's position.

        Kept up to date incrementally: only nodes changed since the last call are regrouped.
        Pass the same tuple object each time (e.g. :meth:`candidates`' result) to reuse it.
        """
        entry = self._class_entry(nodes)
        return sorted(entry[2].values(), key=lambda m: entry[1][m[0]])

    def _class_entry(self, nodes: tuple[str, ...]) -> list[Any]:
        """``[nodes, position of each node, signature -> members, node -> signature, log
        position caught up to]`` for :meth:`classes`, brought up to date with the change
        log."""
        entry = self._classes.get(id(nodes))
        if entry is None or entry[0] is not nodes:
            pos = {n: i for i, n in enumerate(nodes)}
            groups: dict[tuple[object, ...], list[str]] = {}
            sig_of: dict[str, tuple[object, ...]] = {}
            for n in nodes:
                sig = self._signature(n)
                sig_of[n] = sig
                groups.setdefault(sig, []).append(n)
            entry = [nodes, pos, groups, sig_of, len(self._log)]
            self._classes[id(nodes)] = entry
        else:
            _nodes, pos, groups, sig_of, done = entry
            changed = set(self._log[done:])
            entry[4] = len(self._log)
            for n in changed:
                if n not in pos:
                    continue
                new = self._signature(n)
                old = sig_of[n]
                if new == old:
                    continue
                members = groups[old]
                members.remove(n)
                if not members:
                    del groups[old]
                sig_of[n] = new
                bisect.insort(groups.setdefault(new, []), n, key=pos.__getitem__)
        return entry

    def _take(self, node: str, role: Role, choice: DeviceChoice, *, log: bool = True) -> None:
        if log:
            self._version[node] = self._version.get(node, 0) + 1
            self._log.append(node)
        st = self.nodes[node]
        for res, amount in role.requests.items():
            st.resources[res] = st.resources.get(res, 0) - amount
        for d in choice.gpus:
            st.gpu_milli[d] -= choice.gpu_milli if choice.gpu_milli is not None else GPU_MILLI
        for n in choice.nics:
            st.nics.discard(n)

    def _give_back(self, node: str, role: Role, choice: DeviceChoice, *, log: bool = True) -> None:
        if log:
            self._version[node] = self._version.get(node, 0) + 1
            self._log.append(node)
        st = self.nodes[node]
        for res, amount in role.requests.items():
            st.resources[res] = st.resources.get(res, 0) + amount
        for d in choice.gpus:
            st.gpu_milli[d] += choice.gpu_milli if choice.gpu_milli is not None else GPU_MILLI
        for n in choice.nics:
            st.nics.add(n)

    def set_free(
        self, node: str, resources: dict[str, int], gpu_milli: dict[str, int], nics: Iterable[str]
    ) -> None:
        """Replace ``node``'s free amounts (base units), free milli-GPU per device and free
        NIC ids, e.g. with what evicting some running pods leaves
        (:meth:`Snapshot.free_after <gangplan.models.Snapshot.free_after>`)."""
        self._version[node] = self._version.get(node, 0) + 1
        self._log.append(node)
        st = self.nodes[node]
        st.resources = dict(resources)
        st.gpu_milli = {d: gpu_milli.get(d, 0) for d in st.gpu_order}
        st.nics = set(nics)

    def place(
        self, gang: Gang, role: Role, node: str, pod: str, choice: DeviceChoice | None = None
    ) -> PodPlacement | None:
        """Place one pod (choosing devices unless given); None if it does not fit."""
        if choice is None:
            choice = self.choose_devices(gang, role, node)
            if choice is None:
                return None
        self._take(node, role, choice)
        return PodPlacement(
            pod=pod,
            gang=gang.name,
            namespace=gang.namespace,
            role=role.name,
            node=node,
            gpus=choice.gpus,
            gpu_milli=choice.gpu_milli,
            nics=choice.nics,
        )

    def remove(self, placement: PodPlacement, role: Role) -> None:
        """Undo :meth:`place` (gang rollback)."""
        self._give_back(placement.node, role, DeviceChoice.of(placement))

    def gpu_used_fraction(self, node: str) -> float:
        """Share of the node's GPU milli taken (running + placed); 0 for GPU-less nodes."""
        st = self.nodes[node]
        total = GPU_MILLI * len(st.gpu_order)
        return 0.0 if total == 0 else 1 - sum(st.gpu_milli.values()) / total

    def version(self, node: str) -> int:
        """A counter that changes whenever ``node``'s free amounts may have changed (``place``,
        ``remove``, and the trials of ``pod_capacity``); callers cache per-node values
        against it (e.g. the FGD placer's fragmentation)."""
        return self._version.get(node, 0)
