"""The admin HTTP API (idleshare.api.app) through API Gateway REST proxy events, on the real DynamoStore
(moto): every route, every error status, validation that names each field and changes nothing, the
events each write puts on idleshare's bus, the OpenAPI document."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from functools import partialmethod
from pathlib import Path
from typing import Any
from unittest.mock import Mock

import pytest

from idleshare import names
from idleshare.adapters.ports import ClusterRecord, PoolRecord
from idleshare.domain.cluster_settings import ClusterSettings, SettingError
from idleshare.errors import RetryableError
from idleshare.runtime import wiring
from tests.admin_api import ARN, CONTEXT, Reply, World, call, pages
from tests.builders import k8s_node, proxy_event, quota_body

P5 = "ml.p5.48xlarge"
GPU = "nvidia.com/gpu"
QUOTAS = "/clusters/demo/compute-quotas"
SCHEDULER = "/clusters/demo/scheduler-config"


def fields(reply: Reply) -> list[str]:
    return [e["field"] for e in reply.body["errors"]]


def quota_names(body: dict[str, Any]) -> list[str]:
    return [q["Name"] for q in body["ComputeQuotaSummaries"]]


def store_excluded(world: World, count: int, reasons: tuple[str, ...] = ("NotReady",)) -> dict[str, str]:
    """Generation 1 of ``demo`` excluding ``count`` distinct EKS-shaped node names (in random order), the
    reasons in turn; returns them."""
    rng, found = random.Random(7), set[str]()
    while len(found) < count:
        found.add(f"ip-10-{rng.randrange(256)}-{rng.randrange(256)}-{rng.randrange(256)}.us-west-2.compute.internal")
    shuffled = sorted(found)
    rng.shuffle(shuffled)
    excluded = {name: reasons[i % len(reasons)] for i, name in enumerate(shuffled)}
    pool = {"teams": {}, "unallocated": {}, "excludedNodes": excluded}
    world.store.put_pool(PoolRecord("demo", 1, "d1", pool, "2026-01-01T00:00:00+00:00"), expected_generation=0)
    return excluded


# ------------------------------------------------------------------------------------- quotas and config
def test_create_quota_is_201_in_the_describe_shape_emits_and_takes_the_name_and_team(world: World) -> None:
    sent = quota_body("a", Description="research", ActivationState="Enabled")
    reply = call("POST", QUOTAS, sent)
    # 201 with DescribeComputeQuota's shape at version 1
    body, want = reply.body, sent | {"ComputeQuotaVersion": 1, "Status": "Created", "ClusterId": "demo"}
    assert (reply.status, {k: body[k] for k in want}) == (201, want)
    assert len(body["ComputeQuotaId"]) == 12 and body["CreationTime"] == body["LastModifiedTime"]
    # stored, and Compute Quota Changed on idleshare's bus
    assert world.store.get_quota("demo", "a-quota").version == 1
    detail = {"cluster": "demo", "quotaName": "a-quota", "reason": "CreateComputeQuota (admin API)"}
    assert world.publisher.events == [(names.DT_QUOTA_CHANGED, detail)]
    assert call("GET", f"{QUOTAS}/a-quota").body == body  # described as created
    # a taken name or team is a 409 naming the field, and emits nothing
    same_name = call("POST", QUOTAS, quota_body("b") | {"Name": "a-quota"})
    same_team = call("POST", QUOTAS, quota_body("a") | {"Name": "other"})
    assert (same_name.status, fields(same_name)) == (409, ["Name"])
    assert (same_team.status, fields(same_team)) == (409, [TEAM])
    assert len(world.publisher.events) == 1


def resource(**entry: Any) -> dict[str, Any]:
    return {"ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": P5} | entry]}}


BORROW_LIMIT = "ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit"
RESOURCE = "ComputeQuotaConfig.ComputeQuotaResources[0]"
WEIGHT, TEAM = "SchedulerConfig.PriorityClasses[0].Weight", "ComputeQuotaTarget.TeamName"
PC_NAME = "SchedulerConfig.PriorityClasses[0].Name"
BAD_CLASSES = [{"Name": "training", "Weight": 101}, {"Name": "training", "Weight": 1}]
BAD_CONFIG = {"SchedulerConfig": {"PriorityClasses": BAD_CLASSES, "IdleResourceSharing": "Sometimes"}, "Name": "x"}
TAGS = [{"Key": "", "Value": "v"}, {"Key": "k"}]
B, T1 = quota_body("b"), {"TargetVersion": 1}
OVER = {"ComputeQuotaConfig": quota_body("b", borrow=10_001)["ComputeQuotaConfig"]}  # botocore's maximum: 10000
BAD_WRITES = [
    # the request models are the one gate of a write (the store stores what it is given); botocore's bounds
    ("POST", B | OVER, BORROW_LIMIT),
    ("POST", B | resource(Count=-1), f"{RESOURCE}.Count"),
    ("POST", B | resource(InstanceType="ml.p9.huge", Count=1), f"{RESOURCE}.InstanceType"),
    ("POST", B | {"ComputeQuotaTarget": {"TeamName": "Team_A"}, "ActivationState": "On"}, f"{TEAM} ActivationState"),
    ("POST", B | {"ClusterArn": ARN}, "ClusterArn"),  # the cluster is the path
    ("POST", {"Name": "b-quota", "ComputeQuotaTarget": {"TeamName": "b"}}, "ComputeQuotaConfig"),
    ("POST", B | {"ComputeQuotaConfg": {}}, "ComputeQuotaConfg"),
    ("POST", B | {"Description": "x" * 1025, "Tags": TAGS}, "Description Tags[0].Key Tags[1].Value"),
    ("POST", B | {"Name": "-bad-", "ActivationState": None}, "ActivationState Name"),
    ("PUT", {"ActivationState": "Disabled"}, "TargetVersion"),
    ("PUT", {"TargetVersion": "1"}, "TargetVersion"),
    ("PUT", {"TargetVersion": True}, "TargetVersion"),
    ("PUT", {"TargetVersion": 10**40}, "TargetVersion"),
    ("PUT", T1 | {"Name": "renamed"}, "Name"),
    ("PUT", T1 | {"Tags": []}, "Tags"),
    ("PUT", T1 | resource(VCpu=-1), f"{RESOURCE}.VCpu"),
    ("PUT", T1 | OVER, BORROW_LIMIT),
    ("SC", {"SchedulerConfig": {"PriorityClasses": BAD_CLASSES[:1]}, "TargetVersion": 1}, WEIGHT),
    ("SC", T1, "SchedulerConfig"),
    ("SC", BAD_CONFIG | {"TargetVersion": -1}, f"Name TargetVersion {WEIGHT} SchedulerConfig.IdleResourceSharing"),
    # <Name>-priority is a Job's label value (63): 300 characters broke every recompute, 55 could never be used
    ("SC", {"SchedulerConfig": {"PriorityClasses": [{"Name": "p" * 300, "Weight": 1}]}}, PC_NAME),
    ("SC", {"SchedulerConfig": {"PriorityClasses": [{"Name": "p" * 55, "Weight": 1}]}, "TargetVersion": 1}, PC_NAME),
]
BOUNDS = {BORROW_LIMIT: "must be <= 10000", WEIGHT: "must be <= 100", PC_NAME: "must be at most 54 characters"}


@pytest.mark.parametrize(("write", "body", "bad"), BAD_WRITES)
def test_an_invalid_write_is_422_naming_each_field_and_changes_nothing(
    world: World, write: str, body: dict[str, Any], bad: str
) -> None:
    call("POST", QUOTAS, quota_body("a"))
    call("PUT", SCHEDULER, {"SchedulerConfig": {"FairShare": "Enabled"}})
    world.publisher.events.clear()
    before = world.items()
    path = {"POST": QUOTAS, "PUT": f"{QUOTAS}/a-quota", "SC": SCHEDULER}[write]
    reply = call("PUT" if write == "SC" else write, path, body)
    assert (reply.status, sorted(fields(reply))) == (422, sorted(bad.split()))
    assert all(e["message"] for e in reply.body["errors"])
    assert BOUNDS.get(bad, "") in reply.body["message"]  # a bound broken is named with the bound
    assert world.items() == before and world.publisher.events == []


def test_a_team_name_too_long_for_the_clusters_queue_names_is_422_naming_the_field(world: World) -> None:
    # cluster demo has the default namespace prefix (LocalQueue hyperpod-ns-<team>-localqueue <= 63)
    before = world.items()
    reply = call("POST", QUOTAS, quota_body("t" * 41))
    assert (reply.status, fields(reply)) == (422, [TEAM])
    assert "at most 40 characters" in reply.body["errors"][0]["message"]
    assert world.items() == before and world.publisher.events == []
    # a 40-character team is fine, and so is a longer one where the cluster's prefix is shorter
    assert call("POST", QUOTAS, quota_body("t" * 40)).status == 201
    world.store.put_cluster(ClusterRecord("short", "short-eks", None, settings=ClusterSettings(namespace_prefix="ns-")))
    assert call("POST", "/clusters/short/compute-quotas", quota_body("t" * 41)).status == 201
    # and an update cannot move a quota to such a team either
    update = call("PUT", f"{QUOTAS}/{'t' * 40}-quota", T1 | {"ComputeQuotaTarget": {"TeamName": "u" * 41}})
    assert (update.status, fields(update)) == (422, [TEAM])


def test_a_priority_class_of_54_characters_is_the_longest_taken(world: World) -> None:
    reply = call("PUT", SCHEDULER, {"SchedulerConfig": {"PriorityClasses": [{"Name": "p" * 54, "Weight": 1}]}})
    assert reply.status == 200


@pytest.mark.parametrize(("prefix", "team"), [("defaul", "t"), ("kub", "e-system"), ("openshif", "t-config")])
def test_a_team_whose_namespace_would_be_the_clusters_own_is_422(world: World, prefix: str, team: str) -> None:
    world.store.put_cluster(ClusterRecord("odd", "odd-eks", None, settings=ClusterSettings(namespace_prefix=prefix)))
    before = world.items()
    reply = call("POST", "/clusters/odd/compute-quotas", quota_body(team))
    assert (reply.status, fields(reply)) == (422, [TEAM])
    assert "reserved" in reply.body["errors"][0]["message"]
    assert world.items() == before


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("namespace_prefix", "kube-"),
        ("namespace_prefix", ""),
        ("namespace_prefix", "openshift-"),
        ("namespace_prefix", "default-"),
        ("cohort_name", "Shared_Pool"),
        ("cohort_name", "p" * 254),
    ],
)
def test_a_prefix_or_cohort_that_cannot_name_objects_is_no_cluster_setting(field: str, value: str) -> None:
    # the settings refuse it when they are made, so no registration (nor config, nor plan) ever holds it
    with pytest.raises(SettingError, match=f"^{field}: ") as raised:
        ClusterSettings(**{field: value})
    assert raised.value.setting == field


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
    reply = call("POST", QUOTAS, body)
    assert reply.status == 400 and message in reply.body["message"]
    assert world.store.list_quotas("demo") == []


def test_list_filters_by_name_and_state_and_pages_with_next_token(world: World) -> None:
    for team in "abcde":
        state = "Disabled" if team in "bd" else "Enabled"
        assert call("POST", QUOTAS, quota_body(team, ActivationState=state)).status == 201
    everything = call("GET", QUOTAS).body
    assert quota_names(everything) == [f"{t}-quota" for t in "abcde"] and "NextToken" not in everything
    enabled = call("GET", QUOTAS, query={"ActivationState": "Enabled"}).body
    assert quota_names(enabled) == ["a-quota", "c-quota", "e-quota"]
    assert quota_names(call("GET", QUOTAS, query={"NameContains": "d-q"}).body) == ["d-quota"]
    paged = pages(QUOTAS, MaxResults="2")
    assert [quota_names(p) for p in paged] == [["a-quota", "b-quota"], ["c-quota", "d-quota"], ["e-quota"]]


def test_a_quotas_update_stale_versions_and_delete_each_emitting_or_changing_nothing(world: World) -> None:
    call("POST", QUOTAS, quota_body("a", Description="keep me"))
    world.publisher.events.clear()
    # an update keeps the fields not given, bumps the version and emits
    reply = call("PUT", f"{QUOTAS}/a-quota", T1 | {"ActivationState": "Disabled"})
    assert (reply.status, reply.body["ComputeQuotaVersion"]) == (200, 2)
    assert (reply.body["ActivationState"], reply.body["Description"]) == ("Disabled", "keep me")
    assert reply.body["ComputeQuotaConfig"] == quota_body("a")["ComputeQuotaConfig"]
    [(kind, detail)] = world.publisher.events
    assert (kind, detail["quotaName"]) == (names.DT_QUOTA_CHANGED, "a-quota")
    # a stale TargetVersion is a 409 naming the current version, and changes nothing
    before = world.items()
    stale = call("PUT", f"{QUOTAS}/a-quota", T1 | {"Description": "v3"})
    assert (stale.status, stale.body["CurrentVersion"], fields(stale)) == (409, 2, ["TargetVersion"])
    assert "version 2" in stale.body["message"]
    stale = call("DELETE", f"{QUOTAS}/a-quota", query={"TargetVersion": "7"})
    assert (stale.status, stale.body["CurrentVersion"]) == (409, 2)
    assert world.items() == before and len(world.publisher.events) == 1
    # a delete is 204 and emits; the quota is gone and its team free again
    assert call("DELETE", f"{QUOTAS}/a-quota", query={"TargetVersion": "2"}).status == 204
    assert world.store.get_quota("demo", "a-quota") is None
    detail = {"cluster": "demo", "quotaName": "a-quota", "reason": "DeleteComputeQuota (admin API)"}
    assert world.publisher.events[-1] == (names.DT_QUOTA_CHANGED, detail)
    assert call("DELETE", f"{QUOTAS}/a-quota").status == 404
    assert call("POST", QUOTAS, quota_body("a") | {"Name": "again"}).status == 201


def test_scheduler_config_defaults_then_create_update_delete(world: World) -> None:
    default = call("GET", SCHEDULER).body
    assert (default["SchedulerConfigVersion"], default["Status"]) == (0, "Default")
    assert default["SchedulerConfig"]["IdleResourceSharing"] == "Enabled"
    config = {"PriorityClasses": [{"Name": "training", "Weight": 40}], "IdleResourceSharing": "Disabled"}
    created = call("PUT", SCHEDULER, {"SchedulerConfig": config})
    assert (created.status, created.body["SchedulerConfig"], created.body["SchedulerConfigVersion"]) == (200, config, 1)
    assert call("GET", SCHEDULER).body == created.body
    again = call("PUT", SCHEDULER, {"SchedulerConfig": config})
    assert (again.status, fields(again)) == (409, ["SchedulerConfig"])
    stale = call("PUT", SCHEDULER, {"SchedulerConfig": {}, "TargetVersion": 3})
    assert (stale.status, stale.body["CurrentVersion"]) == (409, 1)
    updated = call("PUT", SCHEDULER, {"SchedulerConfig": {"FairShare": "Disabled"}, "TargetVersion": 1})
    assert (updated.status, updated.body["SchedulerConfigVersion"]) == (200, 2)
    stale_delete = call("DELETE", SCHEDULER, query={"TargetVersion": "1"})
    assert (stale_delete.status, stale_delete.body["CurrentVersion"]) == (409, 2)
    assert call("DELETE", SCHEDULER, query={"TargetVersion": "2"}).status == 204
    assert call("GET", SCHEDULER).body["Status"] == "Default"
    assert call("DELETE", SCHEDULER).status == 404
    assert [e[0] for e in world.publisher.events] == [names.DT_SCHEDULER_CHANGED] * 3  # create, update, delete


# -------------------------------------------------------------------------------------------- read side
def test_excluded_nodes_are_paged_by_name_with_an_opaque_token(world: World) -> None:
    # Given 2,500 excluded nodes with EKS-shaped names, in no order, for three reasons
    excluded = store_excluded(world, 2500, ("NotReady", "Unschedulable", "Unreadable"))
    paged = pages("/clusters/demo/excluded-nodes", limit="1000")
    # Then three pages of at most 1,000, sorted by node name, hold every node once with its reason
    assert [len(p["excludedNodes"]) for p in paged] == [1000, 1000, 500]
    assert [name for p in paged for name in p["excludedNodes"]] == sorted(excluded)
    assert {n: r for p in paged for n, r in p["excludedNodes"].items()} == excluded
    # And every page counts them all, per reason
    counts = {"NotReady": 834, "Unreadable": 833, "Unschedulable": 833}
    assert all((p["total"], p["byReason"], p["generation"]) == (2500, counts, 1) for p in paged)
    # And the default page is the largest
    assert len(call("GET", "/clusters/demo/excluded-nodes").body["excludedNodes"]) == 1000


def test_get_pool_shows_the_first_excluded_nodes_and_counts_them_all_far_below_lambdas_6_mb(world: World) -> None:
    excluded = store_excluded(world, 100_000)  # the pool document alone is ~6 MB of JSON
    body = call("GET", "/clusters/demo/pool").body
    assert list(body["excludedNodes"]) == sorted(excluded)[:100]
    route = "/clusters/demo/excluded-nodes"
    summary = {"total": 100_000, "byReason": {"NotReady": 100_000}, "shown": 100, "route": route}
    assert body["excludedSummary"] == summary
    # the pool and the largest page of excluded nodes each answer under 1 MB
    assert len(json.dumps(body)) < 1_000_000
    assert len(json.dumps(call("GET", route, query={"limit": "1000"}).body)) < 1_000_000


def test_a_thousand_teams_page_through_grants_and_every_answer_stays_far_below_lambdas_6_mb(world: World) -> None:
    # Given the pool the engine computes for 1,200 teams on 8 flavors: more grants than one Lambda answer can hold
    from idleshare_cli.plan import plan_from_bytes
    from tests.bench.synthetic import make_cluster

    pool = plan_from_bytes(*make_cluster(400, n_teams=1200))
    del pool["manifests"]  # what the recompute stores: the pool document
    teams = pool.pop("teams")
    assert len(teams) == 1200 and len(json.dumps(teams)) > 6 * 2**20
    record = PoolRecord("demo", 1, "d1", pool | {"teams": teams}, "2026-01-01T00:00:00+00:00")
    world.store.put_pool(record, expected_generation=0)
    # When GET pool and every page of GET grants are read
    body = call("GET", "/clusters/demo/pool").body
    paged = pages("/clusters/demo/grants")
    # Then GET pool shows the first 100 teams by name and counts them all, naming the route that pages them
    assert list(body["teams"]) == sorted(teams)[:100]
    assert body["teamsSummary"] == {"total": 1200, "shown": 100, "route": "/clusters/demo/grants"}
    # And the pages hold every team once, in name order, 100 a page, each of generation 1 counting them all
    assert [len(p["teams"]) for p in paged] == [100] * 12
    assert [t for p in paged for t in p["teams"]] == sorted(teams)
    assert {t: g for p in paged for t, g in p["teams"].items()} == teams
    assert {(p["generation"], p["total"]) for p in paged} == {(1, 1200)}
    # And every answer is under 1 MB
    assert max(len(json.dumps(b)) for b in [body, *paged]) < 1_000_000


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
        ("grants", {"limit": "0"}, "limit"),
        ("grants", {"limit": "101"}, "limit"),
        ("grants", {"NextToken": "eyJhZnRlciI6ImEifQ"}, "NextToken"),  # {"after":"a"}: an excluded-nodes token
        ("history", {"limit": "101"}, "limit"),
    ],
)
def test_a_bad_query_parameter_is_a_400_naming_it(world: World, route: str, query: dict[str, str], field: str) -> None:
    store_excluded(world, 1)
    reply = call("GET", f"/clusters/demo/{route}", query=query)
    assert (reply.status, fields(reply)) == (400, [field])
    assert "Traceback" not in json.dumps(reply.body)


def test_clusters_are_listed_and_what_is_not_there_is_404_naming_it(world: World) -> None:
    cluster = {"ClusterId": "demo", "EksClusterName": "demo-eks", "HyperPodClusterArn": ARN}
    assert (call("GET", "/clusters").status, call("GET", "/clusters").body) == (200, {"Clusters": [cluster]})
    call("POST", QUOTAS, quota_body("a"))
    missing, unknown = call("GET", f"{QUOTAS}/nope"), call("GET", "/clusters/elsewhere/compute-quotas/a-quota")
    assert (missing.status, unknown.status, missing.body["errors"]) == (404, 404, [])
    assert "nope" in missing.body["message"] and "elsewhere" in unknown.body["message"]
    assert call("PUT", f"{QUOTAS}/nope", {"TargetVersion": 1}).status == 404
    # the read side before any recompute
    for path in ("pool", "grants", "grants/a", "excluded-nodes"):
        reply = call("GET", f"/clusters/demo/{path}")
        assert reply.status == 404 and "demo" in reply.body["message"], path
    assert call("GET", "/clusters/demo/history").body == {"cluster": "demo", "generations": [], "pauses": []}
    # and a pool that could never be read says why
    world.store.record_read_failure("demo", "RetryableError: connection refused")
    reply = call("GET", "/clusters/demo/pool")
    assert reply.status == 404 and "connection refused" in reply.body["message"]


def test_pool_grants_excluded_nodes_and_history_after_recomputes(world: World) -> None:
    # Given two teams and a recompute, then a node going NotReady and another recompute
    call("POST", QUOTAS, quota_body("a"))
    call("POST", QUOTAS, quota_body("b", strategy="Lend"))
    world.recompute()
    world.kube.nodes[0] = k8s_node("p5-0", ready="False")
    world.recompute()
    pool = call("GET", "/clusters/demo/pool")
    assert pool.status == 200
    assert (pool.body["cluster"], pool.body["generation"], pool.body["applyStatus"]) == ("demo", 2, "Applied")
    assert pool.body["unallocated"][P5][GPU] == "8" and pool.body["readFailure"] == ""
    assert pool.body["summary"] and pool.body["computedAt"] and set(pool.body["teams"]) == {"a", "b"}
    route, node = "/clusters/demo/excluded-nodes", {"p5-0": "NotReady"}
    assert pool.body["excludedNodes"] == node
    assert pool.body["excludedSummary"] == {"total": 1, "byReason": {"NotReady": 1}, "shown": 1, "route": route}
    # a may borrow 50% of its own 8 GPUs, 4, whatever the nodes (the Quota basis, the default); the pool it sees,
    # 16 (8 unallocated: 3 Ready nodes x 8 - a's 8 - b's 8, + b's 8 lent), is shown but caps nothing
    grants = call("GET", "/clusters/demo/grants").body
    assert grants["generation"] == 2 and grants["teams"]["a"]["borrowingLimit"][P5][GPU] == "4"
    one = call("GET", "/clusters/demo/grants/a").body
    assert one["team"] == "a"
    assert one["why"][P5][GPU] == {
        "basis": "Quota",
        "nominal": "8",
        "pool": "16",
        "percent": 50,
        "percentCap": "4",
        "absoluteCap": None,
        "limit": "4",
        "bound": "percentage of quota",
    }
    unknown = call("GET", "/clusters/demo/grants/zz")
    assert unknown.status == 404 and "a, b" in unknown.body["message"]
    excluded = {"cluster": "demo", "generation": 2, "total": 1, "byReason": {"NotReady": 1}, "excludedNodes": node}
    assert call("GET", route).body == excluded
    history = call("GET", "/clusters/demo/history").body
    assert [g["generation"] for g in history["generations"]] == [2, 1]
    assert history["generations"][0]["changes"]["excludedNodes"]["count"] == 1
    assert history["generations"][1]["changes"] == {"first": True}
    paged = pages("/clusters/demo/history", limit="1")
    assert [[g["generation"] for g in p["generations"]] for p in paged] == [[2], [1]]


# ----------------------------------------------------------------------------------- guards and errors
def test_an_unsigned_request_is_403_and_reaches_nothing(world: World) -> None:
    from idleshare.api import app

    before = world.items()
    reply = call("POST", QUOTAS, quota_body("a"), signed=False)
    assert reply.status == 403 and reply.body["errors"] == [] and "IAM" in reply.body["message"]
    event = proxy_event("GET", "/clusters")
    del event["requestContext"]["identity"]
    assert app.handler(event, CONTEXT)["statusCode"] == 403
    assert world.items() == before and world.publisher.events == []


def test_a_body_over_64_kib_is_413_one_not_json_by_content_type_415_and_an_unknown_route_404(world: World) -> None:
    body, before = json.dumps(quota_body("a", Description="x" * (names.API_MAX_BODY_BYTES))), world.items()
    assert len(body) > names.API_MAX_BODY_BYTES
    reply = call("POST", QUOTAS, body)
    assert reply.status == 413 and str(names.API_MAX_BODY_BYTES) in reply.body["message"]
    assert call("POST", QUOTAS, "{" * (names.API_MAX_BODY_BYTES + 1)).status == 413  # before parsing
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert call("POST", "/clusters/demo/recalculate", "reason=x", headers=form).status == 415
    assert world.items() == before and world.publisher.events == []
    charset = {"Content-Type": "application/json; charset=utf-8"}
    assert call("POST", "/clusters/demo/recalculate", "{}", headers=charset).status == 202
    reply = call("GET", "/quotas")
    assert (reply.status, reply.body) == (404, {"message": "no route for GET /quotas", "errors": []})


class Exploding:
    """A store whose every call fails the way ``error`` says."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise self.error

        return fail


