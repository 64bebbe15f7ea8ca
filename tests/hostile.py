"""The hostile-input table every surface is tested against (issue 35): names, sizes, encodings, numbers, dates, array
vs object, lone surrogates, huge integers, NaN/Infinity, deep nesting. A surface's test derives its cases from its own
list of fields (the admin API's OpenAPI document, the inbound events, the CLI's parser) crossed with these tables, so a
field added later is covered without being named here.

``FIELD_VALUES`` are JSON *text* (what a client can send, including what ``json.dumps`` cannot write: NaN, an integer
of 5,000 digits); ``BODIES`` whole request bodies; ``QUERY_VALUES`` and ``ARGUMENT_VALUES`` strings."""

from __future__ import annotations

import json
from typing import Any

from tests.strategies import paths

HUGE_INT = "9" * 5000  # more digits than Python converts (4,300): a ValueError where it is read
DEEP = "[" * 30_000 + "]" * 30_000  # deeper than any decoder recurses, within the 64 KiB a body may have
FIELD_VALUES: dict[str, str] = {
    "huge-int": HUGE_INT,
    "huge-negative-int": "-" + HUGE_INT,
    "huge-exponent": "1e999999999",  # exactly, a billion digits
    "tiny-exponent": "1e-999999999",
    "nan": "NaN",
    "infinity": "Infinity",
    "-infinity": "-Infinity",
    "lone-surrogate": '"\\ud800"',
    "surrogate-in-text": '"ab\\udfffcd"',
    "long-text": json.dumps("x" * 60_000),
    "4-byte-letters": json.dumps("\U0001d400" * 1000),
    "control-chars": json.dumps("\x00\x1b[31m\n"),
    "array": "[1, 2]",
    "object": '{"a": 1}',
    "null": "null",
    "bool": "true",
    "negative": "-1",
    "fraction": "0.5",
    "deep": "[" * 5000 + "]" * 5000,
}
BODIES: dict[str, str] = {
    "empty-array": "[]",
    "string": '"text"',
    "number": "42",
    "null": "null",
    "bool": "false",
    "deep": DEEP,
    "not-json": "{not json",
    "truncated": '{"Name": "a"',
    "bare-nan": "NaN",
    "huge-int": HUGE_INT,
    "lone-surrogate-key": '{"\\ud800": 1}',
}
QUERY_VALUES: dict[str, str] = {
    "empty": "",
    "huge-int": HUGE_INT[:60],
    "negative": "-1",
    "nan": "NaN",
    "infinity": "Infinity",
    "fraction": "1.5",
    "whole-fraction": "1.0",  # pydantic read it as the integer 1
    "plus-sign": "+1",
    "fullwidth-digit": "\uff11",
    "lone-surrogate": "\ud800",
    "long": "x" * 10_000,
    "4-byte-letters": "\U0001d400" * 40,
    "first-date": "0001-01-01T00:00:00+14:00",
    "last-date": "9999-12-31T23:59:59-14:00",
    "max-date": "9999-12-31T23:59:59.999999+00:00",
    "json": '{"after": "a"}',
    "control-chars": "\x00\n\r",
}
ARGUMENT_VALUES = QUERY_VALUES


def with_field(doc: Any, path: tuple[str | int, ...], text: str) -> str:
    """``doc`` as JSON text with the member at ``path`` (``()``: the whole document) replaced by the JSON ``text``."""
    marker = "\x00hostile\x00"
    if not path:
        return text
    copy = json.loads(json.dumps(doc))
    target = copy
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = marker
    return json.dumps(copy).replace(json.dumps(marker), text)


def field_cases(doc: Any) -> list[tuple[str, str]]:
    """(case id, JSON text) for every member of ``doc`` (derived: a field added to ``doc`` is covered) set to every
    ``FIELD_VALUES`` entry, and the whole document as an array of itself (one request must never be several)."""
    cases = [("array-of-bodies", json.dumps([doc, doc]))]
    for path in paths(doc):
        if not path:
            continue
        where = ".".join(str(p) for p in path)
        cases += [(f"{where}={name}", with_field(doc, path, text)) for name, text in FIELD_VALUES.items()]
    return cases


def report(failures: list[str]) -> str:
    """An assertion message of the first failures, every character encodable (a lone surrogate in a message broke
    pytest-xdist's report of the failure)."""
    return "\n".join(failures[:20]).encode("utf-8", "backslashreplace").decode("utf-8")
