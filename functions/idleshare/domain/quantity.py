"""Exact quantity arithmetic: rounding rules of SPEC §2 and the canonical string form.

Parsing Kubernetes quantity strings happens at the edge with lightkube's parser; the domain
only ever sees exact numbers. Printing lives here because the desired Kueue objects are built
here; the printer is checked against lightkube's parser (round trip) in the tests.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from idleshare.domain.model import CPU, MEMORY, Amount

MI = 1024**2
_BINARY_SUFFIXES = (("Ei", 1024**6), ("Pi", 1024**5), ("Ti", 1024**4), ("Gi", 1024**3), ("Mi", MI), ("Ki", 1024))


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
