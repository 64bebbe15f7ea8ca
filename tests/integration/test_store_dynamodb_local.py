"""The store against the real DynamoDB Local: transactions, conditions and the item limit behave as
DynamoDB's, not as moto's approximation of them."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from idleshare.adapters.ports import ClusterRecord, PoolRecord
from idleshare.adapters.store import COMPRESS_ABOVE, DynamoStore
from idleshare.errors import AlreadyExistsError, ConflictError, PermanentError, RetryableError, StaleVersionError
from tests.builders import quota_body
from tests.integration.conftest import create_table
from tests.integration.dynamodb_local import DynamoDBLocal

pytestmark = pytest.mark.integration

# DynamoDB Local really expires items whose ttl has passed: history written "now + 7 days" must be
# written at the real now, or it vanishes under the test.
T0 = datetime.now(UTC).replace(microsecond=0)
C = "c1"


@pytest.fixture
def store(ddb_table: Any) -> DynamoStore:
    return DynamoStore(ddb_table, history_ttl_days=7, clock=lambda: T0)


def quota(name: str, team: str, vcpu: float = 0.1) -> dict[str, Any]:
    """Quota ``name`` of ``team``: ``vcpu`` of a p5, no sharing configuration."""
    return quota_body(team, name=name, resources=[{"InstanceType": "ml.p5.48xlarge", "VCpu": vcpu}], strategy=None)


def record(generation: int, digest: str, pool: dict[str, Any] | None = None) -> PoolRecord:
    return PoolRecord(C, generation, digest, pool if pool is not None else {"g": generation}, T0.isoformat())


def test_cluster_registry(store: DynamoStore) -> None:
    arn = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
    store.put_cluster(ClusterRecord(C, "eks-a", arn))
    assert store.find_cluster(hyperpod_arn=arn) == ClusterRecord(C, "eks-a", arn)
    with pytest.raises(AlreadyExistsError) as err:
        store.put_cluster(ClusterRecord("c2", "eks-a"))
    assert err.value.field == "eks_cluster_name"
    store.put_cluster(ClusterRecord(C, "eks-b"))
    assert store.find_cluster(eks_cluster_name="eks-a") is None
    assert [c.cluster_id for c in store.list_clusters()] == [C]


def test_quota_create_update_conflicts(store: DynamoStore, ddb_table: Any) -> None:
    # Given a quota
    created = store.create_quota(C, quota("q1", "alpha", vcpu=0.3))
    assert created.version == 1
    assert created.body["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["VCpu"] == 0.3
    # Then a second one for the same team is refused atomically, naming the field
    keys_before = {(i["pk"], i["sk"]) for i in ddb_table.scan()["Items"]}
    with pytest.raises(AlreadyExistsError) as err:
        store.create_quota(C, quota("q2", "alpha"))
    assert err.value.field == "ComputeQuotaTarget.TeamName"
    with pytest.raises(AlreadyExistsError) as err:
        store.create_quota(C, quota("q1", "beta"))
    assert err.value.field == "Name"
    assert {(i["pk"], i["sk"]) for i in ddb_table.scan()["Items"]} == keys_before
    # When updated (moving the team), the version moves and the old team is free
    updated = store.update_quota(C, "q1", quota("q1", "beta"), target_version=1)
    assert updated.version == 2
    with pytest.raises(StaleVersionError) as stale:
        store.update_quota(C, "q1", quota("q1", "gamma"), target_version=1)
    assert stale.value.current_version == 2
    assert store.create_quota(C, quota("q2", "alpha")).version == 1
    assert [q.name for q in store.list_quotas(C)] == ["q1", "q2"]
    store.delete_quota(C, "q1")
    assert store.create_quota(C, quota("q3", "beta")).version == 1


def test_a_lost_update_race_is_a_stale_version(store: DynamoStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.create_quota(C, quota("q1", "alpha"))
    stale = store._get("CLUSTER#c1", "QUOTA#q1", "t")
    store.update_quota(C, "q1", quota("q1", "alpha", vcpu=2), target_version=1)
    real = store._get
    monkeypatch.setattr(
        store, "_get", lambda pk, sk, op: dict(stale or {}) if op == "update_quota" else real(pk, sk, op)
    )
    with pytest.raises(StaleVersionError) as err:
        store.update_quota(C, "q1", quota("q1", "alpha", vcpu=3), target_version=1)
    assert err.value.current_version == 2


def test_scheduler_config_versions(store: DynamoStore) -> None:
    store.put_scheduler_config(C, {"FairShare": "Enabled"})
    assert store.put_scheduler_config(C, {"FairShare": "Disabled"}, target_version=1).version == 2
    with pytest.raises(StaleVersionError) as err:
        store.put_scheduler_config(C, {}, target_version=1)
    assert err.value.current_version == 2


def test_pool_race_one_writer_wins(store: DynamoStore) -> None:
    store.put_pool(record(1, "first"), expected_generation=0)
    # Given 8 writers that all read generation 1 and race to write generation 2
    outcomes: list[str] = []
    barrier = threading.Barrier(8, timeout=10)

    def writer(i: int) -> None:
        barrier.wait()
        try:
            store.put_pool(record(2, f"writer-{i}"), expected_generation=1)
            outcomes.append(f"won:{i}")
        except ConflictError:
            outcomes.append("conflict")
        except RetryableError:  # DynamoDB may answer TransactionConflict to a concurrent transaction
            outcomes.append("retryable")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    # Then exactly one won and the stored pool and history are its
    winners = [o for o in outcomes if o.startswith("won:")]
    assert len(outcomes) == 8 and len(winners) == 1, outcomes
    got = store.get_pool(C)
    assert got is not None and got.generation == 2 and got.digest == f"writer-{winners[0][4:]}"
    assert [(h.generation, h.digest) for h in store.list_history(C)] == [(2, got.digest), (1, "first")]


def test_history_ttl_and_apply_status(store: DynamoStore, ddb_table: Any) -> None:
    store.put_pool(record(1, "a"), expected_generation=0)
    store.put_pool(record(2, "b"), expected_generation=1)
    item = ddb_table.get_item(Key={"pk": "CLUSTER#c1", "sk": "HISTORY#0000000001"})["Item"]
    assert int(item["ttl"]) == int((T0 + timedelta(days=7)).timestamp())
    ttl = ddb_table.meta.client.describe_time_to_live(TableName=ddb_table.name)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "ttl"
    store.record_apply(C, 1, "Failed", "stale")
    store.record_apply(C, 2, "Applied", "ok")
    got = store.get_pool(C)
    assert got is not None and (got.apply_status, got.apply_message) == ("Applied", "ok")
    store.record_read_failure(C, "boom")
    got = store.get_pool(C)
    assert got is not None and (got.generation, got.read_failure) == (2, "boom")


def test_read_failure_first_then_first_pool(store: DynamoStore) -> None:
    store.record_read_failure(C, "unreachable")
    got = store.get_pool(C)
    assert got is not None and got.generation == 0 and got.pool == {}
    store.put_pool(record(1, "a"), expected_generation=0)
    got = store.get_pool(C)
    assert got is not None and got.generation == 1 and got.read_failure == ""


@pytest.mark.parametrize("teams", [500, 6000])  # ~50 KB and ~600 KB of JSON, both above COMPRESS_ABOVE: stored xz
def test_a_large_pool_round_trips(store: DynamoStore, ddb_table: Any, teams: int) -> None:
    pool = {
        "teams": {
            f"team-{i:05d}": {"nominal": {"ml.p5.48xlarge": {"nvidia.com/gpu": i, "cpu": f"{i}m"}}}
            for i in range(teams)
        }
    }
    size = len(json.dumps(pool))
    assert size > (40_000 if teams == 500 else 300_000)
    store.put_pool(record(1, "big", pool), expected_generation=0)
    got = store.get_pool(C)
    assert got is not None and got.pool == pool
    assert store.list_history(C)[0].pool == pool
    item = ddb_table.get_item(Key={"pk": "CLUSTER#c1", "sk": "POOL"})["Item"]
    assert size > COMPRESS_ABOVE and item["pool_encoding"] == "xz"


def test_a_missing_table_is_a_permanent_error_naming_it(ddb_resource: Any) -> None:
    store = DynamoStore(ddb_resource.Table("no-such-table"))
    with pytest.raises(PermanentError, match="no-such-table"):
        store.get_pool(C)


def test_restart_loses_in_memory_data_and_the_store_recovers(
    dynamodb_local_server: DynamoDBLocal, ddb_resource: Any
) -> None:
    """Runs last in this module: restarting the session server drops every table, and each test makes
    its own (function-scoped ``ddb_table``), so later tests are unaffected."""
    table = create_table(ddb_resource, "restart-test")
    store = DynamoStore(table, clock=lambda: T0)
    store.put_pool(record(1, "a"), expected_generation=0)
    port = dynamodb_local_server.port
    # When the server restarts
    dynamodb_local_server.restart()
    # Then it is back on the same port, empty (in-memory), and the store reports the missing table
    assert dynamodb_local_server.port == port and dynamodb_local_server.answering()
    with pytest.raises(PermanentError, match="restart-test"):
        store.get_pool(C)
    create_table(ddb_resource, "restart-test")
    assert store.get_pool(C) is None
    store.put_pool(record(1, "b"), expected_generation=0)
    got = store.get_pool(C)
    assert got is not None and got.digest == "b"
