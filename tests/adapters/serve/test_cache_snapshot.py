"""The informer cache and the live snapshot.

The live snapshot is checked against the dump reader (``read_kube``) on the same objects:
two paths through the same builders, one whole-dump and one object by object — they must
agree on nodes, running pods and gangs. Incrementality is checked by counting conversions."""

from __future__ import annotations

import pytest
from objects import gang_pods, node, pod, volcano_group, volcano_queue

from gangplan.adapters.kube.read import KubeOptions, read_kube
from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.cache import Cache
from gangplan.adapters.serve.memory import Fault, InMemoryApi
from gangplan.adapters.serve.snapshot import LiveSnapshot, Selection

PODS = KINDS["pods"]
WATCHED = [
    KINDS[k]
    for k in (
        "pods",
        "nodes",
        "priorityclasses.scheduling.k8s.io",
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
        "podgroups.scheduling.k8s.io",
        "workloads.scheduling.k8s.io",
        "hypernodes.topology.volcano.sh",
        "devices.scheduling.koordinator.sh",
    )
]


def _cluster(api: InMemoryApi) -> None:
    for i in range(3):
        api.put(node(f"n{i}", labels={"example.com/rack": f"r{i // 2}"}))
    api.put(volcano_queue("team-a", weight=2))
    api.put(volcano_group("train", 3, queue="team-a"))
    for p in gang_pods("train", 3, gpus=4):
        api.put(p)
    api.put(pod("web", gated=False, node_name="n0", gpus=2))
    api.put(pod("other", gated=False))  # pending, not gangplan's: holds nothing
    api.put(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )


def _live(api: InMemoryApi, opts: KubeOptions) -> tuple[Cache, LiveSnapshot]:
    live = LiveSnapshot(opts, Selection())
    cache = Cache(api, WATCHED, live.on_change, clock=api.clock)
    cache.pump()
    return cache, live


def test_the_live_snapshot_agrees_with_the_dump_reader(memory: InMemoryApi) -> None:
    _cluster(memory)
    opts = KubeOptions(topology_labels="rack=example.com/rack")
    _cache, live = _live(memory, opts)
    built = live.build()
    dump = [o for k in WATCHED for o in memory.objects(k) if o["metadata"]["name"] != "other"]
    import json
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": dump}, f)
        f.flush()
        ref = read_kube([f.name], opts).snapshot
    s = built.snapshot
    assert s.nodes == ref.nodes
    assert s.levels == ref.levels
    assert s.queues == ref.queues
    assert s.running == ref.running
    assert s.gangs == ref.gangs
    # and by hand: one gang of 3 pods of 4 GPUs in team-a; one running pod of 2 GPUs on n0
    (g,) = s.gangs
    assert (g.key, g.queue, g.size, g.roles[0].requests["nvidia.com/gpu"]) == (
        "ml/train",
        "team-a",
        3,
        4000,
    )
    assert [(r.name, r.node, r.requests["nvidia.com/gpu"]) for r in s.running] == [
        ("web", "n0", 2000)
    ]
    (rack,) = s.levels
    assert {n.name: s.domain_name(n, rack) for n in s.nodes} == {"n0": "r0", "n1": "r0", "n2": "r1"}
    assert set(built.pods) == {("ml", f"train-{i}") for i in range(3)}
    assert built.gang_objects == {"ml/train": ("podgroups.scheduling.volcano.sh", "ml", "train")}


def test_only_changed_objects_are_converted_again(memory: InMemoryApi) -> None:
    _cluster(memory)
    cache, live = _live(memory, KubeOptions())
    first = live.build()
    assert first.converted == 3 + 1 + 1 + 5 + 1  # nodes, queue, group, pods, class
    assert live.build().converted == 0
    memory.put(pod("web2", gated=False, node_name="n1", gpus=1))
    memory.remove(PODS, "ml", "web")
    cache.pump()
    again = live.build()
    assert again.converted == 2
    assert [(r.name, r.node) for r in again.snapshot.running] == [("web2", "n1")]


