"""Never freeze, at any size: pools of 20k, 50k and 100k nodes with none, a quarter or all of
them excluded and 500 teams, and the node watcher's checkpoint at 20k, 50k and 100k nodes, written and read back
through :class:`DynamoStore` against the real DynamoDB Local (which enforces DynamoDB's 400 KB item limit and the
transaction's limits, unlike an approximation of them). Every item written is measured, as DynamoDB counts it,
and stays under 400 KB.

The documents are synthetic but of the real shape — ``teams`` as ``domain/document.py`` writes them (500 teams x 8
flavors, with their derivations), ``excludedNodes`` keyed by random EKS-shaped names (sequential ones compress far
better than a real cluster's) — so that no 100k-node compute runs here (~100 s)."""

from __future__ import annotations

import base64
import json
import random
import zlib
from datetime import UTC, datetime
from functools import cache
from typing import Any

import pytest
from boto3.dynamodb.conditions import Key

from idleshare.adapters.ports import PoolRecord
from idleshare.adapters.store import DynamoStore
from idleshare.adapters.store.items import ITEM_LIMIT, MAX_POOL_PARTS, PART_SIZE, item_size
from idleshare.errors import PermanentError
from tests.aws_env import all_items
from tests.bench import synthetic

pytestmark = pytest.mark.integration

T0 = datetime.now(UTC).replace(microsecond=0)  # DynamoDB Local expires items whose ttl has passed: the real now
C = "big"
TEAMS = 500
FLAVORS = tuple(f.instance_type for f in synthetic.FLAVORS)  # the scale benches' fleet: 8 real instance types
RESOURCES = ("nvidia.com/gpu", "cpu", "memory", "vpc.amazonaws.com/efa")
REASONS = ("NotReady", "Unschedulable", "Unhealthy", "UntoleratedTaint", "Deleting", "Unreadable")
ITEM_SIZE_BOUND = 400_000  # what the test requires of every item (DynamoDB refuses above 409,600 bytes)


# ------------------------------------------------------------------------------------ the documents
@cache
def eks_names(count: int) -> tuple[str, ...]:
    """``count`` distinct EKS-shaped node names, random (as a real cluster's: not sequential)."""
    rng = random.Random(count)
    names: set[str] = set()
    while len(names) < count:
        names.add(f"ip-10-{rng.randrange(256)}-{rng.randrange(256)}-{rng.randrange(256)}.us-west-2.compute.internal")
    return tuple(sorted(names))


def _quantity(resource: str, amount: int) -> str:
    return {"cpu": f"{amount * 250}m", "memory": f"{amount * 3}Gi"}.get(resource, str(amount))


