"""Dense indices for the CP-SAT model: what is counted together, and where it may go.

The model never has a variable per pod. It counts:

* **items** — identical pods that the score cannot tell apart: the pods of one role of a
  multi-pod gang; or all the single-pod gangs that share queue, priority, requests, joint
  policy, candidate nodes and what they count against a queue's max (one item, counted
  0..number of such gangs; which of them are admitted is decided afterwards by creation
  time, which changes no score entry);
* **shapes** — items with the same per-pod requests and joint policy compete for the same
  node capacity, so node capacity is written once per shape, not per item;
* **blocks** — where items are counted: single nodes (exact mode) or, in aggregated mode
  (large cycles), the nodes of one leaf domain that the same items may use: a leaf is split
  by *pattern*, a node's pattern being which items' static candidate lists hold it (GPU
  models, selectors, affinity, taints, layout, required domains), so that inside a block
  every item may use every node or none; room is a matter of shape, the same for all items
  of one shape. Per-shape counts z[s, n] then say how many pods of each shape go on each
  node, and any item of that shape may take any of them, so turning counts into pods never
  puts a pod where its gang may not go. An item whose pods must share
  one node (a required ``node`` level, of its gang or of its role) is counted per node even
  in aggregated mode (its blocks are single nodes), so that rule stays a constraint.

Impossible pairs are filtered before building: an item's candidate nodes pass every static
rule (readiness, taints, selectors, affinity, GPU model, declared layout for joint
allocation, a domain at each required level) and have room for at least one of its pods
in what running pods leave; a multi-pod gang whose candidates cannot hold its minimum
(in one domain of its required level) is left out — nothing is lost, it could not be placed.

Inside ``solver/`` only: dense integer indices never leave the model.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from gangplan.models import GPU_MILLI, Gang, Plan, PodPlacement, Role, Snapshot, growing_nodes
from gangplan.solver.context import CycleContext
from gangplan.solver.model.victims import Victims, find_victims
from gangplan.solver.placers.state import ClusterState
from gangplan.solver.result import SolverConfig
from gangplan.topology import NODE_LEVEL, Domain

__all__ = ["Block", "Group", "Index", "Item", "Shape", "build_index"]


@dataclass(frozen=True)
class Shape:
    """Per-pod demand: requests (base units), GPU form and joint policy."""

    id: int
    requests: tuple[tuple[str, int], ...]
    whole: int
    """whole GPUs per pod (0 for a share or no GPU)"""
    share: int
    """milli-GPU of one GPU (0 unless a share)"""
    nics: int
    joint: str
    """``none`` unless a joint policy applies (GPUs and NICs asked, policy set)"""

    @property
    def gpu_milli(self) -> int:
        """Milli-GPU one pod of this shape asks."""
        return self.whole * GPU_MILLI + self.share

    def req(self, resource: str) -> int:
        """One pod's request of ``resource`` (base units; 0 if not asked)."""
        for r, v in self.requests:
            if r == resource:
                return v
        return 0


@dataclass
class Item:
    """Identical pods counted by one integer per block."""

    id: int
    group: int
    gangs: list[Gang]
    role: Role
    shape: int
    count: int
    candidates: list[int]
    """node indices"""
    cap: dict[int, int]
    """node index -> pods of this item that fit there alone (upper bound)"""
    previous: dict[int, int] = field(default_factory=dict)
    """node index -> pods of this item on that node in the previous plan"""
    node_level: bool = False
    """its pods must share one node (a required ``node`` level of its multi-pod gang, or of
    its role of more than one pod): counted per node in aggregated mode too"""

    @property
    def gang(self) -> Gang:
        """The item's gang (the oldest of identical single-pod gangs)."""
        return self.gangs[0]

    @property
    def name(self) -> str:
        """``gang.role``, or ``gang+N`` for N more identical single-pod gangs."""
        g = self.gang
        if len(self.gangs) > 1:
            return f"{g.name}+{len(self.gangs) - 1}"
        return f"{g.name}.{self.role.name}"


