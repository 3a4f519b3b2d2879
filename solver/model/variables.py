"""Every variable of the CP-SAT model, in one container: created lazily by its query method,
named, hinted from a plan's pods and read back from a solution.

=================  =====  ====================================================================
kind               hint   meaning
=================  =====  ====================================================================
``x[i,b]``         pods   pods of item *i* in block *b* (a node; in aggregated mode the nodes
                          of one leaf with one pattern, or a node for an item counted per node)
``admit[g]``       pods   multi-pod gang *g* admitted (its items between their minimum and
                          full size, or all 0)
``z[s,n]``         pods   pods of shape *s* on node *n*, in aggregated mode (linked to ``x``
                          per leaf by a constraint family)
``zsum[s,n]``      --     the same in exact mode when several items share the shape: the sum
                          of their ``x`` (one item: ``x`` itself counts, no variable)
``n[i]``           --     pods of item *i* placed anywhere (the sum of its ``x``)
``joint[s,n,w]``   pods   GPUs shape *s* takes in joint group *w* (PCIe switch / NUMA node) of
                          node *n* (= its NICs there when it asks as many NICs as GPUs)
``joint_nic``      pods   NICs shape *s* takes in group *w* (fewer NICs than GPUs)
``joint_any``      --     shape *s* takes GPUs in group *w* (fewer NICs than GPUs)
``share[s,d]``     pods   pods of GPU-share shape *s* on GPU device *d*
``whole[d]``       pods   fully free GPU *d* given to whole-GPU pods (nodes with shares)
``uses[o,L,D]``    --     owner *o* (a gang, or a role item with its own level) has pods in
                          domain *D* of level *L*
``dominant[c,q]``  --     queue *q*'s dominant share in priority class *c* after the plan (ppm)
``shortfall[c,q]`` --     how far it stays below its fair target (ppm)
``minimum[i]``     --     pods of item *i* counted in its gang's minimum (admission before
                          growth: at most its placed pods and the role's share of the
                          minimum, :func:`~gangplan.models.minimum_counts`, if admitted)
``role_placed[i]`` --     item *i* (a role with a preferred level) has a pod
``gpu_used[n]``,   --     node *n* has GPUs taken / all its GPUs taken after the plan
``gpu_full[n]``
``leaf_used[l]``,  --     the same for leaf *l*
``leaf_full[l]``
``kept[i,n]``      --     pods of item *i* the previous plan had on node *n* that stay there
``stay[v]``        evict  running victim *v* keeps running (all its pods, or for an elastic
                          one at least its min_member); 0: evicted (preemption on only)
``keep[u]``        evict  pods of unit *u* of an elastic victim that keep running
``full[u]``        --     unit *u* of an elastic victim keeps all its pods
``over[v,n,r]``    --     putting victim *v* (or one pod of unit *u*) back would overflow
                          resource *r* of node *n* (the rule "no eviction for nothing")
``need[k,i]``      --     pods of item *i* on the node of overflow check *k* counted as its
                          elastic gang's minimum there (evictions make room for minimums only)
``frag_ge``        --     FGD's measure: GPU *d* of node *n* has at least *g* milli-GPU free
                          after the plan (key ``(n, d, g)``)
``frag_part``      --     that device's free milli-GPU when ``frag_ge``, else 0
``frag_ok``        --     a threshold of one pod shape met on node *n* after the plan: free
                          CPU ≥ *c* (key ``(n, "cpu", c)``), or devices with ≥ *g* free ≥ *k*
                          (key ``(n, "gpus", k, g)``)
``frag_fits``      --     pods of shape (*c*, *k*, *g*) fit node *n* after the plan (both)
``frag_use``       --     the free milli-GPU those pods could use there (0 unless they fit)
``frag_taken``     --     node *n* (no GPU shares) has exactly *j* fully free GPUs taken by
                          the plan (key ``(n, j)``; one of them is 1)
=================  =====  ====================================================================

*hint*: ``pods`` — a *decision* variable, whose value :meth:`Variables.hint` derives from a
plan's pods (every decision kind has a rule there, checked when a hint is made); ``evict``
— a decision variable derived from the plan's evictions; ``--`` —
an *auxiliary* variable, which CP-SAT fills in when the hint is completed.

Which variables exist is a function of the index alone (never of who asks first), so the
constraint families and objective terms, which only read variables and add constraints, may
be built in any order. ``x``, ``admit``, ``z``, ``zsum`` and ``n`` — the counts every family
reads — are made together on the first query; every other kind one key at a time.
Definitions that give a variable its meaning in a rule (``uses`` ≥ its pods, ``dominant`` as
a max, ``kept`` as a min, ...) are added by the family or term that states the rule; the
container adds only the sums behind ``zsum`` and ``n``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from gangplan.models import GPU_MILLI, Eviction, PodPlacement
from gangplan.solver.model.indexing import Index
from gangplan.solver.model.victims import Victims
from gangplan.topology import NODE_LEVEL

__all__ = ["KINDS", "Kind", "Solution", "Variables", "var_bounds"]

Key = Any
"""A variable's key within its kind: a tuple of dense indices and names (see the table)."""
Owner = tuple[str, int]
"""Whose ``uses`` these are: ``("g", group id)`` for a gang, ``("i", item id)`` for a role
item with its own required or preferred level."""


