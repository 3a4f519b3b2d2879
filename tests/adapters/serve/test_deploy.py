"""``deploy/``: every manifest valid against the Kubernetes 1.37 schemas, the ConfigMap's
configuration equal to the defaults, and the RBAC exactly what the loop uses — every call
it makes in the scenarios below is granted, and every verb granted is used by one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from kubesim import Controller, Kubelet, Scheduler, settle
from objects import node, pod

from gangplan.adapters.serve.api import KINDS, Kind
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


class Recording:
    """The port, recording (API group, resource[/subresource], RBAC verb) of every call."""

    def __init__(self, api: InMemoryApi):
        self.api = api
        self.used: set[tuple[str, str, str]] = set()

    def _note(self, kind: Kind, verb: str, sub: str = "") -> None:
        self.used.add((kind.group, kind.plural + (f"/{sub}" if sub else ""), verb))

    def list(self, kind: Kind, namespace: str | None = None) -> Any:
        self._note(kind, "list")
        return self.api.list(kind, namespace)

    def watch(self, kind: Kind, rv: str, **kw: Any) -> Any:
        self._note(kind, "watch")
        return self.api.watch(kind, rv, **kw)

    def get(self, kind: Kind, ns: str | None, name: str) -> Any:
        self._note(kind, "get")
        return self.api.get(kind, ns, name)

    def patch(
        self, kind: Kind, ns: str | None, name: str, body: Any, *, status: bool = False
    ) -> Any:
        self._note(kind, "patch", "status" if status else "")
        return self.api.patch(kind, ns, name, body, status=status)

    def delete(self, kind: Kind, ns: str | None, name: str, *, uid: str | None = None) -> None:
        self._note(kind, "delete")
        self.api.delete(kind, ns, name, uid=uid)

    def bind(self, ns: str, pod: str, node: str, *, uid: str | None = None) -> None:
        self._note(KINDS["pods"], "create", "binding")
        self.api.bind(ns, pod, node, uid=uid)

    def evict(self, ns: str, pod: str, *, uid: str | None = None) -> None:
        self._note(KINDS["pods"], "create", "eviction")
        self.api.evict(ns, pod, uid=uid)

    def create(self, kind: Kind, ns: str | None, body: Any) -> Any:
        self._note(kind, "create")
        return self.api.create(kind, ns, body)

    def replace(self, kind: Kind, ns: str | None, name: str, body: Any) -> Any:
        self._note(kind, "update")
        return self.api.replace(kind, ns, name, body)


def _granted() -> set[tuple[str, str, str]]:
    out = set()
    for d in _docs():
        if d["kind"] in ("ClusterRole", "Role"):
            for rule in d["rules"]:
                for g in rule["apiGroups"]:
                    for r in rule["resources"]:
                        for v in rule["verbs"]:
                            out.add((g, r, v))
    return out


def _scenarios() -> set[tuple[str, str, str]]:
    used: set[tuple[str, str, str]] = set()
    for mode in ("gate", "bind"):
        clock = FakeClock()
        api = InMemoryApi(clock)
        rec = Recording(api)
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
            p = pod(
                f"up-{i}", gated=mode == "gate", scheduler="gangplan" if mode == "bind" else None
            )
            p["spec"]["schedulingGroup"] = {"podGroupName": "up"}
            api.put(p)
        if mode == "bind":  # a Binding answered 409: read back
            api.faults.add(Fault("bind", 409, skip=1))
        elector = LeaseElector(rec, clock, "a", namespace="gangplan-system", name="gangplan")
        for source in ("volcano", "kueue", "elasticquota"):
            cfg = ServeConfig(mode=mode, queue_source=source, bind_timeout_s=8)  # type: ignore[arg-type]
            loop = ServeLoop(
                rec, cfg, clock=clock, solver=SOLVER, elector=elector, emit=lambda _: None
            )  # type: ignore[arg-type]
            sched = Scheduler(api) if mode == "gate" else None
            kubelet = Kubelet(api, clock, duration=5)
            kubelet.reject.add("g-1")  # a rejection: g is taken back (evict / delete)
            # gate mode: first without kube-scheduler, so the watchdog takes g back too
            settle(loop, None, kubelet, ctl, clock, 6)
            settle(loop, sched, kubelet, ctl, clock, 6)
            clock.advance(30)
        used |= rec.used
    return used


def test_the_rbac_grants_exactly_what_the_loop_uses() -> None:
    used = _scenarios()
    granted = _granted()
    assert used - granted == set(), "calls the RBAC does not allow"
    reads = {
        (k.group, k.plural, v)
        for src in ("volcano", "kueue", "elasticquota")
        for k in watched_kinds(ServeConfig(queue_source=src))
        for v in ("list", "watch")
    }  # type: ignore[arg-type]
    assert granted - used - reads == set(), "rights granted that no call uses"
