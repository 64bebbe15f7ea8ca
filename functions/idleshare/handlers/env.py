"""Environment of the Lambdas, validated once at cold start.

Stdlib only: the router Lambda reads it on its first event, and pydantic would add a tenth of a second
to that cold start for five variables.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

from idleshare import names


class EnvError(ValueError):
    """A Lambda environment variable is missing or malformed (a deployment error, named by variable)."""


@dataclass(frozen=True)
class Env:
    table_name: str
    queue_url: str = ""
    event_bus_name: str = ""
    history_ttl_days: int = 30
    tolerated_taint_keys: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if len(self.table_name) < 3:
            raise EnvError(f"{names.ENV_TABLE_NAME}: a table name of at least 3 characters is required")
        if not 1 <= self.history_ttl_days <= 3650:
            raise EnvError(f"{names.ENV_HISTORY_TTL_DAYS}: must be 1..3650 days (got {self.history_ttl_days})")


def _days(raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise EnvError(f"{names.ENV_HISTORY_TTL_DAYS}: a whole number of days is required (got {raw!r})") from None


@cache
def env() -> Env:
    taints = os.environ.get(names.ENV_TOLERATED_TAINT_KEYS)
    return Env(
        table_name=os.environ.get(names.ENV_TABLE_NAME, ""),
        queue_url=os.environ.get(names.ENV_QUEUE_URL, ""),
        event_bus_name=os.environ.get(names.ENV_EVENT_BUS_NAME, ""),
        history_ttl_days=_days(os.environ.get(names.ENV_HISTORY_TTL_DAYS, "30")),
        tolerated_taint_keys=frozenset(t.strip() for t in taints.split(",") if t.strip()) if taints else None,
    )
