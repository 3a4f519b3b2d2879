"""Kubernetes quantities (models/quantity.py): the grammar of
``k8s.io/apimachinery/pkg/api/resource.Quantity``, parsed into base units.

Every expected value is worked out by hand in the comment next to it: cpu in milli-CPU,
memory in bytes, any other resource in milli-units (one GPU = 1000).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangplan.models import QuantityError, Role, format_quantity, parse_quantity
from gangplan.models.quantity import to_base_units

GPU = "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        ("500m", Fraction(1, 2)),  # milli: 500 / 1000
        ("2", Fraction(2)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),  # a leading dot is allowed
        ("+3", Fraction(3)),  # an explicit sign is allowed
        ("1e3", Fraction(1000)),  # decimal exponent
        ("1E3", Fraction(1000)),  # capital E followed by digits is an exponent too
        ("2e-3", Fraction(2, 1000)),
        ("1E", Fraction(10**18)),  # a bare E is the exa suffix, not an exponent
        ("100M", Fraction(100_000_000)),  # decimal mega
        ("1k", Fraction(1000)),  # decimal kilo is lower-case
        ("5n", Fraction(5, 10**9)),
        ("7u", Fraction(7, 10**6)),
        ("32Gi", Fraction(32 * 1024**3)),  # 32 * 1073741824 = 34359738368
        ("1Ki", Fraction(1024)),
        ("1.5Gi", Fraction(3 * 1024**3, 2)),  # 1610612736
        (" 4 ", Fraction(4)),  # surrounding blanks, as the API server trims JSON values
    ],
)
def test_parse_quantity_exact(text: str, exact: Fraction) -> None:
    assert parse_quantity(text) == exact


@pytest.mark.parametrize(
    ("resource", "value", "base"),
    [
        ("cpu", "500m", 500),  # half a core = 500 milli-CPU
        ("cpu", "2", 2000),
        ("cpu", 2, 2000),  # a YAML number means cores, as in Kubernetes
        ("cpu", "1.5", 1500),
        ("cpu", 1.5, 1500),
        ("cpu", "0.1", 100),
        ("cpu", "1e3", 1_000_000),  # 1000 cores
        ("cpu", "2e-3", 2),  # 0.002 cores = 2 milli-CPU
        ("cpu", "0.5m", 1),  # below the base unit: rounded up, as the API server does
        ("cpu", "100u", 1),  # 0.1 milli-CPU rounds up to 1
        ("memory", "32Gi", 34_359_738_368),  # 32 * 2**30
        ("memory", "123Mi", 128_974_848),  # 123 * 1048576
        ("memory", "100M", 100_000_000),
        ("memory", "129e6", 129_000_000),
        ("memory", "1.5Gi", 1_610_612_736),
        ("memory", "2Ti", 2_199_023_255_552),  # 2 * 2**40
        ("memory", "1k", 1000),
        ("memory", "0.5Ki", 512),
        ("memory", 64, 64),  # a bare number of bytes
        ("memory", "1m", 1),  # a thousandth of a byte rounds up to one byte
        ("ephemeral-storage", "10G", 10_000_000_000),  # bytes too
        ("hugepages-2Mi", "1Gi", 1_073_741_824),  # hugepages-* are bytes
        (GPU, 8, 8000),  # 8 GPUs = 8000 milli-GPU
        (GPU, "8", 8000),
        (GPU, "460m", 460),  # a share, as the Alibaba trace's gpu_milli
        (GPU, "0.5", 500),
        (GPU, "1e3", 1_000_000),
        ("rdma/hca", "4", 4000),  # any extended resource is in milli-units
        ("example.com/fpga", 1, 1000),
    ],
)
def test_to_base_units(resource: str, value: object, base: int) -> None:
    assert to_base_units(resource, value) == base


@pytest.mark.parametrize(
    "value",
    [
        "abc",  # no number
        "1.2.3",  # two dots
        "",  # empty
        "Gi",  # a suffix without a number
        "1GB",  # not a Kubernetes suffix
        "1gi",  # suffixes are case-sensitive
        "1K",  # decimal kilo is 'k'
        "1KiB",
        "1e",  # an exponent needs digits
        "1e1.5",  # an exponent is an integer
        "1 Gi",  # no blank inside
        "1e3m",  # exponent and suffix together
        "0x10",  # no hexadecimal
        "--1",
        True,  # YAML booleans are not quantities
        None,
        [1],
        float("nan"),
        float("inf"),
    ],
)
def test_parse_quantity_rejects(value: object) -> None:
    with pytest.raises(QuantityError) as err:
        parse_quantity(value)
    # the message repeats the value and says what is accepted
    if isinstance(value, str) and value:
        assert repr(value) in str(err.value)


@pytest.mark.parametrize("value", ["abc", "1.2.3", True])
def test_parse_error_names_accepted_forms(value: object) -> None:
    with pytest.raises(QuantityError, match=r"accepted: .*500m.*32Gi"):
        parse_quantity(value)


@pytest.mark.parametrize(("resource", "value"), [("cpu", "-1"), ("cpu", "-500m"), (GPU, -0.5)])
def test_negative_quantity_is_rejected(resource: str, value: object) -> None:
    with pytest.raises(QuantityError, match=r"negative \(accepted: a quantity >= 0\)"):
        to_base_units(resource, value)


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 2500, "2500m"),
        ("cpu", 2000, "2"),
        ("cpu", 0, "0"),
        ("memory", 2**35, "32Gi"),
        ("memory", 3072, "3Ki"),  # 3 * 1024
        ("memory", 1536, "1536"),  # 1.5 Ki: not a whole number of Ki, written in bytes
        ("memory", 0, "0"),
        (GPU, 460, "460m"),
        (GPU, 8000, "8"),
    ],
)
def test_format_quantity(resource: str, amount: int, text: str) -> None:
    assert format_quantity(resource, amount) == text


@given(
    st.sampled_from(["cpu", "memory", GPU, "hugepages-1Gi", "rdma/hca"]),
    st.integers(min_value=0, max_value=2**60),
)
def test_format_then_parse_gives_the_amount_back(resource: str, amount: int) -> None:
    assert to_base_units(resource, format_quantity(resource, amount)) == amount


@pytest.mark.parametrize(
    "resource, value",
    [
        ("memory", "2Ei"),  # 2^61 bytes, above the 2^60 bound
        ("cpu", "9.3P"),  # 9.3e15 cores = 9.3e18 milli-CPU
        ("cpu", "1e100"),  # exponent out of range
        ("memory", "1e5000"),  # would have 5,000 digits
        ("cpu", "1e-99999999"),  # a tiny exponent must not hang either
        ("cpu", 1e40),  # a float beyond 1e30
    ],
)
def test_too_large_or_extreme_quantities_are_refused(resource: str, value: object) -> None:
    with pytest.raises(QuantityError):
        to_base_units(resource, value)


def test_resource_list_parses_once_and_dumps_canonical_strings() -> None:
    role = Role(name="w", count=1, requests={"cpu": "1.5", "memory": "1Gi", GPU: 1})
    assert role.requests == {"cpu": 1500, "memory": 2**30, GPU: 1000}
    # dumped in name order as canonical quantities; they re-validate to the same role
    assert role.model_dump(mode="json")["requests"] == {
        "cpu": "1500m",
        "memory": "1Gi",
        GPU: "1",
    }
    assert Role.model_validate(role.model_dump(mode="json")) == role


def test_resource_list_reports_every_bad_resource_at_once() -> None:
    with pytest.raises(ValueError) as err:
        Role(name="w", count=1, requests={"cpu": "x", "memory": "-1Gi"})
    text = str(err.value)
    assert "resource 'cpu': 'x' is not a Kubernetes quantity" in text
    assert "resource 'memory': '-1Gi' is negative" in text
