"""Kubernetes resource quantities, parsed once into integers in base units.

A quantity is written as Kubernetes writes it (``"500m"``, ``"2"``, ``"32Gi"``, ``"1.5"``,
``"1e3"``; grammar of ``k8s.io/apimachinery/pkg/api/resource.Quantity``) and stored as an
integer in the base unit of its resource:

========================================  ==================  ===========================
resource name                             base unit           example
========================================  ==================  ===========================
``cpu``                                   milli-CPU           ``"500m"`` -> 500, ``2`` -> 2000
``memory``, ``ephemeral-storage``,        bytes               ``"32Gi"`` -> 34359738368
``hugepages-*``
anything else (``nvidia.com/gpu``,        milli-units         ``"8"`` -> 8000,
``rdma/hca``, any extended resource)                          ``"460m"`` -> 460
========================================  ==================  ===========================

Extended resources are kept in milli-units so that a GPU share (the Alibaba trace's
``gpu_milli``; docs/design.md "GPU share") and a whole GPU live on one scale: one GPU device is
1000 milli-GPU. Whether a fractional amount is allowed for a resource (only GPU resources
may be fractional, as Kubernetes requires extended resources to be whole) is checked where
the GPU resource names are known, in :mod:`gangplan.models.checks`.

``ResourceList`` is the annotated type used by every model: it accepts a mapping from
resource name to quantity (string or number, in Kubernetes' meaning: ``cpu: 2`` is two
cores) and serialises back to canonical quantity strings, so a dump re-validates to an
equal value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

__all__ = [
    "CPU",
    "MEMORY",
    "QUANTITY_EXAMPLES",
    "QuantityError",
    "ResourceList",
    "format_quantity",
    "is_byte_resource",
    "parse_quantity",
    "to_base_units",
]

CPU = "cpu"
MEMORY = "memory"
MAX_AMOUNT = 2**60
"""The largest amount in base units (2^60 bytes is 1 EiB; 2^60 milli-units about 1.15e15)."""
QUANTITY_EXAMPLES = '"500m", "2", "1.5", "32Gi", "1e3"'

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)
"""The quantity grammar; digits are ASCII ``0-9`` only (Kubernetes' grammar has no other
digits, and Python's ``\\d`` would take ``"٨"`` or ``"３"``)."""


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity, or not allowed for its resource."""


def parse_quantity(value: object) -> Fraction:
    """Parse a Kubernetes quantity exactly.

    Args:
        value: a string such as ``"500m"`` or ``"32Gi"``, or an int / float.

    Returns:
        The exact value as a :class:`~fractions.Fraction` (``"500m"`` -> 1/2).

    Raises:
        QuantityError: not a quantity (e.g. ``"abc"``, ``"1.2.3"``, ``True``, ``None``).
    """
    if isinstance(value, bool) or value is None:
        raise QuantityError(
            f"{value!r} is not a Kubernetes quantity (accepted: {QUANTITY_EXAMPLES})"
        )
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a finite quantity")
        if abs(value) > 1e30:
            raise QuantityError(f"{value!r} is out of range (accepted: below 1e30)")
        return Fraction(str(value))
    if isinstance(value, Fraction):
        return value
    if not isinstance(value, str):
        raise QuantityError(
            f"{value!r} is not a Kubernetes quantity (accepted: {QUANTITY_EXAMPLES})"
        )
    m = _QUANTITY.match(value.strip())
    if m is None:
        raise QuantityError(
            f"{value!r} is not a Kubernetes quantity (accepted: {QUANTITY_EXAMPLES})"
        )
    if len(m["num"]) > 40:
        raise QuantityError(f"{value!r} has too many digits (accepted: at most 40)")
    number = Fraction(m["num"])
    if m["bin"]:
        return number * _BINARY[m["bin"]]
    if m["exp"]:
        exp = int(m["exp"][1:])
        if abs(exp) > 30:
            raise QuantityError(
                f"{value!r}: exponent {exp} is out of range (accepted: -30..30; the API "
                "server limits quantities to 63 bits)"
            )
        return number * Fraction(10) ** exp
    return number * _DECIMAL[m["dec"] or ""]


def is_byte_resource(name: str) -> bool:
    """True for resources counted in bytes (``memory``, ``ephemeral-storage``, ``hugepages-*``)."""
    return name in (MEMORY, "ephemeral-storage") or name.startswith("hugepages-")


def to_base_units(name: str, value: object) -> int:
    """Convert one quantity of resource ``name`` into its base unit (see the module table).

    Fractions below the base unit are rounded up, as the API server rounds requests
    (a request of ``"0.5m"`` cpu counts as 1 milli-CPU).

    Raises:
        QuantityError: not a quantity, or negative.
    """
    q = parse_quantity(value)
    if q < 0:
        raise QuantityError(f"{value!r} is negative (accepted: a quantity >= 0)")
    scaled = math.ceil(q if is_byte_resource(name) else q * 1000)
    if scaled > MAX_AMOUNT:
        raise QuantityError(
            f"{value!r} is too large (accepted: at most {MAX_AMOUNT} base units, 2^60 — "
            "Kubernetes quantities are 63-bit and the solver needs headroom to sum them)"
        )
    return scaled


def format_quantity(name: str, amount: int) -> str:
    """Write a base-unit amount back as a canonical Kubernetes quantity string.

    ``format_quantity("cpu", 2500) == "2500m"``, ``format_quantity("cpu", 2000) == "2"``,
    ``format_quantity("memory", 2**35) == "32Gi"``, ``format_quantity("nvidia.com/gpu", 460)
    == "460m"``. ``parse`` of the result gives ``amount`` back exactly.
    """
    if is_byte_resource(name):
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _BINARY[suffix]
            if amount and amount % unit == 0:
                return f"{amount // unit}{suffix}"
        return str(amount)
    if amount % 1000 == 0:
        return str(amount // 1000)
    return f"{amount}m"


def _parse_resource_list(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value  # let pydantic report the type error with the right location
    out: dict[str, Any] = {}
    bad: list[str] = []
    for name, raw in value.items():
        if not isinstance(name, str) or not name:
            bad.append(f"resource name {name!r} must be a non-empty string")
            continue
        try:
            out[name] = to_base_units(name, raw)
        except QuantityError as err:
            bad.append(f"resource {name!r}: {err}")
    if bad:
        raise QuantityError("; ".join(bad))
    return out


def _serialize_resource_list(value: Mapping[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in sorted(value.items())}


ResourceList = Annotated[
    dict[str, int],
    BeforeValidator(_parse_resource_list),
    PlainSerializer(_serialize_resource_list, return_type=dict[str, str]),
    WithJsonSchema(
        {
            "type": "object",
            "description": (
                "Resource name -> Kubernetes quantity, e.g. {cpu: '500m', memory: 32Gi, "
                "nvidia.com/gpu: 8}. cpu in cores (500m = half a core), memory in bytes "
                "(Ki/Mi/Gi suffixes), GPUs in whole devices or a share of one ('460m')."
            ),
            "additionalProperties": {
                "anyOf": [
                    {"type": "string", "pattern": _QUANTITY.pattern},
                    {"type": "number", "minimum": 0},
                ]
            },
        }
    ),
]
"""Mapping resource name -> amount in base units (see the module table)."""
