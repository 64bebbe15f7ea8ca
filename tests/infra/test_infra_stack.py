"""Template assertions for the public-endpoint shape (the sample config in cdk.json)."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from devkit.sqs import DEPLOYED
from idleshare import names, timings
from infra import stack as stack_module
from infra.constructs.events import HYPERPOD_PATTERN, OWN_PATTERN, SCHEDULE_INPUT
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
    "AWS::Events::Rule": 3,  # HyperPod: forwarded, routed; idleshare's own: routed
    "AWS::IAM::Policy": 8,
    "AWS::IAM::Role": 9,
    "AWS::Lambda::EventInvokeConfig": 1,  # the router's on-failure destination
    "AWS::Lambda::EventSourceMapping": 1,
    "AWS::Lambda::Function": 5,
    "AWS::Lambda::Permission": 6,
    "AWS::Logs::LogGroup": 6,
    "AWS::SNS::Topic": 1,
    "AWS::SNS::TopicPolicy": 1,
    "AWS::SQS::Queue": 3,  # recompute, its DLQ, the router's DLQ
    "AWS::SQS::QueuePolicy": 3,
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


# --- queue: the deployed queue semantics (issue 20 §2), read from the template ----------------------


def _queue(public) -> dict[str, Any]:
    return public.json["Resources"][_main_queue(public)]["Properties"]


def _mapping(public) -> dict[str, Any]:
    _, mapping = public.only("AWS::Lambda::EventSourceMapping")
    return mapping["Properties"]


def _max_receive_count(synth) -> int:
    return int(_queue(synth)["RedrivePolicy"]["maxReceiveCount"])


def test_recompute_queue_is_fifo_without_content_dedup_encrypted_with_redrive_to_its_dlq(public) -> None:
    dlq = _logical(public, "AWS::SQS::Queue", "RecomputeQueueDlq")
    queue = _queue(public)
    assert (queue["FifoQueue"], queue["ContentBasedDeduplication"], queue["SqsManagedSseEnabled"]) == (
        True,
        False,
        True,
    )
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": [dlq, "Arn"]}
    dead = public.json["Resources"][dlq]["Properties"]
    assert (dead["FifoQueue"], dead["ContentBasedDeduplication"], dead["SqsManagedSseEnabled"]) == (True, False, True)
    assert "RedrivePolicy" not in dead
    # a message moved to the DLQ is kept there longer than it could have waited in the queue
    assert dead["MessageRetentionPeriod"] > queue["MessageRetentionPeriod"]


def test_a_failed_record_returns_within_30_seconds(public) -> None:
    # the recompute hands a failed record back with its backoff: its role may, on its queue ...
    queue = {"Fn::GetAtt": [_main_queue(public), "Arn"]}
    role = _role_of(public, names.RECOMPUTE_HANDLER)
    assert any(
        "sqs:ChangeMessageVisibility" in s["Action"] and s["Resource"] == queue and s["Effect"] == "Allow"
        for s in _statements(public, role)
    )
    # ... and no receive before the DLQ waits longer than 30 s
    backoffs = [timings.retry_delay(n) for n in range(1, _max_receive_count(public) + 1)]
    assert max(backoffs) <= 30 and timings.RETRY_MAX_SECONDS <= 30
    assert _mapping(public)["FunctionResponseTypes"] == ["ReportBatchItemFailures"]  # only failed records return


def test_a_lambda_timeout_returns_the_batch_within_30_seconds_of_the_timeout(public) -> None:
    _, fn = _function(public, names.RECOMPUTE_HANDLER)
    timeout, visibility = fn["Properties"]["Timeout"], _queue(public)["VisibilityTimeout"]
    assert timeout <= visibility <= timeout + 30  # Lambda requires >= the function's timeout


def test_the_dlq_comes_only_after_15_minutes_of_failing(public) -> None:
    failing = timings.seconds_to_dlq(_max_receive_count(public))
    assert failing >= 15 * 60
    # and the message is still there to be moved: the queue keeps it longer than that
    assert _queue(public)["MessageRetentionPeriod"] > failing


def test_the_dlq_time_follows_the_configured_receive_count(public, synthesize, sample, tmp_path) -> None:
    longer = synthesize(sample | {"dlq_max_receive_count": 200}, tmp=tmp_path)
    assert _max_receive_count(longer) == 200
    assert timings.seconds_to_dlq(200) > timings.seconds_to_dlq(_max_receive_count(public))


def test_the_queue_delivers_at_once_for_the_leading_edge(public) -> None:
    # a window's leading message is recomputed at once; its trailing one is handed back by the recompute until the
    # window has closed (service/batch.py), so the queue itself delays nothing
    assert _queue(public).get("DelaySeconds", 0) == 0 == timings.QUEUE_DELIVERY_DELAY_SECONDS


def test_the_sqs_source_reports_partial_failures_in_batches_with_a_maximum_concurrency(public) -> None:
    logical_id, fn = _function(public, names.RECOMPUTE_HANDLER)
    mapping = _mapping(public)
    assert mapping["FunctionName"] == {"Ref": logical_id}
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [_main_queue(public), "Arn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert 1 <= mapping["BatchSize"] <= 10  # a FIFO source's limit
    # the poller caps the recomputes (>= 2: Lambda's minimum), so none is throttled: no reserved concurrency
    assert 2 <= mapping["ScalingConfig"]["MaximumConcurrency"] <= 1000
    assert "ReservedConcurrentExecutions" not in fn["Properties"]


def test_the_maximum_concurrency_comes_from_the_config(synthesize, sample, tmp_path) -> None:
    wider = synthesize(sample | {"recompute_max_concurrency": 12}, tmp=tmp_path)
    assert _mapping(wider)["ScalingConfig"]["MaximumConcurrency"] == 12


def test_the_devkit_runs_the_pipeline_as_deployed(public) -> None:
    """Every field of ``devkit.sqs.DEPLOYED`` (what the local pipeline, its fault and burst tests use) is the
    synthesized template's value: the devkit and the template cannot disagree."""
    _, fn = _function(public, names.RECOMPUTE_HANDLER)
    queue, mapping = _queue(public), _mapping(public)
    template = {
        "visibility_timeout": queue["VisibilityTimeout"],
        "delivery_delay": queue.get("DelaySeconds", 0),
        "max_receive_count": queue["RedrivePolicy"]["maxReceiveCount"],
        "batch_size": mapping["BatchSize"],
        "max_concurrency": mapping["ScalingConfig"]["MaximumConcurrency"],
        "function_timeout": fn["Properties"]["Timeout"],
        "report_batch_item_failures": "ReportBatchItemFailures" in mapping.get("FunctionResponseTypes", []),
    }
    assert {f.name for f in dataclasses.fields(DEPLOYED)} == set(template), "a new DEPLOYED field: read it here"
    assert dataclasses.asdict(DEPLOYED) == template


