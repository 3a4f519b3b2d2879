"""``deploy/``: every manifest valid against the Kubernetes 1.37 schemas, the ConfigMap's
configuration equal to the defaults, and the RBAC exactly what serve uses — every call of
every code path below (cycles in both modes, leader election, preemption, a move plan) is
granted as the API server's RBAC authorizer reads the rules (namespaces, resourceNames), and
every verb granted is used by one; the webhook makes no call at all."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from kubesim import Controller, Kubelet, Scheduler, settle
from objects import node, pod

from gangplan.adapters.serve.api import KINDS, ApiError, Kind
from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.config import ServeConfig, load_config
from gangplan.adapters.serve.leader import LeaseElector
from gangplan.adapters.serve.loop import ServeLoop, watched_kinds
from gangplan.adapters.serve.memory import Fault, InMemoryApi
from gangplan.solver.result import SolverConfig

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
SOLVER = SolverConfig(deterministic=True, deterministic_time=1.0)


def _docs() -> list[dict[str, Any]]:
    out = []
    for f in sorted(DEPLOY.glob("*.yaml")):
        if f.name != "kustomization.yaml":
            out += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return out


def test_the_manifests_are_valid_objects() -> None:
    docs = _docs()
    assert {d["kind"] for d in docs} >= {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
        "MutatingWebhookConfiguration",
    }
    for d in docs:
        kubernetes_validate.validate(d, "1.37", strict=True)
    (gangplan,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "gangplan"
    ]
    assert gangplan["spec"]["replicas"] == 2
    kust = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert sorted(kust["resources"]) == sorted(
        f.name for f in DEPLOY.glob("*.yaml") if f.name != "kustomization.yaml"
    )


def test_the_configmap_holds_the_defaults(tmp_path: Path) -> None:
    (cm,) = [d for d in _docs() if d["kind"] == "ConfigMap"]
    f = tmp_path / "serve.yaml"
    f.write_text(cm["data"]["serve.yaml"])
    assert load_config(f) == ServeConfig()


@dataclass(frozen=True)
class Call:
    """One API call as RBAC sees it: group, resource[/subresource], verb, namespace (None:
    cluster-wide) and name (None: a collection)."""

    group: str
    resource: str
    verb: str
    namespace: str | None
    name: str | None


SERVICE_ACCOUNT = ("gangplan", "gangplan-system")


def _rules() -> list[tuple[str | None, dict[str, Any]]]:
    """The rules bound to the service account, each with the namespace it holds in (None:
    every namespace, a ClusterRoleBinding's), as the RBAC authorizer reads them."""
    docs = _docs()
    roles = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("ClusterRole", "Role")
    }
    out: list[tuple[str | None, dict[str, Any]]] = []
    for b in docs:
        if b["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(
            s.get("kind") == "ServiceAccount" and (s["name"], s.get("namespace")) == SERVICE_ACCOUNT
            for s in b["subjects"]
        ):
            continue
        ns = b["metadata"]["namespace"] if b["kind"] == "RoleBinding" else None
        ref = b["roleRef"]
        role = roles[(ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"])]
        out += [(ns, rule) for rule in role["rules"]]
    return out


def allows(rules: list[tuple[str | None, dict[str, Any]]], call: Call) -> bool:
    """Whether a rule grants ``call`` (Kubernetes, "Using RBAC Authorization": a Role's rules
    hold in its namespace only; a rule with ``resourceNames`` only for requests that name one
    of them, so never a list, a watch or a create)."""
    for ns, rule in rules:
        if ns is not None and call.namespace != ns:
            continue
        if call.group not in rule["apiGroups"] or call.resource not in rule["resources"]:
            continue
        if call.verb not in rule["verbs"]:
            continue
        names = rule.get("resourceNames")
        if names and call.name not in names:
            continue
        return True
    return False


class Authorizing:
    """The port behind deploy/'s RBAC: every call is recorded; one the rules do not grant
    is recorded in ``denied`` and answered 403, as the API server would."""

    def __init__(self, api: InMemoryApi):
        self.api = api
        self.rules = _rules()
        self.used: set[tuple[str, str, str]] = set()
        self.denied: list[Call] = []

    def _note(
        self, kind: Kind, verb: str, ns: str | None, name: str | None = None, sub: str = ""
    ) -> None:
        call = Call(kind.group, kind.plural + (f"/{sub}" if sub else ""), verb, ns, name)
        self.used.add((call.group, call.resource, call.verb))
        if not allows(self.rules, call):
            self.denied.append(call)
            raise ApiError(403, "Forbidden", f"{call} is not granted by deploy/")

    def list(self, kind: Kind, namespace: str | None = None) -> Any:
        self._note(kind, "list", namespace)
        return self.api.list(kind, namespace)

    def watch(self, kind: Kind, rv: str, **kw: Any) -> Any:
        self._note(kind, "watch", kw.get("namespace"))
        return self.api.watch(kind, rv, **kw)

    def get(self, kind: Kind, ns: str | None, name: str) -> Any:
        self._note(kind, "get", ns, name)
        return self.api.get(kind, ns, name)

    def patch(
        self, kind: Kind, ns: str | None, name: str, body: Any, *, status: bool = False
    ) -> Any:
        self._note(kind, "patch", ns, name, "status" if status else "")
        return self.api.patch(kind, ns, name, body, status=status)

    def delete(self, kind: Kind, ns: str | None, name: str, *, uid: str | None = None) -> None:
        self._note(kind, "delete", ns, name)
        self.api.delete(kind, ns, name, uid=uid)

    def bind(self, ns: str, pod: str, node: str, *, uid: str | None = None) -> None:
        self._note(KINDS["pods"], "create", ns, pod, "binding")
        self.api.bind(ns, pod, node, uid=uid)

    def evict(self, ns: str, pod: str, *, uid: str | None = None) -> None:
        self._note(KINDS["pods"], "create", ns, pod, "eviction")
        self.api.evict(ns, pod, uid=uid)

    def create(self, kind: Kind, ns: str | None, body: Any) -> Any:
        self._note(kind, "create", ns)
        return self.api.create(kind, ns, body)

    def replace(self, kind: Kind, ns: str | None, name: str, body: Any) -> Any:
        self._note(kind, "update", ns, name)
        return self.api.replace(kind, ns, name, body)


def _granted() -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for _ns, rule in _rules()
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def _cycles_and_leases(mode: str, rec: Authorizing, api: InMemoryApi, clock: FakeClock) -> None:
    """Every PodGroup flavour, a gang taken back, a Binding answered 409, the Lease created,
    renewed and given up."""
    for i in range(2):
        api.put(node(f"n{i}", gpus=8))
    ctl = Controller(api, scheduler="gangplan" if mode == "bind" else None)
    ctl.add("g", 2, gpus=8)
    ctl.add("never", 3, gpus=8)  # pending: events, PodScheduled, PodGroup status
    for group, label in (
        ("scheduling.x-k8s.io", "scheduling.x-k8s.io/pod-group"),
        ("scheduling.sigs.k8s.io", "pod-group.scheduling.sigs.k8s.io"),
    ):
        api.put(
            {
                "apiVersion": f"{group}/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": group.split(".")[1], "namespace": "ml"},
                "spec": {"minMember": 9},
            }
        )
        for i in range(9):
            p = pod(f"{group}-{i}", labels={label: group.split(".")[1]}, gated=mode == "gate")
            if mode == "bind":
                p["spec"]["schedulerName"] = "gangplan"
            api.put(p)
    api.put(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "up", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 9}}},
        }
    )
    for i in range(9):
        p = pod(f"up-{i}", gated=mode == "gate", scheduler="gangplan" if mode == "bind" else None)
        p["spec"]["schedulingGroup"] = {"podGroupName": "up"}
        api.put(p)
    if mode == "bind":  # a Binding answered 409: read back
        api.faults.add(Fault("bind", 409, skip=1))
    elector = LeaseElector(rec, clock, "a", namespace="gangplan-system", name="gangplan")
    for source in ("volcano", "kueue", "elasticquota"):
        cfg = ServeConfig(mode=mode, queue_source=source, bind_timeout_s=8)  # type: ignore[arg-type]
        loop = ServeLoop(
            rec,  # type: ignore[arg-type]
            cfg,
            clock=clock,
            solver=SOLVER,
            elector=elector,
            emit=lambda _: None,
        )
        sched = Scheduler(api) if mode == "gate" else None
        kubelet = Kubelet(api, clock, duration=5)
        kubelet.reject.add("g-1")  # a rejection: g is taken back (evict / delete)
        # gate mode: first without kube-scheduler, so the watchdog takes g back too
        settle(loop, None, kubelet, ctl, clock, 6)
        settle(loop, sched, kubelet, ctl, clock, 6)
        clock.advance(30)
    assert elector.tick()
    elector.release()


