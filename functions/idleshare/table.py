"""idleshare's DynamoDB tables, defined once: key attributes, TTL attribute, billing and the item keys.

Stdlib only: the store (:mod:`idleshare.adapters.store`), the CDK app (``infra/constructs/storage.py``), the
devkit's embedded services and the tests build their tables from here, so the names cannot drift apart.

The main table: partition key ``pk`` and sort key ``sk`` (both strings), TTL attribute ``ttl`` (epoch seconds),
on-demand billing, no secondary index (every read is one item by key or a Query on ``pk`` with an ``sk``
prefix). Item keys (the store's module docstring lists each item's attributes)::

    pk                sk
    CLUSTER#<id>      META | QUOTA#<name> | TEAM#<team> | SCHEDULER | POOL | HISTORY#<generation:010d>
                      | RECALC#<request id> | WATCH | WATCH#NODES
                      | USAGE#LATEST | USAGE#H#<YYYY-MM-DDTHH> | USAGE#D#<YYYY-MM-DD>   (usage)
                      | PART#<owner sk>#<index:03d>   (a part of a large document: PART#POOL#000,
                        PART#HISTORY#<generation:010d>#000, PART#WATCH#NODES#000; no other prefix matches)
    REGISTRY          CLUSTER#<id> | EKS#<eks cluster name> | ARN#<hyperpod cluster arn>

The idempotency table is Powertools' layout: partition key ``id`` (string), TTL attribute ``expiration``.
"""

from __future__ import annotations

from typing import Any

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
PART_PREFIX = "PART#"  # the parts of a document too large for one item: PART#<owner sk>#<index:03d>
# Usage read back from Kueue: the latest sample, hourly and daily accumulations (chargeback).
USAGE_PREFIX = "USAGE#"
USAGE_LATEST_SK = "USAGE#LATEST"  # the last sample (JSON) and the cursor (when the last sample was attempted)
USAGE_HOUR_PREFIX = "USAGE#H#"  # USAGE#H#<YYYY-MM-DDTHH> (UTC): amount-seconds per team/flavor/resource, gaps
USAGE_DAY_PREFIX = "USAGE#D#"  # USAGE#D#<YYYY-MM-DD> (UTC): the day's hours compacted, once the day is over
USAGE_HOUR_TTL_DAYS = 62  # hourly items outlive a month's chargeback, then expire (the daily ones remain)
USAGE_DAY_TTL_DAYS = 400

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
