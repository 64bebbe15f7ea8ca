"""The SQS FIFO recompute queue and its DLQ.

The router sends one message per cluster with MessageGroupId = cluster id (recomputes of one cluster
never run concurrently) and a MessageDeduplicationId per cluster per short window (a burst coalesces
into one recompute), so content-based deduplication is off.

Every message is held for ``names.RECOMPUTE_COALESCE_SECONDS`` (the queue's delivery delay, equal to
the dedup window) so the window's one recompute runs after the window has closed: SQS drops a later
message of the same window as a duplicate, and without the delay a change made in the window after its
message had been consumed would wait for the 5-minute schedule (trailing-edge coalescing).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs

from constructs import Construct
from idleshare import names
from infra.nag import acknowledge

# SQS guidance for Lambda event sources: visibility >= 6 x the function timeout.
VISIBILITY_FACTOR = 6


class RecomputeQueue(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, recompute_timeout: Duration, max_receive_count: int
    ) -> None:
        super().__init__(scope, construct_id)
        common = {
            "fifo": True,
            "content_based_deduplication": False,
            "encryption": sqs.QueueEncryption.SQS_MANAGED,
            "enforce_ssl": True,
        }
        self.dlq = sqs.Queue(self, "Dlq", retention_period=Duration.days(14), **common)
        acknowledge(
            self.dlq,
            "AwsSolutions-SQS3",
            "This queue is the dead-letter queue of the recompute queue; it has no DLQ of its own.",
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            visibility_timeout=Duration.seconds(recompute_timeout.to_seconds() * VISIBILITY_FACTOR),
            retention_period=Duration.days(4),
            delivery_delay=Duration.seconds(names.RECOMPUTE_COALESCE_SECONDS),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dlq, max_receive_count=max_receive_count),
            **common,
        )
