"""YAML as gangplan reads it, from any file: fast, lean, and safe against documents that are
small but hostile.

* **The C parser** — libyaml's, through PyYAML's ``CSafeLoader``, where PyYAML was built
  with it (about 4x faster than the pure-Python parser, and it refuses nesting deeper than
  1,000 levels itself); otherwise the pure-Python ``SafeLoader``, with a warning once
  (:func:`loader_warning`). Only the safe tags are constructed, as ``yaml.safe_load`` does.
* **Composed here, element by element**: the parser's events become nodes without recursion
  (nesting deeper than :data:`MAX_DEPTH` levels is refused by either parser), and each
  element of a sequence that is a value of the root mapping — the ``items`` of a
  ``kubectl get -o yaml`` List, the ``nodes`` and ``gangs`` of an instance — is constructed
  as soon as it is composed, its nodes dropped: a large document never holds its whole
  node graph (about 3 times the memory of the data it builds). The data is the same as
  PyYAML's safe loader builds for the whole document at once, aliases included (an alias
  of an anchored node gets the same object); equal mapping keys are one string, as
  ``json.loads`` makes them (a dump repeats the same few hundred keys millions of times).
* **Duplicate keys are an error**, naming both lines: ``mapping key 'gangs' already defined
  at line 2`` — as go-yaml (``gopkg.in/yaml.v3``), and so kubectl and the API server, refuse
  them; PyYAML alone keeps the last value silently. Keys that a merge key (``<<: *base``)
  brings in may be overridden, as YAML's merge keys mean.
* **Alias expansion is bounded** ("billion laughs"): a document whose aliases make it hold
  more nodes than the rule of go-yaml allows is refused before anything is built from
  them. The rule (go-yaml ``decode.go``, ``allowedAliasRatio``, the fix of CVE-2019-11253
  in the API server): with ``E`` the nodes of the document with every alias expanded and
  ``A`` of them reached through aliases, refuse when ``A > 100``, ``E > 1,000`` and ``A / E``
  passes 0.99 for ``E`` up to 400,000, falling linearly to 0.10 at 4,000,000 and beyond. As
  go-yaml applies it while it decodes, the rule is applied to the document so far before
  each streamed element is built, and to the whole document before it is built. A
  document that holds itself (``&a [*a]``) is refused too. The counts are kept as the
  nodes are composed (each alias adds the size of the node it names), so checking costs
  nothing, and is only done for documents that hold an alias.
* **The garbage collector waits** while a document is composed and built
  (:func:`gc_paused`): parsed data holds no reference cycles, and collections that walk
  millions of live nodes took most of the time on large files.

Both refusals are :class:`yaml.MarkedYAMLError` s (``problem`` and ``problem_mark`` as every
PyYAML error has them), raised for one document: :func:`load_all` reports it and goes on
with the next.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = [
    "C_LOADER",
    "MAX_DEPTH",
    "AliasCount",
    "DocumentRefused",
    "Loader",
    "PythonLoader",
    "gc_paused",
    "load",
    "load_all",
    "loader_warning",
]

_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"

MAX_DEPTH = 1_000
"""The deepest nesting of sequences and mappings read, as libyaml's parser limits it."""


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with Python's cyclic garbage collector paused (as it was, after).

    Reading a large file builds millions of containers that all stay alive (parsed data,
    YAML nodes, models), and each automatic collection walks every one of them: on a
    5,000-node, 50,000-pod dump that was most of the time spent reading. What is built there
    holds no reference cycles (reference counting frees it; ``convert k8s`` over that dump
    leaves a few thousand objects in cycles), so nothing piles up while the collector
    waits; it runs again, as usual, after the block. Nested use is fine.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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


def excessive_aliasing(expanded: int, distinct: int) -> bool:
    """Whether ``expanded`` nodes (every alias expanded) from ``distinct`` written break
    go-yaml's rule (module docstring)."""
    aliased = expanded - distinct
    return (
        aliased > ALIAS_MIN
        and expanded > ALIAS_MIN_NODES
        and aliased / expanded > allowed_alias_ratio(expanded)
    )