def test_the_devkit_comparison_fails_when_they_disagree(synthesize, sample, tmp_path) -> None:
    other = synthesize(sample | {"dlq_max_receive_count": DEPLOYED.max_receive_count + 1}, tmp=tmp_path)
    with pytest.raises(AssertionError):
        test_the_devkit_runs_the_pipeline_as_deployed(other)


def test_both_queues_deny_non_tls_and_only_eventbridge_may_send_to_the_router_dlq(public) -> None:
    router_dlq = _logical(public, "AWS::SQS::Queue", "RouterDlq")
    rules = [k for k, r in _rules(public).items() if r["EventBusName"] != "default"]
    for logical_id, policy in public.resources("AWS::SQS::QueuePolicy").items():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        deny = [s for s in statements if s["Effect"] == "Deny"]
        assert [s["Condition"] for s in deny] == [{"Bool": {"aws:SecureTransport": "false"}}], logical_id
        assert deny[0]["Action"] == "sqs:*"  # a Deny: the wider the better
        allow = [s for s in statements if s["Effect"] == "Allow"]
        if policy["Properties"]["Queues"] != [{"Ref": router_dlq}]:
            assert allow == [], logical_id
            continue
        # EventBridge, for each rule that invokes the router and for nothing else
        assert all(s["Principal"] == {"Service": "events.amazonaws.com"} for s in allow)
        assert all(s["Action"] == "sqs:SendMessage" for s in allow)
        assert all(s["Resource"] == {"Fn::GetAtt": [router_dlq, "Arn"]} for s in allow)
        scoped = sorted(json.dumps(s["Condition"]["ArnEquals"]["aws:SourceArn"]) for s in allow)
        assert scoped == sorted(json.dumps({"Fn::GetAtt": [rule, "Arn"]}) for rule in rules)


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


