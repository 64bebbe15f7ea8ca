"""JSON text as idleshare reads it from anyone: a request body, a quotas or scheduler-config file, an event.

:func:`decode` returns the document, or raises :class:`~idleshare.parse.errors.InputError` naming where it is
wrong — never ``ValueError``, ``OverflowError``, ``RecursionError`` or a value that fails later, when it is
encoded, stored or sent:

- not JSON (with the line and column), not UTF-8, nested deeper than the interpreter can read;
- ``NaN``, ``Infinity`` and ``-Infinity`` (Python's ``json`` reads them; JSON has no such numbers);
- an integer of more than :data:`MAX_INT_DIGITS` digits (Python refuses to convert it: a ``ValueError`` that
  was a 500), a number with an exponent beyond :data:`MAX_EXPONENT` (its exact value, ``Fraction(Decimal("1e999999999"))``,
  is a billion digits);
- a key given twice in one object (Python's ``json`` keeps the last: ``{"Name": "a", "Name": "b"}`` would be stored
  as ``b`` while a reader that keeps the first sees ``a``), named with the key;
- a string or a key holding a lone surrogate (``"\\ud800"``): valid JSON, but no UTF-8 can carry it, so it
  fails where it is encoded (SQS, DynamoDB, a hash, a log).

Each problem names its field (``ComputeQuotaConfig.ComputeQuotaResources[0].Count``); numbers that are not
integers are exact ``Decimal`` s. :func:`text_problems` is the surrogate check alone, for a document decoded
elsewhere (an EventBridge event the Lambda runtime decoded).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from idleshare.parse.errors import MAX_ERRORS, FieldError, InputError, capped

__all__ = ["MAX_EXPONENT", "MAX_INT_DIGITS", "decode", "text_problems"]

MAX_INT_DIGITS = 4300
"""Python's default ``sys.get_int_max_str_digits()``; no field idleshare reads comes near it."""
MAX_EXPONENT = 400
"""The largest decimal exponent of a number (either sign): no field idleshare reads needs one beyond 10^±400."""
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Repeated(dict):  # type: ignore[type-arg]
    """An object that gave a key twice (the last kept, as ``json`` does): the keys, until the walk names them."""

    __slots__ = ("repeated",)
    repeated: list[str]


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) == len(pairs):
        return document
    seen: set[str] = set()
    out = _Repeated(document)
    out.repeated = sorted({k for k, _ in pairs if k in seen or seen.add(k)})  # type: ignore[func-returns-value]
    return out


class _Unreadable:
    """A value :func:`decode` refuses, kept in place until the walk names its field."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _int(text: str) -> int | _Unreadable:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return _Unreadable(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> Decimal | _Unreadable:
    shown = text if len(text) <= 20 else text[:17] + "..."
    if len(text) > MAX_INT_DIGITS:
        return _Unreadable(f"a number of {len(text)} characters (at most {MAX_INT_DIGITS})")
    number = Decimal(text)
    if abs(number.adjusted()) > MAX_EXPONENT:
        return _Unreadable(f"the number {shown} is out of range (at most 10^±{MAX_EXPONENT})")
    return number


def _constant(name: str) -> _Unreadable:
    return _Unreadable(f"{name} is not a JSON number")


def _shown(key: str) -> str:
    """A key as a field name shows it: a lone surrogate escaped (a message must be encodable)."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8") if _SURROGATE.search(key) else key


def _loc(path: list[str | int]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def text_problems(document: object) -> list[FieldError]:
    """Every field of ``document`` (decoded JSON) that holds a refused value or a lone surrogate (in a key or a
    string). Iterative: a document nested as deeply as the decoder allows is walked without recursion."""
    errors: list[FieldError] = []
    stack: list[tuple[list[str | int], Any]] = [([], document)]
    while stack and len(errors) <= MAX_ERRORS:
        path, value = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                at = _SURROGATE.search(value)
                assert at is not None
                errors.append(FieldError(_loc(path), f"character {at.start()} is a lone surrogate (not Unicode text)"))
        elif isinstance(value, _Unreadable):
            errors.append(FieldError(_loc(path), value.why))
        elif isinstance(value, dict):
            for key in getattr(value, "repeated", ()):
                errors.append(FieldError(_loc([*path, _shown(key)]), "key given twice (each key once per object)"))
            for key, item in reversed(list(value.items())):
                if isinstance(key, str) and _SURROGATE.search(key):
                    errors.append(FieldError(_loc([*path, _shown(key)]), "the key holds a lone surrogate"))
                    continue
                stack.append(([*path, key], item))
        elif isinstance(value, list | tuple):
            stack.extend(([*path, i], item) for i, item in reversed(list(enumerate(value))))
    return capped(errors)


def decode(raw: bytes | bytearray | memoryview | str, source: str) -> Any:
    """JSON text -> the document, or :class:`InputError` (module docstring)."""
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            raw = bytes(raw).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(source, [FieldError("", f"not UTF-8 text (byte {exc.start})")]) from None
    try:
        document = json.loads(
            raw, parse_int=_int, parse_float=_float, parse_constant=_constant, object_pairs_hook=_object
        )
    except json.JSONDecodeError as exc:
        raise InputError(
            source, [FieldError("", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}")]
        ) from None
    except RecursionError:
        raise InputError(source, [FieldError("", "invalid JSON: nested too deeply")]) from None
    errors = text_problems(document)
    if errors:
        raise InputError(source, errors)
    return document
