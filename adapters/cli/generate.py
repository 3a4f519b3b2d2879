"""``gangplan generate fat-tree``: a synthetic instance
(:func:`gangplan.adapters.traces.generate.fat_tree`), written as ``gangplan convert``
writes one (:func:`~gangplan.adapters.cli.common.emit_instance`). Options the generator
cannot meet end with ``error: generate fat-tree: message`` and exit code 1."""

from __future__ import annotations

from pathlib import Path

import click

from gangplan.adapters.cli.common import (
    Finite,
    emit_instance,
    guard_output,
    instance_output,
    main,
    user_errors,
)
from gangplan.adapters.files import InputError
from gangplan.adapters.traces.generate import LAYOUTS, MAX_DEMAND, GeneratorError, fat_tree
from gangplan.adapters.traces.stats import TRACES
from gangplan.models import Problem

__all__ = ["fat_tree_command", "generate"]


@main.group()
def generate() -> None:
    """Generate synthetic instances (deterministic for a seed)."""


@generate.command("fat-tree")
@click.option("--spines", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--leaves-per-spine", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--nodes-per-leaf", type=click.IntRange(min=1), default=8, show_default=True)
@click.option(
    "--layout",
    type=click.Choice(list(LAYOUTS)),
    default="hgx8",
    show_default=True,
    help="hgx8: 8 GPUs + 8 NICs, 4 PCIe switches, 2 NUMA; 4gpu: 4 GPUs + 4 NICs",
)
@click.option(
    "--demand",
    type=Finite(0, MAX_DEMAND),
    default=1.3,
    show_default=True,
    help="pending GPUs / free GPUs to reach",
)
@click.option(
    "--queues",
    type=click.IntRange(1, 15),
    default=4,
    show_default=True,
    help="the N largest Philly virtual clusters, by job count",
)
@click.option(
    "--load",
    type=Finite(0, 1),
    default=0.5,
    show_default=True,
    help="fraction of GPUs held by running pods",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--sizes",
    type=click.Choice(list(TRACES)),
    default="itp",
    show_default=True,
    help="GPU-count histogram of gangs: itp (ElasticFlow) or philly (Pollux)",
)
@instance_output
def fat_tree_command(
    spines: int,
    leaves_per_spine: int,
    nodes_per_leaf: int,
    layout: str,
    demand: float,
    queues: int,
    load: float,
    seed: int,
    sizes: str,
    output: Path | None,
) -> None:
    """A fat-tree instance: spines > leaves > nodes, mixed GPU models across racks, running
    load scattered as after days of churn, pending gangs drawn from real traces."""
    guard_output(output, kind="Instance")
    with user_errors():
        try:
            result = fat_tree(
                spines,
                leaves_per_spine,
                nodes_per_leaf,
                layout,
                demand,
                queues,
                load,
                seed,
                sizes,
            )
        except GeneratorError as err:
            raise InputError("generate fat-tree", [Problem("", str(err))]) from None
    emit_instance(result, output)
