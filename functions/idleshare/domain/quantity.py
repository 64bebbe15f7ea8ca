"""Exact quantity arithmetic: rounding rules of SPEC §2 and the canonical string form.

Parsing Kubernetes quantity strings happens at the edge with lightkube's parser; the domain
only ever sees exact numbers. Printing lives here because the desired Kueue objects are built
here; the printer is checked against lightkube's parser (round trip) in the tests.
"""

from __future__ import annotations

import math
from fractions import Fraction

from idleshare.domain.model import CPU, MEMORY, Amount

MI = 1024**2
_BINARY_SUFFIXES = (("Ei", 1024**6), ("Pi", 1024**5), ("Ti", 1024**4), ("Gi", 1024**3), ("Mi", MI), ("Ki", 1024))


def exact(value: Amount) -> Amount:
    """An int when the value is whole, else the Fraction itself."""
    if isinstance(value, Fraction) and value.denominator == 1:
        return value.numerator
    return value


def round_down(resource: str, value: Amount) -> Amount:
    """Round what a ratio or a percentage produced, never up: cpu to 1m, memory to 1Mi, devices to 1."""
    if value <= 0:
        return 0
    if resource == CPU:
        return exact(Fraction(math.floor(value * 1000), 1000))
    if resource == MEMORY:
        return math.floor(value / MI) * MI
    return math.floor(value)


def format_quantity(value: Amount, resource: str = "") -> str:
    """Kubernetes quantity string for an exact non-negative amount of ``resource``.

    Whole numbers print plainly; memory prints with the largest binary suffix that divides it
    exactly; fractions print in milli-units, truncated to 1m.
    """
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
