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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from idleshare import names, timings
from idleshare.adapters.ports import ClusterRecord
from idleshare.domain.cluster_settings import SettingError
from idleshare.parse.cluster_settings import read_settings, settings_json

HANDLER_VARIABLE = "_HANDLER"  # set by the Lambda runtime: the function's handler string
_IDENTITY = ("id", "eks_cluster_name", "hyperpod_cluster_arn")
"""A cluster of ``IDLESHARE_CLUSTERS`` as the CDK config gives it: these and its settings beside them (read by
``parse/cluster_settings``'s schema)."""


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


def clusters_json(clusters: Iterable[ClusterRecord]) -> str:
    """The governed clusters as ``IDLESHARE_CLUSTERS`` holds them (what :func:`parse_clusters` reads back as equal):
    the CDK app writes it (``infra/config.py: clusters_env``), with the registrar's ``Clusters`` property."""
    items = []
    for c in clusters:
        item: dict[str, object] = {"id": c.cluster_id, "eks_cluster_name": c.eks_cluster_name}
        if c.hyperpod_cluster_arn is not None:
            item["hyperpod_cluster_arn"] = c.hyperpod_cluster_arn
        items.append({**item, **settings_json(c.settings)})
    return json.dumps(items, separators=(",", ":"), sort_keys=True)


def parse_clusters(raw: str) -> tuple[ClusterRecord, ...]:
    """``IDLESHARE_CLUSTERS``: the CDK config's clusters as JSON (:func:`clusters_json`)."""
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
        try:
            settings = read_settings({k: v for k, v in item.items() if k not in _IDENTITY})
        except SettingError as exc:
            raise EnvError(f"{var}[{i}].{exc}") from None
        out.append(
            ClusterRecord(
                cluster_id=str(_text(item.get("id"), f"{var}[{i}].id", required=True)),
                eks_cluster_name=str(
                    _text(item.get("eks_cluster_name"), f"{var}[{i}].eks_cluster_name", required=True)
                ),
                hyperpod_cluster_arn=_text(
                    item.get("hyperpod_cluster_arn"), f"{var}[{i}].hyperpod_cluster_arn", required=False
                ),
                settings=settings,
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