def test_no_function_has_reserved_concurrency(public) -> None:
    # the recompute is capped by its event source mapping; the others take what they need
    for logical_id, fn in public.resources("AWS::Lambda::Function").items():
        assert "ReservedConcurrentExecutions" not in fn["Properties"], logical_id


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
        # the on-failure destination: Lambda sends a failed invocation with the router's role
        {
            "Action": "sqs:SendMessage",
            "Effect": "Allow",
            "Resource": _getatt(public, "AWS::SQS::Queue", "RouterDlq"),
        },
    ]


# the stack's grant lists, proved exactly what each flow uses by tests/infra/test_least_privilege.py
RECOMPUTE_TABLE = list(stack_module.RECOMPUTE_TABLE)
API_TABLE = list(stack_module.API_TABLE)
REGISTRAR_TABLE = list(stack_module.REGISTRAR_TABLE)


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
            "Action": [
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:GetQueueAttributes",
                "sqs:ChangeMessageVisibility",  # a failed record handed back with its backoff
            ],
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
            "Action": REGISTRAR_TABLE,
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
    assert len(forwarding) == 1
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
    # no rule for SageMaker's CloudTrail compute-quota / scheduler-config calls: nothing reads SageMaker's quotas
    expected = [("default", HYPERPOD_PATTERN), (bus, HYPERPOD_PATTERN), (bus, OWN_PATTERN)]

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
    assert OWN_PATTERN == {
        "source": ["idleshare"],
        "detail-type": ["Node Changed", "Compute Quota Changed", "Scheduler Config Changed", "Recalculation Requested"],
    }


def test_no_rule_takes_cloudtrail_calls(public) -> None:
    patterns = json.dumps([r["EventPattern"] for r in _rules(public).values()])
    assert names.DT_CLOUDTRAIL not in patterns
    assert not any(name in patterns for name in names.CLOUDTRAIL_EVENT_NAMES)


