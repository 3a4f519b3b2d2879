"""A small simulated cluster around :class:`InMemoryApi`: kube-scheduler for ungated pods,
kubelets that admit, run and finish bound pods, and a job controller that recreates the
pods of its gangs — plus :func:`final_check`, the fault tests' verdict on the cluster.

* :class:`Scheduler` (mode gate's kube-scheduler): binds each pod that has no gate, no
  node, and a ``kubernetes.io/hostname`` nodeSelector, to that node — if the node exists;
  it does not check capacity (the kubelet does), as a scheduler with a stale cache would not.
* :class:`Kubelet`: a bound Pending pod is admitted if its node's GPUs cover it and the
  Running pods there, else it fails with reason ``OutOfgpu``; pods named in ``reject`` fail
  with ``UnexpectedAdmissionError``; a Running pod succeeds ``duration`` seconds after it
  started (fake clock).
* :class:`Controller`: for each gang it owns, keeps its pods: a pod deleted, or Failed (on
  its next round), is (deleted and) created again, gated, with a new UID; once every pod
  of a gang succeeded, the gang is finished and its pods go.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from objects import GATE, pod

from gangplan.adapters.kube.read import KubeOptions, read_kube
from gangplan.adapters.serve.api import KINDS
from gangplan.adapters.serve.clock import FakeClock, parse_time, rfc3339
from gangplan.adapters.serve.memory import InMemoryApi
from gangplan.models import Plan, PodPlacement
from gangplan.solver.judges.verify import verify

PODS, NODES = KINDS["pods"], KINDS["nodes"]
GPU = "nvidia.com/gpu"


def _gpus(p: dict[str, Any]) -> int:
    c = p["spec"]["containers"][0]["resources"]
    return int((c.get("limits") or {}).get(GPU, (c.get("requests") or {}).get(GPU, 0)))


class Scheduler:
    def __init__(self, api: InMemoryApi):
        self.api = api

    def step(self) -> int:
        hosts = {
            n["metadata"]["labels"].get("kubernetes.io/hostname", n["metadata"]["name"]): n[
                "metadata"
            ]["name"]
            for n in self.api.objects(NODES)
        }
        n = 0
        for p in self.api.objects(PODS):
            spec = p["spec"]
            if spec.get("nodeName") or spec.get("schedulingGates"):
                continue
            if spec.get("schedulerName", "default-scheduler") != "default-scheduler":
                continue
            host = (spec.get("nodeSelector") or {}).get("kubernetes.io/hostname")
            if host in hosts:
                meta = p["metadata"]
                self.api.bind(meta["namespace"], meta["name"], hosts[host], uid=meta["uid"])
                n += 1
        return n


class Kubelet:
    def __init__(self, api: InMemoryApi, clock: FakeClock, duration: float = 30.0):
        self.api, self.clock, self.duration = api, clock, duration
        self.reject: set[str] = set()
        self.rejected: list[str] = []

    def _set(self, p: dict[str, Any], phase: str, **status: Any) -> None:
        p = {**p, "status": {**p.get("status", {}), "phase": phase, **status}}
        self.api.put(p)

    def step(self) -> None:
        nodes = {n["metadata"]["name"]: n for n in self.api.objects(NODES)}
        pods = self.api.objects(PODS)
        running: dict[str, int] = defaultdict(int)
        for p in pods:
            if p["spec"].get("nodeName") and p["status"].get("phase") == "Running":
                running[p["spec"]["nodeName"]] += _gpus(p)
        now = self.clock.now()
        for p in pods:
            node = p["spec"].get("nodeName")
            phase = p["status"].get("phase")
            if not node:
                continue
            if phase == "Pending":
                name = p["metadata"]["name"]
                cap = int(
                    (nodes.get(node) or {}).get("status", {}).get("allocatable", {}).get(GPU, 0)
                )
                if name in self.reject:
                    self.reject.discard(name)
                    self.rejected.append(name)
                    self._set(
                        p,
                        "Failed",
                        reason="UnexpectedAdmissionError",
                        message="device plugin: allocation failed",
                    )
                elif node not in nodes or running[node] + _gpus(p) > cap:
                    self.rejected.append(name)
                    self._set(
                        p,
                        "Failed",
                        reason="OutOfgpu",
                        message=f"Node didn't have enough resource: {GPU}",
                    )
                else:
                    running[node] += _gpus(p)
                    self._set(p, "Running", startTime=rfc3339(now))
            elif phase == "Running":
                started = parse_time(p["status"].get("startTime")) or now
                if now - started >= self.duration:
                    self._set(p, "Succeeded")


class Controller:
    """Owns gangs: ``add(group, n, gpus)`` creates them (gated, or for mode bind naming
    ``scheduler``)."""

    def __init__(self, api: InMemoryApi, *, scheduler: str | None = None, ns: str = "ml"):
        self.api, self.scheduler, self.ns = api, scheduler, ns
        self.gangs: dict[str, tuple[int, int]] = {}
        self.finished: list[str] = []
        self.recreated = 0
        self._failed_seen: set[str] = set()

    def _pod(self, group: str, i: int, gpus: int) -> dict[str, Any]:
        return pod(
            f"{group}-{i}",
            ns=self.ns,
            gpus=gpus,
            group=group,
            gated=self.scheduler is None,
            scheduler=self.scheduler,
        )

    def add(self, group: str, n: int, gpus: int = 1) -> None:
        self.api.put(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": group, "namespace": self.ns},
                "spec": {"minMember": n},
            }
        )
        self.gangs[group] = (n, gpus)
        for i in range(n):
            self.api.put(self._pod(group, i, gpus))

    def step(self) -> None:
        pods = {p["metadata"]["name"]: p for p in self.api.objects(PODS)}
        for group, (n, gpus) in list(self.gangs.items()):
            mine = [pods.get(f"{group}-{i}") for i in range(n)]
            if all(p is not None and p["status"].get("phase") == "Succeeded" for p in mine):
                for i in range(n):
                    self.api.remove(PODS, self.ns, f"{group}-{i}")
                self.api.remove(KINDS["podgroups.scheduling.volcano.sh"], self.ns, group)
                del self.gangs[group]
                self.finished.append(group)
                continue
            for i, p in enumerate(mine):
                if p is not None and p["status"].get("phase") == "Failed":
                    uid = p["metadata"]["uid"]
                    if uid not in self._failed_seen:  # replaced on the next round
                        self._failed_seen.add(uid)
                        continue
                    self.api.remove(PODS, self.ns, f"{group}-{i}")
                    p = None
                if p is None:
                    self.api.put(self._pod(group, i, gpus))
                    self.recreated += 1


def final_check(api: InMemoryApi, groups: list[str] | None = None) -> list[str]:
    """The verdict on the cluster: no pod bound twice; and the verifier, run on a snapshot
    where the gangs' pods are pending again, against the plan of where they are bound —
    so every node holds what is bound to it, and every gang is whole or has no pod bound.
    Returns the problems (empty: all good)."""
    problems = [f"pod uid {u} bound {n} times" for u, n in api.bindings.items() if n > 1]
    objs = [o for k in ("nodes", "podgroups.scheduling.volcano.sh") for o in api.objects(KINDS[k])]
    placed: list[dict[str, Any]] = []
    for p in api.objects(PODS):
        group = (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
        if p["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        if group and (groups is None or group in groups):
            node = p["spec"].pop("nodeName", None)
            p["status"] = {"phase": "Pending"}
            p["spec"].pop("schedulingGates", None)
            p["spec"].pop("nodeSelector", None)
            if node:
                placed.append({"pod": p, "node": node})
        objs.append(p)
    dump = {"apiVersion": "v1", "kind": "List", "items": objs}
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(dump, f)
        f.flush()
        snap = read_kube([f.name], KubeOptions()).snapshot
    role_of = {
        (g.namespace, name): (g, r)
        for g in snap.gangs
        for r in g.roles
        for name in (r.pod_names or ())
    }
    pods = []
    for item in placed:
        meta = item["pod"]["metadata"]
        if (meta["namespace"], meta["name"]) not in role_of:
            continue  # its gang is finishing: some pods succeeded already
        g, r = role_of[(meta["namespace"], meta["name"])]
        ann = json.loads(
            (meta.get("annotations") or {}).get("scheduling.koordinator.sh/device-allocated")
            or "{}"
        )
        gpus = tuple(a["id"] for a in ann.get("gpu") or [])
        pods.append(
            PodPlacement(
                pod=meta["name"],
                gang=g.name,
                namespace=g.namespace,
                role=r.name,
                node=item["node"],
                gpus=gpus,
            )
        )
    from gangplan.solver.result import assemble_plan

    plan: Plan = assemble_plan(snap, pods, {})
    problems += [str(v) for v in verify(snap, plan)]
    return problems


def settle(
    loop: Any,
    sched: Scheduler | None,
    kubelet: Kubelet,
    ctl: Controller,
    clock: FakeClock,
    cycles: int,
    step_s: float = 2.0,
) -> None:
    """``cycles`` rounds of: the loop's cycle, the scheduler, the kubelets, the controller,
    and ``step_s`` of fake time."""
    for _ in range(cycles):
        loop.cycle()
        if sched is not None:
            sched.step()
        kubelet.step()
        ctl.step()
        clock.advance(step_s)


__all__ = ["GATE", "Controller", "Kubelet", "Scheduler", "final_check", "settle"]
