"""Paging of the admin API's listings: the opaque ``NextToken`` and the first entries of a page by name and by size;
a bad limit or token is a :class:`BadRequestError` (400). Shared by the admin use cases and the usage reports."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from idleshare import pages
from idleshare.parse.errors import FieldError, InputError


class BadRequestError(InputError):
    """The request as a whole is wrong (a bad paging token, ...): 400 rather than 422."""


def decode_token(token: str | None, field: str = "NextToken") -> dict[str, Any] | None:
    if token is None:
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(token.encode("ascii") + b"=" * (-len(token) % 4)))
    except (ValueError, UnicodeEncodeError, binascii.Error):
        value = None
    if not isinstance(value, dict):
        raise BadRequestError("query", [FieldError(field, "is not a token this API issued")])
    return value


def encode_token(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode().rstrip("=")


def page_start(limit: int, maximum: int, next_token: str | None, key: str) -> str | None:
    """The name a page of a by-name listing starts after (None: the first page); a bad limit or token is a 400."""
    if isinstance(limit, bool) or not 1 <= limit <= maximum:
        raise BadRequestError("query", [FieldError("limit", f"must be between 1 and {maximum}")])
    token = decode_token(next_token)
    after = token.get(key) if token else None
    if token is not None and (not isinstance(after, str) or not after):
        raise BadRequestError("query", [FieldError("NextToken", "is not a token this API issued")])
    return after


def first_entries(
    entries: Mapping[str, Any], after: str | None, limit: int, max_bytes: int = pages.PAGE_MAX_BYTES
) -> tuple[dict[str, Any], bool]:
    """The entries named after ``after``, by name: at most ``limit`` and ``max_bytes`` of JSON; whether more follow."""
    ordered = sorted(n for n in entries if after is None or n > after)
    shown, more = pages.take(ordered, limit, lambda n: pages.json_size({n: entries[n]}), max_bytes)
    return {name: entries[name] for name in shown}, more


def page_of(entries: dict[str, Any], after: str | None, limit: int, key: str) -> tuple[dict[str, Any], str | None]:
    """The entries named after ``after``, by name, at most ``limit`` and :data:`idleshare.pages.PAGE_MAX_BYTES`, and
    the token of the next page (None: the last)."""
    page, more = first_entries(entries, after, limit)
    return page, encode_token({key: list(page)[-1]}) if more else None
