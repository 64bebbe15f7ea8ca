"""Small AWS adapters: the recompute queue (SQS FIFO) and idleshare's event bus (EventBridge)."""

from __future__ import annotations

import hashlib
import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from idleshare import names, timings
from idleshare.adapters.errors import put_events_entry_error, translate_aws
from idleshare.adapters.sqs_records import RecomputeMessage
from idleshare.errors import IdleshareError, PermanentError, RetryableError


def translate(exc: Exception, operation: str) -> Exception:
    """botocore errors -> idleshare errors (:func:`~idleshare.adapters.errors.translate_aws`, the one
    classification of AWS errors); anything else unchanged."""
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(exc, ClientError | BotoCoreError):
        return translate_aws(exc, operation=operation)
    return exc


class SqsRecomputeQueue:
    """One message per cluster per short window: MessageGroupId = cluster, dedup id = cluster + window.

    Each change sends two messages (one SendMessageBatch): a *leading* one, recomputed at once, and a *trailing*
    one carrying ``notBefore``, the end of its window (epoch seconds), recomputed once the window has closed. SQS
    drops every later message of the window as a duplicate of these two, so a window costs at most two recomputes
    (never two at once: one message group per cluster), an isolated change is in Kueue within a recompute, and a
    change later in the window is still seen by the trailing one (the recompute hands a trailing message back
    until its ``notBefore``).

    An explicit recalculation request (``request_id``) gets a dedup id of its own (cluster + a hash of
    the request id: at most 128 characters, whatever the id holds), so it is never deduplicated away by
    an event-triggered message of the same window; its body carries ``"receipt": true`` and the
    request id, and the recompute writes a receipt for it."""

    def __init__(
        self,
        client: Any,
        queue_url: str,
        clock: Callable[[], float] = time.time,
        window_seconds: int = timings.COALESCE_SECONDS,
    ) -> None:
        self.client = client
        self.queue_url = queue_url
        self.clock = clock
        self.window_seconds = window_seconds

    def enqueue(self, cluster_id: str, reason: str, *, request_id: str | None = None) -> str:
        if request_id:
            message = RecomputeMessage(cluster_id, reason, request_id=request_id, receipt=True)
            dedup_id = f"{cluster_id}-req-{hashlib.sha256(request_id.encode()).hexdigest()[:40]}"
            try:
                self.client.send_message(
                    QueueUrl=self.queue_url,
                    MessageBody=message.to_body(),
                    MessageGroupId=cluster_id,
                    MessageDeduplicationId=dedup_id,
                )
            except Exception as exc:
                raise translate(exc, "sqs:SendMessage") from exc
            return request_id
        request_id = str(uuid.uuid4())
        window = int(self.clock() // self.window_seconds)
        # leading edge: the window's first change is recomputed at once; trailing edge: one more recompute once
        # the window has closed (notBefore), which sees every change made in it (timings.COALESCE_SECONDS)
        leading = RecomputeMessage(cluster_id, reason, request_id=request_id)
        trailing = RecomputeMessage(
            cluster_id, reason, request_id=request_id, not_before=(window + 1) * self.window_seconds
        )
        entries = [
            {
                "Id": edge,
                "MessageBody": m.to_body(),
                "MessageGroupId": cluster_id,
                "MessageDeduplicationId": dedup_id,
            }
            for edge, m, dedup_id in (
                ("leading", leading, f"{cluster_id}-{window}-lead"),
                ("trailing", trailing, f"{cluster_id}-{window}"),
            )
        ]
        try:
            answer = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
        except Exception as exc:
            raise translate(exc, "sqs:SendMessage") from exc
        failed = answer.get("Failed") or []
        if failed:
            reasons = ", ".join(f"{f.get('Id')}: {f.get('Code')} {f.get('Message', '')}".strip() for f in failed)
            if any(f.get("SenderFault") for f in failed):
                raise PermanentError(f"sqs:SendMessageBatch refused {reasons}", operation="sqs:SendMessage")
            raise RetryableError(f"sqs:SendMessageBatch failed {reasons}", operation="sqs:SendMessage")
        return request_id


T = TypeVar("T")

PUT_EVENTS_BATCH = 10  # entries per PutEvents call (the API's limit)
MAX_ENTRY_BYTES = 262_144
"""EventBridge's limit on one PutEvents entry, and on the entries of one call together (256 KB)."""
TIME_BYTES = 14  # what an entry's ``Time`` counts, when set
PUT_EVENTS = "events:PutEvents"


def entry_size(entry: Mapping[str, Any]) -> int:
    """The size of a PutEvents entry as EventBridge counts it (eb-putevent-size.html): the UTF-8 bytes of
    ``Source``, ``DetailType``, ``Detail`` and each of ``Resources``, plus 14 when ``Time`` is set (the bus name
    does not count)."""
    size = TIME_BYTES if entry.get("Time") is not None else 0
    for key in ("Source", "DetailType", "Detail"):
        value = entry.get(key)
        if value:
            size += len(str(value).encode("utf-8"))
    for resource in entry.get("Resources") or ():
        size += len(str(resource).encode("utf-8"))
    return size


def _oversized(entry: Mapping[str, Any], size: int) -> PermanentError:
    return PermanentError(
        f"{PUT_EVENTS}: the {entry.get('DetailType')!r} entry is {size:,} bytes, over EventBridge's "
        f"{MAX_ENTRY_BYTES:,}-byte entry limit: not sent",
        operation=PUT_EVENTS,
    )


class EventBridgePublisher:
    """idleshare's events on its bus. An entry over :data:`MAX_ENTRY_BYTES` is refused before any call
    (:class:`PermanentError` naming its detail-type and size); an entry PutEvents reports as failed is
    classified by its ``ErrorCode`` (:func:`~idleshare.adapters.errors.put_events_entry_error`): throttled or
    internal -> :class:`RetryableError`, anything else -> :class:`PermanentError`."""

    def __init__(
        self,
        client: Any,
        bus_name: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.client = client
        self.bus_name = bus_name
        self._sleep = sleep
        self._jitter = jitter

    def _entry(self, detail_type: str, detail: dict[str, Any], resources: Iterable[str] = ()) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "Source": names.EVENT_SOURCE,
            "DetailType": detail_type,
            "Detail": json.dumps(detail, default=str),
            "EventBusName": self.bus_name,
        }
        resources = list(resources)
        if resources:
            entry["Resources"] = resources
        return entry

    def _put(self, entries: list[dict[str, Any]]) -> dict[str, Any]:
        try:
            response: dict[str, Any] = self.client.put_events(Entries=entries)
        except Exception as exc:
            raise translate(exc, PUT_EVENTS) from exc
        return response

    def publish(self, detail_type: str, detail: dict[str, Any], resources: Iterable[str] = ()) -> None:
        entry = self._entry(detail_type, detail, resources)
        size = entry_size(entry)
        if size > MAX_ENTRY_BYTES:
            raise _oversized(entry, size)
        response = self._put([entry])
        if response.get("FailedEntryCount"):
            failed = (response.get("Entries") or [{}])[0]
            raise put_events_entry_error(failed.get("ErrorCode"), failed.get("ErrorMessage"), detail_type=detail_type)

    def publish_batch(self, events: Iterable[tuple[str, dict[str, Any]]], *, attempts: int = 3) -> int:
        """Every ``(detail_type, detail)`` on the bus, in as few PutEvents calls as fit (at most
        ``PUT_EVENTS_BATCH`` entries and :data:`MAX_ENTRY_BYTES` per call). Returns the number of calls made.

        The entries a call reports as failed with a retryable code are sent again (after a short jittered
        pause), up to ``attempts`` calls in all; still failing, :class:`RetryableError` at once (nothing later
        is sent: the caller publishes everything again, duplicates are harmless). Entries that cannot succeed
        (over the size limit, never sent; or failed with a permanent code) do not stop the others: once every
        other entry is on the bus, :class:`PermanentError` names the first of them and how many there were."""
        sized, refused = self._sized_entries(events)
        calls = 0
        for batch in put_events_calls(sized):
            calls += self._put_with_retries(batch, attempts, refused)
        if refused:
            more = f" (and {len(refused) - 1} more entries refused)" if len(refused) > 1 else ""
            raise PermanentError(f"{refused[0]}{more}", operation=PUT_EVENTS)
        return calls

    def _sized_entries(
        self, events: Iterable[tuple[str, dict[str, Any]]]
    ) -> tuple[list[tuple[dict[str, Any], int]], list[IdleshareError]]:
        """``(entries with their sizes, errors)``: each event as a PutEvents entry, or, over the size limit, the
        error that refuses it (never sent)."""
        refused: list[IdleshareError] = []
        sized: list[tuple[dict[str, Any], int]] = []
        for detail_type, detail in events:
            entry = self._entry(detail_type, detail)
            size = entry_size(entry)
            if size > MAX_ENTRY_BYTES:
                refused.append(_oversized(entry, size))
            else:
                sized.append((entry, size))
        return sized, refused

    def _put_with_retries(self, batch: list[dict[str, Any]], attempts: int, refused: list[IdleshareError]) -> int:
        """One PutEvents call of ``batch``, and of its entries failed with a retryable code again after a jittered
        pause, up to ``attempts`` calls; returns the calls made. Entries failed with a permanent code are added to
        ``refused``; retryable ones still failing after the last call: :class:`RetryableError`."""
        for attempt in range(1, attempts + 1):
            retry, first_retryable = _failed_entries(batch, self._put(batch), refused)
            if not retry:
                return attempt
            if attempt == attempts:
                raise RetryableError(
                    f"{PUT_EVENTS}: {len(retry)} of {len(batch)} entries still failing after {attempts} "
                    f"calls; {first_retryable}",
                    operation=PUT_EVENTS,
                )
            self._sleep(self._jitter() * min(1.0, 0.1 * 2 ** (attempt - 1)))
            batch = retry
        return 0  # attempts < 1: nothing sent


def _failed_entries(
    batch: list[dict[str, Any]], response: Mapping[str, Any], refused: list[IdleshareError]
) -> tuple[list[dict[str, Any]], IdleshareError | None]:
    """Of the entries of one PutEvents call, those its ``response`` reports failed with a retryable code (to send
    again), with the first such error; those failed with a permanent code are added to ``refused``."""
    retry: list[dict[str, Any]] = []
    first_retryable: IdleshareError | None = None
    if not response.get("FailedEntryCount"):
        return retry, first_retryable
    for entry, result in zip(batch, response.get("Entries") or [], strict=False):
        if not result.get("ErrorCode"):
            continue
        error = put_events_entry_error(
            result.get("ErrorCode"), result.get("ErrorMessage"), detail_type=entry["DetailType"]
        )
        if isinstance(error, RetryableError):
            retry.append(entry)
            first_retryable = first_retryable or error
        else:
            refused.append(error)
    return retry, first_retryable


def put_events_calls(sized: Iterable[tuple[T, int]]) -> Iterator[list[T]]:
    """The entries (each with its :func:`entry_size`) in order, cut into PutEvents calls of at most
    ``PUT_EVENTS_BATCH`` entries and :data:`MAX_ENTRY_BYTES` together (each entry is within the limit on its own).
    The publisher's cut, and `idleshare replay --bus`'s."""
    batch: list[T] = []
    total = 0
    for entry, size in sized:
        if batch and (len(batch) == PUT_EVENTS_BATCH or total + size > MAX_ENTRY_BYTES):
            yield batch
            batch, total = [], 0
        batch.append(entry)
        total += size
    if batch:
        yield batch
