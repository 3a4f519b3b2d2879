"""What every command of the ``gangplan`` command line shares: the root group :data:`main`,
the one way user mistakes end (:class:`UserError`, :func:`user_errors`), warnings
(:func:`echo_warnings`), and the option types for files to write, time limits, durations
with units (:class:`Duration`: ``90``, ``5m``, ``7d``) and ``START:END`` windows
(:data:`WINDOW`).

User mistakes (a missing file, a bad field, an unknown option value) end with
``error: ...`` lines on stderr naming the file, the object and the field, and exit code 1 —
never a traceback. A command raises :class:`UserError` (directly, or through
:func:`user_errors`, which turns the input errors of :mod:`gangplan.adapters` into one); it
never calls ``sys.exit``.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from gangplan.adapters.files import InputError, check_output, write_output
from gangplan.adapters.kube.options import KubeInputError
from gangplan.adapters.traces.common import (
    Converted,
    instance_text,
    parse_duration,
    parse_window,
)

__all__ = [
    "OUTPUT",
    "SECONDS",
    "WINDOW",
    "Duration",
    "Finite",
    "OutputFile",
    "Seconds",
    "UserError",
    "Window",
    "echo_warnings",
    "emit_instance",
    "fill80",
    "guard_output",
    "instance_output",
    "main",
    "parse_seconds",
    "problems_found",
    "user_errors",
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gangplan")
def main() -> None:
    """gangplan: gang-atomic, RDMA-local, fair batch placement for Kubernetes GPU clusters."""


def problems_found(n: int) -> str:
    """``1 problem found``, ``3 problems found``."""
    return f"{n} problem{'s' if n != 1 else ''} found"


class UserError(click.ClickException):
    """A user mistake, or a check that failed: exit code 1, no traceback.

    ``lines`` go to stderr as ``error: LINE``, then ``summary`` (e.g. ``3 problems found``,
    ``2 violations``) as it is, when given.
    """

    exit_code = 1

    def __init__(self, lines: Iterable[str], summary: str | None = None):
        self.lines = list(lines)
        self.summary = summary
        super().__init__("\n".join([*self.lines, *([summary] if summary else [])]))

    @classmethod
    def of(cls, err: InputError, *, counted: bool = True) -> UserError:
        """The error of ``err``'s problems, counted (``N problems found``) unless not."""
        return cls(err.lines(), problems_found(len(err.problems)) if counted else None)

    def show(self, file: IO[Any] | None = None) -> None:
        for line in self.lines:
            click.echo(f"error: {line}", err=True, file=file)
        if self.summary:
            click.echo(self.summary, err=True, file=file)


@contextmanager
def user_errors(*, counted: bool = True) -> Iterator[None]:
    """Inside, an :class:`~gangplan.adapters.files.InputError` becomes a :class:`UserError`
    (its problems, then their count unless ``counted`` is False), and a
    :class:`~gangplan.adapters.kube.options.KubeInputError` one of its message. Also a
    decorator (``@user_errors()``)."""
    try:
        yield
    except InputError as err:
        raise UserError.of(err, counted=counted) from None
    except KubeInputError as err:
        raise UserError([str(err)]) from None


def echo_warnings(warnings: Iterable[str]) -> None:
    """``warning: ...`` lines on stderr."""
    for w in warnings:
        click.echo(f"warning: {w}", err=True)


def guard_output(output: Path | None, *inputs: Path | str | None, kind: str | None) -> None:
    """Before any work: refuse an ``output`` that is one of ``inputs`` or a gangplan file of
    another kind than ``kind`` (:func:`gangplan.adapters.files.check_output`).

    Raises:
        UserError: naming the output.
    """
    if output is not None:
        with user_errors(counted=False):
            check_output(output, inputs, kind=kind)


def emit_instance(result: Converted, output: Path | None) -> None:
    """Write a converted or generated instance to ``output`` (YAML, or JSON by the
    ``.json`` suffix; ``-``: stdout; see :func:`gangplan.adapters.files.write_output`) or
    stdout; its warnings and a one-line summary go to stderr.

    Raises:
        UserError: the file cannot be written.
    """
    echo_warnings(result.warnings)
    fmt = "json" if output is not None and output.suffix.lower() == ".json" else "yaml"
    text = instance_text(result.data, fmt)
    if output is None:
        click.echo(text, nl=False)
        click.echo(fill80(f"instance: {result.summary()}"), err=True)
    else:
        with user_errors(counted=False):
            write_output(output, text)
        click.echo(fill80(f"wrote {output}: {result.summary()}"), err=True)


def fill80(text: str) -> str:
    """``text`` wrapped at 80 columns, continuation lines indented 2 (words never broken)."""
    return textwrap.fill(text, 80, subsequent_indent="  ", break_long_words=False)


