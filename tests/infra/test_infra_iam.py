"""Least privilege and authentication, read from the synthesized template (complements
test_infra_security.py: cdk-nag, cfn-lint, the managed-policy list).

Given the template of each deployment shape, Then every IAM statement (roles' default and inline
policies, AWS::IAM::Policy, AWS::IAM::ManagedPolicy) names its actions exactly and only the stack's
own resources; resource policies allow no anonymous principal; every admin API method requires
SigV4 (AWS_IAM), with no NONE method, CORS preflight or API key beside it, and no request validator that has
nothing to validate (a method's validator checks only its declared parameters and modelled bodies; the handler
validates every request, naming each field).
Each check is shown to fail on an injected violation, so a green run means something.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from infra.app import build_app
from infra.config import CONTEXT_STUB_ASSET, parse_config
from tests.infra.conftest import as_list, own_arn, policy_statements

SHAPES = ["public", "private", "private_nat"]

# Actions allowed on Resource "*": AWS offers no resource-level permission for them (Service
# Authorization Reference, "Resource types" column empty). Value: the condition key that must
# narrow the statement instead, or None.
STAR_RESOURCE_ACTIONS: dict[str, str | None] = {
    "xray:PutTraceSegments": None,  # X-Ray: no resource types
    "xray:PutTelemetryRecords": None,  # X-Ray: no resource types
    "cloudwatch:PutMetricData": "cloudwatch:namespace",  # no resource types; narrow by namespace
    # Lambda in a VPC (what AWSLambdaVPCAccessExecutionRole grants): ENI management.
    "ec2:CreateNetworkInterface": None,
    "ec2:DescribeNetworkInterfaces": None,
    "ec2:DescribeSubnets": None,
    "ec2:DeleteNetworkInterface": None,
    "ec2:AssignPrivateIpAddresses": None,
    "ec2:UnassignPrivateIpAddresses": None,
}
# ARNs the stack builds itself (e.g. the EKS clusters of its config) must be in its own account,
# region and partition: Fn::Join pieces that are exactly these pseudo parameters.
OWN_ARN_PARTS = ({"Ref": "AWS::Partition"}, {"Ref": "AWS::Region"}, {"Ref": "AWS::AccountId"})
RESOURCE_POLICY_TYPES = {
    "AWS::SQS::QueuePolicy": "PolicyDocument",
    "AWS::SNS::TopicPolicy": "PolicyDocument",
    "AWS::EC2::VPCEndpoint": "PolicyDocument",
    "AWS::ApiGateway::RestApi": "Policy",
    "AWS::Events::EventBusPolicy": "Statement",
}


# --------------------------------------------------------------------------------------- checks


def identity_statements(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(where, statement) for where, _, statement in policy_statements(template)]


def is_own_resource(resource: Any, template: dict[str, Any]) -> bool:
    """A resource of this template, or an ARN the stack builds in its own account and region."""
    if isinstance(resource, dict) and set(resource) == {"Fn::GetAtt"}:
        target, attribute = resource["Fn::GetAtt"]
        return target in template["Resources"] and attribute == "Arn"
    if isinstance(resource, dict) and set(resource) == {"Ref"}:
        return resource["Ref"] in template["Resources"]
    if isinstance(resource, dict) and set(resource) == {"Fn::Join"}:
        separator, parts = resource["Fn::Join"]
        literals = [p for p in parts if isinstance(p, str)]
        refs = [p for p in parts if not isinstance(p, str)]
        return (
            separator == ""
            and all(part in parts for part in OWN_ARN_PARTS)
            and all(ref in OWN_ARN_PARTS or is_own_resource(ref, template) for ref in refs)
            and not any("*" in text or "?" in text for text in literals)
            and bool(literals)
            and literals[-1].rsplit("/", 1)[-1] != ""
        )
    return False  # a literal ARN: another account, a wildcard, or not this stack's


def iam_findings(template: dict[str, Any]) -> list[str]:
    """Every way the template's IAM is wider than least privilege, as ``where: what`` lines."""
    findings: list[str] = []
    for where, statement in identity_statements(template):
        for forbidden in ("NotAction", "NotResource", "NotPrincipal"):
            if forbidden in statement:
                findings.append(f"{where}: {forbidden} grants everything else")
        actions = as_list(statement.get("Action", []))
        for action in actions:
            if not isinstance(action, str) or "*" in action or "?" in action:
                findings.append(f"{where}: wildcard action {action!r}")
        if statement.get("Effect") != "Allow":
            continue
        for resource in as_list(statement.get("Resource", [])):
            if resource == "*":
                for action in actions:
                    if action not in STAR_RESOURCE_ACTIONS:
                        findings.append(f"{where}: Resource * for {action}, which supports resource-level permissions")
                    elif (key := STAR_RESOURCE_ACTIONS[action]) and key not in json.dumps(
                        statement.get("Condition", {})
                    ):
                        findings.append(f"{where}: Resource * for {action} without a {key} condition")
            elif not is_own_resource(resource, template):
                findings.append(f"{where}: resource {json.dumps(resource)} is not this stack's")
    for logical_id, res in template["Resources"].items():
        key = RESOURCE_POLICY_TYPES.get(res["Type"])
        document = res.get("Properties", {}).get(key) if key else None
        if not document:
            continue
        statements = document.get("Statement", document) if isinstance(document, dict) else document
        for statement in as_list(statements):
            principal = statement.get("Principal")
            anonymous = principal == "*" or (isinstance(principal, dict) and "*" in as_list(principal.get("AWS")))
            if statement.get("Effect") == "Allow" and anonymous and not statement.get("Condition"):
                findings.append(f"{logical_id}: resource policy allows anyone")
    return findings


