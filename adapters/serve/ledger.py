"""The assumed ledger: gangs gangplan has planned and is applying, held until seen bound.

An :class:`InFlight` gang holds its whole plan — every pod's node and devices — from the
moment it is admitted until the cache shows every pod bound to its planned node (then it is
done) or it is taken back. Its pods are not planned again, and each one counts as running
on its planned node in the next snapshots (kube-scheduler's assume cache) until it is bound
(then the cache counts it), deleted, or taken back (re-gated, deleted, its pin removed),
however long that takes: an ungated pod pinned to a node is kube-scheduler's to bind there
at any moment, so its room is never given to another gang meanwhile. A pod applied more than
``assume_ttl`` ago that the cache does not show bound is reported once
(:meth:`Ledger.expired`); it keeps its room (``bind_timeout`` decides when its gang is
taken back).

Nothing here lives only in memory: each pod gangplan applies carries the gang's whole plan
in its annotation ``gangplan.io/plan`` — JSON ``{"gang": "ns/name", "at": epoch seconds,
"pods": {pod: [node, [gpu ids], [nic ids], milli-GPU or null]}}``, written in the same
patch that ungates it, or before its Binding — so that a restarted or newly elected
replica rebuilds the ledger from the cluster (:func:`recover`) and finishes — or takes
back — what the last one started.

:class:`Backoff` keeps the gangs taken back out of the next cycles for a delay that doubles
with each take-back, capped (so a gang whose binds keep failing cannot starve the others).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from gangplan.adapters.jsontext import loads_bounded
from gangplan.adapters.serve.cache import ObjKey
from gangplan.adapters.serve.snapshot import ANN_PLAN
from gangplan.models import PodPlacement

__all__ = [
    "ANN_PLAN",
    "Backoff",
    "InFlight",
    "Ledger",
    "parse_plan",
    "plan_annotation",
    "recover",
]

log = logging.getLogger("gangplan.serve")

MAX_PLAN_BYTES = 64 * 1024
"""A larger plan is not written (annotations are capped at 256 KiB in all); such a gang is
taken back instead of recovered after a restart."""


@dataclass
class InFlight:
    """One admitted gang being applied.

    ``placements``: pod name -> placement; ``uids``: pod name -> UID when planned;
    ``applied``: pod name -> when it was ungated (mode gate) or bound (mode bind);
    ``confirmed``: pods the cache shows bound to their planned node; ``back``: pods still
    to be removed while the gang is taken back (``reason`` says why).
    """

    key: str
    namespace: str
    started: float
    placements: dict[str, PodPlacement]
    uids: dict[str, str] = field(default_factory=dict)
    applied: dict[str, float] = field(default_factory=dict)
    confirmed: set[str] = field(default_factory=set)
    taking_back: bool = False
    reason: str = ""
    back: set[str] = field(default_factory=set)
    victims: set[tuple[str, str]] = field(default_factory=set)
    """running pods evicted for this gang that the cache still shows: its pods wait (their
    room held here) until every one is gone"""
    carriers: set[str] = field(default_factory=set)
    """recovered: the pods carrying the plan annotation it was read from (its Events go to
    them)"""
    written: dict[str, str] = field(default_factory=dict)
    """pod name -> the resourceVersion of the patch that wrote this plan's annotations on it
    (mode bind: before its Binding), so a take-back clears them even before the cache shows
    the patch"""

    @property
    def done(self) -> bool:
        return not self.taking_back and self.confirmed >= set(self.placements)

    def pods(self) -> list[ObjKey]:
        return [(self.namespace, p) for p in self.placements]


def plan_annotation(flight: InFlight) -> str | None:
    """:data:`ANN_PLAN`'s value for ``flight`` (None when it would exceed the cap)."""
    text = json.dumps(
        {
            "gang": flight.key,
            "at": flight.started,
            "pods": {
                name: [p.node, list(p.gpus), list(p.nics), p.gpu_milli]
                for name, p in sorted(flight.placements.items())
            },
        },
        separators=(",", ":"),
    )
    return text if len(text) <= MAX_PLAN_BYTES else None


