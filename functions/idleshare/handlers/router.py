"""Router Lambda: every inbound event -> one recompute request per concerned cluster (SQS FIFO)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from idleshare import names
from idleshare.parse.errors import InputError
from idleshare.parse.events import parse_event
from idleshare.runtime.observability import logger, metrics, tracer
from idleshare.runtime.wiring import dependencies
from idleshare.service.routing import route


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    try:
        typed = parse_event(event)
    except InputError as exc:
        return _malformed(event, exc)
    deps = dependencies()
    assert deps.queue is not None, "the router needs the recompute queue"
    try:
        outcome = route(typed, deps.store, deps.queue, reason=typed.detail_type)
    except (UnicodeError, InputError) as exc:  # parsed, yet cannot be encoded: as malformed, never a retry
        return _malformed(event, exc)
    if outcome.dropped_reason:
        logger.warning("dropped event", extra={"reason": outcome.dropped_reason, "detail_type": typed.detail_type})
        metrics.add_metric(name=names.METRIC_EVENTS_DROPPED, unit=MetricUnit.Count, value=1)
        return {"enqueued": [], "dropped": outcome.dropped_reason}
    logger.info("recompute requested", extra={"clusters": outcome.enqueued, "detail_type": typed.detail_type})
    metrics.add_metric(name=names.METRIC_RECOMPUTES_REQUESTED, unit=MetricUnit.Count, value=len(outcome.enqueued))
    return {"enqueued": list(outcome.enqueued)}


def _malformed(event: Any, exc: Exception) -> dict[str, Any]:
    """Dropped, logged and counted (EventsDropped): a malformed event is never a failed invocation (DLQ)."""
    reason = str(exc).encode("utf-8", "backslashreplace").decode("utf-8")
    logger.warning("dropped malformed event", extra={"reason": reason, "detail_type": _dt(event)})
    metrics.add_metric(name=names.METRIC_EVENTS_DROPPED, unit=MetricUnit.Count, value=1)
    return {"enqueued": [], "dropped": "Malformed"}


def _dt(event: Any) -> Any:
    return event.get("detail-type") if isinstance(event, dict) else None
