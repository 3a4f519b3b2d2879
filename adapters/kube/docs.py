"""Reading Kubernetes dumps into documents: one object each, with where it came from.

A dump is any of:

* a v1 ``List`` (YAML or JSON), as ``kubectl get ... -o yaml`` / ``-o json`` writes it; a
  typed list (``PodList`` from the API) works too, its items taking their ``kind`` and
  ``apiVersion`` from the list (the API server leaves them off list items);
* a multi-document YAML stream (``---`` separated), as ``kubectl apply -f`` accepts;
* a folder of such files, read recursively in path order (``.yaml``, ``.yml``, ``.json``;
  hidden files and folders, whose names start with ``.``, are skipped);
* ``-``: standard input.

Each document is returned with its source, ``path#i`` (the i-th document of the file, from
0) or ``path#i.items[j]`` (item j of a list). A document that is not YAML/JSON, not a
mapping, or has no ``apiVersion``/``kind``, goes to the summary; a missing path raises
:class:`DumpError` (a user mistake, named with the path).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gangplan.adapters import yaml_input
from gangplan.adapters.files import InputError, NotText, read_text
from gangplan.adapters.kube.summary import REASON_NOT_AN_OBJECT, ReadSummary

__all__ = ["DUMP_SUFFIXES", "Document", "DumpError", "iter_documents", "read_documents"]

DUMP_SUFFIXES = (".yaml", ".yml", ".json")


class DumpError(Exception):
    """A dump path that cannot be read at all (missing, unreadable)."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class Document:
    """One Kubernetes object as parsed data, with ``source`` = ``file#index[.items[j]]``."""

    source: str
    data: dict[str, Any]


def read_documents(paths: list[str | Path], summary: ReadSummary) -> list[Document]:
    """All objects of ``paths`` (files, folders, or ``-`` for stdin), in order: the list of
    :func:`iter_documents`.

    Raises:
        DumpError: as :func:`iter_documents`.
    """
    return list(iter_documents(paths, summary))


def iter_documents(paths: Iterable[str | Path], summary: ReadSummary) -> Iterator[Document]:
    """The objects of ``paths`` (files, folders, or ``-`` for stdin), in order, one at a
    time: a file is parsed whole (a List's ``kind`` may come after its ``items``), then its
    objects are handed out one by one, each let go of here as it is handed out (a consumer
    that keeps only what it makes of them holds one raw object at a time, not the dump).

    Each file is read by :func:`gangplan.adapters.files.read_text` (at most
    :data:`~gangplan.adapters.files.MAX_INPUT_BYTES`, UTF-8 with or without a byte-order
    mark), its YAML by :mod:`gangplan.adapters.yaml_input`: a document with a duplicate key
    or excessive aliasing is listed, and the next documents are read.

    Raises:
        DumpError: a path that does not exist or cannot be read, or is too large; a file
            given by name that is not text (raised when the iteration reaches it).
    """
    for path in paths:
        if str(path) == "-":
            try:
                text = read_text("-", dash_is_stdin=True)
            except InputError as err:
                raise DumpError("<stdin>", err.problems[0].message) from None
            yield from _documents_of_text("<stdin>", text, json_first=False, summary=summary)
            continue
        p = Path(path)
        if not p.exists():
            raise DumpError(str(p), "no such file or folder")
        if p.is_dir():
            for f in _files_under(p, summary):
                yield from _documents_of_file(f, summary, in_folder=True)
        else:
            yield from _documents_of_file(p, summary)


def _files_under(folder: Path, summary: ReadSummary) -> Iterator[Path]:
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or not f.is_file():
            continue
        if f.suffix.lower() in DUMP_SUFFIXES:
            yield f
        else:
            summary.skip(
                str(f),
                "-",
                "",
                REASON_NOT_AN_OBJECT,
                f"file suffix {f.suffix or '(none)'!r} is not one of {', '.join(DUMP_SUFFIXES)}",
            )