@dataclass
class Group:
    """A multi-pod gang (``multi``), or the aggregate behind one single-pod item."""

    id: int
    gangs: list[Gang]
    items: list[int]
    multi: bool

    @property
    def gang(self) -> Gang:
        """The group's gang (the oldest of identical single-pod gangs)."""
        return self.gangs[0]


@dataclass(frozen=True)
class Block:
    """Where item counts live: a node, or nodes of one leaf domain with one pattern
    (aggregated mode; see the module docstring)."""

    id: int
    name: str
    nodes: tuple[int, ...]


@dataclass
class Index:
    """Everything the model counts for one cycle (module docstring), by dense index."""

    snapshot: Snapshot
    ctx: CycleContext
    node_names: list[str]
    shapes: list[Shape]
    items: list[Item]
    groups: list[Group]
    blocks: list[Block]
    block_of_node: list[int]
    """node index -> the block holding it (in aggregated mode, its leaf-and-pattern block)"""
    exact: bool
    levels: tuple[str, ...]
    """levels whose 'uses' are modelled, top down (``node`` included only in exact mode)"""
    domain_of_block: dict[str, list[object]] = field(default_factory=dict)
    """level -> per block, the key of its domain at that level"""
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    state: ClusterState | None = None
    empty: bool = False
    victims: Victims | None = None
    """running gangs the cycle may evict (preemption on), their capacity free in ``state``"""
    node_blocks: dict[int, int] = field(default_factory=dict)
    """aggregated mode: node index -> its single-node block, for the nodes that items
    counted per node (:attr:`Item.node_level`) may use"""

    @property
    def node_index(self) -> dict[str, int]:
        """node name -> index (the context's, built once per cycle)."""
        return self.ctx.node_index

    def block_of(self, item: int, node: int) -> int:
        """The block that counts ``item``'s pods on ``node``: the node's single-node block
        for an item counted per node in aggregated mode, else :attr:`block_of_node`."""
        if not self.exact and self.items[item].node_level:
            return self.node_blocks[node]
        return self.block_of_node[node]

    def block_holding(self, item: int, node: int) -> int | None:
        """:meth:`block_of`, or None where ``node`` is not one of the item's candidates
        (no block counts its pods there: e.g. a victim's node that an item eligible to
        replace it may not use)."""
        if node not in self.items[item].cap:
            return None
        return self.block_of(item, node)


def _shape_key(snapshot: Snapshot, gang: Gang, role: Role) -> tuple[object, ...]:
    gpu = role.requests.get(snapshot.gpu, 0)
    nic = role.requests.get(snapshot.nic, 0) // GPU_MILLI
    whole = gpu // GPU_MILLI if gpu >= GPU_MILLI else 0
    share = gpu if 0 < gpu < GPU_MILLI else 0
    joint = gang.joint if (gang.joint != "none" and nic and whole) else "none"
    return (tuple(sorted(role.requests.items())), whole, share, nic, joint)


def build_index(
    ctx: CycleContext,
    config: SolverConfig,
    previous: Plan | None,
    incumbent: list[PodPlacement] | None = None,
    *,
    gangs: list[Gang] | None = None,
    empty: bool = False,
) -> Index:
    """Items, shapes, candidates and blocks for one cycle (see the module docstring).

    ``gangs``: only these pending gangs (default: all); ``empty``: as if no pod ran
    (allocatable instead of free; queue usage from running pods ignored) — both for the
    exact "does this gang fit alone" check of the reasons.
    """
    s = ctx.snapshot
    state = ctx.state(empty=empty)
    pending = list(s.gangs if gangs is None else gangs)
    victims = None if empty else find_victims(ctx, pending, state)
    node_names = list(ctx.node_names)
    built = _Items(ctx, state, previous)
    for gang in pending:
        built.add(gang)
    built.add_singles()
    items, groups = built.items, built.groups
    notes: list[str] = []
    exact, blocks, block_of_node, node_blocks, levels = _blocks(
        ctx, state, config, items, groups, victims, incumbent, notes
    )
    if victims is not None:
        _eligible_items(ctx, victims, items)
    return Index(
        snapshot=s,
        ctx=ctx,
        node_names=node_names,
        shapes=sorted(built.shapes.values(), key=lambda sh: sh.id),
        items=items,
        groups=groups,
        blocks=blocks,
        block_of_node=block_of_node,
        exact=exact,
        levels=levels,
        domain_of_block=_domain_of_block(ctx, blocks),
        left_out=built.left_out,
        notes=notes,
        state=state,
        empty=empty,
        victims=victims,
        node_blocks=node_blocks,
    )


