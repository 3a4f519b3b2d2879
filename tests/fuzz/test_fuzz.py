"""A fuzz suite over what gangplan reads: instance files (``gangplan validate``), plans
(``gangplan verify``) and Kubernetes dumps (``gangplan convert k8s``), each a valid file
mutated by hypothesis — fields dropped, duplicated or retyped, huge numbers, nan and inf,
unicode and brackets, deep nesting, YAML aliases, a byte-order mark, cut or corrupted
bytes.

Each example runs the command in a forked child with a memory limit (``RLIMIT_AS``: what
the process already maps plus :data:`CHILD_EXTRA`) and a time bound (:data:`HANG_S`, hang
detection only: an example takes well under a second). The child reports back; the test
asserts:

* no traceback — the command ends with exit code 0 or 1, never an exception;
* no hang past the bound, and no memory past the limit (a MemoryError is a traceback);
* every refusal names a path: each ``error:`` line starts with the file (and the summary
  of ``convert k8s`` names ``file#document`` for everything it did not read).

The table of ``gangplan solve`` is not a target here: its rendering is another room's.

The example count is bounded (:data:`EXAMPLES` per target, derandomized so that CI runs
the same examples every time); ``GANGPLAN_FUZZ_EXAMPLES=N`` runs N new, random examples per
target instead, for a longer local run.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "instances" / "default.yaml"
K8S = ROOT / "tests" / "fixtures" / "k8s" / "small-cluster.yaml"

LONG_RUN = os.environ.get("GANGPLAN_FUZZ_EXAMPLES")
EXAMPLES = int(LONG_RUN or "40")
HANG_S = 60.0
CHILD_EXTRA = 1 << 30

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=LONG_RUN is None,  # CI: the same examples every run; a long run: new ones
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


# --------------------------------------------------------------------------- the child


def _address_space() -> int:
    """Bytes of virtual memory this process maps now (``VmSize``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 4 << 30  # pragma: no cover - no /proc: a generous guess


def run_in_child(args: list[str]) -> dict[str, Any]:
    """``gangplan ARGS`` (click's CliRunner) in a forked child with a memory limit; returns
    ``{"exit_code", "stdout", "stderr", "traceback"}``, or fails the test if the child hangs
    or dies."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report, leave without any of pytest's teardown
        os.close(read_end)
        report: dict[str, Any]
        try:
            limit = _address_space() + CHILD_EXTRA
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            from gangplan.adapters.cli import main

            result = CliRunner().invoke(main, args)
            crash = None
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                crash = "".join(traceback.format_exception(*result.exc_info))  # type: ignore[misc]
            report = {
                "exit_code": result.exit_code,
                "stdout": result.stdout[-2000:],
                "stderr": result.stderr[-20000:],
                "traceback": crash,
            }
        except BaseException:  # everything goes back to the parent
            report = {
                "exit_code": -1,
                "stdout": "",
                "stderr": "",
                "traceback": traceback.format_exc(),
            }
        with os.fdopen(write_end, "w") as out:
            json.dump(report, out)
        os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], HANG_S)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"gangplan {' '.join(args)}: no answer after {HANG_S:g} s (hung)")
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    if not chunks:
        pytest.fail(f"gangplan {' '.join(args)}: the child died (wait status {status})")
    return json.loads(b"".join(chunks))


def check(args: list[str], path: Path) -> dict[str, Any]:
    """Run, and assert no traceback, exit 0 or 1, and every ``error:`` line naming ``path``."""
    done = run_in_child(args)
    assert done["traceback"] is None, done["traceback"]
    assert done["exit_code"] in (0, 1), done
    assert "Traceback" not in done["stderr"], done["stderr"]
    errors = [line for line in done["stderr"].splitlines() if line.startswith("error: ")]
    if done["exit_code"] == 1:
        assert errors, done["stderr"]
        for line in errors:
            assert line.startswith(f"error: {path}"), line
    return done


# --------------------------------------------------------------------------- mutations

HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31 - 1, 2**63, 10**9, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["[/q]", "[bold]x", "٨", "３Gi", "--5", "1e400", "0.5", "100Mi", "x" * 300]),
    st.sampled_from(["{index:2000000}", "^(a+)+$", "", " ", "\u202e", "a\x00b"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def _paths(data: Any) -> list[tuple[Any, ...]]:
    """Every place in ``data`` (not inside a nest deeper than 30, such as one made here)."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    while stack:
        here, value = stack.pop()
        out.append(here)
        if len(here) > 30:
            continue
        if isinstance(value, dict):
            stack += [((*here, k), v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [((*here, i), v) for i, v in enumerate(value)]
    return sorted(out, key=repr)


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def mutated(draw: st.DrawFn, seed: Any) -> Any:
    """``seed`` (plain data) after one to three mutations at places drawn from it."""
    data = json.loads(json.dumps(seed))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(data) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _get(data, path[:-1])
        key = path[-1]
        how = draw(st.sampled_from(["drop", "retype", "retype", "nest", "copy", "grow"]))
        if how == "drop":
            del parent[key]
        elif how == "retype":
            parent[key] = draw(HOSTILE)
        elif how == "nest":
            parent[key] = _nested(draw(st.sampled_from([3, 60, 500])))  # deeper: as text
        elif how == "copy" and isinstance(parent, list):
            parent.append(json.loads(json.dumps(parent[key])))  # a duplicate entry
        elif how == "grow" and isinstance(parent, list):
            parent.extend(
                json.loads(json.dumps(parent[key])) for _ in range(draw(st.integers(1, 50)))
            )
        else:
            parent[key] = draw(HOSTILE)
    return data


def _alias_bomb() -> str:
    lines = ["x0: &x0 [" + ", ".join(["v"] * 10) + "]"]
    lines += [f"x{k}: &x{k} [" + ", ".join([f"*x{k - 1}"] * 10) + "]" for k in range(1, 9)]
    return "\n".join(lines) + "\n"


@st.composite
def as_text(draw: st.DrawFn, data: Any) -> bytes:
    """``data`` written as YAML or JSON, then maybe damaged as text or bytes."""
    if draw(st.booleans()):
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    else:
        text = json.dumps(data, indent=1)  # nan and inf as NaN, Infinity
    how = draw(st.sampled_from(["none", "none", "dup", "alias", "deep", "bom", "cut", "flip"]))
    if how == "dup" and "\n" in text.strip():
        lines = text.splitlines(keepends=True)
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(i, lines[i])
        text = "".join(lines)
    elif how == "alias":
        text = text if text.startswith("{") else _alias_bomb() + text
    elif how == "deep":  # nesting deeper than any parser's recursion
        depth = draw(st.sampled_from([1_000, 100_000]))
        if text.startswith("{"):
            text = "[" * depth + "]" * depth
        else:
            text += "zz: " + "[" * depth + "]" * depth + "\n"
    raw = text.encode("utf-8")
    if how == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif how == "cut":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif how == "flip" and raw:
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + bytes([draw(st.sampled_from([0x00, 0xFF, 0xC3, 0x80]))]) + raw[i + 1 :]
    return raw


def _seed_instance() -> Any:
    return yaml.safe_load(DEFAULT.read_text())


def _seed_plan() -> Any:
    result = CliRunner().invoke(
        __import__("gangplan.adapters.cli", fromlist=["main"]).main,
        ["solve", str(DEFAULT), "--placer", "greedy", "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


WORKLOADS: list[dict[str, Any]] = [
    {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "vj", "namespace": "ml"},
        "spec": {
            "minAvailable": 2,
            "queue": "team-a",
            "tasks": [
                {
                    "name": "w",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "x",
                                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    },
    {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "tf", "namespace": "ml"},
        "spec": {
            "runPolicy": {"schedulingPolicy": {"minAvailable": 1}},
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": 2,
                    "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                }
            },
        },
    },
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
        },
    },
    {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                        }
                    },
                }
            ]
        },
    },
    {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "rack-1"},
        "spec": {
            "tier": 1,
            "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^h100-a.*"}}}],
        },
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}],
                        }
                    ],
                }
            ]
        },
    },
]


