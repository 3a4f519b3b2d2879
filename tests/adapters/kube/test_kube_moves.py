"""What the Kubernetes reader carries for moves (issue 26, finding 5): a running pod's own
nodeSelector, required affinity and tolerations, its controller and index, and the
PodDisruptionBudgets; and, through the CLI (``convert k8s`` then ``replan``), that a gang is
moved only where its pods may go and only when their controller recreates them.

Before the fix the reader dropped a running pod's nodeSelector, and ``replan`` on the dump
of :func:`_pools` moved the ``pool: a`` pod x-0 onto the ``pool: b`` node b1 (budget 1: one
move, big admitted); it also moved bare pods and Deployment pods.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from test_kube_reading import dump, node, pod

from gangplan.adapters.cli import main
from gangplan.models import DisruptionBudget, MovePlan, PodOwner, load_instance

QUEUE = {"scheduling.volcano.sh/queue-name": "default"}


def _owned(p: dict[str, Any], api: str, kind: str, name: str) -> dict[str, Any]:
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": api, "kind": kind, "name": name, "uid": f"u-{name}", "controller": True}
    ]
    return p


def test_running_pods_keep_their_rules_and_owner(tmp_path: Path) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
                ]
            }
        }
    }
    tol = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    r = dump(
        tmp_path,
        node("n1", gpus=8, labels={"pool": "a", "zone": "z1"}),
        _owned(
            pod(
                "train-3",
                gpus=2,
                node_name="n1",
                nodeSelector={"pool": "a"},
                affinity=affinity,
                tolerations=tol,
                labels={"apps.kubernetes.io/pod-index": "3"},
            ),
            "apps/v1",
            "StatefulSet",
            "train",
        ),
        _owned(
            pod(
                "vc-worker-1",
                node_name="n1",
                labels={"volcano.sh/task-spec": "worker", "volcano.sh/task-index": "1"},
            ),
            "batch.volcano.sh/v1alpha1",
            "Job",
            "vc",
        ),
        _owned(
            pod(
                "js-w-0-0-abcde",
                node_name="n1",
                labels={"batch.kubernetes.io/job-completion-index": "0"},
            ),
            "batch/v1",
            "Job",
            "js-w-0",
        ),
        _owned(pod("web-5d9-xk2", node_name="n1"), "apps/v1", "ReplicaSet", "web-5d9"),
        pod("vllm", node_name="n1"),
    )
    by = {p.name: p for p in r.snapshot.running}
    t = by["train-3"]
    assert t.node_selector == {"pool": "a"}
    assert [e.key for term in t.node_affinity for e in term.match_expressions] == ["zone"]
    assert [(x.key, x.operator, x.effect) for x in t.tolerations] == [
        ("gpu", "Exists", "NoSchedule")
    ]
    assert t.owner == PodOwner(api_version="apps/v1", kind="StatefulSet", name="train", index="3")
    assert isinstance(by["vc-worker-1"].owner, PodOwner)
    assert by["vc-worker-1"].owner.index == "worker/1"
    assert isinstance(by["js-w-0-0-abcde"].owner, PodOwner)
    assert (by["js-w-0-0-abcde"].owner.index, by["js-w-0-0-abcde"].owner.follow) == ("0", "index")
    assert isinstance(by["web-5d9-xk2"].owner, PodOwner)
    assert by["web-5d9-xk2"].owner.follow is None
    assert by["vllm"].owner == "none"


def test_the_hostname_pin_gangplan_wrote_is_not_the_pods_own(tmp_path: Path) -> None:
    # gate mode pins a pod it places with nodeSelector kubernetes.io/hostname and marks it
    # with gangplan.io/plan; the pod its controller recreates has no pin, so a move may
    # take it elsewhere (before: every pod gangplan placed could only "move" to its own
    # node). A hostname selector the pod has without that mark is its own and stays.
    pin = {"kubernetes.io/hostname": "n1", "pool": "a"}
    r = dump(
        tmp_path,
        node("n1", gpus=8, labels={"pool": "a"}),
        pod(
            "placed", node_name="n1", nodeSelector=dict(pin), annotations={"gangplan.io/plan": "x"}
        ),
        pod("pinned", node_name="n1", nodeSelector=dict(pin)),
    )
    by = {p.name: p for p in r.snapshot.running}
    assert by["placed"].node_selector == {"pool": "a"}
    assert by["pinned"].node_selector == pin


def test_disruption_budgets_are_read(tmp_path: Path) -> None:
    # two budgets over app=x (3 running pods): one with a status allowing 1, one without a
    # status, maxUnavailable 50%: ceil(0.5 x 3) = 2; a third selects no running pod
    def pdb(name: str, spec: dict[str, Any], status: dict[str, Any] | None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
        }
        if status is not None:
            out["status"] = status
        return out

    sel = {"selector": {"matchLabels": {"app": "x"}}}
    r = dump(
        tmp_path,
        node("n1"),
        *[pod(f"x-{i}", node_name="n1", labels={"app": "x"}) for i in range(3)],
        pdb("one", {**sel, "minAvailable": 2}, {"disruptionsAllowed": 1}),
        pdb("half", {**sel, "maxUnavailable": "50%"}, None),
        pdb("other", {"selector": {"matchLabels": {"app": "y"}}, "maxUnavailable": 1}, None),
    )
    assert sorted(r.snapshot.disruption_budgets, key=lambda b: b.name) == [
        DisruptionBudget(name="half", pods=("x-0", "x-1", "x-2"), disruptions_allowed=2),
        DisruptionBudget(name="one", pods=("x-0", "x-1", "x-2"), disruptions_allowed=1),
    ]


def _pools(extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """a1 (pool a) and b1 (pool b), 8 GPUs each; x-0 (StatefulSet x, 4 GPUs, nodeSelector
    pool: a) runs on a1; pending big (8 GPUs, pool: a) fits only on an empty a1."""
    a1 = node("a1", gpus=8, labels={"pool": "a"})
    b1 = node("b1", gpus=8, labels={"pool": "b"})
    x0 = _owned(
        pod("x-0", gpus=4, node_name="a1", nodeSelector={"pool": "a"}, annotations=dict(QUEUE)),
        "apps/v1",
        "StatefulSet",
        "x",
    )
    big = pod("big", gpus=8, nodeSelector={"pool": "a"}, annotations=dict(QUEUE))
    return {"apiVersion": "v1", "kind": "List", "items": [a1, b1, x0, big, *(extra or [])]}


def _replan(tmp_path: Path, dump_data: dict[str, Any]) -> tuple[MovePlan, str]:
    d = tmp_path / "dump.yaml"
    d.write_text(yaml.safe_dump(dump_data))
    inst = tmp_path / "inst.yaml"
    run = CliRunner()
    res = run.invoke(main, ["convert", "k8s", str(d), "-o", str(inst)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "moves.yaml"
    res = run.invoke(
        main, ["replan", str(inst), "--deterministic", "--time-limit", "5", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    return MovePlan.model_validate(yaml.safe_load(out.read_text())), res.output


def test_replan_keeps_a_pod_on_its_own_pool(tmp_path: Path) -> None:
    # moving x-0 to b1 would admit big, but x-0's nodeSelector says pool a: nothing moves
    mp, _out = _replan(tmp_path, _pools())
    assert mp.moves == ()


def test_replan_moves_it_when_its_rules_allow(tmp_path: Path) -> None:
    # the same cluster, x-0 without a nodeSelector: one move (x-0 to b1) admits big
    data = _pools()
    del data["items"][2]["spec"]["nodeSelector"]
    mp, _out = _replan(tmp_path, data)
    assert [(m.gang, [p.to.node for p in m.pods]) for m in mp.moves] == [("default/x-0", ["b1"])]
    assert [p.pod for p in mp.final.pods] == ["big"]


def test_replan_never_moves_a_bare_or_replicaset_pod(tmp_path: Path) -> None:
    # x-0 free to go to b1 (no nodeSelector), but a bare pod (a model server started by
    # hand): it would never come back, so it does not move and the reason is printed; a
    # Deployment's pod likewise
    for owner, why in (
        (None, "bare pod"),
        (("apps/v1", "ReplicaSet", "x-5d9"), "ReplicaSet recreates it under a new name"),
    ):
        data = _pools()
        x0 = data["items"][2]
        del x0["spec"]["nodeSelector"]
        if owner is None:
            del x0["metadata"]["ownerReferences"]
        else:
            _owned(x0, *owner)
        mp, out = _replan(tmp_path, data)
        assert mp.moves == ()
        assert "not movable" in out or "no running gang may move" in out
        assert why in " ".join(out.split())
        inst = load_instance(yaml.safe_load((tmp_path / "inst.yaml").read_text()))[0]
        assert (inst.running[0].owner == "none") is (owner is None)
