"""The API port over the official ``kubernetes`` client: :class:`OfficialApi`.

Core objects (pods, nodes) go through ``CoreV1Api``; every other group — PriorityClasses,
PodGroups of each flavour, queues, Leases, Events — through ``CustomObjectsApi``, which
builds the same ``/apis/{group}/{version}/...`` paths for built-in groups as for custom
resources. Responses are read raw (``_preload_content=False``) into plain dicts, so a list
of 50,000 pods is not turned into client models and back. Watches ask for bookmarks and are
read line by line, each bounded by ``timeoutSeconds`` (:func:`watch_seconds`: never 0);
patches are sent as JSON merge patches (``application/merge-patch+json``: the client would
otherwise pick JSON patch).

:func:`load_client` builds the ``ApiClient`` from a kubeconfig or, inside a pod, the
service account (``kubernetes.config``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from gangplan.adapters.serve.api import ApiError, Kind, Listing, Obj, WatchEvent

__all__ = ["MIN_WATCH_S", "OfficialApi", "load_client", "watch_seconds"]

MIN_WATCH_S = 1
"""The shortest watch asked of the API server (``timeoutSeconds``), and what "what is there
now" (``timeout_s=0``) becomes: a watch cannot be asked to end at once."""


def watch_seconds(timeout_s: float) -> int:
    """The ``timeoutSeconds`` of a watch meant to last ``timeout_s``: a whole number of
    seconds, never below :data:`MIN_WATCH_S`. Never 0 and never absent: the API server reads
    both as its own default, ``--min-request-timeout`` (1800 s) times a random factor in
    [1, 2) (``ListResource`` in ``k8s.io/apiserver/pkg/endpoints/handlers/get.go``), so a
    watch "for what is there now" would be held open 30 to 60 minutes, until the client's
    read timeout cut it (an error, and none of the events it sent counted)."""
    return max(MIN_WATCH_S, math.ceil(timeout_s)) if math.isfinite(timeout_s) else 3600


_MERGE = "application/merge-patch+json"


