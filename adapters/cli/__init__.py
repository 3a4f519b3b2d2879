"""The ``gangplan`` command line (click), one module per command group.

:data:`main` (the console script ``gangplan``) is the root group of
:mod:`~gangplan.adapters.cli.common`; each module below adds its commands to it when
imported, so a new command group is a new module imported here:

* :mod:`~gangplan.adapters.cli.solve` — ``validate``, ``schema``, ``solve``, ``verify``;
* :mod:`~gangplan.adapters.cli.convert` — the ``convert`` group, ``convert alibaba-gpu``
  and ``convert jobs-trace``;
* :mod:`~gangplan.adapters.cli.k8s` — ``convert k8s``;
* :mod:`~gangplan.adapters.cli.generate` — ``generate fat-tree``;
* :mod:`~gangplan.adapters.cli.bench` — ``bench``;
* :mod:`~gangplan.adapters.cli.replay` — ``replay alibaba``;
* :mod:`~gangplan.adapters.cli.replan` — ``replan`` (moves in waves);
* :mod:`~gangplan.adapters.cli.simulate` — ``simulate`` (the simulator,
  :mod:`gangplan.adapters.sim`, imports nothing of the command line);
* :mod:`~gangplan.adapters.cli.serve` — ``serve``, ``apply`` and ``webhook`` (the live loop).
"""

from gangplan.adapters.cli import (
    bench,
    convert,
    generate,
    k8s,
    replan,
    replay,
    serve,
    simulate,
    solve,
)
from gangplan.adapters.cli.common import main

__all__ = [
    "bench",
    "convert",
    "generate",
    "k8s",
    "main",
    "replan",
    "replay",
    "serve",
    "simulate",
    "solve",
]