def test_a_failing_store_is_a_503_if_throttled_else_a_500_naming_the_request_id(world: World, logs: Any) -> None:
    wiring.install(wiring.Dependencies(store=Exploding(RetryableError("throttled")), publisher=world.publisher))
    reply = call("GET", "/clusters/demo/pool")
    assert reply.status == 503 and reply.headers["Retry-After"] == "1"
    wiring.install(wiring.Dependencies(store=Exploding(RuntimeError("table secret-table: boom")), publisher=None))
    reply = call("GET", "/clusters", request_id="req-500")
    assert reply.status == 500 and "req-500" in reply.body["message"] and reply.body["errors"] == []
    assert "secret" not in json.dumps(reply.body) and "Traceback" not in json.dumps(reply.body)
    logged = [json.loads(line) for line in logs.getvalue().splitlines()]
    failure = next(entry for entry in logged if entry["level"] == "ERROR")  # the details are in the log
    assert failure["correlation_id"] == "req-500" and "secret-table: boom" in failure["exception"]


def test_a_failed_publish_keeps_the_stored_write_and_without_a_bus_nothing_is_stored(world: World) -> None:
    down = Mock(**{"publish.side_effect": RetryableError("events:PutEvents: ThrottlingException")})
    wiring.install(wiring.Dependencies(store=world.store, publisher=down))
    assert call("POST", QUOTAS, quota_body("a")).status == 201
    assert world.store.get_quota("demo", "a-quota") is not None
    wiring.install(wiring.Dependencies(store=world.store, publisher=None))
    assert call("POST", QUOTAS, quota_body("b")).status == 500
    assert world.store.get_quota("demo", "b-quota") is None
    assert call("GET", QUOTAS).status == 200


