"""Job-size and queue histograms of real GPU job traces, embedded so that
``gangplan generate`` works without the trace files.

Derived by ``scripts/derive_trace_stats.py`` from the files under ``../shared/data`` named
below (``tests/adapters/traces/test_generate.py`` re-derives them and checks these constants when
that folder is present). Counts are jobs; GPU-seconds are ``duration x GPUs`` summed over
the jobs of each size.

* ``itp-elasticflow``: Microsoft ITP clusters, raw traces of ElasticFlow (Gu et al.,
  ASPLOS '23), https://github.com/microsoft/elasticflow-traces, all of
  ``cluster01.csv`` .. ``cluster10.csv`` (69,351 jobs, 2021-03-04 .. 2021-05-03). MIT
  License, Copyright (c) Microsoft Corporation. 83% of jobs ask 1 GPU, the mean is 2.1 GPUs,
  the largest 64.
* ``pollux-philly-jobs``: Microsoft Philly (Jeon et al., USENIX ATC '19), one row per job
  as the Pollux artifact (OSDI '21) summarises it, ``simulator/traces/philly.csv`` of
  https://github.com/petuum/adaptdl branch ``osdi21-artifact`` (82,247 jobs). Data CC BY 4.0
  (Microsoft, msr-fiddle/philly-traces); the artifact's repository is Apache-2.0. 93% of
  jobs ask 1 GPU, the largest 128. Its ``cluster`` column is the Philly virtual cluster
  (VC), a tenant: :attr:`JobTraceStats.jobs_by_queue` counts jobs per VC.

These are numbers (facts about the traces), not the traces; the generator draws from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["DERIVED_BY", "ITP_ELASTICFLOW", "PHILLY", "TRACES", "JobTraceStats"]

DERIVED_BY = "scripts/derive_trace_stats.py"


@dataclass(frozen=True)
class JobTraceStats:
    """What the generator needs from one job trace.

    ``jobs_by_gpus``: jobs per GPU count. ``gpu_seconds_by_gpus``: GPU-seconds per GPU
    count (a size's share of the trace's GPU time). ``jobs_by_queue``: jobs per tenant, most
    jobs first (ties by name); empty when the trace has no tenants.
    """

    name: str
    trace: str
    url: str
    license: str
    files: str
    jobs_by_gpus: Mapping[int, int]
    gpu_seconds_by_gpus: Mapping[int, int]
    jobs_by_queue: Mapping[str, int] = field(default_factory=dict)

    @property
    def jobs(self) -> int:
        return sum(self.jobs_by_gpus.values())

    @property
    def mean_gpus(self) -> float:
        """Mean GPUs per job."""
        return sum(g * n for g, n in self.jobs_by_gpus.items()) / self.jobs


ITP_ELASTICFLOW = JobTraceStats(
    name="itp-elasticflow",
    trace="Microsoft ITP clusters, ElasticFlow raw traces (Gu et al., ASPLOS '23)",
    url="https://github.com/microsoft/elasticflow-traces",
    license="MIT License, Copyright (c) Microsoft Corporation",
    files="../shared/data/itp-elasticflow/cluster01.csv .. cluster10.csv",
    jobs_by_gpus=MappingProxyType({1: 57682, 2: 1483, 4: 2371, 8: 7009, 16: 381, 32: 354, 64: 71}),
    gpu_seconds_by_gpus=MappingProxyType(
        {
            1: 744178519,
            2: 46471202,
            4: 427553208,
            8: 2893910408,
            16: 402952000,
            32: 1017012064,
            64: 345713664,
        }
    ),
)

PHILLY = JobTraceStats(
    name="pollux-philly-jobs",
    trace="Microsoft Philly (Jeon et al., USENIX ATC '19), per-job summary of the Pollux "
    "artifact (OSDI '21)",
    url="https://github.com/petuum/adaptdl/blob/osdi21-artifact/simulator/traces/philly.csv",
    license="data CC BY 4.0 (Microsoft, msr-fiddle/philly-traces); artifact repository Apache-2.0",
    files="../shared/data/pollux-philly-jobs/philly.csv",
    jobs_by_gpus=MappingProxyType(
        {1: 76627, 2: 1818, 4: 1870, 8: 1643, 12: 7, 16: 199, 24: 7, 32: 67, 64: 6, 128: 3}
    ),
    gpu_seconds_by_gpus=MappingProxyType(
        {
            1: 636084038,
            2: 112505240,
            4: 589140096,
            8: 1705760904,
            12: 108288,
            16: 404358976,
            24: 5175840,
            32: 64149056,
            64: 2264192,
            128: 1535872,
        }
    ),
    jobs_by_queue=MappingProxyType(
        {
            "6214e9": 41226,
            "11cb48": 16091,
            "6c71a0": 9953,
            "b436b2": 7423,
            "103959": 1934,
            "ee9e8c": 1511,
            "0e4a51": 1435,
            "ed69ec": 1137,
            "7f04ca": 723,
            "2869ce": 422,
            "e13805": 374,
            "23dbec": 8,
            "51b7ef": 4,
            "795a4c": 3,
            "925e2b": 3,
        }
    ),
)

TRACES: Mapping[str, JobTraceStats] = MappingProxyType({"itp": ITP_ELASTICFLOW, "philly": PHILLY})
"""By the short name the CLI takes (``--sizes itp|philly``)."""
