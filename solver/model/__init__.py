"""The CP-SAT model of one cycle: dense indices (:mod:`.indexing`), every variable
(:mod:`.variables`), the hard rules (:mod:`.constraints`), one objective term per score entry
(:mod:`.objective`); :func:`.builder.solve_model` runs the build under its guard
(:mod:`.build`), the tier-by-tier search with the hint (:mod:`.search`) and the turn back into
pods (:mod:`.readback`). See ``docs/solver.md``.
"""
