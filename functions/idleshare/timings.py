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

from dataclasses import dataclass

COALESCE_SECONDS = 10
"""The coalescing window: each change sends a leading message (recomputed at once) and a trailing one (recomputed
once the window has closed), deduplicated per cluster and window, so a window costs at most two recomputes and its
last one sees every change made in it."""

RECOMPUTE_TIMEOUT_SECONDS = 300
"""The recompute function's timeout."""
RECOMPUTE_MEMORY_MB = 1536
"""The recompute function's memory. Measured (``make bench-scale``, docs/benchmarks.md): a warm recompute of 100,000
real-shaped nodes and 500 teams peaked at 921 MB (its node list kept: ``adapters/node_cache.py``), 340 MB at 20k:
1,024 MB left it 10% of headroom, 1,536 MB leaves 40% (and Lambda's CPU grows with it)."""
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
QUEUE_DELIVERY_DELAY_SECONDS = 0
"""No delivery delay: the leading edge is delivered at once; a trailing message delivered before its window closed
is handed back until then by the recompute."""
QUEUE_RETENTION_DAYS = 4
DLQ_RETENTION_DAYS = 14

HISTORY_TTL_DAYS = 90
"""How long a superseded generation's ``HISTORY#`` item is kept (its TTL): the CDK config's ``history_ttl_days``
default, the Lambdas' when ``IDLESHARE_HISTORY_TTL_DAYS`` is unset and the store's."""
HISTORY_TTL_MAX_DAYS = 3650
"""The longest history TTL the config and the Lambdas' environment accept (1..this many days)."""

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


# =====================================================================================================================
# The node watcher (``handlers/watcher.py``, ``infra/constructs/watcher.py``) and the alarms' windows.
# =====================================================================================================================

WATCHER_SCHEDULE_MINUTES = 1
"""One watcher invocation per cluster this often; each holds the watch until its deadline, then the next takes over."""
WATCHER_FUNCTION_TIMEOUT_SECONDS = 90
"""The watcher function's timeout: the watch is held until :data:`WATCHER_STOP_BEFORE_SECONDS` before it."""
WATCHER_STOP_BEFORE_SECONDS = 10
"""Left for the last publish and checkpoint."""
NODE_WATCH_MAX_SECONDS = WATCHER_FUNCTION_TIMEOUT_SECONDS - WATCHER_STOP_BEFORE_SECONDS
"""The longest a watcher invocation can hold the node watch (the function's timeout allows no more)."""
DEFAULT_NODE_WATCH_SECONDS = 10
"""How long each minute's watcher invocation holds the node watch (a cluster's ``node_watch_seconds``), then stores
its resourceVersion and returns; the next invocation resumes from it. Short: a node change is seen up to ~a minute
late, billed ~10 s a minute; up to :data:`NODE_WATCH_MAX_SECONDS`: seen at once, billed ~the whole minute."""
WATCHER_MEMORY_MB = 512
"""The node watcher function's memory. Measured (``make bench-scale``): its relist pass (every node's view, the saved
views, the checkpoint) peaked at 338 MB at 100,000 nodes and 277 MB at 20,000 before its relist kept views only: over
the 256 MB it had."""
WATCHER_WINDOW_SECONDS = 15
"""One watch request is held at most this long: the watcher checkpoints its resourceVersion at least this often."""
USAGE_FIRST_INTERVAL_SECONDS = WATCHER_SCHEDULE_MINUTES * 60
"""A cluster's first usage sample counts the preemptions of one watcher period before it."""
USAGE_MAX_INTERVAL_SECONDS = 3 * WATCHER_SCHEDULE_MINUTES * 60
"""An interval between two usage samples longer than this (three watcher periods: the watcher did not run) is a
gap ``NoSample``."""
WATCHER_ALARM_MINUTES = 5
"""The "watch not running" alarm: a cluster watched less than half of this many minutes (or not reported at all)."""
IDLE_WHILE_PENDING_ALARM_MINUTES = 15
"""The idle-while-pending alarm: accelerators idle in a flavor while a team's workload asking for it is pending,
this many minutes in a row."""
UNBOUND_PODS_ALARM_MINUTES = 10
"""The admitted-but-not-placed alarm: a workload Kueue admitted this long ago still has a pod no node has taken
(the pool overstates what pods can get: DaemonSets and other pods on the nodes, a node gone)."""

# =====================================================================================================================
# Explicit recalculation requests (``POST /clusters/{c}/recalculate``).
# =====================================================================================================================

API_GATEWAY_TIMEOUT_SECONDS = 29
"""The admin API answers within API Gateway's integration timeout (its function's own timeout is 30 s)."""
API_MAX_WAIT_SECONDS = 25
"""``waitSeconds`` at most this (0..25): a request waiting for its recompute still answers within API Gateway's."""
RECALC_RECEIPT_TTL_SECONDS = 24 * 3600
"""How long ``GET .../recalculations/{requestId}`` can find a receipt."""
RECALC_IDEMPOTENCY_SECONDS = 3600
"""How long a request's idempotency record answers a redelivery of the same ``requestId`` (EventBridge's
at-least-once delivery, SQS redeliveries): after that the same id recomputes again."""

# =====================================================================================================================
# AWS SDK clients: read by ``runtime/wiring.py`` (``client_config``).
#
# Every boto3 client a function builds has explicit connect / read timeouts and botocore's "standard" retry mode
# (throttling and transient errors retried with jittered exponential backoff), sized so that one call's worst case —
# every attempt waiting out its connect and read timeouts, plus the longest backoffs between them
# (:meth:`ClientTimings.worst_case_seconds`) — fails fast enough for the function to do something about it: answer
# within its own timeout (router, API, registrar), hand the record back and retry within the run (recompute), or
# still checkpoint before its timeout (watcher). botocore's defaults are 60 s connect, 60 s read, "legacy" retries.
# =====================================================================================================================