def check_aliases(counted: Node | AliasCount) -> None:
    """Refuse a document whose aliases expand it past go-yaml's rule (module docstring):
    ``counted`` is its root node (counted here by :func:`expanded_size`) or its counts.

    Raises:
        DocumentRefused: excessive aliasing, with the counts; or a recursive alias.
    """
    if isinstance(counted, AliasCount):
        expanded, distinct, mark = counted.expanded, counted.distinct, counted.mark
    else:
        (expanded, distinct), mark = expanded_size(counted), counted.start_mark
    if excessive_aliasing(expanded, distinct):
        raise DocumentRefused(
            f"the document contains excessive aliasing: its aliases expand its {distinct:,} "
            f"nodes to {expanded:,} (refused as kubectl and the API server refuse it: at most "
            f"{allowed_alias_ratio(expanded):.0%} of a document of that size may come from "
            "aliases)",
            mark,
        )


@dataclass
class AliasCount:
    """The node counts of one document as it is composed: ``expanded`` with every alias
    expanded, ``distinct`` as written; ``mark`` is where the document's root starts."""

    expanded: int
    distinct: int
    mark: Any


@dataclass
class _Open:
    """A sequence or mapping being composed: its node, the key waiting for a value (a
    mapping's), the expanded count before it, and — for a sequence whose elements are
    constructed one at a time — the elements built so far."""

    node: Node
    start: int
    key: Node | None = None
    built: list[Any] | None = None


@dataclass
class _Pending:
    """An element of a streamed sequence left to be built after the whole document."""

    node: Node


_EVENT_NODE = {
    ScalarEvent: ScalarNode,
    SequenceStartEvent: SequenceNode,
    MappingStartEvent: MappingNode,
}


