"""What the trace converters and the instance generator share.

* CSV reading whose errors name the file, the row and the column
  (``philly.csv: row 3 (line 4), column 'num_gpus': 'x' is not a whole number``);
* the rule that cuts a job of G GPUs into pods for nodes of P GPUs (:func:`split_gpus`);
* the CPU and memory a GPU pod asks when the trace gives none (:func:`per_gpu_requests`);
* the ``--window START:END`` syntax (:func:`parse_window`);
* instance text that stays small: one line per node pool, queue, gang and running pod
  (:func:`instance_text`).

Errors are :class:`gangplan.adapters.files.InputError` (file + problems), which the CLI turns
into ``error:`` lines and exit code 1.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

import yaml

from gangplan.adapters.files import InputError, read_text
from gangplan.adapters.numbers import counted
from gangplan.models import GPU_MILLI, Problem, Snapshot, format_quantity, load_instance
from gangplan.models.quantity import CPU, MEMORY

__all__ = [
    "MAX_PROBLEMS",
    "Converted",
    "CsvRow",
    "PerGpu",
    "PodShape",
    "instance_text",
    "node_shapes",
    "parse_duration",
    "parse_window",
    "per_gpu_requests",
    "pod_requests",
    "read_csv",
    "snapshot_of",
    "split_gpus",
]

T = TypeVar("T")

MAX_PROBLEMS = 20
"""A bad CSV lists at most this many problems (then how many more there were)."""

GIB = 2**30
MIB = 2**20


# --------------------------------------------------------------------------- CSV reading


@dataclass
class CsvRow:
    """One data row: ``row`` counts data rows from 1 (the header is line 1, so row 1 is
    usually line 2); values are the raw strings by column name. Typed getters record a
    problem (and return a placeholder) instead of raising, so that one pass reports every
    bad cell."""

    source: str
    row: int
    line: int
    values: dict[str, str]
    problems: list[Problem] = field(repr=False)

    def where(self, column: str | None = None) -> str:
        at = f"row {self.row} (line {self.line})"
        return f"{at}, column {column!r}" if column else at

    def fail(self, column: str | None, message: str) -> None:
        self.problems.append(Problem(self.where(column), message))

    def text(self, column: str) -> str:
        """The cell, stripped; ``""`` when the column is absent from this file."""
        return self.values.get(column, "").strip()

    def integer(self, column: str, *, minimum: int = 0, maximum: int | None = None) -> int:
        raw = self.text(column)
        try:
            value = int(raw)
        except ValueError:
            # "1000.0" is how some tools write integers; accept it when exact
            try:
                f = float(raw)
            except ValueError:
                f = math.nan
            if not f.is_integer():
                self.fail(column, f"{raw!r} is not a whole number")
                return minimum
            value = int(f)
        if value < minimum or (maximum is not None and value > maximum):
            bounds = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
            self.fail(column, f"{value} is out of range (accepted: {bounds})")
            return minimum
        return value

    def number(self, column: str, *, minimum: float = 0.0) -> float:
        raw = self.text(column)
        try:
            value = float(raw)
        except ValueError:
            self.fail(column, f"{raw!r} is not a number")
            return minimum
        if not math.isfinite(value) or value < minimum:
            self.fail(column, f"{raw} is out of range (accepted: a finite number >= {minimum:g})")
            return minimum
        return value


def read_csv(
    path: str | Path, required: Sequence[str], optional: Sequence[str] = ()
) -> tuple[str, list[str], Iterator[CsvRow], list[Problem]]:
    """Open a CSV file with a header row and check the header.

    Args:
        path: the file.
        required: columns that must be in the header (in any order).
        optional: columns that may be; any other column is an error (so a file of another
            kind is caught at its header, not halfway through).

    Returns:
        ``(source, columns, rows, problems)``: ``rows`` yields one :class:`CsvRow` per data
        row and appends each bad cell to ``problems``; call :func:`raise_problems` when done.

    Raises:
        InputError: missing, unreadable, too large (:func:`~gangplan.adapters.files.read_text`),
            not text, or empty file, or a wrong header (naming each missing or unknown
            column and what is accepted).
    """
    p = Path(path)
    source = str(p)
    # read whole, with the size bound and text checks of read_text (a trace is megabytes)
    handle = io.StringIO(read_text(p), newline="")
    reader = csv.reader(handle)
    expected = ", ".join([*required, *optional])
    try:
        header = next(reader, None)
    except (csv.Error, UnicodeDecodeError) as err:
        handle.close()
        raise InputError(source, [Problem("line 1", f"not a CSV file: {err}")]) from None
    if header is None:
        handle.close()
        raise InputError(source, [Problem("", f"empty file (expected a header: {expected})")])
    columns = [c.strip() for c in header]
    bad: list[Problem] = []
    missing = [c for c in required if c not in columns]
    if missing:
        bad.append(
            Problem(
                "line 1 (header)",
                f"missing column{'s' if len(missing) > 1 else ''} "
                f"{', '.join(map(repr, missing))} (expected: {expected})",
            )
        )
    accepted = {*required, *optional}
    unknown = [c for c in columns if c not in accepted]
    if unknown:
        bad.append(
            Problem(
                "line 1 (header)",
                f"unknown column{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))} (accepted: {expected})",
            )
        )
    if len(set(columns)) != len(columns):
        dups = sorted({c for c in columns if columns.count(c) > 1})
        bad.append(Problem("line 1 (header)", f"duplicate column {', '.join(map(repr, dups))}"))
    if bad:
        handle.close()
        raise InputError(source, bad)
    problems: list[Problem] = []

    def rows() -> Iterator[CsvRow]:
        n = 0
        try:
            for cells in reader:
                if not cells or (len(cells) == 1 and not cells[0].strip()):
                    continue  # blank line
                n += 1
                values = dict(zip(columns, cells, strict=False))
                row = CsvRow(source, n, reader.line_num, values, problems)
                if len(cells) != len(columns):
                    row.fail(None, f"has {len(cells)} fields; the header has {len(columns)}")
                    continue
                yield row
                if len(problems) > MAX_PROBLEMS:
                    return
        except (csv.Error, UnicodeDecodeError) as err:
            problems.append(Problem(f"line {reader.line_num + 1}", f"not valid CSV: {err}"))
        finally:
            handle.close()

    return source, columns, rows(), problems


def raise_problems(source: str, problems: list[Problem]) -> None:
    """Raise :class:`InputError` for ``problems`` (at most :data:`MAX_PROBLEMS` listed)."""
    if not problems:
        return
    shown = problems[:MAX_PROBLEMS]
    if len(problems) > MAX_PROBLEMS:
        shown.append(Problem("", f"stopped after {MAX_PROBLEMS} problems"))
    raise InputError(source, shown)


# --------------------------------------------------------------------------- pod shapes


@dataclass(frozen=True)
class PodShape:
    """``count`` pods of ``gpus`` whole GPUs each."""

    count: int
    gpus: int


def split_gpus(gpus: int, per_node: int) -> tuple[PodShape, ...]:
    """Cut a job of ``gpus`` GPUs into pods for nodes of ``per_node`` GPUs.

    The rule (docs/traces.md, "Philly and ITP job traces"): one pod of G GPUs when G <= P;
    otherwise floor(G/P) pods of P GPUs, plus, when G is not a multiple of P, one pod with
    the remainder (a second role). So 12 GPUs on 8-GPU nodes is 8 + 4, and 24 is 3 x 8. Every
    pod fits one node, and the job spans as few nodes as it can.

    Raises:
        ValueError: ``gpus`` < 1 or ``per_node`` < 1.
    """
    if gpus < 1 or per_node < 1:
        raise ValueError(f"a job needs >= 1 GPU and nodes >= 1 GPU (got {gpus}, {per_node})")
    if gpus <= per_node:
        return (PodShape(1, gpus),)
    full, rest = divmod(gpus, per_node)
    return (PodShape(full, per_node),) + ((PodShape(1, rest),) if rest else ())


@dataclass(frozen=True)
class PerGpu:
    """CPU (milli-CPU) and memory (bytes) a pod asks per GPU it asks."""

    cpu_milli: int
    memory: int


PER_GPU_FRACTION = Fraction(3, 4)
"""Share of the smallest GPU node's per-GPU CPU and memory that a pod asks per GPU."""


