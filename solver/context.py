"""What one scheduling cycle knows, built once and handed to every placer, the model and the
reasons: the snapshot, its topology, the queues' fair shares, the node index, FGD's target
workload, and fresh :class:`~gangplan.solver.placers.state.ClusterState` copies.

Nothing here outlives the cycle: a long-running loop builds one context per snapshot, and
every cache a placer or the model fills lives in the context or in a state it handed out.
A step that works on another snapshot of the same cycle (the snapshot with its reservations,
a reservation phase's) takes a context made by :meth:`CycleContext.derive`: the same meter,
node index, topology and caches, so the cycle is counted on one clock and released at once.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gangplan.models import Snapshot
from gangplan.solver.budget import WorkMeter
from gangplan.solver.judges.fairness import FairShares, fair_shares
from gangplan.solver.judges.fragmentation import Workload
from gangplan.solver.placers.state import ClusterState
from gangplan.topology import Topology, build_topology

if TYPE_CHECKING:
    from gangplan.solver.model.moves import MoveSpec

__all__ = ["CycleContext"]


@dataclass
class CycleContext:
    """The cycle's inputs and what is derived from them once.

    ``node_names`` are the snapshot's nodes in order and ``node_index`` maps a name to its
    position (the dense index the model uses). ``workload`` is the pod-shape distribution
    FGD measures fragmentation against (Weng et al., USENIX ATC '23): the snapshot's
    declared workload, else its pending and running pods (:meth:`Workload.of_snapshot`), unless
    the caller gives another (e.g. a trace's, in the replay).
    Build it with :meth:`of`.
    """

    snapshot: Snapshot
    topo: Topology
    shares: FairShares
    workload: Workload
    node_names: tuple[str, ...]
    node_index: dict[str, int]
    meter: WorkMeter = field(default_factory=WorkMeter, compare=False)
    """work units counted by every state of this context (the deterministic budget's clock)"""
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """what placers derive from the snapshot and topology alone, once per cycle (by name)"""
    indexed: bool = True
    """placers answer from node classes (:mod:`gangplan.solver.placers.ranking`); False: by scanning
    every node, the reference the tests compare with"""
    moves: MoveSpec | None = None
    """running gangs that may move, and the budget (``gangplan replan``,
    :mod:`gangplan.solver.model.moves`); None: running gangs move only if preempted"""
    _template: ClusterState | None = field(default=None, init=False, repr=False, compare=False)
    """the state built from the snapshot, once, on the first :meth:`state` call"""
    _handed: list[weakref.ref[ClusterState]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )
    """every state :meth:`state` made, for :meth:`release`"""

    @classmethod
    def of(
        cls,
        snapshot: Snapshot,
        *,
        workload: Workload | None = None,
        topology: Topology | None = None,
        indexed: bool = True,
    ) -> CycleContext:
        """The context of ``snapshot`` (its topology built unless given; ``workload``: FGD's
        target, default :meth:`Workload.of_snapshot`; ``indexed``: see the attribute)."""
        names = tuple(n.name for n in snapshot.nodes)
        return cls(
            snapshot=snapshot,
            topo=topology if topology is not None else build_topology(snapshot),
            shares=fair_shares(snapshot),
            workload=workload if workload is not None else Workload.of_snapshot(snapshot),
            node_names=names,
            node_index={n: i for i, n in enumerate(names)},
            indexed=indexed,
        )

    def derive(
        self, *, adjust: Callable[[ClusterState], None] | None = None, **update: Any
    ) -> CycleContext:
        """A context of the same cycle on this snapshot with the fields ``update`` names
        replaced (e.g. ``reservations=...``; :class:`~gangplan.models.Snapshot`'s field
        names). It shares this context's meter (its work counts on the cycle's clock), node
        index, topology, workload, ``derived`` caches, ``indexed``, ``moves`` and the list
        of states :meth:`release` frees; its fair shares are the new snapshot's. The new
        snapshot is built without validation (its parts are this one's, already valid) and
        without this one's cached lookups, which may follow the fields replaced.

        ``adjust``: called once on the new context's template state, built from the new
        snapshot, before any state is handed out (a reservation phase cuts the capacity it
        may not use), so every :meth:`state` copy starts from it; without it the template
        is built on the first :meth:`state` call, as in :meth:`of`.

        Raises:
            ValueError: ``update`` names a field the snapshot does not have.
        """
        fields = type(self.snapshot).model_fields
        unknown = sorted(set(update) - set(fields))
        if unknown:
            raise ValueError(f"CycleContext.derive: not snapshot fields: {', '.join(unknown)}")
        snap = type(self.snapshot).model_construct(
            _fields_set=self.snapshot.model_fields_set,
            **{name: update.get(name, getattr(self.snapshot, name)) for name in fields},
        )
        out = CycleContext(
            snapshot=snap,
            topo=self.topo,
            shares=fair_shares(snap),
            workload=self.workload,
            node_names=self.node_names,
            node_index=self.node_index,
            meter=self.meter,
            derived=self.derived,
            indexed=self.indexed,
            moves=self.moves,
        )
        out._handed = self._handed
        if adjust is not None:
            out._template = out._new_template()
            adjust(out._template)
        return out

    def _new_template(self) -> ClusterState:
        state = ClusterState(self.snapshot, self.topo, meter=self.meter, indexed=self.indexed)
        self._handed.append(weakref.ref(state))
        return state

    def state(self, *, empty: bool = False) -> ClusterState:
        """A fresh cluster state the caller may change: the free amounts running pods leave
        (``empty``: allocatable, as if no pod ran). A copy of one state built from the
        snapshot once per cycle (:meth:`ClusterState.copy`)."""
        if self._template is None:
            self._template = self._new_template()
        state = self._template.copy(empty=empty)
        self._handed.append(weakref.ref(state))
        return state

    def release(self) -> None:
        """Drop the cached rankings of every state :meth:`state` made (still alive), at the
        end of a cycle: a ranking's value function refers back to its state, a reference
        cycle that only the garbage collector frees, and it is paused during the cycle
        (:func:`~gangplan.solver.budget.gc_paused`): on a 5,120-node cycle 562,000 objects
        were left for it to walk and free, 37,000 once released. Released, the states are
        freed by reference counting when the cycle ends. Safe at any time: the caches are
        rebuilt on use."""
        for ref in self._handed:
            state = ref()
            if state is not None:
                state.release()
        self._handed.clear()
