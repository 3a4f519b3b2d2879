"""The cycle context (solver/context.py): one state built from the snapshot, handed out as
independent copies that start from the same free amounts as a state built afresh."""

from __future__ import annotations

from gangplan.adapters.traces.generate import generate_fat_tree
from gangplan.solver.context import CycleContext
from gangplan.solver.placers.state import ClusterState


def _free(state: ClusterState) -> dict[str, tuple[object, ...]]:
    return {
        n: (sorted(st.resources.items()), sorted(st.gpu_milli.items()), sorted(st.nics))
        for n, st in state.nodes.items()
    }


def test_copies_start_from_the_snapshot_and_are_independent() -> None:
    s = generate_fat_tree(spines=1, leaves_per_spine=2, nodes_per_leaf=4, load=0.5, seed=1)
    ctx = CycleContext.of(s)
    fresh = ClusterState(s, ctx.topo)
    empty = ClusterState(s, ctx.topo, empty=True)
    a, b = ctx.state(), ctx.state()
    assert _free(a) == _free(fresh)
    assert _free(ctx.state(empty=True)) == _free(empty)
    # the generated load leaves some node partly used: the two differ
    assert _free(fresh) != _free(empty)
    # placing on one copy changes neither the other copy nor a later one
    gang = s.gangs[0]
    role = gang.roles[0]
    node = next(n for n in a.candidates(gang, role) if a.fits(gang, role, n))
    assert a.place(gang, role, node, "p") is not None
    assert _free(a) != _free(fresh)
    assert _free(b) == _free(fresh)
    assert _free(ctx.state()) == _free(fresh)
    assert a.version(node) > 0 and b.version(node) == 0


def test_the_node_index_follows_the_snapshot_order() -> None:
    s = generate_fat_tree(spines=1, leaves_per_spine=1, nodes_per_leaf=3, load=0.0, seed=0)
    ctx = CycleContext.of(s)
    assert ctx.node_names == tuple(n.name for n in s.nodes)
    assert [ctx.node_index[n.name] for n in s.nodes] == [0, 1, 2]


def test_the_cycles_states_are_freed_by_reference_counting_when_it_ends() -> None:
    """With the garbage collector off, every cluster state a cycle made (the template and
    each placer's copy) is gone once solve_cycle returns: CycleContext.release breaks the
    cycle a cached ranking makes with its state, so nothing waits for the collector."""
    import gc
    import weakref

    from gangplan.solver.cycle.pipeline import solve_cycle
    from gangplan.solver.result import SolverConfig

    snapshot = generate_fat_tree(spines=2, leaves_per_spine=2, nodes_per_leaf=4, load=0.5, seed=1)
    made: list[weakref.ref[ClusterState]] = []
    original = CycleContext.state

    def tracked(self: CycleContext, *, empty: bool = False) -> ClusterState:
        state = original(self, empty=empty)
        made.append(weakref.ref(state))
        return state

    was = gc.isenabled()
    gc.disable()
    try:
        CycleContext.state = tracked  # type: ignore[method-assign]
        cfg = SolverConfig(time_limit_s=60, deterministic=True, deterministic_time=0.5)
        solve_cycle(snapshot, config=cfg)
    finally:
        CycleContext.state = original  # type: ignore[method-assign]
        alive = sum(1 for ref in made if ref() is not None)
        if was:
            gc.enable()
    assert len(made) >= 3  # the baselines' states and the reasons' (so this tests them)
    assert alive == 0


def test_a_derived_context_shares_the_cycles_meter_index_and_topology() -> None:
    """A context derived for another snapshot of the same cycle (one gang fewer) counts on
    the same meter, reads the same node index, topology and caches, and its snapshot's
    lookups follow its own fields, not the parent's cached ones."""
    s = generate_fat_tree(spines=1, leaves_per_spine=2, nodes_per_leaf=2, load=0.5, seed=1)
    assert len(s.gangs) >= 2
    ctx = CycleContext.of(s)
    assert len(s.gang_by_key) == len(s.gangs)  # cached on the parent's snapshot
    kept = s.gangs[1:]
    held: list[ClusterState] = []
    out = ctx.derive(gangs=kept, adjust=held.append)
    assert out.meter is ctx.meter and out.topo is ctx.topo and out.derived is ctx.derived
    assert out.node_index is ctx.node_index and out.workload is ctx.workload
    assert out.snapshot.gangs == kept and s.gangs[0].key not in out.snapshot.gang_by_key
    assert out.snapshot.nodes == s.nodes and out.snapshot.running == s.running
    # the template was built for the new snapshot, adjusted once, and every state copies it
    (template,) = held
    assert template.snapshot is out.snapshot and template.meter is ctx.meter
    assert _free(out.state()) == _free(template)
    before = ctx.meter.units
    out.state().meter.add(5)
    assert ctx.meter.units == before + 5


def test_deriving_an_unknown_snapshot_field_is_a_clear_error() -> None:
    import pytest

    s = generate_fat_tree(spines=1, leaves_per_spine=1, nodes_per_leaf=2, load=0.0, seed=0)
    with pytest.raises(ValueError, match="not snapshot fields: pods"):
        CycleContext.of(s).derive(pods=())
