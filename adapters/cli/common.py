"""Click parameter types shared by the CLI modules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

__all__ = ["OUTPUT", "SECONDS", "OutputFile", "Seconds"]


class OutputFile(click.Path):
    """A file to write: its folder must exist (checked before any work is done)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = Path(super().convert(value, param, ctx))
        if not path.parent.is_dir():
            self.fail(f"{path}: folder {path.parent} does not exist", param, ctx)
        return path


OUTPUT = OutputFile()


class Seconds(click.FloatRange):
    """A time limit: a finite number of seconds in [0.01, 86400] (``nan`` and ``inf`` are
    refused: a comparison with nan is never false, so a plain range lets it through)."""

    def __init__(self) -> None:
        super().__init__(min=0.01, max=86_400)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = float(super().convert(value, param, ctx))
        if number != number or number in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return number


SECONDS = Seconds()
