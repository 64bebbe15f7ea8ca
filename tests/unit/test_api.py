"""The admin HTTP API (idleshare.api.app) through API Gateway REST proxy events, on the real DynamoStore
(moto): every route, every error status, validation that names each field and changes nothing, the
events each write puts on idleshare's bus, the OpenAPI document. Given / When / Then."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devkit.lambda_context import LambdaContext
from idleshare import names
from idleshare.adapters.errors import RetryableError
from idleshare.adapters.ports import ClusterRecord
from idleshare.adapters.store import DynamoStore
from idleshare.runtime import wiring
from idleshare.service.recompute import Recomputer
from tests.aws_env import create_table, fake_aws_env
from tests.builders import quota_body
from tests.fakes import FakeKube, FakePublisher

CONTEXT = LambdaContext(function_name="admin-api", account="111122223333", aws_request_id="lambda-req-1")
P5 = "ml.p5.48xlarge"
GPU = "nvidia.com/gpu"


# ----------------------------------------------------------------------------------------- helpers
def proxy_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    signed: bool = True,
    request_id: str = "c0ffee00-0000-4000-8000-000000000001",
) -> dict[str, Any]:
    """What API Gateway (REST API, Lambda proxy, resource ``/{proxy+}``, stage ``v1``) sends the Lambda."""
    raw = body if body is None or isinstance(body, str) else json.dumps(body)
    hdrs = {"Host": "abc123.execute-api.us-east-1.amazonaws.com", "User-Agent": "idleshare-cli"}
    if raw:
        hdrs["Content-Type"] = "application/json"
    hdrs.update(headers or {})
    principal = {
        "accountId": "111122223333",
        "caller": "AIDAEXAMPLEEXAMPLE",
        "user": "AIDAEXAMPLEEXAMPLE",
        "userArn": "arn:aws:iam::111122223333:user/admin",
        "accessKey": "ASIAEXAMPLE",
    }
    identity: dict[str, Any] = {"sourceIp": "198.51.100.7", "userAgent": "idleshare-cli", "apiKey": None}
    identity.update(principal if signed else dict.fromkeys(principal))
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": hdrs,
        "multiValueHeaders": {k: [v] for k, v in hdrs.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourceId": "r1",
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "requestId": request_id,
            "path": f"/v1{path}",
            "stage": "v1",
            "accountId": "111122223333",
            "apiId": "abc123",
            "protocol": "HTTP/1.1",
            "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
            "identity": identity,
        },
        "body": raw,
        "isBase64Encoded": False,
    }


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, Any]


def call(method: str, path: str, body: Any = None, **kwargs: Any) -> Reply:
    from idleshare.api import app

    out = app.handler(proxy_event(method, path, body=body, **kwargs), CONTEXT)
    headers = {k: v for k, v in (out.get("headers") or {}).items()}
    headers.update({k: v[0] for k, v in (out.get("multiValueHeaders") or {}).items() if v})
    text = out.get("body") or ""
    is_json = "json" in str(headers.get("Content-Type", ""))
    return Reply(out["statusCode"], json.loads(text) if text and is_json else text, headers)


def k8s_node(name: str, gpus: int = 8, ready: str = "True") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "node.kubernetes.io/instance-type": P5,
                "sagemaker.amazonaws.com/node-health-status": "Schedulable",
            },
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "191450m", "memory": "2000Gi", GPU: str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


@pytest.fixture(scope="module")
def aws() -> Iterator[None]:
    # one moto mock per module (starting one costs ~1 s); each test gets its own table
    with fake_aws_env(POWERTOOLS_TRACE_DISABLED="1", POWERTOOLS_METRICS_NAMESPACE="idleshare"), mock_aws():
        yield


class World:
    """A governed cluster ``demo`` on a fresh table, idleshare's bus as a FakePublisher, a 4-node cluster."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.store = DynamoStore(table)
        self.publisher = FakePublisher()
        self.kube = FakeKube([k8s_node(f"p5-{i}") for i in range(4)])
        self.store.put_cluster(
            ClusterRecord("demo", "demo-eks", "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdef123456")
        )
        self.deps = wiring.Dependencies(store=self.store, publisher=self.publisher, kube_for=lambda c: self.kube)
        wiring.install(self.deps)

    def items(self) -> list[dict[str, Any]]:
        """Everything stored, in a stable order (to show that a refused request changed nothing)."""
        return sorted(self.table.scan(ConsistentRead=True)["Items"], key=lambda i: (i["pk"], i["sk"]))

    def recompute(self) -> Any:
        return Recomputer(self.store, lambda c: self.kube, FakePublisher()).recompute("demo")


@pytest.fixture
def world(aws: None, request: pytest.FixtureRequest) -> Iterator[World]:
    table = create_table(boto3.resource("dynamodb", region_name="us-east-1"), f"t-{abs(hash(request.node.nodeid))}")
    try:
        yield World(table)
    finally:
        wiring.install(None)
        table.delete()


def fields(reply: Reply) -> list[str]:
    return [e["field"] for e in reply.body["errors"]]


