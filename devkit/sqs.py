"""The SQS event source mapping, in process: what Lambda's poller does between a queue and a function.

:func:`drain` receives up to 10 messages, hands them to the handler as one SQS event (records shaped as
Lambda builds them: :func:`sqs_event`), deletes the ones the answer's ``batchItemFailures`` does not name,
and repeats until the queue is empty (or ``max_batches``). A handler that raises (Powertools'
``BatchProcessingError`` when every record failed) fails the whole batch, as a failed invocation does.
Used by the devkit's embedded services and by every test that drives the recompute handler from a queue."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from idleshare import timings


@dataclass(frozen=True)
class Deployed:
    """The recompute queue, its event source mapping and the function as the CDK stack deploys them (every value
    from :mod:`idleshare.timings`, which ``infra/`` reads too; ``tests/infra`` holds them against the template)."""

    visibility_timeout: int = timings.QUEUE_VISIBILITY_TIMEOUT_SECONDS
    delivery_delay: int = timings.QUEUE_DELIVERY_DELAY_SECONDS
    max_receive_count: int = timings.DEFAULT_MAX_RECEIVE_COUNT
    batch_size: int = timings.RECOMPUTE_BATCH_SIZE
    max_concurrency: int = timings.RECOMPUTE_MAX_CONCURRENCY
    function_timeout: int = timings.RECOMPUTE_TIMEOUT_SECONDS
    report_batch_item_failures: bool = True


DEPLOYED = Deployed()
BATCH_SIZE = DEPLOYED.batch_size
"""The recompute's event source mapping's batch size (and SQS ReceiveMessage's maximum)."""

Handler = Callable[[dict[str, Any], Any], Any]


def sqs_record(message: Mapping[str, Any], arn: str) -> dict[str, Any]:
    """One received message as a record of Lambda's SQS event."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes") or {}),
        "messageAttributes": dict(message.get("MessageAttributes") or {}),
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": arn.split(":")[3],
    }


def sqs_event(messages: Sequence[Mapping[str, Any]], arn: str) -> dict[str, Any]:
    """The event Lambda's SQS event source hands the function for ``messages`` (from the queue ``arn``)."""
    return {"Records": [sqs_record(m, arn) for m in messages]}


@dataclass
class Drained:
    """What :func:`drain` delivered: every batch's answer, the records handed over, the dropped messages."""

    answers: list[dict[str, Any]] = field(default_factory=list)
    delivered: int = 0
    dropped: list[str] = field(default_factory=list)
    """Ids of the messages given up after ``max_receives`` (SQS's redrive policy moves them to the DLQ)."""

    @property
    def failures(self) -> list[dict[str, Any]]:
        """Every batch's ``batchItemFailures``, in order."""
        return [f for answer in self.answers for f in answer.get("batchItemFailures") or []]

    @property
    def response(self) -> dict[str, Any]:
        """One answer for everything delivered: ``batchItemFailures`` (all batches') and ``records``."""
        return {"batchItemFailures": self.failures, "records": self.delivered}


def drain(
    sqs: Any,
    queue_url: str,
    handler: Handler,
    context: Any,
    *,
    messages: Sequence[Mapping[str, Any]] | None = None,
    max_batches: int | None = None,
    max_receives: int | None = None,
    on_drop: Callable[[Mapping[str, Any], str], None] | None = None,
    on_answer: Callable[[dict[str, Any]], None] | None = None,
) -> Drained:
    """Deliver the queue's messages to ``handler`` batch by batch, as the SQS event source does, until the
    queue is empty or ``max_batches`` batches went. ``messages``: already received ones, delivered as the
    first batch. A failed message stays queued (delivered again when its visibility timeout ends); with
    ``max_receives`` it is deleted after that many deliveries and ``on_drop(message, error)`` is told
    (``error``: the first line of the handler's exception when the whole batch failed, else "").
    ``on_answer`` sees each batch's answer."""
    from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

    # the event source mapping reads the queue's ARN (sqs:GetQueueAttributes, a grant of the function's role)
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    out = Drained()
    receives: dict[str, int] = {}
    pending = list(messages) if messages is not None else None
    while max_batches is None or len(out.answers) < max_batches:
        if pending is not None:
            batch, pending = pending, None
        else:
            batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=BATCH_SIZE, AttributeNames=["All"]).get(
                "Messages", []
            )
        if not batch:
            break
        error = ""
        try:
            answer = handler(sqs_event(batch, arn), context)
        except BatchProcessingError as exc:  # every record failed: the invocation fails, all come again
            answer = {"batchItemFailures": [{"itemIdentifier": m["MessageId"]} for m in batch]}
            error = (str(exc).strip().splitlines() or [""])[0]
        out.answers.append(answer)
        out.delivered += len(batch)
        if on_answer is not None:
            on_answer(answer)
        failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures") or []}
        for m in batch:
            receives[m["MessageId"]] = receives.get(m["MessageId"], 0) + 1
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
            elif max_receives is not None and receives[m["MessageId"]] >= max_receives:
                out.dropped.append(m["MessageId"])
                if on_drop is not None:
                    on_drop(m, error)
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
    return out
