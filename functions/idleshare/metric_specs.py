"""One declaration per metric: its name, unit, dimensions, where it comes from, whether it is emitted only above 0,
and its alarm's threshold and window. The emitter (``runtime/metrics.py``: a gauge's dimensions are checked against
its declaration), the dashboard's and the alarms' dimensions and windows (``infra/constructs/observability.py``) and
the docs' metrics table (docs/operations.md, held by ``tests/unit/test_metric_specs.py``) are built from or held to
these. Names: ``names.py``; durations: ``timings.py``."""

from __future__ import annotations

from dataclasses import dataclass

from idleshare import names, timings

SERVICE_DIM = "service"
"""Powertools' own dimension, on every metric (``POWERTOOLS_SERVICE_NAME``)."""


@dataclass(frozen=True)
class Alarm:
    """An alarm on a metric, per cluster: above ``threshold`` (``at_least``: reaching it) in ``periods`` periods of
    ``period_seconds`` in a row; missing data is not breaching unless ``missing_breaches``."""

    threshold: float
    periods: int
    period_seconds: int
    at_least: bool = False
    missing_breaches: bool = False


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str  # Powertools' MetricUnit value: "Count", "Seconds", "Milliseconds"
    dims: tuple[str, ...]  # the dimensions it carries besides ``service``
    source: str  # the function that emits it
    when_positive: bool = False  # a trouble gauge: emitted only above 0
    alarm: Alarm | None = None

    @property
    def schema_dims(self) -> tuple[str, ...]:
        """Its dimensions as a ``SCHEMA()`` / ``SEARCH`` names them: exactly these, ``service`` included."""
        return (*self.dims, SERVICE_DIM)


_C, _R = names.METRIC_DIM_CLUSTER, names.METRIC_DIM_RESOURCE
_CLUSTER = (_C,)
_RESOURCE = (_C, _R)
_FIVE_MINUTES = 300
_ABOVE_ZERO = Alarm(threshold=0, periods=1, period_seconds=_FIVE_MINUTES)

METRICS: tuple[Metric, ...] = (
    # the router (counts, per service)
    Metric(names.METRIC_EVENTS_DROPPED, "Count", (), "router"),
    Metric(names.METRIC_RECOMPUTES_REQUESTED, "Count", (), "router"),
    # the recompute: the pool (gauges per cluster)
    Metric(names.METRIC_UNALLOCATED, "Count", _RESOURCE, "recompute"),
    Metric(
        names.METRIC_SHORTFALL, "Count", _RESOURCE, "recompute", True, Alarm(0, 3, _FIVE_MINUTES)
    ),  # Metrics Insights: the largest of the cluster's resources
    Metric(names.METRIC_EXCLUDED_NODES, "Count", (_C, names.METRIC_DIM_REASON), "recompute"),
    Metric(names.METRIC_POOL_ISSUES, "Count", (_C, names.METRIC_DIM_SEVERITY), "recompute"),
    Metric(names.METRIC_UNGOVERNED_FLAVORS, "Count", _CLUSTER, "recompute", True),
    Metric(names.METRIC_FOREIGN_FIELD_MANAGER, "Count", _CLUSTER, "recompute", True, _ABOVE_ZERO),
    Metric(names.METRIC_FOREIGN_OBJECTS, "Count", _CLUSTER, "recompute", True, _ABOVE_ZERO),
    Metric(names.METRIC_FIELD_MANAGER_FIGHTS, "Count", _CLUSTER, "recompute", True, _ABOVE_ZERO),
    Metric(names.METRIC_OBJECTS_REFUSED, "Count", _CLUSTER, "recompute", True, _ABOVE_ZERO),
    Metric(names.METRIC_QUOTA_OVERRIDDEN, "Count", _CLUSTER, "recompute", True, _ABOVE_ZERO),
    # the recompute's run (per service)
    Metric(names.METRIC_RECOMPUTE_DURATION, "Milliseconds", (), "recompute"),
    Metric(names.METRIC_OBJECTS_APPLIED, "Count", (), "recompute"),
    Metric(names.METRIC_PERMANENT_FAILURES, "Count", (), "recompute", alarm=Alarm(1, 1, _FIVE_MINUTES, at_least=True)),
    Metric(names.METRIC_RECOMPUTES_COALESCED, "Count", (), "recompute"),
    Metric(names.METRIC_TRAILING_DEFERRED, "Count", (), "recompute"),
    Metric(names.METRIC_RECALCULATIONS_DEDUPLICATED, "Count", (), "recompute"),
    Metric(names.METRIC_RECOMPUTES_OUT_OF_TIME, "Count", (), "recompute"),
    Metric(names.METRIC_RECORDS_HANDED_BACK, "Count", (), "recompute"),
    # the node watcher (per cluster)
    Metric(
        names.METRIC_NODE_WATCH_SECONDS,
        "Seconds",
        _CLUSTER,
        "node watcher",
        alarm=Alarm(timings.WATCHER_ALARM_MINUTES * 60 / 2, 2, _FIVE_MINUTES, missing_breaches=True),
    ),  # below the threshold: the watch is not running (infra/constructs/watcher.py)
    Metric(names.METRIC_NODE_CHANGES_PUBLISHED, "Count", _CLUSTER, "node watcher"),
    Metric(names.METRIC_NODE_WATCH_FAILURES, "Count", _CLUSTER, "node watcher", True),
    Metric(names.METRIC_NODE_WATCH_RELISTS, "Count", _CLUSTER, "node watcher", True),
    # usage, every minute (per cluster and resource)
    Metric(names.METRIC_FLAVOR_IDLE, "Count", _RESOURCE, "node watcher (usage)"),
    Metric(names.METRIC_FLAVOR_BORROWED, "Count", _RESOURCE, "node watcher (usage)"),
    Metric(
        names.METRIC_IDLE_WHILE_PENDING,
        "Count",
        _RESOURCE,
        "node watcher (usage)",
        True,
        Alarm(0, timings.IDLE_WHILE_PENDING_ALARM_MINUTES, 60),
    ),
    Metric(names.METRIC_USAGE_SAMPLE_FAILURES, "Count", _CLUSTER, "node watcher (usage)"),
    Metric(names.METRIC_UNBOUND_PODS, "Count", _CLUSTER, "node watcher (usage)", True),
    Metric(
        names.METRIC_UNBOUND_PODS_OLDEST_SECONDS,
        "Seconds",
        _CLUSTER,
        "node watcher (usage)",
        True,
        Alarm(timings.UNBOUND_PODS_ALARM_MINUTES * 60, 1, _FIVE_MINUTES, at_least=True),
    ),
)

SPEC: dict[str, Metric] = {m.name: m for m in METRICS}


def spec(name: str) -> Metric:
    """The declaration of metric ``name``; a name without one is a bug (KeyError naming it)."""
    try:
        return SPEC[name]
    except KeyError:
        raise KeyError(f"metric {name!r} is not declared in idleshare.metric_specs") from None
