"""Running ``gangplan serve`` and ``gangplan apply``: the process around the loop.

:func:`serve` connects to the API (kubeconfig or in-cluster), elects a leader (unless
``--once``), serves ``/metrics`` (Prometheus text format), ``/healthz`` (200 while cycles
keep ending: the last one ended within three periods plus the solver's time limit) and
``/readyz`` (200 once every watched kind is listed), and cycles. :func:`apply_plan` applies a
plan file through the same loop: the live snapshot is built, the plan is checked against it
by the independent verifier, and its admitted gangs are applied exactly as the loop applies
its own (same patches, same Bindings, same ledger).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gangplan.adapters.serve.api import KubeApi
from gangplan.adapters.serve.cache import NotSynced
from gangplan.adapters.serve.clock import Clock, SystemClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.leader import LeaseElector
from gangplan.adapters.serve.loop import CycleReport, Elector, ServeLoop
from gangplan.models import Plan
from gangplan.solver.judges.verify import check_outcomes, verify
from gangplan.solver.result import assemble_plan

__all__ = ["NotSynced", "PlanRefused", "apply_plan", "make_loop", "serve", "start_http"]


class PlanRefused(Exception):
    """A plan that does not hold on the live cluster (the verifier's violations)."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("\n".join(lines))


def make_loop(
    api: KubeApi,
    config: ServeConfig,
    *,
    once: bool = False,
    clock: Clock | None = None,
    emit: Callable[[str], None] | None = None,
) -> ServeLoop:
    """The loop of this process; with a Lease elector unless ``once`` or disabled."""
    clk = clock or SystemClock()
    identity = config.identity or socket.gethostname()
    elector: Elector | None = None
    le = config.leader_election
    if le.enabled and not once:
        elector = LeaseElector(
            api,
            clk,
            identity,
            namespace=le.namespace,
            name=le.name,
            lease_duration_s=le.lease_duration_s,
            renew_deadline_s=le.renew_deadline_s,
            retry_period_s=le.retry_period_s,
        )
    return ServeLoop(api, config, clock=clk, elector=elector, emit=emit, identity=identity)


def start_http(loop: ServeLoop, port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` of ``loop`` on ``host:port`` (a thread)."""
    cfg = loop.config

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                body, ctype, code = generate_latest(loop.metrics.registry), CONTENT_TYPE_LATEST, 200
            elif self.path.startswith("/healthz"):
                last = loop.last
                limit = 3 * cfg.period_s + cfg.time_limit_s + 30
                ok = last is None or time.time() - last.at - last.cycle_s < limit
                body, ctype, code = (b"ok" if ok else b"stalled"), "text/plain", 200 if ok else 500
            elif self.path.startswith("/readyz"):
                ok = loop.ready
                body, ctype, code = (b"ok" if ok else b"syncing"), "text/plain", 200 if ok else 503
            else:
                body, ctype, code = b"not found", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="http").start()
    return server


def serve(
    api: KubeApi,
    config: ServeConfig,
    *,
    once: bool = False,
    cycles: int | None = None,
    emit: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> ServeLoop:
    """Run the loop: one cycle (``once``: list, plan, apply, exit), ``cycles`` cycles, or
    until ``should_stop()``. Returns the loop (its last report, the applier's requests).

    Raises:
        NotSynced: ``once`` and a watched kind could not be listed (an API server that
            cannot be reached, a 401); a long run keeps retrying instead (each cycle's
            notes say why it waits, and ``/readyz`` answers 503 meanwhile).
    """
    loop = make_loop(api, config, once=once, emit=emit)
    stop, restore = _stop_on_sigterm(should_stop)
    server = None
    if config.metrics_port and not once:
        server = start_http(loop, config.metrics_port)
    try:
        if once:
            loop.cycle()
            loop.cache.require_synced()
            return loop
        loop.cache.start()
        loop.threaded = True
        deadline = time.time() + 60
        while not loop.cache.synced and time.time() < deadline:
            time.sleep(0.05)
        loop.run(cycles=cycles, should_stop=stop)
    finally:
        loop.cache.stop()
        release = getattr(loop.elector, "release", None)
        if callable(release):
            release()
        if server is not None:
            server.shutdown()
        restore()
    return loop


def _stop_on_sigterm(
    should_stop: Callable[[], bool] | None,
) -> tuple[Callable[[], bool], Callable[[], None]]:
    """``should_stop``, or-ed with a SIGTERM received (the kubelet stopping the pod): the
    loop ends its cycle and gives the Lease up, so the other replica need not wait. The
    second function puts the previous SIGTERM handler back."""
    import signal

    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        return (lambda: bool(should_stop and should_stop())), (lambda: None)
    previous = signal.signal(signal.SIGTERM, lambda *_: flag.set())

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return (lambda: flag.is_set() or bool(should_stop and should_stop())), restore


def apply_plan(api: KubeApi, config: ServeConfig, plan: Plan) -> tuple[ServeLoop, CycleReport]:
    """Apply ``plan`` (a ``kind: Plan`` file) to the cluster through the loop's code path.

    Only gangs the live snapshot plans now are applied (others are listed in the report's
    notes); the plan's pods of those gangs must pass the verifier against the live snapshot.

    Raises:
        NotSynced: a watched kind could not be listed (nothing is sent then).
        PlanRefused: the plan's own inconsistencies (:func:`check_outcomes
            <gangplan.solver.judges.verify.check_outcomes>`: e.g. a pending gang with pods, pods
            without an outcome), or the verifier's violations on the live snapshot (nothing
            is sent then).
    """
    own = check_outcomes(plan)
    if own:
        raise PlanRefused([f"the plan contradicts itself: {v}" for v in own])
    loop = make_loop(api, config, once=True)
    loop.cache.pump()
    loop.cache.require_synced()
    now = loop.clock.now()
    report = CycleReport(1, True, at=now)
    with loop.cache.locked():
        loop.recover(report)
        built = loop.snapshot(now)
    snap = built.snapshot
    known = {g.key for g in snap.gangs}
    pods = [p for p in plan.pods if p.gang_key in known]
    for g in plan.gangs:
        if g.admitted and g.key not in known:
            report.notes.append(f"gang {g.key}: not pending in the cluster now; left out")
    live_plan = assemble_plan(snap, pods, {})
    violations = verify(snap, live_plan)
    if violations:
        raise PlanRefused([f"the plan does not hold on the cluster now: {v}" for v in violations])
    loop.dispatcher.admit(live_plan, built, report, now)
    loop.last = report
    return loop, report
