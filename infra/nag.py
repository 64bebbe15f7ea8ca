"""Acknowledging cdk-nag findings: every acknowledgment carries its reason, in one place each."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations

from constructs import IConstruct

MIN_REASON = 30

XRAY_REASON = (
    "X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level permissions "
    "(Resource must be *); added by Lambda active tracing."
)


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (`AwsSolutions-IAM5[Resource::*]`) on scope and its children."""
    if len(reason.strip()) < MIN_REASON:
        raise ValueError(f"acknowledgment of {rule_id} needs a real reason, got {reason!r}")
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))
