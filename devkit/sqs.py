"""The SQS event source mapping, in process: what Lambda's poller does between the recompute queue and its function.

The queue is created as the CDK stack creates it (:func:`create_queue`: FIFO, the visibility timeout, delivery delay
and redrive policy of :data:`DEPLOYED`, all from :mod:`idleshare.timings`) in moto, and moto's SQS runs on the test's
clock (:func:`sqs_time`): a delayed message, a record the recompute handed back with a backoff, a batch a Lambda
timeout lost, each comes back when the clock says so, and it blocks its message group (its cluster) meanwhile, as
SQS FIFO does. :class:`EventSourceMapping` polls like Lambda's poller: up to 10 messages, one invocation with a
context whose remaining time runs on the clock (a deadline at the function's timeout), the work's own wall time
added to the clock; the records the answer's ``batchItemFailures`` does not name are deleted; an invocation that
raised, or that ran past its deadline (a Lambda timeout), deletes nothing: the whole batch returns after the
queue's visibility timeout.

:func:`drain` is the older, clock-less loop (receive, invoke, delete what succeeded, until empty): for the callers
that drive a queue by hand."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devkit.lambda_context import LambdaContext
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


@dataclass(frozen=True)
class Queues:
    url: str
    arn: str
    dlq_url: str
    dlq_arn: str


def create_queue(sqs: Any, name: str = "idleshare-recompute.fifo", settings: Deployed = DEPLOYED) -> Queues:
    """The recompute FIFO queue and its DLQ as the stack makes them (no content-based deduplication; the
    deployed visibility timeout, delivery delay and redrive policy). ``sqs``: a boto3 SQS client (moto)."""
    import json

    dlq_name = name.removesuffix(".fifo") + "-dlq.fifo"
    dlq_url = sqs.create_queue(QueueName=dlq_name, Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    attributes = {
        "FifoQueue": "true",
        "ContentBasedDeduplication": "false",
        "VisibilityTimeout": str(settings.visibility_timeout),
        "DelaySeconds": str(settings.delivery_delay),
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": settings.max_receive_count}),
    }
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return Queues(url, arn, dlq_url, dlq_arn)


DEDUPLICATION_SECONDS = 300
"""SQS FIFO's deduplication interval."""


class Deduplicating:
    """An SQS client as AWS documents FIFO deduplication, on ``clock``: a message whose ``MessageDeduplicationId``
    was sent in the last 5 minutes is accepted and never delivered, whether or not the first was already deleted
    (moto forgets an id once its message is deleted). Everything else goes to ``client`` (moto) unchanged."""

    def __init__(self, client: Any, clock: Callable[[], float]) -> None:
        self.client, self.clock = client, clock
        self.sent: dict[tuple[str, str], float] = {}

    def _fresh(self, queue_url: str, dedup_id: str | None) -> bool:
        if not dedup_id:
            return True
        now, key = self.clock(), (queue_url, dedup_id)
        if key in self.sent and now - self.sent[key] < DEDUPLICATION_SECONDS:
            return False
        self.sent[key] = now
        return True

    def send_message(self, **kwargs: Any) -> dict[str, Any]:
        if not self._fresh(kwargs["QueueUrl"], kwargs.get("MessageDeduplicationId")):
            return {"MessageId": f"deduplicated-{kwargs['MessageDeduplicationId']}"}
        return dict(self.client.send_message(**kwargs))

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        fresh = [e for e in Entries if self._fresh(QueueUrl, e.get("MessageDeduplicationId"))]
        answer: dict[str, Any] = {"Successful": [], "Failed": []}
        if fresh:
            answer = dict(self.client.send_message_batch(QueueUrl=QueueUrl, Entries=fresh))
        dropped = [{"Id": e["Id"], "MessageId": f"deduplicated-{e['Id']}"} for e in Entries if e not in fresh]
        answer["Successful"] = list(answer.get("Successful") or []) + dropped
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


