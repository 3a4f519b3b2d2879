"""Reading and writing instance and plan files (YAML or JSON), and the embedded default.

Every error names the file, and for content problems the path inside it
(``default.yaml: gangs[3].roles[0].count: ...``); nothing here prints or exits — the CLI
turns :class:`InputError` into a one-line-per-problem message and exit code 1.
"""

from __future__ import annotations

import codecs
import json
import os
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gangplan.adapters import yaml_input
from gangplan.models import (
    InstanceError,
    Plan,
    Problem,
    Snapshot,
    instance_from_snapshot,
    load_instance,
)
from gangplan.models.instance import validation_problems

__all__ = [
    "DEFAULT_INSTANCE",
    "MAX_INPUT_BYTES",
    "MAX_INPUT_VARIABLE",
    "InputError",
    "NotText",
    "default_instance_text",
    "dump_data",
    "input_limit",
    "load_plan",
    "load_snapshot",
    "read_data",
    "read_text",
    "write_plan",
    "write_snapshot",
]

DEFAULT_INSTANCE = "default.yaml"

MAX_INPUT_BYTES = 1 << 30
"""The most gangplan reads from one file (or standard input): 1 GiB, about 8 times a
kubectl dump of a 5,000-node, 50,000-pod cluster as YAML; past it the file is refused before
it is parsed (a YAML parse takes about 10 times the file's size in memory). Set the
environment variable :data:`MAX_INPUT_VARIABLE` to a number of bytes to read larger files."""
MAX_INPUT_VARIABLE = "GANGPLAN_MAX_INPUT_BYTES"
_CHUNK = 1 << 20


