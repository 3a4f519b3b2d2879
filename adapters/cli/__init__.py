"""The ``gangplan`` command line (click): one module per command group."""

from gangplan.adapters.cli.solve import main

__all__ = ["main"]
