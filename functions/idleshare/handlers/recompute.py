"""Recompute Lambda: an SQS FIFO batch -> the recompute service (``service/batch.py``: one recompute per
cluster in the batch, the function's time kept), partial failures reported to SQS, failed records handed back
with their backoff."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response

from idleshare.adapters.sqs_records import queued_records
from idleshare.runtime.env import read
from idleshare.runtime.metrics import RecomputeReport
from idleshare.runtime.observability import logger, metrics, tracer
from idleshare.runtime.wiring import dependencies

# FIFO: a failed record fails the later records of its message group (its cluster) in the batch, not the others'.
processor = SqsFifoPartialProcessor(skip_group_on_error=True)
# A batch whose every record failed is answered like any other (each failed record named, each handed back with
# its backoff), not raised: a raised invocation leaves the whole batch to the queue's visibility timeout.
processor.raise_on_entire_batch_failure = False


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    # imported on the first invocation, not at import: the engine and its parsers stay out of the cold start's import
    # (tests/bench/test_bench_coldstart.py)
    from idleshare.service.batch import RecomputeBatch
    from idleshare.service.recompute import Recomputer

    deps, settings = dependencies(), read()
    assert deps.kube_for is not None, "the recompute needs access to the governed clusters"
    recomputer = Recomputer(
        deps.store, deps.kube_for, deps.publisher, tolerated_taint_keys=settings.tolerated_taint_keys
    )
    remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
    batch = RecomputeBatch(
        recomputer,
        queued_records(event),
        ledger=deps.ledgers.ledger(settings.idempotency_table_name, context),
        events=RecomputeReport(),
        clock=deps.clock,
        remaining_seconds=(lambda: remaining_ms() / 1000) if callable(remaining_ms) else None,
    )
    return batch.run(
        lambda handle: process_partial_response(
            event=event, record_handler=lambda record: handle(record.message_id), processor=processor, context=context
        ),
        deps.returns,
    )
