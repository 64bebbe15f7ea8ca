"""How big an answer of the admin API may be, in one place: the code that pages and the tests that prove it read these.

A Lambda answers at most :data:`LAMBDA_MAX_RESPONSE_BYTES` (API Gateway turns more into a 502). The proxy response
carries the body as a JSON string, so the body's quotes and backslashes are escaped once more: a body of N bytes is
at most ~2N of response. Every list the API returns is therefore cut by count **and** by size: a page stops adding
entries once they are :data:`PAGE_MAX_BYTES` of JSON as the API sends it (``ensure_ascii``: a 4-byte letter is 12
bytes, ``\\ud83d\\ude00``), and GET pool's samples each stop at :data:`POOL_SAMPLE_MAX_BYTES`. A page always holds
at least one entry (no single entry comes near the budget: a request body is at most 64 KiB).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

LAMBDA_MAX_RESPONSE_BYTES = 6 * 1024 * 1024
PAGE_MAX_BYTES = 1024 * 1024  # the entries of one page; with the escaping above, a response well under 6 MB
POOL_SAMPLE_MAX_BYTES = 640 * 1024  # each of GET pool's three samples (teams, excluded nodes, issues): < 2 MB in all

QUOTAS_PAGE_MAX = 100  # ListComputeQuotas' MaxResults
HISTORY_PAGE_MAX = 100  # generations a page of GET history holds
HISTORY_PAGE_DEFAULT = 20  # generations a page of GET history holds when the request names no limit
EXCLUDED_PAGE_MAX = 1000  # excluded nodes a page of GET excluded-nodes holds
GRANTS_PAGE_MAX = 100  # teams a page of GET grants holds (a team is ~0.8 KB of JSON per flavor)
ISSUES_PAGE_MAX = 1000  # issues a page of GET issues holds
USAGE_PAGE_MAX = 10_000  # teams (latest sample) or rows and gaps (over a period) a page of GET usage holds
POOL_EXCLUDED_SAMPLE = 100  # excluded nodes GET pool shows (the first by name; counts per reason for all)
POOL_TEAMS_SAMPLE = 100  # teams GET pool shows (the first by name; GET grants pages through them all)
POOL_HEADROOM_SAMPLE = 100  # nodes whose headroom GET pool shows (the first by name; per flavor sums for all)
POOL_ISSUES_SAMPLE = 100  # issues GET pool shows (the first; counts per code for all; GET issues pages them)


def json_size(value: Any) -> int:
    """Bytes of ``value`` as the API sends it (Powertools: ``json.dumps`` compact, ASCII-escaped)."""
    return len(json.dumps(value, separators=(",", ":")))


def take(
    items: Iterable[T], limit: int, size: Callable[[T], int] = json_size, max_bytes: int = PAGE_MAX_BYTES
) -> tuple[list[T], bool]:
    """The first ``items``: at most ``limit`` of them and at most ``max_bytes`` of JSON (the first always), and
    whether any was left out."""
    out: list[T] = []
    spent = 0
    for item in items:
        if len(out) == limit:
            return out, True
        spent += size(item) + 1
        if out and spent > max_bytes:
            return out, True
        out.append(item)
    return out, False
