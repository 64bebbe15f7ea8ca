"""Recompute Lambda: SQS FIFO batch -> one recompute per cluster in the batch, partial failures reported."""

from __future__ import annotations

import json
import time
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from idleshare import names
from idleshare.adapters.errors import PermanentError
from idleshare.runtime.env import read
from idleshare.runtime.observability import logger, metrics, tracer
from idleshare.runtime.wiring import dependencies

processor = BatchProcessor(event_type=EventType.SQS)
# The clock ``notBefore`` is compared with and how to wait (tests replace them).
clock = time.time
sleep = time.sleep
# Time left to the function when a wait would end: the recompute itself needs it.
RESERVED_SECONDS = 60.0


def _recomputer() -> Any:
    from lightkube.utils.quantity import parse_quantity

    from idleshare.service.recompute import Recomputer

    deps = dependencies()
    return Recomputer(
        deps.store,
        deps.kube_for,
        deps.publisher,
        tolerated_taint_keys=read().tolerated_taint_keys,
        quantity_parser=parse_quantity,
    )


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    recomputer = _recomputer()
    done: dict[str, Any] = {}  # cluster -> outcome: a burst in one batch recomputes once
    failed: set[str] = set()  # clusters whose recompute failed permanently in this batch
    not_before = latest_not_before(event)

    def record_handler(record: SQSRecord) -> None:
        message = json.loads(record.body)
        cluster = message["cluster"]
        # an explicit recalculation request carries its id and wants a receipt (adapters/aws.py)
        request_id = message.get("requestId") if message.get("receipt") is True else None
        if cluster in failed:
            return
        if cluster in done:
            metrics.add_metric(name="RecomputesCoalesced", unit=MetricUnit.Count, value=1)
            if request_id:
                recomputer.acknowledge(str(request_id), done[cluster])
            return
        hold_until_window_closed(not_before.get(cluster), context)
        try:
            if request_id:
                outcome = once_per_request(recomputer, cluster, str(request_id), context)
                if isinstance(outcome, dict):  # answered by its idempotency record: it ran before
                    logger.info("recalculation request already answered", extra={"cluster": cluster, **outcome})
                    metrics.add_metric(name="RecalculationsDeduplicated", unit=MetricUnit.Count, value=1)
                    return
            else:
                outcome = recomputer.recompute(cluster)
        except PermanentError as exc:
            # recorded by the recompute (the pool's read failure / apply status, the request's receipt);
            # retrying cannot help: the message is consumed, the alarm on this metric tells an operator
            logger.error("recompute failed permanently", extra={"cluster": cluster, "error": str(exc)})
            metrics.add_metric(name=names.METRIC_PERMANENT_FAILURES, unit=MetricUnit.Count, value=1)
            failed.add(cluster)
            return
        done[cluster] = outcome
        _emit(outcome)

    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)


_persistence: dict[str, Any] = {}  # table name -> Powertools persistence layer (its client reused warm)


def once_per_request(recomputer: Any, cluster: str, request_id: str, context: Any) -> Any:
    """An explicit recalculation request recomputes once per (cluster, requestId): Powertools idempotency
    records in the idempotency table (SPEC §5) answer a redelivery within the hour — EventBridge delivers at
    least once, SQS forgets its deduplication after 5 minutes — with the first run's result (a dict) instead
    of the Outcome of a new recompute. A recompute that raised leaves no record, so SQS's retry runs it
    again. Without the table (local runs) every delivery recomputes."""
    table = read().idempotency_table_name
    if not table:
        return recomputer.recompute(cluster, request_id=request_id)
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    if table not in _persistence:
        _persistence[table] = DynamoDBPersistenceLayer(table_name=table)
    config = IdempotencyConfig(
        event_key_jmespath="[cluster, requestId]",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=names.RECALC_IDEMPOTENCY_SECONDS,
        use_local_cache=False,  # a warm container must not answer from memory what the table no longer holds
    )
    if callable(getattr(context, "get_remaining_time_in_millis", None)):
        config.register_lambda_context(context)  # an in-progress record expires with this invocation
    ran: list[Any] = []

    @idempotent_function(data_keyword_argument="request", config=config, persistence_store=_persistence[table])  # type: ignore[untyped-decorator]
    def recalculate(request: dict[str, str]) -> dict[str, Any]:
        outcome = recomputer.recompute(request["cluster"], request_id=request["requestId"])
        ran.append(outcome)
        return {"requestId": request["requestId"], "generation": outcome.generation, "changed": outcome.changed}

    answer = recalculate(request={"cluster": cluster, "requestId": request_id})
    return ran[0] if ran else answer


