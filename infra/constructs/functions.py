"""The one Lambda factory: every idleshare function is built here, the same way.

python3.12 on arm64, JSON logs into a log group of its own (with retention), X-Ray active tracing,
and an execution role that may write to that log group only; each caller grants the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

from constructs import Construct
from idleshare import names
from infra.nag import XRAY_REASON, acknowledge

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
DEFAULT_TIMEOUT = Duration.seconds(30)
DEFAULT_MEMORY = 512

R = logs.RetentionDays
_RETENTION = (
    (1, R.ONE_DAY), (3, R.THREE_DAYS), (5, R.FIVE_DAYS), (7, R.ONE_WEEK), (14, R.TWO_WEEKS),
    (30, R.ONE_MONTH), (60, R.TWO_MONTHS), (90, R.THREE_MONTHS), (120, R.FOUR_MONTHS),
    (150, R.FIVE_MONTHS), (180, R.SIX_MONTHS), (365, R.ONE_YEAR), (400, R.THIRTEEN_MONTHS),
    (545, R.EIGHTEEN_MONTHS), (731, R.TWO_YEARS), (1096, R.THREE_YEARS), (1827, R.FIVE_YEARS),
    (2192, R.SIX_YEARS), (2557, R.SEVEN_YEARS), (2922, R.EIGHT_YEARS), (3288, R.NINE_YEARS),
    (3653, R.TEN_YEARS),
)  # fmt: skip


def retention(days: int) -> logs.RetentionDays:
    """The shortest CloudWatch Logs retention that keeps at least `days` days."""
    return next((value for length, value in _RETENTION if length >= days), R.TEN_YEARS)


@dataclass(frozen=True)
class Placement:
    """Where a function runs in a VPC (None: outside any VPC)."""

    vpc: ec2.IVpc
    subnets: Sequence[ec2.ISubnet]
    security_groups: Sequence[ec2.ISecurityGroup]


class IdleshareFunction(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        handler: str,
        description: str,
        environment: Mapping[str, str],
        log_retention_days: int,
        timeout: Duration = DEFAULT_TIMEOUT,
        memory_size: int = DEFAULT_MEMORY,
        reserved_concurrency: int | None = None,
        placement: Placement | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.handler = handler
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=retention(log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"idleshare {construct_id} Lambda execution role",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        vpc_props: dict[str, object] = {}
        if placement is not None:
            # CDK adds this only to roles it creates itself.
            self.role.add_managed_policy(
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaVPCAccessExecutionRole")
            )
            vpc_props = {
                "vpc": placement.vpc,
                "vpc_subnets": ec2.SubnetSelection(subnets=list(placement.subnets)),
                "security_groups": list(placement.security_groups),
            }
        self.function = lambda_.Function(
            self,
            "Function",
            code=code,
            handler=handler,
            description=description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            timeout=timeout,
            memory_size=memory_size,
            role=self.role,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=reserved_concurrency,
            environment={
                "POWERTOOLS_SERVICE_NAME": names.SERVICE,
                "POWERTOOLS_METRICS_NAMESPACE": names.METRICS_NAMESPACE,
                **environment,
            },
            **vpc_props,  # type: ignore[arg-type]
        )
        acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]", XRAY_REASON)
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            "Pinned to python3.12: the asset's wheels are built for CPython 3.12 (infra/bundling.py); "
            "moving runtimes is a deliberate change of both.",
        )
        if placement is not None:
            acknowledge(
                self.role,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaVPCAccessExecutionRole]",
                "Added by CDK for a Lambda in a VPC: the ENI actions it grants (ec2:CreateNetworkInterface,"
                " ...) support no resource-level scoping; this is the AWS-documented policy for it.",
            )
