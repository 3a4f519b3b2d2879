"""The reasons' exact check (solver/model/fits.py): can a gang alone be admitted, on the
empty cluster or in what running pods leave? Worked out by hand on one node of 4 GPUs
where a running pod holds 2."""

from __future__ import annotations

import pytest

from gangplan.models import load_instance
from gangplan.solver.context import CycleContext
from gangplan.solver.model.fits import gang_fits

GPU = "nvidia.com/gpu"


def _ctx(pods: int, gpus: int, queue_max: int | None = None) -> CycleContext:
    queue = {"name": "q"} | ({"max": {GPU: queue_max}} if queue_max is not None else {})
    snapshot = load_instance(
        {
            "apiVersion": "gangplan.io/v1alpha1",
            "kind": "Instance",
            "nodes": [{"name": "n0", "allocatable": {GPU: 4, "cpu": 8}}],
            "queues": [queue],
            "running": [{"name": "r", "node": "n0", "requests": {GPU: 2, "cpu": 1}}],
            "gangs": [
                {
                    "name": "g",
                    "queue": "q",
                    "roles": [{"name": "w", "count": pods, "requests": {GPU: gpus}}],
                }
            ],
        }
    )[0]
    return CycleContext.of(snapshot)


@pytest.mark.parametrize(
    ("pods", "gpus", "empty", "want"),
    [
        (1, 2, False, True),  # 2 GPUs left by the running pod: one pod of 2 fits
        (2, 2, False, False),  # 4 GPUs asked, 2 left
        (2, 2, True, True),  # on the empty node the 4 GPUs are free
        (1, 8, True, False),  # more than the node has, even empty
    ],
)
def test_a_gang_fits_alone_exactly_when_its_gpus_are_free(
    pods: int, gpus: int, empty: bool, want: bool
) -> None:
    ctx = _ctx(pods, gpus)
    assert gang_fits(ctx, ctx.snapshot.gangs[0], empty, 2.0, deterministic=True) is want


def test_on_the_empty_cluster_a_gang_fits_within_its_queues_max_only() -> None:
    # the queue may hold 2 GPUs (on the empty cluster no running pod counts against it):
    # 2 pods x 1 GPU = 2 fits, 3 pods x 1 GPU = 3 does not, though the node has 4 free
    ctx = _ctx(2, 1, queue_max=2)
    assert gang_fits(ctx, ctx.snapshot.gangs[0], True, 2.0, deterministic=True) is True
    ctx = _ctx(3, 1, queue_max=2)
    assert gang_fits(ctx, ctx.snapshot.gangs[0], True, 2.0, deterministic=True) is False
