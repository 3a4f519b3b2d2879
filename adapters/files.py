"""Reading and writing instance and plan files (YAML or JSON), and the embedded default.

Every error names the file, and for content problems the path inside it
(``default.yaml: gangs[3].roles[0].count: ...``); nothing here prints or exits — the CLI
turns :class:`InputError` into a one-line-per-problem message and exit code 1.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gangplan.adapters import yaml_input
from gangplan.adapters.jsontext import DuplicateKeyError, key_lines, strict_pairs
from gangplan.adapters.yaml_input import gc_paused
from gangplan.models import (
    InstanceError,
    MovePlan,
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
    "STDOUT",
    "InputError",
    "NotText",
    "check_output",
    "default_instance_text",
    "dump_data",
    "gc_paused",
    "input_limit",
    "load_any_plan",
    "load_move_plan",
    "load_plan",
    "load_snapshot",
    "read_data",
    "read_text",
    "write_output",
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
        hint = " (this command reads files, not standard input)" if name == "-" else ""
        raise InputError(name, [Problem("", f"no such file{hint}")]) from None
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
    refused); JSON by :func:`json.loads`, duplicate keys refused too
    (:func:`~gangplan.adapters.jsontext.strict_pairs`).

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
            # duplicate keys refused, as YAML's and Kubernetes' strict decoding refuse them
            with gc_paused():
                return name, json.loads(text, object_pairs_hook=strict_pairs)
        return name, yaml_input.load(text)
    except DuplicateKeyError as err:
        lines = key_lines(text, err.key)  # both lines when the key appears only twice
        where = (
            ""
            if len(lines) != 2
            else f"line {lines[0]}"
            if lines[0] == lines[1]
            else f"lines {lines[0]} and {lines[1]}"
        )
        raise InputError(name, [Problem(where, f"not valid JSON: {err}")]) from None
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
    if isinstance(data, dict) and _looks_like_a_case(data):
        raise InputError(name, [Problem("", _case_hint(data))])
    if isinstance(data, dict) and data.get("kind") not in (None, "Instance"):
        raise InputError(name, [Problem("kind", f"is {data.get('kind')!r}; accepted: 'Instance'")])
    slow = yaml_input.loader_warning() if _format_for(Path(name)) == "yaml" else None
    try:
        snapshot, warnings = load_instance(data)
        return snapshot, [*([slow] if slow else []), *warnings, *_joint_without_layout(snapshot)]
    except RecursionError:
        raise InputError(name, [Problem("", "nested too deeply to validate")]) from None
    except InstanceError as err:
        raise InputError(name, err.problems) from None


def _joint_without_layout(snapshot: Snapshot) -> list[str]:
    """A warning per gang that asks joint GPU/NIC allocation for pods with NICs while no node
    declares a device layout (docs/instance-format.md: joint allocation needs one): the
    implicit layout's PCIe topology is unknown, so such a gang never gets its NICs."""
    s = snapshot
    if any(n.has_device_topology for n in s.nodes):
        return []
    return [
        f"gang {g.key!r}: joint allocation {g.joint!r} needs a declared device layout, but no "
        "node has one, so it never fits: give the nodes `device_layout: NAME` (a "
        "template of `device_layouts`) or `devices: {numa_nodes: [...]}`, or set `joint: none`"
        for g in s.gangs
        if g.joint != "none" and any(r.requests.get(s.nic, 0) for r in g.roles)
    ]


def _looks_like_a_case(data: dict[str, Any]) -> bool:
    """A test case in the short form ``id``, ``cluster``, ``expect`` (its ``kind`` a
    sentence), not an instance: no ``apiVersion``, and ``expect`` beside ``cluster`` or
    ``id``."""
    return (
        "apiVersion" not in data
        and "expect" in data
        and ("cluster" in data or "id" in data or "case" in data)
    )


def _case_hint(data: dict[str, Any]) -> str:
    """What to run instead of a case file: the translated instance the package ships
    (``instances/cases/<id>.yaml``) when there is one."""
    head = (
        "this looks like a test case (id, cluster, expect), not an instance file (kind: Instance)"
    )
    case = data.get("id") or data.get("case")
    if isinstance(case, str) and case and "/" not in case and "\\" not in case:
        shipped = resources.files("gangplan.instances.cases").joinpath(f"{case}.yaml")
        if shipped.is_file():
            return f"{head}; its translated instance is {shipped}: pass that file instead"
    return f"{head}; the translated cases ship in instances/cases/ (see its README.md)"


_PLAN_KINDS = {
    "Plan": "a file written by gangplan solve --output",
    "MovePlan": "a file written by gangplan replan -o",
}


