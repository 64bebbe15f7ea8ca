"""Node watcher Lambda: holds a watch on one governed cluster's nodes for this invocation.

EventBridge Scheduler invokes it every minute per cluster with ``{"cluster": "<id>"}``; the watch is held
for the cluster's ``node_watch_seconds`` (at most until ``timings.WATCHER_STOP_BEFORE_SECONDS`` before the
function's timeout), and the next invocation takes it
over from the last checkpoint (``service/watcher.py``). Waiting for its publishes is bounded by the time the
invocation has left, less ``timings.WATCHER_CHECKPOINT_RESERVE_SECONDS`` for the last checkpoint: events not
on the bus by then are not checkpointed, and the next invocation publishes them again. Every invocation reports, per cluster, how long the
watch ran (the "watch not running" alarm), the events it published, its failures and relists.
"""

from __future__ import annotations

import time
from typing import Any

from idleshare import timings
from idleshare.adapters.ports import ClusterRecord, UsageHistoryStore, UsageSource
from idleshare.runtime.metrics import emit_watch, watch_failed
from idleshare.runtime.observability import logger
from idleshare.runtime.wiring import dependencies, governed_cluster
from idleshare.service.watcher import watch_cluster


class WatcherInputError(ValueError):
    """The schedule's input names no cluster, or one this deployment does not govern."""


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    cluster = _cluster(event)
    deps = dependencies()
    assert deps.publisher is not None, "the node watcher needs idleshare's event bus"
    assert deps.kube_for is not None, "the node watcher needs access to the governed clusters"
    try:
        kube = deps.kube_for(cluster)
    except Exception:
        watch_failed(cluster.cluster_id)
        raise
    sample_usage_once(cluster, kube, deps.store)  # Kueue's accounting read back, once a minute per cluster
    remaining = context.get_remaining_time_in_millis() / 1000.0
    now = time.monotonic()
    publish_until = now + remaining - timings.WATCHER_CHECKPOINT_RESERVE_SECONDS
    try:
        report = watch_cluster(
            cluster.cluster_id,
            kube,
            deps.store,
            deps.publisher,
            deadline=now + watch_hold_seconds(cluster, remaining),
            owner=str(getattr(context, "aws_request_id", "") or "local"),
            publish_time_left=lambda: publish_until - time.monotonic(),
        )
    except Exception:
        watch_failed(cluster.cluster_id)
        raise
    emit_watch(report)
    return report.summary()


def watch_hold_seconds(cluster: ClusterRecord, remaining: float) -> float:
    """How long this invocation holds the watch: the cluster's ``node_watch_seconds``, or less if the invocation's
    remaining time (less ``timings.WATCHER_STOP_BEFORE_SECONDS``) allows less."""
    return max(0.0, min(float(cluster.settings.node_watch_seconds), remaining - timings.WATCHER_STOP_BEFORE_SECONDS))


def sample_usage_once(cluster: ClusterRecord, kube: UsageSource, store: UsageHistoryStore) -> None:
    """The minute's usage sample (``service/usage.py``) before the watch: a failure to read the cluster is a gap in
    the history, any other failure is logged and counted; neither stops the node watch."""
    from idleshare.runtime.metrics import emit_usage, usage_failed
    from idleshare.service.usage import sample_usage

    try:
        outcome = sample_usage(cluster.cluster_id, kube, store, on_sample=emit_usage)
    except Exception as exc:  # the store, or a bug: the watch still runs
        logger.exception("usage sample not recorded", extra={"cluster": cluster.cluster_id})
        usage_failed(cluster.cluster_id, str(exc))
        return
    if outcome.failure:
        usage_failed(cluster.cluster_id, outcome.failure)


def _cluster(event: Any) -> ClusterRecord:
    cluster_id = event.get("cluster") if isinstance(event, dict) else None
    if not isinstance(cluster_id, str) or not cluster_id:
        raise WatcherInputError(f'the node watcher needs {{"cluster": "<id>"}} as its input (got {event!r})')
    cluster = governed_cluster(cluster_id)
    if cluster is None:
        raise WatcherInputError(f"cluster {cluster_id!r} is not governed by this deployment")
    return cluster
