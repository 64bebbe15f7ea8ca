"""EventBridge: idleshare's bus and archive, the trigger rules, and the safety-net schedule.

The `aws.sagemaker` HyperPod events arrive on the account's default bus; a rule there forwards them to
idleshare's bus, so that every trigger — AWS's and idleshare's own — is recorded by one archive and can be
replayed with EventBridge replay. Rules on idleshare's bus invoke the router (asynchronously): an event
EventBridge cannot deliver after its retries goes to the router's dead-letter queue. The schedule invokes the
router directly with a fixed `Scheduled Recompute` event.

No rule takes SageMaker's CloudTrail compute-quota / scheduler-config calls, and the router's parser reads none:
idleshare's quotas are its own (its admin API emits `Compute Quota Changed`). tests/infra checks that the router
reads exactly what these rules and the schedule deliver.
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs

from constructs import Construct
from idleshare import names

HYPERPOD_PATTERN: dict[str, Any] = {
    "source": [names.SAGEMAKER_SOURCE],
    "detail-type": list(names.HYPERPOD_DETAIL_TYPES),
}
OWN_PATTERN: dict[str, Any] = {
    "source": [names.EVENT_SOURCE],
    "detail-type": list(names.OWN_INBOUND_DETAIL_TYPES),
}
ARCHIVE_PATTERN: dict[str, Any] = {"source": [names.EVENT_SOURCE, names.SAGEMAKER_SOURCE]}
SCHEDULE_INPUT: dict[str, Any] = {
    "source": names.SCHEDULE_SOURCE,
    "detail-type": names.DT_SCHEDULED_RECOMPUTE,
    "detail": {"clusters": "all"},
}


def _pattern(raw: dict[str, Any]) -> events.EventPattern:
    return events.EventPattern(source=raw["source"], detail_type=raw["detail-type"], detail=raw.get("detail"))


def rate_expression(minutes: int) -> str:
    return f"rate({minutes} minute{'s' if minutes != 1 else ''})"


def invoke_role(scope: Construct, function: lambda_.IFunction, what: str) -> iam.Role:
    """``ScheduleRole``: what EventBridge Scheduler assumes to invoke ``function``, and nothing else."""
    role = iam.Role(
        scope,
        "ScheduleRole",
        assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
        description=f"EventBridge Scheduler: invoke {what}",
    )
    role.add_to_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[function.function_arn]))
    return role


def invoke_schedule(
    scope: Construct,
    construct_id: str,
    *,
    description: str,
    minutes: int,
    function: lambda_.IFunction,
    role: iam.IRole,
    payload: dict[str, Any],
) -> scheduler.CfnSchedule:
    """Invoke ``function`` with ``payload`` every ``minutes``; a missed invocation is not retried (the next
    tick is the retry)."""
    return scheduler.CfnSchedule(
        scope,
        construct_id,
        description=description,
        schedule_expression=rate_expression(minutes),
        flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
        state="ENABLED",
        target=scheduler.CfnSchedule.TargetProperty(
            arn=function.function_arn,
            role_arn=role.role_arn,
            input=json.dumps(payload, separators=(",", ":")),
            retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                maximum_retry_attempts=0, maximum_event_age_in_seconds=minutes * 60
            ),
        ),
    )


class Events(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        router: lambda_.IFunction,
        schedule_rate_minutes: int,
        archive_retention_days: int,
        dead_letter_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bus = events.EventBus(self, "Bus", description="idleshare: triggers and recompute results")
        self.archive = self.bus.archive(
            "Archive",
            description="Every idleshare trigger, for EventBridge replay",
            event_pattern=_pattern({"source": ARCHIVE_PATTERN["source"], "detail-type": None}),
            retention=Duration.days(archive_retention_days) if archive_retention_days else None,
        )
        default_bus = events.EventBus.from_event_bus_name(self, "DefaultBus", "default")
        to_own_bus = targets.EventBus(self.bus)
        self.forward_rules = [
            events.Rule(
                self,
                f"Forward{name}",
                description=f"Forward {what} from the default bus to idleshare's bus",
                event_bus=default_bus,
                event_pattern=_pattern(pattern),
                targets=[to_own_bus],
            )
            for name, what, pattern in (("HyperPod", "HyperPod cluster events", HYPERPOD_PATTERN),)
        ]
        # what EventBridge cannot deliver (the router throttled, its invoke permission gone) after its retries
        # is kept in the router's DLQ: CDK adds the queue policy, events.amazonaws.com scoped by each rule's ARN
        to_router = targets.LambdaFunction(
            router, retry_attempts=4, max_event_age=Duration.hours(1), dead_letter_queue=dead_letter_queue
        )
        self.router_rules = [
            events.Rule(
                self,
                f"Route{name}",
                description=f"Invoke the idleshare router on {what}",
                event_bus=self.bus,
                event_pattern=_pattern(pattern),
                targets=[to_router],
            )
            for name, what, pattern in (
                ("HyperPod", "HyperPod cluster events", HYPERPOD_PATTERN),
                ("Own", "idleshare's own trigger events", OWN_PATTERN),
            )
        ]
        self.schedule_role = invoke_role(self, router, "the idleshare router")
        self.schedule = invoke_schedule(
            self,
            "SafetyNetSchedule",
            description="idleshare safety net: recompute every cluster periodically",
            minutes=schedule_rate_minutes,
            function=router,
            role=self.schedule_role,
            payload=SCHEDULE_INPUT,
        )
