"""idleshare's DynamoDB tables, defined once: key attributes, TTL attribute, billing and the item keys.

Stdlib only: the store (:mod:`idleshare.adapters.store`), the CDK app (``infra/constructs/storage.py``), the
devkit's embedded services and the tests build their tables from here, so the names cannot drift apart.

The main table: partition key ``pk`` and sort key ``sk`` (both strings), TTL attribute ``ttl`` (epoch seconds),
on-demand billing, no secondary index (every read is one item by key or a Query on ``pk`` with an ``sk``
prefix). Every kind of item, its keys built from the constants below, is :data:`ITEMS` (docs/architecture.md's
table is generated from it; ``tests/unit/test_items_doc.py`` writes each kind through the store and finds every
key it wrote in it). The store's module docstrings list each item's attributes.

The idempotency table is Powertools' layout: partition key ``id`` (string), TTL attribute ``expiration``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# ------------------------------------------------------------------------------------ the main table
PK = "pk"
SK = "sk"
KEY_ATTRIBUTE_TYPE = "S"  # both keys are strings
TTL_ATTRIBUTE = "ttl"
BILLING_MODE = "PAY_PER_REQUEST"
GLOBAL_SECONDARY_INDEXES: tuple[str, ...] = ()  # none: no GSI names or keys to share

# Item keys: partition keys and sort keys (or their prefixes).
CLUSTER_PREFIX = "CLUSTER#"  # pk of a cluster's items; also the sk prefix of its REGISTRY copy
REGISTRY_PK = "REGISTRY"
EKS_PREFIX = "EKS#"  # REGISTRY lookups by EKS cluster name
ARN_PREFIX = "ARN#"  # REGISTRY lookups by HyperPod cluster ARN
META_SK = "META"
QUOTA_PREFIX = "QUOTA#"
TEAM_PREFIX = "TEAM#"
SCHEDULER_SK = "SCHEDULER"
POOL_SK = "POOL"
HISTORY_PREFIX = "HISTORY#"
RECEIPT_PREFIX = "RECALC#"
WATCH_SK = "WATCH"
WATCH_NODES_SK = "WATCH#NODES"
PAUSE_SK = "PAUSE"  # the cluster paused or governed, who, when, why, and the pause/resume log (docs/spec.md §3)
PAUSE_LOG_MAX = 50  # the pause / resume entries the PAUSE item keeps (the oldest go first)
OWNED_SK = "OWNED"  # the uids of the objects idleshare created in the cluster (docs/spec.md §3, "Ownership")
PART_PREFIX = "PART#"  # the parts of a document too large for one item: PART#<owner sk>#<index:03d>
# Usage read back from Kueue: the latest sample, hourly and daily accumulations (chargeback).
USAGE_PREFIX = "USAGE#"
USAGE_LATEST_SK = "USAGE#LATEST"  # the last sample (JSON) and the cursor (when the last sample was attempted)
USAGE_HOUR_PREFIX = "USAGE#H#"  # USAGE#H#<YYYY-MM-DDTHH> (UTC): amount-seconds per team/flavor/resource, gaps
USAGE_DAY_PREFIX = "USAGE#D#"  # USAGE#D#<YYYY-MM-DD> (UTC): the day's hours compacted, once the day is over
USAGE_HOUR_TTL_DAYS = 62  # hourly items outlive a month's chargeback, then expire (the daily ones remain)
USAGE_DAY_TTL_DAYS = 400


class ItemKind(NamedTuple):
    """One kind of item of the main table: its keys (``<...>`` a variable part) and what it holds."""

    pk: str
    sk: str
    holds: str


CLUSTER_PK = f"{CLUSTER_PREFIX}<id>"
ITEMS: tuple[ItemKind, ...] = (
    ItemKind(CLUSTER_PK, META_SK, "the governed cluster (EKS name, HyperPod ARN, prefix, cohort, options)"),
    ItemKind(
        REGISTRY_PK, f"{CLUSTER_PREFIX}<id>", "the registry's copy of a governed cluster (every cluster: one Query)"
    ),
    ItemKind(
        REGISTRY_PK, f"{EKS_PREFIX}<eks cluster name>", "lookup from an event's EKS cluster name to the cluster id"
    ),
    ItemKind(
        REGISTRY_PK, f"{ARN_PREFIX}<hyperpod cluster arn>", "lookup from a HyperPod cluster ARN to the cluster id"
    ),
    ItemKind(CLUSTER_PK, f"{QUOTA_PREFIX}<name>", "a compute quota (SageMaker's Describe shape, `Version`)"),
    ItemKind(CLUSTER_PK, f"{TEAM_PREFIX}<team>", "one quota per team: the guard, naming the team's quota"),
    ItemKind(CLUSTER_PK, SCHEDULER_SK, "the scheduler config (versioned)"),
    ItemKind(
        CLUSTER_PK, POOL_SK, "the current generation: digest, pool + grants, apply status, last read failure, outbox"
    ),
    ItemKind(CLUSTER_PK, f"{HISTORY_PREFIX}<generation:010d>", "a past generation, append-only, with `ttl`"),
    ItemKind(CLUSTER_PK, f"{RECEIPT_PREFIX}<request id>", "the receipt of an explicit recalculation request"),
    ItemKind(
        CLUSTER_PK,
        PAUSE_SK,
        "paused or not: since when, by whom, why, the recomputes skipped, the last pause / resume entries",
    ),
    ItemKind(CLUSTER_PK, WATCH_SK, "the node watcher's claim (lease, owner) and bookmark (resource version)"),
    ItemKind(CLUSTER_PK, WATCH_NODES_SK, "the node watcher's saved node views"),
    ItemKind(
        CLUSTER_PK,
        OWNED_SK,
        "what idleshare created in the cluster: each object's uid by kind/namespace/name, the creates under way, the "
        "last deletions",
    ),
    ItemKind(CLUSTER_PK, USAGE_LATEST_SK, "the last usage sample and the cursor (when a sample was last attempted)"),
    ItemKind(
        CLUSTER_PK,
        f"{USAGE_HOUR_PREFIX}<YYYY-MM-DDTHH>",
        f"an hour's amount-seconds and gaps (`ttl`: {USAGE_HOUR_TTL_DAYS} days)",
    ),
    ItemKind(
        CLUSTER_PK,
        f"{USAGE_DAY_PREFIX}<YYYY-MM-DD>",
        f"a completed day's hours summed (`ttl`: {USAGE_DAY_TTL_DAYS} days)",
    ),
    ItemKind(
        CLUSTER_PK,
        f"{PART_PREFIX}<owner sk>#<index:03d>",
        f"a part of a document too large for its item ({POOL_SK}, {HISTORY_PREFIX}…, {WATCH_NODES_SK}, {OWNED_SK}), "
        "written in "
        "the same transaction; a history part has its item's `ttl`",
    ),
)
"""Every kind of item of the main table (``ItemKind``), in the order docs/architecture.md lists them."""

# ----------------------------------------------------------------------------- the idempotency table
IDEMPOTENCY_PK = "id"
IDEMPOTENCY_TTL_ATTRIBUTE = "expiration"


def cluster_pk(cluster_id: str) -> str:
    """The partition key of a cluster's items (and the sort key of its REGISTRY copy)."""
    return f"{CLUSTER_PREFIX}{cluster_id}"