def eks_names(count: int, seed: int = 7) -> list[str]:
    """``count`` distinct EKS-shaped node names in random order (``ip-10-1-2-3.us-west-2.compute.internal``)."""
    import random

    rng = random.Random(seed)
    names_: set[str] = set()
    while len(names_) < count:
        a, b, c = rng.randrange(256), rng.randrange(256), rng.randrange(256)
        names_.add(f"ip-10-{a}-{b}-{c}.us-west-2.compute.internal")
    out = sorted(names_)
    rng.shuffle(out)
    return out


def store_excluded(world: World, excluded: dict[str, str]) -> None:
    """Generation 1 of ``demo``, with ``excluded`` as its excluded nodes (a synthetic pool document)."""
    from idleshare.adapters.ports import PoolRecord

    pool = {"teams": {}, "unallocated": {}, "excludedNodes": excluded}
    world.store.put_pool(PoolRecord("demo", 1, "d1", pool, "2026-01-01T00:00:00+00:00"), expected_generation=0)


# -------------------------------------------------------------------------------------------- clusters
def test_list_clusters_names_each_governed_cluster(world: World) -> None:
    reply = call("GET", "/clusters")
    assert reply.status == 200
    assert reply.body == {
        "Clusters": [
            {
                "ClusterId": "demo",
                "EksClusterName": "demo-eks",
                "HyperPodClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdef123456",
            }
        ]
    }


# --------------------------------------------------------------------------------------- compute quotas
def test_create_quota_answers_201_with_the_describe_shape_and_emits_quota_changed(world: World) -> None:
    # Given a governed cluster, When a quota is created
    reply = call(
        "POST", "/clusters/demo/compute-quotas", quota_body("a", Description="research", ActivationState="Enabled")
    )
    # Then 201 with DescribeComputeQuota's shape at version 1
    assert reply.status == 201
    body = reply.body
    assert (body["Name"], body["ComputeQuotaVersion"], body["Status"], body["ClusterId"]) == (
        "a-quota",
        1,
        "Created",
        "demo",
    )
    assert len(body["ComputeQuotaId"]) == 12 and body["CreationTime"] == body["LastModifiedTime"]
    assert body["ComputeQuotaConfig"] == quota_body("a")["ComputeQuotaConfig"]
    assert (body["ComputeQuotaTarget"], body["ActivationState"], body["Description"]) == (
        {"TeamName": "a"},
        "Enabled",
        "research",
    )
    # And it is stored, And Compute Quota Changed is on idleshare's bus
    assert world.store.get_quota("demo", "a-quota").version == 1
    assert world.publisher.events == [
        (
            names.DT_QUOTA_CHANGED,
            {"cluster": "demo", "quotaName": "a-quota", "reason": "CreateComputeQuota (admin API)"},
        )
    ]


BAD_CREATES = [
    pytest.param(
        quota_body("a")
        | {"ComputeQuotaConfig": {"ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 20000}}},
        ["ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit"],
        id="borrow-limit-over-botocore-max",
    ),
    pytest.param(
        quota_body("a") | {"ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": P5, "Count": -1}]}},
        ["ComputeQuotaConfig.ComputeQuotaResources[0].Count"],
        id="negative-count",
    ),
    pytest.param(
        quota_body("a")
        | {"ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "ml.p9.huge", "Count": 1}]}},
        ["ComputeQuotaConfig.ComputeQuotaResources[0].InstanceType"],
        id="unknown-instance-type",
    ),
    pytest.param(
        quota_body("a") | {"ComputeQuotaTarget": {"TeamName": "Team_A"}, "ActivationState": "On"},
        ["ComputeQuotaTarget.TeamName", "ActivationState"],
        id="team-pattern-and-enum",
    ),
    pytest.param(
        quota_body("a") | {"ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdef123456"},
        ["ClusterArn"],
        id="cluster-arn-is-the-path",
    ),
    pytest.param(
        {"Name": "a-quota", "ComputeQuotaTarget": {"TeamName": "a"}}, ["ComputeQuotaConfig"], id="missing-config"
    ),
    pytest.param(quota_body("a") | {"ComputeQuotaConfg": {}}, ["ComputeQuotaConfg"], id="misspelled-key"),
    pytest.param(
        quota_body("a") | {"Description": "x" * 1025, "Tags": [{"Key": "", "Value": "v"}, {"Key": "k"}]},
        ["Description", "Tags[0].Key", "Tags[1].Value"],
        id="description-and-tags",
    ),
    pytest.param(
        quota_body("a") | {"Name": "-bad-", "ActivationState": None}, ["ActivationState", "Name"], id="name-and-null"
    ),
]


@pytest.mark.parametrize(("body", "bad"), BAD_CREATES)
def test_an_invalid_quota_is_refused_with_422_naming_each_field_and_nothing_changes(
    world: World, body: dict[str, Any], bad: list[str]
) -> None:
    before = world.items()
    reply = call("POST", "/clusters/demo/compute-quotas", body)
    assert reply.status == 422
    assert sorted(fields(reply)) == sorted(bad)
    assert all(e["message"] for e in reply.body["errors"])
    assert world.items() == before and world.publisher.events == []