class Clock:
    """Epoch seconds that move only when told to (``advance``); callable, as the adapters' clocks are. Wraps a
    one-element list when given one (the harnesses' ``clock[0]``), so both see the same time."""

    def __init__(self, start: float | list[float] = 1_000_000.0) -> None:
        self.cell = start if isinstance(start, list) else [float(start)]

    def __call__(self) -> float:
        return self.cell[0]

    def advance(self, seconds: float) -> None:
        self.cell[0] += max(0.0, seconds)


class WallClock(Clock):
    """The wall clock plus every wait skipped (``advance``): for runs whose work is timed for real (the benchmarks)
    while the queue's delays cost no waiting."""

    real = True

    def __init__(self) -> None:
        super().__init__(0.0)

    def __call__(self) -> float:
        return time.time() + self.cell[0]


@contextlib.contextmanager
def sqs_time(clock: Callable[[], float]) -> Iterator[None]:
    """moto's SQS on ``clock`` for the block: sending, delivery delays, visibility timeouts, receive timestamps and
    retention read this time instead of the wall clock (moto reads it through these two functions)."""
    import moto.sqs.models as models

    saved = models.unix_time, models.unix_time_millis

    def unix_time(dt: Any = None) -> float:
        return clock() if dt is None else saved[0](dt)

    def unix_time_millis(dt: Any = None) -> float:
        return clock() * 1000.0 if dt is None else saved[1](dt)

    models.unix_time, models.unix_time_millis = unix_time, unix_time_millis  # type: ignore[assignment]
    try:
        yield
    finally:
        models.unix_time, models.unix_time_millis = saved  # type: ignore[assignment]


class FunctionTimeout(BaseException):
    """Raised into a handler (by whatever the test makes slow) to end the invocation as Lambda's timeout does: a
    BaseException, so that nothing in the handler catches it and answers (Lambda stops the process)."""


class ClockedContext(LambdaContext):
    """A Lambda context whose remaining time runs on the clock, to a deadline at the function's timeout."""

    clock: Callable[[], float] = time.time
    deadline: float = 0.0

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - self.clock()) * 1000))


@dataclass
class Invocation:
    """One poll's invocation: the records handed over, the answer, how it ended (``ok``, ``error``, ``timeout``)."""

    started: float
    records: list[dict[str, Any]]
    answer: dict[str, Any] = field(default_factory=dict)
    ended: str = "ok"
    error: str = ""
    seconds: float = 0.0

    @property
    def failures(self) -> list[str]:
        """The records handed back (``batchItemFailures``); every record when the invocation did not answer."""
        if self.ended != "ok":
            return [r["messageId"] for r in self.records]
        return [f["itemIdentifier"] for f in self.answer.get("batchItemFailures") or []]

    @property
    def deferred(self) -> list[str]:
        """Handed back trailing records whose window had not closed when delivered: not failures (they come back
        when it has)."""
        early = {r["messageId"] for r in self.records if due(r) > self.started}
        return [m for m in self.failures if m in early] if self.ended == "ok" else []

    @property
    def failed(self) -> list[str]:
        """The records that really failed: handed back, and not merely deferred."""
        deferred = set(self.deferred)
        return [m for m in self.failures if m not in deferred]


def due(record: Mapping[str, Any]) -> float:
    """When a queued record's recompute is due: its body's ``notBefore`` (a trailing message), else at once (0)."""
    import json

    try:
        body = json.loads(record.get("body") or "")
        return float(body.get("notBefore") or 0) if isinstance(body, dict) else 0.0
    except (ValueError, TypeError):
        return 0.0


