"""The ``gangplan convert`` group: turns outside input into instance files.

The group is defined here and nothing else, so that each converter registers its own
subcommands from its own module (``cli_traces``: ``alibaba-gpu``, ``jobs-trace``; the
Kubernetes converter: ``k8s``) without editing a shared file. ``cli.py`` adds the group to
``gangplan`` and imports the modules that register on it.
"""

from __future__ import annotations

import click

__all__ = ["convert"]


@click.group()
def convert() -> None:
    """Convert real cluster input (traces, Kubernetes objects) into an instance file."""
