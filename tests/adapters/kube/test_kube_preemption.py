"""What the Kubernetes reader carries for preemption: Kueue ClusterQueue ``spec.preemption``,
Volcano Queue ``reclaimable``, PriorityClass ``preemptionPolicy: Never`` on a pending gang,
the annotations, label and PodDisruptionBudgets that make a running pod no one's victim, a
running pod's start time as its gang's admission, and a running gang's minimum."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_kube_reading import _pg, dump, node, pod


def _cq(name: str, preemption: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 8}]}],
            }
        ]
    }
    if preemption is not None:
        spec["preemption"] = preemption
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_cluster_queue_preemption_policies(tmp_path: Path) -> None:
    r = dump(
        tmp_path,
        node("n1"),
        _cq("none", None),
        _cq("within", {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        _cq("newer", {"withinClusterQueue": "LowerOrNewerEqualPriority"}),
        _cq("reclaim", {"reclaimWithinCohort": "LowerPriority"}),
    )
    q = {name: (p.within_queue, p.reclaim) for name, p in _policies(r).items()}
    assert q == {
        "none": ("never", "never"),
        "within": ("lower_priority", "any"),
        "newer": ("lower_priority", "never"),
        "reclaim": ("never", "lower_priority"),
    }
    assert any("LowerOrNewerEqualPriority" in e.detail for e in r.summary.notes)


def _policies(r: Any) -> dict[str, Any]:
    return {q.name: q.preemption for q in r.snapshot.queues}


def test_volcano_queue_reclaimable(tmp_path: Path) -> None:
    def vq(name: str, reclaimable: bool | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"weight": 1}
        if reclaimable is not None:
            spec["reclaimable"] = reclaimable
        return {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": spec,
        }

    r = dump(tmp_path, node("n1"), vq("open", None), vq("closed", False))
    assert {n: p.reclaimable for n, p in _policies(r).items()} == {"open": True, "closed": False}


def test_priority_class_never_keeps_a_gang_from_preempting(tmp_path: Path) -> None:
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "polite"},
        "value": 1000,
        "preemptionPolicy": "Never",
    }
    r = dump(
        tmp_path,
        node("n1"),
        pc,
        pod("a", priorityClassName="polite"),
        pod("b", preemptionPolicy="Never"),
        pod("c"),
    )
    policy = {g.name: g.preemption_policy for g in r.snapshot.gangs}
    assert policy == {"a": "Never", "b": "Never", "c": "PreemptLowerPriority"}
    assert r.snapshot.gang_by_key["default/a"].priority == 1000


def test_what_makes_a_running_pod_no_ones_victim(tmp_path: Path) -> None:
    pdb_none = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep-db", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
    }
    pdb_some = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 1},
    }
    r = dump(
        tmp_path,
        node("n1"),
        pdb_none,
        pdb_some,
        pod("free", node_name="n1"),
        pod("ours", node_name="n1", annotations={"gangplan.io/preemptible": "false"}),
        pod("volcano", node_name="n1", annotations={"volcano.sh/preemptable": "false"}),
        pod(
            "koord", node_name="n1", labels={"quota.scheduling.koordinator.sh/preemptible": "false"}
        ),
        # one db pod: minAvailable 1 leaves no disruption; web's budget allows one
        pod("db", node_name="n1", labels={"app": "db"}),
        pod("web", node_name="n1", labels={"app": "web"}),
    )
    preemptible = {p.name: p.preemptible for p in r.snapshot.running}
    assert preemptible == {
        "free": True,
        "ours": False,
        "volcano": False,
        "koord": False,
        "db": False,
        "web": True,
    }


def test_running_pods_carry_their_start_and_their_gangs_minimum(tmp_path: Path) -> None:
    lbl = {"scheduling.x-k8s.io/pod-group": "g"}
    running = []
    for i in range(3):
        p = pod(f"g-{i}", node_name="n1", labels=lbl)
        p["status"]["startTime"] = "2024-01-01T00:00:10Z"
        running.append(p)
    r = dump(tmp_path, node("n1"), _pg("g", 2), *running)
    # 2024-01-01T00:00:10Z is 1,704,067,210 s after the Unix epoch
    assert {(p.min_member, p.admitted) for p in r.snapshot.running} == {(2, 1_704_067_210.0)}
    rg = r.snapshot.preemption_rules.gangs["default/g"]
    assert (rg.size, rg.min_member, rg.elastic) == (3, 2, True)


def test_the_documented_script_evicts_nominates_waits_then_binds(tmp_path: Path) -> None:
    """docs/kubernetes.md's script on a preemption stream (case 11 of instances/cases/: l-0
    goes, h takes n1 and n2): the Eviction posted first, the nominations patched on the status
    subresource, then h's annotation patches and Bindings, waiting for l-0 to be gone
    before the first Binding."""
    import json
    import os
    import subprocess
    import sys

    from test_apply_doc import FAKE_KUBECTL, _script

    from gangplan.adapters.files import load_snapshot
    from gangplan.adapters.kube.bindings import (
        bindings_document,
        dump_bindings,
        eviction_documents,
    )
    from gangplan.solver.cycle.pipeline import solve_cycle
    from gangplan.solver.result import SolverConfig

    case = Path(__file__).resolve().parents[3] / "instances" / "cases" / "11-preempt-idle-node.yaml"
    s, _ = load_snapshot(case)
    cfg = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=5.0)
    plan = solve_cycle(s, config=cfg).plan
    stream = tmp_path / "bind.yaml"
    stream.write_text(dump_bindings(eviction_documents(plan) + bindings_document(s, plan)))
    (tmp_path / "apply-bindings.py").write_text(_script())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "KUBECTL_LOG": str(log),
    }
    script = tmp_path / "apply-bindings.py"
    subprocess.run([sys.executable, str(script), str(stream)], env=env, check=True)
    calls = [json.loads(line)["argv"] for line in log.read_text().splitlines()]
    assert calls[0] == [
        "create",
        "--raw",
        "/api/v1/namespaces/default/pods/l-0/eviction",
        "-f",
        "-",
    ]
    assert [c[:3] for c in calls[1:3]] == [
        ["patch", "pod", "h-worker-0"],
        ["patch", "pod", "h-worker-1"],
    ]
    assert all("--subresource" in c and "status" in c for c in calls[1:3])
    # h-worker-0's device annotation, then the wait for l-0, then the Bindings
    assert calls[3][:3] == ["patch", "pod", "h-worker-0"]
    assert calls[4] == ["wait", "--for=delete", "pod/l-0", "-n", "default", "--timeout=10m"]
    assert [c[:2] for c in calls[5:]] == [
        ["create", "--raw"],
        ["patch", "pod"],
        ["create", "--raw"],
    ]


def test_active_deadline_seconds_is_the_expected_duration(tmp_path: Path) -> None:
    # a pending pod's activeDeadlineSeconds (600) is its gang's expected duration; a running
    # pod started at 00:00:10 with 300 s is expected to end 300 s after its start; a pod
    # without one declares nothing (reservations: nothing backfilled onto held capacity)
    run = pod("r", node_name="n1", activeDeadlineSeconds=300)
    run["status"]["startTime"] = "2024-01-01T00:00:10Z"
    r = dump(tmp_path, node("n1"), pod("a", activeDeadlineSeconds=600), pod("b"), run)
    expected = {g.name: g.expected_duration_s for g in r.snapshot.gangs}
    assert expected == {"a": 600.0, "b": None}
    (running,) = r.snapshot.running
    assert running.admitted is not None
    assert running.expected_end == running.admitted + 300