def load_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A ``kubernetes.client.ApiClient``: from ``kubeconfig`` (and ``context``) when given,
    else in-cluster (service account) when running in a pod, else ``~/.kube/config``.

    Raises:
        ApiError: status 0 when no configuration can be loaded (the message says why).
    """
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        if kubeconfig:
            config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=cfg
            )
        else:
            try:
                config.load_incluster_config(client_configuration=cfg)
            except config.ConfigException:
                config.load_kube_config(context=context, client_configuration=cfg)
    except (config.ConfigException, OSError) as err:
        raise ApiError(0, "NoConfiguration", str(err)) from None
    return client.ApiClient(cfg)


def _error(err: Exception) -> ApiError:
    from kubernetes.client.exceptions import ApiException

    if isinstance(err, ApiException):
        status = int(err.status or 0)
        reason, message = str(err.reason or ""), ""
        try:
            body = json.loads(err.body) if err.body else {}
            reason = body.get("reason") or reason
            message = body.get("message") or ""
        except (ValueError, TypeError, AttributeError):
            message = str(err.body or "")[:200]
        retry = None
        headers = err.headers or {}
        if headers.get("Retry-After"):
            try:
                retry = float(headers["Retry-After"])
            except ValueError:
                retry = None
        return ApiError(status, reason, message, retry_after=retry)
    return ApiError(0, type(err).__name__, _cause(err)[:300])


def _cause(err: BaseException) -> str:
    """The innermost reason of a connection failure, without urllib3's wrapping: urllib3's
    ``MaxRetryError`` carries its cause as ``reason``, whose text starts with the connection
    object (``HTTPSConnection(host=..., port=...): Failed to ...``)."""
    inner: object = err
    for _ in range(5):
        nxt = getattr(inner, "reason", None)
        if not isinstance(nxt, BaseException):
            break
        inner = nxt
    text = str(inner)
    head, sep, tail = text.partition("): ")
    return tail if sep and "(" in head else text


def _read(resp: Any) -> Obj:
    data = resp.data if hasattr(resp, "data") else resp.read()
    return json.loads(data) if data else {}


class OfficialApi:
    """:class:`~gangplan.adapters.serve.api.KubeApi` with the official client.

    ``api_client``: a ``kubernetes.client.ApiClient`` (:func:`load_client`);
    ``field_manager``: the name written to ``managedFields`` of what gangplan changes;
    ``request_timeout_s``: the client-side timeout of every call but watches.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        field_manager: str = "gangplan",
        request_timeout_s: float = 30.0,
    ):
        from kubernetes import client

        self._client = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.field_manager = field_manager
        self.timeout = request_timeout_s

    @property
    def host(self) -> str:
        """The API server's URL (``https://10.0.0.1:6443``), as the configuration gives it."""
        return str(getattr(self._client.configuration, "host", "") or "")

    # ------------------------------------------------------------------ reads

    def _list_call(self, kind: Kind, namespace: str | None) -> tuple[Any, dict[str, Any]]:
        """The list function for ``kind`` and its positional keyword arguments."""
        if kind.group == "":
            if not kind.namespaced:
                return self.core.list_node, {}
            if namespace:
                return self.core.list_namespaced_pod, {"namespace": namespace}
            return self.core.list_pod_for_all_namespaces, {}
        args = {"group": kind.group, "version": kind.version, "plural": kind.plural}
        if kind.namespaced and namespace:
            return self.custom.list_namespaced_custom_object, {**args, "namespace": namespace}
        return self.custom.list_cluster_custom_object, args

    def served_versions(self, group: str) -> tuple[str, ...] | None:
        """The versions of ``group`` the server's discovery (``GET /apis``, ``APIGroupList``)
        lists; None when it does not answer (the caller keeps the version it has)."""
        from kubernetes import client

        try:
            data = _read(
                client.ApisApi(self._client).get_api_versions(
                    _preload_content=False, _request_timeout=self.timeout
                )
            )
        except Exception:
            return None
        for g in data.get("groups") or []:
            if isinstance(g, dict) and g.get("name") == group:
                return tuple(
                    str(v.get("version"))
                    for v in g.get("versions") or []
                    if isinstance(v, dict) and v.get("version")
                )
        return ()

    def list(self, kind: Kind, namespace: str | None = None) -> Listing:
        func, args = self._list_call(kind, namespace)
        try:
            data = _read(func(**args, _preload_content=False, _request_timeout=self.timeout))
        except Exception as err:
            raise _error(err) from None
        api_version = data.get("apiVersion") or kind.api_version
        items = []
        for item in data.get("items") or []:
            item.setdefault("apiVersion", api_version if kind.group else "v1")
            item.setdefault("kind", kind.kind)
            items.append(item)
        return Listing(items, str((data.get("metadata") or {}).get("resourceVersion") or ""))

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        *,
        namespace: str | None = None,
        timeout_s: float = 60.0,
    ) -> Iterator[WatchEvent]:
        func, args = self._list_call(kind, namespace)
        seconds = watch_seconds(timeout_s)
        try:
            resp = func(
                **args,
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=seconds,
                _preload_content=False,
                _request_timeout=(self.timeout, seconds + self.timeout),
            )
        except Exception as err:
            raise _error(err) from None
        return self._events(resp)

    @staticmethod
    def _events(resp: Any) -> Iterator[WatchEvent]:
        """The events of a watch response, read with the client's line splitter
        (``kubernetes.watch.watch.iter_resp_lines``); an ``ERROR`` event (410 Gone for a
        too-old resourceVersion) becomes an :class:`ApiError`. ``Watch.stream`` is not used:
        with ``deserialize=False`` it fails on ERROR events (it reads a key it never set)."""
        from kubernetes.watch.watch import iter_resp_lines

        try:
            for line in iter_resp_lines(resp):
                if not line.strip():
                    continue
                ev = json.loads(line)
                etype, obj = ev.get("type"), ev.get("object") or {}
                if etype == "ERROR":
                    raise ApiError(
                        int(obj.get("code") or 0),
                        str(obj.get("reason") or ""),
                        str(obj.get("message") or ""),
                    )
                if etype in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
                    yield WatchEvent(etype, obj)
        except ApiError:
            raise
        except Exception as err:
            raise _error(err) from None
        finally:
            resp.close()
            resp.release_conn()

    def get(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        resp: Any
        try:
            if kind.group == "":
                resp = (
                    self.core.read_namespaced_pod(
                        name, namespace or "default", _preload_content=False
                    )
                    if kind.namespaced
                    else self.core.read_node(name, _preload_content=False)
                )
            elif kind.namespaced:
                resp = self.custom.get_namespaced_custom_object(
                    kind.group,
                    kind.version,
                    namespace or "default",
                    kind.plural,
                    name,
                    _preload_content=False,
                )
            else:
                resp = self.custom.get_cluster_custom_object(
                    kind.group, kind.version, kind.plural, name, _preload_content=False
                )
            return _read(resp)
        except Exception as err:
            raise _error(err) from None

    # ------------------------------------------------------------------ writes

    def patch(
        self, kind: Kind, namespace: str | None, name: str, patch: Obj, *, status: bool = False
    ) -> Obj:
        kw: dict[str, Any] = {
            "_preload_content": False,
            "_content_type": _MERGE,
            "_request_timeout": self.timeout,
            "field_manager": self.field_manager,
        }
        func: Any
        try:
            if kind.group == "" and kind.namespaced:
                func = (
                    self.core.patch_namespaced_pod_status
                    if status
                    else self.core.patch_namespaced_pod
                )
                resp = func(name, namespace or "default", patch, **kw)
            elif kind.group == "":
                func = self.core.patch_node_status if status else self.core.patch_node
                resp = func(name, patch, **kw)
            elif kind.namespaced:
                func = (
                    self.custom.patch_namespaced_custom_object_status
                    if status
                    else self.custom.patch_namespaced_custom_object
                )
                resp = func(
                    kind.group, kind.version, namespace or "default", kind.plural, name, patch, **kw
                )
            else:
                func = (
                    self.custom.patch_cluster_custom_object_status
                    if status
                    else self.custom.patch_cluster_custom_object
                )
                resp = func(kind.group, kind.version, kind.plural, name, patch, **kw)
            return _read(resp)
        except Exception as err:
            raise _error(err) from None

    def delete(
        self, kind: Kind, namespace: str | None, name: str, *, uid: str | None = None
    ) -> None:
        from kubernetes.client import V1DeleteOptions, V1Preconditions

        opts = V1DeleteOptions(preconditions=V1Preconditions(uid=uid) if uid else None)
        try:
            if kind.group == "" and kind.namespaced:
                self.core.delete_namespaced_pod(
                    name, namespace or "default", body=opts, _preload_content=False
                )
            elif kind.namespaced:
                self.custom.delete_namespaced_custom_object(
                    kind.group,
                    kind.version,
                    namespace or "default",
                    kind.plural,
                    name,
                    body=opts,
                    _preload_content=False,
                )
            else:
                self.custom.delete_cluster_custom_object(
                    kind.group, kind.version, kind.plural, name, body=opts, _preload_content=False
                )
        except Exception as err:
            raise _error(err) from None

    def bind(self, namespace: str, pod: str, node: str, *, uid: str | None = None) -> None:
        from kubernetes.client import V1Binding, V1ObjectMeta, V1ObjectReference

        body = V1Binding(
            api_version="v1",
            kind="Binding",
            metadata=V1ObjectMeta(name=pod, namespace=namespace, uid=uid),
            target=V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        try:
            self.core.create_namespaced_pod_binding(
                pod,
                namespace,
                body,
                field_manager=self.field_manager,
                _preload_content=False,
                _request_timeout=self.timeout,
            )
        except Exception as err:
            raise _error(err) from None

    def evict(self, namespace: str, pod: str, *, uid: str | None = None) -> None:
        from kubernetes.client import V1DeleteOptions, V1Eviction, V1ObjectMeta, V1Preconditions

        body = V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=V1ObjectMeta(name=pod, namespace=namespace),
            delete_options=V1DeleteOptions(preconditions=V1Preconditions(uid=uid)) if uid else None,
        )
        try:
            self.core.create_namespaced_pod_eviction(
                pod, namespace, body, _preload_content=False, _request_timeout=self.timeout
            )
        except Exception as err:
            raise _error(err) from None

    def create(self, kind: Kind, namespace: str | None, body: Obj) -> Obj:
        try:
            if kind.group == "":
                raise ApiError(405, "MethodNotAllowed", f"gangplan does not create {kind.key}")
            if kind.namespaced:
                resp = self.custom.create_namespaced_custom_object(
                    kind.group,
                    kind.version,
                    namespace or "default",
                    kind.plural,
                    body,
                    field_manager=self.field_manager,
                    _preload_content=False,
                )
            else:
                resp = self.custom.create_cluster_custom_object(
                    kind.group,
                    kind.version,
                    kind.plural,
                    body,
                    field_manager=self.field_manager,
                    _preload_content=False,
                )
            return _read(resp)
        except ApiError:
            raise
        except Exception as err:
            raise _error(err) from None

    def replace(self, kind: Kind, namespace: str | None, name: str, body: Obj) -> Obj:
        try:
            if kind.group == "":
                raise ApiError(405, "MethodNotAllowed", f"gangplan does not replace {kind.key}")
            if kind.namespaced:
                resp = self.custom.replace_namespaced_custom_object(
                    kind.group,
                    kind.version,
                    namespace or "default",
                    kind.plural,
                    name,
                    body,
                    field_manager=self.field_manager,
                    _preload_content=False,
                )
            else:
                resp = self.custom.replace_cluster_custom_object(
                    kind.group,
                    kind.version,
                    kind.plural,
                    name,
                    body,
                    field_manager=self.field_manager,
                    _preload_content=False,
                )
            return _read(resp)
        except ApiError:
            raise
        except Exception as err:
            raise _error(err) from None
