"""The CP-SAT model of one cycle: dense indices (:mod:`.indexing`), every variable
(:mod:`.variables`), the hard rules (:mod:`.constraints`), one objective term per score entry
(:mod:`.objective`), and the tier-by-tier solve with the hint and the turn back into pods
(:mod:`.builder`). See ``docs/solver.md``.
"""
