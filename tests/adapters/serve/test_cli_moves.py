"""``gangplan apply MOVES.yaml`` started as a user would, with the official client against
the loopback stand-in (request bodies checked against the Kubernetes 1.37 schemas): the plan
is replayed on the live cluster by the move verifier first and refused naming the move and
the rule; ``--dry-run`` prints each wave's requests and exits at once (issue 26, finding 4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from objects import node, pod
from standin import StandIn

from gangplan.adapters.cli import main
from gangplan.adapters.serve.memory import InMemoryApi


def _running(name: str, at: str) -> dict[str, Any]:
    """A 4-GPU pod of gang ``name`` (a StatefulSet's) running on ``at``."""
    p = pod(f"{name}-0", gpus=4, group=name, gated=False, node_name=at)
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "uid": f"u-{name}"}
        | {"controller": True}
    ]
    return p


@pytest.fixture
def cluster(tmp_path: Path, standin: StandIn, memory: InMemoryApi) -> dict[str, Path]:
    """n0, n1 (8 GPUs); a-0 runs on n0; n1 is empty."""
    for i in range(2):
        memory.put(node(f"n{i}", gpus=8))
    memory.put(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "a", "namespace": "ml"},
            "spec": {"minMember": 1},
        }
    )
    memory.put(_running("a", "n0"))
    kc = tmp_path / "kubeconfig"
    kc.write_text(standin.kubeconfig())
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(yaml.safe_dump({"metrics_port": 0, "time_limit_s": 2}))
    moves = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "MovePlan",
        "final": {},
        "waves": [
            {
                "index": 0,
                "moves": [
                    {
                        "gang": "ml/a",
                        "pods": [
                            {
                                "pod": "a-0",
                                "namespace": "ml",
                                "node": "n0",
                                "to": {
                                    "pod": "a-0",
                                    "gang": "a",
                                    "namespace": "ml",
                                    "role": "r0",
                                    "node": "n1",
                                    "gpus": ["gpu-0", "gpu-1", "gpu-2", "gpu-3"],
                                },
                            }
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "moves.yaml"
    path.write_text(yaml.safe_dump(moves))
    return {"kubeconfig": kc, "config": cfg, "moves": path}


def _apply(cluster: dict[str, Path], *args: str) -> Any:
    argv = ["apply", str(cluster["moves"]), "--config", str(cluster["config"])]
    return CliRunner().invoke(main, [*argv, "--kubeconfig", str(cluster["kubeconfig"]), *args])


def test_apply_dry_run_prints_the_requests_wave_by_wave_and_exits_at_once(
    cluster: dict[str, Path], memory: InMemoryApi
) -> None:
    # before: it waited 150 polls of 2 s for a pod it never evicted, then exited 1
    before = len(memory.calls)
    res = _apply(cluster, "--dry-run")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("# wave 0\n")
    docs = list(yaml.safe_load_all(res.stdout))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Eviction", "a-0"),
        ("Pod", "a-0"),
    ]
    assert docs[1]["patch"]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n1"}
    assert "wave 0: 1 pods would be evicted, 1 placed" in res.stderr
    assert "dry run: 2 requests in 1 waves, none sent" in res.stderr
    assert len(memory.calls) == before


def test_apply_refuses_a_move_onto_a_cordoned_node_naming_move_and_rule(
    cluster: dict[str, Path], memory: InMemoryApi
) -> None:
    # before: n1 exists, so apply evicted a-0 and pinned its new pod to the cordoned n1
    n1 = node("n1", gpus=8, spec={"unschedulable": True})
    memory.put(n1)
    before = len(memory.calls)
    res = _apply(cluster)
    assert res.exit_code == 1, res.output
    assert res.stderr == (
        f"error: {cluster['moves']}: the move plan does not hold on the cluster now: "
        "[readiness] wave 0: move of ml/a: pod 'a-0' on node 'n1', which is unschedulable\n"
    )
    assert not [c for c in list(memory.calls)[before:] if c.verb == "evict"]


def test_apply_counts_the_per_node_cap_given_on_the_command_line(
    cluster: dict[str, Path], memory: InMemoryApi
) -> None:
    res = _apply(cluster, "--dry-run", "--max-moving-per-node", "1")
    assert res.exit_code == 0, res.output
    # a second pod of a, on n0 too, in the same move: 2 pods off n0 with a cap of 1
    data = yaml.safe_load(cluster["moves"].read_text())
    second = _running("a", "n0")
    second["metadata"]["name"] = "a-1"
    memory.put(second)
    pods = data["waves"][0]["moves"][0]["pods"]
    extra = yaml.safe_load(yaml.safe_dump(pods[0]))
    extra["pod"] = extra["to"]["pod"] = "a-1"
    extra["to"]["gpus"] = ["gpu-4", "gpu-5", "gpu-6", "gpu-7"]
    pods.append(extra)
    cluster["moves"].write_text(yaml.safe_dump(data))
    res = _apply(cluster, "--dry-run", "--max-moving-per-node", "1")
    assert res.exit_code == 1, res.output
    assert "[budgets] wave 0: 2 pods move off node 'n0' (at most 1)" in res.stderr
    assert _apply(cluster, "--dry-run").exit_code == 0  # the default cap, 2