def test_a_taken_name_or_team_is_409_naming_the_field(world: World) -> None:
    assert call("POST", "/clusters/demo/compute-quotas", quota_body("a")).status == 201
    same_name = call("POST", "/clusters/demo/compute-quotas", quota_body("b") | {"Name": "a-quota"})
    same_team = call("POST", "/clusters/demo/compute-quotas", quota_body("a") | {"Name": "other"})
    assert (same_name.status, fields(same_name)) == (409, ["Name"])
    assert (same_team.status, fields(same_team)) == (409, ["ComputeQuotaTarget.TeamName"])
    assert len(world.publisher.events) == 1


def test_a_team_name_too_long_for_the_clusters_queue_names_is_422_naming_the_field(world: World) -> None:
    # Given cluster demo with the default namespace prefix (LocalQueue hyperpod-ns-<team>-localqueue <= 63)
    before = world.items()
    # When a quota for a 41-character team is created
    reply = call("POST", "/clusters/demo/compute-quotas", quota_body("t" * 41))
    # Then it is refused naming the field and saying why; nothing stored, nothing published
    assert (reply.status, fields(reply)) == (422, ["ComputeQuotaTarget.TeamName"])
    assert "at most 40 characters" in reply.body["errors"][0]["message"]
    assert world.items() == before and world.publisher.events == []
    # ... a 40-character team is fine, and so is a longer one where the cluster's prefix is shorter
    assert call("POST", "/clusters/demo/compute-quotas", quota_body("t" * 40)).status == 201
    world.store.put_cluster(ClusterRecord("short", "short-eks", None, namespace_prefix="ns-"))
    assert call("POST", "/clusters/short/compute-quotas", quota_body("t" * 41)).status == 201
    # ... and an update cannot move a quota to such a team either
    update = call(
        "PUT",
        f"/clusters/demo/compute-quotas/{'t' * 40}-quota",
        {"TargetVersion": 1, "ComputeQuotaTarget": {"TeamName": "u" * 41}},
    )
    assert (update.status, fields(update)) == (422, ["ComputeQuotaTarget.TeamName"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('"text"', "must be a JSON object"),
        ("", "needs a JSON object"),
        ("null", "needs a JSON object"),
        ("[" * 30_000 + "]" * 30_000, "nested too deeply"),
    ],
)
def test_malformed_or_non_object_bodies_are_400(world: World, body: str, message: str) -> None:
    reply = call("POST", "/clusters/demo/compute-quotas", body)
    assert reply.status == 400 and message in reply.body["message"]
    assert world.store.list_quotas("demo") == []


def test_describe_and_unknown_names_and_clusters(world: World) -> None:
    created = call("POST", "/clusters/demo/compute-quotas", quota_body("a")).body
    assert call("GET", "/clusters/demo/compute-quotas/a-quota").body == created
    missing = call("GET", "/clusters/demo/compute-quotas/nope")
    unknown = call("GET", "/clusters/elsewhere/compute-quotas/a-quota")
    assert (missing.status, unknown.status) == (404, 404)
    assert "nope" in missing.body["message"] and "elsewhere" in unknown.body["message"]
    assert missing.body["errors"] == []


def test_list_filters_by_name_and_state_and_pages_with_next_token(world: World) -> None:
    for team in ("a", "b", "c", "d", "e"):
        state = "Disabled" if team in ("b", "d") else "Enabled"
        assert call("POST", "/clusters/demo/compute-quotas", quota_body(team, ActivationState=state)).status == 201
    everything = call("GET", "/clusters/demo/compute-quotas").body
    assert [q["Name"] for q in everything["ComputeQuotaSummaries"]] == [f"{t}-quota" for t in "abcde"]
    assert "NextToken" not in everything
    enabled = call("GET", "/clusters/demo/compute-quotas", query={"ActivationState": "Enabled"}).body
    assert [q["Name"] for q in enabled["ComputeQuotaSummaries"]] == ["a-quota", "c-quota", "e-quota"]
    named = call("GET", "/clusters/demo/compute-quotas", query={"NameContains": "d-q"}).body
    assert [q["Name"] for q in named["ComputeQuotaSummaries"]] == ["d-quota"]
    seen, token = [], None
    while True:
        query = {"MaxResults": "2"} | ({"NextToken": token} if token else {})
        page = call("GET", "/clusters/demo/compute-quotas", query=query).body
        seen += [q["Name"] for q in page["ComputeQuotaSummaries"]]
        token = page.get("NextToken")
        if token is None:
            break
    assert seen == [f"{t}-quota" for t in "abcde"]


def test_update_keeps_fields_not_given_bumps_the_version_and_emits(world: World) -> None:
    call("POST", "/clusters/demo/compute-quotas", quota_body("a", Description="keep me"))
    world.publisher.events.clear()
    reply = call("PUT", "/clusters/demo/compute-quotas/a-quota", {"TargetVersion": 1, "ActivationState": "Disabled"})
    assert reply.status == 200
    assert (reply.body["ComputeQuotaVersion"], reply.body["ActivationState"]) == (2, "Disabled")
    assert reply.body["Description"] == "keep me"
    assert reply.body["ComputeQuotaConfig"] == quota_body("a")["ComputeQuotaConfig"]
    assert world.publisher.events[0][0] == names.DT_QUOTA_CHANGED
    assert world.publisher.events[0][1]["quotaName"] == "a-quota"


