"""The judges of a plan, sharing no code with the CP-SAT model.

The verifier of every hard rule (:mod:`.verify`, with its eviction and reservation checks in
:mod:`.verify_evictions` and :mod:`.verify_reservations`), the move-plan verifier
(:mod:`.verify_moves`), the score (:mod:`.score`), the bench metrics (:mod:`.metrics`), and
the measures they read: dominant shares and fair targets (:mod:`.fairness`), FGD's
fragmentation (:mod:`.fragmentation`) and the GPUs still placeable per queue after a plan
(:mod:`.placeable`).
"""
