"""What the template decides that no other test sees, read from the synthesized app (the sample config in cdk.json):
which resource each role's grants are on, the queue's timings against ``idleshare.timings`` and the devkit,
events reaching the router and never dropped, the alarms watching what exists, what a config change does.

Elsewhere: each role's actions are exactly what its flows use (test_least_privilege.py, moto's IAM enforcement);
no wildcard, only the stack's own resources, SigV4 only (test_infra_iam.py); each function's variables, the
registry custom resource and every alarm's action (test_deploy_check.py); cdk-nag, cfn-lint, TLS-only resource
policies (test_infra_security.py); the access entries against rbac.yaml (test_infra_rbac.py).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from devkit.sqs import DEPLOYED
from idleshare import names, timings
from idleshare.parse.events import KNOWN_DETAIL_TYPES, parse_event
from infra.bundling import PYTHON_PLATFORM, PYTHON_VERSION
from tests.infra.conftest import as_list, policy_statements

REPO_ROOT = Path(__file__).resolve().parents[2]
INBOUND = REPO_ROOT / "events" / "inbound"
# Each role of the template: the service that assumes it, and per AWS service the resources (logical ids without
# CDK's hash, or the end of an ARN the stack builds) its statements may name. X-Ray's Resource "*" is
# test_infra_iam.py's. A grant on the wrong resource of the stack is a mistake only this catches.
ROLES = {
    # the router's DLQ: Lambda sends a failed invocation to its on-failure destination with the router's role
    "RouterRole": (
        "lambda",
        {"logs": {"RouterLogs"}, "dynamodb": {"StorageTable"}, "sqs": {"RecomputeQueue", "RouterDlqQueue"}},
    ),
    "RecomputeRole": (
        "lambda",
        {
            "logs": {"RecomputeLogs"},
            "dynamodb": {"StorageTable", "StorageIdempotencyTable"},
            "sqs": {"RecomputeQueue"},
            "events": {"EventsBus"},
            "eks": {":cluster/ml-cluster-eks"},
        },
    ),
    "AdminApiRole": ("lambda", {"logs": {"AdminApiLogs"}, "dynamodb": {"StorageTable"}, "events": {"EventsBus"}}),
    "RegistrarRole": ("lambda", {"logs": {"RegistrarLogs"}, "dynamodb": {"StorageTable"}}),
    "NodeWatcherRole": (
        "lambda",
        {
            "logs": {"NodeWatcherLogs"},
            "dynamodb": {"StorageTable"},
            "events": {"EventsBus"},
            "eks": {":cluster/ml-cluster-eks"},
        },
    ),
    "EventsForwardHyperPodEventsRole": ("events", {"events": {"EventsBus"}}),
    "EventsScheduleRole": ("scheduler", {"lambda": {"RouterFunction"}}),
    "NodeWatchScheduleRole": ("scheduler", {"lambda": {"NodeWatcherFunction"}}),
    # (no API Gateway account-wide logging role: the account's unless the config opts in, tests/infra/test_infra_api.py)
}


def _name(logical_id: str) -> str:
    """A logical id without CDK's hash: the construct's path."""
    return re.sub(r"[0-9A-F]{8}$", "", logical_id)


def _target(value: Any) -> str:
    """What a Ref, a GetAtt or an ARN the stack builds (Fn::Join) names."""
    if "Ref" in value:
        return _name(value["Ref"])
    if "Fn::GetAtt" in value:
        return _name(value["Fn::GetAtt"][0])
    return value["Fn::Join"][1][-1]


def _function(synth: Any, handler: str) -> tuple[str, dict[str, Any]]:
    (found,) = synth.template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": handler}}).items()
    return found


def _resource(synth: Any, name: str) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, r["Properties"]) for k, r in synth.json["Resources"].items() if _name(k) == name]
    return found


def _queue(synth: Any) -> dict[str, Any]:
    return _resource(synth, "RecomputeQueue")[1]


def _mapping(synth: Any) -> dict[str, Any]:
    return synth.only("AWS::Lambda::EventSourceMapping")[1]["Properties"]


def _rules(synth: Any) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in synth.resources("AWS::Events::Rule").items()}


# --- IAM: each grant on the right resource, each role assumed by the one service that runs it -------------------


def test_each_role_is_assumed_by_its_service_and_reaches_only_its_own_resources(public) -> None:
    roles = {_name(k): k for k in public.resources("AWS::IAM::Role")}
    assert set(roles) == set(ROLES), "a new role: say here which service assumes it and what it may reach"
    for name, (service, scopes) in ROLES.items():
        trust = public.json["Resources"][roles[name]]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": f"{service}.amazonaws.com"}}
        ], name
        reached: dict[str, set[str]] = {}
        for _, attached, statement in policy_statements(public.json):
            if {"Ref": roles[name]} in attached:
                for action in as_list(statement["Action"]):
                    targets = {_target(r) for r in as_list(statement["Resource"]) if r != "*"}
                    reached.setdefault(action.split(":")[0], set()).update(targets)
        reached.pop("xray", None)
        assert reached == scopes, name


# --- the stack's data outlives it; the functions run what the asset is built for ---------------------------------


def test_the_main_table_is_retained_and_the_functions_run_the_assets_platform(public) -> None:
    logical_id, _ = _resource(public, "StorageTable")
    assert public.json["Resources"][logical_id]["DeletionPolicy"] == "Retain"  # pools, quotas, history: kept
    arch = "arm64" if PYTHON_PLATFORM.startswith("aarch64") else "x86_64"
    for logical_id, fn in public.resources("AWS::Lambda::Function").items():
        # the wheels are cp312 for PYTHON_PLATFORM: another runtime or architecture could not import them
        props = fn["Properties"]
        assert (props["Runtime"], props["Architectures"]) == (f"python{PYTHON_VERSION}", [arch]), logical_id
        # the recompute is capped by its event source (a throttled batch's receives would count toward the DLQ)
        assert "ReservedConcurrentExecutions" not in props, logical_id
        assert "VpcConfig" not in props, "public endpoints: no VPC"


def test_what_docs_operations_says_cdk_destroy_keeps_is_what_the_template_retains(public) -> None:
    # Given the resources `cdk destroy` would leave (DeletionPolicy Retain, or Snapshot)
    kept = {
        k: r["Type"]
        for k, r in public.json["Resources"].items()
        if r.get("DeletionPolicy", "Delete") != "Delete" or r.get("UpdateReplacePolicy", "Delete") != "Delete"
    }
    # Then it is the main table alone, as "Removing and upgrading" says, naming the output that finds it
    assert list(kept.values()) == ["AWS::DynamoDB::Table"] and next(iter(kept)) == _resource(public, "StorageTable")[0]
    docs = (REPO_ROOT / "docs" / "operations.md").read_text()
    destroy = docs[docs.index("### What `cdk destroy` removes and keeps") : docs.index("### Upgrading")]
    assert f"It **keeps** the main table (`{names.OUTPUT_TABLE_NAME}` output" in destroy
    assert "the only resource with `DeletionPolicy: Retain`" in destroy


# --- the recompute queue as deployed: its timings are idleshare.timings' -----------------------------------------


def _max_receive_count(synth: Any) -> int:
    return int(_queue(synth)["RedrivePolicy"]["maxReceiveCount"])


def test_the_queue_and_its_dlq_are_fifo_and_the_dlq_keeps_a_message_longer(public) -> None:
    queue, (dlq_id, dlq) = _queue(public), _resource(public, "RecomputeQueueDlq")
    assert queue["FifoQueue"] is dlq["FifoQueue"] is True  # per-cluster groups and the windows' dedup ids
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": [dlq_id, "Arn"]}
    assert dlq["MessageRetentionPeriod"] > queue["MessageRetentionPeriod"]


def test_a_failed_record_returns_within_30_seconds(public) -> None:
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


def test_the_queue_feeds_the_recompute_at_once_in_fifo_sized_batches(public) -> None:
    # a window's leading message is recomputed at once; its trailing one is handed back by the recompute until the
    # window has closed (service/batch.py), so the queue itself delays nothing
    assert _queue(public).get("DelaySeconds", 0) == 0 == timings.QUEUE_DELIVERY_DELAY_SECONDS
    logical_id, _ = _function(public, names.RECOMPUTE_HANDLER)
    mapping = _mapping(public)
    assert (mapping["FunctionName"], _target(mapping["EventSourceArn"])) == ({"Ref": logical_id}, "RecomputeQueue")
    assert 1 <= mapping["BatchSize"] <= 10  # a FIFO source's limit


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


def test_the_config_reaches_the_template_and_the_devkit_comparison_fails_when_they_disagree(
    synthesize, sample, tmp_path
) -> None:
    other = synthesize(
        sample
        | {"dlq_max_receive_count": DEPLOYED.max_receive_count + 1, "recompute_max_concurrency": 12}
        | {"schedule_rate_minutes": 1},
        tmp=tmp_path,
    )
    assert _max_receive_count(other) == DEPLOYED.max_receive_count + 1
    assert _mapping(other)["ScalingConfig"]["MaximumConcurrency"] == 12
    assert _resource(other, "EventsSafetyNetSchedule")[1]["ScheduleExpression"] == "rate(1 minute)"
    with pytest.raises(AssertionError):
        test_the_devkit_runs_the_pipeline_as_deployed(other)


# --- events: every trigger reaches the router, none is dropped ---------------------------------------------------


def _samples() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(INBOUND.glob("*.json"))]


def test_the_router_reads_exactly_the_events_the_rules_and_the_schedule_deliver_and_the_archive_keeps(public) -> None:
    rules = _rules(public)
    forwarded = [r["EventPattern"] for r in rules.values() if r["EventBusName"] == "default"]
    routed = [r["EventPattern"] for r in rules.values() if r["EventBusName"] != "default"]
    assert forwarded and all(p in routed for p in forwarded)  # what the default bus forwards is routed
    for pattern in routed:
        for detail_type in pattern["detail-type"]:
            # a sample of it (events/inbound) that the router's parser reads
            (source,) = pattern["source"]
            matching = [s for s in _samples() if (s["source"], s["detail-type"]) == (source, detail_type)]
            assert matching, f"no sample in events/inbound of {source} {detail_type!r}"
            for sample in matching:
                parse_event(sample)
    (archive,) = public.resources("AWS::Events::Archive").values()
    assert sorted(archive["Properties"]["EventPattern"]["source"]) == sorted(s for p in routed for s in p["source"])
    # and the other way: the router reads nothing a rule or the schedule does not deliver (no dead path)
    delivered = {(source, t) for p in routed for source in p["source"] for t in p["detail-type"]}
    _, schedule = _resource(public, "EventsSafetyNetSchedule")
    scheduled = json.loads(schedule["Target"]["Input"])
    delivered.add((scheduled["source"], scheduled["detail-type"]))
    assert {t for _, t in delivered} == set(KNOWN_DETAIL_TYPES)
    assert {(s["source"], s["detail-type"]) for s in _samples()} == delivered


def test_the_safety_net_invokes_the_router_with_an_event_it_reads(public) -> None:
    _, schedule = _resource(public, "EventsSafetyNetSchedule")
    assert _target(schedule["Target"]["Arn"]) == "RouterFunction"
    assert parse_event(json.loads(schedule["Target"]["Input"])).detail_type == names.DT_SCHEDULED_RECOMPUTE


def test_an_event_the_router_cannot_take_is_retried_then_kept_in_its_dlq(public) -> None:
    router, _ = _function(public, names.ROUTER_HANDLER)
    router_rules = {k: r for k, r in _rules(public).items() if r["EventBusName"] != "default"}
    for name, rule in router_rules.items():
        (target,) = rule["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [router, "Arn"]}, name
        assert target["RetryPolicy"]["MaximumRetryAttempts"] > 0, name
        assert _target(target["DeadLetterConfig"]["Arn"]) == "RouterDlqQueue", name
    # one invoke permission per router rule, scoped to that rule
    perms = [p["Properties"] for p in public.resources("AWS::Lambda::Permission").values()]
    scoped = [p["SourceArn"] for p in perms if p["Principal"] == "events.amazonaws.com"]
    assert sorted(map(_target, scoped)) == sorted(_name(k) for k in router_rules)
    # a failed asynchronous invocation too; Lambda checks the role may send there when the destination is set,
    # so the policy is attached first (a first deploy fails otherwise)
    logical_id, config = public.only("AWS::Lambda::EventInvokeConfig")
    assert _target(config["Properties"]["DestinationConfig"]["OnFailure"]["Destination"]) == "RouterDlqQueue"
    assert _resource(public, "RouterRoleDefaultPolicy")[0] in config["DependsOn"], logical_id
    # EventBridge dead-letter queues and Lambda destinations are standard queues
    assert "FifoQueue" not in _resource(public, "RouterDlqQueue")[1]


# --- a cluster removed from the config ------------------------------------------------------------------------


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


# --- alarms: each watches something that exists ------------------------------------------------------------------

EMITTED = {v for k, v in vars(names).items() if k.startswith("METRIC_") and not k.startswith("METRIC_DIM_")}
DIMENSIONS = {v for k, v in vars(names).items() if k.startswith("METRIC_DIM_")} | {"service"}


def test_every_alarm_watches_a_dlq_a_function_or_a_metric_idleshare_emits(public) -> None:
    clusters = {c.id for c in public.stack.config.clusters}
    assert public.resources("AWS::SNS::Subscription") == {}  # no alarm_email: nobody to subscribe
    watched = set()  # (what, threshold, comparison) of every alarm
    for logical_id, alarm in public.resources("AWS::CloudWatch::Alarm").items():
        props = alarm["Properties"]
        dims = {d["Name"]: d["Value"] for d in props.get("Dimensions", [])}
        if props.get("Namespace") == "AWS/SQS":  # a message in a dead-letter queue: the main queue's depth is normal
            assert _target(dims["QueueName"]) in {"RecomputeQueueDlq", "RouterDlqQueue"}, logical_id
            what = _target(dims["QueueName"])
        elif props.get("Namespace") == "AWS/Lambda":
            assert _target(dims["FunctionName"]) in {_name(k) for k in public.resources("AWS::Lambda::Function")}
            what = f"{_target(dims['FunctionName'])} {props['MetricName']}"
        elif "Metrics" in props:  # a Metrics Insights query over idleshare's gauges, per cluster
            (query,) = props["Metrics"]
            found = re.fullmatch(
                r'SELECT MAX\((\w+)\) FROM SCHEMA\("(\w+)", ([\w, ]+)\) WHERE (\w+) = \'([\w-]+)\'', query["Expression"]
            )
            assert found, query["Expression"]
            metric, namespace, schema, where, cluster = found.groups()
            assert metric in EMITTED and namespace == names.METRICS_NAMESPACE, logical_id
            assert set(schema.split(", ")) <= DIMENSIONS and where == names.METRIC_DIM_CLUSTER, logical_id
            assert cluster in clusters, logical_id
            what = f"{metric} {cluster}"
        else:
            assert props["Namespace"] == names.METRICS_NAMESPACE and props["MetricName"] in EMITTED, logical_id
            assert set(dims) <= DIMENSIONS and dims["service"] == names.SERVICE, logical_id
            assert dims.get(names.METRIC_DIM_CLUSTER, next(iter(clusters))) in clusters, logical_id
            what = " ".join([props["MetricName"], *([dims[names.METRIC_DIM_CLUSTER]] if len(dims) > 1 else [])])
        watched.add((what, props["Threshold"], props["ComparisonOperator"]))
        # no data is normal for an error or a depth; for the node watcher's heartbeat it is the failure itself
        heartbeat = props.get("MetricName") == names.METRIC_NODE_WATCH_SECONDS
        assert props["TreatMissingData"] == ("breaching" if heartbeat else "notBreaching"), logical_id
    # every alarm docs/operations.md lists is there, with its threshold: one in a DLQ, a failure, a conflict...
    at_least, above, below = "GreaterThanOrEqualToThreshold", "GreaterThanThreshold", "LessThanThreshold"
    (cluster,) = clusters
    assert watched == {
        ("RecomputeQueueDlq", 1, at_least),
        ("RouterDlqQueue", 1, at_least),
        ("RecomputeFunction Errors", 1, at_least),
        (names.METRIC_PERMANENT_FAILURES, 1, at_least),
        (f"{names.METRIC_SHORTFALL} {cluster}", 0, above),
        (f"{names.METRIC_IDLE_WHILE_PENDING} {cluster}", 0, above),
        (f"{names.METRIC_FOREIGN_FIELD_MANAGER} {cluster}", 0, above),
        (f"{names.METRIC_FOREIGN_OBJECTS} {cluster}", 0, above),
        (f"{names.METRIC_OBJECTS_REFUSED} {cluster}", 0, above),
        (f"{names.METRIC_FIELD_MANAGER_FIGHTS} {cluster}", 0, above),
        (f"{names.METRIC_QUOTA_OVERRIDDEN} {cluster}", 0, above),
        (f"{names.METRIC_UNBOUND_PODS_OLDEST_SECONDS} {cluster}", timings.UNBOUND_PODS_ALARM_MINUTES * 60, at_least),
        (
            f"{names.METRIC_NODE_WATCH_SECONDS} {cluster}",
            timings.WATCHER_ALARM_MINUTES * timings.DEFAULT_NODE_WATCH_SECONDS / 2,
            below,
        ),
    }


# --- outputs ------------------------------------------------------------------------------------------------


def test_every_output_idleshare_names_exists_and_resolves(public) -> None:
    outputs = public.json["Outputs"]
    wanted = {v for k, v in vars(names).items() if k.startswith("OUTPUT_")}
    assert set(outputs) - {"BootstrapVersion"} == wanted
    resources = {_name(k) for k in public.json["Resources"]}
    targets = {key: _target(outputs[key]["Value"]) for key in wanted - {names.OUTPUT_API_URL}}
    assert set(targets.values()) <= resources
    assert targets == {  # each output names its own resource (a swapped pair would send the CLI to the wrong one)
        names.OUTPUT_TABLE_NAME: "StorageTable",
        names.OUTPUT_IDEMPOTENCY_TABLE_NAME: "StorageIdempotencyTable",
        names.OUTPUT_QUEUE_URL: "RecomputeQueue",
        names.OUTPUT_DLQ_URL: "RecomputeQueueDlq",
        names.OUTPUT_ROUTER_DLQ_URL: "RouterDlqQueue",
        names.OUTPUT_EVENT_BUS_NAME: "EventsBus",
        names.OUTPUT_EVENT_BUS_ARN: "EventsBus",
        names.OUTPUT_ARCHIVE_NAME: "EventsBusArchive",
        names.OUTPUT_RECOMPUTE_ROLE_ARN: "RecomputeRole",
        names.OUTPUT_ALARM_TOPIC_ARN: "ObservabilityAlarmTopic",
        names.OUTPUT_DASHBOARD_NAME: "ObservabilityDashboard",
    }
    # the CLI finds the admin API by this output (cli/remote.py): the stage's URL
    api_url = json.dumps(outputs[names.OUTPUT_API_URL]["Value"])
    assert "execute-api" in api_url and '"Ref": "AdminApiGatewayApiDeploymentStagev1' in api_url