class _Items:
    """The items and groups of one cycle, built gang by gang: a multi-pod gang (or one a
    previous plan or growth names) is a group of its own, an item per role; single-pod
    gangs alike in everything the score reads wait in ``singles`` and become one item each
    kind (:meth:`add_singles`)."""

    def __init__(self, ctx: CycleContext, state: ClusterState, previous: Plan | None) -> None:
        self.ctx = ctx
        self.state = state
        self.snapshot = ctx.snapshot
        self.nidx = ctx.node_index
        self.node_names = list(ctx.node_names)
        self.prev_nodes: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.prev_gangs: set[str] = set()
        if previous is not None:
            for p in previous.pods:
                self.prev_nodes[(p.gang_key, p.role)].append(p.node)
                self.prev_gangs.add(p.gang_key)
        self.shapes: dict[tuple[object, ...], Shape] = {}
        self.cap_cache: dict[tuple[object, ...], dict[int, int]] = {}
        self.items: list[Item] = []
        self.groups: list[Group] = []
        self.left_out: list[str] = []
        self.singles: dict[tuple[object, ...], list[Gang]] = defaultdict(list)
        self.growing = growing_nodes(self.snapshot)  # growth gangs: multi-pod, for locality

    def shape_of(self, gang: Gang, role: Role) -> Shape:
        key = _shape_key(self.snapshot, gang, role)
        if key not in self.shapes:
            req, whole, share, nic, joint = key
            self.shapes[key] = Shape(len(self.shapes), req, whole, share, nic, joint)  # type: ignore[arg-type]
        return self.shapes[key]

    def caps(self, gang: Gang, role: Role, limit: int) -> dict[int, int]:
        """Candidate node index -> pods of ``role`` it has room for (at most ``limit``)."""
        cands = self.state.candidates(gang, role)
        # the candidate tuple by identity (the state keeps it alive): hashing 5,000 names
        # for every gang cost more than the capacities
        key = (_shape_key(self.snapshot, gang, role), id(cands), limit)
        if key not in self.cap_cache:
            rooms = self.state.candidate_capacities(gang, role, limit)
            self.cap_cache[key] = {
                self.nidx[n]: c for n, c in zip(cands, rooms, strict=True) if c > 0
            }
        return self.cap_cache[key]

    def _single_key(self, gang: Gang) -> tuple[object, ...]:
        s, role = self.snapshot, gang.roles[0]
        held = s.reservation_rules
        return (
            gang.queue,
            gang.priority,
            gang.preemption_policy,
            _shape_key(s, gang, role),
            id(self.state.candidates(gang, role)),  # by identity: see caps()
            # what a pod counts against a max on a model-specific GPU resource
            gang.gpu_models if s.resources.gpu_model_resources else (),
            # the reservations it may backfill (items merge only gangs that agree)
            frozenset(r.key for r in s.reservations if held.may_backfill(gang, r)),
        )

    def add(self, gang: Gang) -> None:
        """One pending gang: a single waits for :meth:`add_singles`; a gang whose
        candidates cannot hold its minimum is left out; else a group, an item per role."""
        if gang.size == 1 and gang.key not in self.prev_gangs and gang.key not in self.growing:
            self.singles[self._single_key(gang)].append(gang)
            return
        role_caps = {r.name: self.caps(gang, r, r.count) for r in gang.roles}
        if not _may_fit(self.ctx, gang, role_caps, self.node_names):
            self.left_out.append(gang.key)
            return
        gid = len(self.groups)
        group = Group(gid, [gang], [], multi=gang.size > 1 or gang.key in self.growing)
        for role in gang.roles:
            c = role_caps[role.name]
            if not c:
                continue
            item = Item(
                id=len(self.items),
                group=gid,
                gangs=[gang],
                role=role,
                shape=self.shape_of(gang, role).id,
                count=role.count,
                candidates=sorted(c),
                cap=c,
                node_level=_node_level(gang, role),
            )
            for n in self.prev_nodes.get((gang.key, role.name), []):
                if n in self.nidx:
                    item.previous[self.nidx[n]] = item.previous.get(self.nidx[n], 0) + 1
            self.items.append(item)
            group.items.append(item.id)
        self.groups.append(group)

    def add_singles(self) -> None:
        """Each kind of single-pod gang one item, counted 0..its gangs (oldest first)."""
        for gangs in self.singles.values():
            gangs.sort(key=lambda g: (g.creation_time, g.name))
            role = gangs[0].roles[0]
            c = self.caps(gangs[0], role, len(gangs))
            if not c:
                self.left_out.extend(g.key for g in gangs)
                continue
            gid = len(self.groups)
            item = Item(
                id=len(self.items),
                group=gid,
                gangs=gangs,
                role=role,
                shape=self.shape_of(gangs[0], role).id,
                count=len(gangs),
                candidates=sorted(c),
                cap=c,
            )
            self.items.append(item)
            self.groups.append(Group(gid, gangs, [item.id], multi=False))


