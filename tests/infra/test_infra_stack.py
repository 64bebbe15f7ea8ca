"""Template assertions for the public-endpoint shape (the sample config in cdk.json)."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Match

from idleshare import names
from infra.constructs.events import CLOUDTRAIL_PATTERN, HYPERPOD_PATTERN, OWN_PATTERN, SCHEDULE_INPUT
from tests.infra.conftest import own_arn

EXPECTED_COUNTS = {
    "AWS::ApiGateway::Account": 1,
    "AWS::ApiGateway::Deployment": 1,
    "AWS::ApiGateway::Method": 2,
    "AWS::ApiGateway::RequestValidator": 1,
    "AWS::ApiGateway::Resource": 1,
    "AWS::ApiGateway::RestApi": 1,
    "AWS::ApiGateway::Stage": 1,
    "AWS::CloudWatch::Dashboard": 1,
    "AWS::DynamoDB::Table": 2,
    "AWS::EKS::AccessEntry": 2,  # recompute + node watcher (tests/infra/test_infra_watcher.py)
    "AWS::Events::Archive": 1,
    "AWS::Events::EventBus": 1,
    "AWS::Events::Rule": 5,
    "AWS::IAM::Policy": 9,
    "AWS::IAM::Role": 10,
    "AWS::Lambda::EventSourceMapping": 1,
    "AWS::Lambda::Function": 5,
    "AWS::Lambda::Permission": 7,
    "AWS::Logs::LogGroup": 6,
    "AWS::SNS::Topic": 1,
    "AWS::SNS::TopicPolicy": 1,
    "AWS::SQS::Queue": 2,
    "AWS::SQS::QueuePolicy": 2,
    "AWS::Scheduler::Schedule": 2,  # safety net + one node watcher schedule per cluster
    "Custom::IdleshareClusterRegistry": 1,
}


def _ref_id(value: Any) -> str:
    """The logical id behind a Ref / Fn::GetAtt."""
    if "Ref" in value:
        return value["Ref"]
    return value["Fn::GetAtt"][0]


def _function(public, handler: str) -> tuple[str, dict[str, Any]]:
    found = public.template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": handler}})
    assert len(found) == 1
    return next(iter(found.items()))


def _statements(public, role_logical_id: str) -> list[dict[str, Any]]:
    policies = [
        p
        for p in public.resources("AWS::IAM::Policy").values()
        if [_ref_id(r) for r in p["Properties"]["Roles"]] == [role_logical_id]
    ]
    assert len(policies) == 1
    return policies[0]["Properties"]["PolicyDocument"]["Statement"]


def _logical(public, type_: str, path_part: str) -> str:
    found = [k for k in public.resources(type_) if k.startswith(path_part)]
    assert len(found) == 1, found
    return found[0]


def _main_queue(public) -> str:
    return public.stack.get_logical_id(public.stack.queue.queue.node.default_child)


# --- every resource type, counted ---------------------------------------------------------------


def test_resource_counts(public) -> None:
    for type_, count in EXPECTED_COUNTS.items():
        public.template.resource_count_is(type_, count)
    types = {r["Type"] for r in public.json["Resources"].values()} - {"AWS::CDK::Metadata"}
    # alarms: counted by name in test_alarms_notify_the_topic (several issues add their own)
    assert types == set(EXPECTED_COUNTS) | {"AWS::CloudWatch::Alarm"}, "a new resource type needs assertions"


# --- storage ------------------------------------------------------------------------------------


def test_main_table_keys_ttl_pitr_encryption(public) -> None:
    public.template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": {
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                "AttributeDefinitions": [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                "BillingMode": "PAY_PER_REQUEST",
                "TimeToLiveSpecification": {"AttributeName": "ttl", "Enabled": True},
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                "SSESpecification": {"SSEEnabled": True},
            },
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )


def test_idempotency_table_is_powertools_layout(public) -> None:
    public.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            "BillingMode": "PAY_PER_REQUEST",
            "TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True},
        },
    )


# --- queue --------------------------------------------------------------------------------------


def test_recompute_queue_is_fifo_without_content_dedup_with_redrive(public) -> None:
    dlq = _logical(public, "AWS::SQS::Queue", "RecomputeQueueDlq")
    public.template.has_resource_properties(
        "AWS::SQS::Queue",
        {
            "FifoQueue": True,
            "ContentBasedDeduplication": False,
            "VisibilityTimeout": 6 * 300,
            "MessageRetentionPeriod": 4 * 24 * 3600,
            # trailing-edge coalescing: a window's message is delivered only once the window has closed
            "DelaySeconds": names.RECOMPUTE_COALESCE_SECONDS,
            "SqsManagedSseEnabled": True,
            "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": [dlq, "Arn"]}, "maxReceiveCount": 5},
        },
    )
    public.template.has_resource_properties(
        "AWS::SQS::Queue",
        {
            "FifoQueue": True,
            "ContentBasedDeduplication": False,
            "MessageRetentionPeriod": 14 * 24 * 3600,
            "SqsManagedSseEnabled": True,
            "RedrivePolicy": Match.absent(),
        },
    )


def test_both_queues_deny_non_tls(public) -> None:
    for policy in public.resources("AWS::SQS::QueuePolicy").values():
        (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
        assert statement["Effect"] == "Deny"
        assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        assert statement["Action"] == "sqs:*"  # a Deny: the wider the better


# --- functions ----------------------------------------------------------------------------------


def test_every_function_is_python312_arm64_json_logs_traced(public) -> None:
    for logical_id, fn in public.resources("AWS::Lambda::Function").items():
        props = fn["Properties"]
        assert props["Runtime"] == "python3.12", logical_id
        assert props["Architectures"] == ["arm64"], logical_id
        assert props["TracingConfig"] == {"Mode": "Active"}, logical_id
        assert props["LoggingConfig"]["LogFormat"] == "JSON", logical_id
        assert props["LoggingConfig"]["ApplicationLogLevel"] == "INFO", logical_id
        log_group = props["LoggingConfig"]["LogGroup"]["Ref"]
        assert public.json["Resources"][log_group]["Properties"]["RetentionInDays"] == 30
        env = props["Environment"]["Variables"]
        assert env["POWERTOOLS_SERVICE_NAME"] == names.SERVICE
        # each function gets its own configuration, nothing more
        assert set(env) - {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"} == set(
            names.FUNCTION_ENV[props["Handler"]]
        ), logical_id
        if names.ENV_HISTORY_TTL_DAYS in env:
            assert env[names.ENV_HISTORY_TTL_DAYS] == "90"
        if names.ENV_TOLERATED_TAINT_KEYS in env:
            assert (
                env[names.ENV_TOLERATED_TAINT_KEYS]
                == "nvidia.com/gpu,aws.amazon.com/neuron,aws.amazon.com/neurondevice"
            )
        if names.ENV_CLUSTERS in env:
            assert json.loads(env[names.ENV_CLUSTERS])[0]["eks_cluster_name"] == "ml-cluster-eks"
        assert "VpcConfig" not in props, "public endpoints: no VPC"


def test_handlers_are_the_shared_entry_points(public) -> None:
    handlers = {fn["Properties"]["Handler"] for fn in public.resources("AWS::Lambda::Function").values()}
    assert handlers == {
        names.ROUTER_HANDLER,
        names.RECOMPUTE_HANDLER,
        names.API_HANDLER,
        names.REGISTRAR_HANDLER,
        names.WATCHER_HANDLER,
    }


def test_recompute_function_sizing_and_sqs_source(public) -> None:
    logical_id, fn = _function(public, names.RECOMPUTE_HANDLER)
    assert fn["Properties"]["Timeout"] == 300
    assert fn["Properties"]["MemorySize"] == 1024
    assert fn["Properties"]["ReservedConcurrentExecutions"] == 5
    queue = _main_queue(public)
    public.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "FunctionName": {"Ref": logical_id},
            "EventSourceArn": {"Fn::GetAtt": [queue, "Arn"]},
            "BatchSize": 10,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
        },
    )


def test_router_and_api_have_no_reserved_concurrency(public) -> None:
    for handler in (names.ROUTER_HANDLER, names.API_HANDLER):
        _, fn = _function(public, handler)
        assert "ReservedConcurrentExecutions" not in fn["Properties"]


# --- IAM: every statement of every role -----------------------------------------------------------

LOGS = ["logs:CreateLogStream", "logs:PutLogEvents"]
XRAY = {"Action": ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], "Effect": "Allow", "Resource": "*"}


def _role_of(public, handler: str) -> str:
    _, fn = _function(public, handler)
    return fn["Properties"]["Role"]["Fn::GetAtt"][0]


def _getatt(public, type_: str, prefix: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [_logical(public, type_, prefix), "Arn"]}


def test_router_role_statements(public) -> None:
    role = _role_of(public, names.ROUTER_HANDLER)
    assert _statements(public, role) == [
        {"Action": LOGS, "Effect": "Allow", "Resource": _getatt(public, "AWS::Logs::LogGroup", "RouterLogs")},
        XRAY,
        {
            "Action": ["dynamodb:GetItem", "dynamodb:Query"],
            "Effect": "Allow",
            "Resource": _getatt(public, "AWS::DynamoDB::Table", "StorageTable"),
        },
        {
            "Action": "sqs:SendMessage",
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [_main_queue(public), "Arn"]},
        },
    ]


# exactly what tests/infra/test_least_privilege.py sees each flow use
RECOMPUTE_TABLE = ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"]
API_TABLE = ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"]


def test_recompute_role_statements(public) -> None:
    role = _role_of(public, names.RECOMPUTE_HANDLER)
    assert _statements(public, role) == [
        {"Action": LOGS, "Effect": "Allow", "Resource": _getatt(public, "AWS::Logs::LogGroup", "RecomputeLogs")},
        XRAY,
        {
            "Action": RECOMPUTE_TABLE,
            "Effect": "Allow",
            "Resource": _getatt(public, "AWS::DynamoDB::Table", "StorageTable"),
        },
        {
            "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
            "Effect": "Allow",
            "Resource": _getatt(public, "AWS::DynamoDB::Table", "StorageIdempotencyTable"),
        },
        {
            "Action": "events:PutEvents",
            "Effect": "Allow",
            "Resource": _getatt(public, "AWS::Events::EventBus", "EventsBus"),
        },
        {
            "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [_main_queue(public), "Arn"]},
        },
        {
            "Action": "eks:DescribeCluster",
            "Effect": "Allow",
            "Resource": own_arn("eks", "cluster/ml-cluster-eks"),
        },
    ]


def test_admin_api_role_statements(public) -> None:
    role = _role_of(public, names.API_HANDLER)
    assert _statements(public, role) == [
        {"Action": LOGS, "Effect": "Allow", "Resource": _getatt(public, "AWS::Logs::LogGroup", "AdminApiLogs")},
        XRAY,
        {"Action": API_TABLE, "Effect": "Allow", "Resource": _getatt(public, "AWS::DynamoDB::Table", "StorageTable")},
        {
            "Action": "events:PutEvents",
            "Effect": "Allow",
            "Resource": _getatt(public, "AWS::Events::EventBus", "EventsBus"),
        },
    ]


def test_registrar_role_statements_and_the_registry_custom_resource(public) -> None:
    role = _role_of(public, names.REGISTRAR_HANDLER)
    assert _statements(public, role) == [
        {"Action": LOGS, "Effect": "Allow", "Resource": _getatt(public, "AWS::Logs::LogGroup", "RegistrarLogs")},
        XRAY,
        {
            "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"],
            "Effect": "Allow",
            "Resource": _getatt(public, "AWS::DynamoDB::Table", "StorageTable"),
        },
    ]
    registrar, fn = _function(public, names.REGISTRAR_HANDLER)
    _, registry = public.only("Custom::IdleshareClusterRegistry")
    assert registry["Properties"]["ServiceToken"] == {"Fn::GetAtt": [registrar, "Arn"]}
    assert registry["Properties"]["Clusters"] == fn["Properties"]["Environment"]["Variables"][names.ENV_CLUSTERS]
    policy = _logical(public, "AWS::IAM::Policy", "RegistrarRoleDefaultPolicy")
    assert policy in registry["DependsOn"]


def test_lambda_roles_trust_lambda_only_and_have_no_managed_policies(public) -> None:
    for handler in (names.ROUTER_HANDLER, names.RECOMPUTE_HANDLER, names.API_HANDLER, names.REGISTRAR_HANDLER):
        role = public.json["Resources"][_role_of(public, handler)]["Properties"]
        assert role["AssumeRolePolicyDocument"]["Statement"] == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
        ]
        assert "ManagedPolicyArns" not in role


def test_forwarding_roles_may_only_put_events_on_idleshare_bus(public) -> None:
    bus = _getatt(public, "AWS::Events::EventBus", "EventsBus")
    forwarding = [k for k in public.resources("AWS::IAM::Role") if k.startswith("EventsForward")]
    assert len(forwarding) == 2
    for role in forwarding:
        assert _statements(public, role) == [{"Action": "events:PutEvents", "Effect": "Allow", "Resource": bus}]


def test_schedule_role_may_only_invoke_the_router(public) -> None:
    role = _logical(public, "AWS::IAM::Role", "EventsScheduleRole")
    router, _ = _function(public, names.ROUTER_HANDLER)
    assert _statements(public, role) == [
        {"Action": "lambda:InvokeFunction", "Effect": "Allow", "Resource": {"Fn::GetAtt": [router, "Arn"]}}
    ]
    trust = public.json["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust[0]["Principal"] == {"Service": "scheduler.amazonaws.com"}


# --- events -------------------------------------------------------------------------------------


def _rules(public) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in public.resources("AWS::Events::Rule").items()}


def test_rule_patterns_exactly(public) -> None:
    rules = _rules(public)
    patterns = {_name: (r["EventBusName"], r["EventPattern"]) for _name, r in rules.items()}
    bus = {"Ref": _logical(public, "AWS::Events::EventBus", "EventsBus")}
    expected = [
        ("default", HYPERPOD_PATTERN),
        ("default", CLOUDTRAIL_PATTERN),
        (bus, HYPERPOD_PATTERN),
        (bus, CLOUDTRAIL_PATTERN),
        (bus, OWN_PATTERN),
    ]

    def canonical(items):
        return sorted(json.dumps(i, sort_keys=True) for i in items)

    assert canonical(patterns.values()) == canonical(expected)


def test_patterns_are_the_shared_names() -> None:
    assert HYPERPOD_PATTERN == {
        "source": ["aws.sagemaker"],
        "detail-type": [
            "SageMaker HyperPod Cluster Node Health Event",
            "SageMaker HyperPod Cluster State Change",
            "SageMaker HyperPod Cluster Event",
        ],
    }
    assert CLOUDTRAIL_PATTERN == {
        "source": ["aws.sagemaker"],
        "detail-type": ["AWS API Call via CloudTrail"],
        "detail": {
            "eventSource": ["sagemaker.amazonaws.com"],
            "eventName": [
                "CreateComputeQuota",
                "UpdateComputeQuota",
                "DeleteComputeQuota",
                "CreateClusterSchedulerConfig",
                "UpdateClusterSchedulerConfig",
                "DeleteClusterSchedulerConfig",
            ],
        },
    }
    assert OWN_PATTERN == {
        "source": ["idleshare"],
        "detail-type": ["Node Changed", "Compute Quota Changed", "Scheduler Config Changed", "Recalculation Requested"],
    }


def test_default_bus_rules_forward_to_idleshare_bus_and_its_rules_invoke_the_router(public) -> None:
    bus = _getatt(public, "AWS::Events::EventBus", "EventsBus")
    router, _ = _function(public, names.ROUTER_HANDLER)
    for name, rule in _rules(public).items():
        (target,) = rule["Targets"]
        assert rule["State"] == "ENABLED"
        if rule["EventBusName"] == "default":
            assert target["Arn"] == bus, name
            assert "RoleArn" in target
        else:
            assert target["Arn"] == {"Fn::GetAtt": [router, "Arn"]}, name
            assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 4}
    # one invoke permission per router rule, scoped to that rule
    perms = [
        p["Properties"]
        for p in public.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert len(perms) == 3
    assert all(p["FunctionName"] == {"Fn::GetAtt": [router, "Arn"]} for p in perms)
    assert all("SourceArn" in p for p in perms)


def test_archive_records_every_trigger_on_idleshare_bus(public) -> None:
    _, archive = public.only("AWS::Events::Archive")
    assert archive["Properties"]["SourceArn"] == _getatt(public, "AWS::Events::EventBus", "EventsBus")
    assert archive["Properties"]["EventPattern"] == {"source": ["idleshare", "aws.sagemaker"]}
    assert archive["Properties"]["RetentionDays"] == 30


def test_safety_net_schedule_invokes_router_with_fixed_input(public) -> None:
    schedule = public.resources("AWS::Scheduler::Schedule")[_logical(public, "AWS::Scheduler::Schedule", "Events")]
    props = schedule["Properties"]
    router, _ = _function(public, names.ROUTER_HANDLER)
    assert props["ScheduleExpression"] == "rate(5 minutes)"
    assert props["State"] == "ENABLED"
    assert props["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert props["Target"]["Arn"] == {"Fn::GetAtt": [router, "Arn"]}
    assert props["Target"]["RoleArn"] == _getatt(public, "AWS::IAM::Role", "EventsScheduleRole")
    assert json.loads(props["Target"]["Input"]) == {
        "source": names.SCHEDULE_SOURCE,
        "detail-type": names.DT_SCHEDULED_RECOMPUTE,
        "detail": {"clusters": "all"},
    }
    assert SCHEDULE_INPUT["source"] == "aws.scheduler"


def test_schedule_rate_comes_from_config(synthesize, sample, tmp_path) -> None:
    one = synthesize(sample | {"schedule_rate_minutes": 1}, tmp=tmp_path)
    schedule = one.resources("AWS::Scheduler::Schedule")[_logical(one, "AWS::Scheduler::Schedule", "Events")]
    assert schedule["Properties"]["ScheduleExpression"] == "rate(1 minute)"


# --- admin API ----------------------------------------------------------------------------------


def test_every_api_method_uses_iam_auth_and_the_validator(public) -> None:
    validator = _logical(public, "AWS::ApiGateway::RequestValidator", "AdminApiGatewayApiValidator")
    methods = public.resources("AWS::ApiGateway::Method")
    assert len(methods) == 2  # ANY on / and on /{proxy+}
    for logical_id, method in methods.items():
        props = method["Properties"]
        assert props["AuthorizationType"] == "AWS_IAM", logical_id
        assert props["HttpMethod"] == "ANY"
        assert props["RequestValidatorId"] == {"Ref": validator}
        assert props["Integration"]["Type"] == "AWS_PROXY"
    public.template.has_resource_properties(
        "AWS::ApiGateway::RequestValidator", {"ValidateRequestBody": True, "ValidateRequestParameters": True}
    )
    public.template.has_resource_properties("AWS::ApiGateway::Resource", {"PathPart": "{proxy+}"})


def test_api_stage_logs_traces_and_throttles(public) -> None:
    _, stage = public.only("AWS::ApiGateway::Stage")
    props = stage["Properties"]
    assert props["StageName"] == "v1"
    assert props["TracingEnabled"] is True
    assert props["AccessLogSetting"]["DestinationArn"] == _getatt(
        public, "AWS::Logs::LogGroup", "AdminApiGatewayAccessLogs"
    )
    assert props["MethodSettings"] == [
        {
            "DataTraceEnabled": False,
            "HttpMethod": "*",
            "LoggingLevel": "ERROR",
            "ResourcePath": "/*",
            "ThrottlingBurstLimit": 40,
            "ThrottlingRateLimit": 20,
        }
    ]
    _, api = public.only("AWS::ApiGateway::RestApi")
    assert api["Properties"]["EndpointConfiguration"] == {"Types": ["REGIONAL"]}


# --- EKS access ---------------------------------------------------------------------------------


def test_access_entry_maps_recompute_role_to_the_rbac_group(public) -> None:
    entry = public.resources("AWS::EKS::AccessEntry")[_logical(public, "AWS::EKS::AccessEntry", "EksAccess")]
    assert entry["Properties"] == {
        "ClusterName": "ml-cluster-eks",
        "PrincipalArn": {"Fn::GetAtt": [_role_of(public, names.RECOMPUTE_HANDLER), "Arn"]},
        "Type": "STANDARD",
        "KubernetesGroups": [names.K8S_GROUP],
    }


# --- observability ------------------------------------------------------------------------------


def test_alarms_notify_the_topic(public) -> None:
    topic = {"Ref": _logical(public, "AWS::SNS::Topic", "ObservabilityAlarmTopic")}
    alarms = {k: v["Properties"] for k, v in public.resources("AWS::CloudWatch::Alarm").items()}
    for prefix in ("DlqDepthAlarm", "RecomputeErrorsAlarm", "PermanentFailuresAlarm", "ShortfallAlarmmlcluster"):
        assert any(k.startswith(f"Observability{prefix}") for k in alarms), prefix
    for name, alarm in alarms.items():
        assert alarm["AlarmActions"] == [topic], name
        # "watch not running": no report from the node watcher is the failure itself
        assert alarm["TreatMissingData"] == ("breaching" if name.startswith("NodeWatch") else "notBreaching"), name
    dlq = next(a for k, a in alarms.items() if k.startswith("ObservabilityDlqDepthAlarm"))
    assert dlq["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert dlq["Dimensions"][0]["Value"] == {
        "Fn::GetAtt": [_logical(public, "AWS::SQS::Queue", "RecomputeQueueDlq"), "QueueName"]
    }
    errors = next(a for k, a in alarms.items() if k.startswith("ObservabilityRecomputeErrorsAlarm"))
    assert (errors["Namespace"], errors["MetricName"]) == ("AWS/Lambda", "Errors")
    shortfall = next(a for k, a in alarms.items() if k.startswith("ObservabilityShortfallAlarmmlcluster"))
    (query,) = shortfall["Metrics"]
    assert query["Expression"] == (
        "SELECT MAX(Shortfall) FROM SCHEMA(\"idleshare\", cluster, flavor, resource, service) WHERE cluster = 'ml-cluster'"
    )
    assert shortfall["ComparisonOperator"] == "GreaterThanThreshold"
    assert shortfall["Threshold"] == 0


def test_a_permanent_recompute_failure_is_alarmed(public) -> None:
    alarms = {k: v["Properties"] for k, v in public.resources("AWS::CloudWatch::Alarm").items()}
    permanent = next(a for k, a in alarms.items() if k.startswith("ObservabilityPermanentFailuresAlarm"))
    assert (permanent["Namespace"], permanent["MetricName"]) == ("idleshare", names.METRIC_PERMANENT_FAILURES)
    assert permanent["Dimensions"] == [{"Name": "service", "Value": names.SERVICE}]
    assert (permanent["Threshold"], permanent["EvaluationPeriods"], permanent["Statistic"]) == (1, 1, "Sum")


def test_a_foreign_field_manager_is_alarmed_per_cluster(public) -> None:
    alarms = {k: v["Properties"] for k, v in public.resources("AWS::CloudWatch::Alarm").items()}
    (foreign,) = [a for k, a in alarms.items() if k.startswith("ObservabilityForeignFieldManagerAlarm")]
    assert (foreign["Namespace"], foreign["MetricName"]) == ("idleshare", names.METRIC_FOREIGN_FIELD_MANAGER)
    # the dimensions the recompute's EMF gauge carries (cluster + Powertools' service)
    assert sorted(d["Name"] for d in foreign["Dimensions"]) == sorted([names.METRIC_DIM_CLUSTER, "service"])
    assert (foreign["Threshold"], foreign["ComparisonOperator"]) == (0, "GreaterThanThreshold")


def test_alarm_topic_enforces_tls_and_has_no_subscription_without_email(public) -> None:
    public.template.resource_count_is("AWS::SNS::Subscription", 0)
    (policy,) = public.resources("AWS::SNS::TopicPolicy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_dashboard_shows_pool_nodes_recompute_and_dlq(public) -> None:
    _, dashboard = public.only("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for needle in (
        "Unallocated capacity per flavor",
        "Borrowable capacity per flavor",
        "Shortfall per flavor",
        "Excluded nodes by reason",
        "Recompute duration",
        "Errors and throttles",
        "DLQ depth",
        'MetricName=\\\\\\"Unallocated\\\\\\"',
        "{idleshare,cluster,reason,service}",
    ):
        assert needle in body, needle


# --- outputs ------------------------------------------------------------------------------------


def test_outputs_for_tests_and_cli(public) -> None:
    outputs = public.json["Outputs"]
    expected = {
        names.OUTPUT_EVENT_BUS_NAME: {"Ref": _logical(public, "AWS::Events::EventBus", "EventsBus")},
        names.OUTPUT_TABLE_NAME: {"Ref": _logical(public, "AWS::DynamoDB::Table", "StorageTable")},
        names.OUTPUT_IDEMPOTENCY_TABLE_NAME: {
            "Ref": _logical(public, "AWS::DynamoDB::Table", "StorageIdempotencyTable")
        },
        names.OUTPUT_QUEUE_URL: {"Ref": _main_queue(public)},
        names.OUTPUT_DLQ_URL: {"Ref": _logical(public, "AWS::SQS::Queue", "RecomputeQueueDlq")},
        names.OUTPUT_RECOMPUTE_ROLE_ARN: {"Fn::GetAtt": [_role_of(public, names.RECOMPUTE_HANDLER), "Arn"]},
        names.OUTPUT_ALARM_TOPIC_ARN: {"Ref": _logical(public, "AWS::SNS::Topic", "ObservabilityAlarmTopic")},
        names.OUTPUT_DASHBOARD_NAME: {"Ref": _logical(public, "AWS::CloudWatch::Dashboard", "ObservabilityDashboard")},
        names.OUTPUT_EVENT_BUS_ARN: _getatt(public, "AWS::Events::EventBus", "EventsBus"),
        names.OUTPUT_ARCHIVE_NAME: {"Ref": _logical(public, "AWS::Events::Archive", "EventsBusArchive")},
    }
    for key, value in expected.items():
        assert outputs[key]["Value"] == value, key
    api_url = json.dumps(outputs[names.OUTPUT_API_URL]["Value"])
    stage = _logical(public, "AWS::ApiGateway::Stage", "AdminApiGatewayApiDeploymentStagev1")
    assert "execute-api" in api_url and json.dumps({"Ref": stage}) in api_url
    assert set(outputs) - {"BootstrapVersion"} == set(expected) | {names.OUTPUT_API_URL}
