"""The recompute queue's records as the event source mapping hands them over, and handing failed ones back with
a backoff (``ChangeMessageVisibility``) instead of leaving them to the queue's visibility timeout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from idleshare.adapters.ports import QueuedRecord

CHANGE_VISIBILITY_BATCH = 10  # entries per ChangeMessageVisibilityBatch call (the API's limit)


def queued_records(event: Mapping[str, Any]) -> list[QueuedRecord]:
    """The SQS event's records (Lambda's shape); what is not a record is skipped (Powertools fails it)."""
    out: list[QueuedRecord] = []
    for record in event.get("Records") or []:
        if not isinstance(record, Mapping):
            continue
        raw = record.get("attributes")
        attributes: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        try:
            count = int(attributes.get("ApproximateReceiveCount", 1))
        except (TypeError, ValueError):
            count = 1
        out.append(
            QueuedRecord(
                message_id=str(record.get("messageId", "")),
                body=record.get("body"),
                receipt_handle=str(record.get("receiptHandle", "")),
                receive_count=max(1, count),
                queue_arn=str(record.get("eventSourceARN", "")),
            )
        )
    return out


def queue_url(queue_arn: str) -> str:
    """The queue URL of an SQS queue ARN (``arn:partition:sqs:region:account:name``); the client's own endpoint is
    where the request goes, the URL names the queue."""
    parts = queue_arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise ValueError(f"not an SQS queue ARN: {queue_arn!r}")
    _, partition, _, region, account, name = parts
    suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    return f"https://sqs.{region}.{suffix}/{account}/{name}"


class SqsRecordReturns:
    """:class:`~idleshare.adapters.ports.RecordReturns` over an SQS client (``ChangeMessageVisibilityBatch``), or a
    function that builds one (called when a record first fails)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if callable(self._client) and not hasattr(self._client, "change_message_visibility_batch"):
            self._client = self._client()
        return self._client

    def retry_later(self, queue_arn: str, entries: Sequence[tuple[str, int]]) -> int:
        changed = 0
        try:
            url = queue_url(queue_arn)
        except ValueError:
            return 0
        for start in range(0, len(entries), CHANGE_VISIBILITY_BATCH):
            chunk = entries[start : start + CHANGE_VISIBILITY_BATCH]
            try:
                answer = self.client.change_message_visibility_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": int(seconds)}
                        for i, (handle, seconds) in enumerate(chunk)
                    ],
                )
            except Exception:  # those records come back after the visibility timeout: late, not lost
                continue
            changed += len(answer.get("Successful") or [])
        return changed
