"""JSON text from outside, parsed with bounds: annotations, webhook bodies, instance files.

:func:`loads_bounded` is the one parser for JSON that anyone who can write a pod (or send
a request) controls: Kubernetes annotations are capped at 256 KiB in all
(``TotalAnnotationSizeLimitB`` in ``k8s.io/apimachinery/pkg/api/validation/objectmeta.go``),
which is room for 100,000 nested brackets — far past the depth at which Python's JSON
decoder raises ``RecursionError``.
So the text is refused above ``max_bytes`` and above ``max_depth`` nesting levels (counted
before decoding, outside strings), and every failure is one :class:`JSONTextError` (a
``ValueError``) with a short reason.

:func:`strict_pairs` is an ``object_pairs_hook`` for :func:`json.loads` that refuses a key
given twice in one object (the first value would be silently dropped), as Kubernetes' strict
decoding does (``sigs.k8s.io/json``'s ``UnmarshalStrict``: "duplicate field").
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DuplicateKeyError",
    "JSONTextError",
    "key_lines",
    "loads_bounded",
    "strict_pairs",
]

DEFAULT_MAX_BYTES = 256 * 1024
"""Kubernetes' total annotation size limit (256 KiB)."""
DEFAULT_MAX_DEPTH = 64
"""Nesting levels (objects and arrays); no annotation gangplan reads nests deeper than 4."""

# a JSON string (skipped whole), or one bracket
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class JSONTextError(ValueError):
    """JSON text refused: too large, nested too deeply, or not valid JSON."""


class DuplicateKeyError(ValueError):
    """A key given twice in one JSON object (``key``: that key)."""

    def __init__(self, message: str, key: str):
        super().__init__(message)
        self.key = key


def key_lines(text: str, key: str) -> list[int]:
    """The lines (1-based) of ``text`` where ``key`` appears as an object key, as JSON
    writes it (``"key":``) — for messages; at most the first 10."""
    pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:")
    return [text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)][:10]


def _too_deep(text: str, max_depth: int) -> bool:
    if text.count("[") + text.count("{") <= max_depth:
        return False
    depth = 0
    for m in _TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif c in "]}":
            depth -= 1
    return False


def loads_bounded(
    text: str | bytes,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """``text`` decoded as JSON (UTF-8 when bytes), within ``max_bytes`` (bytes of the
    UTF-8 text) and ``max_depth`` nesting levels.

    Raises:
        JSONTextError: larger than ``max_bytes``, nested deeper than ``max_depth``, not
            UTF-8, or not valid JSON (the message gives the decoder's reason and position).
    """
    if isinstance(text, bytes):
        if len(text) > max_bytes:
            raise JSONTextError(f"{len(text)} bytes, more than the limit of {max_bytes}")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            raise JSONTextError(f"not UTF-8 ({err.reason} at byte {err.start})") from None
    elif len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise JSONTextError(f"more than the limit of {max_bytes} bytes")
    if _too_deep(text, max_depth):
        raise JSONTextError(f"nested more than {max_depth} levels deep")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise JSONTextError(
            f"not valid JSON: {err.msg} (line {err.lineno} column {err.colno})"
        ) from None
    except RecursionError:  # pragma: no cover - the depth bound comes first
        raise JSONTextError("nested too deeply") from None


def strict_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for :func:`json.loads`: the object as a dict.

    Raises:
        DuplicateKeyError: a key appears twice (message: the key, the object's other keys
            and the positions, 1-based, of both occurrences among its members).
    """
    out = dict(pairs)
    if len(out) == len(pairs):  # the common case, at C speed
        return out
    seen: dict[str, int] = {}
    for i, (k, _v) in enumerate(pairs):
        if k in seen:
            raise DuplicateKeyError(
                f"duplicate key {k!r} (members {seen[k] + 1} and {i + 1} of the object with "
                f"keys {', '.join(repr(x) for x in out)})",
                k,
            )
        seen[k] = i
    return out  # pragma: no cover - unreachable: a shorter dict means a repeated key