class Ledger:
    """The gangs in flight, by gang key (``namespace/name``)."""

    def __init__(self) -> None:
        self.gangs: dict[str, InFlight] = {}
        self._expired_reported: set[tuple[str, str]] = set()

    def add(self, flight: InFlight) -> None:
        self.gangs[flight.key] = flight

    def reset(self, flights: Iterable[InFlight] = ()) -> None:
        """Forget every gang in flight and hold ``flights`` instead (a ledger rebuilt from the
        cluster: :func:`recover`). In place: the watchdog and the dispatcher keep this one."""
        self.gangs = {f.key: f for f in flights}
        self._expired_reported = set()

    def remove(self, key: str) -> InFlight | None:
        flight = self.gangs.pop(key, None)
        if flight is not None:
            self._expired_reported = {e for e in self._expired_reported if e[0] != key}
        return flight

    def held(self) -> set[ObjKey]:
        """Every pod of every gang in flight (never planned again meanwhile)."""
        return {k for f in self.gangs.values() for k in f.pods()}

    def assumed(self, now: float, ttl: float) -> dict[ObjKey, PodPlacement]:
        """The pods that count as running where planned: every pod of every gang in flight,
        whenever it was applied (``now`` and ``ttl`` are kept for the callers: a pinned pod
        that kube-scheduler is slow to bind still holds its room); of a gang being taken
        back, the pods it applied that are not removed yet (``back``: an ungated pod whose
        delete failed is still pinned, and may still be bound there)."""
        out: dict[ObjKey, PodPlacement] = {}
        for f in self.gangs.values():
            for name, p in f.placements.items():
                if f.taking_back and (name not in f.back or name not in f.applied):
                    continue
                out[(f.namespace, name)] = p
        return out

    def expired(self, now: float, ttl: float) -> list[tuple[str, str]]:
        """``(gang key, pod)`` applied more than ``ttl`` ago and not seen bound, each
        reported once."""
        out = []
        for f in self.gangs.values():
            for name, t in f.applied.items():
                if (
                    name not in f.confirmed
                    and now - t > ttl
                    and (f.key, name) not in self._expired_reported
                ):
                    self._expired_reported.add((f.key, name))
                    out.append((f.key, name))
        return out


@dataclass
class Backoff:
    """Per gang: the time until which it is not planned, and the next delay."""

    initial_s: float
    max_s: float
    until: dict[str, float] = field(default_factory=dict)
    delay: dict[str, float] = field(default_factory=dict)

    def fail(self, key: str, now: float) -> float:
        """Back ``key`` off; returns the delay (``initial_s``, doubling, at most ``max_s``)."""
        d = min(self.max_s, self.delay.get(key, self.initial_s / 2) * 2)
        self.delay[key] = d
        self.until[key] = now + d
        return d

    def waiting(self, now: float) -> set[str]:
        for k in [k for k, t in self.until.items() if t <= now]:
            del self.until[k]
        return set(self.until)

    def succeed(self, key: str) -> None:
        self.delay.pop(key, None)
        self.until.pop(key, None)


def _str_list(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} is not a list of device ids")
    return tuple(value)


def parse_plan(text: str) -> tuple[str, float, dict[str, list[Any]]]:
    """:data:`ANN_PLAN`'s value as ``(gang key, at, pods)``.

    Raises:
        ValueError: not the JSON object :func:`plan_annotation` writes (the message says
            what is wrong: too large or deep, a missing or mistyped field).
    """
    data = loads_bounded(text, max_bytes=MAX_PLAN_BYTES, max_depth=8)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    key, at, pods = data.get("gang"), data.get("at"), data.get("pods")
    if not isinstance(key, str) or "/" not in key:
        raise ValueError("gang is not a string 'namespace/name'")
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at):
        raise ValueError("at is not a finite number of epoch seconds")
    if not isinstance(pods, dict) or not pods:
        raise ValueError("pods is not a non-empty object of pod name -> placement")
    return key, float(at), pods


def _placement(name: str, entry: Any, ns: str, gang: str) -> PodPlacement:
    """One entry ``[node, [gpu ids], [nic ids], milli-GPU or null]`` of the plan's pods."""
    if not isinstance(entry, list) or len(entry) != 4:
        raise ValueError(f"pod {name!r}: not [node, [gpu ids], [nic ids], milli-GPU or null]")
    node, gpus, nics, milli = entry
    if not isinstance(node, str) or not node:
        raise ValueError(f"pod {name!r}: the node is not a name")
    if milli is not None and (isinstance(milli, bool) or not isinstance(milli, int)):
        raise ValueError(f"pod {name!r}: milli-GPU is not an integer or null")
    try:
        return PodPlacement(
            pod=name,
            gang=gang,
            namespace=ns,
            role="",
            node=node,
            gpus=_str_list(gpus, f"pod {name!r}: the GPUs"),
            nics=_str_list(nics, f"pod {name!r}: the NICs"),
            gpu_milli=milli,
        )
    except ValidationError as err:
        e = err.errors()[0]
        raise ValueError(f"pod {name!r}: {e['msg']}") from None