def api_findings(template: dict[str, Any]) -> list[str]:
    """Every way a caller could reach the admin API without a SigV4 signature."""
    resources = template["Resources"]
    findings: list[str] = []
    methods = {k: r for k, r in resources.items() if r["Type"] == "AWS::ApiGateway::Method"}
    if not methods:
        findings.append("no API methods found")
    validators = {k: r for k, r in resources.items() if r["Type"] == "AWS::ApiGateway::RequestValidator"}
    for logical_id, method in methods.items():
        props = method["Properties"]
        if props.get("AuthorizationType") != "AWS_IAM":
            findings.append(f"{logical_id}: AuthorizationType {props.get('AuthorizationType')!r}, not AWS_IAM")
        if props.get("HttpMethod") == "OPTIONS":
            findings.append(f"{logical_id}: an OPTIONS (CORS preflight) method")
        if props.get("ApiKeyRequired"):
            findings.append(f"{logical_id}: API key required (keys are not identities)")
        validator = validators.get(str(props.get("RequestValidatorId", {}).get("Ref")), {}).get("Properties")
        if validator is not None and not (
            (validator.get("ValidateRequestBody") and props.get("RequestModels"))
            or (validator.get("ValidateRequestParameters") and props.get("RequestParameters"))
        ):
            findings.append(f"{logical_id}: a request validator with no model and no parameter validates nothing")
    for logical_id, res in resources.items():
        if res["Type"] in ("AWS::ApiGateway::ApiKey", "AWS::ApiGateway::UsagePlan", "AWS::ApiGateway::Authorizer"):
            findings.append(f"{logical_id}: {res['Type']} beside IAM auth")
    return findings


# ---------------------------------------------------------------------------------------- tests


@pytest.fixture(params=SHAPES)
def shape(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def test_every_shape_is_least_privilege_and_signed_only(shape: Any) -> None:
    # one test per shape: each synthesized template is a session fixture built once per worker
    template = shape.json
    statements = identity_statements(template)
    assert len(statements) >= 10  # the extractor sees the roles' policies

    assert iam_findings(template) == []

    starred = {a for _, s in statements if "*" in as_list(s.get("Resource")) for a in as_list(s["Action"])}
    assert starred and starred <= set(STAR_RESOURCE_ACTIONS)

    methods = shape.resources("AWS::ApiGateway::Method")
    on = {json.dumps(m["Properties"]["ResourceId"], sort_keys=True) for m in methods.values()}
    assert len(methods) == len(on) == 2  # ANY on / (the RestApi's root) and on /{proxy+}
    assert api_findings(template) == []


STATEMENT = {
    "Effect": "Allow",
    "Action": "dynamodb:GetItem",
    "Resource": {"Fn::GetAtt": ["StorageTableB43FDCE7", "Arn"]},
}


def inject_statement(template: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(template)
    statement = {k: v for k, v in {**STATEMENT, **changes}.items() if v is not None}
    out["Resources"]["InjectedPolicy"] = {
        "Type": "AWS::IAM::Policy",
        "Properties": {"PolicyName": "injected", "PolicyDocument": {"Version": "2012-10-17", "Statement": [statement]}},
    }
    return out


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"Action": "*"}, "wildcard action '*'"),
        ({"Action": "dynamodb:*"}, "wildcard action 'dynamodb:*'"),
        ({"Action": ["dynamodb:GetItem", "dynamodb:Get*"]}, "wildcard action 'dynamodb:Get*'"),
        ({"Resource": "*"}, "Resource * for dynamodb:GetItem"),
        ({"Action": "cloudwatch:PutMetricData", "Resource": "*"}, "without a cloudwatch:namespace condition"),
        ({"Resource": "arn:aws:dynamodb:us-east-1:999999999999:table/theirs"}, "is not this stack's"),
        (
            {"Resource": own_arn("eks", "cluster/*")},
            "is not this stack's",
        ),
        (
            {"Resource": {"Fn::Join": ["", [{"Fn::GetAtt": ["StorageTableB43FDCE7", "Arn"]}, "/index/*"]]}},
            "is not this stack's",
        ),
        ({"Resource": {"Fn::GetAtt": ["NotInThisStack", "Arn"]}}, "is not this stack's"),
        ({"Action": None, "NotAction": "iam:*"}, "NotAction"),
        ({"Resource": None, "NotResource": "arn:aws:s3:::x"}, "NotResource"),
    ],
)
def test_the_iam_check_fails_on_an_injected_violation(public: Any, changes: dict[str, Any], expected: str) -> None:
    template = inject_statement(public.json, **changes)
    assert "StorageTableB43FDCE7" in template["Resources"]  # the injected GetAtt target exists

    findings = iam_findings(template)

    assert any(f.startswith("InjectedPolicy:") and expected in f for f in findings), findings


