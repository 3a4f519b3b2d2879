"""``gangplan validate``, ``gangplan schema`` and ``gangplan verify`` through click's CliRunner.

User mistakes end with one ``error: FILE: PATH: message`` line per problem, a count, exit
code 1 and no traceback (issue 2, "gangplan validate"). Expected lines are worked out by
hand from the files written here.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from gangplan.adapters.cli import main

ROOT = Path(__file__).resolve().parents[3]
INSTANCES = ROOT / "instances"
CASE_04 = INSTANCES / "cases" / "04-packing-order.yaml"
CASE_10 = INSTANCES / "cases" / "10-gpu-resource-names.yaml"

HEAD = "apiVersion: gangplan.io/v1alpha1\nkind: Instance\n"
NODE = "{name: n1, allocatable: {cpu: 4, memory: 8Gi}}"
GANG = "{name: g, queue: q, roles: [{name: w, count: 1, requests: {cpu: 1}}]}"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def write(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return name


def assert_user_error(result: Result) -> list[str]:
    """Exit 1 through SystemExit, no traceback; returns the ``error:`` lines of stderr."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    return [line for line in result.stderr.splitlines() if line.startswith("error: ")]


# --------------------------------------------------------------------------- validate: valid


def test_validate_embedded_default() -> None:
    # instances/default.yaml: 32 nodes x 8 GPUs, 3 queues, 13 gangs, 18 running pods
    result = run("validate")
    assert result.exit_code == 0, result.output
    # one sentence, wrapped within 80 columns
    assert " ".join(result.stdout.split()) == (
        "default instance: valid — 32 nodes, 256 GPUs, 3 queues, 13 pending gangs, "
        "18 running pods, 0 warnings"
    )
    assert all(len(line) <= 80 for line in result.stdout.splitlines())
    assert result.stderr == ""


def test_validate_valid_file() -> None:
    # case 04: nodes of 2 + 1 + 1 GPUs, one queue, gangs a and b, nothing running
    result = run("validate", str(CASE_04))
    assert result.exit_code == 0, result.output
    assert " ".join(result.stdout.split()) == (
        f"{CASE_04}: valid — 3 nodes, 4 GPUs, 1 queue, 2 pending gangs, 0 running pods, 0 warnings"
    )


def test_validate_warns_without_failing() -> None:
    """Case 10: a running pod asks nvidia.com/gpu of n1, which advertises only
    nvidia.com/a100 (an opaque resource there): warnings, not errors."""
    result = run("validate", str(CASE_10))
    assert result.exit_code == 0, result.output
    warnings = [w for w in result.stderr.splitlines() if w.startswith("warning: ")]
    assert warnings
    assert all("'n1'" in w for w in warnings)
    assert any("nvidia.com/gpu" in w and "does not advertise" in w for w in warnings)
    assert "error" not in result.stderr
    assert result.stdout.endswith(f"{len(warnings)} warnings\n")


def test_validate_json_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = {
        "apiVersion": "gangplan.io/v1alpha1",
        "kind": "Instance",
        "nodes": [{"name": "n1", "allocatable": {"cpu": "4", "nvidia.com/gpu": 2}}],
        "queues": [{"name": "q"}],
        "gangs": [{"name": "g", "queue": "q", "roles": [{"name": "w", "count": 1}]}],
    }
    (tmp_path / "i.json").write_text(json.dumps(data), encoding="utf-8")
    result = run("validate", "i.json")
    assert result.exit_code == 0, result.output
    # one of each: no plural (it said "1 nodes, 1 queues")
    assert "i.json: valid — 1 node, 2 GPUs, 1 queue, 1 pending gang" in result.stdout


# --------------------------------------------------------------------------- validate: invalid