def test_a_stale_target_version_is_409_naming_the_current_version(world: World) -> None:
    call("POST", "/clusters/demo/compute-quotas", quota_body("a"))
    call("PUT", "/clusters/demo/compute-quotas/a-quota", {"TargetVersion": 1, "Description": "v2"})
    before = world.items()
    reply = call("PUT", "/clusters/demo/compute-quotas/a-quota", {"TargetVersion": 1, "Description": "v3"})
    assert reply.status == 409
    assert reply.body["CurrentVersion"] == 2 and "version 2" in reply.body["message"]
    assert fields(reply) == ["TargetVersion"]
    assert world.items() == before


@pytest.mark.parametrize(
    ("body", "bad"),
    [
        ({"ActivationState": "Disabled"}, ["TargetVersion"]),
        ({"TargetVersion": "1"}, ["TargetVersion"]),
        ({"TargetVersion": True}, ["TargetVersion"]),
        ({"TargetVersion": 10**40}, ["TargetVersion"]),
        ({"TargetVersion": 1, "Name": "renamed"}, ["Name"]),
        ({"TargetVersion": 1, "Tags": []}, ["Tags"]),
        (
            {"TargetVersion": 1, "ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": P5, "VCpu": -1}]}},
            ["ComputeQuotaConfig.ComputeQuotaResources[0].VCpu"],
        ),
    ],
)
def test_an_invalid_update_is_422_and_changes_nothing(world: World, body: dict[str, Any], bad: list[str]) -> None:
    call("POST", "/clusters/demo/compute-quotas", quota_body("a"))
    world.publisher.events.clear()
    before = world.items()
    reply = call("PUT", "/clusters/demo/compute-quotas/a-quota", body)
    assert (reply.status, fields(reply)) == (422, bad)
    assert world.items() == before and world.publisher.events == []


def test_update_of_an_unknown_quota_is_404(world: World) -> None:
    assert call("PUT", "/clusters/demo/compute-quotas/nope", {"TargetVersion": 1}).status == 404


def test_delete_is_204_emits_and_honours_target_version(world: World) -> None:
    call("POST", "/clusters/demo/compute-quotas", quota_body("a"))
    stale = call("DELETE", "/clusters/demo/compute-quotas/a-quota", query={"TargetVersion": "7"})
    assert (stale.status, stale.body["CurrentVersion"]) == (409, 1)
    reply = call("DELETE", "/clusters/demo/compute-quotas/a-quota", query={"TargetVersion": "1"})
    assert (reply.status, reply.body) == (204, "")
    assert world.store.get_quota("demo", "a-quota") is None
    assert world.publisher.events[-1] == (
        names.DT_QUOTA_CHANGED,
        {"cluster": "demo", "quotaName": "a-quota", "reason": "DeleteComputeQuota (admin API)"},
    )
    assert call("DELETE", "/clusters/demo/compute-quotas/a-quota").status == 404
    # the team is free again
    assert call("POST", "/clusters/demo/compute-quotas", quota_body("a") | {"Name": "again"}).status == 201


# ------------------------------------------------------------------------------------- scheduler config
def test_scheduler_config_defaults_then_create_update_delete(world: World) -> None:
    default = call("GET", "/clusters/demo/scheduler-config").body
    assert default["SchedulerConfigVersion"] == 0 and default["Status"] == "Default"
    assert default["SchedulerConfig"]["IdleResourceSharing"] == "Enabled"

    config = {"PriorityClasses": [{"Name": "training", "Weight": 40}], "IdleResourceSharing": "Disabled"}
    created = call("PUT", "/clusters/demo/scheduler-config", {"SchedulerConfig": config})
    assert created.status == 200
    assert (created.body["SchedulerConfig"], created.body["SchedulerConfigVersion"]) == (config, 1)
    assert call("GET", "/clusters/demo/scheduler-config").body == created.body

    again = call("PUT", "/clusters/demo/scheduler-config", {"SchedulerConfig": config})
    assert (again.status, fields(again)) == (409, ["SchedulerConfig"])
    stale = call("PUT", "/clusters/demo/scheduler-config", {"SchedulerConfig": {}, "TargetVersion": 3})
    assert (stale.status, stale.body["CurrentVersion"]) == (409, 1)
    updated = call(
        "PUT", "/clusters/demo/scheduler-config", {"SchedulerConfig": {"FairShare": "Disabled"}, "TargetVersion": 1}
    )
    assert (updated.status, updated.body["SchedulerConfigVersion"]) == (200, 2)

    stale_delete = call("DELETE", "/clusters/demo/scheduler-config", query={"TargetVersion": "1"})
    assert (stale_delete.status, stale_delete.body["CurrentVersion"]) == (409, 2)
    assert call("DELETE", "/clusters/demo/scheduler-config", query={"TargetVersion": "2"}).status == 204
    assert call("GET", "/clusters/demo/scheduler-config").body["Status"] == "Default"
    assert call("DELETE", "/clusters/demo/scheduler-config").status == 404
    kinds = [e[0] for e in world.publisher.events]
    assert kinds == [names.DT_SCHEDULER_CHANGED] * 3  # create, update, delete


