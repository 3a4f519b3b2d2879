"""The part of CEL that DRA device selectors use, evaluated against one device.

Kubernetes selects devices with CEL expressions (``resource.k8s.io/v1`` ``DeviceSelector.
cel.expression``, in DeviceClasses and in claims' requests), each evaluated with one variable,
``device`` (Kubernetes API reference, "CELDeviceSelector"):

* ``device.driver`` — the driver's name (string);
* ``device.attributes["<domain>"].<name>`` — the device's attributes, grouped by domain: an
  attribute published as ``name`` (no domain) belongs to the driver's own domain, one
  published as ``domain/name`` to that domain (``resource.kubernetes.io/pcieRoot``); values
  are strings, integers, booleans or versions (``semver``);
* ``device.capacity["<domain>"].<name>`` — capacities, as quantities;
* ``device.allowMultipleAllocations`` — a boolean.

gangplan evaluates the subset these selectors are written in (every expression of the NVIDIA
GPU driver's and DRANET's DeviceClasses and examples is in it):

* literals: strings (``'...'`` or ``"..."``), integers, ``true``, ``false``, ``null``;
* field access (``a.b``), map lookup (``a["k"]``), ``"k" in map``;
* ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` on integers, strings, booleans (``==``
  between different types is false, as CEL's heterogeneous equality; ``<`` between them is
  an evaluation error);
* ``!``, ``&&``, ``||`` with CEL's error absorption (``false && error`` is false);
* ``quantity("40Gi")`` and ``semver("1.2.3")`` with ``compareTo``, ``isGreaterThan``,
  ``isLessThan`` (the Kubernetes CEL quantity and semver libraries);
* string ``startsWith``, ``endsWith``, ``contains``.

Anything else (macros such as ``exists``, ``size()``, the ternary operator, arithmetic) is
:class:`CelUnsupported`, raised when the expression is compiled, so that the reader can say
which selector it could not evaluate. A lookup of a key a device does not have is an
evaluation error (:class:`CelEvalError`): the device does not match, as the Kubernetes
allocator refuses a device whose selector fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from gangplan.models.quantity import QuantityError, parse_quantity

__all__ = [
    "MAX_EXPRESSION",
    "CelDevice",
    "CelEvalError",
    "CelUnsupported",
    "Quantity",
    "Selector",
    "Version",
    "compile_selector",
]

MAX_EXPRESSION = 10 * 1024
"""The longest expression compiled, in characters (Kubernetes caps a selector's expression
at 10 Ki characters: ``CELSelectorExpressionMaxLength``)."""
_MAX_DEPTH = 64


class CelUnsupported(ValueError):
    """An expression outside the subset gangplan evaluates (or not CEL at all)."""


class CelEvalError(Exception):
    """An evaluation error for one device (a missing key, a type mismatch)."""


@dataclass(frozen=True, order=True)
class Quantity:
    """A Kubernetes quantity in a CEL expression (``quantity("40Gi")``, a device capacity)."""

    value: Fraction


@dataclass(frozen=True)
class Version:
    """A semantic version (``semver("1.2.3")``, a device's ``version`` attribute)."""

    text: str

    def key(self) -> tuple[Any, ...]:
        """Major, minor, patch, then the pre-release (a version without one ranks above)."""
        core, _, pre = self.text.partition("-")
        core = core.split("+", 1)[0]
        parts = core.split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise CelEvalError(f"{self.text!r} is not a semantic version")
        pre_key: tuple[Any, ...] = (1,) if not pre else (0, *pre.split("."))
        return (*(int(p) for p in parts), pre_key)


@dataclass(frozen=True)
class CelDevice:
    """One device as a selector sees it: driver, attributes and capacity by domain."""

    driver: str
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    capacity: Mapping[str, Mapping[str, Quantity]] = field(default_factory=dict)
    allow_multiple_allocations: bool = False


# --------------------------------------------------------------------------- parsing

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<int>[0-9]+)
    | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\].,])
    )""",
    re.VERBOSE,
)
_METHODS = frozenset(
    {"compareTo", "isGreaterThan", "isLessThan", "startsWith", "endsWith", "contains"}
)
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}

Node = tuple[Any, ...]


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise CelUnsupported(f"cannot read {text[pos : pos + 20].strip()!r} (position {pos})")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _unquote(lit: str) -> str:
    body = lit[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[1]), body)


class _Parser:
    def __init__(self, text: str):
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            want = repr(value) if value else "more"
            raise CelUnsupported(f"expected {want}, found {tok[1] if tok else 'the end'!r}")
        self.i += 1
        return tok

    def at(self, value: str) -> bool:
        tok = self.peek()
        return tok is not None and tok[1] == value and tok[0] in ("op", "id")

    def parse(self) -> Node:
        node = self.expr()
        if self.peek() is not None:
            raise CelUnsupported(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return node

    def expr(self) -> Node:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise CelUnsupported(f"nested deeper than {_MAX_DEPTH}")
        try:
            node = self.conj()
            while self.at("||"):
                self.take()
                node = ("or", node, self.conj())
            return node
        finally:
            self.depth -= 1

    def conj(self) -> Node:
        node = self.rel()
        while self.at("&&"):
            self.take()
            node = ("and", node, self.rel())
        return node

    def rel(self) -> Node:
        node = self.unary()
        tok = self.peek()
        if tok is not None and tok[1] in ("==", "!=", "<", "<=", ">", ">=", "in"):
            self.take()
            node = ("cmp", tok[1], node, self.unary())
        return node

    def unary(self) -> Node:
        if self.at("!"):
            self.take()
            return ("not", self.unary())
        return self.postfix()

    def postfix(self) -> Node:
        node = self.primary()
        while True:
            if self.at("."):
                self.take()
                kind, name = self.take()
                if kind != "id":
                    raise CelUnsupported(f"expected a field name after '.', found {name!r}")
                if self.at("("):
                    if name not in _METHODS:
                        raise CelUnsupported(f"method {name}()")
                    node = ("call", name, node, self.args())
                else:
                    node = ("field", node, name)
            elif self.at("["):
                self.take()
                key = self.expr()
                self.take("]")
                node = ("index", node, key)
            else:
                return node

    def args(self) -> list[Node]:
        self.take("(")
        out: list[Node] = []
        if not self.at(")"):
            out.append(self.expr())
            while self.at(","):
                self.take()
                out.append(self.expr())
        self.take(")")
        return out

    def primary(self) -> Node:
        kind, value = self.take()
        if kind == "str":
            return ("lit", _unquote(value))
        if kind == "int":
            return ("lit", int(value))
        if kind == "id":
            if value in ("true", "false"):
                return ("lit", value == "true")
            if value == "null":
                return ("lit", None)
            if self.at("("):
                if value not in ("quantity", "semver"):
                    raise CelUnsupported(f"function {value}()")
                return ("call", value, None, self.args())
            if value != "device":
                raise CelUnsupported(f"variable {value!r} (a selector has only 'device')")
            return ("device",)
        if value == "(":
            node = self.expr()
            self.take(")")
            return node
        raise CelUnsupported(f"unexpected {value!r}")


# --------------------------------------------------------------------------- evaluation


def _device_field(dev: CelDevice, name: str) -> Any:
    if name == "driver":
        return dev.driver
    if name == "attributes":
        return dev.attributes
    if name == "capacity":
        return dev.capacity
    if name == "allowMultipleAllocations":
        return dev.allow_multiple_allocations
    raise CelEvalError(f"device has no field {name!r}")


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Version) and isinstance(b, Version):
        ka, kb = a.key(), b.key()
        return (ka > kb) - (ka < kb)
    if isinstance(a, bool) != isinstance(b, bool):  # a bool is an int in Python, not in CEL
        raise CelEvalError(f"no ordering between {type(a).__name__} and {type(b).__name__}")
    if isinstance(a, int) and isinstance(b, int):
        return (a > b) - (a < b)
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    raise CelEvalError(f"no ordering between {type(a).__name__} and {type(b).__name__}")


def _call(name: str, target: Any, args: list[Any]) -> Any:
    if target is None:
        if len(args) != 1 or not isinstance(args[0], str):
            raise CelEvalError(f"{name}() takes one string")
        if name == "quantity":
            try:
                return Quantity(parse_quantity(args[0]))
            except QuantityError as err:
                raise CelEvalError(str(err)) from None
        return Version(args[0])
    if name in ("compareTo", "isGreaterThan", "isLessThan"):
        if len(args) != 1:
            raise CelEvalError(f"{name}() takes one argument")
        if not isinstance(target, Quantity | Version) or type(args[0]) is not type(target):
            raise CelEvalError(f"{name}() compares two quantities or two versions")
        c = _compare(target, args[0])
        return c if name == "compareTo" else (c > 0 if name == "isGreaterThan" else c < 0)
    if name in ("startsWith", "endsWith", "contains"):
        if not isinstance(target, str) or len(args) != 1 or not isinstance(args[0], str):
            raise CelEvalError(f"{name}() applies to strings")
        if name == "startsWith":
            return target.startswith(args[0])
        if name == "endsWith":
            return target.endswith(args[0])
        return args[0] in target
    raise CelEvalError(f"no method {name}()")


def _eval(node: Node, dev: CelDevice) -> Any:
    op = node[0]
    if op == "lit":
        return node[1]
    if op == "device":
        return dev
    if op == "field":
        base = _eval(node[1], dev)
        if isinstance(base, CelDevice):
            return _device_field(base, node[2])
        if isinstance(base, Mapping):
            if node[2] not in base:
                raise CelEvalError(f"no such key: {node[2]}")
            return base[node[2]]
        raise CelEvalError(f"{type(base).__name__} has no field {node[2]!r}")
    if op == "index":
        base, key = _eval(node[1], dev), _eval(node[2], dev)
        if not isinstance(base, Mapping):
            raise CelEvalError(f"cannot index a {type(base).__name__}")
        if key not in base:
            raise CelEvalError(f"no such key: {key}")
        return base[key]
    if op == "not":
        value = _eval(node[1], dev)
        if not isinstance(value, bool):
            raise CelEvalError("'!' applies to booleans")
        return not value
    if op in ("and", "or"):
        return _logic(op, node[1], node[2], dev)
    if op == "cmp":
        return _cmp(node[1], _eval(node[2], dev), _eval(node[3], dev))
    if op == "call":
        target = _eval(node[2], dev) if node[2] is not None else None
        return _call(node[1], target, [_eval(a, dev) for a in node[3]])
    raise CelUnsupported(op)  # pragma: no cover (the parser makes no other node)


def _logic(op: str, left: Node, right: Node, dev: CelDevice) -> bool:
    short = op == "or"  # the value that decides: true for ||, false for &&
    err: CelEvalError | None = None
    for side in (left, right):
        try:
            value = _eval(side, dev)
        except CelEvalError as e:
            err = err or e
            continue
        if not isinstance(value, bool):
            err = err or CelEvalError(f"'{'||' if short else '&&'}' applies to booleans")
            continue
        if value is short:
            return short
    if err is not None:
        raise err
    return not short


def _cmp(op: str, a: Any, b: Any) -> bool:
    if op == "in":
        if not isinstance(b, Mapping | tuple | list):
            raise CelEvalError("'in' needs a map or a list on its right")
        return a in b
    if op in ("==", "!="):
        equal = type(a) is type(b) and a == b
        return equal if op == "==" else not equal
    c = _compare(a, b)
    return {"<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[op]


@dataclass(frozen=True)
class Selector:
    """A compiled selector: ``matches(device)`` is True, False, or raises
    :class:`CelEvalError` (the device does not match: the caller counts those)."""

    expression: str
    _tree: Node

    def matches(self, device: CelDevice) -> bool:
        value = _eval(self._tree, device)
        if not isinstance(value, bool):
            raise CelEvalError(f"the expression gives a {type(value).__name__}, not a boolean")
        return value


def compile_selector(expression: str) -> Selector:
    """Compile ``expression`` (the subset of the module docstring).

    Raises:
        CelUnsupported: outside the subset, or longer than :data:`MAX_EXPRESSION`.
    """
    if len(expression) > MAX_EXPRESSION:
        raise CelUnsupported(f"{len(expression):,} characters (at most {MAX_EXPRESSION:,})")
    return Selector(expression, _Parser(expression).parse())


def matcher(selectors: list[Selector]) -> Callable[[CelDevice], bool]:
    """All of ``selectors`` (ANDed, as a request's and a class's selectors are); a device
    whose evaluation fails does not match."""

    def match(dev: CelDevice) -> bool:
        try:
            return all(s.matches(dev) for s in selectors)
        except CelEvalError:
            return False

    return match