def _preemption(mode: str, rec: Authorizing, api: InMemoryApi, clock: FakeClock) -> list[str]:
    """A pending gang that evicts a running one (test_preempt's cluster), a
    PodDisruptionBudget in the victims' namespace."""
    import test_preempt

    api.put(node("n0", gpus=8))
    test_preempt._kueue(api)
    for name in ("low-0", "low-1"):
        api.put(test_preempt._pod(name, "low", 2, 4, 0, "n0"))
    high = test_preempt._pod("high-0", "high", 1, 8, 100, None)
    if mode == "bind":  # gangplan's own pod: its schedulerName, no gate
        high["spec"]["schedulerName"] = "gangplan"
        high["spec"].pop("schedulingGates", None)
    api.put(high)
    api.put(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "low", "namespace": "ml"},
            "spec": {"maxUnavailable": 2, "selector": {"matchLabels": {"gang": "low"}}},
        }
    )
    cfg = ServeConfig(mode=mode, queue_source="kueue", preemption=True)  # type: ignore[arg-type]
    loop = ServeLoop(rec, cfg, clock=clock, solver=SOLVER, emit=lambda _: None)  # type: ignore[arg-type]
    loop.cycle()
    return sorted(c.name for c in api.calls if c.verb == "evict")


def _moves(rec: Authorizing, api: InMemoryApi, clock: FakeClock) -> list[str]:
    """``gangplan apply MOVES.yaml``: a one-wave move (test_moves' cluster), with a
    PodDisruptionBudget counted first."""
    import test_moves

    from gangplan.adapters.serve.moves import apply_moves
    from gangplan.models import MovePlan, Wave

    w, where = test_moves._started(api, clock)
    api.put(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "a", "namespace": "ml"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"gang": "a"}}},
        }
    )
    free = test_moves._other(where, "a-0")
    plan = MovePlan(
        waves=(Wave(index=0, moves=(test_moves._move("a", [("a-0", where["a-0"], free)]),)),)
    )
    reports = apply_moves(rec, ServeConfig(), plan, wait=w.step, clock=clock)  # type: ignore[arg-type]
    return [p for r in reports for p in r.evicted]


