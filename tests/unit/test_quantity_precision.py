"""The one quantity parser at the two precisions it is read at: 1m (nodes, quotas, the pool: what lightkube reads)
and 1n (Kubernetes' own, for the Kueue webhook's fair-sharing weight floor of 1e-9)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from lightkube.utils.quantity import parse_quantity as lightkube_parse

from idleshare.domain.quantity import parse_quantity

NANO = 9


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
    assert parse_quantity(text, NANO) == nano


@pytest.mark.parametrize("text", ["2n", "3u"])
def test_the_sub_milli_suffixes_are_kubernetes_not_lightkube(text: str) -> None:
    # Kubernetes reads n and u (and Kueue's webhook sees "2n"); lightkube does not: the one place the two differ
    with pytest.raises(ValueError):
        lightkube_parse(text)
    assert parse_quantity(text) == Fraction(1, 1000)