def test_the_iam_check_fails_on_an_anonymous_resource_policy(public: Any) -> None:
    template = copy.deepcopy(public.json)
    queue_policy = next(r for r in template["Resources"].values() if r["Type"] == "AWS::SQS::QueuePolicy")
    queue_policy["Properties"]["PolicyDocument"]["Statement"].append(
        {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sqs:SendMessage", "Resource": "*"}
    )
    assert any("allows anyone" in f for f in iam_findings(template))


def test_the_iam_check_reads_what_cdk_emits_for_every_policy_kind(sample: dict[str, Any], tmp_path: Path) -> None:
    # Given the real app with a managed policy, a role's inline policy and a role's default policy
    # that each grant too much, built with CDK's own constructs
    app = App(outdir=str(tmp_path), context={CONTEXT_STUB_ASSET: "true"})
    stack = build_app(app, config=parse_config(sample), nag=False)
    role = iam.Role(
        stack,
        "ProbeRole",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        inline_policies={
            "inline": iam.PolicyDocument(statements=[iam.PolicyStatement(actions=["*"], resources=["arn:aws:s3:::b"])])
        },
    )
    iam.ManagedPolicy(stack, "ProbeManaged", statements=[iam.PolicyStatement(actions=["s3:*"], resources=["*"])])
    role.add_to_policy(iam.PolicyStatement(actions=["dynamodb:GetItem"], resources=["*"]))

    findings = iam_findings(Template.from_stack(stack).to_json())

    # Then each is found
    assert any(f.startswith("ProbeRole") and "/inline:" in f and "wildcard action '*'" in f for f in findings)
    assert any(f.startswith("ProbeManaged") and "wildcard action 's3:*'" in f for f in findings)
    assert any(f.startswith("ProbeRoleDefaultPolicy") and "Resource * for dynamodb:GetItem" in f for f in findings)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda m: m["Properties"].update(AuthorizationType="NONE"), "AuthorizationType 'NONE'"),
        (lambda m: m["Properties"].pop("AuthorizationType"), "AuthorizationType None"),
        (lambda m: m["Properties"].update(AuthorizationType="CUSTOM"), "not AWS_IAM"),
        (lambda m: m["Properties"].update(HttpMethod="OPTIONS", AuthorizationType="NONE"), "CORS preflight"),
        (lambda m: m["Properties"].update(ApiKeyRequired=True), "API key required"),
        (lambda m: m["Properties"].update(RequestValidatorId={"Ref": "InjectedValidator"}), "validates nothing"),
    ],
)
def test_the_api_check_fails_on_an_unsigned_way_in(public: Any, mutate: Any, expected: str) -> None:
    template = copy.deepcopy(public.json)
    methods = [r for r in template["Resources"].values() if r["Type"] == "AWS::ApiGateway::Method"]
    extra = copy.deepcopy(methods[0])
    mutate(extra)
    template["Resources"]["InjectedMethod"] = extra
    template["Resources"]["InjectedValidator"] = {
        "Type": "AWS::ApiGateway::RequestValidator",
        "Properties": {"ValidateRequestBody": True, "ValidateRequestParameters": True},
    }

    assert any(f.startswith("InjectedMethod:") and expected in f for f in api_findings(template))


def test_the_api_check_fails_on_api_keys(public: Any) -> None:
    template = copy.deepcopy(public.json)
    template["Resources"]["InjectedKey"] = {"Type": "AWS::ApiGateway::ApiKey", "Properties": {"Enabled": True}}

    findings = api_findings(template)

    assert any(f.startswith("InjectedKey:") for f in findings)
