"""CP-SAT against exhaustive search on instances small enough to enumerate.

The enumerator below shares no code with any placer: it lists every count of pods per role
and node, names the pods so that as many as possible stay on their node of the previous
plan, gives devices by brute force, keeps the plans the independent verifier accepts, and
takes the best by the independent score. On such instances (at most 4 nodes, 3 gangs, 6
pods in all, roles with their own levels, and half of the time a random previous plan),
CP-SAT in deterministic mode must reach exactly that best score, and never fall below a
baseline; every placer's plan must pass the verifier.

With preemption on (the second test), the enumerator also lists every set of running pods
to evict, each naming a gang it may be evicted for; the verifier decides which sets are
victims at all (whole, lower priority, needed, outside grace, preemptible).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangplan.models import (
    GPU_MILLI,
    Eviction,
    Gang,
    NodeFree,
    Plan,
    PodPlacement,
    Role,
    RunningPod,
    Snapshot,
    load_instance,
)
from gangplan.solver.cycle.pipeline import run_baseline, solve_cycle
from gangplan.solver.judges.score import Score, score
from gangplan.solver.judges.verify import verify
from gangplan.solver.placers.baselines import BASELINES
from gangplan.solver.result import SolverConfig, assemble_plan

DETERMINISTIC = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=30.0, seed=1)


# --------------------------------------------------------------------------- instances


@st.composite
def tiny_instances(draw: st.DrawFn) -> dict[str, Any]:
    two_levels = draw(st.booleans())
    levels = [{"name": "spine"}, {"name": "leaf"}] if two_levels else [{"name": "leaf"}]
    layout = {
        "numa_nodes": [
            {
                "name": "numa0",
                "pcie_switches": [
                    {"name": "p0", "gpus": ["g0", "g1"], "nics": ["r0"]},
                    {"name": "p1", "gpus": ["g2", "g3"], "nics": ["r1"]},
                ],
            }
        ]
    }
    n_nodes = draw(st.integers(1, 4))
    nodes = []
    for i in range(n_nodes):
        gpus = draw(st.sampled_from([0, 1, 2, 4]))
        node: dict[str, Any] = {
            "name": f"n{i}",
            "allocatable": {"cpu": draw(st.sampled_from([2, 4])), "memory": "16Gi"},
            "domains": {"leaf": f"l{i % 2}"} | ({"spine": f"s{i // 3}"} if two_levels else {}),
        }
        if gpus:
            node["allocatable"]["nvidia.com/gpu"] = gpus
        if gpus == 4 and draw(st.booleans()):
            node["device_layout"] = "quad"
            node["allocatable"]["rdma/hca"] = 2
        nodes.append(node)
    queues = [
        {"name": f"q{j}", "weight": draw(st.sampled_from([0, 1, 2]))}
        for j in range(draw(st.integers(1, 2)))
    ]
    if draw(st.booleans()):
        queues[0]["max"] = {"nvidia.com/gpu": draw(st.integers(1, 4))}
    gangs = []
    pods_left = 6
    for k in range(draw(st.integers(1, 3))):
        if pods_left <= 0:
            break
        roles = []
        for r in range(draw(st.integers(1, 2))):
            if pods_left <= 0:
                break
            count = draw(st.integers(1, min(3, pods_left)))
            pods_left -= count
            gpu = draw(st.sampled_from([0, 1, 2, "500m"]))
            req: dict[str, Any] = {"cpu": draw(st.sampled_from([1, 2]))}
            if gpu:
                req["nvidia.com/gpu"] = gpu
            if gpu in (1, 2) and draw(st.integers(0, 3)) == 0:
                req["rdma/hca"] = gpu
            role: dict[str, Any] = {"name": f"r{r}", "count": count, "requests": req}
            if draw(st.integers(0, 3)) == 0:  # a role's own required or preferred level
                kind = draw(st.sampled_from(["required", "preferred"]))
                role["topology"] = {
                    kind: draw(
                        st.sampled_from(["leaf", "node"] + (["spine"] if two_levels else []))
                    )
                }
            roles.append(role)
        size = sum(r["count"] for r in roles)
        gang: dict[str, Any] = {
            "name": f"g{k}",
            "queue": draw(st.sampled_from([q["name"] for q in queues])),
            "priority": draw(st.sampled_from([0, 0, 1])),
            "creation_time": k,
            "roles": roles,
        }
        if size > 1 and draw(st.booleans()):
            gang["min_member"] = draw(st.integers(1, size))
        topo = draw(st.sampled_from([None, "required", "preferred"]))
        if topo is not None:
            gang["topology"] = {
                topo: draw(st.sampled_from(["leaf", "node"] + (["spine"] if two_levels else [])))
            }
        if any("rdma/hca" in r["requests"] for r in roles):
            gang["joint"] = "pcie"
        gangs.append(gang)
    running = []
    gpu_nodes = [n for n in nodes if n["allocatable"].get("nvidia.com/gpu")]
    if gpu_nodes and draw(st.booleans()):
        n = draw(st.sampled_from(gpu_nodes))
        running.append(
            {
                "name": "run-0",
                "node": n["name"],
                "queue": draw(st.sampled_from([None, queues[-1]["name"]])),
                "requests": {"nvidia.com/gpu": draw(st.sampled_from([1, "500m"])), "cpu": 1},
            }
        )
    data = {
        "levels": levels,
        "device_layouts": {"quad": layout},
        "nodes": nodes,
        "queues": queues,
        "gangs": gangs,
        "running": running,
    }
    # a previous plan: each pending pod on a random node, or absent (not necessarily a
    # valid plan: only the nodes of its pods matter, to the stability entry)
    previous: list[dict[str, Any]] | None = None
    if draw(st.booleans()):
        previous = []
        names = [None, *(n["name"] for n in nodes)]
        for g in gangs:
            for r in g["roles"]:
                for k in range(r["count"]):
                    node = draw(st.sampled_from(names))
                    if node is not None:
                        previous.append(
                            {"gang": g["name"], "role": r["name"], "k": k, "node": node}
                        )
    return {"instance": data, "previous": previous}


def _previous_plan(s: Snapshot, spec: list[dict[str, Any]] | None) -> Plan | None:
    if spec is None:
        return None
    pods = [
        PodPlacement(
            pod=s.gang_by_key[f"default/{p['gang']}"].role(p["role"]).pod_name(p["gang"], p["k"]),
            gang=p["gang"],
            role=p["role"],
            node=p["node"],
        )
        for p in spec
    ]
    return assemble_plan(s, pods, {})


# --------------------------------------------------------------------------- enumerator


def _count_vectors(count: int, nodes: int) -> Iterator[tuple[int, ...]]:
    for total in range(count + 1):
        for combo in itertools.combinations_with_replacement(range(nodes), total):
            vec = [0] * nodes
            for n in combo:
                vec[n] += 1
            yield tuple(vec)


def _gang_options(gang: Gang, nodes: int) -> list[tuple[tuple[int, ...], ...]]:
    """Every per-role count vector of the gang that respects its minimums (or is empty)."""
    out = []
    per_role = [list(set(_count_vectors(r.count, nodes))) for r in gang.roles]
    for combo in itertools.product(*per_role):
        placed = [sum(v) for v in combo]
        total = sum(placed)
        if total == 0:
            out.append(combo)
            continue
        if total < gang.min_size:
            continue
        if any(p < gang.role_min(r) for p, r in zip(placed, gang.roles, strict=True)):
            continue
        out.append(combo)
    return out


def _device_search(
    s: Snapshot, node_name: str, pods: list[tuple[Gang, Role]], free: NodeFree | None = None
) -> list[tuple[tuple[str, ...], int | None, tuple[str, ...]]] | None:
    """Brute-force device choices for the pods on one node (None if impossible), in what
    running pods leave (``free``; default the snapshot's)."""
    node = s.node_by_name[node_name]
    layout = s.layout_of(node)
    free = free or s.free(node_name)
    switch_of = {}
    for _numa, sw in layout.switches():
        for d in (*sw.gpus, *sw.nics):
            switch_of[d] = sw.name
    milli = dict(free.gpu_milli)
    nics_free = set(free.nics)

    def rec(k: int) -> list[tuple[tuple[str, ...], int | None, tuple[str, ...]]] | None:
        if k == len(pods):
            return []
        gang, role = pods[k]
        gpu = role.requests.get(s.gpu, 0)
        nic = role.requests.get(s.nic, 0) // GPU_MILLI
        if 0 < gpu < GPU_MILLI:
            gpu_opts: list[tuple[tuple[str, ...], int | None]] = [
                ((d,), gpu) for d in layout.gpu_ids if milli[d] >= gpu
            ]
        else:
            whole = [d for d in layout.gpu_ids if milli[d] == GPU_MILLI]
            gpu_opts = [(c, None) for c in itertools.combinations(whole, gpu // GPU_MILLI)]
        for gpus, share in gpu_opts:
            for nics in itertools.combinations(sorted(nics_free), nic):
                if gang.joint == "pcie" and nics:
                    gs = [switch_of[d] for d in gpus]
                    ns = [switch_of[x] for x in nics]
                    if any(x not in gs for x in ns):
                        continue
                    if len(nics) == len(gpus) and sorted(gs) != sorted(ns):
                        continue
                for d in gpus:
                    milli[d] -= share if share is not None else GPU_MILLI
                nics_free.difference_update(nics)
                rest = rec(k + 1)
                for d in gpus:
                    milli[d] += share if share is not None else GPU_MILLI
                nics_free.update(nics)
                if rest is not None:
                    return [(gpus, share, nics), *rest]
        return None

    return rec(0)


def _name_pods(
    gang: Gang, role: Role, vec: tuple[int, ...], nodes: list[str], was: dict[str, str]
) -> list[tuple[str, int]]:
    """Names for ``vec[n]`` pods of ``role`` on each node ``n``: first the pods the previous
    plan had on that node (up to ``vec[n]``), then the others in index order. This keeps
    ``min(vec[n], pods previously on n)`` pods on every node at once, the most any naming
    can keep (a pod stays on at most one node)."""
    names = [role.pod_name(gang.name, k) for k in range(role.count)]
    out: list[tuple[str, int]] = []
    free = list(names)
    for ni, c in enumerate(vec):
        stay = [p for p in free if was.get(p) == nodes[ni]][:c]
        for p in stay:
            free.remove(p)
            out.append((p, ni))
    for ni, c in enumerate(vec):
        for _ in range(c - sum(1 for _p, n in out if n == ni)):
            out.append((free.pop(0), ni))
    return out


def _eviction_sets(s: Snapshot) -> Iterator[frozenset[tuple[str, str]]]:
    """Every set of running pods to evict (only the empty set without preemption)."""
    pods = [(p.namespace, p.name) for p in s.running] if s.preemption.enabled else []
    for k in range(len(pods) + 1):
        for combo in itertools.combinations(pods, k):
            yield frozenset(combo)


def _evictions(
    s: Snapshot, gone: frozenset[tuple[str, str]], placements: list[PodPlacement]
) -> list[Eviction] | None:
    """The evictions of ``gone``, each for a gang of ``placements`` that may evict it and
    has a pod on one of its nodes (None if some pod has no such gang: no valid plan)."""
    rules = s.preemption_rules
    on: dict[str, set[str]] = {}
    for p in placements:
        on.setdefault(p.gang_key, set()).add(p.node)
    out = []
    for pod in s.running:
        if (pod.namespace, pod.name) not in gone:
            continue
        rg = rules.gang_of(pod)
        held = {p.node for p in rg.pods}
        chosen = None
        for key, nodes in sorted(on.items()):
            gang = s.gang_by_key[key]
            if nodes & held and rules.kind(gang, rg) is not None:
                chosen = gang
                break
        if chosen is None:
            return None
        kind = rules.kind(chosen, rg)
        assert kind is not None
        out.append(
            Eviction(pod=pod.name, gang=pod.gang, node=pod.node, for_gang=chosen.key, kind=kind)
        )
    return out


def exhaustive_best(s: Snapshot, previous: Plan | None = None) -> Score:
    best: Score | None = None
    for gone in _eviction_sets(s):
        found = _best_with(s, previous, gone)
        if found is not None and (best is None or best < found):
            best = found
    assert best is not None  # the empty plan is always valid
    return best


def _best_with(
    s: Snapshot, previous: Plan | None, gone: frozenset[tuple[str, str]]
) -> Score | None:
    """The best score of the plans that evict exactly ``gone`` (None: none is valid)."""
    nodes = [n.name for n in s.nodes]
    options = [_gang_options(g, len(nodes)) for g in s.gangs]
    was = {p.pod: p.node for p in previous.pods} if previous is not None else {}
    free_of: dict[str, NodeFree] = {}
    for n in nodes:
        free_of[n] = s.free_after(n, {k for k in gone if _pod(s, k).node == n})
    best: Score | None = None
    for combo in itertools.product(*options):
        per_node: dict[str, list[tuple[Gang, Role, str]]] = {n: [] for n in nodes}
        for gang, roles in zip(s.gangs, combo, strict=True):
            for role, vec in zip(gang.roles, roles, strict=True):
                for pod, ni in _name_pods(gang, role, vec, nodes, was):
                    per_node[nodes[ni]].append((gang, role, pod))
        # quick capacity filter before the device search
        ok = True
        for n, pods in per_node.items():
            free = free_of[n].resources
            for res in {r for _g, role, _p in pods for r in role.requests}:
                if sum(role.requests.get(res, 0) for _g, role, _p in pods) > free.get(res, 0):
                    ok = False
        if not ok:
            continue
        placements: list[PodPlacement] = []
        for n, pods in per_node.items():
            if not pods:
                continue
            devices = _device_search(s, n, [(g, r) for g, r, _p in pods], free_of[n])
            if devices is None:
                ok = False
                break
            for (g, r, p), (gpus, share, nics) in zip(pods, devices, strict=True):
                placements.append(
                    PodPlacement(
                        pod=p,
                        gang=g.name,
                        role=r.name,
                        node=n,
                        gpus=gpus,
                        gpu_milli=share,
                        nics=nics,
                    )
                )
        if not ok:
            continue
        evictions = _evictions(s, gone, placements) if gone else []
        if evictions is None:
            continue
        plan = assemble_plan(s, placements, {}, evictions=evictions)
        if verify(s, plan):
            continue  # e.g. a required level, a queue max, a victim: the verifier decides
        sc = score(s, plan, previous)
        if best is None or best < sc:
            best = sc
    return best


def _pod(s: Snapshot, key: tuple[str, str]) -> RunningPod:
    return next(p for p in s.running if (p.namespace, p.name) == key)


# --------------------------------------------------------------------------- tests


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(tiny_instances())
def test_cpsat_equals_exhaustive_best_and_beats_baselines(data: dict[str, Any]) -> None:
    s, _ = load_instance(data["instance"])
    previous = _previous_plan(s, data["previous"])
    result = solve_cycle(s, previous, config=DETERMINISTIC)
    assert verify(s, result.plan) == []
    best = exhaustive_best(s, previous)
    assert result.score == best, (
        f"cpsat {result.score}\nbest  {best}\nstatus {result.status} {result.notes}"
    )
    # a tier's bound is what CP-SAT proved no plan can pass (the tiers above at their best):
    # never below the best plan's value
    assert result.plan.summary is not None
    for tier in result.plan.summary.tiers:
        if tier.bound is not None:
            assert tier.bound >= best[tier.name], (tier, best)
    for name in BASELINES:
        base = run_baseline(s, name, previous)
        assert verify(s, base.plan) == [], name
        assert not result.score < base.score, name


def test_enumerator_finds_known_optimum_case_04() -> None:
    """Sanity of the enumerator itself on case 04 (worked by hand): b on x1 (2 GPUs), a on
    x2 and x3: all 4 GPUs and 3 pods placed."""
    data = {
        "levels": [{"name": "leaf"}],
        "nodes": [
            {
                "name": "x1",
                "domains": {"leaf": "l1"},
                "allocatable": {"nvidia.com/gpu": 2, "cpu": 32},
            },
            {
                "name": "x2",
                "domains": {"leaf": "l1"},
                "allocatable": {"nvidia.com/gpu": 1, "cpu": 32},
            },
            {
                "name": "x3",
                "domains": {"leaf": "l1"},
                "allocatable": {"nvidia.com/gpu": 1, "cpu": 32},
            },
        ],
        "queues": [{"name": "q"}],
        "gangs": [
            {
                "name": "a",
                "queue": "q",
                "roles": [{"name": "w", "count": 2, "requests": {"nvidia.com/gpu": 1}}],
            },
            {
                "name": "b",
                "queue": "q",
                "roles": [{"name": "m", "count": 1, "requests": {"nvidia.com/gpu": 2}}],
            },
        ],
    }
    s, _ = load_instance(data)
    best = exhaustive_best(s)
    assert best["p0.gpu_milli"] == 4000
    assert best["p0.pods"] == 3
    assert best["fragmentation.gpu_nodes"] == 0
    # a uses two nodes of the one leaf: node spread 1, leaf spread 0
    assert best["locality.leaf"] == 0
    assert best["locality.node"] == -1


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])  # 4-5 s each
def test_deterministic_mode_repeats(seed: int) -> None:
    from gangplan.adapters.files import load_snapshot

    s, _ = load_snapshot(None)
    cfg = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=0.5, seed=seed)
    a = solve_cycle(s, config=cfg)
    b = solve_cycle(s, config=cfg)
    assert a.score == b.score
    assert [p.node for p in a.plan.pods] == [p.node for p in b.plan.pods]


