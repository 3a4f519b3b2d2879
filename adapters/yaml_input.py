"""YAML as gangplan reads it, from any file: fast, and safe against documents that are small
but hostile.

* **The C parser** — libyaml's, through PyYAML's ``CSafeLoader``, where PyYAML was built
  with it (about 4x faster than the pure-Python parser, and it refuses nesting deeper than
  1,000 levels itself); otherwise the pure-Python ``SafeLoader``, with a warning once
  (:func:`loader_warning`). Only the safe tags are constructed, as ``yaml.safe_load`` does.
* **Duplicate keys are an error**, naming both lines: ``mapping key 'gangs' already defined
  at line 2`` — as go-yaml (``gopkg.in/yaml.v3``), and so kubectl and the API server, refuse
  them; PyYAML alone keeps the last value silently. Keys that a merge key (``<<: *base``)
  brings in may be overridden, as YAML's merge keys mean.
* **Alias expansion is bounded** ("billion laughs"): a document whose aliases make it hold
  more nodes than the rule of go-yaml allows is refused before anything walks it. The rule
  (go-yaml ``decode.go``, ``allowedAliasRatio``, the fix of CVE-2019-11253 in the API
  server): with ``E`` the nodes of the document with every alias expanded and ``A`` of them
  reached through aliases, refuse when ``A > 100``, ``E > 1,000`` and ``A / E`` passes 0.99
  for ``E`` up to 400,000, falling linearly to 0.10 at 4,000,000 and beyond. A document
  that holds itself (``&a [*a]``) is refused too. Counting costs one pass over the nodes,
  and only for text that can hold an alias at all.

Both refusals are :class:`yaml.MarkedYAMLError` s (``problem`` and ``problem_mark`` as every
PyYAML error has them), raised for one document: :func:`load_all` reports it and goes on
with the next.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterator
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = [
    "C_LOADER",
    "DocumentRefused",
    "Loader",
    "PythonLoader",
    "load",
    "load_all",
    "loader_warning",
]

_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"
_ALIAS = re.compile(r"(?:^|[\s\[{,:])\*[^\s\[\]{},]", re.MULTILINE)
"""An alias token (``*name``) can only start where a node can: at a line's start, after
white space, a flow indicator or a colon. Text without one holds no alias (quoted ``'*'``
does not match, so globs in strings cost nothing; a plain ``a *b`` does, and only costs a
count)."""

ALIAS_MIN = 100
"""go-yaml counts no excess below this many nodes reached through aliases ..."""
ALIAS_MIN_NODES = 1_000
"""... or in a document of at most this many nodes (every alias expanded)."""
_RATIO_LOW, _RATIO_HIGH = 400_000, 4_000_000


def allowed_alias_ratio(expanded: int) -> float:
    """The share of a document's ``expanded`` nodes that may come from aliases (go-yaml)."""
    if expanded <= _RATIO_LOW:
        return 0.99
    if expanded >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (expanded - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW)


class DocumentRefused(ConstructorError):
    """A document refused as a whole (duplicate key, excessive aliasing): ``problem`` says
    why, ``problem_mark`` where (0-based ``line`` and ``column``, as PyYAML's marks)."""

    def __init__(self, problem: str, mark: Any):
        super().__init__(None, None, problem, mark)


def _children(node: Node) -> list[Node]:
    if isinstance(node, ScalarNode):
        return []
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return list(node.value)


def expanded_size(root: Node) -> tuple[int, int]:
    """``(E, D)``: the nodes of ``root`` with every alias expanded, and the distinct nodes.

    One pass over the distinct nodes (each alias's size is counted once and reused), without
    recursion.

    Raises:
        DocumentRefused: a node holds itself (a recursive alias), whose expansion never ends.
    """
    sizes: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            entered.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            continue
        if key in sizes:
            continue
        entered.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in entered:
                raise DocumentRefused(
                    "an alias refers to a node that holds it: the document would be infinite",
                    child.start_mark,
                )
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)], len(sizes)


def check_aliases(root: Node) -> None:
    """Refuse a document whose aliases expand it past go-yaml's rule (module docstring).

    Raises:
        DocumentRefused: excessive aliasing, with the counts; or a recursive alias.
    """
    expanded, distinct = expanded_size(root)
    aliased = expanded - distinct
    if (
        aliased > ALIAS_MIN
        and expanded > ALIAS_MIN_NODES
        and aliased / expanded > allowed_alias_ratio(expanded)
    ):
        raise DocumentRefused(
            f"the document contains excessive aliasing: its aliases expand its {distinct:,} "
            f"nodes to {expanded:,} (refused as kubectl and the API server refuse it: at most "
            f"{allowed_alias_ratio(expanded):.0%} of a document of that size may come from "
            "aliases)",
            root.start_mark,
        )


