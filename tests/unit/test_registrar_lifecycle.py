"""The registrar custom resource over a cluster's life, against the real DynamoDB store (moto): a
cluster removed from the config is deregistered by the next Update, every configured cluster by Delete; the
request's properties are what is registered (an update's rollback too); a removed cluster's data stays."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devkit.lambda_context import LambdaContext
from idleshare import names
from idleshare.adapters.store import DynamoStore
from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.handlers import registrar
from idleshare.runtime import wiring
from tests import builders
from tests.aws_env import create_table, fake_aws_env
from tests.builders import json_value, other_value

ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/"
A = {"id": "alpha", "eks_cluster_name": "alpha-eks", "hyperpod_cluster_arn": ARN + "aaaa1111aaaa"}
B = {"id": "beta", "eks_cluster_name": "beta-eks", "hyperpod_cluster_arn": ARN + "bbbb2222bbbb"}
C = {"id": "gamma", "eks_cluster_name": "gamma-eks"}
RENAMED = {"id": "beta-2", "eks_cluster_name": "beta-eks"}


def clusters(*items: dict[str, Any]) -> str:
    return json.dumps(list(items))


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoStore]:
    with fake_aws_env(), mock_aws():
        table = create_table(boto3.resource("dynamodb", region_name="us-east-1"))
        store = DynamoStore(table)
        monkeypatch.setenv(names.ENV_TABLE_NAME, table.name)
        monkeypatch.setenv(names.ENV_CLUSTERS, clusters(A, B))
        monkeypatch.setenv("_HANDLER", names.REGISTRAR_HANDLER)
        wiring.install(wiring.Dependencies(store=store))
        try:
            yield store
        finally:
            wiring.install(None)


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the registrar answers CloudFormation (instead of the PUT to the presigned URL)."""
    out: list[dict[str, Any]] = []

    def send(event: dict[str, Any], status: str, reason: str = "", data: dict[str, Any] | None = None) -> None:
        out.append({"Status": status, "Reason": reason, "Data": data or {}})

    monkeypatch.setattr(registrar, "send_response", send)
    return out


CFN = {"ResponseURL": "https://cloudformation-custom-resource-response.example/r-1", "RequestId": "r-1",
       "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/idleshare/1",
       "LogicalResourceId": "ClusterRegistry", "ResourceType": "Custom::IdleshareClusterRegistry"}  # fmt: skip


def request(kind: str, new: str | None, old: str | None = None) -> dict[str, Any]:
    """CloudFormation's request of type ``kind`` with the new (and old) Clusters property."""
    event: dict[str, Any] = {**CFN, "RequestType": kind, "ResourceProperties": {} if new is None else {"Clusters": new}}
    if kind != "Create":
        event["PhysicalResourceId"] = registrar.PHYSICAL_ID
    if old is not None:
        event["OldResourceProperties"] = {"Clusters": old}
    return event


def invoke(event: dict[str, Any]) -> dict[str, Any]:
    return registrar.handler(event, LambdaContext(function_name="registrar", aws_request_id="r-1"))


