"""gangplan's solver: one scheduling cycle from a snapshot to a plan.

Rooms:

* :mod:`.cycle` — the cycle's pipeline (:func:`~gangplan.solver.cycle.solve_cycle`), the
  reasons for pending gangs, reservations and the polish of an incumbent;
* :mod:`.placers` — the baseline placers, their registry and the cluster state they change;
* :mod:`.model` — the CP-SAT model (indices, variables, constraint families, objective,
  search);
* :mod:`.judges` — the verifier, the score and the metrics, which share no code with the
  model;
* :mod:`.replan` — moves of running gangs and their waves;
* shared by all: the cycle's context (:mod:`.context`), its budget (:mod:`.budget`) and
  what a cycle is asked and returns (:mod:`.result`).

No Kubernetes and no files here: those are ``gangplan.adapters``.
"""