def test_an_incomplete_gang_waits_and_is_reported(memory: InMemoryApi) -> None:
    memory.put(node("n0"))
    memory.put(volcano_group("g", 4))
    for p in gang_pods("g", 3):
        memory.put(p)
    cache, live = _live(memory, KubeOptions())
    built = live.build()
    assert built.snapshot.gangs == ()
    assert built.waiting == {"ml/g": 4}
    memory.put(pod("g-3", group="g"))
    cache.pump()
    built = live.build()
    assert [g.key for g in built.snapshot.gangs] == ["ml/g"] and built.waiting == {}


def test_a_compacted_watch_relists_and_catches_up(memory: InMemoryApi) -> None:
    _cluster(memory)
    cache, live = _live(memory, KubeOptions())
    live.build()
    memory.remove(PODS, "ml", "web")
    memory.put(pod("late", gated=False, node_name="n2"))
    memory.compact()  # the watch cannot resume: 410, relist
    cache.pump()
    (pods_informer,) = cache.informers["pods"]
    assert pods_informer.stats.relists_gone == 1
    built = live.build()
    assert [(r.name, r.node) for r in built.snapshot.running] == [("late", "n2")]


def test_a_dropped_stream_resumes_where_it_was(memory: InMemoryApi) -> None:
    _cluster(memory)
    cache, _ = _live(memory, KubeOptions())
    memory.faults.add(Fault("watch", 0, kind="pods"))
    memory.put(pod("late", gated=False, node_name="n2"))
    cache.pump()  # the pods watch fails
    (inf,) = cache.informers["pods"]
    assert inf.stats.errors == 1 and ("ml", "late") not in inf.objects
    cache.pump()  # and resumes from its resourceVersion: no relist
    assert ("ml", "late") in inf.objects and inf.stats.lists == 1


def test_unserved_kinds_are_empty(memory: InMemoryApi) -> None:
    memory.faults.add(Fault("list", 404, kind="hypernodes.topology.volcano.sh"))
    _cluster(memory)
    cache, live = _live(memory, KubeOptions())
    (inf,) = cache.informers["hypernodes.topology.volcano.sh"]
    assert not inf.served and cache.synced
    assert len(live.build().snapshot.nodes) == 3


@pytest.mark.parametrize("mode", ["gate", "bind"])
def test_selection(mode: str) -> None:
    sel = Selection(mode=mode, scheduler_name="gangplan")  # type: ignore[arg-type]
    gated = pod("a", gated=True)
    named = pod("b", gated=False, scheduler="gangplan")
    named_gated = pod("c", gated=True, scheduler="gangplan")
    bound = pod("d", gated=False, scheduler="gangplan", node_name="n0")
    assert [sel.ours(p) for p in (gated, named, named_gated, bound)] == (
        [True, False, True, False] if mode == "gate" else [False, True, False, False]
    )


def test_the_assembled_snapshot_passes_the_models_own_checks(memory: InMemoryApi) -> None:
    from gangplan.models import Snapshot

    _cluster(memory)
    _cache, live = _live(memory, KubeOptions(topology_labels="rack=example.com/rack"))
    s = live.build().snapshot
    assert Snapshot.model_validate(s.model_dump()) == s


def test_two_running_pods_on_one_device_are_read_one_by_one(memory: InMemoryApi) -> None:
    """The whole-snapshot rule (a device held by one pod) falls back to the dump's careful
    path: the second holder is listed, the rest is read."""
    memory.put(node("n0"))
    ann = {"scheduling.koordinator.sh/device-allocated": '{"gpu": [{"minor": 0, "id": "gpu-0"}]}'}
    memory.put(pod("a", gated=False, node_name="n0", annotations=ann))
    memory.put(pod("b", gated=False, node_name="n0", annotations=ann))
    _cache, live = _live(memory, KubeOptions())
    built = live.build()
    assert [(r.name, r.devices) for r in built.snapshot.running] == [("a", ("gpu-0",))]
    assert [e.name for e in built.summary.skipped] == ["ml/b"]
