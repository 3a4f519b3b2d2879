"""The hard rules of DESIGN.md as CP-SAT constraint families, one method each.

Running pods are fixed: every capacity below is what they leave (``Snapshot.free``).
Coefficients are kept small: each resource is divided by the gcd of the requests that use
it (exact), GPU shares by the gcd of share sizes and 1000.
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import reduce

from ortools.sat.python import cp_model

from gangplan.models import GPU_MILLI
from gangplan.solver.model.indexing import Index
from gangplan.solver.model.variables import Variables

__all__ = ["Constraints"]


def _gcd(values: list[int]) -> int:
    vals = [v for v in values if v > 0]
    return reduce(math.gcd, vals) if vals else 1


class Constraints:
    """Hard rules of DESIGN.md. Order does not matter."""

    def __init__(self, model: cp_model.CpModel, ix: Index, v: Variables):
        self.m, self.ix, self.v = model, ix, v
        self.count = 0

    def add_all(self) -> None:
        self._gang_all_or_nothing()  # placed(g) ∈ {0} ∪ [min_member, size], per role too
        self._block_link()  # Σ_{i of shape s} x[i,b] = Σ_{n∈b} z[s,n]   (aggregated mode)
        self._node_capacity()  # Σ_s req[s,r]·z[s,n] ≤ free[n,r]  for cpu, memory, ...
        self._gpu_devices()  # whole GPUs from fully free devices; shares per device
        self._joint_gpu_nic()  # per PCIe switch / NUMA node: GPUs given = NICs given
        self._nics()  # Σ_s nics[s]·z[s,n] ≤ free NICs of n
        self._domain_uses()  # x[i,b] > 0 ⇒ uses[g,L,D(b)]; uses[child] ⇒ uses[parent]
        self._required_level()  # Σ_D uses[g,L,D] ≤ 1 for a required level L
        self._queue_max()  # Σ_{gangs of q} req·placed ≤ max[q] − running[q]

    # ------------------------------------------------------------------ gang

    def _gang_all_or_nothing(self) -> None:
        """A multi-pod gang is placed at least at its minimum, or not at all; each role
        between its own min_member and count when admitted."""
        for g in self.ix.groups:
            if not g.multi:
                for i in g.items:  # identical single-pod gangs: at most one pod each
                    self.m.add(self.v.placed(i) <= self.ix.items[i].count)
                    self.count += 1
                continue
            admit = self.v.admit[g.id]
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
            self.count += 2 * len(g.items) + 1

    # ------------------------------------------------------------------ capacity

    def _block_link(self) -> None:
        if self.ix.exact:
            return
        per: dict[tuple[int, int], list[cp_model.IntVar]] = defaultdict(list)
        for (i, b), var in self.v.x.items():
            per[(self.ix.items[i].shape, b)].append(var)
        zs: dict[tuple[int, int], list[cp_model.IntVar]] = defaultdict(list)
        for (s, n), var in self.v.z_vars.items():
            zs[(s, self.ix.block_of_node[n])].append(var)
        for key in set(per) | set(zs):
            self.m.add(sum(per.get(key, [])) == sum(zs.get(key, [])))
            self.count += 1

    def _node_capacity(self) -> None:
        """Per node and resource other than GPUs and NICs: requests placed ≤ free."""
        s = self.ix.snapshot
        skip = {s.gpu, s.nic}
        resources = {r for sh in self.ix.shapes for r, _ in sh.requests} - skip
        scale = {r: _gcd([sh.req(r) for sh in self.ix.shapes]) for r in resources}
        state = self.ix.state
        assert state is not None
        for n, name in enumerate(self.ix.node_names):
            on = self.v.shapes_on(n)
            if not on:
                continue
            free = state.nodes[name].resources
            for r in sorted(resources):
                terms = [(self.ix.shapes[sh].req(r) // scale[r], e) for sh, e in on]
                terms = [(c, e) for c, e in terms if c > 0]
                if not terms:
                    continue
                cap = free.get(r, 0) // scale[r]
                self.m.add(sum(c * e for c, e in terms) <= cap)
                self.count += 1

    def _gpu_devices(self) -> None:
        """Whole-GPU pods take fully free devices; a GPU share fits one device's free
        milli-GPU (per-device counts on nodes where shares may go)."""
        state = self.ix.state
        assert state is not None
        share_sizes = [sh.share for sh in self.ix.shapes if sh.share]
        unit = _gcd([*share_sizes, GPU_MILLI])
        for n, name in enumerate(self.ix.node_names):
            on = self.v.shapes_on(n)
            whole_terms = [
                (self.ix.shapes[sh].whole, e) for sh, e in on if self.ix.shapes[sh].whole
            ]
            shares = [(sh, e) for sh, e in on if self.ix.shapes[sh].share]
            st = state.nodes[name]
            wfree = st.whole_free()
            if not shares:
                if whole_terms:
                    self.m.add(sum(c * e for c, e in whole_terms) <= len(wfree))
                    self.count += 1
                continue
            per_shape: dict[int, list[cp_model.IntVar]] = defaultdict(list)
            for d in st.gpu_order:
                free = st.gpu_milli[d]
                terms = []
                for sh, _e in shares:
                    size = self.ix.shapes[sh].share
                    if size <= free:
                        var = self.m.new_int_var(0, free // size, f"share[{sh},{name}/{d}]")
                        self.v.share[(sh, n, d)] = var
                        per_shape[sh].append(var)
                        terms.append((size // unit, var))
                if d in wfree:
                    w = self.m.new_bool_var(f"whole[{name}/{d}]")
                    self.v.whole[(n, d)] = w
                    terms.append((GPU_MILLI // unit, w))
                if terms:
                    self.m.add(sum(c * t for c, t in terms) <= free // unit)
                    self.count += 1
            for sh, e in shares:
                self.m.add(sum(per_shape.get(sh, [])) == e)
            if whole_terms:
                self.m.add(
                    sum(self.v.whole[(n, d)] for d in wfree) >= sum(c * e for c, e in whole_terms)
                )
            self.count += len(shares) + 1

    def _joint_gpu_nic(self) -> None:
        """Joint allocation (Koordinator SamePCIe / SameNUMA): a pod asking GPUs and NICs
        takes them in the same groups, as many NICs as GPUs per group; per group the GPUs
        and NICs given stay within what is free there. A pod asking fewer NICs than GPUs
        takes its NICs only from groups holding its GPUs (at most one such pod per node)."""
        state = self.ix.state
        assert state is not None
        for n, name in enumerate(self.ix.node_names):
            st = state.nodes[name]
            on = [(sh, e) for sh, e in self.v.shapes_on(n) if self.ix.shapes[sh].joint != "none"]
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
                    if shape.nics == shape.whole:
                        a = self.m.new_int_var(0, min(wf, nf), f"joint[{sh},{name}/{gname}]")
                        self.v.joint[(sh, n, gname)] = a
                        gvars.append(a)
                        nvars.append(a)
                        gpu_use[(shape.joint, gname)].append(a)
                        nic_use[(shape.joint, gname)].append(a)
                    else:
                        a = self.m.new_int_var(0, wf, f"joint[{sh},{name}/{gname}]")
                        b = self.m.new_int_var(0, nf, f"joint_nic[{sh},{name}/{gname}]")
                        used = self.m.new_bool_var(f"joint_any[{sh},{name}/{gname}]")
                        self.m.add(a >= used)
                        self.m.add(a <= wf * used)
                        self.m.add(b <= nf * used)
                        self.v.joint[(sh, n, gname)] = a
                        self.v.joint_nic[(sh, n, gname)] = b
                        gvars.append(a)
                        nvars.append(b)
                        gpu_use[(shape.joint, gname)].append(a)
                        nic_use[(shape.joint, gname)].append(b)
                if shape.nics != shape.whole:
                    self.m.add(e <= 1)
                self.m.add(sum(gvars) == shape.whole * e)
                self.m.add(sum(nvars) == shape.nics * e)
                self.count += 2
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
                    if any((n, d) in self.v.whole for d in wf_ids):
                        self.m.add(sum(g_terms) <= sum(self.v.whole[(n, d)] for d in wf_ids))
                    else:
                        self.m.add(sum(g_terms) <= len(wf_ids))
                    self.m.add(sum(n_terms) <= nf)
                    self.count += 2

    def _nics(self) -> None:
        s = self.ix.snapshot
        state = self.ix.state
        assert state is not None
        for n, name in enumerate(self.ix.node_names):
            terms = [
                (self.ix.shapes[sh].nics, e)
                for sh, e in self.v.shapes_on(n)
                if self.ix.shapes[sh].nics
            ]
            if terms:
                self.m.add(sum(c * e for c, e in terms) <= len(state.nodes[name].nics))
                self.count += 1
        _ = s

    # ------------------------------------------------------------------ topology

    def uses_key(
        self, owner: tuple[str, int], level: str, dom: object
    ) -> tuple[str, int, str, object]:
        return (owner[0], owner[1], level, dom)

    def _uses_for(
        self, owner: tuple[str, int], item_ids: list[int], levels: tuple[str, ...]
    ) -> None:
        """Create uses[owner, L, D] for ``levels`` (top down) and link them to ``x``."""
        if not levels:
            return
        ix = self.ix
        low = levels[-1]
        for i in item_ids:
            for b, var in self.v.item_blocks(i):
                dom = ix.domain_of_block[low][b]
                key = (owner[0], owner[1], low, dom)
                if key not in self.v.uses:
                    self.v.uses[key] = self.m.new_bool_var(
                        f"uses[{owner[0]}{owner[1]},{low},{_dname(dom)}]"
                    )
                self.m.add(var <= ix.items[i].count * self.v.uses[key])
                self.count += 1
        for li in range(len(levels) - 2, -1, -1):
            lv, child = levels[li], levels[li + 1]
            blocks = {b for i in item_ids for b, _ in self.v.item_blocks(i)}
            for b in blocks:
                ck = (owner[0], owner[1], child, ix.domain_of_block[child][b])
                pk = (owner[0], owner[1], lv, ix.domain_of_block[lv][b])
                if pk not in self.v.uses:
                    self.v.uses[pk] = self.m.new_bool_var(
                        f"uses[{owner[0]}{owner[1]},{lv},{_dname(pk[3])}]"
                    )
                self.m.add_implication(self.v.uses[ck], self.v.uses[pk])
                self.count += 1

    def _domain_uses(self) -> None:
        """uses[g,L,D] is 1 when gang g (or a role with its own level) has a pod in D."""
        ix = self.ix
        for g in ix.groups:
            if g.multi:
                self._uses_for(("g", g.id), g.items, ix.levels)
            for i in g.items:
                tc = ix.items[i].role.topology
                lv = [x for x in (tc.required, tc.preferred) if x] if tc else []
                if lv and ix.items[i].count > 1:
                    wanted = tuple(x for x in ix.levels if x in lv)
                    # link at the item's lowest wanted level via its own chain
                    chain = (
                        tuple(
                            x
                            for x in ix.levels
                            if ix.levels.index(x) <= max(ix.levels.index(y) for y in wanted)
                        )
                        if wanted
                        else ()
                    )
                    self._uses_for(("i", i), [i], chain)

    def _required_level(self) -> None:
        """All pods of a gang (or of a role with its own required level) in one domain."""
        ix = self.ix
        for g in ix.groups:
            level = g.gang.topology.required if g.gang.topology else None
            if g.multi and level is not None and level in ix.levels:
                doms = [
                    var
                    for (o, gid, lv, _d), var in self.v.uses.items()
                    if o == "g" and gid == g.id and lv == level
                ]
                self.m.add(sum(doms) <= 1)
                self.count += 1
            for i in g.items:
                tc = ix.items[i].role.topology
                if tc is not None and tc.required is not None and tc.required in ix.levels:
                    doms = [
                        var
                        for (o, iid, lv, _d), var in self.v.uses.items()
                        if o == "i" and iid == i and lv == tc.required
                    ]
                    if doms:
                        self.m.add(sum(doms) <= 1)
                        self.count += 1

    # ------------------------------------------------------------------ queues

    def _queue_max(self) -> None:
        """A queue's running usage plus what the cycle admits stays within its max."""
        s = self.ix.snapshot
        running: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for pod in () if self.ix.empty else s.running:
            if pod.queue is not None:
                for r, val in pod.requests.items():
                    running[pod.queue][r] += val
        by_queue: dict[str, list[int]] = defaultdict(list)
        for item in self.ix.items:
            by_queue[item.gang.queue].append(item.id)
        for q in s.queues:
            if not q.max or q.name not in by_queue:
                continue
            ids = by_queue[q.name]
            for r, cap in sorted(q.max.items()):
                left = cap - running[q.name].get(r, 0)
                coeffs = [(self.ix.shapes[self.ix.items[i].shape].req(r), i) for i in ids]
                coeffs = [(c, i) for c, i in coeffs if c > 0]
                if left < 0:
                    # already over its max: nothing more may be admitted for this queue
                    for i in ids:
                        self.m.add(self.v.placed(i) == 0)
                    continue
                if not coeffs:
                    continue
                unit = _gcd([c for c, _ in coeffs])
                self.m.add(sum((c // unit) * self.v.placed(i) for c, i in coeffs) <= left // unit)
                self.count += 1


def _dname(dom: object) -> str:
    name = getattr(dom, "name", None)
    if isinstance(name, str):
        return name
    if isinstance(dom, tuple):
        return str(dom[-1])
    return str(dom)
