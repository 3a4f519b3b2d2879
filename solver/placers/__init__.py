"""The baseline placers and what they share.

The registry (:mod:`.baselines`) of ``greedy`` (Volcano's allocate, :mod:`.greedy`),
``topology-fit`` (Kueue TAS, :mod:`.topology_fit`) and ``fgd`` (fragmentation gradient
descent, :mod:`.fgd`, with its restarts in :mod:`.restarts`); the one-pod rules
(:mod:`.one_pod`), the queue order (:mod:`.queue_order`), the node rankings
(:mod:`.ranking`), the mutable cluster state they change (:mod:`.state`) and the
baselines' greedy preemption (:mod:`.greedy_preemption`).
"""
