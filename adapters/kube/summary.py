"""What a Kubernetes dump held that did not become part of the snapshot, and why.

Reading a dump never drops anything silently: every document that is not an object, every
object of a kind gangplan does not read, every object that is invalid, and every field or
reference that cannot be mapped is recorded as an :class:`Entry`, grouped for display by
kind and reason (:meth:`ReadSummary.by_kind_and_reason`).

Two lists:

* ``skipped`` — documents, objects or pods that did **not** become part of the snapshot
  (e.g. ``Framework``: "kind not read"; a ``Pod``: "its PodGroup is not in the dump");
* ``notes`` — objects that were read, but where something was ignored or assumed (an
  unknown field, a constraint with no matching topology level, a queue created because a
  gang names it).

``reason`` is a short, fixed phrase (the ``REASON_*`` constants), so entries group; the
specifics (field path, value, what is accepted) are in ``detail``.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "REASON_ASSUMED",
    "REASON_DELETING",
    "REASON_DUPLICATE",
    "REASON_FIELD_IGNORED",
    "REASON_GANG_INCOMPLETE",
    "REASON_GATED",
    "REASON_GROUP_MISSING",
    "REASON_INVALID",
    "REASON_KIND_NOT_READ",
    "REASON_NODE_MISSING",
    "REASON_NOT_AN_OBJECT",
    "REASON_NOT_MAPPED",
    "REASON_NO_PODS",
    "REASON_OTHER_SCHEDULER",
    "REASON_POD_FINISHED",
    "REASON_READ_THROUGH_PODS",
    "REASON_VERSION_NOT_READ",
    "Described",
    "Entry",
    "ReadSummary",
]

REASON_NOT_AN_OBJECT = "not a Kubernetes object"
REASON_KIND_NOT_READ = "kind not read by gangplan"
REASON_VERSION_NOT_READ = "apiVersion not read by gangplan"
REASON_INVALID = "invalid object"
REASON_DUPLICATE = "replaced by a later object of the same kind, namespace and name"
REASON_POD_FINISHED = "pod finished (Succeeded or Failed): holds no resources"
REASON_OTHER_SCHEDULER = "pod of a scheduler not asked for (--scheduler-name)"
REASON_GROUP_MISSING = "its gang object is not in the dump"
REASON_GANG_INCOMPLETE = "gang has fewer pods than its minimum: the scheduler waits"
REASON_NODE_MISSING = "names a node that is not in the dump"
REASON_NO_PODS = "gang object without pods or a workload in the dump"
REASON_READ_THROUGH_PODS = "workload read through its pods, which are in the dump"
REASON_NOT_MAPPED = "not mapped to the gangplan model"
REASON_DELETING = "pending pod being deleted (metadata.deletionTimestamp): kube-scheduler skips it"
REASON_GATED = (
    "pending pod held by another controller's scheduling gate: the API server refuses to bind "
    "a gated pod"
)
REASON_FIELD_IGNORED = "field ignored"
REASON_ASSUMED = "value assumed"


@dataclass(frozen=True)
class Entry:
    """One thing not read, or read with a caveat.

    ``source``: the file and document (``dump.yaml#3``, ``dump.yaml#0.items[12]``);
    ``kind``: the object's kind (``"-"`` when the document is not an object);
    ``name``: ``namespace/name`` or ``name`` (``""`` if unknown); ``reason``: one of the
    ``REASON_*`` phrases; ``detail``: the specifics, naming the field.
    """

    source: str
    kind: str
    name: str
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        who = f"{self.kind} {self.name}".strip() if self.name else self.kind
        tail = f": {self.detail}" if self.detail else ""
        return f"{self.source}: {who}: {self.reason}{tail}"


class Described(Protocol):
    """What the summary says of an object: where it came from, its kind and its name (a
    :class:`~gangplan.adapters.kube.objects.KubeObject` is one)."""

    @property
    def source(self) -> str: ...
    @property
    def display_kind(self) -> str: ...
    @property
    def key(self) -> str: ...


@dataclass
class ReadSummary:
    """Everything a dump held, sorted into read, skipped (with reasons) and notes."""

    read: Counter[str] = field(default_factory=Counter)
    """objects read, by kind (``{"Pod": 12, "Node": 4, "Queue": 2}``): those that parsed
    and were not skipped later (:meth:`skip_object` takes one back)"""
    skipped: list[Entry] = field(default_factory=list)
    notes: list[Entry] = field(default_factory=list)
    _seen: set[Entry] = field(default_factory=set, repr=False)
    _counted: set[tuple[str, str, str]] = field(default_factory=set, repr=False)

    def count(self, obj: Described) -> None:
        """``obj`` parsed: one more of its kind in :attr:`read` (until skipped)."""
        self._counted.add((obj.source, obj.display_kind, obj.key))
        self.read[obj.display_kind] += 1

    def skip(self, source: str, kind: str, name: str, reason: str, detail: str = "") -> None:
        self.skipped.append(Entry(source, kind, name, reason, detail))

    def note(self, source: str, kind: str, name: str, reason: str, detail: str = "") -> None:
        entry = Entry(source, kind, name, reason, detail)
        if entry not in self._seen:  # a workload's pods share their template's notes
            self._seen.add(entry)
            self.notes.append(entry)

    def skip_object(self, obj: Described, reason: str, detail: str = "") -> None:
        """:meth:`skip` for an object, by its source, kind and name; an object counted in
        :attr:`read` is taken out of it (it parsed, but was not converted)."""
        ident = (obj.source, obj.display_kind, obj.key)
        if ident in self._counted:
            self._counted.discard(ident)
            self.read[obj.display_kind] -= 1
            if not self.read[obj.display_kind]:
                del self.read[obj.display_kind]
        self.skip(obj.source, obj.display_kind, obj.key, reason, detail)

    def note_object(self, obj: Described, reason: str, detail: str = "") -> None:
        """:meth:`note` for an object, by its source, kind and name."""
        self.note(obj.source, obj.display_kind, obj.key, reason, detail)

    def by_kind_and_reason(self, entries: list[Entry] | None = None) -> Counter[tuple[str, str]]:
        """Counts of ``(kind, reason)`` over ``entries`` (default: the skipped ones)."""
        return Counter((e.kind, e.reason) for e in (self.skipped if entries is None else entries))

    def skipped_of(self, kind: str, reason: str | None = None) -> list[Entry]:
        return [
            e for e in self.skipped if e.kind == kind and (reason is None or e.reason == reason)
        ]

    def notes_of(self, kind: str, reason: str | None = None) -> list[Entry]:
        return [e for e in self.notes if e.kind == kind and (reason is None or e.reason == reason)]

    def lines(self, *, details: int = 3, width: int = 0) -> list[str]:
        """Human-readable report: counts by kind and reason, up to ``details`` examples each
        (``details < 0``: all). ``width`` > 0: each entry word-wrapped to that many columns,
        its continuation lines indented under it (a path longer than the width runs past it,
        whole). Documents that are no object (kind ``-``) are counted as documents."""
        out: list[str] = []

        def add(text: str, hanging: int) -> None:
            if width <= 0 or len(text) <= width:
                out.append(text)
                return
            indent = len(text) - len(text.lstrip(" "))
            out.extend(
                textwrap.wrap(
                    text.lstrip(" "),
                    width=max(width, hanging + 20),
                    initial_indent=" " * indent,
                    subsequent_indent=" " * hanging,
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )

        read = ", ".join(f"{n} {k}" for k, n in sorted(self.read.items()))
        add(f"read: {read or 'nothing'}", 6)
        for title, entries in (("not read", self.skipped), ("notes", self.notes)):
            if not entries:
                continue
            out.append(f"{title}: {len(entries)}")
            groups = self.by_kind_and_reason(entries)
            for (kind, reason), n in sorted(groups.items()):
                what = f"document{'s' if n != 1 else ''}" if kind == "-" else kind
                add(f"  {n:>5} {what}: {reason}", 8)
                examples = [e for e in entries if e.kind == kind and e.reason == reason]
                shown = examples if details < 0 else examples[:details]
                for e in shown:
                    who = f" {e.name}" if e.name else ""
                    tail = f": {e.detail}" if e.detail else ""
                    add(f"          {e.source}{who}{tail}", 12)
                if len(shown) < len(examples):
                    out.append(f"          ... and {len(examples) - len(shown)} more")
        return out
