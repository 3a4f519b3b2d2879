"""The mutating admission webhook: the patch it answers, and HTTPS with a certificate."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from objects import GATE, pod

from gangplan.adapters.serve.webhook import gate_patch, review, serve_webhook


def _apply(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 "add" as the API server applies it (the only op the webhook sends)."""
    out = json.loads(json.dumps(obj))
    for op in patch:
        assert op["op"] == "add"
        *parents, last = op["path"].strip("/").split("/")
        target = out
        for part in parents:
            target = target[part]
        if last == "-":
            target.append(op["value"])
        else:
            target[last] = op["value"]
    return out


def _review(obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": operation,
            "object": obj,
        },
    }


def test_a_new_pod_gets_the_gate_and_its_other_gates_stay() -> None:
    plain = pod("p", gated=False)
    assert _apply(plain, gate_patch(plain))["spec"]["schedulingGates"] == [{"name": GATE}]
    other = pod("q", gated=False)
    other["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    assert _apply(other, gate_patch(other))["spec"]["schedulingGates"] == [
        {"name": "kueue.x-k8s.io/admission"},
        {"name": GATE},
    ]


@pytest.mark.parametrize(
    "obj",
    [
        pod("gated", gated=True),  # has it already
        pod("bound", gated=False, node_name="n0"),  # a gate cannot be set on a bound pod
        pod("volcano", gated=False, scheduler="volcano"),  # another scheduler's pod
    ],
    ids=["already-gated", "bound", "other-scheduler"],
)
def test_pods_left_alone(obj: dict[str, Any]) -> None:
    assert gate_patch(obj) == []
    assert "patch" not in review(_review(obj))["response"]


def test_the_pod_selector() -> None:
    sel = {"gangplan.io/gang": "yes"}
    assert gate_patch(pod("a", gated=False), selector=sel) == []
    assert gate_patch(pod("b", gated=False, labels=sel), selector=sel) != []


def test_the_admission_review_answer() -> None:
    answer = review(_review(pod("p", gated=False)))
    r = answer["response"]
    assert (answer["kind"], r["uid"], r["allowed"], r["patchType"]) == (
        "AdmissionReview",
        "705ab4f5-6393-11e8-b7cc-42010a800002",
        True,
        "JSONPatch",
    )
    assert json.loads(base64.b64decode(r["patch"])) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}
    ]
    assert "patch" not in review(_review(pod("p", gated=False), "UPDATE"))["response"]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_served_over_https_with_the_secrets_certificate(tmp_path: Path) -> None:
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(tmp_path / "tls.key"),
            "-out",
            str(tmp_path / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )
    server = serve_webhook(tmp_path, host="127.0.0.1", port=0, block=False)
    try:
        port = server.server_address[1]
        ctx = ssl.create_default_context(cafile=str(tmp_path / "tls.crt"))
        req = urllib.request.Request(
            f"https://127.0.0.1:{port}/mutate-pods",
            data=json.dumps(_review(pod("p", gated=False))).encode(),
            headers={"Content-Type": "application/json"},
        )
        answer = json.loads(urllib.request.urlopen(req, context=ctx).read())
    finally:
        server.shutdown()
    patch = json.loads(base64.b64decode(answer["response"]["patch"]))
    assert patch == [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]
