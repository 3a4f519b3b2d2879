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

from gangplan.adapters.jsontext import loads_bounded
from gangplan.adapters.serve.api import Obj
from gangplan.adapters.serve.snapshot import GATE

__all__ = ["MAX_BODY_BYTES", "gate_patch", "review", "serve_webhook"]

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


MAX_BODY_BYTES = 3 * 1024 * 1024
"""The largest AdmissionReview body read: the API server's own request body limit
(``MaxRequestBodyBytes``, 3 MiB, in ``k8s.io/apiserver/pkg/server/config.go``), so no review
it sends is refused. A larger or negative ``Content-Length`` is answered 413 / 400 unread."""
MAX_BODY_DEPTH = 200
"""JSON nesting levels accepted in a body (a pod with ``managedFields`` nests about 20)."""
HANDSHAKE_TIMEOUT_S = 10.0
"""Seconds a client has to finish the TLS handshake (the API server's default webhook
``timeoutSeconds`` is 10)."""
REQUEST_TIMEOUT_S = 10.0
"""Seconds a connection may stay silent while its request is read."""


class _TLSServer(ThreadingHTTPServer):
    """A threading HTTP server that does each TLS handshake in the connection's own thread,
    with a timeout, so that a client that connects and never speaks TLS holds only its own
    thread (wrapping the listening socket would run every handshake in ``accept``, in the
    one thread that serves all)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type, ctx: ssl.SSLContext):
        super().__init__(address, handler)
        self.ctx = ctx

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            tls = self.ctx.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        except OSError:
            return
        try:
            tls.do_handshake()
        except OSError:  # ssl.SSLError, a timeout, a reset: this connection only
            tls.close()
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            tls.close()


def _body_length(value: str | None) -> tuple[int | None, int, str]:
    """``(length, 0, "")`` for a usable ``Content-Length``, else ``(None, code, why)``."""
    if value is None:
        return None, 411, "Content-Length is required"
    try:
        n = int(value.strip())
    except ValueError:
        return None, 400, f"Content-Length {value!r} is not a number"
    if n < 0:
        return None, 400, f"Content-Length {n} is negative"
    if n > MAX_BODY_BYTES:
        return None, 413, f"Content-Length {n} is more than the limit of {MAX_BODY_BYTES} bytes"
    return n, 0, ""


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
    ``tls.key``; blocks unless ``block`` is False (then it runs in a thread).

    Each connection is served in its own thread: its TLS handshake must end within
    :data:`HANDSHAKE_TIMEOUT_S`, and a silent connection is closed after
    :data:`REQUEST_TIMEOUT_S`. A body must come with a ``Content-Length`` (411 without one),
    non-negative (400) and at most :data:`MAX_BODY_BYTES` (413); a body that is not an
    AdmissionReview — not JSON, nested deeper than :data:`MAX_BODY_DEPTH`, not an object —
    is answered 400 with the reason."""
    folder = Path(tls_dir)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(folder / "tls.crt", folder / "tls.key")

    class Handler(BaseHTTPRequestHandler):
        timeout = REQUEST_TIMEOUT_S

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _answer(self, code: int, data: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if code != 200:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            if self.path.split("?")[0] != "/mutate-pods":
                self.send_error(404)
                return
            n, code, why = _body_length(self.headers.get("Content-Length"))
            if n is None:
                self._answer(code, json.dumps({"error": why}).encode())
                return
            try:
                body = loads_bounded(
                    self.rfile.read(n), max_bytes=MAX_BODY_BYTES, max_depth=MAX_BODY_DEPTH
                )
                if not isinstance(body, dict):
                    raise ValueError("not a JSON object")
                answer = review(body, gate=gate, selector=selector)
                data, code = json.dumps(answer).encode(), 200
            except (ValueError, AttributeError, TypeError) as err:
                data = json.dumps({"error": f"not an AdmissionReview: {err}"}).encode()
                code = 400
            self._answer(code, data)

        def do_GET(self) -> None:  # the probes
            self.send_response(200 if self.path.startswith(("/healthz", "/readyz")) else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = _TLSServer((host, port), Handler, ctx)
    if block:
        server.serve_forever()
    else:
        threading.Thread(target=server.serve_forever, daemon=True, name="webhook").start()
    return server
