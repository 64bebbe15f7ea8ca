"""Small AWS adapters: the recompute queue (SQS FIFO) and idleshare's event bus (EventBridge)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from idleshare import names
from idleshare.adapters.errors import PermanentError, RetryableError

_RETRYABLE = {
    "ThrottlingException",
    "Throttling",
    "RequestThrottled",
    "ServiceUnavailable",
    "InternalFailure",
    "InternalError",
    "InternalException",
    "RequestLimitExceeded",
}


def translate(exc: Exception, operation: str) -> Exception:
    """botocore errors -> RetryableError / PermanentError; anything else unchanged."""
    from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, ConnectTimeoutError, ReadTimeoutError

    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        cls = RetryableError if code in _RETRYABLE or (status or 0) >= 500 else PermanentError
        return cls(
            f"{operation}: {code}: {exc.response.get('Error', {}).get('Message', '')}",
            operation=operation,
            status=status,
        )
    if isinstance(exc, ConnectionError | ConnectTimeoutError | ReadTimeoutError):
        return RetryableError(f"{operation}: {exc}", operation=operation)
    if isinstance(exc, BotoCoreError):
        return PermanentError(f"{operation}: {exc}", operation=operation)
    return exc


class SqsRecomputeQueue:
    """One message per cluster per short window: MessageGroupId = cluster, dedup id = cluster + window."""

    def __init__(self, client: Any, queue_url: str, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.queue_url = queue_url
        self.clock = clock

    def enqueue(self, cluster_id: str, reason: str, dedup_window_seconds: int = 10) -> str:
        window = int(self.clock() // dedup_window_seconds)
        request_id = str(uuid.uuid4())
        try:
            self.client.send_message(
                QueueUrl=self.queue_url,
                MessageBody=json.dumps({"cluster": cluster_id, "reason": reason, "requestId": request_id}),
                MessageGroupId=cluster_id,
                MessageDeduplicationId=f"{cluster_id}-{window}",
            )
        except Exception as exc:
            raise translate(exc, "sqs:SendMessage") from exc
        return request_id


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