def per_gpu_requests(nodes: Iterable[tuple[int, int, int]]) -> PerGpu:
    """The CPU and memory a pod asks per GPU, for traces that give none (Philly, ITP, and
    the generator).

    Args:
        nodes: ``(cpu_milli, memory_bytes, gpus)`` of each node (or node type);
            nodes without GPUs are skipped (see :func:`node_shapes`).

    Rule: 3/4 of the smallest per-GPU CPU and memory over the GPU nodes (allocatable / GPU
    count), rounded down to whole cores and whole GiB (at least 1 of each). So a pod of g
    GPUs fits, on CPU and memory, every GPU node with g free GPUs, and a quarter of each
    node stays for pods without GPUs; GPUs, not CPU, are what gangs compete for, as in the
    traces. Example: a node of 128 cores, 1 TiB and 8 GPUs gives 12 cores and 96 GiB per
    GPU.

    Raises:
        ValueError: no node has a GPU.
    """
    cpu_min: Fraction | None = None
    mem_min: Fraction | None = None
    for cpu_milli, memory, gpus in nodes:
        if gpus < 1:
            continue
        cpu, mem = Fraction(cpu_milli, gpus), Fraction(memory, gpus)
        cpu_min = cpu if cpu_min is None else min(cpu_min, cpu)
        mem_min = mem if mem_min is None else min(mem_min, mem)
    if cpu_min is None or mem_min is None:
        raise ValueError("the cluster has no GPU node")
    cores = max(1, math.floor(cpu_min * PER_GPU_FRACTION / 1000))
    gib = max(1, math.floor(mem_min * PER_GPU_FRACTION / GIB))
    return PerGpu(cpu_milli=cores * 1000, memory=gib * GIB)


