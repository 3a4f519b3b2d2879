"""gangplan's solver: one scheduling cycle from a snapshot to a plan (:mod:`.cycle`).

The cycle's context (:mod:`.context`), the baseline placers and their registry
(:mod:`.baselines`: :mod:`.greedy`, :mod:`.topology_fit`, :mod:`.fgd`, with the one-pod rules
of :mod:`.one_pod` and the queue order of :mod:`.queue_order`), the cluster state they
change (:mod:`.state`), the CP-SAT model (:mod:`.model`), the reasons for pending gangs
(:mod:`.reasons`), and the judges that share no code with any placer: the verifier
(:mod:`.verify`), the score (:mod:`.score`) and the metrics (:mod:`.metrics`). No
Kubernetes and no files here: those are ``gangplan.adapters``.
"""
