"""DynamoDB implementation of :class:`~idleshare.adapters.ports.Store` (docs/spec.md §5): one table, ``pk`` / ``sk``
(:mod:`idleshare.table` defines its keys and item-key prefixes).

:class:`DynamoStore` is composed of one part per concern, each a module of this package: ``registry``
(clusters), ``policies`` (quotas, scheduler config), ``pools`` (pool, history, apply status, read failures,
receipts) and ``watch`` (the node watcher's bookmark), over ``base`` (the table and each call's plumbing),
``owned`` (what idleshare created in each cluster), ``pause`` (the pause switch), ``items`` (the item codec) and ``errors`` (the store's errors and the translation of DynamoDB's).

Item layout (every attribute name below is the stored one; ``ttl`` is the table's TTL attribute)::

    pk                sk                         attributes
    CLUSTER#<id>      META                       cluster_id, eks_cluster_name, [hyperpod_cluster_arn],
                                                 namespace_prefix, cohort_name, updated_at
    REGISTRY          CLUSTER#<id>               the same attributes as META (list_clusters is one Query)
    REGISTRY          EKS#<eks cluster name>     cluster_id
    REGISTRY          ARN#<hyperpod cluster arn> cluster_id
    CLUSTER#<id>      QUOTA#<name>               name, team, quota_id (12 lowercase alnum), version (int >= 1),
                                                 body (JSON text), created_at, updated_at
    CLUSTER#<id>      TEAM#<team>                quota_name   (guard: one quota per team)
    CLUSTER#<id>      SCHEDULER                  config_id, version, body (JSON text), created_at, updated_at
    CLUSTER#<id>      POOL                       generation (int >= 0), digest, pool_encoding + (pool | pool_parts
                                                 + pool_sha256), computed_at, apply_status, apply_message,
                                                 applied_at, read_failure, read_failure_at, extra (JSON text),
                                                 [outbox] (JSON text: the generation's unpublished event)
    CLUSTER#<id>      HISTORY#<generation:010d>  generation, digest, pool_encoding + (pool | pool_parts
                                                 + pool_sha256), computed_at, extra, recorded_at, ttl
    CLUSTER#<id>      PART#<owner sk>#<i:03d>    data (binary, <= 300,000 bytes), part_of (the owner's sha256),
                                                 index, [generation], [ttl: a history entry's]
    CLUSTER#<id>      RECALC#<request id>        request_id, status, generation, changed, message,
                                                 completed_at, ttl (epoch seconds): a recalculation receipt
    CLUSTER#<id>      PAUSE                      paused (bool), since, by, reason, skipped, last_skipped_at,
                                                 log (JSON text: the last pause / resume entries) (:mod:`.pause`)
    CLUSTER#<id>      WATCH                      lease (int >= 1), watch_owner, claimed_at, rv, saved_at: the node
                                                 watcher's bookmark (claim_watch / save_watch)
    CLUSTER#<id>      WATCH#NODES                nodes (binary: zlib JSON, each node's view) | nodes_parts +
                                                 nodes_sha256, rv, saved_at
    CLUSTER#<id>      OWNED                      version (int >= 1), owned (binary: zlib JSON, the uid of each
                                                 object idleshare created, the creates under way, the last
                                                 deletions) | owned_parts + owned_sha256, saved_at (:mod:`.owned`)

Rules this adapter keeps:

- The cluster registry (META, REGISTRY copy, EKS#/ARN# lookups) is written in one transaction; a lookup
  already pointing at another cluster is refused (:class:`AlreadyExistsError`), stale lookups of a
  renamed cluster are deleted in the same transaction.
- A quota and its ``TEAM#`` guard are written in one transaction, so two quotas for one team are
  refused atomically; a team rename moves the guard in the same transaction as the update.
- A quota or scheduler config body is stored as given: its fields were validated before, by the admin
  API's request models (:mod:`idleshare.parse.requests`, the one gate of a write; the CLI checks a file
  with them too). A body that reaches the table some other way and breaks a botocore bound is refused
  when the recompute parses it (a ``PermanentError`` naming the body and the field).
- Quotas and the scheduler config are versioned like SageMaker's ``TargetVersion``: version 1 on create,
  +1 per update, an update carrying another version raises :class:`StaleVersionError` with the current
  one. The stored body is the client's body as JSON text (floats keep their exact text); the body read
  back also carries the store-managed ``ComputeQuotaId``, ``ComputeQuotaVersion``, ``CreationTime`` and
  ``LastModifiedTime`` (DescribeComputeQuota's shape). The scheduler config body is returned as given.
- The pool generation moves N -> N+1 only if the stored one is still N (one TransactWriteItems with the
  append-only history item); a lost race raises :class:`~idleshare.errors.ConflictError`.
  A pool JSON above ``COMPRESS_ABOVE`` bytes is stored zlib-compressed in a binary attribute
  (``pool_encoding = "zlib"``), split into ``PART#`` items of ``PART_SIZE`` bytes written in the same transaction
  when larger (:mod:`.items`): every item stays under 400 KB; a pool over ``MAX_POOL_PARTS`` parts (the pool and
  its history entry must fit one 4 MB transaction) is refused (413). A smaller one is JSON text
  (``pool_encoding = "json"``); any other encoding is a corrupt item.
- Generation 0 means "no pool computed yet". :meth:`DynamoStore.record_read_failure` on a cluster without
  a POOL item creates one at generation 0 with an empty pool (so the failure is visible);
  :meth:`DynamoStore.get_pool` returns it as a ``PoolRecord`` with ``generation == 0`` and ``pool == {}``,
  and ``put_pool(..., expected_generation=0)`` accepts it as "nothing yet".
- Every SDK error is translated (:func:`translate`): throttling, 5xx, transaction conflicts and connection
  errors -> ``RetryableError``; failed conditions -> ``ConflictError`` (or a more precise subclass);
  a missing table -> ``PermanentError`` naming it. Every item is validated on read: a corrupt item raises
  ``PermanentError`` naming its key. Numbers come back as ``int``, never ``Decimal``.
"""

from __future__ import annotations

from idleshare.adapters.store.errors import TransactionCancelledError, translate
from idleshare.adapters.store.items import COMPRESS_ABOVE, ITEM_BUDGET, MAX_POOL_PARTS, MAX_SIDE_JSON, PART_SIZE
from idleshare.adapters.store.owned import OwnedRecords
from idleshare.adapters.store.pause import PauseSwitch
from idleshare.adapters.store.policies import Policies
from idleshare.adapters.store.pools import RECEIPT_TTL_SECONDS, Pools
from idleshare.adapters.store.registry import ClusterRegistry
from idleshare.adapters.store.usage import UsageHistory
from idleshare.adapters.store.watch import WatchBookmarks
from idleshare.table import PK, SK, TTL_ATTRIBUTE

__all__ = [
    "COMPRESS_ABOVE",
    "ITEM_BUDGET",
    "MAX_POOL_PARTS",
    "MAX_SIDE_JSON",
    "PART_SIZE",
    "PK",
    "RECEIPT_TTL_SECONDS",
    "SK",
    "TTL_ATTRIBUTE",
    "DynamoStore",
    "TransactionCancelledError",
    "translate",
]


class DynamoStore(ClusterRegistry, Policies, Pools, WatchBookmarks, UsageHistory, OwnedRecords, PauseSwitch):
    """The :class:`~idleshare.adapters.ports.Store` on one DynamoDB table (boto3 ``Table`` resource)."""
