"""The Lambdas' configuration: one settings model, read from the environment, checked at cold start.

Each function gets only its own variables (``names.FUNCTION_ENV``, keyed by the handler Lambda names in
``_HANDLER``; the CDK app sets exactly those): :func:`settings` reads the running function's and refuses
a missing or malformed one with an :class:`EnvError` naming the variable and the function. Outside Lambda
(tests, the local replay) :func:`read` parses whatever is set, requiring nothing.

Stdlib only: the router Lambda reads it on its first event, and pydantic would add a tenth of a second
to that cold start for a handful of variables.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from idleshare import names, timings
from idleshare.adapters.ports import FIELD_OWNERSHIP_MODES, RESPECT, ClusterRecord, check_node_watch_seconds
from idleshare.domain.model import (
    DEFAULT_ADMISSION_POLICY,
    DEFAULT_HEADROOM,
    DEFAULT_NAMESPACE_PREFIX,
    BorrowLimitBasis,
    Headroom,
)
from idleshare.domain.naming import namespace_prefix_problem

HANDLER_VARIABLE = "_HANDLER"  # set by the Lambda runtime: the function's handler string


class EnvError(ValueError):
    """A Lambda environment variable is missing or malformed (a deployment error, named by variable)."""


@dataclass(frozen=True)
class Settings:
    table_name: str = ""
    idempotency_table_name: str = ""
    queue_url: str = ""
    event_bus_name: str = ""
    history_ttl_days: int = timings.HISTORY_TTL_DAYS
    # None: the engine's defaults (variable unset); an empty set: tolerate no taint
    tolerated_taint_keys: frozenset[str] | None = None
    clusters: tuple[ClusterRecord, ...] = ()


def _days(raw: str) -> int:
    try:
        days = int(raw.strip())
    except ValueError:
        raise EnvError(f"{names.ENV_HISTORY_TTL_DAYS}: a whole number of days is required (got {raw!r})") from None
    if not 1 <= days <= timings.HISTORY_TTL_MAX_DAYS:
        raise EnvError(f"{names.ENV_HISTORY_TTL_DAYS}: must be 1..{timings.HISTORY_TTL_MAX_DAYS} days (got {days})")
    return days


def _text(value: object, where: str, *, required: bool) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise EnvError(f"{where}: a non-empty string is required (got {value!r})")
    return value


def _ownership(value: object, where: str) -> str:
    if value is None:
        return RESPECT
    if value not in FIELD_OWNERSHIP_MODES:
        raise EnvError(f"{where}: must be Respect or Take (got {value!r})")
    return str(value)


def _prefix(value: object, where: str) -> str | None:
    prefix = _text(value, where, required=False)
    problem = None if prefix is None else namespace_prefix_problem(prefix)
    if problem is not None:
        raise EnvError(f"{where}: {problem} (got {prefix!r})")
    return prefix


def _basis(value: object, where: str) -> BorrowLimitBasis:
    if value is None:
        return BorrowLimitBasis.QUOTA
    if value not in tuple(BorrowLimitBasis):
        raise EnvError(f"{where}: must be one of {', '.join(BorrowLimitBasis)} (got {value!r})")
    return BorrowLimitBasis(str(value))


def _headroom(value: object, where: str) -> Headroom:
    if value is None:
        return DEFAULT_HEADROOM
    if value not in tuple(Headroom):
        raise EnvError(f"{where}: must be one of {', '.join(Headroom)} (got {value!r})")
    return Headroom(str(value))


def _flag(value: object, where: str) -> bool:
    if value is None:
        return DEFAULT_ADMISSION_POLICY
    if not isinstance(value, bool):
        raise EnvError(f"{where}: must be true or false (got {value!r})")
    return value


def _hold(value: object, where: str) -> int:
    if value is None:
        return timings.DEFAULT_NODE_WATCH_SECONDS
    try:
        check_node_watch_seconds(value)
    except ValueError as exc:
        raise EnvError(f"{where}: {str(exc).split(': ', 1)[1]}") from None
    assert isinstance(value, int)
    return value


def parse_clusters(raw: str) -> tuple[ClusterRecord, ...]:
    """``IDLESHARE_CLUSTERS``: the CDK config's clusters as JSON (``infra/config.py: clusters_env``)."""
    var = names.ENV_CLUSTERS
    try:
        items = json.loads(raw)
    except ValueError as exc:
        raise EnvError(f"{var}: not JSON ({exc})") from None
    if not isinstance(items, list) or not items:
        raise EnvError(f"{var}: a non-empty JSON list of clusters is required")
    out: list[ClusterRecord] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise EnvError(f"{var}[{i}]: an object is required")
        out.append(
            ClusterRecord(
                cluster_id=str(_text(item.get("id"), f"{var}[{i}].id", required=True)),
                eks_cluster_name=str(
                    _text(item.get("eks_cluster_name"), f"{var}[{i}].eks_cluster_name", required=True)
                ),
                hyperpod_cluster_arn=_text(
                    item.get("hyperpod_cluster_arn"), f"{var}[{i}].hyperpod_cluster_arn", required=False
                ),
                namespace_prefix=_prefix(item.get("prefix"), f"{var}[{i}].prefix") or DEFAULT_NAMESPACE_PREFIX,
                field_ownership=_ownership(item.get("field_ownership"), f"{var}[{i}].field_ownership"),
                borrow_limit_basis=_basis(item.get("borrow_limit_basis"), f"{var}[{i}].borrow_limit_basis"),
                headroom=_headroom(item.get("headroom"), f"{var}[{i}].headroom"),
                admission_policy=_flag(item.get("admission_policy"), f"{var}[{i}].admission_policy"),
                node_watch_seconds=_hold(item.get("node_watch_seconds"), f"{var}[{i}].node_watch_seconds"),
            )
        )
    ids = [c.cluster_id for c in out]
    if len(ids) != len(set(ids)):
        raise EnvError(f"{var}: duplicate cluster id")
    return tuple(out)


