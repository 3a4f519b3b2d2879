"""Scale benchmark of the live cache and snapshot: ``python -m gangplan.adapters.serve.bench``.

A synthetic cluster — ``--nodes`` nodes of 8 GPUs in racks of 32, ``--pods`` running pods
spread over them (one GPU each where the node has room), and 64 pending gangs of 8 gated
pods — is fed to the cache as watch events, and timed (wall clock, this machine):

* **absorb**: watch events per second the cache takes in (``MODIFIED`` pod events, each
  one stored and marked dirty);
* **first build**: the first snapshot (every object converted once);
* **steady build**: a snapshot with nothing changed since the last (what a cycle costs
  when the cluster is quiet);
* **build after N changes**: a snapshot after ``--changes`` pod updates.

It asserts nothing; it prints one line per figure (and ``--json``).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from gangplan.adapters.kube.options import KubeOptions
from gangplan.adapters.serve.api import KINDS, WatchEvent
from gangplan.adapters.serve.cache import Cache
from gangplan.adapters.serve.snapshot import GATE, LiveSnapshot, Selection

__all__ = ["main", "run"]


class _NoApi:
    """The benchmark feeds events by hand; any call to the API is a bug."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the benchmark must not call the API ({name})")


def _node(i: int) -> dict[str, Any]:
    alloc = {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"n{i}",
            "resourceVersion": str(i + 1),
            "labels": {"kubernetes.io/hostname": f"n{i}", "example.com/rack": f"r{i // 32}"},
        },
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _pod(name: str, rv: int, *, node: str | None, group: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "x",
                "resources": {
                    "requests": {"cpu": "2", "memory": "8Gi"},
                    "limits": {"nvidia.com/gpu": "1"},
                },
            }
        ]
    }
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulingGates"] = [{"name": GATE}]
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "resourceVersion": str(rv)}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def run(nodes: int = 5000, pods: int = 50_000, changes: int = 1000) -> dict[str, float]:
    """The figures of the module docstring, in seconds or events per second."""
    live = LiveSnapshot(KubeOptions(topology_labels="rack=example.com/rack"), Selection())
    kinds = [KINDS["pods"], KINDS["nodes"], KINDS["podgroups.scheduling.volcano.sh"]]
    cache = Cache(_NoApi(), kinds, live.on_change)
    (pod_inf,) = cache.informers["pods"]
    (node_inf,) = cache.informers["nodes"]
    (pg_inf,) = cache.informers["podgroups.scheduling.volcano.sh"]
    rv = 10 * (nodes + pods)
    for i in range(nodes):
        node_inf.absorb(WatchEvent("ADDED", _node(i)))
    per_node = max(1, min(8, -(-pods // max(1, nodes))))
    running = [_pod(f"r{i}", i + 1, node=f"n{(i // per_node) % nodes}") for i in range(pods)]
    for p in running:
        pod_inf.absorb(WatchEvent("ADDED", p))
    for g in range(64):
        pg_inf.absorb(
            WatchEvent(
                "ADDED",
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": f"g{g}", "namespace": "ml", "resourceVersion": "1"},
                    "spec": {"minMember": 8},
                },
            )
        )
        for k in range(8):
            rv += 1
            pod_inf.absorb(WatchEvent("ADDED", _pod(f"g{g}-{k}", rv, node=None, group=f"g{g}")))
    t = time.perf_counter()
    first = live.build()
    first_s = time.perf_counter() - t
    t = time.perf_counter()
    steady = live.build()
    steady_s = time.perf_counter() - t
    events = [
        WatchEvent("MODIFIED", {**p, "metadata": {**p["metadata"], "resourceVersion": str(rv + j)}})
        for j, p in enumerate(running[: max(changes, 20_000)])
    ]
    t = time.perf_counter()
    for ev in events:
        pod_inf.absorb(ev)
    absorb_s = time.perf_counter() - t
    live.build()  # converts the 20,000 changed pods
    for j, p in enumerate(running[:changes]):
        meta = {**p["metadata"], "resourceVersion": str(rv + 50_000 + j)}
        pod_inf.absorb(WatchEvent("MODIFIED", {**p, "metadata": meta}))
    t = time.perf_counter()
    after = live.build()
    after_s = time.perf_counter() - t
    assert len(first.snapshot.nodes) == nodes and len(steady.snapshot.running) == pods
    assert len(after.snapshot.gangs) == 64
    return {
        "nodes": nodes,
        "pods": pods,
        "absorb_events_per_s": len(events) / absorb_s,
        "first_build_s": first_s,
        "steady_build_s": steady_s,
        "changes": changes,
        "build_after_changes_s": after_s,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50_000)
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = run(args.nodes, args.pods, args.changes)
    if args.json:
        print(json.dumps(out))
        return
    print(f"cluster: {out['nodes']} nodes, {out['pods']} running pods, 64 gangs of 8 pending")
    print(f"absorb: {out['absorb_events_per_s']:,.0f} watch events/s")
    print(f"first build (every object converted): {out['first_build_s']:.2f} s")
    print(f"steady build (nothing changed): {out['steady_build_s']:.3f} s")
    print(f"build after {out['changes']} pod changes: {out['build_after_changes_s']:.3f} s")


if __name__ == "__main__":  # pragma: no cover
    main()
