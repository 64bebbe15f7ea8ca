"""The admin HTTP API: API Gateway REST API, IAM (SigV4) auth on every method, one proxy Lambda.

Every request is access-logged as JSON to the stack's log group, and the stage is throttled. API Gateway's
account-level CloudWatch role (which stage logging needs) is the account's: this construct sets it to a role of its
own only when asked (``account_logging_role``: the config's ``api_gateway_account_logging_role``).
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

from constructs import Construct
from infra.nag import acknowledge

STAGE = "v1"
RATE_LIMIT = 20
BURST_LIMIT = 40


class AdminApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: lambda_.IFunction,
        log_retention: logs.RetentionDays,
        account_logging_role: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.api = apigw.RestApi(
            self,
            "Api",
            description="idleshare admin API (IAM-authorised)",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # AWS::ApiGateway::Account is one per account and region, shared by every REST API there: left to the
            # account unless the operator opts in (infra/README.md, "API Gateway's logging role").
            cloud_watch_role=account_logging_role,
            cloud_watch_role_removal_policy=RemovalPolicy.RETAIN if account_logging_role else None,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                tracing_enabled=True,
                throttling_rate_limit=RATE_LIMIT,
                throttling_burst_limit=BURST_LIMIT,
            ),
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
        )
        # The stack exports the URL as names.OUTPUT_API_URL; drop RestApi's own duplicate output.
        self.api.node.try_remove_child("Endpoint")
        integration = apigw.LambdaIntegration(handler)
        # No API Gateway request validator: the two methods are proxies (ANY on / and /{proxy+}), with no declared
        # parameter and no model, so one would validate nothing. The handler validates every request, its path and
        # query parameters and its body against the body's schema (idleshare.parse.requests), naming each field.
        self.methods = [
            resource.add_method("ANY", integration, authorization_type=apigw.AuthorizationType.IAM)
            for resource in (self.api.root, self.api.root.add_resource("{proxy+}"))
        ]

        acknowledge(
            self.api,
            "AwsSolutions-COG4",
            "The admin API uses IAM (SigV4) authorization on every method; callers are IAM principals "
            "(operators, the console backend, the CLI), not Cognito users.",
        )
        acknowledge(
            self.api,
            "AwsSolutions-APIG2",
            "Every request is validated by the API's handler against its schema (idleshare.parse.requests; 400 / 422 "
            "naming each field); the methods are proxies with no declared parameter or model, so an API Gateway "
            "request validator would validate nothing.",
        )
        acknowledge(
            self.api,
            "AwsSolutions-APIG3",
            "IAM-authorised, throttled admin API for a few operators; a WAF web ACL is left to the "
            "account's perimeter policy (attach one to the stage if required).",
        )
        acknowledge(
            self.api,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AmazonAPIGatewayPushToCloudWatchLogs]",
            "API Gateway's account-level CloudWatch role (needed for stage execution logging) uses the "
            "AWS-managed policy AWS documents for it.",
        )