def recover(
    pods: Iterable[Mapping[str, Any]],
    mode: str,
    notes: list[str] | None = None,
    *,
    now: float | None = None,
) -> list[InFlight]:
    """The gangs in flight that the cluster shows: pods carrying :data:`ANN_PLAN` whose
    gang is not fully bound to its plan yet (a restart, a new leader).

    A pod is applied when it is bound (mode bind) or no longer gated with its node pinned
    (mode gate: its gate was removed by the same patch that wrote the annotation).

    Anyone who may edit a pod may write the annotation, so it is a claim, read as narrowly
    as it can be: only for a gang of the pod's own namespace (a pod of ``dev`` naming
    ``ml/train`` is ignored), and for the pod that carries it (its own entry). What it says
    of another pod is read only for a pod that carries no annotation of its own (a gang
    whose apply stopped between two pods) and only when every annotation of the gang says
    the same of it; a time after ``now`` is read as ``now`` (a future ``at`` would keep a
    flight from ever timing out). Whether the pod is a member of the gang
    it names, and whether the flight holds on the cluster, is for
    :func:`~gangplan.adapters.serve.recovery.vet_recovered` (the API's own objects, and the
    verifier). A value that is not what :func:`plan_annotation` writes, or that breaks these
    rules, is skipped — never raised — with a line appended to ``notes`` (``pod ns/name:
    annotation gangplan.io/plan ignored: why``) and logged as a warning."""
    by_gang: dict[str, InFlight] = {}
    others: dict[str, dict[str, list[Any]]] = {}  # gang -> pod -> the entries claimed for it
    carriers: set[tuple[str, str]] = set()
    for raw in pods:
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
            continue
        annotations = meta.get("annotations") or {}
        text = annotations.get(ANN_PLAN) if isinstance(annotations, Mapping) else None
        if not text:
            continue
        name, pod_ns = str(meta.get("name")), str(meta.get("namespace") or "")
        try:
            if not isinstance(text, str):
                raise ValueError("not a string")
            key, at, planned = parse_plan(text)
            ns, _, gang = key.partition("/")
            if ns != pod_ns:
                raise ValueError(f"it names gang {key} of another namespace")
            if name not in planned:
                raise ValueError(f"it names gang {key} but places no pod {name!r} (itself)")
            placement = _placement(name, planned[name], ns, gang)
        except ValueError as err:
            note = f"pod {pod_ns}/{name}: annotation {ANN_PLAN} ignored: {err}"
            log.warning("%s", note)
            if notes is not None:
                notes.append(note)
            continue
        carriers.add((ns, name))
        for other, entry in planned.items():
            if other != name:
                others.setdefault(key, {}).setdefault(str(other), []).append(entry)
        if now is not None:
            at = min(at, now)
        flight = by_gang.get(key)
        if flight is None:
            flight = by_gang[key] = InFlight(key, ns, at, {})
        flight.started = min(flight.started, at)
        flight.placements[name] = placement
        flight.carriers.add(name)
        flight.uids[name] = str(meta.get("uid") or "")
        node = spec.get("nodeName")
        if node or mode == "gate":
            flight.applied[name] = at
        if node == placement.node:
            flight.confirmed.add(name)
    for f in by_gang.values():  # one start per gang: the earliest of its pods'
        f.applied = dict.fromkeys(f.applied, f.started)
        own = len(f.placements)
        for other, entries in sorted(others.get(f.key, {}).items()):
            if (f.namespace, other) in carriers or other in f.placements:
                continue
            if any(e != entries[0] for e in entries) or len(entries) < own:
                continue  # the gang's annotations do not agree on it: not read
            try:
                gang = f.key.split("/", 1)[1]
                f.placements[other] = _placement(other, entries[0], f.namespace, gang)
            except ValueError:
                continue
    return [f for f in by_gang.values() if not f.done]
