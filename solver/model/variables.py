"""The model's decision variables, named, in one container with query methods.

============================  =================================================================
variable                      meaning
============================  =================================================================
``x[i,b]``  int               pods of item *i* in block *b* (node or leaf)
``admit[g]`` bool             multi-pod gang *g* admitted (its items between their minimum and
                              full size, or all 0)
``z[s,n]`` int / expression   pods of shape *s* on node *n* (a sum of ``x`` in exact mode)
``joint[s,n,w]`` int          GPUs (= NICs) shape *s* takes in joint group *w* of node *n*
``share[s,d]`` int            pods of GPU-share shape *s* on GPU device *d*
``whole[d]`` bool             fully free GPU *d* given to whole-GPU pods (nodes with shares)
``uses[g,L,D]`` bool          gang (or role item) *g* has pods in domain *D* of level *L*
``gpu_used[n]``, ``gpu_full[n]``  bools for the fragmentation entries
============================  =================================================================
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from gangplan.solver.model.indexing import Index

__all__ = ["Variables"]

LinExpr = cp_model.LinearExprT


@dataclass
class Variables:
    model: cp_model.CpModel
    ix: Index
    x: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    admit: dict[int, cp_model.IntVar] = field(default_factory=dict)
    z: dict[tuple[int, int], LinExpr] = field(default_factory=dict)
    z_vars: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    joint: dict[tuple[int, int, str], cp_model.IntVar] = field(default_factory=dict)
    joint_nic: dict[tuple[int, int, str], cp_model.IntVar] = field(default_factory=dict)
    share: dict[tuple[int, int, str], cp_model.IntVar] = field(default_factory=dict)
    whole: dict[tuple[int, str], cp_model.IntVar] = field(default_factory=dict)
    uses: dict[tuple[str, int, str, object], cp_model.IntVar] = field(default_factory=dict)
    gpu_used: dict[int, cp_model.IntVar] = field(default_factory=dict)
    gpu_full: dict[int, cp_model.IntVar] = field(default_factory=dict)
    n: dict[int, cp_model.IntVar] = field(default_factory=dict)
    """pods of item i placed anywhere (one variable, so sums over blocks are written once)"""
    by_item: dict[int, list[tuple[int, cp_model.IntVar]]] = field(default_factory=dict)
    by_node: dict[int, list[tuple[int, LinExpr]]] = field(default_factory=dict)

    # ------------------------------------------------------------------ creation

    @classmethod
    def create(cls, model: cp_model.CpModel, ix: Index) -> Variables:
        v = cls(model, ix)
        for item in ix.items:
            per_block: dict[int, int] = {}
            for n in item.candidates:
                b = ix.block_of_node[n]
                per_block[b] = per_block.get(b, 0) + item.cap[n]
            for b, cap in sorted(per_block.items()):
                ub = min(item.count, cap)
                v.x[(item.id, b)] = model.new_int_var(0, ub, f"x[{item.name},{ix.blocks[b].name}]")
        for g in ix.groups:
            if g.multi:
                v.admit[g.id] = model.new_bool_var(f"admit[{g.gang.key}]")
        # z: pods of a shape on a node
        by_shape_node: dict[tuple[int, int], list[int]] = {}
        for item in ix.items:
            for n in item.candidates:
                by_shape_node.setdefault((item.shape, n), []).append(item.id)
        for (s, n), item_ids in sorted(by_shape_node.items()):
            ub = sum(min(ix.items[i].count, ix.items[i].cap[n]) for i in item_ids)
            if ix.exact and len(item_ids) == 1:
                v.z[(s, n)] = v.x[(item_ids[0], n)]
            elif ix.exact:
                # one variable per (shape, node), so capacity rows stay short
                var = model.new_int_var(0, ub, f"z[{s},{ix.node_names[n]}]")
                model.add(var == sum(v.x[(i, n)] for i in item_ids))
                v.z[(s, n)] = var
            else:
                var = model.new_int_var(0, ub, f"z[{s},{ix.node_names[n]}]")
                v.z_vars[(s, n)] = var
                v.z[(s, n)] = var
        for (i, b), var in v.x.items():
            v.by_item.setdefault(i, []).append((b, var))
        for item in ix.items:
            blocks = v.by_item.get(item.id, [])
            if len(blocks) == 1:
                v.n[item.id] = blocks[0][1]
            else:
                count = model.new_int_var(0, item.count, f"n[{item.name}]")
                model.add(count == sum(var for _b, var in blocks))
                v.n[item.id] = count
        for (s, n), e in v.z.items():
            v.by_node.setdefault(n, []).append((s, e))
        return v

    # ------------------------------------------------------------------ queries

    def placed(self, item: int) -> LinExpr:
        """Pods of item ``item`` placed anywhere."""
        return self.n[item]

    def item_blocks(self, item: int) -> list[tuple[int, cp_model.IntVar]]:
        return self.by_item.get(item, [])

    def shapes_on(self, node: int) -> list[tuple[int, LinExpr]]:
        return self.by_node.get(node, [])

    def all_vars(self) -> Iterable[cp_model.IntVar]:
        yield from self.x.values()
        yield from self.n.values()
        yield from self.admit.values()
        yield from self.z_vars.values()
        yield from self.joint.values()
        yield from self.joint_nic.values()
        yield from self.share.values()
        yield from self.whole.values()
        yield from self.uses.values()
        yield from self.gpu_used.values()
        yield from self.gpu_full.values()