def _seed_dump() -> Any:
    data = yaml.safe_load(K8S.read_text())
    data["items"] += WORKLOADS
    return data


SEEDS: dict[str, Callable[[], Any]] = {
    "instance": _seed_instance,
    "plan": _seed_plan,
    "dump": _seed_dump,
}
_CACHE: dict[str, Any] = {}


def seed(name: str) -> Any:
    if name not in _CACHE:
        _CACHE[name] = SEEDS[name]()
    return _CACHE[name]


# --------------------------------------------------------------------------- the targets


def test_the_seeds_are_valid() -> None:
    # the mutations start from files gangplan accepts: the fuzz tests what breaks them
    with tempfile.TemporaryDirectory() as tmp:
        for name, suffix in (("instance", ".yaml"), ("plan", ".json"), ("dump", ".yaml")):
            p = Path(tmp) / f"seed{suffix}"
            p.write_text(
                yaml.safe_dump(seed(name)) if suffix == ".yaml" else json.dumps(seed(name))
            )
            args = {
                "instance": ["validate", str(p)],
                "plan": ["verify", str(DEFAULT), str(p)],
                "dump": ["convert", "k8s", str(p), "-o", str(Path(tmp) / "out.yaml")],
            }[name]
            assert check(args, p)["exit_code"] == 0


@FUZZ
@given(data=st.data())
def test_mutated_instances(data: st.DataObject) -> None:
    raw = data.draw(as_text(data.draw(mutated(seed("instance")))))
    suffix = data.draw(st.sampled_from([".yaml", ".json"]))
    with tempfile.TemporaryDirectory() as tmp:
        inst = Path(tmp) / f"inst{suffix}"
        inst.write_bytes(raw)
        check(["validate", str(inst)], inst)


@FUZZ
@given(data=st.data())
def test_mutated_plans(data: st.DataObject) -> None:
    raw = data.draw(as_text(data.draw(mutated(seed("plan")))))
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "plan.yaml"
        plan.write_bytes(raw)
        done = run_in_child(["verify", str(DEFAULT), str(plan)])
        assert done["traceback"] is None, done["traceback"]
        assert done["exit_code"] in (0, 1), done
        for line in done["stderr"].splitlines():
            if line.startswith("error: "):
                assert line.startswith(f"error: {plan}"), line


@FUZZ
@given(data=st.data())
def test_mutated_kubernetes_dumps(data: st.DataObject) -> None:
    raw = data.draw(as_text(data.draw(mutated(seed("dump")))))
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "dump.yaml"
        dump.write_bytes(raw)
        done = check(["convert", "k8s", "-v", str(dump), "-o", str(Path(tmp) / "out.yaml")], dump)
        # everything not read is listed under its document: "file#i" or the file itself
        # (wrapped at 80 columns: an entry continues indented 12, a reason indented 8)
        listed = [
            line.strip()
            for line in done["stderr"].splitlines()
            if line.startswith("          ")
            and not line.startswith("            ")
            and not line.strip().startswith("... and")
        ]
        for line in listed:
            assert line.startswith(str(dump)), line
