"""docs/spec.md §5: the DynamoDB store (moto). Versioned quotas and scheduler config, the pool generation
guarded by conditional writes, append-only history with a TTL, and every SDK error translated."""

from __future__ import annotations

import base64
import json
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from moto import mock_aws

from idleshare import table as schema
from idleshare.adapters.ports import ClusterRecord, PoolRecord
from idleshare.adapters.store import PK, SK, TTL_ATTRIBUTE, DynamoStore, TransactionCancelledError
from idleshare.adapters.store.errors import translate
from idleshare.adapters.store.items import COMPRESS_ABOVE, MAX_POOL_PARTS, MAX_SIDE_JSON, PART_SIZE, item_size
from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.errors import (
    AlreadyExistsError,
    ConflictError,
    NotFoundError,
    PermanentError,
    RetryableError,
    StaleVersionError,
    WatchTakenOverError,
)
from idleshare.service.recompute import Recomputer
from tests import builders
from tests.aws_env import all_items, create_table, fake_aws_env
from tests.builders import k8s_node
from tests.corpus.make_corpus import MODEL, QUOTA_BASE, SCHEDULER_BASE
from tests.fakes import FakeKube, FakePublisher

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
C = "c1"
ARN_ID = "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdef123456"
ARN_NAME = "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster"
ARN_OTHER_ACCOUNT = "arn:aws:sagemaker:us-west-2:999999999999:cluster/abcdef123456"
ARN_UNKNOWN_ID = "arn:aws:sagemaker:us-west-2:111122223333:cluster/zzzzzz999999"


class Clock:
    now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def ddb() -> Iterator[Any]:
    # one moto mock per module (starting one costs ~1 s); each test gets its own table
    with fake_aws_env(), mock_aws():
        yield boto3.resource("dynamodb", region_name="us-east-1")


@pytest.fixture
def table(ddb: Any) -> Iterator[Any]:
    t = create_table(ddb)
    yield t
    t.delete()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(table: Any, clock: Clock) -> DynamoStore:
    return DynamoStore(table, history_ttl_days=30, clock=clock)


def quota_body(name: str = "research", team: str = "research", **extra: Any) -> dict[str, Any]:
    """The store tests' quota ``name`` of ``team``: one p5 with a fraction of a vCPU, weighted, enabled."""
    resources = [{"InstanceType": "ml.p5.48xlarge", "Count": 1, "VCpu": 0.1}]
    return builders.quota_body(team, name=name, resources=resources, weight=10, enabled=True, **extra)


def pool_record(generation: int, digest: str = "", pool: dict[str, Any] | None = None) -> PoolRecord:
    pool = {"unallocated": {"ml.p5.48xlarge": {"nvidia.com/gpu": generation}}} if pool is None else pool
    return PoolRecord(C, generation, digest or f"d{generation}", pool, T0.isoformat())


def raw_item(table: Any, pk: str, sk: str) -> dict[str, Any] | None:
    return table.get_item(Key={"pk": pk, "sk": sk}).get("Item")


def all_keys(table: Any) -> set[tuple[str, str]]:
    return {(i["pk"], i["sk"]) for i in all_items(table)}


def scan(table: Any) -> list[dict[str, Any]]:
    """Every item, every attribute, in a stable order: "nothing stored changed" means this is equal."""
    return sorted(table.scan(ConsistentRead=True)["Items"], key=lambda i: (i[PK], i[SK]))