BAD_FILES = [
    pytest.param(
        # an unknown field, with the accepted ones
        HEAD + f"nodes:\n  - {{name: n1, colour: red}}\nqueues: [{{name: q}}]\ngangs: [{GANG}]\n",
        [("nodes[0].colour", "unknown field 'colour' (accepted: name, labels,")],
        id="unknown-field",
    ),
    pytest.param(
        # a quantity that is not one; the message names the resource
        HEAD + f"nodes:\n  - {{name: n1, allocatable: {{cpu: two}}}}\nqueues: [{{name: q}}]\n"
        f"gangs: [{GANG}]\n",
        [("nodes[0].allocatable", "resource 'cpu': 'two' is not a Kubernetes quantity")],
        id="bad-quantity",
    ),
    pytest.param(
        # a negative quantity
        HEAD + f"nodes:\n  - {{name: n1, allocatable: {{memory: -8Gi}}}}\n"
        f"queues: [{{name: q}}]\ngangs: [{GANG}]\n",
        [("nodes[0].allocatable", "'-8Gi' is negative (accepted: a quantity >= 0)")],
        id="negative-quantity",
    ),
    pytest.param(
        # a negative weight
        HEAD + f"nodes: [{NODE}]\nqueues: [{{name: q, weight: -1}}]\ngangs: [{GANG}]\n",
        [("queues[0].weight", "greater than or equal to 0")],
        id="negative-weight",
    ),
    pytest.param(
        # a zero count, inside the second gang
        HEAD + f"nodes: [{NODE}]\nqueues: [{{name: q}}]\ngangs:\n  - {GANG}\n"
        "  - {name: h, queue: q, roles: [{name: w, count: 0}]}\n",
        [("gangs[1].roles[0].count", "greater than 0")],
        id="zero-count",
    ),
    pytest.param(
        # duplicate names: both copies are named
        HEAD + f"nodes: [{NODE}]\nqueues: [{{name: q}}, {{name: q}}]\ngangs: [{GANG}]\n",
        [
            ("queues[0].name", "duplicate queue name 'q'"),
            ("queues[1].name", "duplicate queue name 'q'"),
        ],
        id="duplicate-queue",
    ),
    pytest.param(
        # min_member above the gang's full size (2 pods)
        HEAD + f"nodes: [{NODE}]\nqueues: [{{name: q}}]\n"
        "gangs: [{name: g, queue: q, min_member: 5, roles: [{name: w, count: 2}]}]\n",
        [("gangs[0].min_member", "min_member 5 exceeds the full size 2 (accepted: 1..2)")],
        id="min-member-above-size",
    ),
    pytest.param(
        # a device id used twice, and so 2 GPUs in the layout against 1 allocatable
        HEAD + "nodes:\n  - name: n1\n    allocatable: {nvidia.com/gpu: 1}\n"
        "    devices: {numa_nodes: [{name: a, pcie_switches: [{name: s, gpus: [d0, d0]}]}]}\n"
        f"queues: [{{name: q}}]\ngangs: [{GANG}]\n",
        [
            ("nodes[0].devices", "device id 'd0' used twice"),
            (
                "nodes[0].allocatable.nvidia.com/gpu",
                "device layout has 2 GPUs but allocatable nvidia.com/gpu is 1",
            ),
        ],
        id="device-twice-and-layout-disagrees",
    ),
    pytest.param(
        # unknown references, all at once: queue, level (gang and node), node, layout
        HEAD + "levels: [{name: leaf}]\n"
        "nodes:\n  - {name: n1, domains: {rack: r1}}\n  - {name: n2, device_layout: hgx}\n"
        "queues: [{name: q}]\n"
        "gangs: [{name: g, queue: nope, topology: {required: spine},"
        " roles: [{name: w, count: 1}]}]\n"
        "running: [{name: r, node: n9}]\n",
        [
            ("nodes[0].domains.rack", "unknown level 'rack' (accepted: 'leaf')"),
            ("nodes[1].device_layout", "unknown device layout 'hgx' (declared: none declared)"),
            ("gangs[0].queue", "unknown queue 'nope' (declared: 'q')"),
            ("gangs[0].topology.required", "unknown level 'spine' (accepted: 'leaf', 'node')"),
            ("running[0].node", "unknown node 'n9'"),
        ],
        id="unknown-references",
    ),
    pytest.param(
        # a pool node is named by its pool and its expanded name; a mistake all its nodes
        # share is reported once, with the count
        HEAD + "device_layouts:\n"
        "  one: {numa_nodes: [{name: a, pcie_switches: [{name: s, gpus: [g0]}]}]}\n"
        "node_pools: [{name: 'p-{index}', count: 2, device_layout: one,"
        " allocatable: {nvidia.com/gpu: 2}}]\n"
        f"queues: [{{name: q}}]\ngangs: [{GANG}]\n",
        [
            (
                "node_pools[0] (node 'p-0' and 1 more).allocatable.nvidia.com/gpu",
                "node 'p-0': device layout has 1 GPUs",
            ),
        ],
        id="pool-layout-disagrees",
    ),
    pytest.param(
        "kind: Plan\n",
        [("kind", "is 'Plan'; accepted: 'Instance'")],
        id="wrong-kind",
    ),
    pytest.param(
        "nodes: [1, 2\n",
        [("line 2 column 1", "not valid YAML")],
        id="not-yaml",
    ),
    pytest.param(
        "",
        [("", "the file is empty")],
        id="empty-file",
    ),
    pytest.param(
        # field problems and reference problems in one run: the queue, level and node
        # names referred to can still be read, although two fields are invalid
        HEAD + "levels: [{name: leaf}]\n"
        "nodes: [{name: n1, domains: {rack: r1}, allocatable: {cpu: two}}]\n"
        "queues: [{name: q}]\n"
        "gangs: [{name: g, queue: nope, topology: {required: spine}, "
        "roles: [{name: w, count: 0}]}]\n"
        "running: [{name: r, node: n9, queue: q2, requests: {cpu: 1}}]\n",
        [
            ("nodes[0].allocatable", "'two' is not a Kubernetes quantity"),
            ("gangs[0].roles[0].count", "greater than 0"),
            ("gangs[0].queue", "unknown queue 'nope' (declared: 'q')"),
            ("gangs[0].topology.required", "unknown level 'spine' (accepted: 'leaf', 'node')"),
            ("nodes[0].domains.rack", "unknown level 'rack' (accepted: 'leaf')"),
            ("running[0].queue", "unknown queue 'q2' (declared: 'q')"),
            ("running[0].node", "unknown node 'n9' (declared: 'n1')"),
        ],
        id="references-with-field-problems",
    ),
    pytest.param(
        # the queues cannot be read (one has no name): no queue reference is judged
        HEAD + "queues: [{weight: 1}]\ngangs: [{name: g, queue: nope, "
        "roles: [{name: w, count: 1}]}]\n",
        [("queues[0].name", "required field is missing")],
        id="references-unreadable-not-judged",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD_FILES)
def test_validate_lists_every_problem(
    text: str, expected: list[tuple[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text(text, encoding="utf-8")
    result = run("validate", "bad.yaml")
    lines = assert_user_error(result)
    assert len(lines) == len(expected), lines
    for (path, fragment), line in zip(expected, lines, strict=True):
        prefix = f"error: bad.yaml: {path}: " if path else "error: bad.yaml: "
        assert line.startswith(prefix), line
        assert fragment in line[len(prefix) :], line
    n = len(expected)
    assert result.stderr.endswith(f"{n} problem{'s' if n != 1 else ''} found\n")


def test_validate_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert assert_user_error(run("validate", "nothere.yaml")) == [
        "error: nothere.yaml: no such file"
    ]


@pytest.mark.parametrize("path", sorted(INSTANCES.rglob("*.yaml")), ids=lambda p: p.name)
def test_validate_every_shipped_instance(path: Path) -> None:
    result = run("validate", str(path))
    assert result.exit_code == 0, result.output
    assert ": valid — " in result.stdout


# --------------------------------------------------------------------------- validate: hostile

# Each file rebuilds a reproducer from breaking gangplan on purpose: before, validate crashed
# or passed it (and solve crashed later), or the process ran out of memory. Now: exit 1, one
# line naming the path, no traceback.


def gang_with(role: str) -> str:
    return f"gangs: [{{name: g, queue: q, roles: [{role}]}}]\n"


AFFINITY = (
    "{name: w, count: 1, node_affinity: [{match_expressions: [{key: rank, operator: %s,"
    " values: ['%s']}]}]}"
)
HOSTILE_FILES = [
    pytest.param(
        # before: accepted; solve and verify then crashed on int("--5")
        HEAD + f"nodes: [{NODE}]\nqueues: [{{name: q}}]\n" + gang_with(AFFINITY % ("Gt", "--5")),
        "gangs[0].roles[0].node_affinity[0].match_expressions[0]",
        "operator Gt takes exactly one integer value (accepted: a 64-bit integer in ASCII "
        "digits with an optional sign",
        id="gt-two-minus-signs",
    ),
    pytest.param(
        HEAD + f"nodes: [{NODE}]\nqueues: [{{name: q}}]\n" + gang_with(AFFINITY % ("Lt", "²")),
        "gangs[0].roles[0].node_affinity[0].match_expressions[0]",
        "operator Lt takes exactly one integer value",
        id="lt-superscript-two",
    ),
    pytest.param(
        # before: IndexError
        HEAD
        + f"nodes: [{NODE}]\nqueues: [{{name: q}}]\n"
        + gang_with("{name: w, count: 3, pod_names: [a, b]}"),
        "gangs[0].roles[0].pod_names",
        "2 pod names for count 3 (they must agree)",
        id="pod-names-short",
    ),
    pytest.param(
        # before: accepted, and the bindings named one pod twice
        HEAD
        + f"nodes: [{NODE}]\nqueues: [{{name: q}}]\n"
        + gang_with("{name: w, count: 2, pod_names: [a, a]}"),
        "gangs[0].roles[0].pod_names",
        "duplicate pod name 'a' (each pod of a role needs its own name)",
        id="pod-names-duplicate",
    ),
    pytest.param(
        # before: accepted as 8 bytes
        HEAD + "nodes: [{name: n1, allocatable: {memory: '٨'}}]\nqueues: [{name: q}]\n",
        "nodes[0].allocatable",
        "resource 'memory': '٨' is not a Kubernetes quantity",
        id="quantity-arabic-digit",
    ),
    pytest.param(
        HEAD + "nodes: [{name: n1, allocatable: {memory: '３Gi'}}]\nqueues: [{name: q}]\n",
        "nodes[0].allocatable",
        "resource 'memory': '３Gi' is not a Kubernetes quantity",
        id="quantity-fullwidth-digit",
    ),
    pytest.param(
        # before: 500 names of 2,000,000 characters; the process died at 3 GB
        HEAD + "node_pools: [{name: '{index:2000000}', count: 500}]\n",
        "node_pools[0].name",
        "a width of 2000000 cannot fit a name of at most 253 characters",
        id="pool-name-width",
    ),
    pytest.param(
        # before (this and the next four): MemoryError
        HEAD + "node_pools: [{name: 'p-{index}', count: 1000000000}]\n",
        "node_pools[0].count",
        "1,000,000,000 nodes: more than gangplan accepts (at most 100,000 nodes in a "
        "snapshot, MAX_NODES in gangplan.models.limits)",
        id="pool-count-1e9",
    ),
    pytest.param(
        HEAD + f"nodes: [{NODE}]\nrunning: [{{name: r, node: n1, replicas: 1000000000}}]\n",
        "running[0].replicas",
        "1,000,000,000 pods: more than gangplan accepts (at most 1,000,000 pods",
        id="replicas-1e9",
    ),
    pytest.param(
        HEAD
        + f"nodes: [{NODE}]\nqueues: [{{name: q}}]\n"
        + gang_with("{name: w, count: 1000000000}"),
        "gangs[0].roles[0].count",
        "1,000,000,000 pods: more than gangplan accepts (at most 150,000 pods in one gang",
        id="role-count-1e9",
    ),
    pytest.param(
        HEAD + "nodes: [{name: n1, allocatable: {nvidia.com/gpu: 100Mi}}]\n",
        "nodes[0].allocatable.nvidia.com/gpu",
        "104,857,600 devices: more than gangplan accepts (at most 1,024 devices of one "
        "resource on a node, MAX_DEVICES_PER_NODE",
        id="gpus-100Mi",
    ),
    pytest.param(
        HEAD + "nodes: [{name: n1, allocatable: {nvidia.com/gpu: 10M}}]\n",
        "nodes[0].allocatable.nvidia.com/gpu",
        "10,000,000 devices: more than gangplan accepts",
        id="gpus-10M",
    ),
    pytest.param(
        # before: one line per node, 50,000 alike
        HEAD + "node_pools: [{name: 'p-{index}', count: 50000,"
        " allocatable: {example.com/x: 0.5}}]\n",
        "node_pools[0] (node 'p-0' and 49,999 more).allocatable.example.com/x",
        "500m is not a whole number",
        id="one-mistake-in-a-50000-node-pool",
        marks=pytest.mark.slow,  # 50,000 nodes validated: about 10 s
    ),
]


@pytest.mark.parametrize(("text", "path", "fragment"), HOSTILE_FILES)
def test_validate_refuses_hostile_input_with_the_path(
    text: str, path: str, fragment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text(text, encoding="utf-8")
    lines = assert_user_error(run("validate", "bad.yaml"))
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: bad.yaml: {path}: "), lines
    assert fragment in lines[0], lines
    assert run("validate", "bad.yaml").stderr.endswith("1 problem found\n")


def test_a_node_label_that_is_not_an_integer_matches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: validate passed, then solve and verify crashed on int("--3"). Now the label
    matches neither Gt nor Lt (as in Kubernetes): g never fits, h (no affinity) is placed."""
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path,
        "i.yaml",
        HEAD + "nodes: [{name: n1, labels: {rank: '--3'}, allocatable: {cpu: 4}}]\n"
        "queues: [{name: q}]\n"
        "gangs:\n"
        f"  - {{name: g, queue: q, roles: [{AFFINITY % ('Gt', '0')}]}}\n"
        "  - {name: h, queue: q, roles: [{name: w, count: 1, requests: {cpu: 1}}]}\n",
    )
    assert run("validate", "i.yaml").exit_code == 0
    solved = run("solve", "i.yaml", "--placer", "greedy", "-o", "plan.yaml")
    assert solved.exit_code == 0, solved.output
    assert "Traceback" not in solved.output
    plan = yaml.safe_load((tmp_path / "plan.yaml").read_text(encoding="utf-8"))
    admitted = {g["gang"]: g["admitted"] for g in plan["gangs"]}
    assert admitted == {"g": False, "h": True}
    verified = run("verify", "i.yaml", "plan.yaml")
    assert verified.exit_code == 0, verified.output
    assert verified.stdout.endswith("plan is valid for i.yaml\n")


# --------------------------------------------------------------------------- schema


def test_schema_prints_json_schema() -> None:
    result = run("schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    # the file's keys, by alias (apiVersion, not api_version)
    assert {"apiVersion", "kind", "nodes", "node_pools", "gangs", "running"} <= set(
        schema["properties"]
    )
    assert "api_version" not in schema["properties"]


def test_schema_to_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run("schema", "-o", "s.json")
    assert result.exit_code == 0
    assert result.stdout == "wrote s.json\n"
    assert json.loads((tmp_path / "s.json").read_text()) == json.loads(run("schema").stdout)


# --------------------------------------------------------------------------- verify

# Case 04: x1 has 2 GPUs, x2 and x3 one each, all in leaf l1; gang a is 2 x 1 GPU, b is
# 1 x 2 GPUs. Nodes declare no devices, so each has gpu-0.. (the implicit layout).
GOOD_PLAN = """\
apiVersion: gangplan.io/v1alpha1
kind: Plan
gangs:
  - {gang: a, admitted: true, placed: 2, roles: {worker: 2}}
  - {gang: b, admitted: true, placed: 1, roles: {main: 1}}
pods:
  - {pod: a-worker-0, gang: a, role: worker, node: x2, gpus: [gpu-0]}
  - {pod: a-worker-1, gang: a, role: worker, node: x3, gpus: [gpu-0]}
  - {pod: b-main-0, gang: b, role: main, node: x1, gpus: [gpu-0, gpu-1]}
"""

# a's second pod left out (below its minimum of 2); b on x2, which has 1 GPU (gpu-0 only)
BAD_PLAN = """\
apiVersion: gangplan.io/v1alpha1
kind: Plan
gangs:
  - {gang: a, admitted: true, placed: 1, roles: {worker: 1}}
  - {gang: b, admitted: true, placed: 1, roles: {main: 1}}
pods:
  - {pod: a-worker-0, gang: a, role: worker, node: x1, gpus: [gpu-0]}
  - {pod: b-main-0, gang: b, role: main, node: x2, gpus: [gpu-0, gpu-1]}
"""


def test_verify_accepts_good_plan(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(GOOD_PLAN, encoding="utf-8")
    result = run("verify", str(CASE_04), str(plan))
    assert result.exit_code == 0, result.output
    assert "violation" not in result.output
    assert result.stdout.endswith(f"plan is valid for {CASE_04}\n")
    # in a person's units, worked out by hand: one queue, whose target is all it asks (4 of
    # the 4 GPUs), all admitted: no shortfall; 4 GPUs and 3 pods; gang a spans 2 nodes
    # (1 extra), one leaf; every GPU node and the leaf fully used, so no free milli-GPU for
    # FGD's measure to count; no previous plan
    assert result.stdout.splitlines()[1:6] == [
        "  priority 0: fair-share shortfall 0.0; admitted 4 GPUs, 3 pods",
        "  locality: extra domains of multi-pod gangs: preferred 0, leaf 0, node 1",
        "  fragmentation: FGD's expected fragmentation 0 (milli-GPU x weight),",
        "    then 0 GPU nodes and 0 leaves partly used",
        "  stability: 0 pods moved from the previous plan",
    ]


CASE_11 = INSTANCES / "cases" / "11-preempt-idle-node.yaml"
PLAN_11 = """\
apiVersion: gangplan.io/v1alpha1
kind: Plan
gangs:
  - {gang: h, admitted: true, placed: 2, roles: {worker: 2}}
pods:
  - pod: h-worker-0
    gang: h
    role: worker
    node: n1
    gpus: [gpu-0, gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, gpu-6, gpu-7]
  - pod: h-worker-1
    gang: h
    role: worker
    node: n2
    gpus: [gpu-0, gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, gpu-6, gpu-7]
evictions:
  - {pod: l-0, gang: l, node: n2, for_gang: default/h, kind: priority}
"""


def test_verify_shows_evictions_as_evictions(tmp_path: Path) -> None:
    """Case 11: h (2 x 8 GPUs, priority 100) on n1 and n2, l-0 (8 GPUs, priority 0) evicted
    from n2. Class 100 admits 16 GPUs in 2 pods; class 0 admits nothing and loses 8 GPUs
    in 1 pod (the score's -8,000 milli-GPU, -1 pod), printed as an eviction."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN_11, encoding="utf-8")
    result = run("verify", str(CASE_11), str(plan))
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # score lines are wrapped within 80 columns
    assert all(len(line) <= 80 for line in result.stdout.splitlines() if line.startswith(" "))
    assert "priority 100: fair-share shortfall 0.0; admitted 16 GPUs, 2 pods" in text
    assert (
        "priority 0: fair-share shortfall 0.0; admitted 0 GPUs, 0 pods; evicted 8 GPUs, 1 pod"
        in text
    )
    assert "-8" not in result.stdout


def test_verify_json_has_the_raw_score_tuple(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(GOOD_PLAN, encoding="utf-8")
    result = run("verify", str(CASE_04), str(plan), "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["valid"] is True and data["violations"] == []
    # the same facts as above, in the score's own units (milli-GPU; weight-milli x ppm)
    assert data["score"] == [
        ["p0.fairness", 0],
        ["p0.fairness_w0", 0],
        ["p0.gpu_milli", 4000],
        ["p0.pods", 3],
        ["p0.growth_gpu_milli", 0],  # no elastic gang: nothing beyond a minimum
        ["p0.growth_pods", 0],
        ["locality.preferred", 0],
        ["locality.leaf", 0],
        ["locality.node", -1],
        ["fragmentation.expected", 0],  # every GPU taken: no free milli-GPU left to strand
        ["fragmentation.gpu_nodes", 0],
        ["fragmentation.leaves", 0],
        ["stability", 0],
    ]


def test_verify_a_plan_alone_checks_it_against_the_default_instance(tmp_path: Path) -> None:
    # as validate and solve, verify defaults to the embedded instance (it needed both)
    out = tmp_path / "plan.yaml"
    assert run("solve", "--placer", "greedy", "-o", str(out)).exit_code == 0
    result = run("verify", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("plan is valid for the default instance\n")
    assert run("verify").exit_code == 2


def test_verify_rejects_bad_plan(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(BAD_PLAN, encoding="utf-8")
    result = run("verify", str(CASE_04), str(plan))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    violations = [v for v in result.stdout.splitlines() if v.startswith("violation: ")]
    rules = {v.split("]")[0].removeprefix("violation: [") for v in violations}
    assert {"gang", "capacity", "devices"} <= rules
    assert any("[capacity]" in v and "'x2'" in v and "nvidia.com/gpu" in v for v in violations)
    assert any("[devices]" in v and "'gpu-1'" in v and "'x2'" in v for v in violations)
    assert any("[gang]" in v and "default/a" in v for v in violations)
    assert "plan is valid" not in result.stdout
    assert f"{len(violations)} violations" in result.stderr
    data = json.loads(run("verify", str(CASE_04), str(plan), "--format", "json").stdout)
    assert data["valid"] is False
    assert {v["rule"] for v in data["violations"]} >= {"gang", "capacity", "devices"}


def test_verify_malformed_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path, "plan.yaml", "kind: Plan\npods:\n  - {pod: p, gang: a, node: x1, colour: red}\n"
    )
    lines = assert_user_error(run("verify", str(CASE_04), "plan.yaml"))
    assert [line.split(": ")[2] for line in lines] == ["pods[0].role", "pods[0].colour"]
    assert all(line.startswith("error: plan.yaml: ") for line in lines)


def test_verify_bad_instance_stops_before_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "i.yaml", HEAD + f"nodes: [{NODE}]\nqueues: [{{name: q, weight: -1}}]\n")
    write(tmp_path, "plan.yaml", GOOD_PLAN)
    lines = assert_user_error(run("verify", "i.yaml", "plan.yaml"))
    assert len(lines) == 1 and lines[0].startswith("error: i.yaml: queues[0].weight: ")


@pytest.mark.parametrize(
    ("case_id", "expected"),
    [
        # a case the package ships translated: point at that instance
        (
            "11-preempt-idle-node",
            "its translated instance is "
            f"{INSTANCES / 'cases' / '11-preempt-idle-node.yaml'}: pass that file instead",
        ),
        # no translation shipped: point at the folder
        ("99-unknown", "the translated cases ship in instances/cases/ (see its README.md)"),
    ],
)
def test_a_case_file_is_told_apart_from_an_instance(
    tmp_path: Path, case_id: str, expected: str
) -> None:
    case = tmp_path / "case.yaml"
    # the short case form: kind is a sentence, cluster and expect at the top
    case.write_text(
        f"id: {case_id}\nkind: gang preemption must count the idle node\n"
        "cluster: {levels: [leaf], nodes: []}\nexpect: [placed(h) = 2]\n",
        encoding="utf-8",
    )
    result = run("solve", str(case), "--preemption")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"error: {case}: this looks like a test case (id, cluster, expect), not an instance "
        f"file (kind: Instance); {expected}\n"
    )
    assert "accepted: 'Instance'" not in result.stderr


def test_a_node_s_fractional_gpus_are_refused_without_contradiction(tmp_path: Path) -> None:
    # before: "1500m is not a whole number; extended resources are counted in whole units
    # (only the GPU resource takes a share such as 500m)" for the GPU resource itself
    name = write(
        tmp_path,
        "i.yaml",
        HEAD + 'nodes: [{name: n1, allocatable: {nvidia.com/gpu: "1.5", cpu: 4}}]\n'
        "queues: [{name: q}]\n",
    )
    result = run("validate", str(tmp_path / name))
    assert assert_user_error(result) == [
        f"error: {tmp_path / name}: nodes[0].allocatable.nvidia.com/gpu: 1.5 GPUs is not a "
        "whole number; a node's GPUs are counted in whole devices (a share such as 500m is "
        "for a pod's request)"
    ]


def test_joint_allocation_without_any_device_layout_warns(tmp_path: Path) -> None:
    # docs/instance-format.md: joint allocation needs a declared device layout
    gang = (
        "{name: g, queue: q, joint: pcie, roles: [{name: w, count: 1, "
        "requests: {nvidia.com/gpu: 2, rdma/hca: 2}}]}"
    )
    name = write(
        tmp_path,
        "i.yaml",
        HEAD + "nodes: [{name: n1, allocatable: {nvidia.com/gpu: 8, rdma/hca: 8, cpu: 64}}]\n"
        f"queues: [{{name: q}}]\ngangs: [{gang}]\n",
    )
    result = run("validate", str(tmp_path / name))
    assert result.exit_code == 0, result.output
    assert (
        "warning: gang 'default/g': joint allocation 'pcie' needs a declared device layout, "
        "but no node has one, so it never fits: give the nodes `device_layout: NAME` (a "
        "template of `device_layouts`) or `devices: {numa_nodes: [...]}`, or set `joint: none`"
    ) in " ".join(result.stderr.split())


def test_verify_says_when_the_plan_is_for_another_instance(tmp_path: Path) -> None:
    # case 11's plan names gang default/h and nodes n1, n2: none of the three is in the
    # embedded default instance, which verify PLAN alone checks
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN_11, encoding="utf-8")
    result = run("verify", str(plan))
    assert result.exit_code == 1
    assert (
        "note: 3 of the plan's 3 gangs and nodes are unknown to the default instance: the "
        "plan does not seem to be for it; give its instance first: gangplan verify INSTANCE "
        "PLAN"
    ) in " ".join(result.stdout.split())
    # its own instance: no such note
    assert "note:" not in run("verify", str(CASE_11), str(plan)).stdout


def test_verify_prints_at_most_fifty_violations_and_counts_the_rest(tmp_path: Path) -> None:
    """80 pods of gangs the default instance does not have: the note comes first, then 50
    violation lines and one line counting the rest, which ``--format json`` lists (the
    total taken from there)."""
    pods = "".join(
        f"  - {{pod: x{i}-w-0, gang: x{i}, role: w, node: nope{i}}}\n" for i in range(80)
    )
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "apiVersion: gangplan.io/v1alpha1\nkind: Plan\ngangs: []\npods:\n" + pods,
        encoding="utf-8",
    )
    total = len(json.loads(run("verify", "--format", "json", str(plan)).stdout)["violations"])
    assert total > 50
    result = run("verify", str(plan))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert sum(1 for ln in lines if ln.startswith("violation: ")) == 50
    assert f"... and {total - 50:,} more violations (--format json lists every one)" in lines
    assert result.stdout.index("note: ") < result.stdout.index("violation: ")


def test_verify_says_when_most_gangs_have_no_outcome_in_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the plan knows every name it gives (gang g0, node n1), but 3 of the instance's 4 gangs
    # have no outcome in it: a plan made for another instance that shares the names
    gangs = ", ".join(
        f"{{name: g{i}, queue: q, roles: [{{name: w, count: 1, requests: {{cpu: 1}}}}]}}"
        for i in range(4)
    )
    write(tmp_path, "i.yaml", HEAD + f"nodes: [{NODE}]\nqueues: [{{name: q}}]\ngangs: [{gangs}]\n")
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "apiVersion: gangplan.io/v1alpha1\nkind: Plan\n"
        "gangs:\n  - {gang: g0, admitted: true, placed: 1, roles: {w: 1}}\n"
        "pods:\n  - {pod: g0-w-0, gang: g0, role: w, node: n1}\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    result = run("verify", "i.yaml", "plan.yaml")
    assert result.exit_code == 1
    assert (
        "note: 3 of the 4 pending gangs of instance i.yaml have no outcome in "
        "the plan: the plan does not seem to be for it; give its instance first: gangplan "
        "verify INSTANCE PLAN"
    ) in " ".join(result.stdout.split())