def node_shapes(snapshot: Snapshot) -> list[tuple[int, int, int]]:
    """``(cpu_milli, memory_bytes, whole GPUs)`` of each node, for :func:`per_gpu_requests`."""
    return [
        (
            n.allocatable.get(CPU, 0),
            n.allocatable.get(MEMORY, 0),
            n.allocatable.get(snapshot.gpu, 0) // GPU_MILLI,
        )
        for n in snapshot.nodes
    ]


def pod_requests(
    per_gpu: PerGpu, gpus: int, gpu_resource: str, nic_resource: str | None = None
) -> dict[str, str]:
    """Requests of a pod of ``gpus`` whole GPUs as quantity strings (``nics`` = ``gpus``
    when ``nic_resource`` is given: one RDMA NIC per GPU)."""
    out = {
        CPU: format_quantity(CPU, per_gpu.cpu_milli * gpus),
        MEMORY: format_quantity(MEMORY, per_gpu.memory * gpus),
        gpu_resource: str(gpus),
    }
    if nic_resource is not None:
        out[nic_resource] = str(gpus)
    return out


# --------------------------------------------------------------------------- windows

_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_PARTS = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)[dhms])+")
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([dhms])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """A time in seconds: ``"90"`` -> 90; ``"15m"``, ``"2.5h"``, ``"3d"``, ``"10d8h"``,
    ``"1h30m"`` (units d, h, m, s, summed). Raises ValueError."""
    t = text.strip()
    if _NUMBER.fullmatch(t):
        return float(t)
    if _PARTS.fullmatch(t):
        return sum(float(n) * _UNIT[u] for n, u in _PART.findall(t))
    raise ValueError(
        f"{text!r} is not a time (accepted: seconds, or numbers with units d, h, m, s, "
        "e.g. 3600, 90m, 2.5h, 10d8h)"
    )


def parse_window(text: str) -> tuple[float, float]:
    """``START:END`` in seconds from the trace's zero, each side a :func:`parse_duration`
    time or empty (open): ``"10d:10d8h"``, ``":1h"``, ``"3600:"``. Jobs with
    START <= arrival < END are in the window.

    Raises:
        ValueError: no colon, a bad time, or END not after START.
    """
    if text.count(":") != 1:
        raise ValueError(f"{text!r} is not START:END (e.g. 10d:10d8h, or :1h)")
    a, b = text.split(":")
    start = parse_duration(a) if a.strip() else 0.0
    end = parse_duration(b) if b.strip() else math.inf
    if end <= start:
        raise ValueError(f"{text!r}: END must be after START")
    return start, end


# --------------------------------------------------------------------------- output


@dataclass
class Converted:
    """A converted or generated instance: the file's data (plain YAML/JSON-ready dict), the
    validated snapshot, and warnings to show the user."""

    data: dict[str, Any]
    snapshot: Snapshot
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        s = self.snapshot
        gpus = sum(n.allocatable.get(s.gpu, 0) for n in s.nodes) / GPU_MILLI
        pending = (
            sum(r.count * r.requests.get(s.gpu, 0) for g in s.gangs for r in g.roles) / GPU_MILLI
        )
        running = sum(p.requests.get(s.gpu, 0) for p in s.running) / GPU_MILLI

        return (
            f"{counted(len(s.nodes), 'node')}, {counted(gpus, 'GPU')}, "
            f"{counted(len(s.queues), 'queue')}, "
            f"{counted(len(s.gangs), 'pending gang')} asking {counted(pending, 'GPU')}, "
            f"{counted(len(s.running), 'running pod')} holding {counted(running, 'GPU')}"
        )


def snapshot_of(source: str, data: dict[str, Any]) -> tuple[Snapshot, list[str]]:
    """Validate instance data built by a converter (errors name ``source``)."""
    from gangplan.models import InstanceError

    try:
        return load_instance(data)
    except InstanceError as err:
        raise InputError(source, err.problems) from None


_ONE_LINE = ("node_pools", "nodes", "queues", "gangs", "running")


def instance_text(data: dict[str, Any], fmt: str = "yaml") -> str:
    """The instance as text that stays small: YAML whose node pools, nodes, queues, gangs
    and running pods are one flow-style line each (as the embedded default writes its small
    gangs), or JSON (``fmt="json"``)."""
    if fmt == "json":
        return json.dumps(data, indent=1) + "\n"
    chunks: list[str] = []
    for key, value in data.items():
        if key in _ONE_LINE and isinstance(value, list) and value:
            lines = [f"{key}:"]
            lines.extend(f"  - {_flow(item)}" for item in value)
            chunks.append("\n".join(lines) + "\n")
        else:
            chunks.append(
                yaml.safe_dump({key: value}, sort_keys=False, allow_unicode=True, width=100)
            )
    return "".join(chunks)


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml when built with it: 4x faster


def _flow(item: Any) -> str:
    text = yaml.dump(
        item,
        Dumper=_DUMPER,
        default_flow_style=True,
        sort_keys=False,
        allow_unicode=True,
        width=2**30,
    )
    return text.strip()


def unique(items: Iterable[T]) -> list[T]:
    """``items`` without repeats, in first-seen order."""
    return list(dict.fromkeys(items))