def latest_not_before(event: Any) -> dict[str, float]:
    """cluster -> the latest ``notBefore`` among the batch's messages for it (unreadable ones are skipped
    here; the batch processor reports them)."""
    out: dict[str, float] = {}
    records = event.get("Records") if isinstance(event, dict) else None
    for record in records if isinstance(records, list) else []:
        try:
            message = json.loads(record["body"])
            cluster, value = message["cluster"], message.get("notBefore")
        except (TypeError, KeyError, ValueError):
            continue
        if isinstance(cluster, str) and isinstance(value, int | float) and not isinstance(value, bool):
            out[cluster] = max(out.get(cluster, value), float(value))
    return out


def hold_until_window_closed(not_before: float | None, context: Any) -> float:
    """Wait until the message's coalescing window has closed before reading the cluster; returns the
    seconds waited. SQS deduplicates every later message of the window, so reading earlier could miss a
    change made in it until the schedule. The queue's delivery delay makes this wait zero; it is bounded
    by the window and by the function's remaining time (less ``RESERVED_SECONDS``)."""
    if not_before is None:
        return 0.0
    wait = min(not_before - clock(), float(names.RECOMPUTE_COALESCE_SECONDS))
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if callable(remaining):
        wait = min(wait, remaining() / 1000 - RESERVED_SECONDS)
    if wait <= 0:
        return 0.0
    logger.warning("message arrived before its window closed: waiting", extra={"seconds": round(wait, 3)})
    metrics.add_metric(name="RecomputesHeld", unit=MetricUnit.Count, value=1)
    sleep(wait)
    return wait


def _emit(outcome: Any) -> None:
    result = outcome.result
    logger.info(
        "recomputed",
        extra={
            "cluster": outcome.cluster_id,
            "generation": outcome.generation,
            "changed": outcome.changed,
            "applied": outcome.applied,
            "deleted": outcome.deleted,
            "summary": result.summary() if result else "",
        },
    )
    metrics.add_metric(name="ObjectsApplied", unit=MetricUnit.Count, value=outcome.applied)
    metrics.add_metric(name=names.METRIC_RECOMPUTE_DURATION, unit=MetricUnit.Milliseconds, value=outcome.duration_ms)
    if result is None:
        return
    if outcome.conflicts:
        logger.warning("objects left to another field manager", extra={"conflicts": outcome.conflicts})
    from collections import Counter

    from aws_lambda_powertools.metrics import single_metric

    def gauge(name: str, value: float, **dims: str) -> None:
        # exactly the dimensions the dashboard's and alarms' SCHEMA() name (infra/constructs/observability.py):
        # Powertools adds `service` from POWERTOOLS_SERVICE_NAME when it is set, so it is always set here
        with single_metric(
            name=name,
            unit=MetricUnit.Count,
            value=value,
            namespace=names.METRICS_NAMESPACE,
            default_dimensions={"service": names.SERVICE},
        ) as m:
            m.add_dimension(name=names.METRIC_DIM_CLUSTER, value=outcome.cluster_id)
            for k, v in dims.items():
                m.add_dimension(name=k, value=v)

    for flavor in result.flavors:
        for resource in result.resources:
            if resource not in ("nvidia.com/gpu", "aws.amazon.com/neurondevice") and not resource.startswith(
                "nvidia.com/mig-"
            ):
                continue
            if not result.capacity[flavor][resource] and not result.shortfall[flavor][resource]:
                continue
            gauge(
                names.METRIC_UNALLOCATED, float(result.unallocated[flavor][resource]), flavor=flavor, resource=resource
            )
            gauge(names.METRIC_SHORTFALL, float(result.shortfall[flavor][resource]), flavor=flavor, resource=resource)
            borrowable = sum(float(g.borrowing_limit[flavor][resource]) for g in result.teams.values())
            gauge(names.METRIC_BORROWABLE, borrowable, flavor=flavor, resource=resource)
    for reason, count in Counter(str(r) for r in result.excluded_nodes.values()).items():
        gauge(names.METRIC_EXCLUDED_NODES, float(count), reason=reason)
    # cluster + service exactly (the alarm's dimensions), whether or not POWERTOOLS_SERVICE_NAME is set
    with single_metric(
        name=names.METRIC_FOREIGN_FIELD_MANAGER,
        unit=MetricUnit.Count,
        value=float(len(outcome.conflicts)),
        namespace=names.METRICS_NAMESPACE,
        default_dimensions={"service": names.SERVICE},
    ) as m:
        m.add_dimension(name=names.METRIC_DIM_CLUSTER, value=outcome.cluster_id)