def registry_keys(store: DynamoStore) -> list[str]:
    """Every sk under the REGISTRY partition (the routing lookups and the list of clusters)."""
    items = store.table.query(KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": "REGISTRY"})
    return sorted(i["sk"] for i in items["Items"])


def registry_of(*configs: dict[str, Any]) -> list[str]:
    """The REGISTRY items of these clusters: the list entry and the EKS name and ARN lookups."""
    arns = [f"ARN#{c['hyperpod_cluster_arn']}" for c in configs if c.get("hyperpod_cluster_arn")]
    return sorted([*(f"CLUSTER#{c['id']}" for c in configs), *(f"EKS#{c['eks_cluster_name']}" for c in configs), *arns])


@pytest.mark.parametrize(
    ("created", "new", "answer", "left"),
    [
        # the cluster removed from the config
        ((A, B), (A,), ("", "beta"), (A,)),
        # a new cluster may take the EKS name of one removed in the same update
        ((A, B), (A, RENAMED), ("beta-2", "beta"), (A, RENAMED)),
        # a cluster left registered by an older deploy (before deregistration existed) is deregistered too
        ((A, B, C), (A,), ("", "beta,gamma"), (A,)),
    ],
)
def test_an_update_deregisters_every_cluster_not_in_the_new_config(store, answers, created, new, answer, left):
    invoke(request("Create", clusters(*created)))
    store.create_quota("beta", builders.quota_body("research", name="research"))
    out = invoke(request("Update", clusters(*new), old=clusters(A, B)))
    assert out == {"Status": "SUCCESS", "Registered": answer[0], "Deregistered": answer[1]}
    assert [c.cluster_id for c in store.list_clusters()] == [c["id"] for c in left]
    assert registry_keys(store) == registry_of(*left)  # every lookup of a removed cluster is gone
    for c in left:  # and each EKS name routes to the cluster that holds it now (beta-eks: beta-2 when renamed)
        assert store.find_cluster(eks_cluster_name=c["eks_cluster_name"]).cluster_id == c["id"]
    assert store.find_cluster(hyperpod_arn=B["hyperpod_cluster_arn"]) is None
    # the routes of the cluster kept are untouched; the removed cluster's data stays in the table
    assert store.find_cluster(eks_cluster_name="alpha-eks").cluster_id == "alpha"
    assert [q.name for q in store.list_quotas("beta")] == ["research"]
    assert [a["Status"] for a in answers] == ["SUCCESS", "SUCCESS"]


def test_delete_deregisters_every_configured_cluster_and_succeeds_when_none_was_registered(store, answers) -> None:
    # a Create that failed is rolled back with a Delete
    assert invoke(request("Delete", clusters(A, B))) == {"Status": "SUCCESS", "Deregistered": ""}
    invoke(request("Create", clusters(A, B)))
    assert invoke(request("Delete", clusters(A, B))) == {"Status": "SUCCESS", "Deregistered": "alpha,beta"}
    assert store.list_clusters() == [] and registry_keys(store) == []
    assert [a["Status"] for a in answers] == ["SUCCESS"] * 3


def test_an_update_rollback_registers_the_previous_config_from_the_request(store, answers, monkeypatch) -> None:
    invoke(request("Create", clusters(A, B)))
    invoke(request("Update", clusters(A), old=clusters(A, B)))
    # the stack's update fails later and is rolled back: CloudFormation asks for the previous clusters while the
    # function still has the new configuration
    monkeypatch.setenv(names.ENV_CLUSTERS, clusters(A))
    out = invoke(request("Update", clusters(A, B), old=clusters(A)))
    assert (out["Registered"], out["Deregistered"]) == ("beta", "")
    assert [c.cluster_id for c in store.list_clusters()] == ["alpha", "beta"]


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(ClusterSettings)])
def test_every_setting_is_registered_and_an_update_that_drops_it_restores_its_default(store, answers, name) -> None:
    value, default = other_value(name), getattr(ClusterSettings(), name)
    # Given alpha configured with the setting and beta without, When the stack is created
    invoke(request("Create", clusters(A | {name: json_value(value)}, B)))
    # Then the registry holds alpha's and beta's default
    assert {c.cluster_id: getattr(c.settings, name) for c in store.list_clusters()} == {"alpha": value, "beta": default}
    # When an update takes the key away from alpha's config, Then alpha is back on the default
    invoke(request("Update", clusters(A, B), old=clusters(A | {name: json_value(value)}, B)))
    assert getattr(store.get_cluster("alpha").settings, name) == default
    assert [a["Status"] for a in answers] == ["SUCCESS", "SUCCESS"]


def test_without_a_clusters_property_the_function_config_is_registered(store, answers) -> None:
    assert invoke(request("Create", None))["Registered"] == "alpha,beta"
    assert [c.cluster_id for c in store.list_clusters()] == ["alpha", "beta"]


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (request("Update", clusters(A), old="not json"), "OldResourceProperties.Clusters"),
        (request("Update", "[]", old=clusters(A)), "ResourceProperties.Clusters"),
        (request("Create", clusters({"id": "x"})), "ResourceProperties.Clusters: IDLESHARE_CLUSTERS[0].eks_cluster"),
        (request("Replace", clusters(A)), "RequestType"),
        (
            request("Update", clusters(A | {"borrow_limit_basis": "percent"}), old=clusters(A)),
            "ResourceProperties.Clusters: IDLESHARE_CLUSTERS[0].borrow_limit_basis: must be one of Quota, Pool",
        ),
    ],
)
def test_an_invalid_request_is_answered_failed_naming_the_field(store, answers, event, field) -> None:
    invoke(request("Create", clusters(A, B)))
    assert invoke(event) == {"Status": "FAILED"}
    assert answers[-1]["Status"] == "FAILED" and field in answers[-1]["Reason"], answers[-1]
    assert "Traceback" not in answers[-1]["Reason"]
    assert [c.cluster_id for c in store.list_clusters()] == ["alpha", "beta"]  # nothing deregistered
