"""Recompute Lambda: an SQS FIFO batch -> the recompute service (``service/batch.py``: one recompute per
cluster in the batch), partial failures reported to SQS."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from idleshare.runtime.env import read
from idleshare.runtime.metrics import RecomputeReport
from idleshare.runtime.observability import logger, metrics, tracer
from idleshare.runtime.wiring import dependencies

processor = BatchProcessor(event_type=EventType.SQS)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    from idleshare.service.recompute import Recomputer

    deps, settings = dependencies(), read()
    recomputer = Recomputer(
        deps.store,
        deps.kube_for,
        deps.publisher,
        tolerated_taint_keys=settings.tolerated_taint_keys,
    )
    remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
    return recomputer.run_batch(
        [record.get("body") for record in event.get("Records") or [] if isinstance(record, dict)],
        lambda handle: process_partial_response(
            event=event, record_handler=lambda record: handle(record.body), processor=processor, context=context
        ),
        ledger=deps.ledgers.ledger(settings.idempotency_table_name, context),
        events=RecomputeReport(),
        clock=deps.clock,
        sleep=deps.sleep,
        remaining_seconds=(lambda: remaining_ms() / 1000) if callable(remaining_ms) else None,
    )