SDK_MAX_BACKOFF_SECONDS = 20
"""botocore's cap on one backoff of the standard retry mode (``botocore.retries.standard.ExponentialBackoff``)."""


@dataclass(frozen=True)
class ClientTimings:
    """One function kind's boto3 client settings: ``botocore.config.Config(connect_timeout, read_timeout,
    retries={"mode": "standard", "total_max_attempts": attempts})`` (attempts count the first call)."""

    connect_seconds: float
    read_seconds: float
    attempts: int

    def worst_case_seconds(self) -> float:
        """The longest one SDK call can take: every attempt times out connecting and reading, and every backoff is
        the longest the standard mode draws for a throttled call (``2 ** i`` seconds before attempt ``i + 2``,
        capped)."""
        backoffs = sum(min(2.0**i, SDK_MAX_BACKOFF_SECONDS) for i in range(self.attempts - 1))
        return self.attempts * (self.connect_seconds + self.read_seconds) + backoffs


ROUTER_FUNCTION_TIMEOUT_SECONDS = 30
REGISTRAR_FUNCTION_TIMEOUT_SECONDS = 30

ROUTER_CLIENT = ClientTimings(connect_seconds=1, read_seconds=3, attempts=3)
"""15 s worst case per call: the router's two calls (the cluster's registry item, SendMessage) fit its 30 s."""
API_CLIENT = ClientTimings(connect_seconds=1, read_seconds=3, attempts=2)
"""9 s worst case per call: a request answers within API Gateway's 29 s, and each poll of a recalculation's
receipt (``waitSeconds`` up to 25) fails fast."""
REGISTRAR_CLIENT = ClientTimings(connect_seconds=1, read_seconds=3, attempts=3)
"""15 s worst case per call: CloudFormation gets its answer within the function's 30 s."""
RECOMPUTE_CLIENT = ClientTimings(connect_seconds=3, read_seconds=10, attempts=3)
"""42 s worst case per call: within :data:`RECOMPUTE_BUDGET_SECONDS`, so a call that hangs fails while the run still
has time to hand the record back and retry it (the function's 300 s never run out on one call)."""
WATCHER_CLIENT = ClientTimings(connect_seconds=1, read_seconds=2, attempts=2)
"""7 s worst case per call: the last PutEvents and the checkpoint fit in the 10 s the watch leaves before the
function's timeout (:data:`WATCHER_STOP_BEFORE_SECONDS`)."""
DEFAULT_CLIENT = RECOMPUTE_CLIENT
"""Outside a deployed function (tests, the devkit, the local replay): the most patient of the above."""

WATCHER_CHECKPOINT_RESERVE_SECONDS = WATCHER_CLIENT.worst_case_seconds() + 1
"""The watcher stops waiting for its publishes this long before the function's timeout: what is left is the
checkpoint's (one DynamoDB call at worst, and a second to return). Events not on the bus by then are not
checkpointed past: the next invocation publishes them again from the last checkpoint."""


# =====================================================================================================================
# Kubernetes requests and writes: read by ``adapters/kube.py`` (``LightkubeCluster``) and
# ``service/apply.py``.
# =====================================================================================================================

KUBE_REQUEST_TIMEOUT_SECONDS = 10.0
"""Every Kubernetes API request's timeout (``LightkubeCluster``'s default)."""
KUBE_WRITE_CONCURRENCY = 8
"""How many server-side applies (and deletes) a recompute has in flight at once, within one dependency wave
(``service/apply.py``; ``LightkubeCluster(write_concurrency=...)`` overrides it). Measured on the real stack (one
kube-apiserver + Kueue, 2 CPUs shared with other work; 5k nodes, 200 teams, one node changed = 78 applies; two
rounds, ratio to ``kubectl get nodes -o json`` in the same run): 1 -> 1.45x / 1.02x, 4 -> 0.76x / 0.66x,
8 -> 0.57x / 0.56x, 16 -> 0.54x / 0.52x; the apiserver's CPU for the recompute fell from 10.7-10.9 s (1) to 5.0-5.5 s
(8) and 4.4-4.9 s (16): Kueue reconciles a burst of ClusterQueue changes once, not once per write. 8 takes nearly
all of the gain with half the requests in flight (times the event source mapping's concurrency across clusters);
an EKS control plane has several apiserver replicas behind its endpoint, where parallel writes pay off more."""

FIGHT_REWRITES = 3
"""Fights (``domain/fights.py``): the recompute of one desired state that finds an object idleshare created changed
again for this many times in a row names it (issue ``FieldManagerFight``, the other field manager from
``managedFields``) and stops writing it back every run."""
FIGHT_RETRY_SECONDS = 30 * 60
"""While a fight stands, idleshare writes the object again once this long after its last write of it (to see
whether the other controller is gone: a write that sticks ends the fight), or at once when its desired state
changes."""
NODE_CACHE_MAX_AGE_SECONDS = 300
"""A warm recompute keeps its last node list and brings it up to date by a watch (``adapters/node_cache.py``); it
lists every node again at least this often, whatever the watch said."""
NODE_CATCH_UP_IDLE_SECONDS = 0.5
"""The catch-up watch ends when the server has sent nothing for this long: it sends the backlog since the kept
version at once, from its watch cache. A change that arrives later is the next recompute's (every change has one)."""
NODE_CATCH_UP_SECONDS = 10
"""The catch-up watch's ``timeoutSeconds``: the server ends it by then even if it never goes quiet."""