def noise(size: int, seed: int = 0) -> str:
    """``size`` characters of text that zlib cannot shrink much (random base64: ~6 bits of entropy a byte)."""
    return base64.b64encode(random.Random(seed).randbytes(size * 3 // 4)).decode()


def part_keys(table: Any, owner: str) -> list[str]:
    return sorted(sk for pk, sk in all_keys(table) if pk == "CLUSTER#c1" and sk.startswith(f"PART#{owner}#"))


# ------------------------------------------------------------------------------------------ layout
def test_the_cdk_app_builds_its_tables_with_the_stores_keys_and_ttl():
    # Given the CDK construct's source (importing aws_cdk takes seconds, so read it)
    source = (REPO / "infra" / "constructs" / "storage.py").read_text()
    # Then it builds both tables from idleshare.table and names no key or TTL attribute of its own
    assert "from idleshare import table as schema" in source
    for name in ("PK", "SK", "TTL_ATTRIBUTE", "BILLING_MODE", "IDEMPOTENCY_PK", "IDEMPOTENCY_TTL_ATTRIBUTE"):
        assert f"schema.{name}" in source, name
    assert not re.search(r'"(pk|sk|ttl|id|expiration)"', source)
    # And the store writes the keys and TTL attribute the deployed table has
    assert (PK, SK, TTL_ATTRIBUTE) == (schema.PK, schema.SK, schema.TTL_ATTRIBUTE) == ("pk", "sk", "ttl")


# ---------------------------------------------------------------------------------------- clusters
def test_cluster_registry_round_trip_lookups_refusals_and_rename(store, table):
    rec = ClusterRecord("c1", "eks-a", ARN_ID, settings=ClusterSettings(namespace_prefix="hp-", cohort_name="pool-a"))
    store.put_cluster(rec)
    assert store.get_cluster("c1") == rec
    assert store.find_cluster(eks_cluster_name="eks-a") == store.find_cluster(hyperpod_arn=ARN_ID) == rec
    assert store.list_clusters() == [rec]
    assert store.get_cluster("nope") is None
    assert store.find_cluster(eks_cluster_name="other") is None and store.find_cluster() is None
    assert raw_item(table, "REGISTRY", "EKS#eks-a") == {"pk": "REGISTRY", "sk": "EKS#eks-a", "cluster_id": "c1"}
    # A taken EKS name or ARN, or a malformed ARN, is refused naming the field, writing nothing
    before = all_keys(table)
    with pytest.raises(AlreadyExistsError) as err:
        store.put_cluster(ClusterRecord("c2", "eks-a"))
    assert err.value.field == "eks_cluster_name"
    assert all_keys(table) == before  # no META for c2
    with pytest.raises(AlreadyExistsError) as err2:
        store.put_cluster(ClusterRecord("c2", "eks-b", ARN_ID))
    assert err2.value.field == "hyperpod_cluster_arn"
    with pytest.raises(PermanentError, match="not a HyperPod cluster ARN"):
        store.put_cluster(ClusterRecord("c2", "eks-b", "arn:aws:eks:us-west-2:111122223333:cluster/x"))
    assert store.get_cluster("c2") is None
    # When its EKS name changes and its ARN goes away, Then the old lookups are gone, the new one resolves
    store.put_cluster(ClusterRecord("c1", "eks-b"))
    assert store.find_cluster(eks_cluster_name="eks-a") is None and store.find_cluster(hyperpod_arn=ARN_ID) is None
    assert store.find_cluster(eks_cluster_name="eks-b") == ClusterRecord("c1", "eks-b")
    assert ("REGISTRY", "EKS#eks-a") not in all_keys(table)


@pytest.mark.parametrize(
    ("registered", "query", "found"),
    [
        # the name-form ARN of AWS's examples finds the cluster registered under that name or that EKS name
        (ClusterRecord("sample-cluster", "eks-x"), {"hyperpod_arn": ARN_NAME}, "sample-cluster"),
        (ClusterRecord("sample-cluster", "eks-x", ARN_ID), {"hyperpod_arn": ARN_NAME}, "sample-cluster"),
        (ClusterRecord("c1", "sample-cluster"), {"hyperpod_arn": ARN_NAME}, "c1"),
        # ... but not one registered in another account
        (ClusterRecord("sample-cluster", "eks-x", ARN_OTHER_ACCOUNT), {"hyperpod_arn": ARN_NAME}, None),
        # the exact registered name-form ARN; an unknown id-form ARN; not an ARN
        (ClusterRecord("c9", "eks-x", ARN_NAME), {"hyperpod_arn": ARN_NAME}, "c9"),
        (ClusterRecord("c9", "eks-x", ARN_NAME), {"hyperpod_arn": ARN_UNKNOWN_ID}, None),
        (ClusterRecord("c9", "eks-x"), {"hyperpod_arn": "not-an-arn"}, None),
        # an unknown EKS name falls back to the ARN
        (ClusterRecord("c1", "eks-a", ARN_ID), {"eks_cluster_name": "unknown", "hyperpod_arn": ARN_ID}, "c1"),
    ],
)
def test_find_cluster_by_hyperpod_arn_by_id_or_name(store, registered, query, found):
    store.put_cluster(registered)
    result = store.find_cluster(**query)
    assert (result.cluster_id if result else None) == found


# ------------------------------------------------------------------------------------------ quotas
def test_create_quota_starts_at_version_1_with_a_quota_id(store, table):
    # store-managed fields of the input are ignored
    created = store.create_quota(C, quota_body(ComputeQuotaId="zzzzzzzzzzzz", ComputeQuotaVersion=7))
    assert (created.version, created.name, created.body["ComputeQuotaVersion"]) == (1, "research", 1)
    assert re.fullmatch(r"[a-z0-9]{12}", created.body["ComputeQuotaId"])
    assert created.body["CreationTime"] == T0.isoformat()
    got = store.get_quota(C, "research")
    assert got == created and type(got.version) is int and type(got.body["ComputeQuotaVersion"]) is int
    assert store.get_quota(C, "nope") is None
    # the body is stored as JSON text: 0.1 stays exactly "0.1"
    item = raw_item(table, "CLUSTER#c1", "QUOTA#research")
    assert '"VCpu":0.1' in item["body"]
    assert created.body["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["VCpu"] == 0.1
    assert raw_item(table, "CLUSTER#c1", "TEAM#research") is not None
    # the same name in another cluster is fine
    assert store.create_quota("c2", quota_body()).version == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [({"ComputeQuotaTarget": {"TeamName": "t"}}, "Name"), ({"Name": "x"}, "ComputeQuotaTarget"),
     ({"Name": "", "ComputeQuotaTarget": {"TeamName": "t"}}, "Name"), ("not an object", ""),
     ({"Name": "x", "ComputeQuotaTarget": {"TeamName": "t"}, "Description": float("nan")}, "")],
)  # fmt: skip
def test_bodies_without_name_or_team_or_not_json_are_refused(store, table, body, field):
    # the store keys a quota by its Name and team: without them, or not JSON, nothing is written (the admin API's
    # request model, the gate before the store, refuses these too: tests/unit/test_requests.py)
    with pytest.raises(PermanentError) as err:
        store.create_quota(C, body)
    assert table.scan()["Items"] == [] and field in str(err.value)


def test_list_quotas_reads_every_page(store, table, monkeypatch):
    for i in range(7):
        store.create_quota(C, quota_body(f"q{i}", f"t{i}"))
    store.create_quota("c2", quota_body("elsewhere", "x"))
    # Given a Query that returns 2 items per page
    calls: list[dict[str, Any]] = []
    query = table.query
    monkeypatch.setattr(table, "query", lambda **kw: calls.append(kw) or query(**{**kw, "Limit": 2}))
    assert [q.name for q in store.list_quotas(C)] == [f"q{i}" for i in range(7)]
    assert len(calls) >= 4 and "ExclusiveStartKey" in calls[-1]


def test_an_update_bumps_the_version_and_refuses_a_stale_one_a_rename_and_a_missing_quota_or_config(store, clock):
    store.create_quota(C, quota_body())
    clock.now = T0 + timedelta(minutes=5)
    updated = store.update_quota(C, "research", quota_body(ActivationState="Disabled"), target_version=1)
    assert (updated.version, updated.body["ActivationState"]) == (2, "Disabled")
    assert (updated.body["LastModifiedTime"], updated.body["CreationTime"]) == (clock.now.isoformat(), T0.isoformat())
    assert store.get_quota(C, "research") == updated
    with pytest.raises(StaleVersionError) as err:
        store.update_quota(C, "research", quota_body(), target_version=1)
    assert err.value.current_version == 2
    with pytest.raises(PermanentError, match="renamed"):
        store.update_quota(C, "research", quota_body("other"), target_version=2)
    with pytest.raises(NotFoundError):
        store.update_quota(C, "nope", quota_body("nope"), target_version=1)
    with pytest.raises(NotFoundError):  # nor a scheduler config that does not exist
        store.put_scheduler_config(C, {}, target_version=1)
    assert store.get_quota(C, "research") == updated


@pytest.mark.parametrize(
    ("sk", "op", "write"),
    [
        ("QUOTA#research", "update_quota", lambda s: s.update_quota(C, "research", quota_body(), target_version=1)),
        ("SCHEDULER", "put_scheduler_config", lambda s: s.put_scheduler_config(C, {"F": "On"}, target_version=1)),
    ],
)
def test_a_write_between_the_read_and_the_conditional_write_is_a_stale_version(store, monkeypatch, sk, op, write):
    # Given writer A read version 1, then writer B wrote version 2 before A wrote
    store.create_quota(C, quota_body())
    store.put_scheduler_config(C, {"F": "On"})
    stale = store._get("CLUSTER#c1", sk, "test")
    store.update_quota(C, "research", quota_body(ActivationState="Disabled"), target_version=1)
    store.put_scheduler_config(C, {"F": "Off"}, target_version=1)
    real_get = store._get
    monkeypatch.setattr(store, "_get", lambda pk, key, o: dict(stale or {}) if o == op else real_get(pk, key, o))
    # When A writes with target version 1, Then the conditional write refuses it
    with pytest.raises(StaleVersionError) as err:
        write(store)
    assert err.value.current_version == 2
    monkeypatch.undo()
    assert store.get_quota(C, "research").body["ActivationState"] == "Disabled"
    assert store.get_scheduler_config(C).body == {"F": "Off"}


def test_a_taken_name_or_team_is_refused_atomically_and_a_team_rename_moves_the_guard(store, table):
    store.create_quota(C, quota_body("q", "alpha"))
    store.create_quota(C, quota_body("q1", "gamma"))
    before = scan(table)
    for write, field in [
        (lambda: store.create_quota(C, quota_body("q", "other-team")), "Name"),
        (lambda: store.create_quota(C, quota_body("q2", "alpha")), "ComputeQuotaTarget.TeamName"),
        (
            lambda: store.update_quota(C, "q1", quota_body("q1", "alpha"), target_version=1),
            "ComputeQuotaTarget.TeamName",
        ),
    ]:
        with pytest.raises(AlreadyExistsError) as err:
            write()
        assert err.value.field == field and scan(table) == before  # nothing at all was written
    store.update_quota(C, "q", quota_body("q", "beta"), target_version=1)
    assert raw_item(table, "CLUSTER#c1", "TEAM#alpha") is None
    assert raw_item(table, "CLUSTER#c1", "TEAM#beta") == {"pk": "CLUSTER#c1", "sk": "TEAM#beta", "quota_name": "q"}
    assert store.create_quota(C, quota_body("q2", "alpha")).version == 1  # the old team is free again


# --------------------------------------------------------------------- botocore bounds, at the store
# The store stores what it is given: the admin API's request models are the gate of a write, and refuse
# every bound case of the bad-input corpus (tests/unit/test_requests.py). Here: bodies at the bounds
# store, and a body breaking one that reaches the table anyway is refused by the recompute.
CORPUS: dict[str, dict[str, str]] = json.loads((REPO / "tests" / "corpus" / "expected.json").read_text())


def corpus_case(path: str) -> tuple[dict[str, Any], str]:
    """The body a writer would hand the store, and the field it breaks (paths start at the body's fields)."""
    doc = json.loads((REPO / path).read_text(encoding="utf-8"))
    field = CORPUS[path]["field"]
    return (doc[0], field.removeprefix("[0].")) if CORPUS[path]["kind"] == "quotas" else (doc, field)


def test_bodies_at_the_botocore_bounds_still_store(store, table):
    # Given bodies holding every structure of the shapes, with values at botocore's maxima
    maximum = {n: int(MODEL.shape_for(n).metadata["max"]) for n in ("BorrowLimit", "FairShareWeight", "PriorityWeight")}
    quota = json.loads(json.dumps(QUOTA_BASE))
    quota["ComputeQuotaConfig"]["ResourceSharingConfig"]["BorrowLimit"] = maximum["BorrowLimit"]
    quota["ComputeQuotaTarget"]["FairShareWeight"] = maximum["FairShareWeight"]
    scheduler = json.loads(json.dumps(SCHEDULER_BASE))
    scheduler["SchedulerConfig"]["PriorityClasses"][0]["Weight"] = maximum["PriorityWeight"]
    created = store.create_quota(C, quota)
    assert created.version == 1
    assert created.body["ComputeQuotaConfig"]["ResourceSharingConfig"]["BorrowLimit"] == maximum["BorrowLimit"]
    updated = store.update_quota(C, quota["Name"], {**quota, "ActivationState": "Disabled"}, target_version=1)
    assert updated.version == 2
    assert store.put_scheduler_config(C, scheduler).body == scheduler
    assert store.put_scheduler_config(C, SCHEDULER_BASE, target_version=1).version == 2
    assert {i[SK] for i in scan(table)} == {"QUOTA#team-a-quota", "TEAM#team-a", "SCHEDULER"}


# -------------------------------------------------------------------------------------------- pool
def test_pool_generations_advance_one_at_a_time_and_of_two_writers_one_wins(store):
    for generation, expected in [(3, 1), (1, 1), (0, -1)]:
        with pytest.raises(PermanentError, match="does not follow"):
            store.put_pool(pool_record(generation), expected_generation=expected)
    assert store.get_pool(C) is None
    # Given two recomputes that both read generation g, Then the second one loses: ConflictError (handed back, not
    # consumed: re-read and decide again)
    for g in (0, 1):
        store.put_pool(pool_record(g + 1, digest=f"writer-a{g}"), expected_generation=g)
        with pytest.raises(ConflictError):
            store.put_pool(pool_record(g + 1, digest=f"writer-b{g}"), expected_generation=g)
        got = store.get_pool(C)
        assert got == pool_record(g + 1, digest=f"writer-a{g}") and type(got.generation) is int
    assert [h.digest for h in store.list_history(C)] == ["writer-a1", "writer-a0"]


def test_history_is_append_only_with_a_ttl_and_lists_newest_first(store, table, clock):
    store.put_pool(pool_record(1), expected_generation=0)
    clock.now = T0 + timedelta(hours=1)
    store.put_pool(pool_record(2), expected_generation=1)
    ttls = [int(raw_item(table, "CLUSTER#c1", f"HISTORY#000000000{g}")["ttl"]) for g in (1, 2)]
    assert ttls == [int((T0 + timedelta(days=30, hours=h)).timestamp()) for h in (0, 1)]
    # a history item is never overwritten: if it somehow exists, the whole write is refused
    table.put_item(Item={"pk": "CLUSTER#c1", "sk": "HISTORY#0000000003", "generation": 3, "digest": "x"})
    with pytest.raises(ConflictError):
        store.put_pool(pool_record(3), expected_generation=2)
    assert store.get_pool(C).generation == 2
    table.delete_item(Key={"pk": "CLUSTER#c1", "sk": "HISTORY#0000000003"})
    # the history lists newest first, limited, with or without the pools
    for g in range(3, 6):
        store.put_pool(pool_record(g), expected_generation=g - 1)
    newest = store.list_history(C, limit=3)
    assert [h.generation for h in newest] == [5, 4, 3]
    assert newest[0].pool == pool_record(5).pool
    assert newest[0].extra["expires_at"] == int((T0 + timedelta(hours=1)).timestamp()) + 30 * 86400
    assert [h.generation for h in reversed(store.list_history(C))] == [1, 2, 3, 4, 5]
    light = store.list_history(C, limit=2, include_pool=False)
    assert [h.generation for h in light] == [5, 4] and light[0].pool == {}
    assert store.list_history(C, limit=0) == [] and store.list_history("other") == []


def test_a_pool_is_plain_json_when_small_and_compressed_binary_in_one_item_when_large(store, table):
    store.put_pool(pool_record(1), expected_generation=0)
    item = raw_item(table, "CLUSTER#c1", "POOL")
    assert item["pool_encoding"] == "json" and len(item["pool"]) < COMPRESS_ABOVE
    assert json.loads(item["pool"]) == pool_record(1).pool
    # Given a pool whose JSON is ~600 KB (above the 400 KB item limit uncompressed)
    pool = {"teams": {f"team-{i:05d}": {"nominal": {"ml.p5.48xlarge": {"nvidia.com/gpu": i}}} for i in range(9000)}}
    assert len(json.dumps(pool)) > 500_000
    store.put_pool(pool_record(2, pool=pool), expected_generation=1)
    # Then the POOL item holds it xz-compressed in a binary attribute, in one item: no parts
    item = raw_item(table, "CLUSTER#c1", "POOL")
    assert item["pool_encoding"] == "xz"  # xz: half the WRU of zlib on every change
    assert isinstance(item["pool"].value, bytes) and len(item["pool"].value) < PART_SIZE
    assert "pool_parts" not in item and part_keys(table, "POOL") == [] and part_keys(table, "HISTORY") == []
    assert store.get_pool(C).pool == pool
    assert store.list_history(C)[0].pool == pool


@pytest.mark.parametrize("fresh_store", [False, True], ids=["same-store", "fresh-store"])
def test_a_large_pool_is_split_into_parts_and_a_larger_ones_leftovers_go_next_write(store, table, clock, fresh_store):
    # Given a pool that compresses to ~530 KB (two parts of 300,000 bytes), stored as generation 1
    pool = {"noise": noise(700_000)}
    store.put_pool(pool_record(1, pool=pool), expected_generation=0)
    # Then the POOL and HISTORY items reference two parts each, under keys no other prefix matches
    item = raw_item(table, "CLUSTER#c1", "POOL")
    history = raw_item(table, "CLUSTER#c1", "HISTORY#0000000001")
    assert (item["pool_encoding"], item["pool_parts"], "pool" in item) == ("xz", 2, False)
    assert history["pool_parts"] == 2 and history["pool_sha256"] == item["pool_sha256"]
    assert part_keys(table, "POOL") == ["PART#POOL#000", "PART#POOL#001"]
    assert part_keys(table, "HISTORY") == ["PART#HISTORY#0000000001#000", "PART#HISTORY#0000000001#001"]
    # And the history's parts expire with the history item, and every item is under DynamoDB's 400 KB
    assert {raw_item(table, "CLUSTER#c1", sk)[TTL_ATTRIBUTE] for sk in part_keys(table, "HISTORY")} == {
        history[TTL_ATTRIBUTE]
    }
    assert all(item_size(raw) < 400_000 for raw in all_items(table))
    # And the pool reads back equal, from the pool and the history (with or without the pools)
    got = store.get_pool(C)
    assert got.pool == pool and got.generation == 1
    assert [h.pool for h in store.list_history(C)] == [pool]
    assert [h.pool for h in store.list_history(C, include_pool=False)] == [{}]
    # And a quota list or a history page reads no part
    assert [h.generation for h in store.list_history(C, before_generation=2)] == [1]
    assert store.list_quotas(C) == []
    # When generation 2 takes three parts and generation 3 two again, Then the POOL item's third part is gone;
    # generation 2's history parts stay
    big, medium = {"noise": noise(1_100_000, 1)}, {"noise": noise(700_000, 2)}
    store.put_pool(pool_record(2, pool=big), expected_generation=1)
    assert part_keys(table, "POOL") == ["PART#POOL#000", "PART#POOL#001", "PART#POOL#002"]
    writer = DynamoStore(table, clock=clock) if fresh_store else store  # a fresh one knows no part count
    writer.put_pool(pool_record(3, pool=medium), expected_generation=2)
    assert part_keys(table, "POOL") == ["PART#POOL#000", "PART#POOL#001"]
    assert len(part_keys(table, "HISTORY#0000000002")) == 3
    assert writer.get_pool(C).pool == medium
    # When generation 4 is small again (one item), Then no part is left and every generation reads back
    DynamoStore(table, clock=clock).put_pool(pool_record(4), expected_generation=3)
    assert part_keys(table, "POOL") == []
    assert [h.pool for h in store.list_history(C)] == [pool_record(4).pool, medium, big, pool]
    # When a history entry loses a part, Then reading the history with its pools names it, without them lists it,
    # and once its TTL has passed (DynamoDB deletes expired items later, not at once) it is left out
    table.delete_item(Key={"pk": "CLUSTER#c1", "sk": "PART#HISTORY#0000000001#000"})
    with pytest.raises(PermanentError, match="corrupt item pk='CLUSTER#c1' sk='HISTORY#0000000001'"):
        store.list_history(C)
    assert [h.generation for h in store.list_history(C, include_pool=False)] == [4, 3, 2, 1]
    clock.now = T0 + timedelta(days=31)
    assert 1 not in [h.generation for h in store.list_history(C)]


def test_a_pool_too_large_for_one_transaction_or_an_outbox_above_its_bound_is_refused_naming_the_sizes(store, table):
    pool = {"noise": noise(MAX_POOL_PARTS * PART_SIZE * 4 // 3 + 100_000)}
    with pytest.raises(PermanentError, match=r"too large to store: \d+ bytes of JSON, \d+ compressed") as caught:
        store.put_pool(pool_record(1, pool=pool), expected_generation=0)
    assert str(MAX_POOL_PARTS * PART_SIZE) in str(caught.value)
    # and an outbox or extra above its bound, naming it
    too_big = {"x": "y" * MAX_SIDE_JSON}
    with pytest.raises(PermanentError, match=r"outbox of the pool of c1 is too large to store: \d+ bytes"):
        store.put_pool(replace(pool_record(1), outbox=too_big), expected_generation=0)
    with pytest.raises(PermanentError, match=r"extra of the pool of c1 is too large to store"):
        store.put_pool(replace(pool_record(1), extra=too_big), expected_generation=0)
    assert store.get_pool(C) is None and all_keys(table) == set()  # nothing was written


@pytest.mark.parametrize(
    ("part", "damage"),
    [("PART#POOL#001", "missing"), ("PART#POOL#001", "stale"), ("PART#POOL#001", "altered"),
     ("PART#WATCH#NODES#001", "missing")],
)  # fmt: skip
def test_a_missing_or_corrupt_part_is_a_permanent_error_naming_the_item(store, table, part, damage):
    # Given a pool and a watch checkpoint in two parts each, one part damaged
    store.put_pool(pool_record(1, pool={"noise": noise(700_000)}), expected_generation=0)
    store.save_watch(C, store.claim_watch(C, "w1").lease, "rv-1", BIG_NODES)
    key = {"pk": "CLUSTER#c1", "sk": part}
    if damage == "missing":
        table.delete_item(Key=key)
    elif damage == "stale":
        table.update_item(Key=key, UpdateExpression="SET part_of = :x", ExpressionAttributeValues={":x": "0" * 64})
    else:
        item = raw_item(table, "CLUSTER#c1", part)
        table.put_item(Item={**item, "data": bytes(reversed(item["data"].value))})
    owner = part.removeprefix("PART#").rsplit("#", 1)[0]
    with pytest.raises(PermanentError, match=f"corrupt item pk='CLUSTER#c1' sk='{owner}'"):
        store.get_pool(C) if owner == "POOL" else store.claim_watch(C, "w2")


def test_a_pool_read_that_interleaves_with_a_newer_generation_reads_again(store, table, clock, monkeypatch):
    # Given generation 1 in two parts, and a writer that stores generation 2 (two other parts) between the reader's
    # GetItem of the POOL item and its Query of the parts
    first, second = {"noise": noise(700_000, 1)}, {"noise": noise(700_000, 2)}
    store.put_pool(pool_record(1, pool=first), expected_generation=0)
    reader = DynamoStore(table, clock=clock)
    query_parts = reader._parts
    calls: list[int] = []

    def interleaved(*args: Any) -> list[dict[str, Any]]:
        if not calls:
            store.put_pool(pool_record(2, pool=second), expected_generation=1)
        calls.append(1)
        return query_parts(*args)

    monkeypatch.setattr(reader, "_parts", interleaved)
    # When the reader reads the pool, then it gets generation 2 whole (not a mix, not an error)
    got = reader.get_pool(C)
    assert (got.generation, got.pool) == (2, second) and len(calls) == 2


def test_a_pool_an_earlier_version_stored_zlib_compressed_is_still_read(store, table):
    # Given a POOL item as the versions before xz wrote it: zlib binary inline, encoding "zlib"
    document = {"unallocated": {"ml.p5.48xlarge": {"nvidia.com/gpu": "8"}}}
    blob = zlib.compress(json.dumps(document).encode())
    table.put_item(Item={"pk": "CLUSTER#c1", "sk": "POOL", **pool_item(pool=blob, pool_encoding="zlib")})
    # When it is read, then the document is the one stored
    assert store.get_pool(C).pool == document


def test_an_xz_pool_is_smaller_than_zlib_and_its_stored_size_is_what_the_item_limit_checks():
    from idleshare.adapters.store.items import MAX_POOL_PARTS, pack

    pool = {"teams": {f"team-{i:03d}": {"nominal": {"f": {"r": i % 7}}, "lend": {"f": {"r": 0}}} for i in range(3000)}}
    xz = pack(pool, "pool", max_parts=MAX_POOL_PARTS, operation="t", xz=True)
    z = pack(pool, "pool", max_parts=MAX_POOL_PARTS, operation="t")
    assert xz.encoding == "xz" and z.encoding == "zlib"
    assert isinstance(xz.inline, bytes) and isinstance(z.inline, bytes) and len(xz.inline) < len(z.inline)


@pytest.mark.parametrize("encoding", ["zlib+base64", "gzip", ""])
def test_a_pool_of_an_encoding_the_store_does_not_write_is_a_corrupt_item_naming_it(store, table, encoding):
    # Given a POOL item whose pool is readable text in an encoding this store never writes (zlib+base64 among them)
    text = base64.b64encode(zlib.compress(json.dumps({"unallocated": {}}).encode())).decode()
    table.put_item(Item={"pk": "CLUSTER#c1", "sk": "POOL", **pool_item(pool=text, pool_encoding=encoding)})
    # When it is read, then the store says the item is corrupt and names the encoding (no decode attempted)
    with pytest.raises(
        PermanentError, match=f"corrupt item pk='CLUSTER#c1' sk='POOL'.*unknown pool_encoding '{re.escape(encoding)}'"
    ):
        store.get_pool(C)


# ------------------------------------------------------------------- outbox, apply status and read failure
def test_the_outbox_is_stored_with_its_generation_and_cleared_only_at_it(store, table):
    # Given generation 1 stored with its event not yet published
    event = {"cluster": C, "generation": 1, "changes": {"first": True}, "summary": "s"}
    store.put_pool(replace(pool_record(1), outbox=event), expected_generation=0)
    # Then the pool carries it (the history does not: it is the pool's)
    assert store.get_pool(C).outbox == event
    assert "outbox" not in raw_item(table, "CLUSTER#c1", "HISTORY#0000000001")
    # When generation 2 lands with its own outbox and a late run clears generation 1's
    second = {**event, "generation": 2}
    store.put_pool(replace(pool_record(2), outbox=second), expected_generation=1)
    store.clear_outbox(C, 1)
    # Then generation 2's outbox is still there (a lost race is a no-op)
    assert store.get_pool(C).outbox == second
    # When generation 2's event is published and cleared, then the pool has no outbox and the rest is unchanged
    store.clear_outbox(C, 2)
    got = store.get_pool(C)
    assert got.outbox is None and (got.generation, got.pool) == (2, pool_record(2).pool)
    # And clearing on a cluster without a pool is a no-op
    store.clear_outbox("nobody", 1)
    assert store.get_pool("nobody") is None


def test_an_apply_status_or_a_read_failure_lands_on_the_generation_it_names_only(store, table):
    with pytest.raises(PermanentError):
        store.record_apply(C, 1, "Done")  # not a status
    store.put_pool(pool_record(1), expected_generation=0)
    store.record_apply(C, 1, "Applied", "3 applied, 0 deleted")
    got = store.get_pool(C)
    assert (got.apply_status, got.apply_message) == ("Applied", "3 applied, 0 deleted")
    # When a late run that started at generation 0 records a failure, then nothing changes
    store.record_read_failure(C, "late: boom", generation=0)
    assert store.get_pool(C).read_failure == ""
    # When a run at generation 1 records one, then it is recorded, the pool kept; a late clear from 0 keeps it
    store.record_read_failure(C, "RetryableError: timeout", generation=1)
    store.record_read_failure(C, "", generation=0)
    got = store.get_pool(C)
    assert (got.generation, got.pool, got.read_failure) == (1, pool_record(1).pool, "RetryableError: timeout")
    # And without a generation: recorded whatever the generation
    store.record_read_failure(C, "")
    assert store.get_pool(C).read_failure == ""
    # late news about a generation the pool left does nothing
    store.put_pool(pool_record(2), expected_generation=1)
    store.record_apply(C, 1, "Failed", "late news about generation 1")
    got = store.get_pool(C)
    assert (got.generation, got.apply_status, got.apply_message) == (2, "Pending", "")
    # and on a cluster without a pool it creates nothing
    store.record_apply("c2", 1, "Applied")
    assert raw_item(table, "CLUSTER#c2", "POOL") is None


def test_a_generations_count_of_fights_is_kept_with_its_apply_status_and_a_new_generation_starts_without(store):
    store.put_pool(pool_record(1), expected_generation=0)
    rewrites = {"ClusterQueue/q": {"count": 2, "writtenAt": 1.5, "managers": ["gitops"]}}
    store.record_apply(C, 1, "Applied", "1 applied, 0 deleted", rewrites=rewrites)
    assert store.get_pool(C).rewrites == rewrites
    store.record_apply(C, 1, "Conflict", "named")  # None: left as stored
    assert store.get_pool(C).rewrites == rewrites
    store.put_pool(pool_record(2), expected_generation=1)
    assert store.get_pool(C).rewrites == {}


@pytest.mark.parametrize("generation", [None, 0])
def test_a_read_failure_before_any_pool_is_generation_0_and_the_first_pool_still_lands(store, generation):
    # a failure naming generation 1 on a cluster without a pool item does nothing
    store.record_read_failure("other", "boom", generation=1)
    assert store.get_pool("other") is None
    # Given a cluster that was never observed successfully
    store.record_read_failure(C, "cannot reach the API server", generation=generation)
    got = store.get_pool(C)
    assert (got.generation, got.pool, got.digest) == (0, {}, "")
    assert got.read_failure == "cannot reach the API server"
    # When the first successful recompute writes generation 1 expecting 0, Then it lands, and the failure is cleared
    store.put_pool(pool_record(1), expected_generation=0)
    got = store.get_pool(C)
    assert got.generation == 1 and got.read_failure == ""
    # but expecting 0 again now loses
    with pytest.raises(ConflictError):
        store.put_pool(pool_record(1), expected_generation=0)


# ---------------------------------------------------------------------------------- watcher checkpoint
BIG_NODES = {f"ip-{i}": {"noise": noise(7_000, i)} for i in range(100)}  # compressing to ~530 KB: two parts


def test_a_watch_is_claimed_with_a_lease_checkpointed_in_parts_when_large_and_taken_over(store, table, clock):
    first = store.claim_watch(C, "inv-1")
    assert (first.lease, first.resource_version, first.nodes) == (1, "", None)
    views = {"a": {"ready": True, "cordoned": False}}
    store.save_watch(C, 1, "10", views)
    store.save_watch(C, 1, "11")  # the resource version alone: the views stay
    second = store.claim_watch(C, "inv-2")
    assert (second.lease, second.resource_version, second.nodes) == (2, "11", views)
    for stale_views in (None, views):  # the older lease is refused, with or without views: a takeover, named
        with pytest.raises(WatchTakenOverError, match="taken over"):
            store.save_watch(C, 1, "12", stale_views)
    item = raw_item(table, "CLUSTER#c1", "WATCH")
    assert (item["rv"], item["watch_owner"]) == ("11", "inv-2")
    # Given node views in two parts saved under the current lease, Then WATCH#NODES references two parts and no item
    # is over 400 KB
    lease = second.lease
    store.save_watch(C, lease, "rv-1", BIG_NODES)
    item = raw_item(table, "CLUSTER#c1", "WATCH#NODES")
    assert item["nodes_parts"] == 2 and "nodes" not in item
    assert part_keys(table, "WATCH#NODES") == ["PART#WATCH#NODES#000", "PART#WATCH#NODES#001"]
    assert all(item_size(raw) < 400_000 for raw in all_items(table))
    # When a newer invocation claims the watch, then it gets every node view back
    bookmark = DynamoStore(table, clock=clock).claim_watch(C, "inv-3")
    assert (bookmark.resource_version, bookmark.nodes) == ("rv-1", BIG_NODES)
    # When it saves a small checkpoint, then the parts are gone and the views are inline again
    small = {"ip-1": {"ready": True}}
    DynamoStore(table, clock=clock).save_watch(C, bookmark.lease, "rv-2", small)
    item = raw_item(table, "CLUSTER#c1", "WATCH#NODES")
    assert "nodes_parts" not in item and part_keys(table, "WATCH#NODES") == []
    assert store.claim_watch(C, "inv-4").nodes == small
    # And the older lease is still refused (fencing unchanged), writing nothing
    with pytest.raises(WatchTakenOverError, match="taken over"):
        store.save_watch(C, lease, "rv-3", BIG_NODES)
    assert part_keys(table, "WATCH#NODES") == []


# ---------------------------------------------------------------------------------- corrupt items
def quota_item(**changes: Any) -> dict[str, Any]:
    """A stored quota item (its key aside), valid but for ``changes``."""
    valid = {"name": "q", "team": "t", "quota_id": "abcdefabcdef", "version": 1, "body": "{}"}
    return {**valid, "created_at": "", "updated_at": "", **changes}


def pool_item(**changes: Any) -> dict[str, Any]:
    """A stored POOL item (its key aside), valid but for ``changes`` (a None removes the attribute)."""
    item = {"generation": 1, "digest": "d", "pool": "{}", "computed_at": "", **changes}
    return {k: v for k, v in item.items() if v is not None}


@pytest.mark.parametrize(
    ("sk", "item", "read"),
    [
        *[("QUOTA#q", quota_item(**bad), "quota") for bad in
          ({"body": "{not json"}, {"version": "1"}, {"quota_id": "BAD"}, {"body": '{"Name": "other"}'})],
        *[("POOL", pool_item(**bad), "pool") for bad in
          ({"pool": "[]"}, {"pool": None}, {"pool_encoding": "zlib+base64"}, {"pool_encoding": "zlib"},
           {"pool": None, "pool_encoding": "zlib", "pool_parts": 99}, {"outbox": "[]"}, {"generation": -1},
           {"apply_status": "Weird"})],
        ("META", {"cluster_id": "c1", "eks_cluster_name": 5, "namespace_prefix": "p", "cohort_name": "c"}, "cluster"),
        ("SCHEDULER", {"config_id": "abcdefabcdef", "version": 1.5, "body": "{}"}, "scheduler"),
    ],
)  # fmt: skip
def test_a_corrupt_item_is_a_permanent_error_naming_its_key(store, table, sk, item, read):
    fixed = {k: Decimal(str(v)) if isinstance(v, float) else v for k, v in item.items()}
    table.put_item(Item={"pk": "CLUSTER#c1", "sk": sk, **fixed})
    readers = {"quota": lambda: store.get_quota(C, "q"), "pool": lambda: store.get_pool(C)}
    readers |= {"cluster": lambda: store.get_cluster(C), "scheduler": lambda: store.get_scheduler_config(C)}
    with pytest.raises(PermanentError, match=f"corrupt item pk='CLUSTER#c1' sk='{sk}'"):
        readers[read]()


# -------------------------------------------------------------------------------- error translation
def client_error(code: str, status: int = 400, **extra: Any) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}, **extra}, "Op"
    )


def cancelled(*reasons: str) -> ClientError:
    return client_error("TransactionCanceledException", CancellationReasons=[{"Code": r} for r in reasons])


def cancelled_in_words() -> ClientError:
    """A cancelled transaction whose reasons are only in the message."""
    exc = client_error("TransactionCanceledException")
    reasons = "please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]"
    exc.response["Error"]["Message"] = f"Transaction cancelled, {reasons}"
    return exc


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        # DynamoDB's own: failed conditions, cancelled transactions (by their reasons), a missing table
        (client_error("ConditionalCheckFailedException"), ConflictError),
        (cancelled("None", "ConditionalCheckFailed"), TransactionCancelledError),
        (cancelled_in_words(), TransactionCancelledError), (cancelled("TransactionConflict", "None"), RetryableError),
        (cancelled("ValidationError"), PermanentError), (client_error("ResourceNotFoundException"), PermanentError),
        # the rest by the one classification of AWS errors (tests/unit/test_aws_errors.py), naming the table
        (client_error("ProvisionedThroughputExceededException"), RetryableError),
        (client_error("ValidationException"), PermanentError),
        (EndpointConnectionError(endpoint_url="http://x"), RetryableError), (NoCredentialsError(), PermanentError),
    ],
)  # fmt: skip
def test_translate(exc, kind):
    out = translate(exc, operation="get_pool", table="tbl")
    assert type(out) is kind
    assert "tbl" in str(out)
    if kind is TransactionCancelledError:
        assert out.reasons == ("None", "ConditionalCheckFailed")
    if isinstance(exc, ClientError) and exc.response["Error"]["Code"] == "ResourceNotFoundException":
        assert "table 'tbl' does not exist" in str(out)


