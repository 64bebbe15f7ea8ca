"""The fast paths of `idleshare plan` agree with the parsers they replaced (issue 13).

- ``domain.quantity.parse_quantity`` (stdlib) reads every quantity string as lightkube's
  ``parse_quantity`` does, to the same exact value; it refuses what lightkube refuses;
"""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightkube.utils.quantity import parse_quantity as lightkube_parse

from idleshare.domain.model import CPU, MEMORY
from idleshare.domain.quantity import QuantityError, format_quantity, parse_quantity
from idleshare.parse import quota_shapes, quotas
from idleshare.parse.errors import InputError
from tests.corpus.make_corpus import mutate
from tests.unit import test_parse_quotas as quota_tests


def lightkube(text: str) -> Fraction | None:
    try:
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


# numbers with at most 20 significant digits: lightkube computes in 28-digit Decimal arithmetic,
# exact for these (beyond, it rounds before rounding up to 1m; ours stays exact)
quantity_text = st.from_regex(
    r"[+-]?([0-9]{1,10}(\.[0-9]{0,10})?|\.[0-9]{1,10})(e[+-]?[0-9]{1,2})?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|)",
    fullmatch=True,
)


@settings(max_examples=400, deadline=None)
@given(quantity_text)
def test_parse_quantity_agrees_with_lightkube_on_quantities(text: str) -> None:
    expected, got = lightkube(text), ours(text)
    if max(abs(expected or 0), abs(got or 0)) > 10**24:
        return  # lightkube's 28-digit Decimals cannot round these to 1m (it refuses); the edge refuses > 2^63 anyway
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789.+-eEkKmMGgiT x", max_size=8))
def test_parse_quantity_refuses_what_lightkube_refuses(text: str) -> None:
    expected, got = lightkube(text), ours(text)
    if max(abs(expected or 0), abs(got or 0)) > 10**24:
        return
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
        ("0.1m", Fraction(1, 1000)),  # rounded up to 1m, as Kubernetes does
        ("1e-9", Fraction(1, 1000)),
        ("-0", 0),
    ],
)
def test_parse_quantity_examples(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value == lightkube(text)


@pytest.mark.parametrize("text", ["", "abc", "1.2.3Gi", "12Gb", "1E3", "1 Gi", "1\nGi", "٣", "1e999999", "Gi"])
def test_parse_quantity_refuses(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([CPU, MEMORY, "nvidia.com/gpu"]),
    st.fractions(min_value=0, max_value=10**15, max_denominator=10**6),
)
def test_printed_quantities_read_back_with_ours_as_with_lightkube(resource: str, value: Fraction) -> None:
    text = format_quantity(value, resource)
    assert parse_quantity(text) == lightkube(text)


def test_valid_input_loads_neither_pydantic_nor_lightkube() -> None:
    code = (
        "import sys; from idleshare.cli.plan import plan_from_bytes; "
        "plan_from_bytes(b'[]', b'[]'); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'pydantic_core', 'lightkube', 'httpx2'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_decimal_is_not_needed_for_exact_values() -> None:
    # 0.1 cpu is exactly 1/10, never a binary float
    assert parse_quantity("0.1") == Fraction(1, 10) == Fraction(Decimal("0.1"))


# ------------------------------------------------------------------------- the quota reader


def _slow(parse: Any, document: Any) -> Any:
    try:
        return parse(document, decoded=True)
    except InputError:
        return None


def _agree(document: Any) -> None:
    """What the stdlib reader vouches for, pydantic reads alike; what pydantic accepts, the reader accepts too."""
    fast, slow = quotas._read_quotas(document), _slow(quota_shapes.parse_quotas, document)
    assert fast == slow or (fast is None and slow is not None and _pydantic_only(document))
    fast_sc, slow_sc = quotas._read_scheduler(document), _slow(quota_shapes.parse_scheduler_config, document)
    assert fast_sc == slow_sc or (fast_sc is None and slow_sc is not None and _pydantic_only(document))


def _pydantic_only(document: Any) -> bool:
    """Values pydantic reads that JSON text never holds (Python floats): left to the slow path on purpose."""
    return "float" in repr(type(document)) or (
        isinstance(document, (list, dict)) and any(isinstance(v, float) for v in _leaves(document))
    )


def _leaves(doc: Any) -> list[Any]:
    if isinstance(doc, dict):
        return [leaf for v in doc.values() for leaf in _leaves(v)]
    if isinstance(doc, list):
        return [leaf for v in doc for leaf in _leaves(v)]
    return [doc]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(quota_tests.QUOTA_PATHS), quota_tests.json_values), max_size=3))
def test_the_quota_reader_and_pydantic_agree_on_mutated_quotas(mutations: list[tuple[Any, Any]]) -> None:
    doc = quota_tests.QUOTA_BASE
    for path, value in mutations:
        try:
            doc = mutate(doc, path, value)
        except (KeyError, IndexError, TypeError):
            continue
    _agree([doc])
    try:
        decoded = quotas.decode(json.dumps([doc], default=str), "q")
    except InputError:
        return  # NaN / Infinity: not JSON, refused before either reader
    _agree(decoded)


@settings(max_examples=100, deadline=None)
@given(quota_tests.json_values)
def test_the_quota_reader_and_pydantic_agree_on_any_value(value: Any) -> None:
    _agree(value)
    _agree([value])


def test_the_reader_reads_every_synthetic_benchmark_quota_without_pydantic() -> None:
    from tests.bench.synthetic import make_cluster

    _, raw = make_cluster(200, n_teams=200)
    document = quotas.decode(raw, "q")
    fast = quotas._read_quotas(document)
    assert fast is not None and len(fast) == 200
    assert fast == quota_shapes.parse_quotas(document, decoded=True)
    sc = quota_tests.SCHEDULER_BASE
    assert quotas._read_scheduler(sc) == quota_shapes.parse_scheduler_config(sc, decoded=True) is not None