class InputError(Exception):
    """A file that cannot be used; ``problems`` are ``file: path: message`` lines."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = problems
        super().__init__("\n".join(self.lines()))

    def lines(self) -> Iterator[str]:
        for p in self.problems:
            yield f"{self.source}: {p}" if p.path or p.message else self.source


class NotText(InputError):
    """A file that is not UTF-8 text (binary, or a device such as ``/dev/zero``)."""


def input_limit() -> int:
    """The byte limit of one input: :data:`MAX_INPUT_VARIABLE` if set, else
    :data:`MAX_INPUT_BYTES`.

    Raises:
        InputError: the variable is set to something that is not a positive whole number.
    """
    raw = os.environ.get(MAX_INPUT_VARIABLE)
    if raw is None:
        return MAX_INPUT_BYTES
    if not (raw.isascii() and raw.isdigit() and int(raw) > 0):
        raise InputError(
            MAX_INPUT_VARIABLE, [Problem("", f"is {raw!r}; accepted: a positive number of bytes")]
        )
    return int(raw)


def read_text(path: str | Path, *, dash_is_stdin: bool = False) -> str:
    """The text of a file (or of standard input, for ``-`` if ``dash_is_stdin``): UTF-8, a
    leading byte-order mark dropped (as kubectl and Go's JSON decoders accept one). Read in
    chunks, so that a device or a pipe that never ends (``/dev/zero``, ``yes |``) is refused
    at its first NUL byte or past :func:`input_limit` bytes, never read whole.

    Raises:
        InputError: no such file, a folder, unreadable, or larger than the limit.
        NotText: a NUL byte (YAML, JSON and CSV text never holds one) or bytes that are not
            UTF-8, with the offset of the first.
    """
    name = str(path)
    limit = input_limit()
    stdin = dash_is_stdin and name == "-"
    try:
        # standard input as bytes (a text stream without a buffer, as tests set, as text)
        handle = getattr(sys.stdin, "buffer", sys.stdin) if stdin else open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise InputError(name, [Problem("", "no such file")]) from None
    except IsADirectoryError:
        raise InputError(name, [Problem("", "is a directory, not a file")]) from None
    except OSError as err:
        raise InputError(name, [Problem("", f"cannot read: {err.strerror or err}")]) from None
    try:
        return _decoded(name, handle, limit)
    except OSError as err:
        raise InputError(name, [Problem("", f"cannot read: {err.strerror or err}")]) from None
    finally:
        if not stdin:
            handle.close()


def _decoded(name: str, handle: Any, limit: int) -> str:
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    parts: list[str] = []
    offset = 0
    while chunk := handle.read(_CHUNK):
        if isinstance(chunk, str):  # a text stream: already decoded
            chunk = chunk.encode("utf-8", "surrogateescape")
        if (nul := chunk.find(b"\0")) >= 0:
            where = f"a NUL byte at byte {offset + nul:,}"
            raise NotText(
                name,
                [Problem("", f"not text: {where} (a binary file, or a device such as /dev/zero?)")],
            )
        offset += len(chunk)
        if offset > limit:
            raise InputError(
                name,
                [
                    Problem(
                        "",
                        f"larger than {limit:,} bytes, the most gangplan reads from one file "
                        f"(set {MAX_INPUT_VARIABLE} to read more)",
                    )
                ],
            )
        try:
            parts.append(decoder.decode(chunk))
        except UnicodeDecodeError as err:
            at = offset - len(chunk) + err.start
            raise NotText(
                name, [Problem("", f"not UTF-8 text: {err.reason} at byte {at:,}")]
            ) from None
    try:
        parts.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError as err:
        raise NotText(name, [Problem("", f"not UTF-8 text: {err.reason} at the end")]) from None
    return "".join(parts)


def default_instance_text() -> str:
    """The embedded default instance (package data, found after a non-editable install)."""
    return resources.files("gangplan.instances").joinpath(DEFAULT_INSTANCE).read_text("utf-8")


def read_data(path: str | Path | None) -> tuple[str, Any]:
    """Parse a YAML or JSON file (``None``: the embedded default). Returns (name, data).

    The file is read by :func:`read_text` (a size bound, UTF-8 with or without a BOM) and
    YAML by :mod:`gangplan.adapters.yaml_input` (duplicate keys and excessive aliasing
    refused).

    Raises:
        InputError: missing file, unreadable, too large, not text, or not valid YAML/JSON
            (with line and column).
    """
    if path is None:
        return f"<embedded {DEFAULT_INSTANCE}>", yaml_input.load(default_instance_text())
    p = Path(path)
    name = str(p)
    text = read_text(p)
    try:
        if p.suffix.lower() == ".json":
            return name, json.loads(text)
        return name, yaml_input.load(text)
    except json.JSONDecodeError as err:
        raise InputError(
            name, [Problem(f"line {err.lineno} column {err.colno}", f"not valid JSON: {err.msg}")]
        ) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else ""
        what = getattr(err, "problem", None) or str(err)
        raise InputError(name, [Problem(where, f"not valid YAML: {what}")]) from None
    except RecursionError:
        raise InputError(name, [Problem("", "nested too deeply to read")]) from None


def load_snapshot(path: str | Path | None) -> tuple[Snapshot, list[str]]:
    """Read and validate an instance file (``None``: the embedded default).

    Returns:
        ``(snapshot, warnings)``.

    Raises:
        InputError: every problem at once, each naming the file and the path inside it.
    """
    name, data = read_data(path)
    if isinstance(data, dict) and data.get("kind") not in (None, "Instance"):
        raise InputError(name, [Problem("kind", f"is {data.get('kind')!r}; accepted: 'Instance'")])
    try:
        return load_instance(data)
    except RecursionError:
        raise InputError(name, [Problem("", "nested too deeply to validate")]) from None
    except InstanceError as err:
        raise InputError(name, err.problems) from None


def load_plan(path: str | Path) -> Plan:
    """Read a plan file (``kind: Plan``) written by ``gangplan solve --output``.

    Raises:
        InputError: not a readable plan, with the path of each bad field.
    """
    name, data = read_data(path)
    if data is None:
        raise InputError(name, [Problem("", "the file is empty (expected kind: Plan)")])
    if not isinstance(data, dict):
        raise InputError(
            name, [Problem("", f"the file holds a {type(data).__name__}, not a plan (kind: Plan)")]
        )
    if data.get("kind") != "Plan":
        raise InputError(
            name,
            [
                Problem(
                    "kind",
                    f"is {data.get('kind')!r}; accepted: 'Plan' (a file written by "
                    "gangplan solve --output)",
                )
            ],
        )
    try:
        return Plan.model_validate(data)
    except ValidationError as err:
        raise InputError(name, validation_problems(err, Plan)) from None


def dump_data(data: Any, fmt: str) -> str:
    """YAML or JSON text of plain data (``fmt``: ``yaml`` or ``json``)."""
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _format_for(path: Path) -> str:
    return "json" if path.suffix.lower() == ".json" else "yaml"


def write_text_atomically(path: str | Path, text: str) -> None:
    """Write via a temporary file and rename, so nothing is ever half-written.

    Raises:
        InputError: the folder does not exist, or the write failed (disk full, no
            permission); the temporary file is removed and ``path`` is left as it was.
    """
    p = Path(path)
    if not p.parent.is_dir():
        raise InputError(str(p), [Problem("", f"folder {p.parent} does not exist")])
    if p.is_dir():
        raise InputError(str(p), [Problem("", "is a directory, not a file")])
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(p)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise InputError(str(p), [Problem("", f"cannot write: {err.strerror or err}")]) from None


def write_snapshot(snapshot: Snapshot, path: str | Path) -> None:
    """Write ``snapshot`` as an instance file (YAML, or JSON by the ``.json`` suffix)."""
    p = Path(path)
    write_text_atomically(p, dump_data(instance_from_snapshot(snapshot), _format_for(p)))


def plan_data(plan: Plan) -> dict[str, Any]:
    return plan.model_dump(mode="json", by_alias=True, exclude_none=True)


def write_plan(plan: Plan, path: str | Path) -> None:
    """Write ``plan`` (YAML, or JSON by the ``.json`` suffix)."""
    p = Path(path)
    write_text_atomically(p, dump_data(plan_data(plan), _format_for(p)))
