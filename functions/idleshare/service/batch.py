"""One batch of recompute requests (an SQS FIFO batch): one recompute per cluster, partial failures reported.

- coalescing: the first message of a cluster recomputes it; its later messages in the batch are answered by
  that recompute (an explicit request among them gets its receipt); a cluster whose recompute failed
  permanently is not tried again in the batch, and an explicit request behind that failure gets it as its
  (Failed) receipt;
- leading and trailing edge: a message without ``notBefore`` (a window's leading one, an explicit request) is
  recomputed at once; a trailing one (``notBefore``: its window's end) is answered only by a recompute that read
  the cluster after its window closed, and one delivered earlier is handed back until then (its cluster waits,
  the function does not);
- an explicit recalculation request recomputes once per (cluster, requestId), through the
  :class:`~idleshare.adapters.ports.RequestLedger` (a redelivery is answered by the first run);
- a :class:`PermanentError` is consumed (recorded by the recompute, reported): retrying cannot help; any
  other error, and an unreadable message, fails that record, and every later record of its cluster in the batch
  (FIFO: they wait behind it);
- the function's time: a cluster's recompute starts only with ``timings.RECOMPUTE_BUDGET_SECONDS`` left, else its
  record is handed back to be retried at once (never a Lambda timeout that loses the whole batch's answer);
- a failed record is handed back with its backoff (:func:`idleshare.timings.retry_delay` of its receive count,
  ``ChangeMessageVisibility``): its cluster waits seconds, not the queue's visibility timeout, and the DLQ comes
  only after ``timings.DLQ_AFTER_SECONDS`` of failing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from idleshare import timings
from idleshare.adapters.idempotency import PassThroughLedger
from idleshare.adapters.ports import RecordReturns, RequestAnswer, RequestLedger
from idleshare.adapters.sqs_records import QueuedRecord, RecomputeMessage
from idleshare.errors import PermanentError, RetryableError
from idleshare.parse.errors import InputError

if TYPE_CHECKING:  # types only: the recompute handler's import (and runtime/metrics', which extends BatchEvents)
    # stays light; the engine loads on the first invocation (tests/bench/test_bench_coldstart.py)
    from idleshare.service.recompute import Outcome, Recomputer

R = TypeVar("R")


class BatchEvents:
    """What a batch reports; this one reports nothing (``runtime/metrics.py`` logs and counts it)."""

    def not_yet(self, cluster_id: str, seconds: int) -> None: ...
    def coalesced(self, cluster_id: str) -> None: ...
    def deduplicated(self, cluster_id: str, answer: RequestAnswer) -> None: ...
    def failed_permanently(self, cluster_id: str, error: PermanentError) -> None: ...
    def recomputed(self, outcome: Outcome) -> None: ...
    def out_of_time(self, cluster_id: str, remaining_seconds: float) -> None: ...
    def handed_back(self, delays: dict[str, int], changed: int) -> None: ...


class NotYet(RetryableError):
    """A trailing message delivered before its window closed: handed back until then (its cluster waits)."""


class OutOfTime(RetryableError):
    """Too little of the function's time is left to start this cluster's recompute: retried at once."""


def _cluster_of(body: object) -> str:
    """The cluster a record's body names ("" when unreadable)."""
    try:
        return RecomputeMessage.from_body(body).cluster
    except InputError:
        return ""