THROTTLED = client_error("ProvisionedThroughputExceededException")
NO_TABLE = client_error("ResourceNotFoundException")
UNREACHABLE = EndpointConnectionError(endpoint_url="http://x")


@pytest.mark.parametrize(
    ("method", "call", "raised", "kind"),
    [
        ("get_item", lambda s: s.get_pool(C), THROTTLED, RetryableError),
        ("get_item", lambda s: s.get_cluster(C), NO_TABLE, PermanentError),
        ("query", lambda s: s.list_quotas(C), UNREACHABLE, RetryableError),
        ("query", lambda s: s.list_history(C), NO_TABLE, PermanentError),
        ("query", lambda s: s.list_clusters(), THROTTLED, RetryableError),
        ("transact_write_items", lambda s: s.put_pool(pool_record(1), expected_generation=0), NO_TABLE, PermanentError),
        ("transact_write_items", lambda s: s.create_quota(C, quota_body()), UNREACHABLE, RetryableError),
        ("update_item", lambda s: s.record_read_failure(C, "x"), THROTTLED, RetryableError),
        ("update_item", lambda s: s.record_apply(C, 1, "Applied"), UNREACHABLE, RetryableError),
        ("put_item", lambda s: s.put_scheduler_config(C, {}), NO_TABLE, PermanentError),
    ],
)
def test_no_sdk_error_escapes_any_method(store, table, monkeypatch, method, call, raised, kind):
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise raised

    monkeypatch.setattr(table.meta.client, method, boom)
    with pytest.raises(kind) as err:
        call(store)
    assert type(err.value) is kind


