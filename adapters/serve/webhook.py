"""The mutating admission webhook that adds gangplan's scheduling gate to new pods.

The API server sends an ``admission.k8s.io/v1`` ``AdmissionReview`` for each pod created in
the namespaces (and pods) the ``MutatingWebhookConfiguration`` selects
(``deploy/webhook.yaml``: ``namespaceSelector`` ``gangplan.io/gang-scheduling: enabled``);
:func:`review` answers with a JSON patch that adds the gate ``gangplan.io/placement`` to
``spec.schedulingGates`` — unless the pod has it already, is bound already
(``spec.nodeName``: a gate can only be set at creation, and never on a bound pod), names
another scheduler in ``spec.schedulerName`` (gating it would stall that scheduler), or does
not match the optional ``pod_selector`` (``matchLabels``). Anything but a pod CREATE is
allowed unchanged. The answer always allows the pod: the webhook only adds the gate.

:func:`serve_webhook` serves it over HTTPS at ``/mutate-pods`` with the certificate and key
of a Secret mounted as files (``tls.crt``, ``tls.key``, as cert-manager and
``kubectl create secret tls`` write them); the API server trusts it through the
configuration's ``caBundle``. Kubernetes: "Dynamic Admission Control".
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gangplan.adapters.serve.snapshot import GATE

__all__ = ["gate_patch", "review", "serve_webhook"]

Obj = dict[str, Any]
DEFAULT_SCHEDULER = "default-scheduler"


def gate_patch(
    pod: Obj, *, gate: str = GATE, selector: Mapping[str, str] | None = None
) -> list[Obj]:
    """The JSON patch (RFC 6902) that gates ``pod``; empty when it is left alone (module
    docstring)."""
    spec = pod.get("spec") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if spec.get("nodeName"):
        return []
    if spec.get("schedulerName") not in (None, "", DEFAULT_SCHEDULER):
        return []
    if selector and any(labels.get(k) != v for k, v in selector.items()):
        return []
    gates = spec.get("schedulingGates")
    if gates and any(g.get("name") == gate for g in gates):
        return []
    if gates:
        return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": gate}}]
    return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": gate}]}]


def review(body: Obj, *, gate: str = GATE, selector: Mapping[str, str] | None = None) -> Obj:
    """The ``AdmissionReview`` answer to ``body`` (an ``AdmissionReview`` request)."""
    req = body.get("request") or {}
    response: Obj = {"uid": req.get("uid", ""), "allowed": True}
    kind = req.get("kind") or {}
    if req.get("operation") == "CREATE" and kind.get("kind") == "Pod" and not kind.get("group"):
        patch = gate_patch(req.get("object") or {}, gate=gate, selector=selector)
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {
        "apiVersion": body.get("apiVersion", "admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": response,
    }


def serve_webhook(
    tls_dir: str | Path,
    *,
    host: str = "0.0.0.0",
    port: int = 9443,
    gate: str = GATE,
    selector: Mapping[str, str] | None = None,
    block: bool = True,
) -> ThreadingHTTPServer:
    """Serve :func:`review` over HTTPS on ``host:port`` with ``tls_dir``/``tls.crt`` and
    ``tls.key``; blocks unless ``block`` is False (then it runs in a thread)."""
    folder = Path(tls_dir)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(folder / "tls.crt", folder / "tls.key")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            if self.path.split("?")[0] != "/mutate-pods":
                self.send_error(404)
                return
            try:
                n = int(self.headers.get("Content-Length") or 0)
                answer = review(json.loads(self.rfile.read(n)), gate=gate, selector=selector)
                data, code = json.dumps(answer).encode(), 200
            except (ValueError, AttributeError):
                data, code = b'{"error": "not an AdmissionReview"}', 400
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # the probes
            self.send_response(200 if self.path.startswith(("/healthz", "/readyz")) else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer((host, port), Handler)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    if block:
        server.serve_forever()
    else:
        threading.Thread(target=server.serve_forever, daemon=True, name="webhook").start()
    return server
