"""``gangplan serve`` and ``gangplan apply`` started as a user would, with the official
client, against the loopback stand-in (every request body checked against the Kubernetes
1.37 schemas by the ``standin`` fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from objects import GATE, gang_pods, node, pod, volcano_group
from standin import StandIn

from gangplan.adapters.cli import main
from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.memory import InMemoryApi

PODS = KINDS["pods"]


@pytest.fixture
def files(tmp_path: Path, standin: StandIn, memory: InMemoryApi) -> dict[str, Path]:
    for i in range(2):
        memory.put(node(f"n{i}", gpus=8))
    memory.put(volcano_group("train", 2))
    for p in gang_pods("train", 2, gpus=8):
        memory.put(p)
    kc = tmp_path / "kubeconfig"
    kc.write_text(standin.kubeconfig())
    return {"kubeconfig": kc, "dir": tmp_path}


def _config(files: dict[str, Path], **fields: object) -> Path:
    cfg = files["dir"] / "serve.yaml"
    base = {"metrics_port": 0, "time_limit_s": 2, "period_s": 0.2, **fields}
    cfg.write_text(yaml.safe_dump(base))
    return cfg


def _run(*args: str) -> object:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_once_dry_run_prints_the_patches_and_sends_nothing(
    files: dict[str, Path], memory: InMemoryApi
) -> None:
    before = len(memory.calls)
    res = _run(
        "serve",
        "--config",
        str(_config(files)),
        "--kubeconfig",
        str(files["kubeconfig"]),
        "--once",
        "--dry-run",
    )
    assert res.exit_code == 0, res.output
    docs = list(yaml.safe_load_all(res.stdout))
    assert [d["metadata"]["name"] for d in docs] == ["train-0", "train-1"]
    hosts = sorted(d["patch"]["spec"]["nodeSelector"]["kubernetes.io/hostname"] for d in docs)
    assert hosts == ["n0", "n1"]  # 8 GPUs each: one pod per node
    assert all(d["patch"]["spec"]["schedulingGates"] == [] for d in docs)
    assert len(memory.calls) == before  # nothing sent
    assert "dry run: 2 requests, none sent" in res.stderr


def test_once_in_gate_mode_ungates_and_pins(files: dict[str, Path], memory: InMemoryApi) -> None:
    res = _run(
        "serve", "--config", str(_config(files)), "--kubeconfig", str(files["kubeconfig"]), "--once"
    )
    assert res.exit_code == 0, res.output
    pods = {p["metadata"]["name"]: p for p in memory.objects(PODS)}
    assert sorted(p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in pods.values()) == [
        "n0",
        "n1",
    ]
    assert all(not p["spec"].get("schedulingGates") for p in pods.values())
    assert "1 admitted (ml/train)" in res.stderr


def test_once_in_bind_mode_binds(files: dict[str, Path], memory: InMemoryApi) -> None:
    for p in memory.objects(PODS):  # pods of the scheduler gangplan, without gates
        p["spec"].pop("schedulingGates")
        p["spec"]["schedulerName"] = "gangplan"
        memory.put(p)
    res = _run(
        "serve",
        "--config",
        str(_config(files, mode="bind")),
        "--kubeconfig",
        str(files["kubeconfig"]),
        "--once",
    )
    assert res.exit_code == 0, res.output
    assert sorted(p["spec"]["nodeName"] for p in memory.objects(PODS)) == ["n0", "n1"]
    assert sorted(memory.bindings.values()) == [1, 1]


def test_serve_runs_cycles_with_leader_election(
    files: dict[str, Path], memory: InMemoryApi, standin: StandIn
) -> None:
    cfg = _config(files, leader_election={"namespace": "kube-system", "retry_period_s": 0.1})
    res = _run(
        "serve", "--config", str(cfg), "--kubeconfig", str(files["kubeconfig"]), "--cycles", "3"
    )
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.stderr.splitlines() if line.startswith("{")]
    assert len(lines) == 3 and lines[0]["leader"] is True
    assert sum(len(line["admitted"]) for line in lines) == 1
    assert all(not p["spec"].get("schedulingGates") for p in memory.objects(PODS))
    assert standin.validated["coordination.k8s.io/v1/Lease"] >= 1
    assert standin.validated["events.k8s.io/v1/Event"] >= 2  # Scheduled, per pod
    assert standin.requests["GET pods"] >= 2  # a list, then watches


def test_apply_a_plan_file(files: dict[str, Path], memory: InMemoryApi, tmp_path: Path) -> None:
    dump = tmp_path / "dump.json"
    items = [
        o
        for k in ("nodes", "pods", "podgroups.scheduling.volcano.sh")
        for o in memory.objects(KINDS[k])
    ]
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    inst, plan = tmp_path / "cluster.yaml", tmp_path / "plan.yaml"
    assert _run("convert", "k8s", str(dump), "-o", str(inst)).exit_code == 0
    assert _run("solve", str(inst), "-o", str(plan), "--time-limit", "2").exit_code == 0
    res = _run(
        "apply",
        str(plan),
        "--config",
        str(_config(files)),
        "--kubeconfig",
        str(files["kubeconfig"]),
    )
    assert res.exit_code == 0, res.output
    assert "1 gangs applied (ml/train), 2 pods" in res.stderr
    assert all(not p["spec"].get("schedulingGates") for p in memory.objects(PODS))


def test_apply_refuses_a_plan_that_does_not_hold(
    files: dict[str, Path], memory: InMemoryApi, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "gangplan.io/v1alpha1",
                "kind": "Plan",
                "gangs": [{"gang": "train", "namespace": "ml", "admitted": True, "placed": 2}],
                "pods": [
                    {
                        "pod": f"train-{i}",
                        "gang": "train",
                        "namespace": "ml",
                        "role": "pods",
                        "node": "n0",
                        "gpus": [f"gpu-{j}" for j in range(8)],
                    }
                    for i in range(2)
                ],
            }
        )
    )
    res = CliRunner().invoke(
        main,
        [
            "apply",
            str(plan),
            "--config",
            str(_config(files)),
            "--kubeconfig",
            str(files["kubeconfig"]),
        ],
    )
    assert res.exit_code == 1
    assert f"error: {plan}: the plan does not hold on the cluster now: [capacity]" in res.stderr
    assert all(p["spec"].get("schedulingGates") == [{"name": GATE}] for p in memory.objects(PODS))


def _train_pods() -> list[dict[str, object]]:
    return [
        {
            "pod": f"train-{i}",
            "gang": "train",
            "namespace": "ml",
            "role": "pods",
            "node": f"n{i}",
            "gpus": [f"gpu-{j}" for j in range(8)],
        }
        for i in range(2)
    ]


@pytest.mark.parametrize(
    ("gangs", "why"),
    [
        # the outcome says pending, 0 placed, but 2 pods are listed (each fits its node:
        # before, apply ungated both)
        (
            [
                {
                    "gang": "train",
                    "namespace": "ml",
                    "admitted": False,
                    "placed": 0,
                    "reason": {"kind": "lost", "message": "x"},
                }
            ],
            "gang ml/train: outcome says 0 pods placed, the plan has 2",
        ),
        # no outcome at all for the gang of the 2 pods
        ([], "gang ml/train: 2 pods placed but no outcome"),
    ],
    ids=["pending-with-pods", "no-gangs"],
)
def test_apply_refuses_a_plan_that_contradicts_itself(
    files: dict[str, Path], memory: InMemoryApi, tmp_path: Path, gangs: list[object], why: str
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "gangplan.io/v1alpha1",
                "kind": "Plan",
                "gangs": gangs,
                "pods": _train_pods(),
            }
        )
    )
    args = ["apply", str(plan), "--config", str(_config(files))]
    res = CliRunner().invoke(main, [*args, "--kubeconfig", str(files["kubeconfig"])])
    assert res.exit_code == 1
    assert f"error: {plan}: the plan contradicts itself: [references] {why}" in res.stderr
    assert all(p["spec"].get("schedulingGates") == [{"name": GATE}] for p in memory.objects(PODS))


def test_apply_sends_no_eviction_and_refuses_a_plan_that_needs_one(
    tmp_path: Path, standin: StandIn, memory: InMemoryApi
) -> None:
    """docs/serve.md: apply of a kind: Plan sends no Eviction (serve evicts only for the
    gangs it plans itself, with preemption: true). n0 is free,
    n1 holds running pod low-0 (8 GPUs); the plan puts train's 2 x 8 GPUs on n0 and n1 and
    evicts low-0 (as solve --preemption would): train-1 does not fit on n1 as it is."""
    for i in range(2):
        memory.put(node(f"n{i}", gpus=8))
    memory.put(pod("low-0", gpus=8, gated=False, node_name="n1"))
    memory.put(volcano_group("train", 2))
    for p in gang_pods("train", 2, gpus=8):
        memory.put(p)
    kc = tmp_path / "kubeconfig"
    kc.write_text(standin.kubeconfig())
    plan = tmp_path / "plan.yaml"
    gpus = [f"gpu-{j}" for j in range(8)]
    pods = [
        {"pod": f"train-{i}", "gang": "train", "namespace": "ml", "role": "pods"}
        | {"node": f"n{i}", "gpus": gpus}
        for i in range(2)
    ]
    eviction = {"pod": "low-0", "namespace": "ml", "node": "n1", "for_gang": "ml/train"}
    plan.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "gangplan.io/v1alpha1",
                "kind": "Plan",
                "gangs": [{"gang": "train", "namespace": "ml", "admitted": True, "placed": 2}],
                "pods": pods,
                "evictions": [eviction | {"kind": "priority"}],
            }
        )
    )
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(yaml.safe_dump({"metrics_port": 0, "time_limit_s": 2}))
    res = _run("apply", str(plan), "--config", str(cfg), "--kubeconfig", str(kc))
    assert res.exit_code == 1
    assert f"error: {plan}: the plan does not hold on the cluster now: [capacity]" in res.stderr
    assert not [c for c in memory.calls if c.verb == "evict"]
    assert [p["metadata"]["name"] for p in memory.objects(PODS) if p["spec"].get("nodeName")] == [
        "low-0"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mode: bnd\n", "mode: is 'bnd' (accepted: 'gate', 'bind')"),  # a typo
        ("period: 2\n", "period: not a field (accepted: "),  # the field is period_s
        ("period_s: -1\n", "period_s: is -1 (accepted: a number > 0)"),
        ("event_interval_s: -1\n", "event_interval_s: is -1 (accepted: a number >= 0)"),
        ("dry_run: maybe\n", "dry_run: is 'maybe' (accepted: true or false)"),
        ("topology_labels: 'a,,b'\n", "topology_labels: "),  # an empty level
        ("- 1\n", "the configuration must be a mapping"),
        # client-go's NewLeaderElector refuses both (leaseDuration > renewDeadline >
        # 1.2 x retryPeriod); before, accepted
        (
            "leader_election: {lease_duration_s: 1, renew_deadline_s: 5}\n",
            "leader_election: lease_duration_s (1) must be greater than renew_deadline_s (5)",
        ),
        (
            "leader_election: {renew_deadline_s: 2, retry_period_s: 2}\n",
            "leader_election: renew_deadline_s (2) must be greater than 1.2 x retry_period_s (2)",
        ),
        # spec.schedulerName is a DNS-1123 subdomain; before, accepted
        ('scheduler_name: "Bad Name"\n', "scheduler_name: not a DNS-1123 subdomain"),
        # before: "--device-layout '/dev/zero': ..." naming neither the file nor the field
        ("device_layout: /dev/zero\n", "device_layout: '/dev/zero': not a template"),
        # before: "Input should be less than or equal to 3600 (got nan)"
        (
            "period_s: .nan\n",
            "period_s: nan is not a number of seconds; give a number greater than 0 and at "
            "most 3600",
        ),
        # issue 26, finding 10: each of these passed validation before (and a cycle then
        # failed on every snapshot, or a bool stood for a number)
        (
            "gpu_resource: cpu\n",
            "gpu_resource: 'cpu' is a core resource (no domain/ prefix), not a device plugin's; "
            "give an extended resource name such as 'nvidia.com/gpu'\n",
        ),
        ("gpu_resource: kubernetes.io/gpu\n", "gpu_resource: 'kubernetes.io/gpu' is in the"),
        ("nic_resource: memory\n", "nic_resource: 'memory' is a core resource"),
        (
            "gpu_resource: rdma/hca\n",
            "gpu_resource and nic_resource are both 'rdma/hca': a device is a GPU or a NIC, so "
            "give two distinct resource names\n",
        ),
        ("metrics_port: true\n", "metrics_port: is True (accepted: a whole number)"),
        ("dry_run: 1\n", "dry_run: is 1 (accepted: true or false)"),
        ("namespaces: ml\n", "namespaces: is 'ml' (accepted: a list)"),
        ("namespaces: [Bad_NS]\n", "namespaces: 'Bad_NS' is not a namespace name"),
        ("default_queue: ''\n", "default_queue: is '' (accepted: a non-empty string)"),
        ("leader_election: {name: 'A B'}\n", "leader_election.name: 'A B' is not a Lease's"),
        ("backoff_initial_s: 700\n", "backoff_initial_s (700) is above backoff_max_s (600)"),
        # a nested unknown key is answered with its own level's fields (it listed the top's)
        (
            "leader_election: {lease_s: 5}\n",
            "leader_election.lease_s: not a field (accepted: enabled, namespace, name, "
            "lease_duration_s, renew_deadline_s, retry_period_s)\n",
        ),
    ],
)
def test_a_bad_config_names_the_field(tmp_path: Path, text: str, expected: str) -> None:
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(text)
    res = CliRunner().invoke(main, ["serve", "--config", str(cfg), "--once"])
    assert res.exit_code == 1
    assert f"error: {cfg}: " in res.stderr and expected in res.stderr
    assert "Traceback" not in res.output


def test_the_cycle_line_shows_at_most_ten_gangs() -> None:
    from gangplan.adapters.cli.serve import _some

    names = [f"ml/g{i}" for i in range(200)]
    assert _some(names) == ", ".join(f"ml/g{i}" for i in range(10)) + " and 190 more"
    assert _some(names[:10]) == ", ".join(names[:10])
    assert _some([]) == "none"


def test_a_config_map_is_read_from_its_serve_yaml_key(tmp_path: Path) -> None:
    # deploy/configmap.yaml as --config: its data.serve.yaml (it gave four "not a field")
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gangplan"},
        "data": {"serve.yaml": "mode: bnd\nperiod_s: 2\n"},
    }
    cfg = tmp_path / "configmap.yaml"
    cfg.write_text(yaml.safe_dump(cm))
    res = CliRunner().invoke(main, ["serve", "--config", str(cfg), "--once"])
    assert res.exit_code == 1
    assert res.stderr == (
        f"error: {cfg}: data.serve.yaml: mode: is 'bnd' (accepted: 'gate', 'bind')\n"
    )
    from gangplan.adapters.serve.config import load_config

    cm["data"] = {"serve.yaml": "mode: bind\nperiod_s: 7\n"}
    cfg.write_text(yaml.safe_dump(cm))
    loaded = load_config(cfg)
    assert (loaded.mode, loaded.period_s) == ("bind", 7.0)
    shipped = load_config(Path(__file__).resolve().parents[3] / "deploy" / "configmap.yaml")
    assert shipped.scheduler_name == "gangplan"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # issue 26, finding 10: both ended in AttributeError tracebacks
        ([1, 2], "data: is a list, not a mapping"),
        ("mode: bind", "data: is a str, not a mapping"),
        ({"serve.yaml": ["mode: bind"]}, "data.serve.yaml: is a list, not a string"),
        ({"other.yaml": "mode: bind"}, "a ConfigMap without data.serve.yaml (its data keys: "),
    ],
)
def test_a_config_map_of_the_wrong_shape_is_named(
    tmp_path: Path, data: object, expected: str
) -> None:
    cfg = tmp_path / "configmap.yaml"
    cfg.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "data": data}))
    res = CliRunner().invoke(main, ["serve", "--config", str(cfg), "--once"])
    assert res.exit_code == 1
    assert res.stderr.startswith(f"error: {cfg}: {expected}")
    assert "Traceback" not in res.output


def test_no_kubeconfig_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    res = CliRunner().invoke(main, ["serve", "--once"])
    assert res.exit_code == 1
    assert res.stderr.startswith("error: cannot configure the Kubernetes client: ")
    assert "give --kubeconfig FILE, set KUBECONFIG, or run in the cluster" in res.stderr


def test_once_exits_non_zero_naming_a_request_that_failed(
    files: dict[str, Path], memory: InMemoryApi
) -> None:
    # issue 26, finding 3: the patch of train-1 answered 500; the cycle applied train-0 and
    # exited 0 before. Now exit 1, the failed request named.
    from gangplan.adapters.serve.memory import Fault

    memory.faults.add(Fault("patch", 500, kind="pods", name="train-1", message="etcd timeout"))
    res = _run(
        "serve", "--config", str(_config(files)), "--kubeconfig", str(files["kubeconfig"]), "--once"
    )
    assert res.exit_code == 1, res.output
    assert "1 pods applied, 1 failures" in res.stderr
    assert "error: request failed: ml/train: train-1: 500" in res.stderr
    assert "etcd timeout" in res.stderr


def test_apply_exits_non_zero_naming_a_request_that_failed(
    files: dict[str, Path], memory: InMemoryApi, tmp_path: Path
) -> None:
    from gangplan.adapters.serve.memory import Fault

    dump = tmp_path / "dump.json"
    items = [
        o
        for k in ("nodes", "pods", "podgroups.scheduling.volcano.sh")
        for o in memory.objects(KINDS[k])
    ]
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    inst, plan = tmp_path / "cluster.yaml", tmp_path / "plan.yaml"
    assert _run("convert", "k8s", str(dump), "-o", str(inst)).exit_code == 0
    assert _run("solve", str(inst), "-o", str(plan), "--time-limit", "2").exit_code == 0
    memory.faults.add(Fault("patch", 503, kind="pods", name="train-0"))
    res = _run(
        "apply",
        str(plan),
        "--config",
        str(_config(files)),
        "--kubeconfig",
        str(files["kubeconfig"]),
    )
    assert res.exit_code == 1, res.output
    assert "error: request failed: ml/train: train-0: 503" in res.stderr
