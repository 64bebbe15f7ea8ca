"""The node watcher's infrastructure: a schedule per cluster that the function outlives, and least privilege (its
flows are not run under moto's IAM enforcement: its actions are listed here, its table access scoped by cluster).
Its access entry and RBAC: test_infra_rbac.py; its alarm: test_infra_stack.py."""

from __future__ import annotations

import json
import re
from typing import Any

from idleshare import names, timings
from tests.infra.conftest import as_list, policy_statements


def _watcher(public: Any) -> tuple[str, dict[str, Any]]:
    found = public.template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": names.WATCHER_HANDLER}})
    assert len(found) == 1
    return next(iter(found.items()))


def test_one_schedule_per_cluster_which_the_function_outlives(public: Any) -> None:
    logical, fn = _watcher(public)
    schedules = [
        s["Properties"]
        for k, s in public.resources("AWS::Scheduler::Schedule").items()
        if k.startswith("NodeWatchSchedule")
    ]
    cluster_ids = [c.id for c in public.stack.config.clusters]
    assert sorted(json.loads(s["Target"]["Input"])["cluster"] for s in schedules) == sorted(cluster_ids)
    for s in schedules:
        assert s["Target"]["Arn"] == {"Fn::GetAtt": [logical, "Arn"]}
        # the timeout allows a hold longer than the schedule's period (node_watch_seconds up to its maximum)
        (minutes,) = re.fullmatch(r"rate\((\d+) minutes?\)", s["ScheduleExpression"]).groups()
        assert fn["Properties"]["Timeout"] - timings.WATCHER_STOP_BEFORE_SECONDS > 60 * int(minutes)


def test_least_privilege(public: Any) -> None:
    _, fn = _watcher(public)
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [s for _, roles, s in policy_statements(public.json) if {"Ref": role} in roles]
    actions = sorted(a for s in statements for a in as_list(s["Action"]))
    assert actions == sorted(
        [
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",  # the checkpoint's parts
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
