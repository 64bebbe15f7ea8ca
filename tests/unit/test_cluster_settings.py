"""A cluster's settings: one type, read by one schema wherever they come from (the CDK config, the Lambdas'
environment, the registry, a scenario, ``plan``'s flags).

Every case is drawn from ``dataclasses.fields(ClusterSettings)``, never from a list of today's settings: a setting
added to the type is carried, defaulted and refused by name through every layer without touching them, and these
tests say so for it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from idleshare.adapters.ports import ClusterRecord
from idleshare.adapters.store import DynamoStore
from idleshare.domain.cluster_settings import ClusterSettings, SettingError, engine_settings
from idleshare.domain.model import Settings
from idleshare.errors import PermanentError
from idleshare.parse.cluster_settings import SETTINGS, read_settings, settings_json
from idleshare.runtime.env import EnvError, clusters_json, parse_clusters
from idleshare.table import META_SK, PK, REGISTRY_PK, SK, cluster_pk
from infra.config import ConfigError, parse_config
from tests.aws_env import create_table, fake_aws_env
from tests.builders import json_value, other_value, wrong_type

DEFAULTS = ClusterSettings()
FIELDS = [f.name for f in dataclasses.fields(ClusterSettings)]


@pytest.fixture(scope="module")
def table() -> Iterator[Any]:
    with fake_aws_env(), mock_aws():
        yield create_table(boto3.resource("dynamodb", region_name="us-east-1"))


def test_the_schema_reads_exactly_the_types_fields_and_each_has_a_valid_other_value() -> None:
    assert tuple(FIELDS) == SETTINGS and len(FIELDS) >= 7
    for name in FIELDS:
        changed = DEFAULTS.replace(**{name: other_value(name)})
        assert getattr(changed, name) != getattr(DEFAULTS, name)
        assert read_settings(settings_json(changed)) == changed
    assert read_settings({}) == DEFAULTS  # what is absent: the type's defaults, the one place they are set


@pytest.mark.parametrize("name", FIELDS)
def test_every_setting_travels_config_to_environment_to_registry_and_back(name: str, table: Any) -> None:
    value = other_value(name)
    # Given a CDK config that sets it (as users write it: beside the cluster's id) and a second cluster that does not
    config = parse_config(
        {
            "clusters": [
                {"id": "c1", "eks_cluster_name": "c1-eks", name: json_value(value)},
                {"id": "c2", "eks_cluster_name": "c2-eks"},
            ]
        }
    )
    assert [getattr(c.settings, name) for c in config.clusters] == [value, getattr(DEFAULTS, name)]
    assert parse_config(config.model_dump()) == config  # dumped as written: the settings beside the id
    # Then the Lambdas' environment carries it, and the registry keeps it as it was registered
    records = parse_clusters(config.clusters_env())
    assert [getattr(r.settings, name) for r in records] == [value, getattr(DEFAULTS, name)]
    store = DynamoStore(table, history_ttl_days=30)
    for record in records:
        store.put_cluster(record)
    assert [store.get_cluster(r.cluster_id) for r in records] == list(records)
    assert {c.cluster_id: getattr(c.settings, name) for c in store.list_clusters()} == {
        "c1": value,
        "c2": getattr(DEFAULTS, name),
    }


@pytest.mark.parametrize("name", FIELDS)
def test_a_wrong_value_of_every_setting_is_refused_naming_it_in_every_layer(name: str, table: Any) -> None:
    bad = wrong_type(name)
    with pytest.raises(SettingError, match=f"^{name}: ") as raised:
        read_settings({name: bad})
    assert raised.value.setting == name
    with pytest.raises(SettingError, match=f"^{name}: "):
        ClusterSettings(**{name: bad})
    with pytest.raises(ConfigError, match=rf"idleshare\.clusters\.0\.{name}: "):
        parse_config({"clusters": [{"id": "c1", "eks_cluster_name": "c1-eks", name: bad}]})
    environ = json.dumps([{"id": "c1", "eks_cluster_name": "e", name: bad}])
    with pytest.raises(EnvError, match=rf"IDLESHARE_CLUSTERS\[0\]\.{name}: "):
        parse_clusters(environ)
    # a registry item changed by hand is a corrupt item naming the setting, never read as a default
    store = DynamoStore(table, history_ttl_days=30)
    store.put_cluster(ClusterRecord("bad", "bad-eks"))
    table.update_item(
        Key={PK: cluster_pk("bad"), SK: META_SK},
        UpdateExpression="SET settings.#n = :v",
        ExpressionAttributeNames={"#n": name},
        ExpressionAttributeValues={":v": bad},
    )
    with pytest.raises(PermanentError, match=rf"corrupt item .*settings.*{name}: "):
        store.get_cluster("bad")
    # and registering the cluster again (a redeploy) mends it; so a corrupt item never blocks its deregistration
    store.put_cluster(ClusterRecord("bad", "bad-eks"))
    assert store.get_cluster("bad") == ClusterRecord("bad", "bad-eks")
    store.delete_cluster("bad")


def test_an_unknown_setting_is_refused_by_its_name_everywhere(table: Any) -> None:
    with pytest.raises(SettingError, match=r"^prefix: unknown setting"):
        read_settings({"prefix": "team-"})
    with pytest.raises(ConfigError, match=r"idleshare\.clusters\.0\.prefix: Extra inputs are not permitted"):
        parse_config({"clusters": [{"id": "c1", "eks_cluster_name": "c1-eks", "prefix": "team-"}]})
    with pytest.raises(ConfigError, match=r"idleshare\.clusters\.0\.settings: give each setting beside `id`"):
        parse_config({"clusters": [{"id": "c1", "eks_cluster_name": "c1-eks", "settings": {"headroom": "all"}}]})
    with pytest.raises(EnvError, match=r"IDLESHARE_CLUSTERS\[0\]\.prefix: unknown setting"):
        parse_clusters(json.dumps([{"id": "c1", "eks_cluster_name": "e", "prefix": "team-"}]))
    # and a registry item without its settings is corrupt: there is no item from before the settings to read
    store = DynamoStore(table, history_ttl_days=30)
    store.put_cluster(ClusterRecord("old", "old-eks"))
    for sk in (META_SK, cluster_pk("old")):
        pk = cluster_pk("old") if sk == META_SK else REGISTRY_PK
        table.update_item(Key={PK: pk, SK: sk}, UpdateExpression="REMOVE settings")
    with pytest.raises(PermanentError, match=r"corrupt item .*settings"):
        store.get_cluster("old")
    assert store.delete_cluster("old") and store.get_cluster("old") is None


def test_the_environment_is_read_back_as_the_cdk_app_wrote_it() -> None:
    records = (
        ClusterRecord("a", "a-eks", None, ClusterSettings(**{n: other_value(n) for n in FIELDS})),
        ClusterRecord("b", "b-eks", "arn:aws:sagemaker:us-east-1:111122223333:cluster/abc"),
    )
    assert parse_clusters(clusters_json(records)) == records


def test_the_engine_takes_every_setting_it_shares_by_name() -> None:
    shared = {f.name for f in dataclasses.fields(Settings)} & set(FIELDS)
    assert {"namespace_prefix", "cohort_name", "borrow_limit_basis", "headroom", "admission_policy"} <= shared
    changed = ClusterSettings(**{n: other_value(n) for n in FIELDS})
    engine = engine_settings(changed, default_borrow_limit=7)
    assert {n: getattr(engine, n) for n in shared} == {n: getattr(changed, n) for n in shared}
    assert engine.default_borrow_limit == 7


def test_a_record_changes_its_settings_only_through_the_type() -> None:
    record = ClusterRecord("a", "a-eks")
    assert record.with_settings(admission_policy=False).settings == DEFAULTS.replace(admission_policy=False)
    with pytest.raises(SettingError, match=r"^node_watch_seconds: must be a whole number of seconds"):
        record.with_settings(node_watch_seconds=0)
