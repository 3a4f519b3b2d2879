"""``gangplan serve`` and ``gangplan apply``: the live loop against a cluster, continuously
or once, and a plan file applied through the same code path.

Both parse options, load the configuration (:mod:`gangplan.adapters.serve.config`) and the
API client (kubeconfig, else in-cluster), and call :mod:`gangplan.adapters.serve.run`.
``--dry-run`` prints the patches and Bindings that would be sent (a multi-document YAML on
stdout) and sends none. A bad configuration, an unreadable kubeconfig or a plan that does
not hold on the cluster ends with ``error: ...`` lines and exit code 1.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from gangplan.adapters.cli.common import UserError, main, move_cap_options, user_errors
from gangplan.adapters.files import load_any_plan
from gangplan.adapters.kube.bindings import dump_bindings
from gangplan.adapters.kube.options import KubeInputError
from gangplan.adapters.serve.api import ApiError, KubeApi
from gangplan.adapters.serve.config import ConfigError, ServeConfig, load_config
from gangplan.models import MovePlan, WaveLimits

__all__ = ["apply", "serve", "webhook"]

_FILE = click.Path(dir_okay=False, path_type=Path)


def _setup(
    config: Path | None, kubeconfig: Path | None, context: str | None, dry_run: bool
) -> tuple[ServeConfig, KubeApi]:
    from gangplan.adapters.serve.client import OfficialApi, load_client

    try:
        cfg = load_config(config)
    except ConfigError as err:
        raise UserError(err.lines) from None
    if dry_run:
        cfg = cfg.model_copy(update={"dry_run": True})
    try:
        client = load_client(str(kubeconfig) if kubeconfig else None, context)
    except ApiError as err:
        hint = (
            ""
            if kubeconfig
            else " (no --kubeconfig given, no file at $KUBECONFIG or ~/.kube/config, and not "
            "in a pod with a service account: give --kubeconfig FILE, set KUBECONFIG, or run "
            "in the cluster)"
        )
        raise UserError([f"cannot configure the Kubernetes client: {err.message}{hint}"]) from None
    # urllib3 logs each retry of a refused connection as a warning: one error line instead
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    return cfg, OfficialApi(client, field_manager=cfg.scheduler_name)


def _not_synced(api: KubeApi, err: Exception) -> UserError:
    """``error: cannot reach the API server URL (why)`` for a connection that failed, else
    one line per kind that could not be listed."""
    from gangplan.adapters.serve.run import NotSynced

    errors = err.errors if isinstance(err, NotSynced) else []
    host = getattr(api, "host", "") or "(unknown address)"
    down = [e for _, e in errors if e.status == 0]
    if down or not errors:
        why = f" ({down[0].message})" if down and down[0].message else ""
        return UserError([f"cannot reach the API server {host}{why}"])
    return UserError([f"cannot list {key} from the API server {host}: {e}" for key, e in errors])


def _print_requests(requests: list[dict[str, Any]]) -> None:
    if requests:
        click.echo(dump_bindings(requests), nl=False)
    click.echo(f"dry run: {len(requests)} requests, none sent", err=True)


def _options(func: Any) -> Any:
    func = click.option(
        "--dry-run", is_flag=True, help="print the patches and Bindings; send nothing"
    )(func)
    func = click.option("--context", help="the kubeconfig context (default: its current one)")(func)
    func = click.option(
        "--kubeconfig",
        type=_FILE,
        help="kubeconfig file (default: in-cluster service account, else ~/.kube/config)",
    )(func)
    return click.option("--config", "config", type=_FILE, help="serve configuration (YAML)")(func)


@main.command("serve")
@_options
@click.option("--once", is_flag=True, help="one cycle against the cluster, then exit")
@click.option("--cycles", type=click.IntRange(min=1), hidden=True, help="stop after N cycles")
@click.option("-v", "--verbose", is_flag=True, help="one JSON line per cycle on stderr")
def serve(
    config: Path | None,
    kubeconfig: Path | None,
    context: str | None,
    dry_run: bool,
    once: bool,
    cycles: int | None,
    verbose: bool,
) -> None:
    """Plan pending gangs of a live cluster in cycles and get them bound whole (mode gate:
    ungate and pin each pod; mode bind: Bindings)."""
    from gangplan.adapters.serve import run

    cfg, api = _setup(config, kubeconfig, context, dry_run)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    emit = (lambda line: click.echo(line, err=True)) if (verbose or not once) else (lambda _: None)
    with user_errors():
        try:
            loop = run.serve(api, cfg, once=once, cycles=cycles, emit=emit)
        except KubeInputError as err:
            raise UserError([str(err)]) from None
        except run.NotSynced as err:
            raise _not_synced(api, err) from None
    report = loop.last
    if cfg.dry_run:
        _print_requests(loop.applier.requests)
    if once and report is not None:
        click.echo(
            f"cycle: {report.gangs} pending gangs, {len(report.admitted)} admitted "
            f"({_some(report.admitted)}), {report.applied} pods "
            f"{'would be ' if cfg.dry_run else ''}applied, {report.failures} failures",
            err=True,
        )
        if report.failures:
            raise UserError(_failure_lines(report.failed, report.failures))


def _failure_lines(failed: list[str], count: int) -> list[str]:
    """``request failed: gang: pod: answer`` per failed request (the exit's error lines)."""
    lines = [f"request failed: {line}" for line in failed]
    return lines or [f"{count} requests failed"]


def _some(names: list[str], shown: int = 10) -> str:
    """``names`` joined, the first ``shown`` and "and N more" ("none" when empty)."""
    if not names:
        return "none"
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


@main.command("apply")
@click.argument("plan", type=_FILE)
@_options
@move_cap_options
def apply(
    plan: Path,
    config: Path | None,
    kubeconfig: Path | None,
    context: str | None,
    dry_run: bool,
    max_moving_per_node: int,
    max_moving_per_namespace: int | None,
) -> None:
    """Apply PLAN (a kind: Plan file from gangplan solve) to the cluster, as serve would:
    checked against the live cluster by the verifier, then patched or bound, gang by gang.
    A kind: MovePlan file (gangplan replan -o) is first replayed whole on the live cluster
    by the move verifier (the rules of gangplan verify; the caps given here, the cluster's
    PodDisruptionBudgets), then runs wave by wave: targets held, pods evicted together,
    then placed on their targets. --dry-run prints each wave's requests and waits for
    none."""
    from gangplan.adapters.serve import run

    with user_errors():
        p = load_any_plan(plan)
    if isinstance(p, MovePlan):
        cfg, api = _setup(config, kubeconfig, context, dry_run)
        from gangplan.adapters.serve.moves import MovePlanRefused

        limits = WaveLimits(
            max_moving_per_node=max_moving_per_node,
            max_moving_per_namespace=max_moving_per_namespace,
        )
        try:
            _apply_moves(api, cfg, p, plan, limits)
        except run.NotSynced as err:
            raise _not_synced(api, err) from None
        except MovePlanRefused as err:
            raise UserError([f"{plan}: {line}" for line in err.lines]) from None
        return
    cfg, api = _setup(config, kubeconfig, context, dry_run)
    try:
        loop, report = run.apply_plan(api, cfg, p)
    except run.PlanRefused as err:
        raise UserError([f"{plan}: {line}" for line in err.lines]) from None
    except run.NotSynced as err:
        raise _not_synced(api, err) from None
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    if cfg.dry_run:
        _print_requests(loop.applier.requests)
    click.echo(
        f"{plan}: {len(report.admitted)} gangs applied ({', '.join(report.admitted) or 'none'}), "
        f"{report.applied} pods, {report.failures} failures",
        err=True,
    )
    if report.failures:
        raise UserError(_failure_lines(report.failed, report.failures))


def _apply_moves(
    api: KubeApi, cfg: ServeConfig, plan: MovePlan, path: Path, limits: WaveLimits
) -> None:
    import time

    from gangplan.adapters.serve.moves import apply_moves

    reports = apply_moves(api, cfg, plan, wait=lambda: time.sleep(2.0), polls=150, limits=limits)
    if cfg.dry_run:
        for r in reports:
            click.echo(f"# wave {r.index}")
            if r.requests:
                click.echo(dump_bindings(r.requests), nl=False)
            click.echo(
                f"wave {r.index}: {len(r.evicted)} pods would be evicted, {len(r.placed)} placed",
                err=True,
            )
        total = sum(len(r.requests) for r in reports)
        click.echo(f"dry run: {total} requests in {len(reports)} waves, none sent", err=True)
        return
    for r in reports:
        click.echo(
            f"wave {r.index}: {len(r.evicted)} pods evicted, {len(r.placed)} placed"
            + (f"; stopped: {r.stopped}" if r.stopped else ""),
            err=True,
        )
    stopped = [r for r in reports if r.stopped]
    done = len(reports) - len(stopped)
    click.echo(f"{path}: {done} of {len(plan.waves)} waves applied", err=True)
    if stopped:
        raise UserError([f"wave {r.index}: {r.stopped}" for r in stopped])


@main.command("webhook")
@click.option(
    "--tls-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    required=True,
    help="folder holding tls.crt and tls.key (the webhook's Secret, mounted)",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="the address to listen on (in a pod: 0.0.0.0, or :: for IPv6, as deploy/ passes)",
)
@click.option("--port", type=click.IntRange(1, 65_535), default=9443, show_default=True)
@click.option(
    "--pod-selector",
    "pod_selector",
    multiple=True,
    metavar="KEY=VALUE",
    help="gate only pods with this label (repeatable; default: every pod the webhook sees)",
)
def webhook(tls_dir: Path, host: str, port: int, pod_selector: tuple[str, ...]) -> None:
    """Serve the mutating admission webhook that adds the gate gangplan.io/placement."""
    from gangplan.adapters.serve.webhook import serve_webhook

    selector = {}
    for item in pod_selector:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError([f"--pod-selector {item!r}: give KEY=VALUE"])
        selector[key] = value
    for name in ("tls.crt", "tls.key"):
        if not (tls_dir / name).is_file():
            raise UserError([f"{tls_dir / name}: missing (the Secret's {name})"])
    try:
        serve_webhook(tls_dir, host=host, port=port, selector=selector or None)
    except OSError as err:  # a host that is no address here, a port in use, a bad key
        raise UserError([f"webhook on {host}:{port}: {err.strerror or err}"]) from None