@cache
def teams(count: int = TEAMS) -> dict[str, Any]:
    """``count`` teams as ``team_document`` writes them: nominal / borrowing / lending limits per flavor and
    resource, each limit's derivation (the pool every team sees, its percentage, the caps), the bound per flavor."""
    rng = random.Random(17)
    seen = {f: {r: rng.randrange(10_000, 40_000) for r in RESOURCES} for f in FLAVORS}
    out: dict[str, Any] = {}
    for t in range(count):

        def table() -> dict[str, dict[str, str]]:
            return {f: {r: _quantity(r, rng.randrange(0, 4000, 8)) for r in RESOURCES} for f in FLAVORS}

        why: dict[str, Any] = {}
        for f in FLAVORS:
            why[f] = {}
            for r in RESOURCES:
                percent = rng.choice((10, 25, 50, 100))
                cap = None if rng.random() < 0.7 else rng.randrange(8, 4000, 8)
                limit = min(seen[f][r] * percent // 100, cap if cap is not None else seen[f][r])
                why[f][r] = {
                    "pool": _quantity(r, seen[f][r]),
                    "percent": percent,
                    "percentCap": _quantity(r, seen[f][r] * percent // 100),
                    "absoluteCap": None if cap is None else _quantity(r, cap),
                    "limit": _quantity(r, limit),
                    "bound": "Absolute" if cap is not None and cap < seen[f][r] * percent // 100 else "Percentage",
                }
        out[f"team-{t:03d}-{rng.getrandbits(24):06x}"] = {
            "quota": f"quota-{t:03d}",
            "strategy": rng.choice(("LendAndBorrow", "Lend", "DontLend")),
            "activationState": "Enabled",
            "nominal": table(),
            "borrowingLimit": table(),
            "lendingLimit": table(),
            "why": why,
            "bounds": {f: why[f]["nvidia.com/gpu"]["bound"] for f in FLAVORS},
        }
    return out


def pool_document(nodes: int, excluded_fraction: float, seed: int = 0) -> dict[str, Any]:
    """The pool document of a cluster of ``nodes`` nodes, ``excluded_fraction`` of them excluded, 500 teams."""
    rng = random.Random(seed)
    names = eks_names(nodes)
    excluded = {n: rng.choice(REASONS) for n in names[: int(nodes * excluded_fraction)]}
    per_flavor = {f: {r: _quantity(r, rng.randrange(1, 10**6)) for r in RESOURCES} for f in FLAVORS}
    return {
        "idleResourceSharing": "Enabled",
        "flavors": list(FLAVORS),
        "resources": list(RESOURCES),
        "capacity": per_flavor,
        "allocated": per_flavor,
        "unallocated": per_flavor,
        "shortfall": {},
        "teams": teams(),
        "excludedNodes": excluded,
        "nodeCounts": {f: {"eligible": nodes // 8, "total": nodes // 8} for f in FLAVORS},
        "issues": [],
    }


def node_views(nodes: int) -> dict[str, Any]:
    """The watcher's view of each node (``service/watcher.node_view``), allocatable varying per node."""
    rng = random.Random(nodes + 1)
    views: dict[str, Any] = {}
    for name in eks_names(nodes):
        allocatable = {
            "cpu": f"{rng.randrange(180_000, 192_000)}m",
            "ephemeral-storage": f"{rng.randrange(10**9, 4 * 10**9)}Ki",
            "hugepages-2Mi": f"{rng.randrange(64) * 2}Mi",
            "memory": f"{rng.randrange(2 * 10**9, 21 * 10**8)}Ki",
            "nvidia.com/gpu": "8",
            "pods": "737",
            "vpc.amazonaws.com/efa": "32",
        }
        ready = "True" if rng.random() < 0.9 else "False"
        views[name] = [ready, False, False, "Schedulable", [], allocatable, rng.choice(FLAVORS)]
    return views


# ------------------------------------------------------------------------------------------ helpers
@pytest.fixture
def store(ddb_table: Any) -> DynamoStore:
    return DynamoStore(ddb_table, history_ttl_days=7, clock=lambda: T0)


def stored_items(table: Any) -> list[dict[str, Any]]:
    """Every item of the cluster, read back."""
    return all_items(table, KeyConditionExpression=Key("pk").eq(f"CLUSTER#{C}"), ConsistentRead=True)


def largest_item(table: Any) -> tuple[int, str]:
    """(size, sort key) of the largest item written, as DynamoDB counts it; every item under the bound."""
    sizes = [(item_size(item), str(item["sk"])) for item in stored_items(table)]
    for size, sk in sizes:
        assert size < ITEM_SIZE_BOUND <= ITEM_LIMIT, f"{sk}: {size} bytes"
    return max(sizes)


def parts(table: Any, owner: str) -> list[str]:
    return sorted(str(i["sk"]) for i in stored_items(table) if str(i["sk"]).startswith(f"PART#{owner}#"))


def record(generation: int, pool: dict[str, Any]) -> PoolRecord:
    return PoolRecord(C, generation, f"d{generation}", pool, T0.isoformat(), extra={"summary": "s"})


# -------------------------------------------------------------------------------------------- pools
@pytest.mark.parametrize("excluded", [0.0, 0.25, 1.0], ids=["none", "quarter", "all"])
@pytest.mark.parametrize("nodes", [20_000, 50_000, 100_000])
def test_a_pool_of_any_size_is_written_and_read_back_equal(
    store: DynamoStore, ddb_table: Any, nodes: int, excluded: float
) -> None:
    # Given the pool of a cluster of `nodes` nodes with `excluded` of them excluded, and 500 teams
    pool = pool_document(nodes, excluded)
    # When it is stored as generation 1
    store.put_pool(record(1, pool), expected_generation=0)
    # Then it reads back equal, from the pool and from the history
    got = store.get_pool(C)
    assert got is not None and got.generation == 1 and got.pool == pool
    history = store.list_history(C)
    assert [h.generation for h in history] == [1] and history[0].pool == pool
    # And every item written is under 400 KB, the pool's parts (if any) one per 300,000 compressed bytes
    size, sk = largest_item(ddb_table)
    pool_parts, history_parts = parts(ddb_table, "POOL"), parts(ddb_table, "HISTORY#0000000001")
    assert len(pool_parts) == len(history_parts) <= MAX_POOL_PARTS
    print(f"\npool {nodes} nodes, {excluded:.0%} excluded: largest item {size} bytes ({sk}), {len(pool_parts)} parts")


def test_a_pool_that_shrinks_leaves_no_parts_and_its_history_keeps_every_size(
    store: DynamoStore, ddb_table: Any
) -> None:
    # Given 100,000 nodes all excluded (a pool in parts), then all of them back and no team (one item), then a quarter
    # excluded
    gone, quarter = pool_document(100_000, 1.0), pool_document(100_000, 0.25)
    back = {**pool_document(100_000, 0.0), "teams": {}}
    store.put_pool(record(1, gone), expected_generation=0)
    assert parts(ddb_table, "POOL")
    # When the next generations are stored by fresh stores (no memory of the last write)
    DynamoStore(ddb_table, history_ttl_days=7, clock=lambda: T0).put_pool(record(2, back), expected_generation=1)
    # Then the POOL item has no part the smaller generation does not use
    assert parts(ddb_table, "POOL") == []
    DynamoStore(ddb_table, history_ttl_days=7, clock=lambda: T0).put_pool(record(3, quarter), expected_generation=2)
    # And each generation reads back equal, every item under 400 KB
    assert store.get_pool(C).pool == quarter  # type: ignore[union-attr]
    assert [h.pool for h in store.list_history(C)] == [quarter, back, gone]
    largest_item(ddb_table)


def test_the_largest_pool_that_fits_is_stored_and_a_larger_one_refused_naming_the_sizes(
    store: DynamoStore, ddb_table: Any
) -> None:
    # Given a pool whose compressed bytes need every part one transaction allows (the document twice < 4 MB)
    rng = random.Random(5)
    fits = {"noise": base64.b64encode(rng.randbytes(1_725_000)).decode()}  # random base64: ~6 bits a character
    compressed = len(zlib.compress(json.dumps(fits).encode(), 6))
    assert (MAX_POOL_PARTS - 1) * PART_SIZE < compressed <= MAX_POOL_PARTS * PART_SIZE
    # When it is stored, then DynamoDB accepts the transaction, and it reads back equal
    store.put_pool(record(1, fits), expected_generation=0)
    assert store.get_pool(C).pool == fits  # type: ignore[union-attr]
    assert len(parts(ddb_table, "POOL")) == MAX_POOL_PARTS
    largest_item(ddb_table)
    # When a larger one is stored, then it is refused before DynamoDB sees it: a PermanentError with the sizes
    larger = {"noise": base64.b64encode(rng.randbytes(1_900_000)).decode()}
    with pytest.raises(PermanentError, match=r"too large to store: \d+ bytes of JSON, \d+ compressed \(at most"):
        store.put_pool(record(2, larger), expected_generation=1)
    assert store.get_pool(C).generation == 1  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------- watch checkpoint
@pytest.mark.parametrize("nodes", [20_000, 50_000, 100_000])
def test_the_watch_checkpoint_of_any_size_is_saved_and_claimed_back_equal(
    store: DynamoStore, ddb_table: Any, nodes: int
) -> None:
    # Given a claimed watch and every node's view, allocatable varying per node
    views = node_views(nodes)
    lease = store.claim_watch(C, "w1").lease
    # When the watcher checkpoints them
    store.save_watch(C, lease, f"rv-{nodes}", views)
    # Then the next invocation claims them back, equal
    bookmark = DynamoStore(ddb_table, clock=lambda: T0).claim_watch(C, "w2")
    assert (bookmark.lease, bookmark.resource_version) == (lease + 1, f"rv-{nodes}")
    assert bookmark.nodes == views
    # And every item written is under 400 KB
    size, sk = largest_item(ddb_table)
    print(f"\nwatch {nodes} nodes: largest item {size} bytes ({sk}), {len(parts(ddb_table, 'WATCH#NODES'))} parts")
    # And the lease fencing holds: the older invocation's checkpoint is refused
    from idleshare.errors import ConflictError

    with pytest.raises(ConflictError, match="taken over"):
        store.save_watch(C, lease, "rv-old", views)
