"""The admin API's edges: API Gateway's account-wide CloudWatch logging role is the account's unless the config opts in;
the stage logs to its own access log group either way. (No request validator that validates nothing: test_infra_iam.py's
``api_findings``.)"""

from __future__ import annotations

from typing import Any

from infra.config import parse_config

ACCOUNT = "AWS::ApiGateway::Account"


def _pushes_to_cloudwatch(role: dict[str, Any]) -> bool:
    managed = role["Properties"].get("ManagedPolicyArns", [])
    return any("AmazonAPIGatewayPushToCloudWatchLogs" in str(arn) for arn in managed)


def test_by_default_the_stack_leaves_the_account_wide_logging_role_to_the_account(public: Any) -> None:
    assert parse_config(public.stack.config.model_dump()).api_gateway_account_logging_role is False

    assert public.resources(ACCOUNT) == {}
    roles = public.resources("AWS::IAM::Role").values()
    assert not [r for r in roles if _pushes_to_cloudwatch(r)]


def test_opted_in_the_stack_sets_the_account_wide_logging_role(private: Any) -> None:
    assert private.stack.config.api_gateway_account_logging_role is True

    (account,) = private.resources(ACCOUNT).values()
    role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
    role = private.json["Resources"][role_id]
    assert _pushes_to_cloudwatch(role)
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "apigateway.amazonaws.com"
    }


def test_either_way_every_request_is_access_logged_to_the_stacks_log_group(public: Any, private: Any) -> None:
    for shape in (public, private):
        (stage,) = shape.resources("AWS::ApiGateway::Stage").values()
        destination = stage["Properties"]["AccessLogSetting"]["DestinationArn"]["Fn::GetAtt"]

        assert shape.json["Resources"][destination[0]]["Type"] == "AWS::Logs::LogGroup"
        assert '"status":"$context.status"' in stage["Properties"]["AccessLogSetting"]["Format"]