def test_an_invalid_scheduler_config_is_422_naming_each_field_and_nothing_changes(world: World) -> None:
    before = world.items()
    reply = call(
        "PUT",
        "/clusters/demo/scheduler-config",
        {
            "SchedulerConfig": {
                "PriorityClasses": [{"Name": "training", "Weight": 101}, {"Name": "training", "Weight": 1}],
                "IdleResourceSharing": "Sometimes",
            },
            "TargetVersion": -1,
            "Name": "x",
        },
    )
    assert reply.status == 422
    assert sorted(fields(reply)) == sorted(
        [
            "Name",
            "TargetVersion",
            "SchedulerConfig.PriorityClasses[0].Weight",
            "SchedulerConfig.IdleResourceSharing",
        ]
    )
    missing = call("PUT", "/clusters/demo/scheduler-config", {"TargetVersion": 1})
    assert (missing.status, fields(missing)) == (422, ["SchedulerConfig"])
    assert world.items() == before and world.publisher.events == []


@pytest.mark.parametrize("write", ["create", "update", "scheduler-config"])
def test_a_body_breaking_a_botocore_bound_is_422_naming_the_field_from_the_one_request_model(
    world: World, write: str
) -> None:
    # Given the request models are the one gate of a write (the store stores what it is given)
    call("POST", "/clusters/demo/compute-quotas", quota_body("a"))
    call("PUT", "/clusters/demo/scheduler-config", {"SchedulerConfig": {"FairShare": "Enabled"}})
    world.publisher.events.clear()
    before = world.items()
    over = {"Strategy": "LendAndBorrow", "BorrowLimit": 10_001}  # botocore's BorrowLimit max is 10000
    config = {"ComputeQuotaResources": [{"InstanceType": P5, "Accelerators": 8}], "ResourceSharingConfig": over}
    # When a body breaking a botocore bound is sent
    if write == "create":
        reply = call("POST", "/clusters/demo/compute-quotas", quota_body("b") | {"ComputeQuotaConfig": config})
        field, bound = "ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit", "must be <= 10000"
    elif write == "update":
        body = {"TargetVersion": 1, "ComputeQuotaConfig": config}
        reply = call("PUT", "/clusters/demo/compute-quotas/a-quota", body)
        field, bound = "ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit", "must be <= 10000"
    else:
        sc = {"SchedulerConfig": {"PriorityClasses": [{"Name": "training", "Weight": 101}]}, "TargetVersion": 1}
        reply = call("PUT", "/clusters/demo/scheduler-config", sc)
        field, bound = "SchedulerConfig.PriorityClasses[0].Weight", "must be <= 100"
    # Then it is a 422 naming the field and the bound, nothing stored changed and nothing was published
    assert (reply.status, fields(reply)) == (422, [field])
    assert bound in reply.body["message"]
    assert world.items() == before and world.publisher.events == []


# -------------------------------------------------------------------------------------------- read side
def test_excluded_nodes_are_paged_by_name_with_an_opaque_token(world: World) -> None:
    # Given 2,500 excluded nodes with EKS-shaped names, in no order, for three reasons
    reasons = ("NotReady", "Unschedulable", "Unreadable")
    excluded = {name: reasons[i % 3] for i, name in enumerate(eks_names(2500))}
    store_excluded(world, excluded)
    # When the operator pages through with limit=1000
    pages, token = [], None
    while True:
        query = {"limit": "1000"} | ({"NextToken": token} if token else {})
        reply = call("GET", "/clusters/demo/excluded-nodes", query=query)
        assert reply.status == 200
        pages.append(reply.body)
        token = reply.body.get("NextToken")
        if not token:
            break
    # Then three pages of at most 1,000, sorted by node name, hold every node once with its reason
    assert [len(p["excludedNodes"]) for p in pages] == [1000, 1000, 500]
    listed = [name for p in pages for name in p["excludedNodes"]]
    assert listed == sorted(excluded) and {n: r for p in pages for n, r in p["excludedNodes"].items()} == excluded
    # And every page counts them all, per reason
    counts = {"NotReady": 834, "Unreadable": 833, "Unschedulable": 833}
    assert all((p["total"], p["byReason"], p["generation"]) == (2500, counts, 1) for p in pages)
    # And the default page is the largest (1,000)
    assert len(call("GET", "/clusters/demo/excluded-nodes").body["excludedNodes"]) == 1000


