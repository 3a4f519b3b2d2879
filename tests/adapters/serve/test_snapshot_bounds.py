"""The live snapshot has the bounds of ``convert k8s`` (issue 26, finding 7): one object past
them is left out with a note naming the field and the bound, and the cycle goes on for
everything else.

Before: a Node advertising ``nvidia.com/gpu: "1e9"`` (a device plugin gone wrong) was refused
by ``convert k8s`` but not by the live snapshot, which made 10^9 device ids for it every
cycle (a ``MemoryError``, or the process killed for its memory); a node the models refused
vanished from the live snapshot without a word.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from objects import gang_pods, node, pod, volcano_group

from gangplan.adapters.kube.bounds import SnapshotBounds
from gangplan.adapters.kube.read import KubeOptions, read_kube
from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.cache import Cache
from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.loop import ServeLoop
from gangplan.adapters.serve.memory import InMemoryApi
from gangplan.adapters.serve.snapshot import LiveSnapshot, Selection
from gangplan.models import limits
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import SolverConfig

SOLVER = SolverConfig(deterministic=True, deterministic_time=1.0)
BOUND = (
    "1,000,000,000 devices: more than gangplan accepts (at most 1,024 devices of one "
    "resource on a node, MAX_DEVICES_PER_NODE in gangplan.models.limits)"
)


def _advertising(name: str, resource: str, amount: str) -> dict[str, Any]:
    n = node(name)
    n["status"]["allocatable"][resource] = amount
    n["status"]["capacity"] = dict(n["status"]["allocatable"])
    return n


def _hostile(api: InMemoryApi) -> None:
    """The huge node and other bad objects, beside two good 8-GPU nodes and a good gang."""
    for i in range(2):
        api.put(node(f"n{i}", gpus=8))
    api.put(_advertising("huge", "nvidia.com/gpu", "1e9"))
    api.put(_advertising("hugenic", "rdma/hca", "1e9"))
    api.put(_advertising("badqty", "cpu", "lots"))  # not a quantity
    # a gang asking 10^9 GPUs (never fits), one whose minimum no cluster has, one too long
    api.put(volcano_group("greedy", 1, ns="dev"))
    api.put(pod("greedy-0", ns="dev", group="greedy", gpus=10**9))
    api.put(volcano_group("wide", 10**9, ns="dev"))
    for p in gang_pods("wide", 2, ns="dev"):
        api.put(p)
    api.put(volcano_group("x" * 300, 1, ns="dev"))
    api.put(pod("long-0", ns="dev", group="x" * 300))
    api.put(volcano_group("train", 2))
    for p in gang_pods("train", 2, gpus=8):
        api.put(p)


def _skipped(summary: Any) -> dict[str, str]:
    return {e.name: e.detail for e in summary.skipped}


def test_a_node_past_the_device_bound_is_skipped_by_the_live_snapshot(
    memory: InMemoryApi,
) -> None:
    _hostile(memory)
    live = LiveSnapshot(KubeOptions(), Selection())
    kinds = [KINDS[k] for k in ("pods", "nodes", "podgroups.scheduling.volcano.sh")]
    Cache(memory, kinds, live.on_change, clock=memory.clock).pump()
    tracemalloc.start()
    try:
        built = live.build()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 10^9 device ids are tens of gigabytes; the whole build of 5 nodes stays far below 50 MB
    assert peak < 50 * 2**20
    assert sorted(n.name for n in built.snapshot.nodes) == ["n0", "n1"]
    skipped = _skipped(built.summary)
    assert skipped["huge"] == f"status.allocatable.nvidia.com/gpu: {BOUND}"
    assert skipped["hugenic"] == f"status.allocatable.rdma/hca: {BOUND}"
    assert skipped["badqty"].startswith("status.allocatable.cpu: ")
    # the gangs: train and greedy are planned (greedy never fits), wide waits for its pods,
    # the long name is refused by the models
    assert sorted(g.key for g in built.snapshot.gangs) == ["dev/greedy", "ml/train"]
    assert "dev/wide" in built.waiting
    assert any(k.startswith("dev/xxx") for k in skipped)
    # the notes stay with the objects from build to build (conversion is cached)
    again = live.build()
    assert _skipped(again.summary) == skipped


def test_convert_and_the_live_snapshot_refuse_the_same_nodes(
    memory: InMemoryApi, tmp_path: Path
) -> None:
    for obj in (
        node("n0"),
        _advertising("huge", "nvidia.com/gpu", "1e9"),
        _advertising("edge", "nvidia.com/gpu", "1024"),  # at the bound: accepted
        _advertising("past", "nvidia.com/gpu", "1025"),
    ):
        memory.put(obj)
    live = LiveSnapshot(KubeOptions(), Selection())
    Cache(memory, [KINDS["nodes"]], live.on_change, clock=memory.clock).pump()
    built = live.build()
    dump = tmp_path / "nodes.json"
    items = memory.objects(KINDS["nodes"])
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    read = read_kube([dump], KubeOptions())
    assert sorted(n.name for n in built.snapshot.nodes) == ["edge", "n0"]
    assert built.snapshot.nodes == read.snapshot.nodes
    live_skips = {(e.name, e.reason, e.detail) for e in built.summary.skipped}
    dump_skips = {(e.name, e.reason, e.detail) for e in read.summary.skipped}
    assert live_skips == dump_skips
    assert ("past", "invalid object") in {(n, r) for n, r, _ in live_skips}


def test_the_cycle_goes_on_beside_the_bad_objects(memory: InMemoryApi, clock: FakeClock) -> None:
    _hostile(memory)
    loop = ServeLoop(memory, ServeConfig(), clock=clock, solver=SOLVER, emit=lambda _: None)
    report = loop.cycle()
    assert report.admitted == ["ml/train"]  # 2 pods of 8 GPUs: n0 and n1
    assert report.applied == 2 and report.failures == 0
    assert loop.last_built is not None
    snap = loop.last_built.snapshot
    assert loop.previous is not None and verify(snap, loop.previous) == []
    second = loop.cycle()  # and the next cycle: only greedy is left pending, never fitting
    assert second.gangs == 1 and second.admitted == [] and second.failures == 0


def test_an_object_that_fails_to_convert_is_left_out_with_the_error(
    memory: InMemoryApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an error no reader rule anticipated, raised while one node is read
    from gangplan.adapters.serve import snapshot as live_module

    real = live_module.read_nodes

    def read_nodes(reg: Any, summary: Any, **kw: Any) -> Any:
        if any(o.name == "cursed" for o in reg.of("", "Node")):
            raise RecursionError("maximum recursion depth exceeded")
        return real(reg, summary, **kw)

    monkeypatch.setattr(live_module, "read_nodes", read_nodes)
    for name in ("n0", "cursed", "n1"):
        memory.put(node(name))
    live = LiveSnapshot(KubeOptions(), Selection())
    Cache(memory, [KINDS["nodes"]], live.on_change, clock=memory.clock).pump()
    built = live.build()
    assert [n.name for n in built.snapshot.nodes] == ["n0", "n1"]
    assert _skipped(built.summary) == {
        "cursed": "could not be read (RecursionError: maximum recursion depth exceeded); left out"
    }


def test_the_snapshot_wide_bounds_skip_what_comes_past_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # bounds of 2 nodes and 3 pods instead of 100,000 and 1,000,000 (the same code path)
    monkeypatch.setitem(limits._WHAT, "MAX_NODES", ("nodes", "nodes in a snapshot", 2))
    monkeypatch.setitem(limits._WHAT, "MAX_PODS", ("pods", "pods in a snapshot", 3))
    b = SnapshotBounds()
    assert b.take_node(8) is None and b.take_node(8) is None
    assert b.take_node(8) == (
        "3 nodes: more than gangplan accepts (at most 2 nodes in a snapshot, MAX_NODES in "
        "gangplan.models.limits)"
    )
    assert b.take_pods(2) is None
    assert b.take_pods(2) == (
        "2 more pods would make 4 pods: more than gangplan accepts (at most 3 pods in a "
        "snapshot, MAX_PODS in gangplan.models.limits)"
    )
    assert b.take_pods(1) is None  # what still fits is taken
    api = InMemoryApi(FakeClock())
    for name in ("a", "b", "c"):
        api.put(node(name))
    api.put(volcano_group("one", 1))
    api.put(pod("one-0", group="one"))
    api.put(volcano_group("three", 3))
    for p in gang_pods("three", 3):
        api.put(p)
    live = LiveSnapshot(KubeOptions(), Selection())
    kinds = [KINDS[k] for k in ("pods", "nodes", "podgroups.scheduling.volcano.sh")]
    Cache(api, kinds, live.on_change, clock=api.clock).pump()
    built = live.build()
    assert [n.name for n in built.snapshot.nodes] == ["a", "b"]
    assert [g.key for g in built.snapshot.gangs] == ["ml/one"]  # 1 + 3 pods pass 3
    skipped = _skipped(built.summary)
    assert set(skipped) == {"c", "ml/three"}
    # convert reads the same objects into the same snapshot
    dump = tmp_path / "dump.json"
    items = [o for k in kinds for o in api.objects(k)]
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    read = read_kube([dump], KubeOptions())
    assert [n.name for n in read.snapshot.nodes] == ["a", "b"]
    assert [g.key for g in read.snapshot.gangs] == ["ml/one"]