class _Checks:
    """The duplicate-key and alias checks, mixed into a PyYAML safe loader (C or Python)."""

    _may_alias = True

    def _set_stream(self, stream: Any) -> None:
        if isinstance(stream, str):
            self._may_alias = _ALIAS.search(stream) is not None

    def construct_document(self, node: Node) -> Any:
        if self._may_alias:
            check_aliases(node)
        return super().construct_document(node)  # type: ignore[misc]

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, MappingNode):
            raise ConstructorError(
                None,
                None,
                f"expected a mapping node, but found {type(node).__name__}",
                node.start_mark,
            )
        explicit = len(node.value)
        if any(k.tag == _MERGE for k, _ in node.value):
            explicit -= sum(1 for k, _ in node.value if k.tag == _MERGE)
            self.flatten_mapping(node)  # type: ignore[attr-defined]
        first = len(node.value) - explicit  # merged pairs first, then the document's own
        mapping: dict[Any, Any] = {}
        own: set[Any] = set()
        for i, (key_node, value_node) in enumerate(node.value):
            key = self._scalar_or_object(key_node, deep)
            if type(key_node) is not ScalarNode and not isinstance(key, Hashable):
                raise ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found unhashable key",
                    key_node.start_mark,
                )
            if i >= first:
                if key in own:
                    self._refuse_duplicate(node, first, i, key)
                own.add(key)
            mapping[key] = self._scalar_or_object(value_node, deep)
        return mapping

    def _scalar_or_object(self, node: Node, deep: bool) -> Any:
        # a string scalar is its own value (what construct_yaml_str returns): built here
        # without the constructor's dispatch, as most keys and values of a dump are strings
        if node.tag == _STR and type(node) is ScalarNode:
            return node.value
        return self.construct_object(node, deep=deep)  # type: ignore[attr-defined]

    def _refuse_duplicate(self, node: Node, first: int, i: int, key: Any) -> None:
        """Raise for the key of pair ``i``, equal to a key of an earlier pair of the
        mapping's own (from ``first``) — unless they only compare equal in Python (``1`` and
        ``true`` are different YAML keys)."""
        key_node = node.value[i][0]
        for earlier, _ in node.value[first:i]:
            other = self._scalar_or_object(earlier, False)
            if type(other) is type(key) and other == key:
                raise DocumentRefused(
                    f"mapping key {key!r} already defined at line {earlier.start_mark.line + 1}",
                    key_node.start_mark,
                )

    def construct_sequence(self, node: Node, deep: bool = False) -> list[Any]:
        if not isinstance(node, SequenceNode):
            raise ConstructorError(
                None,
                None,
                f"expected a sequence node, but found {type(node).__name__}",
                node.start_mark,
            )
        construct = self.construct_object  # type: ignore[attr-defined]
        return [
            child.value
            if child.tag == _STR and type(child) is ScalarNode
            else construct(child, deep=deep)
            for child in node.value
        ]


# the C loader's construct_mapping is looked up by the constructor tables of SafeConstructor,
# which call self.construct_mapping: the override above applies to both loaders
class PythonLoader(_Checks, yaml.SafeLoader):
    """The pure-Python safe loader, with the checks."""

    def __init__(self, stream: Any):
        self._set_stream(stream)
        super().__init__(stream)


C_LOADER = hasattr(yaml, "CSafeLoader")
"""Whether PyYAML has libyaml's C parser here."""

if C_LOADER:

    class CLoader(_Checks, yaml.CSafeLoader):
        """libyaml's C parser and PyYAML's safe constructor, with the checks."""

        def __init__(self, stream: Any):
            self._set_stream(stream)
            super().__init__(stream)

    Loader: type[Any] = CLoader
else:  # pragma: no cover - PyYAML built without libyaml
    Loader = PythonLoader


def loader_warning() -> str | None:
    """A warning to show once when YAML is read without libyaml (None with it)."""
    if C_LOADER:
        return None
    return (
        "PyYAML has no libyaml here: YAML is read with the pure-Python parser, about 4x "
        "slower (install libyaml and reinstall PyYAML for the C parser)"
    )


def load(text: str, loader_class: type[Any] | None = None) -> Any:
    """The one document of ``text`` (None if empty), read by ``loader_class`` (default
    :data:`Loader`).

    Raises:
        yaml.YAMLError: not YAML; a document refused (:class:`DocumentRefused`).
    """
    loader = (loader_class or Loader)(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_all(
    text: str, loader_class: type[Any] | None = None
) -> Iterator[tuple[Any, DocumentRefused | None]]:
    """Each document of ``text``, in order, as ``(data, None)``, or ``(None, error)`` for
    one that is refused — the next ones are still read (the parser is past it). Read by
    ``loader_class`` (default :data:`Loader`).

    Raises:
        yaml.YAMLError: text that is not YAML (no document after it can be read).
    """
    loader = (loader_class or Loader)(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            try:
                yield loader.construct_document(node), None
            except DocumentRefused as err:
                loader.constructed_objects = {}
                loader.recursive_objects = {}
                loader.state_generators = []
                loader.deep_construct = False
                yield None, err
    finally:
        loader.dispose()
