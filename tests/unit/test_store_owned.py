"""The ownership record in DynamoDB (``OWNED``, adapters/store/owned.py) on moto: written conditionally on the version
it was read at, read back exactly (identities, uids, pending creates, the deletion log), split into ``PART#OWNED#``
items when it outgrows one item and back inline when it shrinks, and a corrupt one refused naming its key."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from idleshare import table
from idleshare.adapters.store import DynamoStore
from idleshare.domain.ownership import Record
from idleshare.errors import ConflictError, PermanentError
from tests.aws_env import all_items, create_table, fake_aws_env


@pytest.fixture
def store() -> Iterator[DynamoStore]:
    with fake_aws_env(), mock_aws():
        yield DynamoStore(create_table(boto3.resource("dynamodb", region_name="us-east-1")))


def record(teams: int) -> Record:
    objects = {
        ("ClusterQueue", "", f"hyperpod-ns-team-{t:05d}-clusterqueue"): secrets.token_hex(18) for t in range(teams)
    }
    objects.update(
        {("LocalQueue", f"hyperpod-ns-team-{t:05d}", f"hyperpod-ns-team-{t:05d}-localqueue"): secrets.token_hex(18)
         for t in range(teams)}
    )  # fmt: skip
    return Record(objects=objects)


def test_a_record_round_trips_and_each_write_needs_the_version_it_read(store: DynamoStore) -> None:
    assert store.get_owned("c1") is None
    first = Record(
        objects={("ResourceFlavor", "", "ml.p5.48xlarge"): "u-1", ("LocalQueue", "ns-a", "ns-a-localqueue"): "u-2"},
        pending=frozenset({("ClusterQueue", "", "ns-a-clusterqueue")}),
        removed=({"object": "ClusterQueue/ns-b-clusterqueue", "uid": "u-0", "generation": 3, "at": "t"},),
    )
    stored = store.put_owned("c1", first)
    assert stored.version == 1
    read = store.get_owned("c1")
    assert read == stored
    with pytest.raises(ConflictError):
        store.put_owned("c1", first)  # version 0: another writer stored one meanwhile
    second = store.put_owned("c1", Record(objects={}, version=1))
    assert second.version == 2 and store.get_owned("c1") == second


def test_a_record_larger_than_an_item_is_in_parts_and_back_inline_when_it_shrinks(store: DynamoStore) -> None:
    big = record(6_000)  # 12,000 objects: ~1 MB of JSON, random uids do not compress
    stored = store.put_owned("c1", big)
    parts = [i for i in all_items(store.table) if i[table.SK].startswith(table.parts_prefix(table.OWNED_SK))]
    assert len(parts) >= 2
    assert store.get_owned("c1") == stored
    small = store.put_owned("c1", Record(objects={("Cohort", "", "shared-pool"): "u"}, version=stored.version))
    assert not [i for i in all_items(store.table) if i[table.SK].startswith(table.parts_prefix(table.OWNED_SK))]
    assert store.get_owned("c1") == small


def test_a_corrupt_record_is_refused_naming_its_key(store: DynamoStore) -> None:
    store.put_owned("c1", Record(objects={("Cohort", "", "shared-pool"): "u"}))
    store.table.update_item(
        Key={table.PK: table.cluster_pk("c1"), table.SK: table.OWNED_SK},
        UpdateExpression="SET owned = :b",
        ExpressionAttributeValues={":b": b"not zlib"},
    )
    with pytest.raises(PermanentError, match="corrupt item pk='CLUSTER#c1' sk='OWNED'"):
        store.get_owned("c1")
