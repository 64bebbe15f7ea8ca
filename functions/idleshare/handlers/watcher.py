"""Node watcher Lambda: holds a watch on one governed cluster's nodes for this invocation (issue 16).

EventBridge Scheduler invokes it every minute per cluster with ``{"cluster": "<id>"}``; the watch is held
until ``names.WATCHER_STOP_BEFORE_SECONDS`` before the function's timeout, and the next invocation takes it
over from the last checkpoint (``service/watcher.py``). Every invocation reports, per cluster, how long the
watch ran (the "watch not running" alarm), the events it published, its failures and relists.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from idleshare import names
from idleshare.adapters.ports import ClusterRecord
from idleshare.runtime.env import settings
from idleshare.runtime.observability import logger
from idleshare.runtime.wiring import dependencies
from idleshare.service.watcher import WatchReport, watch_cluster


class WatcherInputError(ValueError):
    """The schedule's input names no cluster, or one this deployment does not govern."""


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    cluster = _cluster(event)
    deps = dependencies()
    assert deps.publisher is not None, "the node watcher needs idleshare's event bus"
    remaining = context.get_remaining_time_in_millis() / 1000.0
    deadline = time.monotonic() + max(0.0, remaining - names.WATCHER_STOP_BEFORE_SECONDS)
    try:
        report = watch_cluster(
            cluster.cluster_id,
            deps.kube_for(cluster),
            deps.store,  # type: ignore[arg-type]  # DynamoStore: claim_watch / save_watch
            deps.publisher,  # type: ignore[arg-type]  # EventBridgePublisher: publish_batch
            deadline=deadline,
            owner=str(getattr(context, "aws_request_id", "") or "local"),
        )
    except Exception:
        logger.exception("node watch failed", extra={"cluster": cluster.cluster_id})
        _count(cluster.cluster_id, names.METRIC_NODE_WATCH_FAILURES, 1)
        raise
    _report(report)
    return {
        "cluster": report.cluster_id,
        "published": report.published,
        "changes": dict(report.changes),
        "ignored": report.ignored,
        "relists": report.relists,
        "failures": len(report.failures),
        "superseded": report.superseded,
        "watchedSeconds": round(report.watched_seconds, 1),
        "resourceVersion": report.resource_version,
    }


def _cluster(event: Any) -> ClusterRecord:
    cluster_id = event.get("cluster") if isinstance(event, dict) else None
    if not isinstance(cluster_id, str) or not cluster_id:
        raise WatcherInputError(f'the node watcher needs {{"cluster": "<id>"}} as its input (got {event!r})')
    for cluster in settings().clusters:
        if cluster.cluster_id == cluster_id:
            return cluster
    found = dependencies().store.get_cluster(cluster_id)  # outside a deployment: the registry
    if found is None:
        raise WatcherInputError(f"cluster {cluster_id!r} is not governed by this deployment")
    return found


def _report(report: WatchReport) -> None:
    extra = {
        "cluster": report.cluster_id,
        "lease": report.lease,
        "resumed_from": report.resumed_from,
        "resource_version": report.resource_version,
        "published": report.published,
        "changes": dict(report.changes),
        "ignored": report.ignored,
        "watch_requests": report.watch_requests,
        "bookmarks": report.bookmarks,
        "relists": report.relists,
        "checkpoints": report.checkpoints,
        "superseded": report.superseded,
        "watched_seconds": round(report.watched_seconds, 1),
    }
    if report.failures:
        logger.warning("node watch had failures", extra={**extra, "failures": report.failures[:10]})
    else:
        logger.info("node watch handed over", extra=extra)
    _count(report.cluster_id, names.METRIC_NODE_WATCH_SECONDS, report.watched_seconds, MetricUnit.Seconds)
    _count(report.cluster_id, names.METRIC_NODE_WATCH_EVENTS, report.published)
    _count(report.cluster_id, names.METRIC_NODE_WATCH_FAILURES, len(report.failures))
    _count(report.cluster_id, names.METRIC_NODE_WATCH_RELISTS, report.relists)


def _count(cluster_id: str, name: str, value: float, unit: MetricUnit = MetricUnit.Count) -> None:
    from aws_lambda_powertools.metrics import single_metric

    with single_metric(name=name, unit=unit, value=value, namespace=names.METRICS_NAMESPACE) as metric:
        metric.add_dimension(name=names.METRIC_DIM_CLUSTER, value=cluster_id)