def _documents_of_file(
    path: Path, summary: ReadSummary, *, in_folder: bool = False
) -> Iterator[Document]:
    try:
        text = read_text(path)
    except NotText as err:
        if not in_folder:
            raise DumpError(str(path), err.problems[0].message) from None
        # inside a dump folder, a file that is not text is listed, like any other junk
        summary.skip(str(path), "-", "", REASON_NOT_AN_OBJECT, err.problems[0].message)
        return iter(())
    except InputError as err:
        raise DumpError(str(path), err.problems[0].message) from None
    return _documents_of_text(
        str(path), text, json_first=path.suffix.lower() == ".json", summary=summary
    )


def _documents_of_text(
    name: str, text: str, *, json_first: bool, summary: ReadSummary
) -> Iterator[Document]:
    raw = _parsed(name, text, json_first=json_first, summary=summary)
    del text  # let go of the text once it is parsed
    for i in range(len(raw)):
        (source, data), raw[i] = raw[i], None
        if data is None:
            continue  # an empty document (a trailing '---'): holds nothing
        yield from _objects(source, data, summary)


def _parsed(name: str, text: str, *, json_first: bool, summary: ReadSummary) -> list[Any]:
    """The documents of one file as ``(source, data)``; what is not YAML/JSON is listed."""
    raw: list[Any] = []
    if json_first:
        try:
            with yaml_input.gc_paused():
                raw.append((f"{name}#0", json.loads(text)))
        except json.JSONDecodeError as err:
            summary.skip(
                f"{name}#0",
                "-",
                "",
                REASON_NOT_AN_OBJECT,
                f"not valid JSON at line {err.lineno} column {err.colno}: {err.msg}",
            )
            return []
        except RecursionError:
            summary.skip(f"{name}#0", "-", "", REASON_NOT_AN_OBJECT, "nested too deeply to read")
            return []
    else:
        seen = 0  # documents parsed so far: the index of the next
        try:
            for data, refused in yaml_input.load_all(text):
                if refused is None:
                    raw.append((f"{name}#{seen}", data))
                else:
                    summary.skip(
                        f"{name}#{seen}", "-", "", REASON_NOT_AN_OBJECT, _yaml_problem(refused)
                    )
                seen += 1
        except yaml.YAMLError as err:
            summary.skip(
                f"{name}#{seen}",
                "-",
                "",
                REASON_NOT_AN_OBJECT,
                f"{_yaml_problem(err)} (the rest of the file is not read)",
            )
    return raw


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
    what = getattr(err, "problem", None) or str(err).splitlines()[0]
    return f"not valid YAML{where}: {what}"


def _objects(source: str, data: Any, summary: ReadSummary) -> Iterator[Document]:
    if not isinstance(data, dict):
        summary.skip(
            source,
            "-",
            "",
            REASON_NOT_AN_OBJECT,
            f"the document is a {type(data).__name__}, not a mapping with apiVersion and kind",
        )
        return
    kind, api = data.get("kind"), data.get("apiVersion")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(data.get("items"), list):
        item_kind = kind[: -len("List")] if kind != "List" else None
        items = data["items"]
        for j in range(len(items)):
            item, items[j] = items[j], None  # let go of each item once it is handed out
            if item_kind and isinstance(item, dict):
                item = {"apiVersion": api, "kind": item_kind, **item}
            yield from _objects(f"{source}.items[{j}]", item, summary)
        return
    missing = [k for k in ("apiVersion", "kind") if not isinstance(data.get(k), str) or not data[k]]
    if missing:
        meta = data.get("metadata")
        name = meta.get("name", "") if isinstance(meta, dict) else data.get("name", "")
        summary.skip(
            source,
            str(kind) if isinstance(kind, str) and kind else "-",
            str(name or ""),
            REASON_NOT_AN_OBJECT,
            f"no {' or '.join(missing)} (keys: {', '.join(map(str, list(data)[:6]))})",
        )
        return
    yield Document(source, data)
