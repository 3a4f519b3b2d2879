"""A loopback **stand-in** for the Kubernetes API server, for the contract suite.

This is not an API server: it is a small HTTP front (``http.server``, one thread per
request, bound to 127.0.0.1) over :class:`gangplan.adapters.serve.memory.InMemoryApi`, which
holds the objects and the semantics (resourceVersion, 409, 410, bindings, evictions, gates).
It speaks the REST paths and the JSON the official ``kubernetes`` client uses — lists,
watches (newline-delimited events; a too-old resourceVersion answers an ``ERROR`` event with
a 410 ``Status``, as the API server does), get, merge patch (``application/merge-patch+json``
only; anything else is 415), the status subresource, delete with ``DeleteOptions``, the
``binding`` and ``eviction`` subresources, create and replace — and answers failures with a
``Status`` object and, for 429, a ``Retry-After`` header.

Every request body is checked against the Kubernetes 1.37 OpenAPI schemas with
``kubernetes-validate`` (strict: no unknown field): Bindings, Evictions, DeleteOptions,
Events and Leases as sent, and a merge patch of a built-in kind by the object it would
produce. Problems are collected in :attr:`StandIn.invalid` (the contract tests assert it
stays empty); :attr:`StandIn.validated` counts what was checked, by kind.

Watches are held as the API server holds them: for ``timeoutSeconds``, and when that is 0 or
absent, for the server's default (``--min-request-timeout``, 1800 s, times a random factor
in [1, 2): ``ListResource`` in ``k8s.io/apiserver/pkg/endpoints/handlers/get.go``; here
:attr:`StandIn.default_watch_s`). :attr:`StandIn.watch_timeouts` records what each watch
asked for (None: absent).

kmock's ``KubernetesEmulator`` was considered: it serves lists and watches, but keeps no
resourceVersion (every list says ``"..."``), sends no bookmarks or 410, and has no binding
or eviction subresource, which is what the loop needs checked.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import kubernetes_validate

from gangplan.adapters.serve.api import KINDS, ApiError, Kind, at_served_version, merge_patch
from gangplan.adapters.serve.memory import InMemoryApi

K8S_VERSION = "1.37"
_CORE = re.compile(
    r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)
_GROUP = re.compile(
    r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)
_SCHEMA_KINDS = {"v1/Pod", "v1/Node", "scheduling.k8s.io/v1beta1/PodGroup"}


class _Discovery(Exception):
    """GET /apis: answered with the group list."""


class StandIn:
    """The stand-in server on ``127.0.0.1:<port>`` over ``api``; a context manager."""

    def __init__(self, api: InMemoryApi):
        self.api = api
        self.invalid: list[str] = []
        self.validated: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.watch_timeouts: list[str | None] = []
        self.default_watch_s = 1800.0
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"standin": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> StandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def kubeconfig(self) -> str:
        """A kubeconfig (YAML text) that points the official client here."""
        return (
            "apiVersion: v1\nkind: Config\ncurrent-context: standin\n"
            f"clusters:\n- name: standin\n  cluster:\n    server: {self.url}\n"
            "contexts:\n- name: standin\n  context:\n    cluster: standin\n    user: standin\n"
            "users:\n- name: standin\n  user: {}\n"
        )

    def check(self, what: str, body: dict[str, Any], schema: str | None = None) -> None:
        """Validate ``body`` against the 1.37 schema of its apiVersion and kind (or the
        schema file ``schema``, for DeleteOptions, whose file is named by ``meta``)."""
        try:
            if schema is None:
                kubernetes_validate.validate(body, K8S_VERSION, strict=True)
            else:
                _validate_file(schema, body)
        except kubernetes_validate.ValidationError as err:
            path = ".".join(str(p) for p in err.path)
            with self._lock:
                self.invalid.append(f"{what}: {path}: {err.message}")
            return
        except kubernetes_validate.SchemaNotFoundError as err:
            with self._lock:
                self.invalid.append(f"{what}: no schema: {err.message}")
            return
        with self._lock:
            self.validated[f"{body.get('apiVersion')}/{body.get('kind')}"] += 1


class _Handler(BaseHTTPRequestHandler):
    standin: StandIn
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    # ---------------------------------------------------------------- plumbing

    def _route(self) -> tuple[Kind, str | None, str | None, str | None, dict[str, list[str]]]:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        if url.path in ("/apis", "/apis/"):
            raise _Discovery()
        m = _CORE.match(url.path)
        group, version = "", "v1"
        if m is None:
            m = _GROUP.match(url.path)
            if m is None:
                raise ApiError(404, "NotFound", f"no route {url.path}")
            group, version = m["group"], m["version"]
        key = f"{m['plural']}.{group}" if group else m["plural"]
        kind = KINDS.get(key)
        served = (self.standin.api.served_versions(group) or ()) if group else ("v1",)
        at = at_served_version(kind, (version,)) if kind is not None else None
        if at is None or version not in served or at.version != version:
            raise ApiError(404, "NotFound", f"the server could not find the resource {key}")
        kind = at
        return kind, m["ns"], m["name"], m["sub"], query

    def _groups(self) -> dict[str, Any]:
        """The ``APIGroupList`` of ``GET /apis``: every group of the port, at the versions
        the in-memory API serves."""
        api = self.standin.api
        groups = sorted({k.group for k in KINDS.values() if k.group})
        out = []
        for g in groups:
            vs = api.served_versions(g) or ()
            if vs:
                gv = [{"groupVersion": f"{g}/{v}", "version": v} for v in vs]
                out.append({"name": g, "versions": gv, "preferredVersion": gv[-1]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else None

    def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, err: ApiError) -> None:
        code = err.status or 503
        headers = {"Retry-After": str(int(err.retry_after))} if err.retry_after else None
        self._send(code, _status(err), headers)

    def _do(self, method: str) -> None:
        s = self.standin
        try:
            try:
                kind, ns, name, sub, query = self._route()
            except _Discovery:
                self._send(200, self._groups())
                return
            s.requests[f"{method} {kind.key}{'/' + sub if sub else ''}"] += 1
            getattr(self, f"_{method.lower()}")(kind, ns, name, sub, query)
        except ApiError as err:
            self._fail(err)
        except (BrokenPipeError, ConnectionResetError):
            return

    def do_GET(self) -> None:
        self._do("GET")

    def do_PATCH(self) -> None:
        self._do("PATCH")

    def do_POST(self) -> None:
        self._do("POST")

    def do_PUT(self) -> None:
        self._do("PUT")

    def do_DELETE(self) -> None:
        self._do("DELETE")

    # ---------------------------------------------------------------- verbs

    def _get(self, kind: Kind, ns: str | None, name: str | None, sub: str | None, q: Any) -> None:
        api = self.standin.api
        if name:
            self._send(200, api.get(kind, ns, name))
            return
        if q.get("watch", ["false"])[0] in ("true", "1"):
            self._watch(kind, ns, q)
            return
        listing = api.list(kind, ns)
        self._send(
            200,
            {
                "apiVersion": kind.api_version,
                "kind": f"{kind.kind}List",
                "metadata": {"resourceVersion": listing.resource_version},
                "items": listing.items,
            },
        )

    def _watch(self, kind: Kind, ns: str | None, q: Any) -> None:
        api = self.standin.api
        rv = q.get("resourceVersion", ["0"])[0]
        asked = q.get("timeoutSeconds", [None])[0]
        with self.standin._lock:
            self.standin.watch_timeouts.append(asked)
        timeout = float(asked or 0) or self.standin.default_watch_s
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            for ev in api.watch(kind, rv, namespace=ns, timeout_s=timeout):
                line = json.dumps({"type": ev.type, "object": ev.object}) + "\n"
                self.wfile.write(line.encode())
                self.wfile.flush()
        except ApiError as err:
            line = json.dumps({"type": "ERROR", "object": _status(err)}) + "\n"
            self.wfile.write(line.encode())

    def _patch(self, kind: Kind, ns: str | None, name: str | None, sub: str | None, q: Any) -> None:
        s, api = self.standin, self.standin.api
        ctype = self.headers.get("Content-Type", "")
        if not ctype.startswith("application/merge-patch+json"):
            raise ApiError(
                415, "UnsupportedMediaType", f"the stand-in takes merge patches: {ctype}"
            )
        body = self._body()
        assert name is not None
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "a merge patch must be an object")
        current = api.get(kind, ns, name)
        merged = merge_patch(current, body)
        if f"{kind.api_version}/{kind.kind}" in _SCHEMA_KINDS:
            s.check(f"PATCH {kind.key} {name}{'/' + sub if sub else ''}", merged)
        elif set(body) - {"metadata", "status"}:
            with s._lock:
                s.invalid.append(
                    f"PATCH {kind.key} {name}: writes {sorted(body)} of a custom resource"
                )
        self._send(200, api.patch(kind, ns, name, body, status=sub == "status"))

    def _post(self, kind: Kind, ns: str | None, name: str | None, sub: str | None, q: Any) -> None:
        s, api = self.standin, self.standin.api
        body = self._body() or {}
        if kind.key == "pods" and sub == "binding" and name and ns:
            s.check(f"POST pods/{name}/binding", body)
            if body.get("metadata", {}).get("name") != name:
                s.invalid.append(f"binding of {name} names {body.get('metadata')}")
            uid = (body.get("metadata") or {}).get("uid")
            api.bind(ns, name, body["target"]["name"], uid=uid)
            self._send(
                201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
            )
            return
        if kind.key == "pods" and sub == "eviction" and name and ns:
            s.check(f"POST pods/{name}/eviction", body)
            pre = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
            api.evict(ns, name, uid=pre)
            self._send(
                201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
            )
            return
        if name:
            raise ApiError(405, "MethodNotAllowed", f"POST {kind.key}/{name}/{sub}")
        s.check(f"POST {kind.key}", body)
        self._send(201, api.create(kind, ns, body))

    def _put(self, kind: Kind, ns: str | None, name: str | None, sub: str | None, q: Any) -> None:
        body = self._body() or {}
        assert name is not None
        self.standin.check(f"PUT {kind.key} {name}", body)
        self._send(200, self.standin.api.replace(kind, ns, name, body))

    def _delete(
        self, kind: Kind, ns: str | None, name: str | None, sub: str | None, q: Any
    ) -> None:
        body = self._body() or {}
        assert name is not None
        if body:
            self.standin.check(
                f"DELETE {kind.key} {name}",
                {"apiVersion": "v1", "kind": "DeleteOptions", **body},
                schema="deleteoptions-meta-v1.json",
            )
        uid = (body.get("preconditions") or {}).get("uid")
        self.standin.api.delete(kind, ns, name, uid=uid)
        self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200})


def _validate_file(name: str, data: dict[str, Any]) -> None:
    """``kubernetes_validate.validate`` with the schema file given by name."""
    import jsonschema
    from kubernetes_validate.utils import ValidationError, schema_contents
    from referencing import Registry, Resource

    folder = f"kubernetes-json-schema/v{K8S_VERSION}.0-local-strict"
    schema = schema_contents(f"{folder}/{name}", K8S_VERSION)
    defs = schema_contents(f"{folder}/_definitions.json", K8S_VERSION)
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    try:
        jsonschema.validators.Draft202012Validator(schema, registry=registry).validate(data)
    except jsonschema.ValidationError as err:
        raise ValidationError(err, version=K8S_VERSION) from None


def _status(err: ApiError) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": err.message,
        "reason": err.reason,
        "code": err.status or 503,
    }