def _blocks(
    ctx: CycleContext,
    state: ClusterState,
    config: SolverConfig,
    items: list[Item],
    groups: list[Group],
    victims: Victims | None,
    incumbent: list[PodPlacement] | None,
    notes: list[str],
) -> tuple[bool, list[Block], list[int], dict[int, int], tuple[str, ...]]:
    """Exact or aggregated mode, its blocks and levels; candidates pruned past
    ``config.max_pairs``. Returns (exact, blocks, block_of_node, node_blocks, levels); the
    notes name pruning and aggregation."""
    topo = ctx.topo
    node_names = list(ctx.node_names)
    total = sum(len(it.candidates) for it in items)
    multi_pairs = sum(len(items[i].candidates) for g in groups if g.multi for i in g.items)
    exact = topo.leaf_level is None or (multi_pairs + total) <= config.exact_limit
    node_blocks: dict[int, int] = {}
    if exact:
        blocks = [Block(i, n, (i,)) for i, n in enumerate(node_names)]
        block_of_node = list(range(len(node_names)))
        levels = topo.all_levels
    else:
        blocks, block_of_node, node_blocks = _aggregated_blocks(ctx, state, items, victims)
        levels = topo.levels
    if config.max_pairs and total > config.max_pairs:
        # whole blocks are kept or cut, so that an item still may use all or none of a block
        _prune(items, state, node_names, incumbent or [], config.max_pairs, block_of_node)
        notes.append(
            f"candidates pruned: {total:,} item-node pairs cut to "
            f"{sum(len(it.candidates) for it in items):,} (incumbent's nodes and best-fitting "
            f"{'nodes' if exact else 'blocks'} kept); the model may miss a better plan"
        )
    if not exact:
        notes.append(
            f"aggregated mode: gangs counted per leaf and node pattern ({len(blocks)} blocks); "
            "the node-level locality and stability entries are derived, not optimised"
        )
    return exact, blocks, block_of_node, node_blocks, levels


def _domain_of_block(ctx: CycleContext, blocks: list[Block]) -> dict[str, list[object]]:
    """Level -> each block's domain key at that level (a node or block name at the node
    level; ``("alone", node)`` where a node has no domain at the level)."""
    topo, node_names = ctx.topo, ctx.node_names
    domain_of_block: dict[str, list[object]] = {}
    for lv in topo.all_levels:
        keys: list[object] = []
        for b in blocks:
            first = node_names[b.nodes[0]]
            if lv == NODE_LEVEL:
                keys.append(("node", first) if len(b.nodes) == 1 else ("block", b.name))
            else:
                d = topo.domain_of(first, lv)
                keys.append(d if d is not None else ("alone", first))
        domain_of_block[lv] = keys
    return domain_of_block


