"""Exact quantity arithmetic: rounding rules of docs/spec.md §2, Kubernetes quantity strings both ways, and
the forms an operator reads.

``parse_quantity``, the one quantity parser, reads what lightkube's ``parse_quantity`` reads, to the same
exact value (rounded up to 1m), without lightkube's import of its HTTP stack, and Kubernetes' sub-milli
suffixes ``n`` and ``u`` besides: ``idleshare.parse.nodes`` calls it for every allocatable value, the Kueue
webhook rules (``idleshare.domain.kueue``) at Kubernetes' own precision (1n) for a fair-sharing weight. The
printer and the parser are both checked against lightkube's parser in the tests (round trips and agreement
on generated strings).
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from idleshare.domain.model import CPU, MEMORY, Amount

MI = 1024**2
_BINARY_SUFFIXES = (("Ei", 1024**6), ("Pi", 1024**5), ("Ti", 1024**4), ("Gi", 1024**3), ("Mi", MI), ("Ki", 1024))

# lightkube's grammar: a number (sign, digits, fraction, lowercase exponent; or ".5" unsigned), then a suffix.
# Unlike lightkube's ``re.match``, the whole string must match ("1\nGi" is not 1).
_QUANTITY = re.compile(r"(?:([+-]?)(\d+)(?:\.(\d*))?|\.(\d+))(?:e([+-]?\d+))?(.*)", re.ASCII | re.DOTALL)
# suffix -> (base, power): decimal SI (lightkube also reads Z and Y; Kubernetes also n and u) and binary SI
_MULTIPLIERS: dict[str, tuple[int, int]] = {
    "n": (10, -9), "u": (10, -6), "m": (10, -3), "": (10, 0), "k": (10, 3), "M": (10, 6), "G": (10, 9), "T": (10, 12), "P": (10, 15),
    "E": (10, 18), "Z": (10, 21), "Y": (10, 24),
    "Ki": (1024, 1), "Mi": (1024, 2), "Gi": (1024, 3), "Ti": (1024, 4), "Pi": (1024, 5), "Ei": (1024, 6),
    "Zi": (1024, 7), "Yi": (1024, 8),
}  # fmt: skip
_MAX_DIGITS = 40
"""Quantities with more integer digits than this are refused (Kubernetes' are int64: 19 digits)."""


class QuantityError(ValueError):
    """Not a quantity string; the message says why."""


@functools.lru_cache(maxsize=4096)  # a cluster's objects repeat a few amounts: diffing and checking them re-reads them
def parse_quantity(text: str, precision: int = 3) -> Amount:
    """A Kubernetes quantity string -> its exact value, rounded up (away from zero) to ``10^-precision``: 1m by
    default, as lightkube does; 9 (1n) is Kubernetes' own precision. ``"1.5Gi"`` -> 1610612736,
    ``"100m"`` -> Fraction(1, 10), ``"1e3"`` -> 1000, ``"2n"`` -> Fraction(1, 1000) (at precision 9:
    Fraction(2, 10**9)). Raises :class:`QuantityError`."""
    match = _QUANTITY.fullmatch(text)
    if match is None or match[6] not in _MULTIPLIERS:
        raise QuantityError("not a quantity")
    sign, whole, fraction, bare_fraction, exponent, suffix = match.groups()
    fraction = fraction or bare_fraction or ""
    digits = ((whole or "") + fraction).lstrip("0")
    if not digits:
        return 0
    significant = digits.rstrip("0")
    power = (int(exponent) if exponent else 0) - len(fraction) + len(digits) - len(significant)
    digits = significant
    base, scale = _MULTIPLIERS[suffix]
    magnitude = len(digits) + power + (scale if base == 10 else 3 * scale)  # about log10 of the value
    if magnitude > _MAX_DIGITS or len(digits) > 4000:
        raise QuantityError("number too large")
    unit = 10**precision
    if magnitude < -precision - 1:  # well under the unit (1024^k is a little over 1000^k): rounds up to it
        return Fraction(-1 if sign == "-" else 1, unit)  # (sign is None for ".5")
    value = Fraction(int(digits)) * Fraction(10) ** power * Fraction(base) ** scale
    units = math.ceil(value * unit)
    return exact(Fraction(-units if sign == "-" else units, unit))


def exact(value: Amount) -> Amount:
    """An int when the value is whole, else the Fraction itself."""
    if type(value) is int:  # the common case, without the ABC isinstance machinery
        return value
    if isinstance(value, Fraction) and value.denominator == 1:
        return value.numerator
    return value


def round_down(resource: str, value: Amount) -> Amount:
    """Round what a ratio or a percentage produced, never up: cpu to 1m, memory to 1Mi, devices to 1."""
    if value <= 0:
        return 0
    if type(value) is int:  # whole already: only memory has a coarser unit
        return value // MI * MI if resource == MEMORY else value
    if resource == CPU:
        return exact(Fraction(math.floor(value * 1000), 1000))
    if resource == MEMORY:
        return math.floor(value / MI) * MI
    return math.floor(value)


def percent_of(resource: str, percent: int, value: Amount) -> Amount:
    """``round_down(resource, percent% x value)``; integer arithmetic when ``value`` is whole."""
    if type(value) is not int:
        return round_down(resource, Fraction(percent, 100) * value)
    scaled = percent * value  # the exact result is scaled / 100
    if scaled <= 0:
        return 0
    if resource == MEMORY:
        return scaled // (100 * MI) * MI
    if resource == CPU:  # a whole number of millis: scaled / 100 = (10 x scaled) m
        return scaled // 100 if scaled % 100 == 0 else Fraction(scaled, 100)
    return scaled // 100


def format_quantity(value: Amount, resource: str = "") -> str:
    """Kubernetes quantity string for an exact non-negative amount of ``resource``.

    Whole numbers print plainly; memory prints with the largest binary suffix that divides it
    exactly; fractions print in milli-units, truncated to 1m.
    """
    if type(value) is int and (value < 1024 or resource != MEMORY):
        return str(value)
    return _format(value, resource)


@functools.lru_cache(maxsize=4096)  # a pool's few distinct amounts print once per team and field
def _format(value: Amount, resource: str) -> str:
    value = exact(value)
    if isinstance(value, int):
        if resource == MEMORY and value >= 1024:
            for suffix, size in _BINARY_SUFFIXES:
                if value % size == 0:
                    return f"{value // size}{suffix}"
        return str(value)
    milli = math.floor(value * 1000)
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"