# ------------------------------------------------------------------------------------------ the document
CONTRACT_ROUTES = {("get", "/clusters")} | {  # under /clusters/{cluster}/: the methods of each route
    (method, "/clusters/{cluster}/" + route)
    for route, methods in {
        "usage": "get",  # the latest sample, or hours over from/to
        "compute-quotas": "post get",
        "compute-quotas/{name}": "get put delete",
        "scheduler-config": "get put delete",
        "pool": "get",
        "grants": "get",
        "grants/{team}": "get",
        "history": "get",
        "excluded-nodes": "get",
        "issues": "get",
        "recalculate": "post",
        "recalculations/{request_id}": "get",
        "pause": "post",  # the pause switch (docs/spec.md §3, "Pause")
        "resume": "post",
    }.items()
    for method in methods.split()
}


def test_the_openapi_document_lists_every_route_with_its_body_schema(world: World) -> None:
    reply = call("GET", names.API_OPENAPI_PATH)
    doc = reply.body
    assert reply.status == 200
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
    # and Swagger UI shows it
    swagger = call("GET", names.API_SWAGGER_PATH)
    assert swagger.status == 200 and "text/html" in swagger.headers["Content-Type"]
    assert "/clusters/{cluster}/recalculate" in swagger.body


def test_the_api_module_imports_no_kubernetes_client() -> None:
    code = "import sys, idleshare.api.app; print(sorted(m for m in sys.modules if m.startswith(('lightkube', 'idleshare.adapters.kube'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------------------ samples and the console
