"""``gangplan simulate``: a discrete-event simulator of a GPU cluster over weeks.

Jobs of a trace arrive, wait as pending gangs, are planned every period of simulated time
by gangplan's cycle (:func:`gangplan.solver.cycle.solve_cycle`, or a baseline through
:func:`~gangplan.solver.cycle.run_baseline`), run for their duration and leave; the run
measures completion, waiting, utilisation and fairness (``docs/simulate.md``).

=============  ===============================================================
module         what it holds
=============  ===============================================================
``cluster``    the cluster: an instance file, or Philly's machine list made into one
``jobs``       trace jobs as simulated jobs (the converter of ``convert jobs-trace``)
``engine``     the event loop, the state kept between cycles, the run's records
``placers``    the placer protocol over the cycle function (a test double fits it)
``speed``      the rate of a bound job: the spread slowdown; elastic rates later
``metrics``    JCT, wait, utilisation, fairness, cycle times (numpy)
``report``     ``report.md``, ``results.csv``, ``groups.csv``
``plots``      the PNG plots (matplotlib, Agg)
``sweep``      placers x seeds x policies on worker processes or Ray
=============  ===============================================================

The ``gangplan simulate`` command is :mod:`gangplan.adapters.cli.simulate`; nothing here
imports the command line.
"""