def _plan_data(path: str | Path, kinds: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """The file's name and its mapping, whose ``kind`` is one of ``kinds``."""
    name, data = read_data(path)
    which = " or ".join(f"kind: {k}" for k in kinds)
    if data is None:
        raise InputError(name, [Problem("", f"the file is empty (expected {which})")])
    if not isinstance(data, dict):
        raise InputError(
            name, [Problem("", f"the file holds a {type(data).__name__}, not a plan ({which})")]
        )
    if data.get("kind") not in kinds:
        accepted = "; ".join(f"{k!r} ({_PLAN_KINDS[k]})" for k in kinds)
        raise InputError(name, [Problem("kind", f"is {data.get('kind')!r}; accepted: {accepted}")])
    return name, data


def _plan(name: str, data: dict[str, Any]) -> Plan:
    try:
        return Plan.model_validate(data)
    except ValidationError as err:
        raise InputError(name, validation_problems(err, Plan)) from None


def _move_plan(name: str, data: dict[str, Any]) -> MovePlan:
    if "final" not in data:  # gangplan replan -o always writes it: the file is cut short
        raise InputError(
            name,
            [
                Problem(
                    "final",
                    "missing (the pending gangs' plan after the waves; a move plan from "
                    "gangplan replan -o always has it)",
                )
            ],
        )
    try:
        return MovePlan.model_validate(data)
    except ValidationError as err:
        problems = [
            Problem(
                ".".join(map(str, e["loc"])),
                e["msg"].replace("a valid tuple", "a list"),  # a tuple is a YAML list
            )
            for e in err.errors()
        ]
        raise InputError(name, problems) from None


def load_plan(path: str | Path) -> Plan:
    """Read a plan file (``kind: Plan``) written by ``gangplan solve --output``.

    Raises:
        InputError: not a readable plan, with the path of each bad field.
    """
    return _plan(*_plan_data(path, ("Plan",)))


def load_move_plan(path: str | Path) -> MovePlan:
    """Read a move plan file (``kind: MovePlan``) written by ``gangplan replan -o``.

    Raises:
        InputError: not a readable move plan (its ``final`` missing: the file was cut
            short), with the path of each bad field.
    """
    return _move_plan(*_plan_data(path, ("MovePlan",)))


def load_any_plan(path: str | Path) -> Plan | MovePlan:
    """Read a plan (``kind: Plan``) or a move plan (``kind: MovePlan``), by its ``kind``.

    Raises:
        InputError: as :func:`load_plan` and :func:`load_move_plan`.
    """
    name, data = _plan_data(path, ("Plan", "MovePlan"))
    return _move_plan(name, data) if data["kind"] == "MovePlan" else _plan(name, data)


_DUMPER: type[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's emitter behind PyYAML's safe representer where PyYAML has it (about 5 times
faster on a large instance than the pure-Python emitter), else the pure-Python
``SafeDumper``. Both write text that reads back as the same data; libyaml's differs only in
how it quotes some strings (characters outside the Basic Multilingual Plane as escapes,
keys with control characters in explicit ``?`` form) — an instance of names and numbers is
the same text byte for byte."""


def dump_data(data: Any, fmt: str) -> str:
    """YAML or JSON text of plain data (``fmt``: ``yaml`` or ``json``). YAML as
    ``yaml.safe_dump(data, sort_keys=False, allow_unicode=True)`` writes it, with
    libyaml's emitter where it exists (:data:`_DUMPER`)."""
    with gc_paused():
        if fmt == "json":
            return json.dumps(data, indent=2, sort_keys=False) + "\n"
        text: str = yaml.dump(data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True)
        return text


def _format_for(path: Path) -> str:
    return "json" if path.suffix.lower() == ".json" else "yaml"


STDOUT = "-"
"""The output path that means standard output."""
_KIND = re.compile(
    r"^kind:[ \t]*[\"']?(Instance|Plan)[\"']?[ \t]*$" + r'|"kind"\s*:\s*"(Instance|Plan)"',
    re.MULTILINE,
)


def check_output(
    path: str | Path, inputs: Iterable[str | Path | None] = (), *, kind: str | None = None
) -> None:
    """Refuse an output that would destroy what the command reads, or a gangplan file of
    another kind — before any work is done.

    ``inputs``: the files and folders the command reads (``None`` and ``-`` skipped). The
    output may be none of them — the same file by device and inode, as ``os.path.samefile``
    compares them, so a hard link, a symlink or another spelling of an input's path is
    caught — nor an existing file inside an input folder. ``kind``: what the command
    writes (``"Instance"``, ``"Plan"``, or None for anything else, e.g. the JSON Schema); an
    existing gangplan instance or plan file of another kind is not replaced (``solve -o
    cluster.yaml`` never turns an instance into a plan).

    Raises:
        InputError: naming the output, and the input or the kind it holds.
    """
    if str(path) == STDOUT:
        return
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return  # nothing stands there (or the write will say why it cannot)
    for given in inputs:
        if given is None or str(given) == STDOUT:
            continue
        try:
            held = os.stat(given)
        except OSError:
            continue
        if (held.st_dev, held.st_ino) == (st.st_dev, st.st_ino):
            what = (
                "is an input of this command"
                if str(given) == str(path)
                else f"is the same file as the input {given}"
            )
            raise InputError(
                str(p), [Problem("", f"{what}: it would be replaced; give another output path")]
            )
        if stat.S_ISDIR(held.st_mode) and Path(os.path.realpath(p)).is_relative_to(
            os.path.realpath(given)
        ):
            raise InputError(
                str(p),
                [Problem("", f"is inside the input folder {given}; give another output path")],
            )
    if stat.S_ISREG(st.st_mode):
        found = _gangplan_kind(p)
        if found is not None and found != kind:
            writes = {"Instance": "an instance", "Plan": "a plan"}.get(kind or "", "other data")
            raise InputError(
                str(p),
                [
                    Problem(
                        "",
                        f"holds a gangplan {found.lower()} (kind: {found}), and this command "
                        f"writes {writes}: it is not replaced; give another output path, or "
                        "remove the file first",
                    )
                ],
            )


def _gangplan_kind(path: Path) -> str | None:
    """``Instance`` or ``Plan`` if the file's first 64 KiB read as a gangplan file of that
    kind (``apiVersion: gangplan.io/...``); None otherwise, or if it cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return None
    m = _KIND.search(head)
    if m is None or "gangplan.io/" not in head:
        return None
    return m.group(1) or m.group(2)


def write_output(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path``, never destroying what stands there:

    * ``-``: standard output;
    * a regular file, or a path where nothing stands: atomically — a temporary file in the
      same folder, flushed to disk (fsync), then renamed over the path, so a reader sees the
      old file or the new one, never half of one; an existing file keeps its permissions
      (and, as root, its owner and group);
    * a symlink: followed, the file it points to replaced as above (the link stays);
    * anything else — a character device such as ``/dev/null`` or ``/dev/full``, a FIFO, a
      socket: opened and written as a stream, as ``>`` in a shell does (it is never replaced
      by a regular file).

    Raises:
        InputError: the folder does not exist, the path is a folder, or the write failed
            (disk full — ``ENOSPC`` on ``/dev/full`` —, no permission, a closed pipe); a
            regular file is then left as it was and the temporary file removed.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    name = str(path)
    if name == STDOUT:
        _write_stream(name, getattr(sys.stdout, "buffer", None), raw)
        return
    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise InputError(name, [Problem("", f"cannot write: {err.strerror or err}")]) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError(name, [Problem("", "is a directory, not a file")])
    if st is None or stat.S_ISREG(st.st_mode):
        _replace(name, Path(os.path.realpath(path)), raw, st)
        return
    try:
        with open(path, "wb") as stream:
            stream.write(raw)
    except OSError as err:
        raise InputError(name, [Problem("", f"cannot write: {err.strerror or err}")]) from None


def _write_stream(name: str, stream: Any, raw: bytes) -> None:
    try:
        if stream is None:  # a text stream without a buffer (as tests set)
            sys.stdout.write(raw.decode("utf-8"))
            sys.stdout.flush()
        else:
            stream.write(raw)
            stream.flush()
    except OSError as err:
        raise InputError(name, [Problem("", f"cannot write: {err.strerror or err}")]) from None


def _replace(name: str, target: Path, raw: bytes, st: os.stat_result | None) -> None:
    """Write ``raw`` to a temporary file next to ``target``, then rename it over ``target``."""
    folder = target.parent
    if not folder.is_dir():
        raise InputError(name, [Problem("", f"folder {folder} does not exist")])
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as err:  # e.g. /proc: its files exist, but nothing can be created there
        raise InputError(
            name,
            [
                Problem(
                    "",
                    f"cannot write: no new file can be made in {folder} to replace it "
                    f"({err.strerror or err}); the file is left as it was",
                )
            ],
        ) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        if st is not None:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(PermissionError):  # only root may give files away
                    os.chown(tmp, st.st_uid, st.st_gid)
        else:
            os.chmod(tmp, 0o666 & ~_umask())  # as open() would create it (mkstemp: 0o600)
        os.replace(tmp, target)
        tmp = None
    except OSError as err:
        raise InputError(name, [Problem("", f"cannot write: {err.strerror or err}")]) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    with contextlib.suppress(OSError):  # the rename itself, on disk (best effort)
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_snapshot(snapshot: Snapshot, path: str | Path) -> None:
    """Write ``snapshot`` as an instance file (YAML, or JSON by the ``.json`` suffix)."""
    p = Path(path)
    write_output(p, dump_data(instance_from_snapshot(snapshot), _format_for(p)))


def plan_data(plan: Plan) -> dict[str, Any]:
    return plan.model_dump(mode="json", by_alias=True, exclude_none=True)


def write_plan(plan: Plan, path: str | Path) -> None:
    """Write ``plan`` (YAML, or JSON by the ``.json`` suffix)."""
    p = Path(path)
    write_output(p, dump_data(plan_data(plan), _format_for(p)))
