"""docs/kubernetes.md's way to apply a bindings stream, run as written against a stand-in
``kubectl`` that records each call: per pod the annotation as a merge patch, then the
Binding posted to the pod's ``binding`` subresource, in the stream's order."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from gangplan.adapters.kube.bindings import BindRequest, dump_bindings

DOC = Path(__file__).resolve().parents[3] / "docs" / "kubernetes.md"

FAKE_KUBECTL = """#!/usr/bin/env python3
import json, os, sys
stdin = sys.stdin.read() if "-f" in sys.argv and sys.argv[-1] == "-" else ""
with open(os.environ["KUBECTL_LOG"], "a") as log:
    log.write(json.dumps({"argv": sys.argv[1:], "stdin": stdin}) + "\\n")
"""


def _script() -> str:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (script,) = [b for b in blocks if b.startswith("# apply-bindings.py")]
    return script


def test_the_documented_script_patches_then_binds_each_pod(tmp_path: Path) -> None:
    # two pods: w-0 got a GPU (an annotation patch, then its Binding), w-1 none (a Binding)
    reqs = [
        BindRequest(
            "w-0", "ml", "n1", {"scheduling.koordinator.sh/device-allocated": '{"gpu":[]}'}
        ),
        BindRequest("w-1", "ml", "n2"),
    ]
    docs = [d for r in reqs for d in (r.patch_body(), r.binding_body()) if d is not None]
    stream = tmp_path / "bind.yaml"
    stream.write_text(dump_bindings(docs))
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
    subprocess.run(
        [sys.executable, str(tmp_path / "apply-bindings.py"), str(stream)], env=env, check=True
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["argv"][:2] for c in calls] == [
        ["patch", "pod"],
        ["create", "--raw"],
        ["create", "--raw"],
    ]
    assert calls[0]["argv"] == [
        "patch",
        "pod",
        "w-0",
        "-n",
        "ml",
        "--type",
        "merge",
        "-p",
        '{"metadata": {"annotations": {"scheduling.koordinator.sh/device-allocated": '
        '"{\\"gpu\\":[]}"}}}',
    ]
    assert calls[1]["argv"] == [
        "create",
        "--raw",
        "/api/v1/namespaces/ml/pods/w-0/binding",
        "-f",
        "-",
    ]
    assert json.loads(calls[1]["stdin"]) == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "w-0", "namespace": "ml"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    assert calls[2]["argv"][2] == "/api/v1/namespaces/ml/pods/w-1/binding"
    # the stream itself: a partial Pod then a Binding, as the doc names them
    assert [d["kind"] for d in yaml.safe_load_all(stream.read_text())] == [
        "Pod",
        "Binding",
        "Binding",
    ]