def _eligible_items(ctx: CycleContext, victims: Victims, items: list[Item]) -> None:
    """Each victim's eligible items: those whose gang may preempt it (every item under a
    move plan, where a move makes room for the whole plan)."""
    rules = ctx.snapshot.preemption_rules
    for vic in victims.victims:
        if ctx.moves is not None:
            vic.eligible = [it.id for it in items]
            continue
        vic.eligible = [it.id for it in items if rules.kind(it.gang, vic.gang) is not None]


def _node_level(gang: Gang, role: Role) -> bool:
    """Must the pods of this role share one node? (A required ``node`` level of a multi-pod
    gang, or of a role of more than one pod.)"""
    if gang.size > 1 and gang.topology is not None and gang.topology.required == NODE_LEVEL:
        return True
    tc = role.topology
    return role.count > 1 and tc is not None and tc.required == NODE_LEVEL


def _aggregated_blocks(
    ctx: CycleContext, state: ClusterState, items: list[Item], victims: Victims | None
) -> tuple[list[Block], list[int], dict[int, int]]:
    """Aggregated mode's blocks: per leaf domain (a node missing a level, where a victim
    runs or that a reservation holds, is a block of its own: the rule "no eviction for
    nothing" and held capacity count pods node by node), the nodes of one *pattern* — which static
    candidate lists (readiness, taints, selectors, affinity, GPU model, layout, required
    domains: :meth:`~gangplan.solver.placers.state.ClusterState.candidates`) of the items counted
    per block hold the node — and a single-node block for each node an item counted per
    node may use.

    Inside a block every item may then use every node statically, or none; room is a
    matter of shape (the same for every item of one shape: requests and joint policy), so
    the nodes of a block where an item's shape fits are exactly its candidates there, and
    the per-shape node counts z[s, n] exist exactly there. Any pod of the shape may take
    any of them.

    Returns the blocks, the block of each node (its leaf-and-pattern block) and, per node
    of a single-node block, that block.
    """
    topo = ctx.topo
    leaf = topo.leaf_level
    assert leaf is not None
    node_names = ctx.node_names
    nidx = ctx.node_index
    classes: dict[int, tuple[tuple[str, ...], int]] = {}
    """id of a static candidate list -> (the list, kept alive; its class number)"""
    for it in items:
        if it.node_level:
            continue
        cands = state.candidates(it.gang, it.role)
        if id(cands) not in classes:
            classes[id(cands)] = (cands, len(classes))
    pattern: list[list[int]] = [[] for _ in node_names]
    for cands, cls in sorted(classes.values(), key=lambda t: t[1]):
        for name in cands:
            pattern[nidx[name]].append(cls)
    by_key: dict[tuple[object, tuple[int, ...]], list[int]] = defaultdict(list)
    alone = set(victims.by_node) if victims is not None else set()
    # a node a reservation holds too: held capacity is counted node by node
    held = ctx.snapshot.reservations
    alone |= {nidx[n] for r in held for n in r.nodes if n in nidx}
    for i, name in enumerate(node_names):
        anc = topo.ancestors(name)
        where: object
        if i in alone:
            where = ("victim", name)
        elif all(lv in anc for lv in topo.levels):
            where = anc[leaf]
        else:
            where = ("alone", name)
        by_key[(where, tuple(pattern[i]))].append(i)
    blocks: list[Block] = []
    block_of_node = [0] * len(node_names)
    per_leaf: dict[object, int] = defaultdict(int)
    # blocks in the order of their first node (a fixed order, whatever the keys hash to)
    for (where, _pat), members in sorted(by_key.items(), key=lambda kv: kv[1][0]):
        base = where.name if isinstance(where, Domain) else str(where[1])  # type: ignore[index]
        per_leaf[where] += 1
        name = base if per_leaf[where] == 1 else f"{base}#{per_leaf[where]}"
        b = Block(len(blocks), name, tuple(members))
        for m in members:
            block_of_node[m] = b.id
        blocks.append(b)
    node_blocks: dict[int, int] = {}
    for k in sorted({k for it in items if it.node_level for k in it.candidates}):
        node_blocks[k] = len(blocks)
        blocks.append(Block(len(blocks), node_names[k], (k,)))
    return blocks, block_of_node, node_blocks