def _scenarios() -> tuple[Authorizing, dict[str, list[str]]]:
    """Every code path of serve against deploy/'s RBAC: cycles in both modes over every
    PodGroup flavour and queue source, leader election, preemption in both modes, and a
    move plan. One :class:`Authorizing` port records them all; returned with the pods each
    evicting path evicted."""
    clock = FakeClock()
    api = InMemoryApi(clock)
    rec = Authorizing(api)
    evicted = {}
    for mode in ("gate", "bind"):
        clock = FakeClock()
        rec.api = api = InMemoryApi(clock)
        _cycles_and_leases(mode, rec, api, clock)
        clock = FakeClock()
        rec.api = api = InMemoryApi(clock)
        evicted[f"preemption, {mode}"] = _preemption(mode, rec, api, clock)
    clock = FakeClock()
    rec.api = api = InMemoryApi(clock)
    evicted["moves"] = _moves(rec, api, clock)
    return rec, evicted


def test_the_rbac_grants_exactly_what_serve_uses() -> None:
    # issue 26, finding 8: evictions list the PodDisruptionBudgets first, which deploy/ did
    # not grant (every eviction stopped at a 403); preemption and moves were never run here
    rec, evicted = _scenarios()
    assert rec.denied == [], "calls the RBAC does not allow"
    # each path got as far as its evictions (a denied call would have stopped it first)
    assert evicted == {
        "preemption, gate": ["low-0", "low-1"],
        "preemption, bind": ["low-0", "low-1"],
        "moves": ["ml/a-0"],
    }
    granted = _granted()
    reads = {
        (k.group, k.plural, v)
        for src in ("volcano", "kueue", "elasticquota")
        for k in watched_kinds(ServeConfig(queue_source=src))  # type: ignore[arg-type]
        for v in ("list", "watch")
    }
    assert granted - rec.used - reads == set(), "rights granted that no call uses"


