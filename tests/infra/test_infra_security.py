"""Security gates on the synthesized template: cdk-nag, the managed policies, TLS-only resource policies, cfn-lint
(IAM least privilege: test_infra_iam.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App, Validations
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint_file

from infra.app import build_app
from infra.config import CONTEXT_STUB_ASSET, parse_config
from infra.nag import MIN_REASON

# AWS-managed policies allowed, each acknowledged with its reason (cdk-nag IAM4).
MANAGED_POLICIES = {
    "service-role/AWSLambdaVPCAccessExecutionRole",
    "service-role/AmazonAPIGatewayPushToCloudWatchLogs",
}
# CDK makes a Lambda DependsOn its role *and* the role's policy; harmless and not ours to change.
CFN_LINT_IGNORED = {"W3005"}

SHAPES = ["public", "private", "private_nat"]


@pytest.fixture(params=SHAPES)
def shape(request: pytest.FixtureRequest):
    return request.getfixturevalue(request.param)


def test_cdk_nag_aws_solutions_has_no_unacknowledged_findings(shape) -> None:
    report = AwsSolutionsChecks(shape.app).validate_scope(shape.stack)

    findings = [f"{v.rule_name} ({v.severity}): {v.description}" for v in report.violations]
    assert findings == []
    assert report.success


def test_app_synth_fails_on_an_unacknowledged_finding(sample, tmp_path: Path) -> None:
    """The app registers the pack, so `cdk synth` (and deploy) stop on any new finding."""
    app = App(outdir=str(tmp_path), context={CONTEXT_STUB_ASSET: "true"})
    stack = build_app(app, config=parse_config(sample))
    sqs.CfnQueue(stack, "NagProbe")  # no DLQ, no TLS enforcement

    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()

    report = json.loads((tmp_path / "validation-report.json").read_text())
    (plugin,) = report["pluginReports"]
    rules = {v["ruleName"] for v in plugin["violations"]}
    assert rules == {"AwsSolutions-SQS3", "AwsSolutions-SQS4"}


def test_every_acknowledgment_carries_a_reason(shape) -> None:
    acks: dict[str, str] = {}
    for construct in shape.stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for rule, reason in entry.data.items():
                    acks[f"{construct.node.path}:{rule}"] = reason
    assert acks, "expected the documented acknowledgments"
    for where, reason in acks.items():
        assert isinstance(reason, str) and len(reason.strip()) >= MIN_REASON, where


def test_managed_policies_are_only_the_acknowledged_ones(shape) -> None:
    used = set()
    for res in shape.json["Resources"].values():
        for arn in res.get("Properties", {}).get("ManagedPolicyArns", []) if res["Type"] == "AWS::IAM::Role" else []:
            used.add(arn["Fn::Join"][1][-1].split(":iam::aws:policy/")[-1])
    assert used <= MANAGED_POLICIES


def test_resource_policies_deny_plain_http(shape) -> None:
    rules = shape.resources("AWS::Events::Rule")
    for type_ in ("AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy"):
        for logical_id, policy in shape.resources(type_).items():
            statements = policy["Properties"]["PolicyDocument"]["Statement"]
            deny = [s for s in statements if s["Effect"] == "Deny"]
            assert [s["Condition"] for s in deny] == [{"Bool": {"aws:SecureTransport": "false"}}], logical_id
            for statement in statements:
                if statement["Effect"] == "Deny":
                    continue
                # else only EventBridge delivering a rule's undeliverable events (the router's DLQ), per rule
                assert statement["Principal"] == {"Service": "events.amazonaws.com"}, logical_id
                assert statement["Action"] == "sqs:SendMessage", logical_id
                source = statement["Condition"]["ArnEquals"]["aws:SourceArn"]
                assert source["Fn::GetAtt"][0] in rules and source["Fn::GetAtt"][1] == "Arn", logical_id


def test_cfn_lint_is_clean(shape, tmp_path: Path) -> None:
    path = tmp_path / "idleshare.template.json"
    path.write_text(json.dumps(shape.json))

    matches = lint_file(path, config=ManualArgs(regions=["us-east-1", "us-west-2", "eu-west-1"]))

    problems = [f"{m.rule.id} {m.message} ({m.path})" for m in matches if m.rule.id not in CFN_LINT_IGNORED]
    assert problems == []
