"""The pipeline's timings: one source for the CDK stack (``infra/``), the Lambda code, the devkit's event source
mapping (``devkit/sqs.py``) and the tests, so that what is tested is what is deployed (stdlib only).

The recompute queue is SQS FIFO, one message group per cluster: a record that is not deleted blocks every later
message of its cluster until it is visible again. So a failed record is never left to the queue's visibility
timeout: the recompute sets its visibility to :func:`retry_delay` of its receive count (2, 4, 8, 16, then 20 s),
and the redrive policy moves it to the DLQ only after :data:`DLQ_AFTER_SECONDS` of failing
(:func:`seconds_to_dlq`). The queue's own visibility timeout only matters when the function dies without
answering (a Lambda timeout, an out-of-memory kill): the batch is visible again
:data:`TIMEOUT_RETURN_SECONDS` after the function's timeout.
"""

from __future__ import annotations

COALESCE_SECONDS = 10
"""The coalescing window: the router's deduplication id is cluster + window, and the queue holds every message this
long (its delivery delay), so a window's one recompute sees every change made in it."""

RECOMPUTE_TIMEOUT_SECONDS = 300
"""The recompute function's timeout."""
RECOMPUTE_MEMORY_MB = 1024
RECOMPUTE_BATCH_SIZE = 10
"""The event source mapping's batch size (and SQS ReceiveMessage's maximum)."""
RECOMPUTE_MAX_CONCURRENCY = 5
"""The event source mapping's maximum concurrency (2..1000): the poller never invokes more recomputes at once, so
none is throttled (a throttled batch's receives count toward the redrive policy, reserved concurrency's do)."""
RECOMPUTE_BUDGET_SECONDS = 60.0
"""A cluster's recompute is started only with this much of the function's time left; otherwise its record is
handed back to be retried at once by the next invocation (never a Lambda timeout losing the batch)."""

TIMEOUT_RETURN_SECONDS = 10
"""How long after a Lambda timeout the batch it held is visible again."""
QUEUE_VISIBILITY_TIMEOUT_SECONDS = RECOMPUTE_TIMEOUT_SECONDS + TIMEOUT_RETURN_SECONDS
"""The queue's visibility timeout: at least the function's timeout (Lambda requires it), not more than needed."""
QUEUE_DELIVERY_DELAY_SECONDS = COALESCE_SECONDS
QUEUE_RETENTION_DAYS = 4
DLQ_RETENTION_DAYS = 14

RETRY_FIRST_SECONDS = 2
RETRY_MAX_SECONDS = 20
"""Backoff of a failed record: doubled from the first delay on every receive, capped here. The cap bounds how long a
cluster waits after a fault ends: at most this, plus one recompute."""
DLQ_AFTER_SECONDS = 15 * 60
"""A cluster's record reaches the DLQ only after failing for at least this long."""


def retry_delay(receive_count: int) -> int:
    """Seconds a record that failed on its ``receive_count``-th receive stays invisible (its message group with it)."""
    count = max(1, int(receive_count))
    return min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS << min(count - 1, 16))


def seconds_to_dlq(max_receive_count: int) -> int:
    """How long a record that fails on every receive waits in backoff before the redrive policy moves it to the DLQ
    (SQS moves it on the receive after its ``max_receive_count``-th): the sum of its backoffs."""
    return sum(retry_delay(n) for n in range(1, max_receive_count + 1))


def min_receive_count(seconds: int = DLQ_AFTER_SECONDS) -> int:
    """The smallest ``maxReceiveCount`` whose backoffs add up to at least ``seconds``."""
    count = 1
    while seconds_to_dlq(count) < seconds:
        count += 1
    return count


DEFAULT_MAX_RECEIVE_COUNT = min_receive_count()
"""The redrive policy's default ``maxReceiveCount`` (the CDK config's ``dlq_max_receive_count``)."""