class _Checks:
    """The duplicate-key and alias checks, and the composer, mixed into a PyYAML safe loader
    (C or Python): the parser's events are composed here (not by PyYAML's composer), without
    recursion, counting the document's nodes as they come; a sequence that is a value of
    the root mapping (``items:`` of a ``List``, ``nodes:`` of an instance) is constructed one
    element at a time, each element's nodes dropped once it is built."""

    # what the parser and the safe constructor of the loader provide
    if TYPE_CHECKING:
        constructed_objects: dict[Node, Any]
        recursive_objects: dict[Node, Any]
        state_generators: list[Any]
        deep_construct: bool

        def check_event(self, *choices: Any) -> Any: ...
        def get_event(self) -> Any: ...
        def resolve(self, kind: type[Node], value: Any, implicit: Any) -> str: ...
        def construct_object(self, node: Node, deep: bool = False) -> Any: ...
        def flatten_mapping(self, node: MappingNode) -> None: ...

    _in_document = False
    _deferred = False
    _count: AliasCount | None = None
    _kept: dict[Node, Any] = {}  # noqa: RUF012 - replaced per document, never changed
    _keys: dict[str, str] | None = None  # the document's mapping keys: each string once

    # ------------------------------------------------------------------ composing

    def check_node(self) -> bool:
        if self.check_event(StreamStartEvent):
            self.get_event()
        return not self.check_event(StreamEndEvent)

    def get_node(self) -> Node | None:
        if self.check_event(StreamEndEvent):
            return None
        return self.compose_document()

    def get_single_node(self) -> Node | None:
        self.get_event()  # the stream's start
        document = None
        if not self.check_event(StreamEndEvent):
            document = self.compose_document()
        if not self.check_event(StreamEndEvent):
            event = self.get_event()
            raise ComposerError(
                "expected a single document in the stream",
                document.start_mark if document is not None else None,
                "but found another document",
                event.start_mark,
            )
        self.get_event()
        return document

    def compose_document(self) -> Node:
        """The root node of the next document (its ``DocumentStartEvent`` next).

        Raises:
            DocumentRefused: a duplicate key or excessive aliasing in an element built
                while composing (the rest of the document is then unread:
                :meth:`skip_document`).
            yaml.YAMLError: not YAML; nesting deeper than :data:`MAX_DEPTH`.
        """
        self.get_event()  # the document's start
        self._kept = {}
        self._keys = {}
        self._count = None
        self._deferred = False
        self._in_document = True
        root = self._compose()
        self.get_event()  # the document's end
        self._in_document = False
        return root

    def skip_document(self) -> None:
        """Drop the events up to the end of the document being composed, and the
        constructor's state: after a refusal, the next document can be read."""
        while self._in_document and not self.check_event(DocumentEndEvent, StreamEndEvent):
            self.get_event()
        if self._in_document and self.check_event(DocumentEndEvent):
            self.get_event()
        self._in_document = False
        self._reset()

    def _reset(self) -> None:
        self._kept = {}
        self._keys = None
        self.constructed_objects = {}
        self.recursive_objects = {}
        self.state_generators = []
        self.deep_construct = False

    def _compose(self) -> Node:
        """The events of one document's root node, composed without recursion.

        Every node adds 1 to both counts of :class:`AliasCount`; an alias adds the expanded
        size of the node it names (kept for each anchored node when it is complete) to
        ``expanded``: at the end, exactly what :func:`expanded_size` counts on the root.
        """
        get_event, resolve = self.get_event, self.resolve
        anchors: dict[str, Node] = {}
        sizes: dict[int, int] = {}  # id of an anchored node (kept alive by anchors) -> size
        unfinished: set[int] = set()  # anchored collections still being composed
        stack: list[_Open] = []
        count = 0  # expanded nodes so far (distinct: self._distinct)
        self._distinct = 0
        while True:
            event = get_event()
            kind = type(event)
            if kind is SequenceEndEvent or kind is MappingEndEvent:
                frame = stack.pop()
                node = frame.node
                node.end_mark = event.end_mark
                if frame.built is not None:  # built already: an alias of it gets the list
                    self._kept[node] = self.constructed_objects[node] = frame.built
                if id(node) in unfinished:
                    unfinished.discard(id(node))
                    sizes[id(node)] = count - frame.start
            elif kind is AliasEvent:
                if event.anchor not in anchors:
                    raise ComposerError(
                        None, None, f"found undefined alias {event.anchor!r}", event.start_mark
                    )
                node = anchors[event.anchor]
                if id(node) in unfinished:
                    raise DocumentRefused(
                        "an alias refers to a node that holds it: the document would be infinite",
                        event.start_mark,
                    )
                count += sizes[id(node)]
                if self._count is None:
                    self._count = AliasCount(0, 0, (stack[0].node if stack else node).start_mark)
            else:
                node_class = _EVENT_NODE[kind]
                tag = event.tag
                if tag is None or tag == "!":
                    implicit = event.implicit
                    tag = resolve(
                        node_class, event.value if kind is ScalarEvent else None, implicit
                    )
                count += 1
                self._distinct += 1
                anchor = event.anchor
                if anchor is not None and anchor in anchors:
                    raise ComposerError(
                        f"found duplicate anchor {anchor!r}; first occurrence",
                        anchors[anchor].start_mark,
                        "second occurrence",
                        event.start_mark,
                    )
                if kind is ScalarEvent:
                    node = ScalarNode(
                        tag, event.value, event.start_mark, event.end_mark, style=event.style
                    )
                    if anchor is not None:
                        anchors[anchor] = node
                        sizes[id(node)] = 1
                else:
                    if len(stack) >= MAX_DEPTH:
                        raise ComposerError(
                            None,
                            None,
                            f"nested deeper than {MAX_DEPTH:,} levels (as libyaml refuses it)",
                            event.start_mark,
                        )
                    node = node_class(tag, [], event.start_mark, None, flow_style=event.flow_style)
                    frame = _Open(node, count - 1)
                    if anchor is not None:
                        anchors[anchor] = node
                        unfinished.add(id(node))
                    if kind is SequenceStartEvent and tag == _SEQ and self._streams(stack):
                        frame.built = []
                    stack.append(frame)
                    continue
            # a complete node (scalar, alias, or a collection just ended): into its parent
            if not stack:
                if self._count is not None:
                    self._count.expanded, self._count.distinct = count, self._distinct
                return node
            parent = stack[-1]
            if parent.built is not None:
                parent.built.append(self._element(node, count, sizes))
            elif type(parent.node) is MappingNode:
                if parent.key is None:
                    parent.key = node
                else:
                    parent.node.value.append((parent.key, node))
                    parent.key = None
            else:
                parent.node.value.append(node)

    @staticmethod
    def _streams(stack: list[_Open]) -> bool:
        """Whether a sequence starting here is a value of the root mapping under a string
        key (not a merge key ``<<``, whose value the mapping's construction reads as nodes)."""
        if len(stack) != 1 or type(stack[0].node) is not MappingNode:
            return False
        key = stack[0].key
        return type(key) is ScalarNode and key.tag == _STR

    def _element(self, node: Node, expanded: int, anchored: dict[int, int]) -> Any:
        """A streamed element, built now if the document so far (``expanded`` nodes) is
        within go-yaml's rule, as go-yaml checks it while it decodes. Once it is not, this
        and every later element are left as nodes (:class:`_Pending`), built after the
        whole document passes the rule (:meth:`construct_document`) — so that a refusal
        counts the whole document, and nothing is built past the rule."""
        if self._count is not None and not self._deferred:
            self._deferred = excessive_aliasing(expanded, self._distinct)
        if self._deferred:
            return _Pending(node)
        return self._construct_element(node, anchored)

    def _construct_element(self, node: Node, anchored: dict[int, int] | None) -> Any:
        """One element of a streamed sequence, built now; what was built for its nodes is
        dropped, but for anchored nodes (an alias later gets the same object, as in a
        document built whole) and streamed sequences (all kept if ``anchored`` is None)."""
        objects = self.constructed_objects
        before = len(objects)  # entries are only added while building: the new ones are last
        data = self.construct_object(node)
        while self.state_generators:
            generators, self.state_generators = self.state_generators, []
            for generator in generators:
                for _ in generator:
                    pass
        if anchored is not None:
            keep = []
            while len(objects) > before:  # the newest first, each in O(1)
                built, value = objects.popitem()
                if id(built) in anchored:
                    keep.append((built, value))
            objects.update(reversed(keep))
        return data

    # ------------------------------------------------------------------ constructing

    def construct_document(self, node: Node) -> Any:
        if self._count is not None:
            check_aliases(self._count)
        kept = self._kept
        self.constructed_objects.update(kept)
        if self._deferred:
            for built in kept.values():
                for i, element in enumerate(built):
                    if type(element) is _Pending:
                        built[i] = self._construct_element(element.node, None)
        try:
            return super().construct_document(node)  # type: ignore[misc]
        finally:
            self._kept = {}
            self._keys = None
            self._count = None

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
            self.flatten_mapping(node)
        first = len(node.value) - explicit  # merged pairs first, then the document's own
        mapping: dict[Any, Any] = {}
        own: set[Any] = set()
        keys = self._keys
        for i, (key_node, value_node) in enumerate(node.value):
            key = self._scalar_or_object(key_node, deep)
            if keys is not None and type(key) is str:
                key = keys.setdefault(key, key)  # one string per distinct key, as json's
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
        return self.construct_object(node, deep=deep)

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
        construct = self.construct_object
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


C_LOADER = hasattr(yaml, "CSafeLoader")
"""Whether PyYAML has libyaml's C parser here."""

if C_LOADER:

    class CLoader(_Checks, yaml.CSafeLoader):
        """libyaml's C parser and PyYAML's safe constructor, with the checks."""

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
        with gc_paused():
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
            try:
                with gc_paused():
                    data = loader.construct_document(loader.get_node())
            except DocumentRefused as err:
                loader.skip_document()
                yield None, err
                continue
            yield data, None
    finally:
        loader.dispose()
