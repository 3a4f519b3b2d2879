"""The admission webhook over a real loopback TLS socket, against hostile clients.

Reproducers: a client that connects and never starts TLS blocked every later review (the
handshake ran in ``accept``); ``Content-Length: -1`` read to EOF; a huge ``Content-Length``
was trusted; 50,000 nested brackets raised ``RecursionError`` and dropped the connection.
The expected status codes are HTTP's: 411 Length Required, 413 Content Too Large, 400.
The socket timeouts below only keep a broken server from hanging the suite; nothing is
timed.
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from objects import pod

from gangplan.adapters.serve.webhook import serve_webhook

MAX_BODY_BYTES = 3 * 1024 * 1024

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")
GUARD_S = 60  # a hang guard, not a limit: a working server answers at once


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext]]:
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(d / "tls.key"), "-out", str(d / "tls.crt")),
        ],
        check=True,
        capture_output=True,
    )
    server = serve_webhook(d, host="127.0.0.1", port=0, block=False)
    try:
        yield server.server_address[1], ssl.create_default_context(cafile=str(d / "tls.crt"))
    finally:
        server.shutdown()


def review_body() -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "operation": "CREATE",
                "object": pod("p", gated=False),
            },
        }
    ).encode()


def post(
    webhook: tuple[int, ssl.SSLContext], body: bytes, length: str | None
) -> tuple[int, dict[str, Any]]:
    port, ctx = webhook
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=GUARD_S)
    try:
        conn.putrequest("POST", "/mutate-pods")
        conn.putheader("Content-Type", "application/json")
        if length is not None:
            conn.putheader("Content-Length", length)
        conn.endheaders()
        conn.send(body)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_an_idle_client_does_not_block_the_next_review(
    webhook: tuple[int, ssl.SSLContext],
) -> None:
    idle = socket.create_connection(("127.0.0.1", webhook[0]))  # never starts TLS
    try:
        body = review_body()
        status, answer = post(webhook, body, str(len(body)))
    finally:
        idle.close()
    assert status == 200
    assert answer["response"]["uid"] == "u1" and answer["response"]["patchType"] == "JSONPatch"


@pytest.mark.parametrize(
    ("length", "status", "reason"),
    [
        (None, 411, "Content-Length is required"),
        ("-1", 400, "Content-Length -1 is negative"),  # before: read to EOF
        ("abc", 400, "Content-Length 'abc' is not a number"),
        (str(10**12), 413, f"more than the limit of {MAX_BODY_BYTES} bytes"),
    ],
)
def test_a_bad_content_length_is_refused_unread(
    webhook: tuple[int, ssl.SSLContext], length: str | None, status: int, reason: str
) -> None:
    got, answer = post(webhook, b"", length)
    assert got == status
    assert reason in answer["error"]


def test_the_limit_is_the_api_servers_3_mib() -> None:
    assert MAX_BODY_BYTES == 3 * 1024 * 1024  # k8s.io/apiserver server/config.go


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        # before: RecursionError, the connection dropped, a traceback in the log
        (b"[" * 50_000 + b"]" * 50_000, "nested more than 200 levels deep"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
    ],
    ids=["deep", "garbage", "list"],
)
def test_a_body_that_is_no_admission_review_is_400(
    webhook: tuple[int, ssl.SSLContext], body: bytes, reason: str
) -> None:
    status, answer = post(webhook, body, str(len(body)))
    assert status == 400
    assert reason in answer["error"]
