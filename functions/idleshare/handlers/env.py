"""Environment of the Lambdas, validated once at cold start."""

from __future__ import annotations

import os
from functools import cache

from pydantic import BaseModel, Field

from idleshare import names


class Env(BaseModel):
    table_name: str = Field(min_length=3)
    queue_url: str = ""
    event_bus_name: str = ""
    history_ttl_days: int = Field(default=30, ge=1, le=3650)
    tolerated_taint_keys: frozenset[str] | None = None


@cache
def env() -> Env:
    taints = os.environ.get(names.ENV_TOLERATED_TAINT_KEYS)
    return Env(
        table_name=os.environ.get(names.ENV_TABLE_NAME, ""),
        queue_url=os.environ.get(names.ENV_QUEUE_URL, ""),
        event_bus_name=os.environ.get(names.ENV_EVENT_BUS_NAME, ""),
        history_ttl_days=int(os.environ.get(names.ENV_HISTORY_TTL_DAYS, "30")),
        tolerated_taint_keys=frozenset(t.strip() for t in taints.split(",") if t.strip()) if taints else None,
    )