def test_the_authorizer_reads_namespaces_and_resource_names() -> None:
    # the rules above as the API server reads them, worked out by hand from deploy/rbac.yaml
    rules = _rules()
    lease = ("coordination.k8s.io", "leases")
    assert allows(rules, Call(*lease, "get", "gangplan-system", "gangplan"))
    assert not allows(rules, Call(*lease, "get", "gangplan-system", "other"))  # resourceNames
    assert not allows(rules, Call(*lease, "get", "ml", "gangplan"))  # a Role: its namespace
    assert allows(rules, Call(*lease, "create", "gangplan-system", None))
    assert not allows(rules, Call(*lease, "list", "gangplan-system", None))
    assert allows(rules, Call("", "pods", "list", None, None))  # a ClusterRole: everywhere
    assert not allows(rules, Call("", "nodes", "patch", None, "n0"))
    assert not allows(rules, Call("", "secrets", "get", "ml", "token"))


def test_the_webhook_calls_no_api() -> None:
    # its Deployment mounts no token, so it must make no call: its module imports no client
    import ast

    import gangplan.adapters.serve.webhook as webhook

    (dep,) = [
        d
        for d in _docs()
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "gangplan-webhook"
    ]
    assert dep["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    tree = ast.parse(Path(webhook.__file__).read_text())
    imported = {
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    assert not {m for m in imported if m and ("kubernetes" in m or m.endswith(".client"))}


def test_the_image_is_built_non_root_from_the_pyproject_and_the_tested_versions() -> None:
    # issue 26, finding 12: deploy/ named image gangplan:0.1.0 and nothing built it
    import tomllib

    from packaging.requirements import Requirement

    root = DEPLOY.parent
    lines = [ln.split("#")[0].strip() for ln in (root / "Dockerfile").read_text().splitlines()]
    assert any(ln.startswith("FROM python:3.11-slim") for ln in lines)
    assert "RUN pip install -c constraints.txt . && rm -rf /src" in lines
    user = [ln for ln in lines if ln.startswith("USER ")][-1]
    assert user.split()[1].split(":")[0].isdigit() and not user.split()[1].startswith("0")
    pins = {}
    for ln in (root / "constraints.txt").read_text().splitlines():
        if ln and not ln.startswith("#"):
            name, _, version = ln.partition("==")
            pins[name] = version
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in map(Requirement, deps):
        name = dep.name.lower().replace("_", "-")
        assert name in pins, f"{name}: not pinned in constraints.txt"
        assert dep.specifier.contains(pins[name]), f"{name}=={pins[name]}: not {dep.specifier}"
    (serve,) = [
        d for d in _docs() if d["kind"] == "Deployment" and d["metadata"]["name"] == "gangplan"
    ]
    assert serve["spec"]["template"]["spec"]["containers"][0]["image"] == "gangplan:0.1.0"
    assert "docker build -t gangplan:0.1.0 ." in (root / "docs" / "serve.md").read_text()