def read(environ: Mapping[str, str] | None = None) -> Settings:
    """Every idleshare variable that is set, parsed and checked; none required."""
    e = os.environ if environ is None else environ
    table = e.get(names.ENV_TABLE_NAME, "")
    if table and len(table) < 3:
        raise EnvError(f"{names.ENV_TABLE_NAME}: a table name of at least 3 characters is required (got {table!r})")
    taints = e.get(names.ENV_TOLERATED_TAINT_KEYS)
    clusters = e.get(names.ENV_CLUSTERS, "")
    return Settings(
        table_name=table,
        idempotency_table_name=e.get(names.ENV_IDEMPOTENCY_TABLE_NAME, ""),
        queue_url=e.get(names.ENV_QUEUE_URL, ""),
        event_bus_name=e.get(names.ENV_EVENT_BUS_NAME, ""),
        history_ttl_days=_days(e.get(names.ENV_HISTORY_TTL_DAYS, str(timings.HISTORY_TTL_DAYS))),
        tolerated_taint_keys=(None if taints is None else frozenset(t.strip() for t in taints.split(",") if t.strip())),
        clusters=parse_clusters(clusters) if clusters else (),
    )


def required_for(handler: str | None) -> tuple[str, ...]:
    """The variables the function running ``handler`` must have (outside Lambda: the table only)."""
    return names.FUNCTION_ENV.get(handler or "", (names.ENV_TABLE_NAME,))


def settings(environ: Mapping[str, str] | None = None, *, handler: str | None = None) -> Settings:
    """The running function's settings: each of its variables set and non-empty (the tolerated taint keys
    may be empty: tolerate none), every value valid; else :class:`EnvError` naming them and the function."""
    e = os.environ if environ is None else environ
    handler = handler or e.get(HANDLER_VARIABLE)
    who = f"the {handler} function" if handler in names.FUNCTION_ENV else "idleshare"
    missing = [
        var for var in required_for(handler) if var not in e or (not e[var] and var != names.ENV_TOLERATED_TAINT_KEYS)
    ]
    if missing:
        raise EnvError(
            f"{', '.join(missing)}: required by {who} and not set (the CDK stack sets it: redeploy with `cdk deploy`)"
        )
    try:
        return read(e)
    except EnvError as exc:
        raise EnvError(f"{exc} ({who})") from None


def check_at_cold_start() -> None:
    """In a Lambda: refuse to start without the function's configuration (an init error naming it)."""
    if os.environ.get(HANDLER_VARIABLE) in names.FUNCTION_ENV:
        settings()