def test_get_pool_shows_the_first_excluded_nodes_and_counts_them_all(world: World) -> None:
    # Given 2,500 excluded nodes
    excluded = {name: "NotReady" for name in eks_names(2500)}
    store_excluded(world, excluded)
    # When the pool is read, then it holds the first 100 by name, the counts, and the route that lists them all
    body = call("GET", "/clusters/demo/pool").body
    assert list(body["excludedNodes"]) == sorted(excluded)[:100]
    assert body["excludedSummary"] == {
        "total": 2500,
        "byReason": {"NotReady": 2500},
        "shown": 100,
        "route": "/clusters/demo/excluded-nodes",
    }


def test_pool_and_excluded_node_answers_stay_far_below_lambdas_6_mb_at_100k_excluded_nodes(world: World) -> None:
    # Given 100,000 excluded nodes (the pool document alone is ~6 MB of JSON)
    store_excluded(world, {name: "NotReady" for name in eks_names(100_000)})
    # When the pool and the largest page of excluded nodes are read, then each answer is under 1 MB
    for path, query in (("pool", {}), ("excluded-nodes", {"limit": "1000"})):
        out = json.dumps(call("GET", f"/clusters/demo/{path}", query=query).body)
        assert len(out) < 1_000_000, path


@pytest.mark.parametrize(
    ("route", "query", "field"),
    [
        ("compute-quotas", {"MaxResults": "0"}, "MaxResults"),
        ("compute-quotas", {"MaxResults": "many"}, "MaxResults"),
        ("compute-quotas", {"ActivationState": "Paused"}, "ActivationState"),
        ("compute-quotas", {"NextToken": "not-a-token!"}, "NextToken"),
        ("excluded-nodes", {"limit": "0"}, "limit"),
        ("excluded-nodes", {"limit": "1001"}, "limit"),
        ("excluded-nodes", {"limit": "many"}, "limit"),
        ("excluded-nodes", {"NextToken": "not-a-token!"}, "NextToken"),
        ("excluded-nodes", {"NextToken": "eyJiZWZvcmUiOjJ9"}, "NextToken"),  # {"before":2}: a history token
    ],
)
def test_a_bad_query_parameter_is_a_400_naming_it(world: World, route: str, query: dict[str, str], field: str) -> None:
    store_excluded(world, {"n1": "NotReady"})
    reply = call("GET", f"/clusters/demo/{route}", query=query)
    assert (reply.status, fields(reply)) == (400, [field])
    assert "Traceback" not in json.dumps(reply.body)


def test_read_side_before_any_recompute_is_404_naming_the_cluster(world: World) -> None:
    for path in ("pool", "grants", "grants/a", "excluded-nodes"):
        reply = call("GET", f"/clusters/demo/{path}")
        assert reply.status == 404 and "demo" in reply.body["message"], path
    assert call("GET", "/clusters/demo/history").body == {"cluster": "demo", "generations": []}


def test_pool_grants_excluded_nodes_and_history_after_recomputes(world: World) -> None:
    # Given two teams and a recompute, then a node going NotReady and another recompute
    call("POST", "/clusters/demo/compute-quotas", quota_body("a"))
    call("POST", "/clusters/demo/compute-quotas", quota_body("b", strategy="Lend"))
    world.recompute()
    world.kube.nodes[0] = k8s_node("p5-0", ready="False")
    world.recompute()

    pool = call("GET", "/clusters/demo/pool")
    assert pool.status == 200
    assert (pool.body["cluster"], pool.body["generation"], pool.body["applyStatus"]) == ("demo", 2, "Applied")
    assert pool.body["unallocated"][P5][GPU] == "8" and pool.body["readFailure"] == ""
    assert pool.body["summary"] and pool.body["computedAt"]
    assert set(pool.body["teams"]) == {"a", "b"}

    grants = call("GET", "/clusters/demo/grants").body
    assert grants["generation"] == 2 and grants["teams"]["a"]["borrowingLimit"][P5][GPU] == "8"
    one = call("GET", "/clusters/demo/grants/a").body
    assert one["team"] == "a" and one["why"][P5][GPU]["bound"] and one["why"][P5][GPU]["pool"] == "16"
    unknown = call("GET", "/clusters/demo/grants/zz")
    assert unknown.status == 404 and "a, b" in unknown.body["message"]

    assert pool.body["excludedNodes"] == {"p5-0": "NotReady"}
    assert pool.body["excludedSummary"] == {
        "total": 1,
        "byReason": {"NotReady": 1},
        "shown": 1,
        "route": "/clusters/demo/excluded-nodes",
    }

    excluded = call("GET", "/clusters/demo/excluded-nodes").body
    assert excluded == {
        "cluster": "demo",
        "generation": 2,
        "total": 1,
        "byReason": {"NotReady": 1},
        "excludedNodes": {"p5-0": "NotReady"},
    }

    history = call("GET", "/clusters/demo/history").body
    assert [g["generation"] for g in history["generations"]] == [2, 1]
    assert history["generations"][0]["changes"]["excludedNodes"]["count"] == 1
    assert history["generations"][1]["changes"] == {"first": True}
    first_page = call("GET", "/clusters/demo/history", query={"limit": "1"}).body
    assert [g["generation"] for g in first_page["generations"]] == [2]
    second = call("GET", "/clusters/demo/history", query={"limit": "1", "NextToken": first_page["NextToken"]}).body
    assert [g["generation"] for g in second["generations"]] == [1] and "NextToken" not in second
    assert call("GET", "/clusters/demo/history", query={"limit": "101"}).status == 400


