"""An elastic job in the simulator that grows, shrinks and grows again, worked by hand.

Cluster: one node n1 of 4 GPUs and 16 cpu, queue ``q``, preemption grace 0 s. Cycles every
100 s; ``--elastic``: the 4-GPU job E is 4 pods of 1 GPU, minimum 2 pods, its rate linear in
its pods (pods / 4) with its work conserved. Jobs (arrival s, GPUs, work s at full size,
priority):

  B1  0    1  300  0
  B2  0    1  300  0
  E   50   4  800  0
  H   350  1  100  10

On paper:
  t=0    B1, B2 start (2 GPUs free after), end at 300.
  t=100  E (arrived 50): 2 GPUs free, its minimum: 2 pods, rate 2/4 = 0.5.
  t=300  B1, B2 leave: E's growth gang (its 2 missing pods) is placed: 4 pods, rate 1.
         Work done by then: (300 - 100) x 0.5 = 100; left 700.
  t=400  H (arrived 350, priority 10) waits; the node is full with E. E may lose pods
         above its minimum to a higher priority of its queue (within_queue lower_priority,
         grace 0): one pod evicted (H needs 1 GPU; evicting 2 would lose more class-0
         GPUs), E keeps 3, rate 3/4. Work by 400: 100 more at rate 1; left 600. H starts,
         ends 500.
  t=500  H leaves: E grows back to 4 (rate 1). Work 400-500 at 0.75: 75; left 525, so E
         ends at 500 + 525 = 1025.

E: start 100, end 1025 (JCT 1025 - 50 = 975), most pods 4 > minimum 2, 3 resizes (grow at
300, shrink at 400, grow at 500). H: start 400, end 500. B1, B2: 0 to 300.
"""

from __future__ import annotations

import pytest

from gangplan.adapters.sim.engine import SimConfig, simulate
from gangplan.adapters.sim.jobs import SimInput, jobs_from
from gangplan.adapters.sim.metrics import run_metrics
from gangplan.models import load_instance

GPU = "nvidia.com/gpu"


def _input() -> SimInput:
    def gang(name: str, gpus: int, priority: int = 0) -> dict[str, object]:
        return {
            "name": name,
            "queue": "q",
            "priority": priority,
            "roles": [{"name": "w", "count": 1, "requests": {"cpu": gpus, GPU: gpus}}],
        }

    snap = load_instance(
        {
            "apiVersion": "gangplan.io/v1alpha1",
            "kind": "Instance",
            "preemption": {"grace_s": 0},
            "nodes": [{"name": "n1", "allocatable": {"cpu": 16, GPU: 4}}],
            "queues": [{"name": "q"}],
            "gangs": [gang("b1", 1), gang("b2", 1), gang("e", 4), gang("h", 1, 10)],
        }
    )[0]
    g = snap.gang_by_key
    jobs = jobs_from(
        [
            (g["default/b1"], 0.0, 300.0, 1),
            (g["default/b2"], 0.0, 300.0, 1),
            (g["default/e"], 50.0, 800.0, 4),
            (g["default/h"], 350.0, 100.0, 1),
        ]
    )
    cluster = snap.model_copy(update={"gangs": ()})
    return SimInput(cluster=cluster, jobs=jobs, trace="hand", cluster_source="hand", window=None)


@pytest.mark.parametrize(
    "placer,extra",
    [("greedy", {}), ("cpsat", {"deterministic": True, "deterministic_time": 5.0})],
)
def test_elastic_job_grows_shrinks_and_grows_again(placer: str, extra: dict) -> None:
    cfg = SimConfig(
        placer=placer, period_s=100, elastic=True, verify=True, validate_snapshots=True, **extra
    )
    result = simulate(_input(), cfg)
    got = {j.name: (j.start, j.end) for j in result.jobs}
    assert got == {"b1": (0, 300), "b2": (0, 300), "e": (100, 1025), "h": (400, 500)}
    e = next(j for j in result.jobs if j.name == "e")
    assert (e.min_pods, e.max_pods, e.resizes) == (2, 4, 3)
    m = run_metrics(result)
    assert (m.elastic_jobs, m.elastic_above_min) == (1, 1)


def test_without_elasticity_the_job_waits_for_its_full_size() -> None:
    # the control: E (4 GPUs) waits for B1 and B2 to leave at 300, runs 300-1100; H
    # waits for E: 1100-1200
    result = simulate(_input(), SimConfig(placer="greedy", period_s=100, verify=True))
    got = {j.name: (j.start, j.end) for j in result.jobs}
    assert got == {"b1": (0, 300), "b2": (0, 300), "e": (300, 1100), "h": (1100, 1200)}
