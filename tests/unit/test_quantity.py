"""The one quantity parser (``domain.quantity``, stdlib) reads every quantity string as lightkube's ``parse_quantity``
does, to the same exact value, and refuses what lightkube refuses; what it prints reads back alike. It reads at 1m
(nodes, quotas, the pool) and at 1n (Kubernetes' own, for the Kueue webhook's fair-sharing weight floor of 1e-9)."""

from __future__ import annotations

import decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightkube.utils.quantity import parse_quantity as lightkube_parse

from idleshare.domain.model import CPU, MEMORY
from idleshare.domain.quantity import QuantityError, format_quantity, parse_quantity


def lightkube(text: str) -> Fraction | None:
    # lightkube multiplies and rounds in the thread's Decimal context: 28 digits by default, which rounds a value
    # times a binary suffix (2^50 has 16 digits) before rounding up to 1m; at 120 digits every case here is exact
    try:
        with decimal.localcontext(prec=120):
            value = lightkube_parse(text)
    except ValueError:
        return None
    assert value is not None
    return Fraction(value)


def ours(text: str) -> Fraction | None:
    try:
        return Fraction(parse_quantity(text))
    except QuantityError:
        return None


# numbers of up to 20 digits with an exponent and a suffix; and near-quantity garbage
quantity_text = st.from_regex(
    r"[+-]?([0-9]{1,10}(\.[0-9]{0,10})?|\.[0-9]{1,10})(e[+-]?[0-9]{1,2})?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|)",
    fullmatch=True,
) | st.text(alphabet="0123456789.+-eEkKmMGgiT x", max_size=8)


@settings(max_examples=600, deadline=None)
@given(quantity_text)
def test_parse_quantity_agrees_with_lightkube_and_refuses_what_it_refuses(text: str) -> None:
    expected, got = lightkube(text), ours(text)
    if max(abs(expected or 0), abs(got or 0)) > 10**36:
        return  # ours refuses numbers of more than 40 digits ("number too large"); the edge refuses > 2^63 anyway
    assert got == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1.5Gi", 3 * 2**29),
        ("191450m", Fraction(191450, 1000)),
        ("2097152Ki", 2 * 1024**3),
        ("1e3", 1000),
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("0.1", Fraction(1, 10)),  # exactly 1/10, never a binary float
        ("0.1m", Fraction(1, 1000)),  # rounded up to 1m, as Kubernetes does
        ("1e-9", Fraction(1, 1000)),
        ("-0", 0),
        # 19 digits times 2^50: exact, then rounded up to 1m (lightkube's default 28-digit context rounds it first)
        ("100000000.0004537011Pi", Fraction(112589990684773222026224397, 1000)),
    ],
)
def test_parse_quantity_examples(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value == lightkube(text)


# Kubernetes' grammar is ASCII: digits of other scripts are refused (lightkube takes them)
@pytest.mark.parametrize(
    "text", ["", "abc", "1.2.3Gi", "12Gb", "1E3", "1 Gi", "1\nGi", "٣", "８", "1٣Gi", "1e999999", "Gi"]
)
def test_parse_quantity_refuses(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([CPU, MEMORY, "nvidia.com/gpu"]), st.fractions(min_value=0, max_value=10**15, max_denominator=10**6)
)
def test_printed_quantities_read_back_with_ours_as_with_lightkube(resource: str, value: Fraction) -> None:
    text = format_quantity(value, resource)
    assert parse_quantity(text) == lightkube(text)


@pytest.mark.parametrize(
    ("text", "milli", "nano"),
    [
        ("2n", Fraction(1, 1000), Fraction(2, 10**9)),
        ("1500u", Fraction(2, 1000), Fraction(15, 10**4)),
        ("1e-10", Fraction(1, 1000), Fraction(1, 10**9)),  # rounded up, away from zero
        ("-1e-10", Fraction(-1, 1000), Fraction(-1, 10**9)),
        ("1e-999999", Fraction(1, 1000), Fraction(1, 10**9)),  # no 10^999999 denominator is built
        ("0.5", Fraction(1, 2), Fraction(1, 2)),
        ("1.5Gi", 3 * 2**29, 3 * 2**29),
        ("0n", 0, 0),
    ],
)
def test_a_quantity_is_rounded_up_to_the_precision_asked(text: str, milli: Fraction, nano: Fraction) -> None:
    assert parse_quantity(text) == milli
    assert parse_quantity(text, 9) == nano


@pytest.mark.parametrize("text", ["2n", "3u"])
def test_the_sub_milli_suffixes_are_kubernetes_not_lightkube(text: str) -> None:
    # Kubernetes reads n and u (and Kueue's webhook sees "2n"); lightkube does not: the one place the two differ
    assert lightkube(text) is None
    assert parse_quantity(text) == Fraction(1, 1000)
