"""One batch of recompute requests (an SQS FIFO batch): one recompute per cluster, partial failures reported.

- coalescing: the first message of a cluster recomputes it; its later messages in the batch are answered by
  that recompute (an explicit request among them gets its receipt); a cluster whose recompute failed
  permanently is not tried again in the batch;
- the not-before hold: a message that arrives before its coalescing window closed waits for the window's
  end (the latest ``notBefore`` of the cluster's messages in the batch), bounded;
- an explicit recalculation request recomputes once per (cluster, requestId), through the
  :class:`~idleshare.adapters.ports.RequestLedger` (a redelivery is answered by the first run);
- a :class:`PermanentError` is consumed (recorded by the recompute, reported): retrying cannot help; any
  other error, and an unreadable message, fails that record (SQS delivers it again, then the DLQ).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from idleshare import names
from idleshare.adapters.errors import PermanentError
from idleshare.adapters.idempotency import PassThroughLedger
from idleshare.adapters.ports import RecomputeMessage, RequestAnswer, RequestLedger
from idleshare.parse.errors import InputError

if TYPE_CHECKING:
    from idleshare.service.recompute import Outcome, Recomputer

RESERVED_SECONDS = 60.0
"""Time left to the function when a hold would end: the recompute itself needs it."""


class BatchEvents:
    """What a batch reports; this one reports nothing (``runtime/metrics.py`` logs and counts it)."""

    def held(self, seconds: float) -> None: ...
    def coalesced(self, cluster_id: str) -> None: ...
    def deduplicated(self, cluster_id: str, answer: RequestAnswer) -> None: ...
    def failed_permanently(self, cluster_id: str, error: PermanentError) -> None: ...
    def recomputed(self, outcome: Outcome) -> None: ...


def latest_not_before(bodies: Iterable[object]) -> dict[str, float]:
    """cluster -> the latest ``notBefore`` among the batch's messages for it (unreadable ones are skipped
    here; handling them fails their records)."""
    out: dict[str, float] = {}
    for body in bodies:
        try:
            message = RecomputeMessage.from_body(body)
        except InputError:
            continue
        if message.not_before is not None:
            out[message.cluster] = max(out.get(message.cluster, message.not_before), float(message.not_before))
    return out


class RecomputeBatch:
    """The state of one batch: ``handle`` takes each record's body in turn and raises when that record
    failed. ``clock`` (epoch seconds) is what ``notBefore`` is compared with, ``sleep`` how to wait and
    ``remaining_seconds`` the function's time left (None: unbounded)."""

    def __init__(
        self,
        recomputer: Recomputer,
        bodies: Iterable[object],
        *,
        ledger: RequestLedger | None = None,
        events: BatchEvents | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        remaining_seconds: Callable[[], float] | None = None,
    ) -> None:
        self.recomputer = recomputer
        self.ledger: RequestLedger = ledger if ledger is not None else PassThroughLedger()
        self.events = events if events is not None else BatchEvents()
        self.clock, self.sleep, self.remaining_seconds = clock, sleep, remaining_seconds
        self.not_before = latest_not_before(bodies)
        self.done: dict[str, Outcome] = {}  # cluster -> outcome: a burst in one batch recomputes once
        self.failed: set[str] = set()  # clusters whose recompute failed permanently in this batch

    def handle(self, body: object) -> None:
        message = RecomputeMessage.from_body(body)  # unreadable: this record fails
        cluster, request_id = message.cluster, message.receipt_for
        if cluster in self.failed:
            return
        if cluster in self.done:
            self.events.coalesced(cluster)
            if request_id:
                self.recomputer.acknowledge(request_id, self.done[cluster])
            return
        self.hold(self.not_before.get(cluster))
        try:
            outcome = self._recompute_once(cluster, request_id) if request_id else self.recomputer.recompute(cluster)
        except PermanentError as exc:
            # recorded by the recompute (the pool's read failure / apply status, the request's receipt);
            # retrying cannot help: the message is consumed, the alarm on the reported metric tells an operator
            self.events.failed_permanently(cluster, exc)
            self.failed.add(cluster)
            return
        if outcome is None:
            return
        self.done[cluster] = outcome
        self.events.recomputed(outcome)

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

    def hold(self, not_before: float | None) -> float:
        """Wait until the message's coalescing window has closed before reading the cluster; returns the
        seconds waited. SQS deduplicates every later message of the window, so reading earlier could miss a
        change made in it until the schedule. The queue's delivery delay makes this wait zero; it is bounded
        by the window and by the function's remaining time (less ``RESERVED_SECONDS``)."""
        if not_before is None:
            return 0.0
        wait = min(not_before - self.clock(), float(names.RECOMPUTE_COALESCE_SECONDS))
        if self.remaining_seconds is not None:
            wait = min(wait, self.remaining_seconds() - RESERVED_SECONDS)
        if wait <= 0:
            return 0.0
        self.events.held(wait)
        self.sleep(wait)
        return wait
