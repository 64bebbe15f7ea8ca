"""The recompute queue's messages and records: the message codec (:class:`RecomputeMessage`, written by
``SqsRecomputeQueue``, read by the batch), the records as the event source mapping hands them over
(:class:`QueuedRecord`), and handing failed ones back with a backoff (``ChangeMessageVisibility``) instead of leaving
them to the queue's visibility timeout."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from idleshare.parse.errors import FieldError, InputError

CHANGE_VISIBILITY_BATCH = 10  # entries per ChangeMessageVisibilityBatch call (the API's limit)


@dataclass(frozen=True, slots=True)
class RecomputeMessage:
    """A recompute request on the queue: written by :class:`~idleshare.adapters.aws.SqsRecomputeQueue`,
    read by the recompute (``service/batch.py``). The body is JSON: ``cluster``, ``reason``, ``requestId``,
    then ``receipt: true`` for an explicit recalculation request (the recompute writes its receipt) or
    ``notBefore`` (epoch seconds, the end of the message's coalescing window) for a windowed one."""

    cluster: str
    reason: str = ""
    request_id: str = ""
    not_before: float | None = None
    receipt: bool = False

    SOURCE = "recompute message"

    @property
    def receipt_for(self) -> str | None:
        """The request id whose receipt the recompute writes (an explicit recalculation request), or None."""
        return self.request_id if self.receipt and self.request_id else None

    def to_body(self) -> str:
        body: dict[str, Any] = {"cluster": self.cluster, "reason": self.reason}
        if self.request_id:
            body["requestId"] = self.request_id
        if self.receipt:
            body["receipt"] = True
        if self.not_before is not None:
            body["notBefore"] = self.not_before
        return json.dumps(body)

    @classmethod
    def from_body(cls, text: object) -> RecomputeMessage:
        """The message in an SQS body; :class:`InputError` naming the field when the body is not one."""
        try:
            body = json.loads(text) if isinstance(text, str | bytes) else None
        except ValueError as exc:
            raise InputError(cls.SOURCE, [FieldError("", f"not JSON: {exc}")]) from None
        if not isinstance(body, dict):
            raise InputError(cls.SOURCE, [FieldError("", "expected a JSON object")])
        cluster = body.get("cluster")
        if not isinstance(cluster, str) or not cluster:
            raise InputError(cls.SOURCE, [FieldError("cluster", f"expected a cluster id, found {cluster!r}")])
        errors = [
            FieldError(key, f"expected a string, found {body[key]!r}")
            for key in ("reason", "requestId")
            if not isinstance(body.get(key, ""), str)
        ]
        not_before = body.get("notBefore")
        if not_before is not None and (isinstance(not_before, bool) or not isinstance(not_before, int | float)):
            errors.append(FieldError("notBefore", f"expected epoch seconds, found {not_before!r}"))
        if not isinstance(body.get("receipt", False), bool):
            errors.append(FieldError("receipt", f"expected true or false, found {body['receipt']!r}"))
        if errors:
            raise InputError(cls.SOURCE, errors)
        return cls(
            cluster=cluster,
            reason=body.get("reason", ""),
            request_id=body.get("requestId", ""),
            not_before=not_before,
            receipt=body.get("receipt", False),
        )


@dataclass(frozen=True, slots=True)
class QueuedRecord:
    """One record of the recompute queue as the event source mapping hands it over: what the batch needs to
    handle it (``body``) and to hand it back when it failed (its receipt handle, how often it was received)."""

    message_id: str
    body: object
    receipt_handle: str = ""
    receive_count: int = 1
    queue_arn: str = ""


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