class RecomputeBatch:
    """The state of one batch: ``handle`` takes each record (its message id) in turn and raises when that record
    failed; ``hand_back`` then gives the failed ones their backoff. ``clock`` (epoch seconds) is what ``notBefore``
    is compared with and ``remaining_seconds`` the function's time left (None: unbounded)."""

    def __init__(
        self,
        recomputer: Recomputer,
        records: Iterable[QueuedRecord],
        *,
        ledger: RequestLedger | None = None,
        events: BatchEvents | None = None,
        clock: Callable[[], float] = time.time,
        remaining_seconds: Callable[[], float] | None = None,
    ) -> None:
        self.recomputer = recomputer
        self.ledger: RequestLedger = ledger if ledger is not None else PassThroughLedger()
        self.events = events if events is not None else BatchEvents()
        self.clock, self.remaining_seconds = clock, remaining_seconds
        self.records = {r.message_id: r for r in records}
        self.done: dict[str, Outcome] = {}  # cluster -> outcome: a burst in one batch recomputes once
        self.started: dict[str, float] = {}  # cluster -> when its recompute in this batch read the cluster
        self.failed: dict[str, PermanentError] = {}  # cluster -> why its recompute failed for good in this batch
        self.retry_now: set[str] = set()  # records handed back for want of time: retried at once
        self.not_yet: dict[str, int] = {}  # trailing records handed back until their window closes: seconds

    def run(self, deliver: Callable[[Callable[[str], None]], R], returns: RecordReturns | None) -> R:
        """The whole batch: ``deliver`` hands each record's message id to :meth:`handle` and reports a record whose
        handling raised as failed (the Powertools FIFO batch processor); the failed records are then handed back
        with their backoff through ``returns`` (:meth:`hand_back`). Returns ``deliver``'s answer."""
        answer = deliver(self.handle)
        self.hand_back(answer, returns)
        return answer

    def handle(self, message_id: str) -> None:
        record = self.records.get(message_id)
        message = RecomputeMessage.from_body(record.body if record else None)  # unreadable: this record fails
        cluster, request_id = message.cluster, message.receipt_for
        if cluster in self.failed:  # failed for good earlier in the batch: a request gets that failure as its answer
            if request_id:
                self._refuse_once(cluster, request_id, self.failed[cluster])
            return
        # a trailing message is answered only by a recompute that read the cluster after its window closed
        due = float(message.not_before) if message.not_before is not None else None
        if cluster in self.done and (due is None or self.started[cluster] >= due):
            self.events.coalesced(cluster)
            if request_id:
                self.recomputer.acknowledge(request_id, self.done[cluster])
            return
        if due is not None and due - self.clock() > 0:
            wait = min(math.ceil(due - self.clock()), timings.COALESCE_SECONDS)
            self.not_yet[message_id] = wait
            self.events.not_yet(cluster, wait)
            raise NotYet(f"{cluster}: its window closes in {wait} s", operation="recompute")
        if self.remaining_seconds is not None:
            left = self.remaining_seconds()
            if left < timings.RECOMPUTE_BUDGET_SECONDS:
                self.retry_now.add(message_id)
                self.events.out_of_time(cluster, left)
                raise OutOfTime(
                    f"{left:.0f} s of the function's time left, {timings.RECOMPUTE_BUDGET_SECONDS:.0f} s needed "
                    f"to recompute {cluster}: retried by the next invocation",
                    operation="recompute",
                )
        started = self.clock()
        try:
            outcome = self._recompute_once(cluster, request_id) if request_id else self.recomputer.recompute(cluster)
        except PermanentError as exc:
            # recorded by the recompute (the pool's read failure / apply status, the request's receipt);
            # retrying cannot help: the message is consumed, the alarm on the reported metric tells an operator
            self.events.failed_permanently(cluster, exc)
            self.failed[cluster] = exc
            return
        if outcome is None:
            return
        self.done[cluster], self.started[cluster] = outcome, started
        self.events.recomputed(outcome)

    def hand_back(self, answer: object, returns: RecordReturns | None) -> dict[str, int]:
        """Give every record the answer names as failed the time it stays invisible: a trailing message handed back
        early, until its window closes; one not tried for want of time, 0 s; any other,
        :func:`~idleshare.timings.retry_delay` of its receive count. The later records of a cluster in the batch
        (failed behind it: FIFO) come back with its first failed record. Returns message id -> seconds."""
        failures = answer.get("batchItemFailures") if isinstance(answer, dict) else None
        failed = {str(f.get("itemIdentifier", "")) for f in failures or [] if isinstance(f, dict)}
        delays: dict[str, int] = {}
        group: dict[str, int] = {}
        for record in self.records.values():  # batch order
            if record.message_id not in failed or not record.receipt_handle:
                continue
            if record.message_id in self.not_yet:
                own = self.not_yet[record.message_id]
            elif record.message_id in self.retry_now:
                own = 0
            else:
                own = timings.retry_delay(record.receive_count)
            cluster = _cluster_of(record.body)
            delays[record.message_id] = group.setdefault(cluster, own) if cluster else own
        if not delays or returns is None:
            return delays
        by_queue: dict[str, list[tuple[str, int]]] = {}
        for message_id, seconds in delays.items():
            record = self.records[message_id]
            by_queue.setdefault(record.queue_arn, []).append((record.receipt_handle, seconds))
        changed = sum(returns.retry_later(arn, entries) for arn, entries in by_queue.items())
        self.events.handed_back(delays, changed)
        return delays

    def _refuse_once(self, cluster: str, request_id: str, error: PermanentError) -> None:
        """Answer the request with the permanent failure of its cluster's recompute in this batch (its Failed
        receipt, as that recompute wrote its own request's), through the ledger: a request a previous delivery
        answered keeps that answer."""

        def run() -> RequestAnswer:
            self.recomputer.acknowledge_failed(cluster, request_id, error)
            raise error  # a failed run leaves no trace in the ledger, as the recompute's own does

        try:
            answer = self.ledger.once(cluster, request_id, run)
        except PermanentError:
            return
        self.events.deduplicated(cluster, answer)

    def _recompute_once(self, cluster: str, request_id: str) -> Outcome | None:
        """The request's recompute, or None when its ledger answered it (it ran before)."""
        ran: list[Outcome] = []

        def run() -> RequestAnswer:
            outcome = self.recomputer.recompute(cluster, request_id=request_id)
            ran.append(outcome)
            return RequestAnswer(request_id, outcome.generation, outcome.changed)

        answer = self.ledger.once(cluster, request_id, run)
        if ran:
            return ran[0]
        self.events.deduplicated(cluster, answer)
        return None