@dataclass(frozen=True)
class Kind:
    """A kind of variable: its name and whether it is a decision (hinted from pods)."""

    name: str
    decision: bool


KINDS: tuple[Kind, ...] = (
    Kind("x", True),
    Kind("admit", True),
    Kind("z", True),
    Kind("zsum", False),
    Kind("n", False),
    Kind("joint", True),
    Kind("joint_nic", True),
    Kind("joint_any", False),
    Kind("share", True),
    Kind("whole", True),
    Kind("uses", False),
    Kind("dominant", False),
    Kind("shortfall", False),
    Kind("minimum", False),
    Kind("role_placed", False),
    Kind("gpu_used", False),
    Kind("gpu_full", False),
    Kind("leaf_used", False),
    Kind("leaf_full", False),
    Kind("kept", False),
    Kind("stay", True),
    Kind("keep", True),
    Kind("full", False),
    Kind("over", False),
    Kind("need", False),
    Kind("frag_ge", False),
    Kind("frag_part", False),
    Kind("frag_ok", False),
    Kind("frag_fits", False),
    Kind("frag_use", False),
    Kind("frag_taken", False),
)
"""Every kind, in the order the hint lists them."""

DOMINANT_MAX = 2_000_000_000
"""Upper bound of a dominant share variable (ppm; any sum of contributions stays below)."""


def domain_label(dom: object) -> str:
    """A domain key's readable name for variable names (a Domain, or ``("alone", node)``)."""
    name = getattr(dom, "name", None)
    if isinstance(name, str):
        return name
    if isinstance(dom, tuple):
        return str(dom[-1])
    return str(dom)


@dataclass
class Solution:
    """The value of every variable of one solution, by kind and key (:meth:`Variables.read`);
    ``z`` gives the pods per (shape, node) whichever variable counts them."""

    values: dict[str, dict[Key, int]]
    z: dict[tuple[int, int], int]

    def items(self, kind: str) -> Iterator[tuple[Key, int]]:
        """``(key, value)`` of every variable of ``kind``, in creation order."""
        return iter(self.values[kind].items())

    def get(self, kind: str, key: Key) -> int:
        """The value of one variable (0 if it does not exist)."""
        return self.values[kind].get(key, 0)