class EventSourceMapping:
    """Lambda's SQS poller for one function, on ``clock``: :meth:`poll` runs one batch, :meth:`run` polls until a
    condition holds, advancing the clock while nothing is visible. The work's own wall time is added to the clock
    (so what a recompute costs counts in a measured recovery); ``settings``: the deployed function's timeout and
    batch size."""

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        handler: Handler,
        clock: Clock,
        *,
        settings: Deployed = DEPLOYED,
        function_name: str = "idleshare-recompute",
    ) -> None:
        self.sqs, self.queue_url, self.handler, self.clock, self.settings = sqs, queue_url, handler, clock, settings
        self.function_name = function_name
        attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]
        self.arn = attrs["QueueArn"]
        self.invocations: list[Invocation] = []
        self.count = 0

    def poll(self) -> Invocation | None:
        """One ReceiveMessage at the clock's time and, if it returned anything, one invocation."""
        with sqs_time(self.clock):
            batch = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=self.settings.batch_size, AttributeNames=["All"]
            ).get("Messages", [])
        if not batch:
            return None
        self.count += 1
        context = ClockedContext(function_name=self.function_name, aws_request_id=f"invocation-{self.count}")
        context.clock, context.deadline = self.clock, self.clock() + self.settings.function_timeout
        invocation = Invocation(self.clock(), [sqs_record(m, self.arn) for m in batch])
        began = time.perf_counter()
        try:
            with sqs_time(self.clock):
                invocation.answer = self.handler({"Records": invocation.records}, context) or {}
        except FunctionTimeout:
            invocation.ended = "timeout"
        except Exception as exc:  # an invocation error: the poller deletes nothing, the batch comes back
            invocation.ended, invocation.error = "error", (str(exc).strip().splitlines() or [""])[0]
        invocation.seconds = time.perf_counter() - began
        if not getattr(self.clock, "real", False):  # a wall clock has counted the work already
            self.clock.advance(invocation.seconds)
        if invocation.ended == "ok" and self.clock() > context.deadline:
            invocation.ended = "timeout"  # it ran past its timeout: Lambda had ended it, its answer is lost
        if invocation.ended == "ok":
            failed = set(invocation.failures)
            with sqs_time(self.clock):
                for m in batch:
                    if m["MessageId"] not in failed:
                        self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])
        self.invocations.append(invocation)
        return invocation

    def run(
        self,
        until: Callable[[], bool] | None = None,
        *,
        max_seconds: float = 120.0,
        step: float = 1.0,
        max_invocations: int | None = None,
        on_tick: Callable[[float], None] | None = None,
    ) -> list[Invocation]:
        """Poll until ``until()`` holds after an invocation (None: until nothing is left to deliver), for at most
        ``max_seconds`` of clock or ``max_invocations``; while nothing is visible the clock moves ``step`` seconds.
        ``on_tick(now)`` is told before each poll (a test ends its fault there). Returns the invocations."""
        start, done = self.clock(), len(self.invocations)
        while self.clock() - start <= max_seconds:
            if on_tick is not None:
                on_tick(self.clock())
            invocation = self.poll()
            if invocation is not None:
                if until is not None and until():
                    break
                if max_invocations is not None and len(self.invocations) - done >= max_invocations:
                    break
                continue
            if until is None and self.depth() == 0:
                break
            self.clock.advance(step)
        return self.invocations[done:]

    def deliver(self, *, max_wait: float | None = None, step: float = 1.0) -> Invocation | None:
        """The next invocation: waits (on the clock) up to ``max_wait`` seconds (default: any delivery delay plus
        the longest backoff) for something visible, then runs one batch; None when nothing came."""
        wait = float(self.settings.delivery_delay + timings.RETRY_MAX_SECONDS) if max_wait is None else max_wait
        start = self.clock()
        while True:
            invocation = self.poll()
            if invocation is not None or self.clock() - start >= wait:
                return invocation
            self.clock.advance(step)

    def depth(self) -> int:
        """Messages in the queue: visible, in flight or delayed (what SQS's approximate counts add up to)."""
        with sqs_time(self.clock):
            attrs = self.sqs.get_queue_attributes(
                QueueUrl=self.queue_url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesDelayed",
                ],
            )["Attributes"]
        return sum(int(v) for v in attrs.values())


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
