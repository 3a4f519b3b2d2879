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

Hostile or broken clients are bounded (:class:`Limits`): at most ``max_connections``
connections are served at once (one more is closed at accept, unread, and counted); a body
is read in chunks as it arrives, so a connection holds what it was sent, never what its
``Content-Length`` declares, and the declared lengths of the bodies being read may add up to
``max_bytes_in_flight`` (a review past it is answered 503 unread); a body must arrive whole
within ``body_deadline_s`` (else 408: the API server gives up on a webhook after its
``timeoutSeconds``, at most 30 s, anyway). :attr:`WebhookServer.stats` counts what was held
and refused.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gangplan.adapters.jsontext import loads_bounded
from gangplan.adapters.serve.api import Obj
from gangplan.adapters.serve.snapshot import GATE

__all__ = [
    "MAX_BODY_BYTES",
    "Limits",
    "WebhookServer",
    "WebhookStats",
    "gate_patch",
    "review",
    "serve_webhook",
]

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
READ_CHUNK_BYTES = 64 * 1024
"""The most read from a connection at once while its body arrives."""


@dataclass(frozen=True)
class Limits:
    """What the webhook holds at most (module docstring). The defaults: 64 connections (the
    API server's calls of a busy namespace, with room; each costs a thread), 32 MiB of
    declared bodies in flight (ten of the largest reviews the API server can send), and
    10 s for a whole body (the API server's default webhook ``timeoutSeconds``)."""

    max_connections: int = 64
    max_bytes_in_flight: int = 32 * 1024 * 1024
    body_deadline_s: float = 10.0


@dataclass
class WebhookStats:
    """Counters of a :class:`WebhookServer` (read them under its ``lock``): connections
    ``active`` now and ``refused`` at the cap; ``reserved`` bytes (the declared lengths of
    the bodies being read) and ``held`` bytes (received so far of them), with their peaks;
    ``too_busy``: reviews answered 503; ``too_slow``: bodies answered 408."""

    active: int = 0
    refused: int = 0
    reserved: int = 0
    peak_reserved: int = 0
    held: int = 0
    peak_held: int = 0
    too_busy: int = 0
    too_slow: int = 0


class _TLSServer(ThreadingHTTPServer):
    """A threading HTTP server that does each TLS handshake in the connection's own thread,
    with a timeout, so that a client that connects and never speaks TLS holds only its own
    thread (wrapping the listening socket would run every handshake in ``accept``, in the
    one thread that serves all); past ``limits.max_connections`` a connection is closed at
    accept."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type,
        ctx: ssl.SSLContext,
        limits: Limits | None = None,
    ):
        if ":" in address[0]:  # an IPv6 address ("::": every address of both families)
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self.ctx = ctx
        self.limits = limits or Limits()
        self.stats = WebhookStats()
        self.lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            full = self.stats.active >= self.limits.max_connections
            if full:
                self.stats.refused += 1
            else:
                self.stats.active += 1
        if full:
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:  # no thread started: the slot is free again
            with self.lock:
                self.stats.active -= 1
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.lock:
                self.stats.active -= 1

    def reserve(self, n: int) -> bool:
        """Take ``n`` bytes of the in-flight budget (False: it cannot hold them now)."""
        with self.lock:
            if self.stats.reserved + n > self.limits.max_bytes_in_flight:
                self.stats.too_busy += 1
                return False
            self.stats.reserved += n
            self.stats.peak_reserved = max(self.stats.peak_reserved, self.stats.reserved)
            return True

    def hold(self, n: int) -> None:
        """``n`` more (or, negative, fewer) bytes received and held."""
        with self.lock:
            self.stats.held += n
            self.stats.peak_held = max(self.stats.peak_held, self.stats.held)

    def release(self, reserved: int, held: int) -> None:
        with self.lock:
            self.stats.reserved -= reserved
            self.stats.held -= held

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


WebhookServer = _TLSServer
"""The server :func:`serve_webhook` returns (``stats``, ``limits``, ``server_address``)."""


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
    host: str = "127.0.0.1",
    port: int = 9443,
    gate: str = GATE,
    selector: Mapping[str, str] | None = None,
    limits: Limits | None = None,
    block: bool = True,
) -> WebhookServer:
    """Serve :func:`review` over HTTPS on ``host:port`` with ``tls_dir``/``tls.crt`` and
    ``tls.key``; blocks unless ``block`` is False (then it runs in a thread). ``host``:
    the address listened on (default loopback; in a pod, ``0.0.0.0`` or ``::``, so the API
    server can reach it through the Service, as ``deploy/deployment.yaml`` passes).

    Each connection is served in its own thread: its TLS handshake must end within
    :data:`HANDSHAKE_TIMEOUT_S`, and a silent connection is closed after
    :data:`REQUEST_TIMEOUT_S`. A body must come with a ``Content-Length`` (411 without one),
    non-negative (400) and at most :data:`MAX_BODY_BYTES` (413); it must fit the in-flight
    budget (503 unread) and arrive within ``limits.body_deadline_s`` (408); a body that is
    not an AdmissionReview — not JSON, nested deeper than :data:`MAX_BODY_DEPTH`, not an
    object — is answered 400 with the reason."""
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
            srv = self.server
            assert isinstance(srv, _TLSServer)
            if not srv.reserve(n):
                why = f"too many bytes in flight (limit {srv.limits.max_bytes_in_flight}); retry"
                self._answer(503, json.dumps({"error": why}).encode())
                return
            held = 0
            try:
                chunks: list[bytes] = []
                deadline = time.monotonic() + srv.limits.body_deadline_s
                while held < n:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.connection.settimeout(min(left, REQUEST_TIMEOUT_S))
                    try:
                        chunk = self.rfile.read1(min(READ_CHUNK_BYTES, n - held))
                    except TimeoutError:
                        break
                    if not chunk:  # the client went away
                        self.close_connection = True
                        return
                    chunks.append(chunk)
                    held += len(chunk)
                    srv.hold(len(chunk))
                if held < n:
                    with srv.lock:
                        srv.stats.too_slow += 1
                    why = (
                        f"the body did not arrive within {srv.limits.body_deadline_s:g} s "
                        f"({held} of {n} bytes)"
                    )
                    self._answer(408, json.dumps({"error": why}).encode())
                    return
                self._review(b"".join(chunks))
            finally:
                srv.release(n, held)

        def _review(self, raw: bytes) -> None:
            try:
                body = loads_bounded(raw, max_bytes=MAX_BODY_BYTES, max_depth=MAX_BODY_DEPTH)
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

    server = _TLSServer((host, port), Handler, ctx, limits)
    if block:
        server.serve_forever()
    else:
        threading.Thread(target=server.serve_forever, daemon=True, name="webhook").start()
    return server