class OutputFile(click.Path):
    """A file to write: its folder must exist (checked before any work is done)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = Path(os.fsdecode(super().convert(value, param, ctx)))
        if not path.parent.is_dir():
            self.fail(f"{path}: folder {path.parent} does not exist", param, ctx)
        return path


OUTPUT = OutputFile()


class Finite(click.FloatRange):
    """A finite number in a range: ``nan`` and ``inf`` are refused (a comparison with nan is
    never true, so a plain :class:`click.FloatRange` lets nan through, and inf through a
    range without a maximum). ``what`` is what the message calls it (``number of seconds``)."""

    def __init__(self, *args: Any, what: str = "number", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = float(click.FLOAT.convert(value, param, ctx))
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite {self.what}", param, ctx)
        return super().convert(number, param, ctx)


class Seconds(Finite):
    """A time limit: a finite number of seconds in [0.01, 86400]."""

    def __init__(self) -> None:
        super().__init__(min=0.01, max=86_400, what="number of seconds")


SECONDS = Seconds()


if TYPE_CHECKING:
    _FloatType = click.ParamType[float]
    _WindowType = click.ParamType[tuple[float, float]]
else:  # the older click releases pyproject accepts have no generic ParamType at run time
    _FloatType = _WindowType = click.ParamType


def _in_units(seconds: float) -> str:
    """``86400`` -> ``1d``, ``5400`` -> ``90m``: the largest unit that divides evenly."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def parse_seconds(text: str, *, zero_ok: bool = False, max_s: float | None = None) -> float:
    """A duration in seconds from ``text``: seconds, or numbers with units d, h, m, s summed
    (``60``, ``5m``, ``7d``, ``1h30m``; :func:`gangplan.adapters.traces.common.parse_duration`).
    It must be finite and > 0 (>= 0 when ``zero_ok``), and at most ``max_s`` when given.

    Raises:
        ValueError: a message naming ``text`` and what would be accepted.
    """
    seconds = parse_duration(text)
    lowest = "a time >= 0" if zero_ok else "a time > 0"
    if seconds == math.inf or not (seconds > 0 or (zero_ok and seconds == 0)):
        raise ValueError(f"{text!r}: accepted {lowest} (e.g. 60, 5m, 7d)")
    if max_s is not None and seconds > max_s:
        raise ValueError(
            f"{text!r}: accepted {lowest} and at most {_in_units(max_s)} ({max_s:g} s)"
        )
    return seconds


class Duration(_FloatType):
    """An option's duration in seconds (a float), written as :func:`parse_seconds` reads it:
    ``90``, ``5m``, ``2.5h``, ``7d``; > 0 (>= 0 when ``zero_ok``), at most ``max_s`` when
    given. A bad value is click's usage error (exit 2) naming the option."""

    name = "duration"

    def __init__(self, *, zero_ok: bool = False, max_s: float | None = None) -> None:
        self.zero_ok = zero_ok
        self.max_s = max_s

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float):  # converted already (a default given as a number)
            return value
        try:
            return parse_seconds(str(value), zero_ok=self.zero_ok, max_s=self.max_s)
        except ValueError as err:
            self.fail(str(err), param, ctx)


class Window(_WindowType):
    """``START:END`` in seconds from a trace's zero, each side a :class:`Duration` or empty
    (open): ``49d:56d``, ``:1h`` (:func:`gangplan.adapters.traces.common.parse_window`); a
    ``(start, end)`` tuple. A bad value is click's usage error (exit 2)."""

    name = "start:end"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        try:
            return parse_window(str(value))
        except ValueError as err:
            self.fail(str(err), param, ctx)


WINDOW = Window()


def instance_output(func: Callable[..., None]) -> Callable[..., None]:
    """The ``-o/--output`` option of a command that writes an instance."""
    return click.option(
        "-o",
        "--output",
        type=OUTPUT,
        help="write the instance here (.json: JSON; else YAML); default: stdout",
    )(func)


def move_cap_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The per-wave caps a move plan is checked against (``--max-moving-per-node``, default
    2, and ``--max-moving-per-namespace``, default none), as ``gangplan replan`` plans them:
    taken from the command line, never from the plan file."""
    f = click.option(
        "--max-moving-per-namespace",
        type=click.IntRange(min=1),
        help="a move plan: pods of one namespace moving per wave (default: no cap)",
    )(f)
    return click.option(
        "--max-moving-per-node",
        type=click.IntRange(min=1),
        default=2,
        show_default=True,
        help="a move plan: pods moving off one node per wave (as for `gangplan replan`)",
    )(f)
