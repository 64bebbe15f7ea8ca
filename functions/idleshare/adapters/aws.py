"""Small AWS adapters: the recompute queue (SQS FIFO) and idleshare's event bus (EventBridge)."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from idleshare import names
from idleshare.adapters.errors import RetryableError, translate_aws
from idleshare.adapters.ports import RecomputeMessage


def translate(exc: Exception, operation: str) -> Exception:
    """botocore errors -> adapter errors (:func:`~idleshare.adapters.errors.translate_aws`, the one
    classification of AWS errors); anything else unchanged."""
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(exc, ClientError | BotoCoreError):
        return translate_aws(exc, operation=operation)
    return exc


class SqsRecomputeQueue:
    """One message per cluster per short window: MessageGroupId = cluster, dedup id = cluster + window.

    A windowed message carries ``notBefore``, the end of its window (epoch seconds): SQS drops every
    later message of the window as a duplicate, so the window's one recompute must read the cluster
    after the window has closed. The queue's delivery delay (= the window, infra/constructs/queue.py)
    makes that so; the recompute handler waits for ``notBefore`` when a message arrives early anyway.

    An explicit recalculation request (``request_id``) gets a dedup id of its own (cluster + a hash of
    the request id: at most 128 characters, whatever the id holds), so it is never deduplicated away by
    an event-triggered message of the same window; its body carries ``"receipt": true`` and the
    request id, and the recompute writes a receipt for it."""

    def __init__(self, client: Any, queue_url: str, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.queue_url = queue_url
        self.clock = clock

    def enqueue(
        self,
        cluster_id: str,
        reason: str,
        dedup_window_seconds: int = names.RECOMPUTE_COALESCE_SECONDS,
        *,
        request_id: str | None = None,
    ) -> str:
        if request_id:
            message = RecomputeMessage(cluster_id, reason, request_id=request_id, receipt=True)
            dedup_id = f"{cluster_id}-req-{hashlib.sha256(request_id.encode()).hexdigest()[:40]}"
        else:
            request_id = str(uuid.uuid4())
            window = int(self.clock() // dedup_window_seconds)
            dedup_id = f"{cluster_id}-{window}"
            # the window's end: its recompute must not read the cluster before (trailing edge, names.py)
            message = RecomputeMessage(
                cluster_id, reason, request_id=request_id, not_before=(window + 1) * dedup_window_seconds
            )
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


PUT_EVENTS_BATCH = 10  # entries per PutEvents call (the API's limit)


class EventBridgePublisher:
    def __init__(self, client: Any, bus_name: str) -> None:
        self.client = client
        self.bus_name = bus_name

    def publish(self, detail_type: str, detail: dict[str, Any], resources: Iterable[str] = ()) -> None:
        entry = {
            "Source": names.EVENT_SOURCE,
            "DetailType": detail_type,
            "Detail": json.dumps(detail, default=str),
            "EventBusName": self.bus_name,
            "Resources": list(resources),
        }
        try:
            response = self.client.put_events(Entries=[entry])
        except Exception as exc:
            raise translate(exc, "events:PutEvents") from exc
        if response.get("FailedEntryCount"):
            failed = response["Entries"][0]
            raise RetryableError(f"events:PutEvents: {failed.get('ErrorCode')}: {failed.get('ErrorMessage')}")

    def publish_batch(self, events: Iterable[tuple[str, dict[str, Any]]], *, attempts: int = 3) -> int:
        """Every ``(detail_type, detail)`` on the bus, ``PUT_EVENTS_BATCH`` per PutEvents call; the entries a
        call reports as failed (throttled, internal) are sent again, up to ``attempts`` calls in all, then
        :class:`RetryableError`. Returns the number of PutEvents calls made."""
        entries = [
            {
                "Source": names.EVENT_SOURCE,
                "DetailType": detail_type,
                "Detail": json.dumps(detail, default=str),
                "EventBusName": self.bus_name,
            }
            for detail_type, detail in events
        ]
        calls = 0
        for start in range(0, len(entries), PUT_EVENTS_BATCH):
            batch = entries[start : start + PUT_EVENTS_BATCH]
            for attempt in range(1, attempts + 1):
                calls += 1
                try:
                    response = self.client.put_events(Entries=batch)
                except Exception as exc:
                    raise translate(exc, "events:PutEvents") from exc
                if not response.get("FailedEntryCount"):
                    break
                results = response.get("Entries") or []
                failed = [entry for entry, result in zip(batch, results, strict=False) if result.get("ErrorCode")]
                if attempt == attempts or not failed:
                    first: dict[str, Any] = next((r for r in results if r.get("ErrorCode")), {})
                    raise RetryableError(
                        f"events:PutEvents: {response['FailedEntryCount']} of {len(batch)} entries failed: "
                        f"{first.get('ErrorCode')}: {first.get('ErrorMessage')}",
                        operation="events:PutEvents",
                    )
                batch = failed
        return calls