SAMPLES = Path(__file__).parents[2] / "events" / "api"


def sample(name: str) -> Any:
    return json.loads((SAMPLES / name).read_text())


def test_every_sample_in_events_api_and_the_console_test_are_accepted(world: World, monkeypatch: Any) -> None:
    created = call("POST", QUOTAS, sample("create-compute-quota.json"))
    assert created.status == 201 and created.body["Tags"] == [{"Key": "owner", "Value": "research-leads"}]
    updated = call("PUT", f"{QUOTAS}/research-quota", sample("update-compute-quota.json"))
    assert (updated.status, updated.body["ComputeQuotaVersion"]) == (200, 2)
    assert updated.body["ComputeQuotaTarget"] == {"TeamName": "research", "FairShareWeight": 10}  # kept
    assert call("PUT", SCHEDULER, sample("put-scheduler-config.json")).status == 200
    assert call("POST", "/clusters/demo/recalculate", sample("recalculate.json")).status == 202
    world.publisher.events.clear()
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

    now = [0.0]  # a clock that jumps instead of sleeping
    jump = partialmethod(admin.Admin.__init__, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    monkeypatch.setattr(admin.Admin, "__init__", jump)
    out = app.handler(event, CONTEXT)
    # Then the request is on the bus, answered 202 (nothing recomputes in this test, so the wait times out)
    assert out["statusCode"] == 202, out["body"]
    assert json.loads(out["body"])["status"] == "Requested"
    assert world.publisher.events[0][1]["reason"] == form["body"]["reason"]