# ------------------------------------------------------------------ an invalid body already stored
QUOTA_ABOVE_MAX = "tests/corpus/quotas/ComputeQuotaConfig-ResourceSharingConfig-BorrowLimit--above-max.json"
SCHEDULER_ABOVE_MAX = "tests/corpus/scheduler/SchedulerConfig-PriorityClasses-Weight--above-max.json"


@pytest.mark.parametrize(
    ("path", "sk", "named"),
    [
        (QUOTA_ABOVE_MAX, "QUOTA#team-a-quota", "compute quota 'team-a-quota'"),
        (SCHEDULER_ABOVE_MAX, "SCHEDULER", "scheduler config"),
    ],
)
def test_a_recompute_over_an_invalid_stored_body_keeps_pool_and_kueue_and_names_it(store, table, path, sk, named):
    # Given a cluster with two valid quotas and a scheduler config, recomputed once (generation 1, applied)
    store.put_cluster(ClusterRecord(C, "eks-c1"))
    for team in ("team-a", "team-b"):
        store.create_quota(C, builders.quota_body(team, 8))
    store.put_scheduler_config(C, SCHEDULER_BASE)
    kube = FakeKube([k8s_node(f"p5-{i}") for i in range(4)])
    recomputer = Recomputer(store, lambda cluster: kube, FakePublisher())
    assert recomputer.recompute(C).generation == 1
    pool, objects, writes = store.get_pool(C), dict(kube.objects), (kube.applies, kube.deletes)
    assert pool.apply_status == "Applied" and objects
    # When a body breaking a botocore bound gets into the table anyway (the store stores what it is given:
    # written by hand, or by a writer that skipped the request models): the corpus file's body, as JSON text
    body, field = corpus_case(path)
    text = {":b": json.dumps(body)}
    table.update_item(
        Key={PK: f"CLUSTER#{C}", SK: sk}, UpdateExpression="SET body = :b", ExpressionAttributeValues=text
    )
    # Then the recompute raises PermanentError naming the body and the field ...
    with pytest.raises(PermanentError) as err:
        recomputer.recompute(C, request_id="req-1")
    assert named in str(err.value) and field in str(err.value)
    # ... keeps the last pool and the cluster's Kueue objects, and records the failure
    kept = store.get_pool(C)
    assert (kept.generation, kept.digest, kept.pool, kept.apply_status) == (1, pool.digest, pool.pool, "Applied")
    assert named in kept.read_failure and field in kept.read_failure
    assert kube.objects == objects and (kube.applies, kube.deletes) == writes
    assert len(store.list_history(C)) == 1
    receipt = store.get_receipt(C, "req-1")
    assert receipt.status == "Failed" and field in receipt.message
    # When the body is fixed through the store, Then the next recompute succeeds and clears the failure
    if sk == "SCHEDULER":
        store.put_scheduler_config(C, SCHEDULER_BASE, target_version=1)
    else:
        store.update_quota(C, "team-a-quota", builders.quota_body("team-a", 8), target_version=1)
    recomputer.recompute(C)
    assert (store.get_pool(C).read_failure, store.get_pool(C).generation) == ("", 1)