def history_sk(generation: int) -> str:
    """The sort key of a pool generation's history item: zero-padded, so keys sort by generation."""
    return f"{HISTORY_PREFIX}{generation:010d}"


def usage_hour_sk(hour: str) -> str:
    """The sort key of a cluster's usage hour ``YYYY-MM-DDTHH`` (UTC): keys sort by time."""
    return f"{USAGE_HOUR_PREFIX}{hour}"


def usage_day_sk(day: str) -> str:
    """The sort key of a cluster's usage day ``YYYY-MM-DD`` (UTC), compacted from its hours."""
    return f"{USAGE_DAY_PREFIX}{day}"


def part_sk(owner_sk: str, index: int) -> str:
    """The sort key of part ``index`` (0-based) of the document that the item ``owner_sk`` references; the parts
    of one owner sort by index and share :func:`parts_prefix`."""
    return f"{parts_prefix(owner_sk)}{index:03d}"


def parts_prefix(owner_sk: str) -> str:
    """What every part key of the item ``owner_sk`` begins with (``PART#POOL#``); matches no other item's key."""
    return f"{PART_PREFIX}{owner_sk}#"


def _create_kwargs(name: str, keys: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    return {
        "TableName": name,
        "KeySchema": [{"AttributeName": attr, "KeyType": kind} for attr, kind in keys],
        "AttributeDefinitions": [{"AttributeName": attr, "AttributeType": KEY_ATTRIBUTE_TYPE} for attr, _ in keys],
        "BillingMode": BILLING_MODE,
    }


def create_table_kwargs(name: str) -> dict[str, Any]:
    """Arguments for boto3's ``create_table`` (client or resource) making the main table ``name``; the TTL is
    a second call: :func:`time_to_live_kwargs`."""
    return _create_kwargs(name, ((PK, "HASH"), (SK, "RANGE")))


def idempotency_table_kwargs(name: str) -> dict[str, Any]:
    """Arguments for boto3's ``create_table`` making the idempotency table ``name`` (TTL:
    ``time_to_live_kwargs(name, IDEMPOTENCY_TTL_ATTRIBUTE)``)."""
    return _create_kwargs(name, ((IDEMPOTENCY_PK, "HASH"),))


def time_to_live_kwargs(name: str, attribute: str = TTL_ATTRIBUTE) -> dict[str, Any]:
    """Arguments for boto3's ``update_time_to_live`` enabling the table's TTL attribute."""
    return {"TableName": name, "TimeToLiveSpecification": {"Enabled": True, "AttributeName": attribute}}
