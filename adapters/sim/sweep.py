"""Sweeps: placers x seeds x policies, each a run of the same input, in parallel.

By default the runs go to worker processes on this machine
(:class:`concurrent.futures.ProcessPoolExecutor`; the input is sent once per worker).
With ``ray_address`` they go to a Ray cluster (Ray is an optional extra:
``pip install -e '.[ray]'``): ``ray.init(address=...)``, the input put once in Ray's object
store, one remote task per run. ``"local"`` starts a Ray instance on this machine (what
the test does); the address of a running cluster (``ray://head:10001`` or ``auto``) uses
it, whose workers must have gangplan installed. Every run is a pure function of the input,
its config and its seed, so a sweep gives the same results however it runs (wall times
aside; CP-SAT only in deterministic mode).

Results come back in task order: placers, then policies, then seeds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Any

from gangplan.adapters.sim.engine import SimConfig, SimResult, simulate
from gangplan.adapters.sim.jobs import SimInput

__all__ = ["Policy", "RayMissing", "SweepError", "run_sweep", "sweep_configs"]


class SweepError(RuntimeError):
    """A run of the sweep failed (the message names the run)."""


class RayMissing(RuntimeError):
    """``--ray`` was asked but Ray is not installed."""


@dataclass(frozen=True)
class Policy:
    """A named set of simulation options, the sweep's third axis (``overrides``: SimConfig
    field -> value, e.g. ``{"slowdown": Slowdown(0.1, 0.2)}``)."""

    name: str
    overrides: tuple[tuple[str, Any], ...] = ()


def sweep_configs(
    base: SimConfig,
    placers: Sequence[str],
    seeds: Sequence[int],
    policies: Sequence[Policy] = (Policy("default"),),
) -> list[SimConfig]:
    """One config per (placer, policy, seed), in that nesting order."""
    out = []
    for placer in placers:
        for policy in policies:
            for seed in seeds:
                cfg = replace(base, placer=placer, seed=seed, policy=policy.name)
                out.append(replace(cfg, **dict(policy.overrides)))
    return out


_INPUT: SimInput | None = None


def _init_worker(inp: SimInput) -> None:
    global _INPUT
    _INPUT = inp


def _run_in_worker(config: SimConfig) -> SimResult:
    assert _INPUT is not None
    return simulate(_INPUT, config)


def _run_with(inp: SimInput, config: SimConfig) -> SimResult:
    return simulate(inp, config)


def run_sweep(
    inp: SimInput,
    configs: Sequence[SimConfig],
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    ray_cpus: int | None = None,
    done: Callable[[SimResult], None] | None = None,
) -> list[SimResult]:
    """Run every config on ``inp``; results in the order of ``configs``.

    Args:
        workers: worker processes (default: the machine's CPUs, at most one per run); 1
            runs in this process (no pool).
        ray_address: run on Ray instead (``"local"``: start one here).
        ray_cpus: CPUs of a local Ray instance (default: Ray's own choice).
        done: called with each result as it arrives.

    Raises:
        RayMissing: Ray asked for but not installed.
        SweepError: a run raised (its label and the error).
    """
    if ray_address is not None:
        return _run_ray(inp, configs, ray_address, ray_cpus, done)
    n = workers if workers is not None else min(len(configs), os.cpu_count() or 1)
    n = max(1, min(n, len(configs) or 1))
    results: list[SimResult | None] = [None] * len(configs)
    if n == 1:
        for k, cfg in enumerate(configs):
            results[k] = _guarded(_run_with, inp, cfg)
            if done is not None:
                done(results[k])  # type: ignore[arg-type]
        return [r for r in results if r is not None]
    with ProcessPoolExecutor(max_workers=n, initializer=_init_worker, initargs=(inp,)) as pool:
        futures = {pool.submit(_run_in_worker, cfg): k for k, cfg in enumerate(configs)}
        for fut in as_completed(futures):
            k = futures[fut]
            try:
                results[k] = fut.result()
            except Exception as err:
                raise SweepError(f"run {_label(configs[k])}: {err}") from err
            if done is not None:
                done(results[k])  # type: ignore[arg-type]
    return [r for r in results if r is not None]


def _guarded(
    fn: Callable[[SimInput, SimConfig], SimResult], inp: SimInput, cfg: SimConfig
) -> SimResult:
    try:
        return fn(inp, cfg)
    except Exception as err:
        raise SweepError(f"run {_label(cfg)}: {err}") from err


def _label(cfg: SimConfig) -> str:
    return f"{cfg.placer}/{cfg.policy}/s{cfg.seed}"


def _run_ray(
    inp: SimInput,
    configs: Sequence[SimConfig],
    address: str,
    cpus: int | None,
    done: Callable[[SimResult], None] | None,
) -> list[SimResult]:
    try:
        import ray
    except ImportError:
        raise RayMissing(
            "--ray needs Ray, an optional extra: pip install 'gangplan[ray]' "
            "(or pip install -e '.[ray]' in a checkout)"
        ) from None
    started_here = not ray.is_initialized()
    if started_here:
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address == "local":
            if cpus is not None:
                kwargs["num_cpus"] = cpus
            ray.init(**kwargs)
        else:
            ray.init(address=address, **kwargs)
    try:
        remote = ray.remote(_run_with)
        ref = ray.put(inp)
        pending = {remote.remote(ref, cfg): k for k, cfg in enumerate(configs)}
        results: list[SimResult | None] = [None] * len(configs)
        waiting = list(pending)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            for obj in ready:
                k = pending[obj]
                try:
                    results[k] = ray.get(obj)
                except Exception as err:
                    raise SweepError(f"run {_label(configs[k])} (Ray): {err}") from err
                if done is not None:
                    done(results[k])  # type: ignore[arg-type]
        return [r for r in results if r is not None]
    finally:
        if started_here:
            ray.shutdown()