@dataclass
class Variables:
    """The model's variables (module docstring): query methods create them on first use."""

    model: cp_model.CpModel
    ix: Index
    _vars: dict[str, dict[Key, cp_model.IntVar]] = field(init=False, repr=False)
    _z: dict[tuple[int, int], cp_model.IntVar] = field(init=False, repr=False)
    """(shape, node) -> the variable counting those pods (z, zsum or the one item's x)"""
    _by_item: dict[int, list[tuple[int, cp_model.IntVar]]] | None = field(
        init=False, repr=False, default=None
    )
    _by_node: dict[int, list[tuple[int, cp_model.IntVar]]] = field(init=False, repr=False)
    _shapes_at: dict[int, frozenset[int]] = field(init=False, repr=False)
    _uses: dict[tuple[Owner, str], dict[object, cp_model.IntVar]] = field(init=False, repr=False)
    _uses_done: set[tuple[Owner, str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._vars = {k.name: {} for k in KINDS}
        self._z = {}
        self._by_node = {}
        self._shapes_at = {}
        self._uses = defaultdict(dict)
        self._uses_done = set()

    def _int(self, kind: str, key: Key, ub: int, name: str) -> cp_model.IntVar:
        var = self.model.new_int_var(0, ub, name)
        self._vars[kind][key] = var
        return var

    def _bool(self, kind: str, key: Key, name: str) -> cp_model.IntVar:
        var = self.model.new_bool_var(name)
        self._vars[kind][key] = var
        return var

    def forget_from(self, first: int) -> None:
        """Forget every variable of index ``first`` or more, after the model's proto was
        restored to its first ``first`` variables (a term left out of the model after all:
        ``objective.py``). What is made together is remade on the next query: the counts
        (``x``, ``admit``, ``z``, ``n``) whole, a level's ``uses`` where one was lost."""
        for kind in self._vars.values():
            for key in [k for k, var in kind.items() if var.index >= first]:
                del kind[key]
        if any(var.index >= first for var in self._z.values()):
            self._by_item, self._z, self._by_node = None, {}, {}
            for name in ("x", "admit", "z", "zsum", "n"):
                self._vars[name].clear()
        for key, bucket in self._uses.items():
            lost = [d for d, var in bucket.items() if var.index >= first]
            for d in lost:
                del bucket[d]
            if lost:
                self._uses_done.discard(key)

    # ------------------------------------------------------------------ the counts

    def _counts(self) -> dict[int, list[tuple[int, cp_model.IntVar]]]:
        """Make ``x``, ``admit``, ``z`` / ``zsum`` and ``n`` (once, together)."""
        if self._by_item is not None:
            return self._by_item
        model, ix = self.model, self.ix
        x = self._vars["x"]
        for item in ix.items:
            per_block: dict[int, int] = {}
            for n in item.candidates:
                b = ix.block_of(item.id, n)
                per_block[b] = per_block.get(b, 0) + item.cap[n]
            for b, cap in sorted(per_block.items()):
                self._int(
                    "x", (item.id, b), min(item.count, cap), f"x[{item.name},{ix.blocks[b].name}]"
                )
        for g in ix.groups:
            if g.multi:
                self._bool("admit", g.id, f"admit[{g.gang.key}]")
        by_shape_node: dict[tuple[int, int], list[int]] = {}
        for item in ix.items:
            for n in item.candidates:
                by_shape_node.setdefault((item.shape, n), []).append(item.id)
        for (s, n), item_ids in sorted(by_shape_node.items()):
            ub = sum(min(ix.items[i].count, ix.items[i].cap[n]) for i in item_ids)
            name = f"z[{s},{ix.node_names[n]}]"
            if ix.exact and len(item_ids) == 1:
                self._z[(s, n)] = x[(item_ids[0], n)]
            elif ix.exact:
                # one variable per (shape, node), so capacity rows stay short
                var = self._int("zsum", (s, n), ub, name)
                model.add(var == sum(x[(i, n)] for i in item_ids))
                self._z[(s, n)] = var
            else:
                self._z[(s, n)] = self._int("z", (s, n), ub, name)
        by_item: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
        for (i, b), var in x.items():
            by_item.setdefault(i, []).append((b, var))
        for item in ix.items:
            blocks = by_item.get(item.id, [])
            if len(blocks) == 1:
                self._vars["n"][item.id] = blocks[0][1]
            else:
                count = model.new_int_var(0, item.count, f"n[{item.name}]")
                model.add(count == sum(var for _b, var in blocks))
                self._vars["n"][item.id] = count
        for (s, n), e in self._z.items():
            self._by_node.setdefault(n, []).append((s, e))
        self._by_item = by_item
        return by_item

    def placed(self, item: int) -> cp_model.IntVar:
        """Pods of item ``item`` placed anywhere (its only ``x`` when it has one block)."""
        self._counts()
        return self._vars["n"][item]

    def item_blocks(self, item: int) -> list[tuple[int, cp_model.IntVar]]:
        """``(block, x[item, block])`` for every block the item may use."""
        return self._counts().get(item, [])

    def x(self, item: int, block: int) -> cp_model.IntVar | None:
        """``x[item, block]``, or None where the item has no candidate."""
        self._counts()
        return self._vars["x"].get((item, block))

    def all_x(self) -> Iterator[tuple[tuple[int, int], cp_model.IntVar]]:
        """Every ``((item, block), x)``."""
        self._counts()
        return iter(self._vars["x"].items())

    def admit(self, group: int) -> cp_model.IntVar:
        """``admit[g]`` of a multi-pod gang's group."""
        self._counts()
        return self._vars["admit"][group]

    def shapes_on(self, node: int) -> list[tuple[int, cp_model.IntVar]]:
        """``(shape, pods of that shape on node)`` for every shape that may go there."""
        self._counts()
        return self._by_node.get(node, [])

    def node_counts(self) -> Iterator[tuple[tuple[int, int], cp_model.IntVar]]:
        """Every ``((shape, node), z)`` of aggregated mode (empty in exact mode)."""
        self._counts()
        return iter(self._vars["z"].items())

    # ------------------------------------------------------------------ devices

    def _shapes(self, node: int) -> frozenset[int]:
        hit = self._shapes_at.get(node)
        if hit is None:
            hit = self._shapes_at[node] = frozenset(s for s, _e in self.shapes_on(node))
        return hit

    def has_whole(self, node: int) -> bool:
        """Does ``node`` count its fully free GPUs one by one (``whole``)? Yes where GPU
        shares may go, so that shares and whole GPUs never take the same device; and where
        a victim holds GPUs, so that a device is given only if its holders are evicted."""
        vs = self.ix.victims
        if vs is not None and node in vs.gpu_nodes and self._shapes(node):
            return True
        return any(self.ix.shapes[s].share for s in self._shapes(node))

    def share(self, shape: int, node: int, device: str) -> cp_model.IntVar | None:
        """``share[s, d]``: pods of share shape ``shape`` on GPU ``device`` of ``node``; None
        where the shape may not go or the device's free milli-GPU cannot hold one."""
        key = (shape, node, device)
        var = self._vars["share"].get(key)
        if var is None:
            size = self.ix.shapes[shape].share
            free = self._node_state(node).gpu_milli[device]
            if not size or size > free or shape not in self._shapes(node):
                return None
            name = f"share[{shape},{self.ix.node_names[node]}/{device}]"
            var = self._int("share", key, free // size, name)
        return var

    def whole(self, node: int, device: str) -> cp_model.IntVar | None:
        """``whole[d]``: fully free GPU ``device`` given to whole-GPU pods, on nodes where
        shares may go (:meth:`has_whole`); None elsewhere or for a partly used device."""
        key = (node, device)
        var = self._vars["whole"].get(key)
        if var is None:
            if not self.has_whole(node):
                return None
            if self._node_state(node).gpu_milli[device] != GPU_MILLI:
                return None
            var = self._bool("whole", key, f"whole[{self.ix.node_names[node]}/{device}]")
        return var

    def joint(self, shape: int, node: int, group: str) -> cp_model.IntVar:
        """``joint[s, n, w]``: GPUs of joint shape ``shape`` in group ``group`` of ``node``
        (also its NICs there when it asks as many NICs as GPUs)."""
        key = (shape, node, group)
        var = self._vars["joint"].get(key)
        if var is None:
            sh = self.ix.shapes[shape]
            wf, nf = self._group_free(node, sh.joint, group)
            ub = min(wf, nf) if sh.nics == sh.whole else wf
            name = f"joint[{shape},{self.ix.node_names[node]}/{group}]"
            var = self._int("joint", key, ub, name)
        return var

    def joint_nic(self, shape: int, node: int, group: str) -> cp_model.IntVar:
        """``joint_nic[s, n, w]``: NICs of ``shape`` (fewer NICs than GPUs) in the group."""
        key = (shape, node, group)
        var = self._vars["joint_nic"].get(key)
        if var is None:
            _wf, nf = self._group_free(node, self.ix.shapes[shape].joint, group)
            name = f"joint_nic[{shape},{self.ix.node_names[node]}/{group}]"
            var = self._int("joint_nic", key, nf, name)
        return var

    def joint_any(self, shape: int, node: int, group: str) -> cp_model.IntVar:
        """``joint_any[s, n, w]``: ``shape`` (fewer NICs than GPUs) takes GPUs in the group."""
        key = (shape, node, group)
        var = self._vars["joint_any"].get(key)
        if var is None:
            name = f"joint_any[{shape},{self.ix.node_names[node]}/{group}]"
            var = self._bool("joint_any", key, name)
        return var

    def _node_state(self, node: int) -> Any:
        state = self.ix.state
        assert state is not None
        return state.nodes[self.ix.node_names[node]]

    def _group_free(self, node: int, policy: str, group: str) -> tuple[int, int]:
        """Fully free GPUs and free NICs of one joint group of ``node``."""
        st = self._node_state(node)
        gpus, nics = st.groups[policy][group]
        return (
            sum(1 for d in gpus if st.gpu_milli[d] == GPU_MILLI),
            sum(1 for x in nics if x in st.nics),
        )

    # ------------------------------------------------------------------ topology

    def uses_levels(self, owner: Owner) -> tuple[str, ...]:
        """The levels, top down, at which ``owner`` has ``uses`` variables: every modelled
        level for a multi-pod gang; for a role item of more than one pod with its own
        required or preferred level, the levels down to the lowest of those; else none
        (a role of one pod, or the item of identical single-pod gangs, whose pods are each
        alone and so always inside one domain)."""
        ix = self.ix
        kind, oid = owner
        if kind == "g":
            group = ix.groups[oid]
            if not group.multi:
                return ()
            if not ix.exact and all(ix.items[i].node_level for i in group.items):
                # a gang that requires the node level is counted per node (Item.node_level)
                return (*ix.levels, NODE_LEVEL)
            return ix.levels
        item = ix.items[oid]
        tc = item.role.topology
        wanted = [x for x in (tc.required, tc.preferred) if x] if tc else []
        if not wanted or item.count <= 1 or not ix.groups[item.group].multi:
            return ()
        levels = ix.levels
        if not ix.exact and item.node_level:
            levels = (*levels, NODE_LEVEL)
        lows = [levels.index(y) for y in levels if y in wanted]
        if not lows:
            return ()
        return levels[: max(lows) + 1]

    def _owner_items(self, owner: Owner) -> list[int]:
        kind, oid = owner
        return self.ix.groups[oid].items if kind == "g" else [oid]

    def uses(self, owner: Owner, level: str, domain: object) -> cp_model.IntVar:
        """``uses[o, L, D]``: ``owner`` has a pod in ``domain`` of ``level``."""
        bucket = self._uses[(owner, level)]
        var = bucket.get(domain)
        if var is None:
            name = f"uses[{owner[0]}{owner[1]},{level},{domain_label(domain)}]"
            var = self._bool("uses", (owner, level, domain), name)
            bucket[domain] = var
        return var

    def uses_at(self, owner: Owner, level: str) -> list[cp_model.IntVar]:
        """``uses`` of ``owner`` for every domain of ``level`` its items' blocks touch (all
        of them, whoever asked first), in creation order; empty if ``level`` is not one of
        :meth:`uses_levels`."""
        key = (owner, level)
        if key not in self._uses_done:
            if level not in self.uses_levels(owner):
                return []
            doms = self.ix.domain_of_block[level]
            for i in self._owner_items(owner):
                for b, _x in self.item_blocks(i):
                    self.uses(owner, level, doms[b])
            self._uses_done.add(key)
        return list(self._uses[key].values())

    # ------------------------------------------------------------------ objective

    def dominant(self, cls: int, queue: str) -> cp_model.IntVar:
        """``dominant[c, q]``: queue ``queue``'s dominant share in class ``cls`` (ppm)."""
        key = (cls, queue)
        var = self._vars["dominant"].get(key)
        if var is None:
            var = self._int("dominant", key, DOMINANT_MAX, f"dominant[p{cls},{queue}]")
        return var

    def shortfall(self, cls: int, queue: str) -> cp_model.IntVar:
        """``shortfall[c, q]``: 0 .. the queue's fair target in class ``cls`` (ppm)."""
        key = (cls, queue)
        var = self._vars["shortfall"].get(key)
        if var is None:
            target = self.ix.ctx.shares.targets[cls][queue].target
            var = self._int("shortfall", key, target, f"shortfall[p{cls},{queue}]")
        return var

    def minimum(self, item: int, bound: int) -> cp_model.IntVar:
        """``minimum[i]``: 0 .. ``bound`` pods of item ``item`` counted in its gang's minimum
        (the objective's throughput terms define it)."""
        var = self._vars["minimum"].get(item)
        if var is None:
            var = self._int("minimum", item, bound, f"minimum[{self.ix.items[item].name}]")
        return var

    def role_placed(self, item: int) -> cp_model.IntVar:
        """``role_placed[i]``: item ``item`` has at least one pod."""
        var = self._vars["role_placed"].get(item)
        if var is None:
            var = self._bool("role_placed", item, f"role_placed[{self.ix.items[item].name}]")
        return var

    def gpu_used(self, node: int) -> cp_model.IntVar:
        """``gpu_used[n]``: some GPU of ``node`` is taken after the plan."""
        return self._node_flag("gpu_used", node)

    def gpu_full(self, node: int) -> cp_model.IntVar:
        """``gpu_full[n]``: every GPU of ``node`` is taken after the plan."""
        return self._node_flag("gpu_full", node)

    def _node_flag(self, kind: str, node: int) -> cp_model.IntVar:
        var = self._vars[kind].get(node)
        if var is None:
            var = self._bool(kind, node, f"{kind}[{self.ix.node_names[node]}]")
        return var

    def leaf_used(self, leaf: object) -> cp_model.IntVar:
        """``leaf_used[l]``: some GPU of leaf ``leaf`` is taken after the plan."""
        return self._leaf_flag("leaf_used", leaf)

    def leaf_full(self, leaf: object) -> cp_model.IntVar:
        """``leaf_full[l]``: every GPU of leaf ``leaf`` is taken after the plan."""
        return self._leaf_flag("leaf_full", leaf)

    def _leaf_flag(self, kind: str, leaf: object) -> cp_model.IntVar:
        var = self._vars[kind].get(leaf)
        if var is None:
            var = self._bool(kind, leaf, f"{kind}[{getattr(leaf, 'name', leaf)}]")
        return var

    def kept(self, item: int, node: int) -> cp_model.IntVar:
        """``kept[i, n]``: 0 .. the pods of item ``item`` the previous plan had on ``node``."""
        key = (item, node)
        var = self._vars["kept"].get(key)
        if var is None:
            it = self.ix.items[item]
            name = f"kept[{it.name},{self.ix.node_names[node]}]"
            var = self._int("kept", key, it.previous[node], name)
        return var

    # ------------------------------------------------------------------ preemption

    @property
    def victims(self) -> Victims | None:
        """The cycle's victims (None: preemption off, or no running gang may be evicted)."""
        return self.ix.victims

    def stay(self, victim: int) -> cp_model.IntVar:
        """``stay[v]``: victim ``victim`` keeps running (0: it is evicted)."""
        var = self._vars["stay"].get(victim)
        if var is None:
            assert self.ix.victims is not None
            name = f"stay[{self.ix.victims.victims[victim].name}]"
            var = self._bool("stay", victim, name)
        return var

    def keep(self, unit: int) -> cp_model.IntVar:
        """``keep[u]``: 0 .. the pods of unit ``unit`` (of an elastic victim) kept running."""
        var = self._vars["keep"].get(unit)
        if var is None:
            vs = self.ix.victims
            assert vs is not None
            u = vs.units[unit]
            name = f"keep[{vs.victims[u.victim].name}@{self.ix.node_names[u.node]}#{unit}]"
            var = self._int("keep", unit, u.size, name)
        return var

    def running(self, unit: int) -> cp_model.LinearExprT:
        """Pods of unit ``unit`` that keep running: ``keep[u]`` for an elastic victim, else
        its size times ``stay[v]``."""
        vs = self.ix.victims
        assert vs is not None
        u = vs.units[unit]
        if vs.victims[u.victim].elastic:
            return self.keep(unit)
        return u.size * self.stay(u.victim)

    def full(self, unit: int) -> cp_model.IntVar:
        """``full[u]``: unit ``unit`` of an elastic victim keeps all its pods."""
        var = self._vars["full"].get(unit)
        if var is None:
            var = self._bool("full", unit, f"full[{unit}]")
        return var

    def over(self, key: tuple[object, ...], name: str) -> cp_model.IntVar:
        """``over[...]``: putting a victim (or one pod of a unit) back overflows the node's
        resource named by ``key`` (the family ``evictions_needed`` defines it)."""
        var = self._vars["over"].get(key)
        if var is None:
            var = self._bool("over", key, f"over[{name}]")
        return var

    def need(self, key: tuple[object, ...], item: int, bound: int, name: str) -> cp_model.IntVar:
        """``need[k, i]``: 0 .. ``bound`` pods of item ``item`` counted, in the overflow check
        ``key`` (of :meth:`over`), as its elastic gang's minimum on that node (the family
        ``evictions_needed`` defines it)."""
        full = (*key, item)
        var = self._vars["need"].get(full)
        if var is None:
            var = self._int("need", full, bound, f"need[{name},{self.ix.items[item].name}]")
        return var

    # ------------------------------------------------------------------ fragmentation

    def frag_ge(self, node: int, device: str, milli: int) -> cp_model.IntVar:
        """``frag_ge[n, d, g]``: GPU ``device`` of ``node`` has ``milli`` or more free."""
        key = (node, device, milli)
        var = self._vars["frag_ge"].get(key)
        if var is None:
            name = f"frag_ge[{self.ix.node_names[node]}/{device},{milli}]"
            var = self._bool("frag_ge", key, name)
        return var

    def frag_part(self, node: int, device: str, milli: int) -> cp_model.IntVar:
        """``frag_part[n, d, g]``: 0 .. 1000, the device's free milli-GPU when ``frag_ge``."""
        key = (node, device, milli)
        var = self._vars["frag_part"].get(key)
        if var is None:
            name = f"frag_part[{self.ix.node_names[node]}/{device},{milli}]"
            var = self._int("frag_part", key, GPU_MILLI, name)
        return var

    def frag_ok(self, node: int, what: tuple[object, ...]) -> cp_model.IntVar:
        """``frag_ok[n, what]``: ``("cpu", c)`` free CPU ≥ c; ``("gpus", k, g)`` at least k
        devices with ≥ g milli-GPU free (after the plan)."""
        key = (node, *what)
        var = self._vars["frag_ok"].get(key)
        if var is None:
            label = ",".join(str(w) for w in what)
            var = self._bool("frag_ok", key, f"frag_ok[{self.ix.node_names[node]},{label}]")
        return var

    def frag_fits(self, node: int, shape: tuple[int, int, int]) -> cp_model.IntVar:
        """``frag_fits[n, (c, k, g)]``: a pod of c milli-CPU and k GPUs of g milli fits."""
        key = (node, shape)
        var = self._vars["frag_fits"].get(key)
        if var is None:
            label = ",".join(str(x) for x in shape)
            name = f"frag_fits[{self.ix.node_names[node]},{label}]"
            var = self._bool("frag_fits", key, name)
        return var

    def frag_use(self, node: int, shape: tuple[int, int, int], ub: int) -> cp_model.IntVar:
        """``frag_use[n, (c, k, g)]``: 0 .. ``ub``, the free milli-GPU of devices with ≥ g
        free when such a pod fits, else 0."""
        key = (node, shape)
        var = self._vars["frag_use"].get(key)
        if var is None:
            label = ",".join(str(x) for x in shape)
            name = f"frag_use[{self.ix.node_names[node]},{label}]"
            var = self._int("frag_use", key, ub, name)
        return var

    def frag_taken(self, node: int, taken: int) -> cp_model.IntVar:
        """``frag_taken[n, j]``: the plan takes exactly ``taken`` fully free GPUs of
        ``node``."""
        key = (node, taken)
        var = self._vars["frag_taken"].get(key)
        if var is None:
            name = f"frag_taken[{self.ix.node_names[node]},{taken}]"
            var = self._bool("frag_taken", key, name)
        return var

    # ------------------------------------------------------------------ hint and read

    def by_kind(self) -> dict[str, dict[Key, cp_model.IntVar]]:
        """Every variable made so far, by kind and key (``n`` of a one-block item is its
        ``x``; a one-item ``z`` in exact mode is no variable of its own)."""
        return {kind: dict(vs) for kind, vs in self._vars.items()}

    def hint(
        self, pods: list[PodPlacement], evictions: list[Eviction] | None = None
    ) -> dict[int, int]:
        """Values, by proto index, of every decision variable made so far for the plan of
        ``pods`` and ``evictions`` (a plan the verifier accepts; pods the model cannot count
        are skipped)."""
        rules = _HintRules(self.ix, pods, evictions or []).rules()
        missing = {k.name for k in KINDS if k.decision} - set(rules)
        if missing:
            raise AssertionError(f"no hint rule for decision variables {sorted(missing)}")
        values: dict[int, int] = {}
        for kind in KINDS:
            if not kind.decision:
                continue
            rule = rules[kind.name]
            for key, var in self._vars[kind.name].items():
                values[var.index] = rule(key)
        return values

    def read(self, solver: cp_model.CpSolver) -> Solution:
        """Every variable's value in ``solver``'s last solution (of this model, or of a copy
        with constraints added, e.g. the completed hint)."""
        sol = solver.response_proto.solution
        values = {
            kind: {key: int(sol[var.index]) for key, var in vs.items()}
            for kind, vs in self._vars.items()
        }
        return Solution(values, {key: int(sol[var.index]) for key, var in self._z.items()})


class _HintRules:
    """What a plan's pods say each decision variable is: counts per item and block, shape and
    node, joint group, GPU device; the gangs admitted."""

    def __init__(self, ix: Index, pods: list[PodPlacement], evictions: list[Eviction]):
        self.keep: dict[int, int] = {}
        self.stay: dict[int, int] = {}
        if ix.victims is not None:
            gone = {(e.namespace, e.pod) for e in evictions}
            for vic in ix.victims.victims:
                left = 0
                for u in vic.units:
                    unit = ix.victims.units[u]
                    k = sum(1 for p in unit.pods if (p.namespace, p.name) not in gone)
                    self.keep[u] = k
                    left += k
                self.stay[vic.id] = 1 if left == vic.gang.size or (vic.elastic and left) else 0
        nidx = ix.node_index
        item_of: dict[tuple[str, str], int] = {}
        for item in ix.items:
            for g in item.gangs:
                item_of[(g.key, item.role.name)] = item.id
        self.x: dict[tuple[int, int], int] = defaultdict(int)
        self.z: dict[tuple[int, int], int] = defaultdict(int)
        self.joint: dict[tuple[int, int, str], int] = defaultdict(int)
        self.joint_nic: dict[tuple[int, int, str], int] = defaultdict(int)
        self.share: dict[tuple[int, int, str], int] = defaultdict(int)
        self.whole: dict[tuple[int, str], int] = defaultdict(int)
        self.admitted: set[int] = set()
        state = ix.state
        assert state is not None
        for p in pods:
            i = item_of.get((p.gang_key, p.role))
            n = nidx.get(p.node)
            if i is None or n is None:
                continue
            b = ix.block_holding(i, n)
            if b is None:  # a pod on a node its item may not use: no hint for it
                continue
            item = ix.items[i]
            self.x[(i, b)] += 1
            self.z[(item.shape, n)] += 1
            if ix.groups[item.group].multi:
                self.admitted.add(item.group)
            shape = ix.shapes[item.shape]
            st = state.nodes[p.node]
            if shape.joint != "none":
                of = st.group_of.get(shape.joint, {})
                for d in p.gpus:
                    self.joint[(item.shape, n, of.get(d, ""))] += 1
                for d in p.nics:
                    self.joint_nic[(item.shape, n, of.get(d, ""))] += 1
            if shape.share:
                for d in p.gpus:
                    self.share[(item.shape, n, d)] += 1
            elif shape.whole:
                for d in p.gpus:
                    self.whole[(n, d)] = 1

    def rules(self) -> dict[str, Callable[[Key], int]]:
        """One rule per decision kind: its value for a key."""
        return {
            "x": lambda k: self.x.get(k, 0),
            "admit": lambda g: 1 if g in self.admitted else 0,
            "z": lambda k: self.z.get(k, 0),
            "joint": lambda k: self.joint.get(k, 0),
            "joint_nic": lambda k: self.joint_nic.get(k, 0),
            "share": lambda k: self.share.get(k, 0),
            "whole": lambda k: self.whole.get(k, 0),
            "stay": lambda v: self.stay.get(v, 1),
            "keep": lambda u: self.keep.get(u, 0),
        }


def var_bounds(var: cp_model.IntVar) -> tuple[int, int]:
    """The least and the greatest value of ``var``'s domain (read from its proto: that
    repeated field takes no negative index, ``domain[-1]`` reads 0)."""
    dom = var.proto.domain
    return int(dom[0]), int(dom[len(dom) - 1])