def test_a_pool_that_could_never_be_read_is_404_with_the_failure(world: World) -> None:
    world.store.record_read_failure("demo", "RetryableError: connection refused")
    reply = call("GET", "/clusters/demo/pool")
    assert reply.status == 404 and "connection refused" in reply.body["message"]


# ----------------------------------------------------------------------------------- guards and errors
def test_an_unsigned_request_is_403_and_reaches_nothing(world: World) -> None:
    before = world.items()
    reply = call("POST", "/clusters/demo/compute-quotas", quota_body("a"), signed=False)
    assert reply.status == 403 and reply.body["errors"] == []
    assert "IAM" in reply.body["message"]
    from idleshare.api import app

    event = proxy_event("GET", "/clusters")
    del event["requestContext"]["identity"]
    assert app.handler(event, CONTEXT)["statusCode"] == 403
    assert world.items() == before and world.publisher.events == []


def test_a_body_over_64_kib_is_413_before_parsing(world: World) -> None:
    body = json.dumps(quota_body("a", Description="x" * (names.API_MAX_BODY_BYTES)))
    assert len(body) > names.API_MAX_BODY_BYTES
    before = world.items()
    reply = call("POST", "/clusters/demo/compute-quotas", body)
    assert reply.status == 413 and str(names.API_MAX_BODY_BYTES) in reply.body["message"]
    assert call("POST", "/clusters/demo/compute-quotas", "{" * (names.API_MAX_BODY_BYTES + 1)).status == 413
    assert world.items() == before


