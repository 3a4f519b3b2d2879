"""The hard rules of ``docs/design.md`` as CP-SAT constraint families, one method each.

Running pods are fixed unless preemption is on: every capacity below is what the running
pods that are no one's victim leave (``Snapshot.free``, or ``free_after`` the victims), and
the pods victims keep (``running(u)``, :mod:`~gangplan.solver.model.victims`) take their
share of it in the same rows.
Coefficients are kept small: each resource is divided by the gcd of the requests that use
it (exact), GPU shares by the gcd of share sizes and 1000. A family only reads variables
(:class:`~gangplan.solver.model.variables.Variables` makes them) and adds constraints, so
the families may be added in any order.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from functools import reduce

from ortools.sat.python import cp_model

from gangplan.models import GPU_MILLI, growing_nodes
from gangplan.solver.model.indexing import Index
from gangplan.solver.model.moves import add_moves
from gangplan.solver.model.variables import Owner, Variables, var_bounds
from gangplan.solver.placers.queue_order import pod_charge, running_charge

__all__ = ["Constraints"]


def _gcd(values: list[int]) -> int:
    vals = [v for v in values if v > 0]
    return reduce(math.gcd, vals) if vals else 1


def _fewest_holding(rooms: list[int], need: int) -> int | None:
    """How many of ``rooms`` (largest first) it takes to sum to ``need``; None if all of
    them do not."""
    total = 0
    for k, r in enumerate(rooms, 1):
        total += r
        if total >= need:
            return k
    return None


class Constraints:
    """The hard rules, one family per method; :data:`FAMILIES` is the table of contents."""

    FAMILIES: tuple[str, ...] = (
        "gang_all_or_nothing",  # placed(g) ∈ {0} ∪ [min_member, size], per role too
        "block_link",  # Σ_{i of shape s} x[i,b] = Σ_{n∈b} z[s,n]   (aggregated mode)
        "node_capacity",  # Σ_s req[s,r]·z[s,n] ≤ free[n,r]  for cpu, memory, ...
        "gpu_devices",  # whole GPUs from fully free devices (Σ whole[d] = GPUs taken); shares
        "joint_gpu_nic",  # per PCIe switch / NUMA node: GPUs given = NICs given
        "nics",  # Σ_s nics[s]·z[s,n] ≤ free NICs of n
        "domain_uses",  # x[i,b] > 0 ⇒ uses[g,L,D(b)]; uses[child] ⇒ uses[parent]
        "required_level",  # Σ_D uses[g,L,D] ≤ 1 for a required level L
        "spread_floor",  # Σ_D uses[g,L,D] ≥ k·admit[g], k ≥ 1 the fewest domains holding g
        "queue_max",  # Σ_{gangs of q} req·placed ≤ max[q] − running[q]
        "victims_whole",  # kept(v) ∈ {0} ∪ [min_member, size]; no eligible gang: stay
        "evictions_needed",  # evicted(v) ⇒ ∨ over[v,n,r]: putting v back overflows n
        # (an elastic victim: its minimum too; of an elastic preemptor one minimum counts)
        "moves_replaced",  # replan: admit[copy(v)] = 1 − stay[v]; Σ moved ≤ budget
        "held_capacity",  # Σ_{i may not backfill R} req·x[i,n] ≤ room(R,n,r)  (reservations)
    )
    """Every family, by name (the method is ``_`` + name); the order does not matter."""

    PROGRESS_EVERY = 32
    """Nodes between two progress reports of a family built node by node."""

    def __init__(
        self,
        model: cp_model.CpModel,
        ix: Index,
        v: Variables,
        progress: Callable[[str, float], None] | None = None,
    ):
        """``progress(family, share)``, if given, is called every :data:`PROGRESS_EVERY`
        nodes of a family built node by node (``node_capacity``, ``gpu_devices``: on 1,523
        nodes with GPU shares up to a second each) with the share of its nodes done; it may
        raise to stop the build (the builder's time check)."""
        self.m, self.ix, self.v = model, ix, v
        self.progress = progress
        self._growing = set(growing_nodes(ix.snapshot))

    def _node_done(self, family: str, done: int) -> None:
        """Report progress once ``done`` nodes of ``family`` are built (every
        :data:`PROGRESS_EVERY` nodes)."""
        if self.progress is not None and done and done % self.PROGRESS_EVERY == 0:
            self.progress(family, done / len(self.ix.node_names))

    def add_all(self) -> None:
        """Every family of :data:`FAMILIES`."""
        for name in self.FAMILIES:
            self.add(name)

    def add(self, family: str) -> None:
        """One family by name (e.g. ``node_capacity``).

        Raises:
            ValueError: an unknown family (the message lists the known ones).
        """
        if family not in self.FAMILIES:
            raise ValueError(f"no constraint family {family!r} (known: {', '.join(self.FAMILIES)})")
        getattr(self, f"_{family}")()

    # ------------------------------------------------------------------ gang

    def _gang_all_or_nothing(self) -> None:
        """A multi-pod gang is placed at least at its minimum, or not at all; each role
        between its own min_member and count when admitted."""
        for g in self.ix.groups:
            if not g.multi:
                for i in g.items:  # identical single-pod gangs: at most one pod each
                    self.m.add(self.v.placed(i) <= self.ix.items[i].count)
                continue
            admit = self.v.admit(g.id)
            gang = g.gang
            total = []
            for i in g.items:
                item = self.ix.items[i]
                n = self.v.placed(i)
                self.m.add(n <= item.count * admit)
                self.m.add(n >= gang.role_min(item.role) * admit)
                total.append(n)
            missing = [
                r
                for r in gang.roles
                if gang.role_min(r) > 0
                and all(self.ix.items[i].role.name != r.name for i in g.items)
            ]
            if missing:
                self.m.add(admit == 0)  # a required role has no candidate node
            self.m.add(sum(total) >= gang.min_size * admit)

    def _held_capacity(self) -> None:
        """Held capacity of reservations (:mod:`~gangplan.solver.model.holds`)."""
        from gangplan.solver.model.holds import add_held_capacity

        add_held_capacity(self.m, self.ix, self.v)

    # ------------------------------------------------------------------ capacity

    def _block_link(self) -> None:
        """Aggregated mode: per block and shape, the pods its items put in the block equal
        the pods of that shape on the block's nodes; items counted per node (a required
        node level) count toward the block of each node and fit that node's pods:
        ``Σ_{i of s} x[i,b] + Σ_{n∈b} y[s,n] = Σ_{n∈b} z[s,n]`` and ``y[s,n] ≤ z[s,n]``,
        ``y[s,n]`` being the pods those items put on node n. Inside a block every item may
        use every node (``indexing``), so any pod of shape s may take any of these places."""
        ix = self.ix
        if ix.exact:
            return
        per: dict[tuple[int, int], list[cp_model.IntVar]] = defaultdict(list)
        on_node: dict[tuple[int, int], list[cp_model.IntVar]] = defaultdict(list)
        for (i, b), var in self.v.all_x():
            item = ix.items[i]
            if item.node_level:
                n = ix.blocks[b].nodes[0]
                on_node[(item.shape, n)].append(var)
                per[(item.shape, ix.block_of_node[n])].append(var)
            else:
                per[(item.shape, b)].append(var)
        zs: dict[tuple[int, int], list[cp_model.IntVar]] = defaultdict(list)
        z_of: dict[tuple[int, int], cp_model.IntVar] = {}
        for (s, n), var in self.v.node_counts():
            zs[(s, ix.block_of_node[n])].append(var)
            z_of[(s, n)] = var
        for key in sorted(set(per) | set(zs)):
            self.m.add(sum(per.get(key, [])) == sum(zs.get(key, [])))
        for key, ys in sorted(on_node.items()):
            self.m.add(sum(ys) <= z_of[key])

    def _node_capacity(self) -> None:
        """Per node and resource other than GPUs and NICs: requests placed ≤ free."""
        s = self.ix.snapshot
        skip = {s.gpu, s.nic}
        resources = {r for sh in self.ix.shapes for r, _ in sh.requests} - skip
        vs = self.ix.victims
        held = [u.req(r) for u in vs.units for r in resources] if vs is not None else []
        scale = {r: _gcd([sh.req(r) for sh in self.ix.shapes] + held) for r in resources}
        state = self.ix.state
        assert state is not None
        for n, name in enumerate(self.ix.node_names):
            self._node_done("node_capacity", n)
            on = self.v.shapes_on(n)
            if not on:
                continue
            free = state.nodes[name].resources
            for r in sorted(resources):
                terms: list[tuple[int, cp_model.LinearExprT]] = [
                    (self.ix.shapes[sh].req(r) // scale[r], e) for sh, e in on
                ]
                terms = [(c, e) for c, e in terms if c > 0]
                if not terms:
                    continue
                if vs is not None:
                    terms += [
                        (c // scale[r], self.v.running(u))
                        for c, u in vs.resource_terms(self.ix.snapshot, n, r)
                    ]
                cap = free.get(r, 0) // scale[r]
                self.m.add(sum(c * e for c, e in terms) <= cap)

    def _gpu_devices(self) -> None:
        """Whole-GPU pods take fully free devices; a GPU share fits one device's free
        milli-GPU (per-device counts on nodes where shares may go)."""
        state = self.ix.state
        assert state is not None
        share_sizes = [sh.share for sh in self.ix.shapes if sh.share]
        vs = self.ix.victims
        held = [m for u in vs.units for _d, m in u.gpu] if vs is not None else []
        unit = _gcd([*share_sizes, *held, GPU_MILLI])
        v = self.v
        for n, name in enumerate(self.ix.node_names):
            self._node_done("gpu_devices", n)
            on = v.shapes_on(n)
            whole_terms = [
                (self.ix.shapes[sh].whole, e) for sh, e in on if self.ix.shapes[sh].whole
            ]
            shares = [(sh, e) for sh, e in on if self.ix.shapes[sh].share]
            st = state.nodes[name]
            wfree = st.whole_free()
            if not v.has_whole(n):
                if whole_terms:
                    self.m.add(sum(c * e for c, e in whole_terms) <= len(wfree))
                continue
            per_shape: dict[int, list[cp_model.IntVar]] = defaultdict(list)
            for d in st.gpu_order:
                free = st.gpu_milli[d]
                terms: list[tuple[int, cp_model.LinearExprT]] = []
                for sh, _e in shares:
                    var = v.share(sh, n, d)
                    if var is not None:
                        per_shape[sh].append(var)
                        terms.append((self.ix.shapes[sh].share // unit, var))
                w = v.whole(n, d)
                if w is not None:
                    terms.append((GPU_MILLI // unit, w))
                if terms and vs is not None:
                    terms += [(m // unit, v.running(u)) for m, u in vs.device_terms(n, d)]
                if terms:
                    self.m.add(sum(c * t for c, t in terms) <= free // unit)
            for sh, e in shares:
                self.m.add(sum(per_shape.get(sh, [])) == e)
            # exactly the devices whole GPUs take are marked: the free milli of every device
            # after the plan is then known (FGD's measure reads it, objective.py)
            given = [w for w in (v.whole(n, d) for d in wfree) if w is not None]
            if given or whole_terms:
                self.m.add(sum(given) == sum(c * e for c, e in whole_terms))

    def _joint_gpu_nic(self) -> None:
        """Joint allocation (Koordinator SamePCIe / SameNUMA): a pod asking GPUs and NICs
        takes them in the same groups, as many NICs as GPUs per group; per group the GPUs
        and NICs given stay within what is free there. A pod asking fewer NICs than GPUs
        takes its NICs only from groups holding its GPUs (at most one such pod per node)."""
        state = self.ix.state
        assert state is not None
        v = self.v
        for n, name in enumerate(self.ix.node_names):
            st = state.nodes[name]
            on = [(sh, e) for sh, e in v.shapes_on(n) if self.ix.shapes[sh].joint != "none"]
            if not on:
                continue
            gpu_use: dict[tuple[str, str], list[cp_model.LinearExprT]] = defaultdict(list)
            nic_use: dict[tuple[str, str], list[cp_model.LinearExprT]] = defaultdict(list)
            for sh, e in on:
                shape = self.ix.shapes[sh]
                groups = st.groups.get(shape.joint, {})
                gvars, nvars = [], []
                for gname, (gpus, nics) in groups.items():
                    wf = sum(1 for d in gpus if st.gpu_milli[d] == GPU_MILLI)
                    nf = sum(1 for x in nics if x in st.nics)
                    a = v.joint(sh, n, gname)
                    if shape.nics == shape.whole:
                        gvars.append(a)
                        nvars.append(a)
                        gpu_use[(shape.joint, gname)].append(a)
                        nic_use[(shape.joint, gname)].append(a)
                    else:
                        b = v.joint_nic(sh, n, gname)
                        used = v.joint_any(sh, n, gname)
                        self.m.add(a >= used)
                        self.m.add(a <= wf * used)
                        self.m.add(b <= nf * used)
                        gvars.append(a)
                        nvars.append(b)
                        gpu_use[(shape.joint, gname)].append(a)
                        nic_use[(shape.joint, gname)].append(b)
                if shape.nics != shape.whole:
                    self.m.add(e <= 1)
                self.m.add(sum(gvars) == shape.whole * e)
                self.m.add(sum(nvars) == shape.nics * e)
            # per group limits; NUMA groups also carry the PCIe groups inside them
            numa_of: dict[str, str] = {}
            if "numa" in st.groups and "pcie" in st.groups:
                for numa_name, (gpus, _nics) in st.groups["numa"].items():
                    for pname, (pg, _pn) in st.groups["pcie"].items():
                        if set(pg) <= set(gpus) and pg:
                            numa_of[pname] = numa_name
            for policy in ("pcie", "numa"):
                for gname, (gpus, nics) in st.groups.get(policy, {}).items():
                    g_terms = list(gpu_use.get((policy, gname), []))
                    n_terms = list(nic_use.get((policy, gname), []))
                    if policy == "numa":
                        for pname, numa_name in numa_of.items():
                            if numa_name == gname:
                                g_terms += gpu_use.get(("pcie", pname), [])
                                n_terms += nic_use.get(("pcie", pname), [])
                    if not g_terms:
                        continue
                    wf_ids = [d for d in gpus if st.gpu_milli[d] == GPU_MILLI]
                    nf = sum(1 for x in nics if x in st.nics)
                    given = [w for w in (v.whole(n, d) for d in wf_ids) if w is not None]
                    if given:
                        # shares or victims' GPUs on this node: only devices given to whole GPUs
                        self.m.add(sum(g_terms) <= sum(given))
                    else:
                        self.m.add(sum(g_terms) <= len(wf_ids))
                    self.m.add(sum([*n_terms, *self._held_nics(n, nics)]) <= nf)

    def _nics(self) -> None:
        """Per node: the NICs its pods ask stay within its free NICs."""
        state = self.ix.state
        assert state is not None
        for n, name in enumerate(self.ix.node_names):
            terms = [
                (self.ix.shapes[sh].nics, e)
                for sh, e in self.v.shapes_on(n)
                if self.ix.shapes[sh].nics
            ]
            if terms:
                used = [c * e for c, e in terms] + self._held_nics(n, None)
                self.m.add(sum(used) <= len(state.nodes[name].nics))

    def _held_nics(self, node: int, ids: tuple[str, ...] | None) -> list[cp_model.LinearExprT]:
        """NICs (among ``ids``; all for None) that victims' kept pods hold on ``node``."""
        vs = self.ix.victims
        if vs is None:
            return []
        return [k * self.v.running(u) for k, u in vs.nic_terms(node, ids)]

    # ------------------------------------------------------------------ topology

    def _link_uses(self, owner: Owner) -> None:
        """uses[owner, L, D] ≥ [owner has a pod in D] at its lowest level L; a child domain
        used implies its parent used, up to its top level."""
        v, ix = self.v, self.ix
        levels = v.uses_levels(owner)
        if not levels:
            return
        item_ids = ix.groups[owner[1]].items if owner[0] == "g" else [owner[1]]
        low = levels[-1]
        for i in item_ids:
            for b, var in v.item_blocks(i):
                uses = v.uses(owner, low, ix.domain_of_block[low][b])
                self.m.add(var <= ix.items[i].count * uses)
        for li in range(len(levels) - 2, -1, -1):
            lv, child = levels[li], levels[li + 1]
            blocks = {b for i in item_ids for b, _ in v.item_blocks(i)}
            for b in blocks:
                parent = v.uses(owner, lv, ix.domain_of_block[lv][b])
                self.m.add_implication(v.uses(owner, child, ix.domain_of_block[child][b]), parent)

    def _domain_uses(self) -> None:
        """uses[g,L,D] is 1 when gang g (or a role with its own level) has a pod in D."""
        for g in self.ix.groups:
            self._link_uses(("g", g.id))
            for i in g.items:
                self._link_uses(("i", i))

    def _required_level(self) -> None:
        """All pods of a gang (or of a role with its own required level) in one domain."""
        ix, v = self.ix, self.v
        for g in ix.groups:
            level = g.gang.topology.required if g.gang.topology else None
            if g.multi and level is not None and level in v.uses_levels(("g", g.id)):
                self.m.add(sum(v.uses_at(("g", g.id), level)) <= 1)
            for i in g.items:
                tc = ix.items[i].role.topology
                if tc is not None and tc.required is not None:
                    doms = v.uses_at(("i", i), tc.required)
                    if doms:
                        self.m.add(sum(doms) <= 1)

    def _spread_floor(self) -> None:
        """Not a rule but a bound the rules imply, so the search proves locality sooner: an
        admitted multi-pod gang uses at least ``k`` domains of each level it has ``uses``
        at, ``k`` the fewest domains whose room holds its fewest pods (``min_size``), the
        rooms largest first (at least one: ``uses`` alone only bounds each domain's from
        below by its share of the gang's pods, so an elastic gang's sum could fall below
        one in the relaxation). A domain's room for the gang is, over its items, the least of
        the item's count and the upper bounds of its ``x`` in the domain's blocks (what fits
        there alone, on the capacity the cycle starts with), so no plan of the model uses
        fewer. Without it the search's bound on ``locality.*`` stays weak: a gang's
        ``uses`` are relaxed to fractions. Growth gangs (``models/elastic.py``) are left
        out: their spread counts their running pods' domains too."""
        ix, v = self.ix, self.v
        growing = growing_nodes(ix.snapshot)
        for g in ix.groups:
            if not g.multi or g.gang.key in growing:
                continue
            owner: Owner = ("g", g.id)
            for level in v.uses_levels(owner):
                doms = ix.domain_of_block.get(level)
                if doms is None:
                    continue
                room: dict[object, int] = defaultdict(int)
                for i in g.items:
                    per: dict[object, int] = defaultdict(int)
                    for b, x in v.item_blocks(i):
                        per[doms[b]] += var_bounds(x)[1]
                    for d, c in per.items():
                        room[d] += min(ix.items[i].count, c)
                k = _fewest_holding(sorted(room.values(), reverse=True), g.gang.min_size)
                uses = v.uses_at(owner, level)
                if k is not None and uses:
                    self.m.add(sum(uses) >= k * v.admit(g.id))

    # ------------------------------------------------------------------ queues

    def _queue_max(self) -> None:
        """A queue's running usage plus what the cycle admits stays within its max, in the
        resources the admitted pods ask (:mod:`gangplan.solver.placers.queue_order`: a pod asking
        none of ``r`` is not held to ``max[r]``; a model-specific GPU resource counts the
        GPUs of the pods it maps to):
        ``Σ_{i of q, c_i[r] > 0} c_i[r]·placed(i) ≤ max[q,r] − running[q,r]``, and where the
        right side is negative, ``placed(i) = 0`` for those items. A replan's copy of a
        moving gang (:mod:`gangplan.solver.model.moves`) counts in its running gang's queue,
        not in its own: a move never frees quota."""
        s = self.ix.snapshot
        home = self._home_queues()
        running: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for pod in () if self.ix.empty else s.running:
            if pod.queue is not None:
                for r, val in running_charge(s, pod).items():
                    running[pod.queue][r] += val
        by_queue: dict[str, list[int]] = defaultdict(list)
        for item in self.ix.items:
            by_queue[home.get(item.gang.key, item.gang.queue)].append(item.id)
        for q in s.queues:
            if not q.max or q.name not in by_queue:
                continue
            ids = by_queue[q.name]
            vs = self.ix.victims
            charge = {i: pod_charge(s, self.ix.items[i].gang, self.ix.items[i].role) for i in ids}
            # what one pod of each victim unit of the queue counts against its max
            held_charge = (
                {
                    u.id: running_charge(s, u.pods[0])
                    for u in vs.units
                    if vs.victims[u.victim].gang.queue == q.name
                }
                if vs is not None
                else {}
            )
            for r, cap in sorted(q.max.items()):
                left = cap - running[q.name].get(r, 0)
                coeffs = [(charge[i].get(r, 0), i) for i in ids]
                coeffs = [(c, i) for c, i in coeffs if c > 0]
                if not coeffs:
                    continue
                if left < 0:
                    # already over its max: no pod asking this resource may be admitted
                    for _c, i in coeffs:
                        self.m.add(self.v.placed(i) == 0)
                    continue
                # victims of the queue: what they keep counts, what they give up is free
                held = [(c[r], u) for u, c in held_charge.items() if c.get(r, 0) > 0]
                left += sum(c * vs.units[u].size for c, u in held) if vs is not None else 0
                unit = _gcd([c for c, _ in coeffs] + [c for c, _ in held])
                used: list[cp_model.LinearExprT] = [
                    (c // unit) * self.v.placed(i) for c, i in coeffs
                ]
                used += [(c // unit) * self.v.running(u) for c, u in held]
                self.m.add(sum(used) <= left // unit)

    def _home_queues(self) -> dict[str, str]:
        """A replan's copy gang key -> the queue of the running gang it re-places."""
        spec = self.ix.ctx.moves
        if spec is None:
            return {}
        gangs = self.ix.snapshot.preemption_rules.gangs
        return {
            copy: q
            for key, copy in spec.copies.items()
            if key in gangs and (q := gangs[key].queue) is not None
        }

    # ------------------------------------------------------------------ preemption

    def _victims_whole(self) -> None:
        """A victim keeps all its pods or none; an elastic one none, or between its
        min_member and its size (``stay`` says which), unit by unit. A victim no item of
        the model may evict (its gangs left out) stays."""
        vs, v = self.ix.victims, self.v
        if vs is None:
            return
        for vic in vs.victims:
            stay = v.stay(vic.id)
            if not vic.eligible:
                self.m.add(stay == 1)
            if not vic.elastic:
                continue
            kept = sum(v.keep(u) for u in vic.units)
            self.m.add(kept >= vic.gang.min_member * stay)
            self.m.add(kept <= vic.gang.size * stay)
            for u in vic.units:
                full = v.full(u)
                size = vs.units[u].size
                self.m.add(v.keep(u) == size).only_enforce_if(full)
                self.m.add(v.keep(u) <= size - 1).only_enforce_if(full.negated())

    def _evictions_needed(self) -> None:
        """No eviction for nothing (the verifier's rule, ``verify_evictions``): an evicted
        victim put back — whole, or one pod of a unit an elastic victim still running
        gives up — overflows a resource it asks on one of its nodes, counting the running
        pods kept, itself and the pods of the items that may evict it:
        ``fixed[n,r] + Σ_u req·running(u) + back + Σ_{i eligible} req[i,r]·x[i,n] > alloc[n,r]``,
        ``over`` marking which (node, resource) overflows."""
        vs, v = self.ix.victims, self.v
        if vs is None or self.ix.ctx.moves is not None:  # a move is not lost: no such rule
            return
        for vic in vs.victims:
            whole: list[cp_model.IntVar] = []
            by_node: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
            for u in vic.units:
                unit = vs.units[u]
                for r, amount in unit.requests:
                    by_node[unit.node][r] += amount * unit.size
            for n, back in sorted(by_node.items()):
                for r, amount in sorted(back.items()):
                    o = self._overflow(vic.id, n, r, amount, ("whole", vic.id, n, r))
                    if o is not None:
                        whole.append(o)
            evicted = v.stay(vic.id).negated()
            if whole:
                self.m.add(sum(whole) >= 1).only_enforce_if(evicted)
            else:
                self.m.add(v.stay(vic.id) == 1)
            if not vic.elastic:
                continue
            # evicted whole, it could not have kept its minimum on one of its nodes: put
            # back there (per resource the smallest requests), it overflows too
            m = vic.gang.min_member
            per_node: dict[int, list[int]] = defaultdict(list)
            for u in vic.units:
                per_node[vs.units[u].node].extend([u] * vs.units[u].size)
            for n, pods in sorted(per_node.items()):
                if len(pods) < m:
                    continue
                resources = sorted({r for u in set(pods) for r, _a in vs.units[u].requests})
                kept_min = []
                for r in resources:
                    least = sum(sorted(vs.units[u].req(r) for u in pods)[:m])
                    o = self._overflow(vic.id, n, r, least, ("minimum", vic.id, n, r))
                    if o is not None:
                        kept_min.append(o)
                if kept_min:
                    self.m.add(sum(kept_min) >= 1).only_enforce_if(evicted)
                else:
                    self.m.add(v.stay(vic.id) == 1)
            for u in vic.units:
                unit = vs.units[u]
                part = [
                    o
                    for r, amount in unit.requests
                    if (o := self._overflow(vic.id, unit.node, r, amount, ("pod", u, r)))
                    is not None
                ]
                lits = [v.stay(vic.id), v.full(u).negated()]
                if part:
                    self.m.add(sum(part) >= 1).only_enforce_if(lits)
                else:
                    self.m.add_bool_or([v.stay(vic.id).negated(), v.full(u)])

    def _moves_replaced(self) -> None:
        """Replan: a moved gang is placed again, whole, and the moves stay within the
        budget (:func:`~gangplan.solver.model.moves.add_moves`)."""
        if self.ix.ctx.moves is not None:
            add_moves(self.m, self.ix, self.v, self.ix.ctx.moves)

    def _minimum_pods(
        self,
        group: int,
        pairs: list[tuple[int, cp_model.IntVar]],
        resource: str,
        key: tuple[object, ...],
        name: str,
    ) -> list[tuple[int, cp_model.LinearExprT]]:
        """Evictions make room for a gang's minimum only (the verifier's rule): of an elastic
        gang's pods on the node (``pairs``: item, its count there), ``need[k,i] <= x``
        counted, at most one minimum's worth — ``Σ_r max(need_r, role_min_r) <= min_size``
        (a role's pods up to its own minimum are free, the rest share ``min_size`` less the
        roles' minimums). Returns the terms (coefficient of ``resource``, ``need``)."""
        ix, v = self.ix, self.v
        gang = ix.groups[group].gang
        slack = gang.min_size - sum(gang.role_min(r) for r in gang.roles)
        out: list[tuple[int, cp_model.LinearExprT]] = []
        beyond: list[cp_model.LinearExprT] = []
        for i, x in pairs:
            item = ix.items[i]
            own = gang.role_min(item.role)
            bound = min(item.count, own + slack)
            need = v.need(key, i, bound, name)
            self.m.add(need <= x)
            out.append((ix.shapes[item.shape].req(resource), need))
            if own == 0:
                beyond.append(need)
            elif bound > own:
                extra = v.need((*key, "beyond"), i, bound - own, name + ",beyond")
                self.m.add(extra >= need - own)
                beyond.append(extra)
        if beyond:
            self.m.add(sum(beyond) <= slack)
        return out

    def _overflow(
        self, victim: int, node: int, resource: str, back: int, key: tuple[object, ...]
    ) -> cp_model.IntVar | None:
        """``over``: the pods victim ``victim`` would put ``back`` on ``node`` overflow
        ``resource`` there (None where that cannot justify an eviction: a resource the
        node does not advertise or already holds too much of, or nothing asked)."""
        vs, v, ix = self.ix.victims, self.v, self.ix
        assert vs is not None
        s = ix.snapshot
        node_obj = s.node_by_name[ix.node_names[node]]
        if back <= 0 or resource not in node_obj.allocatable:
            return None
        if not vs.counts(node, vs.channel(s, resource)):
            return None
        terms: list[tuple[int, cp_model.LinearExprT]] = [
            (c, v.running(u)) for c, u in vs.resource_terms(s, node, resource)
        ]
        who = vs.victims[victim].name if key[0] == "whole" else f"{key[0]}{key[1]}"
        name = f"{who},{ix.node_names[node]},{resource}"
        capped: dict[int, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
        for i in vs.victims[victim].eligible:
            c = ix.shapes[ix.items[i].shape].req(resource)
            b = ix.block_holding(i, node)
            x = None if b is None else v.x(i, b)
            if c <= 0 or x is None:
                continue
            group = ix.groups[ix.items[i].group]
            if group.multi and group.gang.key in self._growing:
                continue  # a growth gang's minimum is empty: it evicts for nothing
            if group.multi and group.gang.elastic:
                capped[group.id].append((i, x))
                continue
            terms.append((c, x))
        for gid, pairs in capped.items():
            terms += self._minimum_pods(gid, pairs, resource, key, name)
        room = node_obj.allocatable[resource] - vs.fixed[node].get(resource, 0) - back
        if not terms:
            return None
        unit = _gcd([c for c, _ in terms])
        over = v.over(key, name)
        self.m.add(sum((c // unit) * e for c, e in terms) >= room // unit + 1).only_enforce_if(over)
        return over