def _may_fit(
    ctx: CycleContext, gang: Gang, role_caps: dict[str, dict[int, int]], node_names: list[str]
) -> bool:
    """Capacity bound: can the candidates hold the gang's minimum (in one required domain)?"""
    level = gang.topology.required if gang.topology else None
    if level is None or level == NODE_LEVEL:
        pools: list[set[int] | None] = [None]
        if level == NODE_LEVEL:
            pools = [{i} for i in range(len(node_names))]
    else:
        idx = ctx.node_index
        pools = [{idx[n] for n in ctx.topo.nodes_in(d)} for d in ctx.topo.domains_at(level)]
    for pool in pools:
        total = 0
        ok = True
        for role in gang.roles:
            c = role_caps[role.name]
            n = min(role.count, sum(v for k, v in c.items() if pool is None or k in pool))
            if n < gang.role_min(role):
                ok = False
                break
            total += n
        if ok and total >= gang.min_size:
            return True
    return False


def _prune(
    items: list[Item],
    state: ClusterState,
    node_names: list[str],
    incumbent: list[PodPlacement],
    max_pairs: int,
    block_of_node: list[int],
) -> None:
    """Keep, per item, the blocks holding the nodes the incumbent uses for it and its
    best-fitting blocks (by their best node: fewest whole GPUs left after one pod, then least
    CPU left), about ``max_pairs`` item-node pairs in all. Whole blocks are kept (single
    nodes in exact mode and for items counted per node), so that inside a block an item may
    still use every node or none."""
    nidx = {n: i for i, n in enumerate(node_names)}
    used: dict[int, set[int]] = defaultdict(set)
    owner = {(g.key, it.role.name): it.id for it in items for g in it.gangs}
    for p in incumbent:
        i = owner.get((p.gang_key, p.role))
        if i is not None and p.node in nidx:
            used[i].add(nidx[p.node])
    share = max(4, max_pairs // max(1, len(items)))
    # a node's fit for one pod is (free whole GPUs - the pod's, free CPU - the pod's): the
    # pod's part is the same for every node, so nodes rank by (free whole GPUs, free CPU),
    # computed once per node, not once per item and node
    base: list[tuple[int, int]] = []
    for name in node_names:
        st = state.nodes[name]
        free_gpu = sum(1 for m in st.gpu_milli.values() if m == GPU_MILLI)
        base.append((free_gpu, st.resources.get("cpu", 0)))
    for it in items:
        if len(it.candidates) <= share:
            continue
        # the unit kept or cut whole: a node for an item counted per node, else its block
        unit_of: Callable[[int], int] = (
            (lambda n: n) if it.node_level else block_of_node.__getitem__
        )
        members: dict[int, list[int]] = defaultdict(list)
        for n in it.candidates:
            members[unit_of(n)].append(n)
        keep = {unit_of(n) for n in used.get(it.id, set()) if unit_of(n) in members}
        kept = sum(len(members[u]) for u in keep)
        limit = share + kept
        best = {u: min(base[n] for n in ns) for u, ns in members.items()}
        ranked = sorted(members, key=lambda u: (best[u], u))
        for u in ranked:
            if kept >= limit:
                break
            if u not in keep:
                keep.add(u)
                kept += len(members[u])
        it.candidates = sorted(n for u in keep for n in members[u])
        it.cap = {n: c for n, c in it.cap.items() if unit_of(n) in keep}
