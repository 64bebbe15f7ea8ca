"""The node watcher's infrastructure (issue 16): a schedule per cluster, least privilege, EKS access and RBAC
(list/watch nodes only), the "watch not running" alarm and its dashboard widgets."""

from __future__ import annotations

import json
from typing import Any

import yaml

from idleshare import names, timings
from infra.constructs.eks_access import RBAC_MANIFEST
from tests.infra.conftest import as_list, policy_statements


def _watcher(public: Any) -> tuple[str, dict[str, Any]]:
    found = public.template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": names.WATCHER_HANDLER}})
    assert len(found) == 1
    return next(iter(found.items()))


def test_function_sizing_and_environment(public: Any) -> None:
    _, fn = _watcher(public)
    props = fn["Properties"]
    assert (
        props["Timeout"] == timings.WATCHER_FUNCTION_TIMEOUT_SECONDS
        and props["MemorySize"] == timings.WATCHER_MEMORY_MB
    )
    assert set(props["Environment"]["Variables"]) >= set(names.FUNCTION_ENV[names.WATCHER_HANDLER])


def test_one_schedule_per_cluster_every_minute(public: Any) -> None:
    logical, _ = _watcher(public)
    schedules = [
        s["Properties"]
        for k, s in public.resources("AWS::Scheduler::Schedule").items()
        if k.startswith("NodeWatchSchedule")
    ]
    cluster_ids = [c.id for c in public.stack.config.clusters]
    assert sorted(json.loads(s["Target"]["Input"])["cluster"] for s in schedules) == sorted(cluster_ids)
    for s in schedules:
        assert s["ScheduleExpression"] == "rate(1 minute)" and s["Target"]["Arn"] == {"Fn::GetAtt": [logical, "Arn"]}
        # the Lambda outlives the schedule's period: invocations overlap and hand over without a gap
        assert (
            timings.WATCHER_FUNCTION_TIMEOUT_SECONDS - timings.WATCHER_STOP_BEFORE_SECONDS
            > 60 * timings.WATCHER_SCHEDULE_MINUTES
        )


def test_least_privilege(public: Any) -> None:
    _, fn = _watcher(public)
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [s for _, roles, s in policy_statements(public.json) if {"Ref": role} in roles]
    actions = sorted(a for s in statements for a in as_list(s["Action"]))
    assert actions == sorted(
        [
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",  # the checkpoint's parts (issue 20 §3)
            "dynamodb:DeleteItem",  # parts left over by a smaller checkpoint
            "eks:DescribeCluster",
            "events:PutEvents",
            "logs:CreateLogStream",
            "logs:PutLogEvents",
            "xray:PutTelemetryRecords",
            "xray:PutTraceSegments",
        ]
    )
    table = next(s for s in statements if "dynamodb:GetItem" in s["Action"])
    keys = table["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"]
    assert keys == [f"CLUSTER#{c.id}" for c in public.stack.config.clusters]
    assert "*" not in json.dumps([s["Resource"] for s in statements if "xray" not in json.dumps(s["Action"])])


def test_access_entry_maps_the_watcher_role_to_its_own_group(public: Any) -> None:
    _, fn = _watcher(public)
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    entries = [
        e["Properties"] for k, e in public.resources("AWS::EKS::AccessEntry").items() if k.startswith("NodeWatch")
    ]
    assert entries and all(e["KubernetesGroups"] == [names.K8S_WATCHER_GROUP] for e in entries)
    assert all(e["PrincipalArn"] == {"Fn::GetAtt": [role, "Arn"]} for e in entries)


def test_rbac_lets_the_watcher_group_list_and_watch_nodes_and_read_kueues_accounting_only() -> None:
    docs = list(yaml.safe_load_all(RBAC_MANIFEST.read_text()))
    role = next(
        d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == names.K8S_WATCHER_CLUSTER_ROLE
    )
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
        # the usage sample (issue 21): read-only
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "workloads"], "verbs": ["get", "list"]},
    ]
    binding = next(
        d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == names.K8S_WATCHER_CLUSTER_ROLE
    )
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": names.K8S_WATCHER_GROUP}
    ]


def test_watch_not_running_alarm_and_dashboard(public: Any) -> None:
    alarms = {
        k: a["Properties"] for k, a in public.resources("AWS::CloudWatch::Alarm").items() if k.startswith("NodeWatch")
    }
    assert len(alarms) == len(public.stack.config.clusters)
    for alarm in alarms.values():
        assert alarm["MetricName"] == names.METRIC_NODE_WATCH_SECONDS
        assert alarm["TreatMissingData"] == "breaching" and alarm["ComparisonOperator"] == "LessThanThreshold"
        assert {d["Name"] for d in alarm["Dimensions"]} == {names.METRIC_DIM_CLUSTER, "service"}
    body = json.dumps(next(iter(public.resources("AWS::CloudWatch::Dashboard").values())))
    assert "Node watcher" in body and names.METRIC_NODE_CHANGES_PUBLISHED in body
