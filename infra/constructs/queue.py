"""The SQS FIFO recompute queue and its DLQ; the router's dead-letter queue.

The router sends, per change, a leading and a trailing message with MessageGroupId = cluster id (recomputes of one
cluster never run concurrently) and a MessageDeduplicationId per cluster, window and edge (a burst coalesces into at
most two recomputes a window), so content-based deduplication is off. The queue delays nothing: the leading message
is recomputed at once, the trailing one is handed back by the recompute until its window has closed.

Every value comes from ``idleshare.timings`` (what the devkit's event source mapping uses too): a failed
record is handed back by the recompute with a short backoff (``ChangeMessageVisibility``), so the queue's
visibility timeout only matters when the function dies without answering; it is the function's timeout
plus ``timings.TIMEOUT_RETURN_SECONDS``. The redrive policy's ``maxReceiveCount`` is the config's
``dlq_max_receive_count`` (at least ``timings.min_receive_count()``: 15 minutes of failing).
"""

from __future__ import annotations

import jsii
from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs

from constructs import Construct
from idleshare import timings
from infra.nag import acknowledge


class RecomputeQueue(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, max_receive_count: int) -> None:
        super().__init__(scope, construct_id)
        common = {
            "fifo": True,
            "content_based_deduplication": False,
            "encryption": sqs.QueueEncryption.SQS_MANAGED,
            "enforce_ssl": True,
        }
        self.dlq = sqs.Queue(self, "Dlq", retention_period=Duration.days(timings.DLQ_RETENTION_DAYS), **common)
        acknowledge(
            self.dlq,
            "AwsSolutions-SQS3",
            "This queue is the dead-letter queue of the recompute queue; it has no DLQ of its own.",
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            visibility_timeout=Duration.seconds(timings.QUEUE_VISIBILITY_TIMEOUT_SECONDS),
            retention_period=Duration.days(timings.QUEUE_RETENTION_DAYS),
            delivery_delay=Duration.seconds(timings.QUEUE_DELIVERY_DELAY_SECONDS),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dlq, max_receive_count=max_receive_count),
            **common,
        )


ROUTER_ASYNC_RETRIES = 2
"""Lambda's retries of a failed asynchronous router invocation before its on-failure destination."""
ROUTER_MAX_EVENT_AGE = Duration.hours(1)


@jsii.implements(lambda_.IDestination)
class _QueueDestination:
    """A Lambda on-failure destination on ``queue`` that grants nothing itself (``lambda_destinations.SqsDestination``
    grants ``sqs:GetQueueAttributes`` and ``GetQueueUrl`` too, which Lambda does not use): the caller grants
    ``sqs:SendMessage``."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self.queue = queue

    def bind(
        self, scope: Construct, fn: lambda_.IFunction, *, type: lambda_.DestinationType
    ) -> lambda_.DestinationConfig:
        return lambda_.DestinationConfig(destination=self.queue.queue_arn)


class RouterDeadLetterQueue(Construct):
    """Where the router's failures are kept (a standard queue, SQS-managed SSE, TLS only): the events EventBridge
    could not deliver to it (its rules' targets' DLQ: EventBridge may send here for those rules only, the policy
    CDK adds per target scoped by the rule's ARN), and the invocations that failed after Lambda's asynchronous
    retries (the function's on-failure destination, sent with the router's role). Alarmed when it holds any."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.queue = sqs.Queue(
            self,
            "Queue",
            retention_period=Duration.days(timings.DLQ_RETENTION_DAYS),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        acknowledge(
            self.queue,
            "AwsSolutions-SQS3",
            "This queue is the router's dead-letter queue (rule targets, on-failure destination); it has no DLQ.",
        )

    def keep_failed_invocations(self, function: lambda_.IFunction, role: iam.IRole) -> lambda_.EventInvokeConfig:
        """``function``'s asynchronous invocations that still fail after Lambda's retries are sent here (its
        on-failure destination: Lambda sends with the function's ``role``, which may send to this queue only)."""
        role.add_to_principal_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn]))
        config = lambda_.EventInvokeConfig(
            self,
            "AsyncInvoke",
            function=function,
            retry_attempts=ROUTER_ASYNC_RETRIES,
            max_event_age=ROUTER_MAX_EVENT_AGE,
            on_failure=_QueueDestination(self.queue),
        )
        # Lambda checks, when the destination is set, that the role may send to it: the policy comes first
        config.node.add_dependency(role)
        return config