def test_default_bus_rules_forward_to_idleshare_bus_and_its_rules_invoke_the_router(public) -> None:
    bus = _getatt(public, "AWS::Events::EventBus", "EventsBus")
    router_dlq = _getatt(public, "AWS::SQS::Queue", "RouterDlq")
    router, _ = _function(public, names.ROUTER_HANDLER)
    for name, rule in _rules(public).items():
        (target,) = rule["Targets"]
        assert rule["State"] == "ENABLED"
        if rule["EventBusName"] == "default":
            assert target["Arn"] == bus, name
            assert "RoleArn" in target
        else:
            assert target["Arn"] == {"Fn::GetAtt": [router, "Arn"]}, name
            # retried by EventBridge, then kept in the router's DLQ: never dropped
            assert target["RetryPolicy"]["MaximumRetryAttempts"] > 0, name
            assert target["DeadLetterConfig"] == {"Arn": router_dlq}, name
    # one invoke permission per router rule, scoped to that rule
    perms = [
        p["Properties"]
        for p in public.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert len(perms) == 2
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


# --- router failures (issue 20 §5) ------------------------------------------------------------------


def test_failed_router_invocations_go_to_the_router_dlq_after_lambdas_retries(public) -> None:
    router, _ = _function(public, names.ROUTER_HANDLER)
    router_dlq = _getatt(public, "AWS::SQS::Queue", "RouterDlq")
    logical_id, config = public.only("AWS::Lambda::EventInvokeConfig")
    props = config["Properties"]
    assert props["FunctionName"] == {"Ref": router}
    assert props["DestinationConfig"] == {"OnFailure": {"Destination": router_dlq}}
    assert props["MaximumRetryAttempts"] >= 1
    # Lambda checks the role may send to the destination when it is set: the policy is attached before
    policy = _logical(public, "AWS::IAM::Policy", "RouterRoleDefaultPolicy")
    assert policy in config["DependsOn"], logical_id


def test_the_router_dlq_is_a_standard_encrypted_queue_that_keeps_failures_two_weeks(public) -> None:
    queue = public.json["Resources"][_logical(public, "AWS::SQS::Queue", "RouterDlq")]["Properties"]
    assert "FifoQueue" not in queue  # EventBridge dead-letter queues and Lambda destinations are standard queues
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600  # SQS's longest: time to look and replay
    assert "RedrivePolicy" not in queue


def test_a_message_in_the_router_dlq_is_alarmed(public) -> None:
    topic = {"Ref": _logical(public, "AWS::SNS::Topic", "ObservabilityAlarmTopic")}
    (alarm,) = [
        a["Properties"]
        for k, a in public.resources("AWS::CloudWatch::Alarm").items()
        if k.startswith("ObservabilityRouterDlqDepthAlarm")
    ]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [_logical(public, "AWS::SQS::Queue", "RouterDlq"), "QueueName"]}}
    ]
    # any message: one datapoint at or above 1
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert (alarm["EvaluationPeriods"], alarm["Statistic"]) == (1, "Maximum")
    assert alarm["AlarmActions"] == [topic]


# --- a cluster removed from the config (issue 20 §5) ---------------------------------------------


def _mentions(synth, needle: str) -> dict[str, str]:
    """Logical id -> type of every resource whose definition names ``needle``."""
    return {k: r["Type"] for k, r in synth.json["Resources"].items() if needle in json.dumps(r)}


def test_a_removed_clusters_schedule_alarms_and_access_go_with_it(synthesize, sample, tmp_path) -> None:
    two = copy.deepcopy(sample)
    two["clusters"].append({"id": "research", "eks_cluster_name": "research-eks"})
    before = synthesize(two, tmp=tmp_path / "before")
    after = synthesize(sample, tmp=tmp_path / "after")

    per_cluster = set(_mentions(before, "research").values())
    assert {"AWS::Scheduler::Schedule", "AWS::CloudWatch::Alarm", "AWS::EKS::AccessEntry"} <= per_cluster
    assert _mentions(after, "research") == {}
    # the kept cluster's are untouched
    assert set(_mentions(after, "ml-cluster").values()) >= {"AWS::Scheduler::Schedule", "AWS::CloudWatch::Alarm"}
    # and the registry custom resource is updated with the new list: CloudFormation hands the registrar the old
    # one as OldResourceProperties, and it deregisters the removed cluster (tests/unit/test_registrar_lifecycle.py)
    (old,), (new,) = (s.resources("Custom::IdleshareClusterRegistry").values() for s in (before, after))
    assert [c["id"] for c in json.loads(old["Properties"]["Clusters"])] == ["ml-cluster", "research"]
    assert [c["id"] for c in json.loads(new["Properties"]["Clusters"])] == ["ml-cluster"]


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
    for prefix in (
        "DlqDepthAlarm",
        "RouterDlqDepthAlarm",
        "RecomputeErrorsAlarm",
        "PermanentFailuresAlarm",
        "ShortfallAlarmmlcluster",
    ):
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
        'MetricName=\\\\\\"BorrowLimitSum\\\\\\"',
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
        names.OUTPUT_ROUTER_DLQ_URL: {"Ref": _logical(public, "AWS::SQS::Queue", "RouterDlq")},
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