def _plan_pods(plan: Plan) -> list[str]:
    return sorted(p.pod for p in plan.pods)


# --------------------------------------------------------------------------- preemption


@st.composite
def tiny_preemption_instances(draw: st.DrawFn) -> dict[str, Any]:
    """Preemption on: 1 to 3 nodes, running gangs that may be evicted (whole or elastic,
    some inside their grace period or not preemptible), pending gangs of several
    priorities, queues with every policy."""
    n_nodes = draw(st.integers(1, 3))
    nodes = []
    room: dict[str, dict[str, int]] = {}
    for i in range(n_nodes):
        gpus = draw(st.sampled_from([0, 2, 4, 4]))
        cpu = draw(st.sampled_from([2, 4]))
        alloc: dict[str, Any] = {"cpu": cpu, "memory": "16Gi"}
        if gpus:
            alloc["nvidia.com/gpu"] = gpus
        nodes.append({"name": f"n{i}", "allocatable": alloc, "domains": {"leaf": "l0"}})
        room[f"n{i}"] = {"cpu": cpu * 1000, "gpu": gpus * 1000}
    queues = []
    for j in range(draw(st.sampled_from([1, 1, 2]))):
        q: dict[str, Any] = {
            "name": f"q{j}",
            "preemption": {
                "within_queue": draw(
                    st.sampled_from(["never", "lower_priority", "lower_priority"])
                ),
                "reclaim": draw(st.sampled_from(["never", "lower_priority", "any"])),
            },
        }
        if draw(st.booleans()):
            q["guaranteed"] = {"nvidia.com/gpu": draw(st.integers(1, 4)), "cpu": 4}
        queues.append(q)
    running = []
    for k in range(draw(st.integers(1, 3))):
        pods = draw(st.integers(1, 2))
        gpu = draw(st.sampled_from([0, 1, 2, 2, "500m"]))
        milli = {0: 0, 1: 1000, 2: 2000, "500m": 500}[gpu]
        cpu = draw(st.sampled_from([1, 2]))
        entry: dict[str, Any] = {
            "gang": f"r{k}",
            "queue": draw(st.sampled_from([q["name"] for q in queues])),
            "priority": draw(st.sampled_from([0, 0, 1])),
            "preemptible": draw(st.sampled_from([True, True, True, True, False])),
            "admitted": draw(st.sampled_from([None, 0.0, 50.0, 95.0])),
        }
        if pods == 2 and draw(st.booleans()):
            entry["min_member"] = 1
        for p in range(pods):
            fits = [n for n, r in room.items() if r["cpu"] >= cpu * 1000 and r["gpu"] >= milli]
            if not fits:
                break
            node = draw(st.sampled_from(fits))
            room[node]["cpu"] -= cpu * 1000
            room[node]["gpu"] -= milli
            req: dict[str, Any] = {"cpu": cpu}
            if gpu:
                req["nvidia.com/gpu"] = gpu
            running.append({"name": f"r{k}-{p}", "node": node, "requests": req, **entry})
    gangs = []
    pods_left = 3
    for k in range(draw(st.integers(1, 2))):
        if pods_left <= 0:
            break
        count = draw(st.integers(1, min(2, pods_left)))
        pods_left -= count
        gpu = draw(st.sampled_from([0, 1, 2]))
        req = {"cpu": draw(st.sampled_from([1, 2]))}
        if gpu:
            req["nvidia.com/gpu"] = gpu
        gang: dict[str, Any] = {
            "name": f"g{k}",
            "queue": draw(st.sampled_from([q["name"] for q in queues])),
            "priority": draw(st.sampled_from([0, 1, 2, 2])),
            "creation_time": k,
            "roles": [{"name": "w", "count": count, "requests": req}],
        }
        if draw(st.integers(0, 9)) == 0:
            gang["preemption_policy"] = "Never"
        gangs.append(gang)
    return {
        "levels": [{"name": "leaf"}],
        "preemption": {"enabled": True, "grace_s": 10, "now": 100},
        "nodes": nodes,
        "queues": queues,
        "gangs": gangs,
        "running": running,
    }


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(tiny_preemption_instances())
def test_cpsat_equals_exhaustive_best_with_preemption(data: dict[str, Any]) -> None:
    s, _ = load_instance(data)
    result = solve_cycle(s, None, config=DETERMINISTIC)
    assert verify(s, result.plan) == []
    best = exhaustive_best(s)
    assert result.score == best, (
        f"cpsat {result.score}\nbest  {best}\nstatus {result.status} {result.notes}\n"
        f"evictions {[e.pod for e in result.plan.evictions]}"
    )
    for name in BASELINES:
        base = run_baseline(s, name)
        if verify(s, base.plan) == []:
            assert not result.score < base.score, name


def test_the_enumerator_counts_victims_case_11() -> None:
    """Sanity of the enumerator with preemption, on case 11 (worked by hand): evicting l-0
    lets h take both nodes: 16 GPUs of class 100 against 8 lost of class 0."""
    from pathlib import Path

    from gangplan.adapters.files import load_snapshot

    case = Path(__file__).resolve().parents[3] / "instances" / "cases" / "11-preempt-idle-node.yaml"
    s, _ = load_snapshot(case)
    best = exhaustive_best(s)
    assert (best["p100.gpu_milli"], best["p100.pods"]) == (16_000, 2)
    assert (best["p0.gpu_milli"], best["p0.pods"]) == (-8_000, -1)
    assert (best["preemption.evicted_gpu_milli"], best["preemption.evicted_pods"]) == (-8_000, -1)
