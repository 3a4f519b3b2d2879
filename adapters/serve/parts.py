"""The live loop's parts, built in one place: :meth:`LoopParts.build` makes the cache, the live
snapshot, the ledger, the recorder, the applier, the evictor, the watchdog, the dispatcher and
the metrics of one :class:`~gangplan.adapters.serve.loop.ServeLoop` from its configuration and
API port, each wired to the others it needs. A test passes doubles for the applier, the
recorder, the evictor or the elector (each seen through its protocol in
:mod:`~gangplan.adapters.serve.contracts`), or builds a :class:`LoopParts` whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from gangplan.adapters.kube.options import KubeOptions
from gangplan.adapters.serve.api import KINDS, Kind, KubeApi
from gangplan.adapters.serve.apply import Applier
from gangplan.adapters.serve.cache import Cache
from gangplan.adapters.serve.clock import Clock, SystemClock
from gangplan.adapters.serve.config import ServeConfig
from gangplan.adapters.serve.contracts import (
    Binder,
    CacheView,
    Dispatching,
    Elector,
    EventSink,
    Evicting,
    Guard,
    SnapshotSource,
)
from gangplan.adapters.serve.dispatch import Dispatcher
from gangplan.adapters.serve.evict import Evictor
from gangplan.adapters.serve.leader import AlwaysLeader
from gangplan.adapters.serve.ledger import Backoff, Ledger
from gangplan.adapters.serve.metrics import Metrics
from gangplan.adapters.serve.snapshot import LiveSnapshot, Selection
from gangplan.adapters.serve.status import Recorder
from gangplan.adapters.serve.watchdog import Watchdog

__all__ = ["LoopParts", "watched_kinds"]


def watched_kinds(config: ServeConfig) -> list[Kind]:
    """The kinds the cache watches: always nodes, pods, PriorityClasses, every PodGroup
    flavour, Workloads, HyperNodes, Kueue Topologies and ResourceFlavors, Koordinator
    Devices; the queue objects of ``queue_source``."""
    keys = [
        "pods",
        "nodes",
        "priorityclasses.scheduling.k8s.io",
        "podgroups.scheduling.volcano.sh",
        "podgroups.scheduling.x-k8s.io",
        "podgroups.scheduling.sigs.k8s.io",
        "podgroups.scheduling.k8s.io",
        "workloads.scheduling.k8s.io",
        "hypernodes.topology.volcano.sh",
        "topologies.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io",
        "devices.scheduling.koordinator.sh",
    ]
    keys += {
        "volcano": ["queues.scheduling.volcano.sh"],
        "kueue": ["clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io"],
        "elasticquota": ["elasticquotas.scheduling.x-k8s.io"],
        "none": [],
    }[config.queue_source]
    return [KINDS[k] for k in keys]


@dataclass(frozen=True)
class LoopParts:
    """Everything one loop acts through (module docstring)."""

    clock: Clock
    elector: Elector
    cache: CacheView
    live: SnapshotSource
    ledger: Ledger
    recorder: EventSink
    applier: Binder
    evictor: Evicting
    watchdog: Guard
    dispatcher: Dispatching
    metrics: Metrics

    @classmethod
    def build(
        cls,
        config: ServeConfig,
        api: KubeApi,
        *,
        clock: Clock | None = None,
        elector: Elector | None = None,
        identity: str = "gangplan",
        metrics: Metrics | None = None,
        applier: Binder | None = None,
        recorder: EventSink | None = None,
        evictor: Evicting | None = None,
    ) -> LoopParts:
        """The parts of a loop on ``api`` with ``config``; the keywords replace a default
        (the system clock, always leader, new metrics, the production classes).
        ``identity``: this replica's name in the Events it posts.

        Raises:
            KubeInputError: a bad ``topology_labels`` or ``device_layout`` in ``config``.
        """
        clk = clock or SystemClock()
        elect = elector or AlwaysLeader()
        mets = metrics or Metrics()
        live = LiveSnapshot(_kube_options(config), _selection(config))
        cache = Cache(api, watched_kinds(config), live.on_change, clock=clk)
        ledger = Ledger()
        binder = applier or Applier(api, config.mode, dry_run=config.dry_run)
        words = recorder or Recorder(
            api,
            clk,
            controller=f"gangplan.io/{config.scheduler_name}",
            instance=identity,
            interval_s=config.event_interval_s,
            dry_run=config.dry_run,
            mode=config.mode,
        )
        evicts = evictor or Evictor(api, binder)
        watchdog = Watchdog(
            cache,
            ledger,
            binder,
            words,
            mets,
            elect,
            backoff=Backoff(config.backoff_initial_s, config.backoff_max_s),
            bind_timeout_s=config.bind_timeout_s,
            assume_ttl_s=config.assume_ttl_s,
        )
        dispatcher = Dispatcher(
            cache, ledger, binder, evicts, words, mets, watchdog, dry_run=config.dry_run
        )
        return cls(
            clk, elect, cache, live, ledger, words, binder, evicts, watchdog, dispatcher, mets
        )


def _kube_options(config: ServeConfig) -> KubeOptions:
    return KubeOptions(
        topology_labels=config.topology_labels,
        device_layout=config.device_layout,
        gpu_resource=config.gpu_resource,
        nic_resource=config.nic_resource,
        default_queue=config.default_queue,
    )


def _selection(config: ServeConfig) -> Selection:
    return Selection(
        mode=config.mode, scheduler_name=config.scheduler_name, namespaces=config.namespaces
    )