def test_a_body_that_is_not_json_by_content_type_is_415(world: World) -> None:
    reply = call(
        "POST", "/clusters/demo/recalculate", "reason=x", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert reply.status == 415 and world.publisher.events == []
    charset = call(
        "POST", "/clusters/demo/recalculate", "{}", headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert charset.status == 202


def test_an_unknown_route_is_404_in_the_error_shape(world: World) -> None:
    reply = call("GET", "/quotas")
    assert reply.status == 404 and reply.body == {"message": "no route for GET /quotas", "errors": []}


class Exploding:
    """A store whose every call fails the way ``error`` says."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise self.error

        return fail


def test_an_unexpected_error_is_a_generic_500_naming_the_request_id_and_logged(world: World, logs: Any) -> None:
    wiring.install(
        wiring.Dependencies(store=Exploding(RuntimeError("table secret-table: boom")), publisher=world.publisher)
    )  # type: ignore[arg-type]
    reply = call("GET", "/clusters", request_id="req-500")
    assert reply.status == 500
    assert "req-500" in reply.body["message"] and reply.body["errors"] == []
    assert "secret" not in json.dumps(reply.body) and "Traceback" not in json.dumps(reply.body)
    logged = [json.loads(line) for line in logs.getvalue().splitlines()]
    failure = next(entry for entry in logged if entry["level"] == "ERROR")  # the details are in the log
    assert failure["correlation_id"] == "req-500" and "secret-table: boom" in failure["exception"]


def test_a_throttled_dependency_is_503_with_retry_after(world: World) -> None:
    wiring.install(wiring.Dependencies(store=Exploding(RetryableError("throttled")), publisher=world.publisher))  # type: ignore[arg-type]
    reply = call("GET", "/clusters/demo/pool")
    assert reply.status == 503 and reply.headers["Retry-After"] == "1"


def test_a_failed_publish_after_a_stored_write_keeps_the_write(world: World) -> None:
    class DownBus:
        def publish(self, *args: Any, **kwargs: Any) -> None:
            raise RetryableError("events:PutEvents: ThrottlingException")

    wiring.install(wiring.Dependencies(store=world.store, publisher=DownBus()))
    reply = call("POST", "/clusters/demo/compute-quotas", quota_body("a"))
    assert reply.status == 201 and world.store.get_quota("demo", "a-quota") is not None


def test_without_a_bus_writes_are_refused_before_storing(world: World) -> None:
    wiring.install(wiring.Dependencies(store=world.store, publisher=None))
    assert call("POST", "/clusters/demo/compute-quotas", quota_body("a")).status == 500
    assert world.store.get_quota("demo", "a-quota") is None
    assert call("GET", "/clusters/demo/compute-quotas").status == 200


# ------------------------------------------------------------------------------------------ the document
CONTRACT_ROUTES = {
    ("get", "/clusters"),
    ("get", "/clusters/{cluster}/usage"),  # the latest sample, or hours over from/to
    ("post", "/clusters/{cluster}/compute-quotas"),
    ("get", "/clusters/{cluster}/compute-quotas"),
    ("get", "/clusters/{cluster}/compute-quotas/{name}"),
    ("put", "/clusters/{cluster}/compute-quotas/{name}"),
    ("delete", "/clusters/{cluster}/compute-quotas/{name}"),
    ("get", "/clusters/{cluster}/scheduler-config"),
    ("put", "/clusters/{cluster}/scheduler-config"),
    ("delete", "/clusters/{cluster}/scheduler-config"),
    ("get", "/clusters/{cluster}/pool"),
    ("get", "/clusters/{cluster}/grants"),
    ("get", "/clusters/{cluster}/grants/{team}"),
    ("get", "/clusters/{cluster}/history"),
    ("get", "/clusters/{cluster}/excluded-nodes"),
    ("post", "/clusters/{cluster}/recalculate"),
    ("get", "/clusters/{cluster}/recalculations/{request_id}"),
}


def test_the_openapi_document_lists_every_route_with_its_body_schema(world: World) -> None:
    reply = call("GET", names.API_OPENAPI_PATH)
    assert reply.status == 200
    doc = reply.body
    listed = {(method, path) for path, ops in doc["paths"].items() for method in ops}
    assert listed == CONTRACT_ROUTES
    create = doc["paths"]["/clusters/{cluster}/compute-quotas"]["post"]
    schema = create["requestBody"]["content"]["application/json"]["schema"]
    assert set(schema["required"]) == {"Name", "ComputeQuotaConfig", "ComputeQuotaTarget"}
    assert "$ref" not in json.dumps(schema)  # self-contained: the Shapes' $defs are inlined
    sharing = schema["properties"]["ComputeQuotaConfig"]["properties"]["ResourceSharingConfig"]["anyOf"][0]
    borrow = sharing["properties"]["BorrowLimit"]["anyOf"][0]
    assert borrow["maximum"] == 10_000  # botocore's BorrowLimit bound, from the parser's Shape
    update = doc["paths"]["/clusters/{cluster}/compute-quotas/{name}"]["put"]
    assert update["requestBody"]["content"]["application/json"]["schema"]["required"] == ["TargetVersion"]
    assert "409" in update["responses"]


def test_swagger_ui_is_served(world: World) -> None:
    reply = call("GET", names.API_SWAGGER_PATH)
    assert reply.status == 200 and "text/html" in reply.headers["Content-Type"]
    assert "/clusters/{cluster}/recalculate" in reply.body


def test_the_api_module_imports_no_kubernetes_client() -> None:
    import subprocess
    import sys

    code = "import sys, idleshare.api.app; print(sorted(m for m in sys.modules if m.startswith(('lightkube', 'idleshare.adapters.kube'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------------------ samples and the console
SAMPLES = Path(__file__).parents[2] / "events" / "api"


def sample(name: str) -> Any:
    return json.loads((SAMPLES / name).read_text())


def test_every_sample_body_in_events_api_is_accepted(world: World) -> None:
    created = call("POST", "/clusters/demo/compute-quotas", sample("create-compute-quota.json"))
    assert created.status == 201 and created.body["Tags"] == [{"Key": "owner", "Value": "research-leads"}]
    updated = call("PUT", "/clusters/demo/compute-quotas/research-quota", sample("update-compute-quota.json"))
    assert (updated.status, updated.body["ComputeQuotaVersion"]) == (200, 2)
    assert updated.body["ComputeQuotaTarget"] == {"TeamName": "research", "FairShareWeight": 10}  # kept
    assert call("PUT", "/clusters/demo/scheduler-config", sample("put-scheduler-config.json")).status == 200
    assert call("POST", "/clusters/demo/recalculate", sample("recalculate.json")).status == 202


def test_the_api_gateway_console_test_of_recalculate_is_accepted(world: World, monkeypatch: Any) -> None:
    # Given what docs/operations.md tells an operator to type into the console's Test tab
    form = sample("console-test-recalculate.json")
    path = "/" + form["path"]["proxy"]
    query = dict(pair.split("=", 1) for pair in form["queryString"].split("&"))
    headers = dict(line.split(":", 1) for line in form["headers"].splitlines())
    # When API Gateway test-invokes the Lambda: its test stage, its test identity (the console user)
    event = proxy_event(form["method"], path, body=form["body"], query=query, headers=headers)
    event["requestContext"].update(stage="test-invoke-stage", path=form["resource"], requestId="test-invoke-request")
    event["requestContext"]["identity"].update(apiKey="test-invoke-api-key", sourceIp="test-invoke-source-ip")
    from idleshare.api import app
    from idleshare.service import admin

    monkeypatch.setattr(admin.Admin, "__init__", _no_wait(admin.Admin.__init__))
    out = app.handler(event, CONTEXT)
    # Then the request is on the bus, answered 202 (nothing recomputes in this test, so the wait times out)
    assert out["statusCode"] == 202, out["body"]
    assert json.loads(out["body"])["status"] == "Requested"
    assert world.publisher.events[0][1]["reason"] == form["body"]["reason"]


def _no_wait(init: Any) -> Any:
    """Admin.__init__ with a clock that jumps instead of sleeping."""

    def patched(self: Any, *args: Any, **kwargs: Any) -> None:
        now = [0.0]

        def sleep(seconds: float) -> None:
            now[0] += seconds

        init(self, *args, **kwargs, clock=lambda: now[0], sleep=sleep)

    return patched
