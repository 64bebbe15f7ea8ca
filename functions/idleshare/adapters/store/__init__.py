"""DynamoDB implementation of :class:`~idleshare.adapters.ports.Store` (SPEC §5): one table, ``pk`` / ``sk``.

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
    CLUSTER#<id>      POOL                       generation (int >= 0), digest, pool_encoding + pool,
                                                 computed_at, apply_status, apply_message, applied_at,
                                                 read_failure, read_failure_at, extra (JSON text)
    CLUSTER#<id>      HISTORY#<generation:010d>  generation, digest, pool_encoding + pool, computed_at,
                                                 extra, recorded_at, ttl (epoch seconds)
    CLUSTER#<id>      RECALC#<request id>        request_id, status, generation, changed, message,
                                                 completed_at, ttl (epoch seconds): a recalculation receipt
    CLUSTER#<id>      WATCH                      lease (int >= 1), watch_owner, claimed_at, rv, saved_at: the node
                                                 watcher's bookmark (claim_watch / save_watch)
    CLUSTER#<id>      WATCH#NODES                nodes (binary: zlib JSON, each node's view), rv, saved_at

Rules this adapter keeps:

- The cluster registry (META, REGISTRY copy, EKS#/ARN# lookups) is written in one transaction; a lookup
  already pointing at another cluster is refused (:class:`AlreadyExistsError`), stale lookups of a
  renamed cluster are deleted in the same transaction.
- A quota and its ``TEAM#`` guard are written in one transaction, so two quotas for one team are
  refused atomically; a team rename moves the guard in the same transaction as the update.
- A quota or scheduler config body is checked against every botocore bound before anything is written, by
  the edge parsers the admin API and the recompute use (:mod:`idleshare.parse.quotas`, imported lazily:
  the router Lambda imports this module and must not load pydantic): a body breaking one raises
  :class:`~idleshare.parse.errors.InputError` naming each field (the API answers 422), so no writer that
  bypasses the API (CLI, a script, another Lambda) can store a quota the recompute would refuse.
- Quotas and the scheduler config are versioned like SageMaker's ``TargetVersion``: version 1 on create,
  +1 per update, an update carrying another version raises :class:`StaleVersionError` with the current
  one. The stored body is the client's body as JSON text (floats keep their exact text); the body read
  back also carries the store-managed ``ComputeQuotaId``, ``ComputeQuotaVersion``, ``CreationTime`` and
  ``LastModifiedTime`` (DescribeComputeQuota's shape). The scheduler config body is returned as given.
- The pool generation moves N -> N+1 only if the stored one is still N (one TransactWriteItems with the
  append-only history item); a lost race raises :class:`~idleshare.adapters.errors.ConflictError`.
  A pool JSON above ``COMPRESS_ABOVE`` bytes is stored zlib-compressed and base64-encoded
  (``pool_encoding = "zlib+base64"``): a DynamoDB item holds at most 400 KB.
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

import base64
import json
import re
import secrets
import string
import zlib
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, NoReturn

from boto3.dynamodb.conditions import Key

from idleshare.adapters.errors import (
    AdapterError,
    ConflictError,
    NotFoundError,
    PermanentError,
    RetryableError,
    StaleVersionError,
    translate_aws,
)
from idleshare.adapters.ports import (
    FIELD_OWNERSHIP_MODES,
    RESPECT,
    ClusterRecord,
    PoolRecord,
    RecalculationReceipt,
    StoredQuota,
    WatchBookmark,
)

__all__ = [
    "COMPRESS_ABOVE",
    "PK",
    "RECEIPT_TTL_SECONDS",
    "SK",
    "TTL_ATTRIBUTE",
    "AlreadyExistsError",
    "DynamoStore",
    "TransactionCancelledError",
    "translate",
]

PK = "pk"  # the table's keys and TTL attribute: the same names as infra/constructs/storage.py
SK = "sk"
TTL_ATTRIBUTE = "ttl"
COMPRESS_ABOVE = 350_000  # bytes of pool JSON above which it is stored compressed
MAX_STORED_POOL = 380_000  # bytes of the (possibly compressed) pool text one item may carry
MAX_MESSAGE = 2_000  # apply / read-failure messages are cut to this many characters
APPLY_STATUSES = ("Pending", "Applied", "Failed", "Conflict")  # Conflict: objects left to another field manager
ENCODING_JSON = "json"
ENCODING_ZLIB = "zlib+base64"

REGISTRY_PK = "REGISTRY"
META_SK = "META"
SCHEDULER_SK = "SCHEDULER"
POOL_SK = "POOL"
QUOTA_PREFIX = "QUOTA#"
TEAM_PREFIX = "TEAM#"
HISTORY_PREFIX = "HISTORY#"
RECEIPT_PREFIX = "RECALC#"
WATCH_SK = "WATCH"
WATCH_NODES_SK = "WATCH#NODES"
RECEIPT_STATUSES = ("Done", "Failed")
RECEIPT_TTL_SECONDS = 24 * 3600  # idleshare.names.RECALC_RECEIPT_TTL_SECONDS

_RETRYABLE_REASONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)
_ID_ALPHABET = string.ascii_lowercase + string.digits
_ID = re.compile(r"^[a-z0-9]{12}$")
_HYPERPOD_ARN = re.compile(
    r"^(?P<prefix>arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:\d{12}):cluster/(?P<segment>[A-Za-z0-9](?:-*[A-Za-z0-9]){0,62})$"
)


# ----------------------------------------------------------------------------------------- errors
class AlreadyExistsError(PermanentError):
    """A create (or rename) collides with an existing item; ``field`` names what is taken
    (``Name``, ``ComputeQuotaTarget.TeamName``, ``SchedulerConfig``, ``eks_cluster_name``,
    ``hyperpod_cluster_arn``). SageMaker answers ``ConflictException`` here; retrying cannot help."""

    def __init__(self, message: str, *, field: str, operation: str = "") -> None:
        super().__init__(message, operation=operation, status=409)
        self.field = field


class TransactionCancelledError(ConflictError):
    """A conditional check of a transaction failed; ``reasons`` holds one code per action
    (``"None"`` where that action's condition held)."""

    def __init__(self, message: str, *, reasons: tuple[str, ...], operation: str = "") -> None:
        super().__init__(message, operation=operation, status=400)
        self.reasons = reasons


def translate(exc: BaseException, *, operation: str, table: str) -> AdapterError:
    """A botocore error -> the domain error (see the module docstring): DynamoDB's failed conditions,
    cancelled transactions and a missing table here, everything else by
    :func:`~idleshare.adapters.errors.translate_aws` (throttling, 5xx, connection errors, credentials)."""
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        text = str(error.get("Message", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        message = f"{operation} on table {table!r}: {code}: {text}"
        if code == "ConditionalCheckFailedException":
            return ConflictError(message, operation=operation, status=status)
        if code == "TransactionCanceledException":
            reasons = _cancellation_reasons(exc.response, text)
            if "ConditionalCheckFailed" in reasons:
                return TransactionCancelledError(message, reasons=reasons, operation=operation)
            if any(r in _RETRYABLE_REASONS for r in reasons):
                return RetryableError(message, operation=operation, status=status)
            return PermanentError(message, operation=operation, status=status)
        if code == "ResourceNotFoundException":
            return PermanentError(
                f"{operation}: table {table!r} does not exist (or is not ACTIVE): {text}",
                operation=operation,
                status=status,
            )
    return translate_aws(exc, operation=operation, subject=f"on table {table!r}")


def _cancellation_reasons(response: Mapping[str, Any], message: str) -> tuple[str, ...]:
    listed = response.get("CancellationReasons")
    if isinstance(listed, list) and listed:
        return tuple(str(r.get("Code", "None")) if isinstance(r, dict) else "None" for r in listed)
    # "Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]"
    m = re.search(r"\[([^\]]*)\]\s*$", message)
    if not m:
        return ()
    return tuple(part.strip() for part in m.group(1).split(","))


# ---------------------------------------------------------------------------------------- helpers
def _utcnow() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(12))


def _cluster_pk(cluster_id: str) -> str:
    return f"CLUSTER#{cluster_id}"


def _history_sk(generation: int) -> str:
    return f"{HISTORY_PREFIX}{generation:010d}"


def _text(value: str, limit: int = MAX_MESSAGE) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _to_json(value: Any, what: str) -> str:
    def default(obj: Any) -> Any:
        if isinstance(obj, Decimal):
            if obj == obj.to_integral_value():
                return int(obj)
            as_float = float(obj)
            if Decimal(repr(as_float)) == obj:
                return as_float
        raise TypeError(f"{type(obj).__name__} {obj!r} is not JSON")

    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, default=default)
    except (TypeError, ValueError) as exc:
        raise PermanentError(f"{what} is not storable as JSON: {exc}", operation="serialize") from exc


def _check_quota(text: str, name: object) -> None:
    """The quota as it will be stored (its JSON text) against every botocore bound: the admin API's and the
    recompute's parser. Raises :class:`~idleshare.parse.errors.InputError` naming each field."""
    from idleshare.parse.quotas import parse_quotas  # lazily: pydantic, and the router Lambda imports this module

    parse_quotas(text, source=f"compute quota {name!r}" if isinstance(name, str) and name else "compute quota")


def _check_scheduler_config(text: str, cluster_id: str) -> None:
    """The scheduler config as it will be stored against every botocore bound (InputError naming each field)."""
    from idleshare.parse.quotas import parse_scheduler_config  # lazily, as above

    parse_scheduler_config(text, source=f"scheduler config of cluster {cluster_id!r}")


def _require_name(value: object, what: str, operation: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 255:
        raise PermanentError(f"{what} must be a non-empty string (got {value!r})", operation=operation, status=400)
    return value


def _av(values: Mapping[str, Any]) -> dict[str, Any]:
    """Values for TransactWriteItems: plain Python, since the Table resource's ``meta.client`` (de)serializes
    attribute values itself (boto3's resource transformation hooks also apply to its client)."""
    return dict(values)


class _Item:
    """Typed, validated access to one item read back; every problem names the item's key."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = raw
        self.key = f"pk={raw.get('pk')!r} sk={raw.get('sk')!r}"

    def corrupt(self, problem: str) -> NoReturn:
        raise PermanentError(f"corrupt item {self.key}: {problem}", operation="read")

    def get_str(self, attr: str, default: str | None = None) -> str:
        value = self.raw.get(attr, default)
        if not isinstance(value, str):
            self.corrupt(f"attribute {attr!r} must be a string (got {type(value).__name__})")
        return value

    def get_opt_str(self, attr: str) -> str | None:
        return None if self.raw.get(attr) is None else self.get_str(attr)

    def get_int(self, attr: str, *, minimum: int = 0, default: int | None = None) -> int:
        value = self.raw.get(attr, default)
        if isinstance(value, bool) or not isinstance(value, int | Decimal):
            self.corrupt(f"attribute {attr!r} must be a number (got {type(value).__name__})")
        if isinstance(value, Decimal) and (not value.is_finite() or value != value.to_integral_value()):
            self.corrupt(f"attribute {attr!r} must be an integer (got {value})")
        number = int(value)
        if number < minimum:
            self.corrupt(f"attribute {attr!r} must be >= {minimum} (got {number})")
        return number

    def json_object(self, attr: str, default: str | None = None) -> dict[str, Any]:
        text = self.get_str(attr, default)
        try:
            value = json.loads(text)
        except ValueError as exc:
            self.corrupt(f"attribute {attr!r} is not JSON: {exc}")
        if not isinstance(value, dict):
            self.corrupt(f"attribute {attr!r} must hold a JSON object (got {type(value).__name__})")
        return value

    def pool(self) -> dict[str, Any]:
        encoding = self.get_str("pool_encoding", ENCODING_JSON)
        text = self.get_str("pool")
        if encoding == ENCODING_ZLIB:
            try:
                text = zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True)).decode("utf-8")
            except (ValueError, zlib.error) as exc:
                self.corrupt(f"attribute 'pool' is not valid {ENCODING_ZLIB}: {exc}")
        elif encoding != ENCODING_JSON:
            self.corrupt(f"unknown pool_encoding {encoding!r}")
        try:
            value = json.loads(text)
        except ValueError as exc:
            self.corrupt(f"attribute 'pool' is not JSON: {exc}")
        if not isinstance(value, dict):
            self.corrupt("attribute 'pool' must hold a JSON object")
        return value


def _encode_pool(pool: Mapping[str, Any], cluster_id: str) -> tuple[str, str]:
    text = _to_json(pool, f"pool of {cluster_id}")
    raw = text.encode("utf-8")
    if len(raw) <= COMPRESS_ABOVE:
        return ENCODING_JSON, text
    packed = base64.b64encode(zlib.compress(raw, 9)).decode("ascii")
    if len(packed) > MAX_STORED_POOL:
        raise PermanentError(
            f"pool of {cluster_id} is too large to store: {len(raw)} bytes of JSON, "
            f"{len(packed)} compressed (limit {MAX_STORED_POOL})",
            operation="put_pool",
            status=413,
        )
    return ENCODING_ZLIB, packed


# ------------------------------------------------------------------------------------------ store
class DynamoStore:
    """The :class:`~idleshare.adapters.ports.Store` on one DynamoDB table (boto3 ``Table`` resource)."""

    def __init__(
        self,
        table: Any,
        *,
        history_ttl_days: int = 30,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        if history_ttl_days < 1:
            raise ValueError("history_ttl_days must be >= 1")
        self.table = table
        self.client = table.meta.client
        self.table_name: str = table.name
        self.history_ttl_days = history_ttl_days
        self.clock = clock

    # ------------------------------------------------------------------------------- plumbing
    def _call(self, operation: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except Exception as exc:
            raise translate(exc, operation=operation, table=self.table_name) from exc

    def _get(self, pk: str, sk: str, operation: str) -> dict[str, Any] | None:
        response = self._call(operation, self.table.get_item, Key={"pk": pk, "sk": sk}, ConsistentRead=True)
        item = response.get("Item")
        return dict(item) if item is not None else None

    def _query(self, operation: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every item of a Query, page by page (LastEvaluatedKey)."""
        start: dict[str, Any] | None = None
        while True:
            page_args = dict(kwargs)
            if start is not None:
                page_args["ExclusiveStartKey"] = start
            response = self._call(operation, self.table.query, **page_args)
            for item in response.get("Items", []):
                yield dict(item)
            start = response.get("LastEvaluatedKey")
            if not start:
                return

    def _transact(self, operation: str, items: list[dict[str, Any]]) -> None:
        for entry in items:
            body = next(iter(entry.values()))
            body["TableName"] = self.table_name
        self._call(operation, self.client.transact_write_items, TransactItems=items)

    def _now(self) -> str:
        return self.clock().astimezone(UTC).isoformat()

    # -------------------------------------------------------------------------------- clusters
    def get_cluster(self, cluster_id: str) -> ClusterRecord | None:
        item = self._get(_cluster_pk(cluster_id), META_SK, "get_cluster")
        return None if item is None else self._cluster(item)

    def find_cluster(
        self, *, eks_cluster_name: str | None = None, hyperpod_arn: str | None = None
    ) -> ClusterRecord | None:
        """By EKS cluster name, then by HyperPod cluster ARN. The ARN's last segment may be the 12-char
        cluster id or the cluster name (``cluster/sample-cluster``): an exact registered ARN wins; else
        the segment is tried as an idleshare cluster id, then as an EKS cluster name — accepted only if
        that cluster has no registered ARN or one in the same partition, region and account."""
        if eks_cluster_name:
            found = self._by_lookup(f"EKS#{eks_cluster_name}")
            if found is not None:
                return found
        if not hyperpod_arn:
            return None
        found = self._by_lookup(f"ARN#{hyperpod_arn}")
        if found is not None:
            return found
        m = _HYPERPOD_ARN.match(hyperpod_arn)
        if m is None:
            return None
        segment = m.group("segment")
        for candidate in (self.get_cluster(segment), self._by_lookup(f"EKS#{segment}")):
            if candidate is None:
                continue
            registered = _HYPERPOD_ARN.match(candidate.hyperpod_cluster_arn or "")
            if candidate.hyperpod_cluster_arn is None or (
                registered is not None and registered.group("prefix") == m.group("prefix")
            ):
                return candidate
        return None

    def _by_lookup(self, sk: str) -> ClusterRecord | None:
        item = self._get(REGISTRY_PK, sk, "find_cluster")
        if item is None:
            return None
        return self.get_cluster(_Item(item).get_str("cluster_id"))

    def list_clusters(self) -> list[ClusterRecord]:
        items = self._query(
            "list_clusters",
            KeyConditionExpression=Key("pk").eq(REGISTRY_PK) & Key("sk").begins_with("CLUSTER#"),
            ConsistentRead=True,
        )
        return [self._cluster(item) for item in items]

    def put_cluster(self, cluster: ClusterRecord) -> None:
        """Register or update a cluster: META, its REGISTRY copy and the EKS#/ARN# lookups in one
        transaction. A name or ARN already registered to another cluster -> AlreadyExistsError."""
        op = "put_cluster"
        cid = _require_name(cluster.cluster_id, "cluster_id", op)
        eks = _require_name(cluster.eks_cluster_name, "eks_cluster_name", op)
        arn = cluster.hyperpod_cluster_arn
        if arn is not None and not _HYPERPOD_ARN.match(arn):
            raise PermanentError(
                f"hyperpod_cluster_arn {arn!r} is not a HyperPod cluster ARN", operation=op, status=400
            )
        if cluster.field_ownership not in FIELD_OWNERSHIP_MODES:
            raise PermanentError(
                f"field_ownership {cluster.field_ownership!r} must be one of {', '.join(FIELD_OWNERSHIP_MODES)}",
                operation=op,
                status=400,
            )
        old = self.get_cluster(cid)
        attrs: dict[str, Any] = {
            "cluster_id": cid,
            "eks_cluster_name": eks,
            "namespace_prefix": cluster.namespace_prefix,
            "cohort_name": cluster.cohort_name,
            "field_ownership": cluster.field_ownership,
            "updated_at": self._now(),
        }
        if arn is not None:
            attrs["hyperpod_cluster_arn"] = arn
        owned = "attribute_not_exists(pk) OR cluster_id = :id"
        items: list[dict[str, Any]] = [
            {"Put": {"Item": _av({"pk": _cluster_pk(cid), "sk": META_SK, **attrs})}},
            {"Put": {"Item": _av({"pk": REGISTRY_PK, "sk": f"CLUSTER#{cid}", **attrs})}},
            {
                "Put": {
                    "Item": _av({"pk": REGISTRY_PK, "sk": f"EKS#{eks}", "cluster_id": cid}),
                    "ConditionExpression": owned,
                    "ExpressionAttributeValues": _av({":id": cid}),
                }
            },
        ]
        fields = ["", "", "eks_cluster_name"]
        if arn is not None:
            items.append(
                {
                    "Put": {
                        "Item": _av({"pk": REGISTRY_PK, "sk": f"ARN#{arn}", "cluster_id": cid}),
                        "ConditionExpression": owned,
                        "ExpressionAttributeValues": _av({":id": cid}),
                    }
                }
            )
            fields.append("hyperpod_cluster_arn")
        stale = []
        if old is not None and old.eks_cluster_name != eks:
            stale.append(f"EKS#{old.eks_cluster_name}")
        if old is not None and old.hyperpod_cluster_arn and old.hyperpod_cluster_arn != arn:
            stale.append(f"ARN#{old.hyperpod_cluster_arn}")
        for sk in stale:
            items.append(
                {
                    "Delete": {
                        "Key": _av({"pk": REGISTRY_PK, "sk": sk}),
                        "ConditionExpression": "attribute_not_exists(pk) OR cluster_id = :id",
                        "ExpressionAttributeValues": _av({":id": cid}),
                    }
                }
            )
            fields.append("")
        try:
            self._transact(op, items)
        except TransactionCancelledError as exc:
            taken = [f for f, r in zip(fields, exc.reasons, strict=False) if r == "ConditionalCheckFailed" and f]
            if taken:
                value = eks if taken[0] == "eks_cluster_name" else arn
                raise AlreadyExistsError(
                    f"{taken[0]} {value!r} is already registered to another cluster", field=taken[0], operation=op
                ) from exc
            raise

    def _cluster(self, raw: Mapping[str, Any]) -> ClusterRecord:
        item = _Item(raw)
        return ClusterRecord(
            cluster_id=item.get_str("cluster_id"),
            eks_cluster_name=item.get_str("eks_cluster_name"),
            hyperpod_cluster_arn=item.get_opt_str("hyperpod_cluster_arn"),
            namespace_prefix=item.get_str("namespace_prefix"),
            cohort_name=item.get_str("cohort_name"),
            field_ownership=item.get_opt_str("field_ownership") or RESPECT,
        )

    # ---------------------------------------------------------------------------------- quotas
    def create_quota(self, cluster_id: str, body: Mapping[str, Any]) -> StoredQuota:
        """Store a new quota at version 1 with a fresh ``ComputeQuotaId``. A body breaking a botocore
        bound -> InputError naming each field; its ``Name`` or its team already taken in this cluster
        -> AlreadyExistsError naming the field (nothing written either way)."""
        op = "create_quota"
        name, team, text = self._quota_parts(body, op)
        now = self._now()
        quota_id = _new_id()
        pk = _cluster_pk(cluster_id)
        item = {
            "pk": pk,
            "sk": f"{QUOTA_PREFIX}{name}",
            "name": name,
            "team": team,
            "quota_id": quota_id,
            "version": 1,
            "body": text,
            "created_at": now,
            "updated_at": now,
        }
        try:
            self._transact(
                op,
                [
                    {"Put": {"Item": _av(item), "ConditionExpression": "attribute_not_exists(pk)"}},
                    {
                        "Put": {
                            "Item": _av({"pk": pk, "sk": f"{TEAM_PREFIX}{team}", "quota_name": name}),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                ],
            )
        except TransactionCancelledError as exc:
            if exc.reasons[:1] == ("ConditionalCheckFailed",):
                raise AlreadyExistsError(
                    f"a compute quota named {name!r} already exists in cluster {cluster_id!r}",
                    field="Name",
                    operation=op,
                ) from exc
            if exc.reasons[1:2] == ("ConditionalCheckFailed",):
                raise AlreadyExistsError(
                    f"team {team!r} already has a compute quota in cluster {cluster_id!r}",
                    field="ComputeQuotaTarget.TeamName",
                    operation=op,
                ) from exc
            raise
        return self._quota(item)

    def get_quota(self, cluster_id: str, name: str) -> StoredQuota | None:
        item = self._get(_cluster_pk(cluster_id), f"{QUOTA_PREFIX}{name}", "get_quota")
        return None if item is None else self._quota(item)

    def list_quotas(self, cluster_id: str) -> list[StoredQuota]:
        items = self._query(
            "list_quotas",
            KeyConditionExpression=Key("pk").eq(_cluster_pk(cluster_id)) & Key("sk").begins_with(QUOTA_PREFIX),
            ConsistentRead=True,
        )
        return [self._quota(item) for item in items]

    def update_quota(self, cluster_id: str, name: str, body: Mapping[str, Any], target_version: int) -> StoredQuota:
        """Replace the quota's body if its version is still ``target_version`` (-> version + 1).
        The body's ``Name`` (when given) must be ``name``. Stale version -> StaleVersionError with the
        current one; missing -> NotFoundError; new team already has a quota -> AlreadyExistsError; a body
        breaking a botocore bound -> InputError naming each field (checked first: nothing written)."""
        op = "update_quota"
        body = dict(body)
        body.setdefault("Name", name)
        new_name, team, text = self._quota_parts(body, op)
        if new_name != name:
            raise PermanentError(
                f"a compute quota cannot be renamed ({name!r} -> {new_name!r})", operation=op, status=400
            )
        current = self._get(_cluster_pk(cluster_id), f"{QUOTA_PREFIX}{name}", op)
        if current is None:
            raise NotFoundError(f"compute quota {name!r} not found in cluster {cluster_id!r}", operation=op, status=404)
        old = _Item(current)
        version = old.get_int("version", minimum=1)
        if version != target_version:
            raise StaleVersionError(
                f"compute quota {name!r} is at version {version}, not {target_version}", current_version=version
            )
        old_team = old.get_str("team")
        pk = _cluster_pk(cluster_id)
        item = {
            **current,
            "team": team,
            "version": target_version + 1,
            "body": text,
            "updated_at": self._now(),
        }
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "Item": _av(item),
                    "ConditionExpression": "attribute_exists(pk) AND version = :v",
                    "ExpressionAttributeValues": _av({":v": target_version}),
                }
            }
        ]
        if team != old_team:
            items += [
                {
                    "Delete": {
                        "Key": _av({"pk": pk, "sk": f"{TEAM_PREFIX}{old_team}"}),
                        "ConditionExpression": "attribute_not_exists(pk) OR quota_name = :n",
                        "ExpressionAttributeValues": _av({":n": name}),
                    }
                },
                {
                    "Put": {
                        "Item": _av({"pk": pk, "sk": f"{TEAM_PREFIX}{team}", "quota_name": name}),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        try:
            self._transact(op, items)
        except TransactionCancelledError as exc:
            if exc.reasons[:1] == ("ConditionalCheckFailed",):
                self._raise_stale(cluster_id, name, target_version, op, exc)
            if exc.reasons[2:3] == ("ConditionalCheckFailed",):
                raise AlreadyExistsError(
                    f"team {team!r} already has a compute quota in cluster {cluster_id!r}",
                    field="ComputeQuotaTarget.TeamName",
                    operation=op,
                ) from exc
            raise
        return self._quota(item)

    def _raise_stale(self, cluster_id: str, name: str, target: int, op: str, cause: Exception) -> NoReturn:
        now = self.get_quota(cluster_id, name)
        if now is None:
            raise NotFoundError(
                f"compute quota {name!r} not found in cluster {cluster_id!r}", operation=op, status=404
            ) from cause
        raise StaleVersionError(
            f"compute quota {name!r} is at version {now.version}, not {target}", current_version=now.version
        ) from cause

    def delete_quota(self, cluster_id: str, name: str, target_version: int | None = None) -> None:
        """Delete the quota and its team guard in one transaction (missing -> NotFoundError). With
        ``target_version``, only if the quota is still at that version (else StaleVersionError)."""
        op = "delete_quota"
        pk = _cluster_pk(cluster_id)
        for _attempt in range(3):
            current = self.get_quota(cluster_id, name)
            if current is None:
                raise NotFoundError(
                    f"compute quota {name!r} not found in cluster {cluster_id!r}", operation=op, status=404
                )
            if target_version is not None and current.version != target_version:
                raise StaleVersionError(
                    f"compute quota {name!r} is at version {current.version}, not {target_version}",
                    current_version=current.version,
                )
            team = current.body["ComputeQuotaTarget"]["TeamName"]
            try:
                self._transact(
                    op,
                    [
                        {
                            "Delete": {
                                "Key": _av({"pk": pk, "sk": f"{QUOTA_PREFIX}{name}"}),
                                "ConditionExpression": "version = :v",
                                "ExpressionAttributeValues": _av({":v": current.version}),
                            }
                        },
                        {
                            "Delete": {
                                "Key": _av({"pk": pk, "sk": f"{TEAM_PREFIX}{team}"}),
                                "ConditionExpression": "attribute_not_exists(pk) OR quota_name = :n",
                                "ExpressionAttributeValues": _av({":n": name}),
                            }
                        },
                    ],
                )
                return
            except TransactionCancelledError:
                continue  # changed under us: re-read and decide again
        raise ConflictError(f"compute quota {name!r} kept changing during delete", operation=op, status=409)

    @staticmethod
    def _quota_parts(body: Mapping[str, Any], op: str) -> tuple[str, str, str]:
        """The quota's ``Name``, team and JSON text to store (the store-managed fields left out), once the
        text passed every botocore bound: else InputError naming each field (not JSON: PermanentError)."""
        if not isinstance(body, Mapping):
            raise PermanentError(
                f"a compute quota must be an object (got {type(body).__name__})", operation=op, status=400
            )
        managed = {"ComputeQuotaId", "ComputeQuotaVersion", "CreationTime", "LastModifiedTime"}
        text = _to_json({k: v for k, v in body.items() if k not in managed}, f"quota {body.get('Name')!r}")
        _check_quota(text, body.get("Name"))
        name = _require_name(body.get("Name"), "Name", op)
        target = body.get("ComputeQuotaTarget")
        team = _require_name(
            target.get("TeamName") if isinstance(target, Mapping) else None, "ComputeQuotaTarget.TeamName", op
        )
        return name, team, text

    @staticmethod
    def _quota(raw: Mapping[str, Any]) -> StoredQuota:
        item = _Item(raw)
        name = item.get_str("name")
        team = item.get_str("team")
        quota_id = item.get_str("quota_id")
        if not _ID.match(quota_id):
            item.corrupt(f"quota_id {quota_id!r} is not 12 lowercase alphanumeric characters")
        version = item.get_int("version", minimum=1)
        body = item.json_object("body")
        if body.get("Name") != name:
            item.corrupt(f"body Name {body.get('Name')!r} differs from the item's name {name!r}")
        target = body.get("ComputeQuotaTarget")
        if not isinstance(target, dict) or target.get("TeamName") != team:
            item.corrupt(f"body ComputeQuotaTarget.TeamName differs from the item's team {team!r}")
        body.update(
            ComputeQuotaId=quota_id,
            ComputeQuotaVersion=version,
            CreationTime=item.get_str("created_at"),
            LastModifiedTime=item.get_str("updated_at"),
        )
        return StoredQuota(
            name=name,
            version=version,
            body=body,
            created_at=item.get_str("created_at"),
            updated_at=item.get_str("updated_at"),
        )

    # ------------------------------------------------------------------------ scheduler config
    def get_scheduler_config(self, cluster_id: str) -> StoredQuota | None:
        item = self._get(_cluster_pk(cluster_id), SCHEDULER_SK, "get_scheduler_config")
        return None if item is None else self._scheduler(item)

    def put_scheduler_config(
        self, cluster_id: str, body: Mapping[str, Any], target_version: int | None = None
    ) -> StoredQuota:
        """Create (``target_version=None``; one already there -> AlreadyExistsError) or replace the
        cluster's scheduler config if it is still at ``target_version`` (else StaleVersionError; none
        -> NotFoundError). The body is stored and returned as given (bare ``SchedulerConfig`` or the
        Create/Describe shape); one breaking a botocore bound -> InputError naming each field, nothing
        written."""
        op = "put_scheduler_config"
        if not isinstance(body, Mapping):
            raise PermanentError(f"a scheduler config must be an object (got {type(body).__name__})", operation=op)
        text = _to_json(dict(body), f"scheduler config of {cluster_id}")
        _check_scheduler_config(text, cluster_id)
        now = self._now()
        pk = _cluster_pk(cluster_id)
        if target_version is None:
            item = {
                "pk": pk,
                "sk": SCHEDULER_SK,
                "config_id": _new_id(),
                "version": 1,
                "body": text,
                "created_at": now,
                "updated_at": now,
            }
            try:
                self._call(op, self.table.put_item, Item=item, ConditionExpression="attribute_not_exists(pk)")
            except ConflictError as exc:
                raise AlreadyExistsError(
                    f"cluster {cluster_id!r} already has a scheduler config", field="SchedulerConfig", operation=op
                ) from exc
            return self._scheduler(item)
        current = self._get(pk, SCHEDULER_SK, op)
        if current is None:
            raise NotFoundError(f"cluster {cluster_id!r} has no scheduler config", operation=op, status=404)
        item = {**current, "version": target_version + 1, "body": text, "updated_at": now}
        try:
            self._call(
                op,
                self.table.put_item,
                Item=item,
                ConditionExpression="attribute_exists(pk) AND version = :v",
                ExpressionAttributeValues={":v": target_version},
            )
        except ConflictError as exc:
            latest = self.get_scheduler_config(cluster_id)
            if latest is None:
                raise NotFoundError(
                    f"cluster {cluster_id!r} has no scheduler config", operation=op, status=404
                ) from exc
            raise StaleVersionError(
                f"scheduler config of {cluster_id!r} is at version {latest.version}, not {target_version}",
                current_version=latest.version,
            ) from exc
        return self._scheduler(item)

    def delete_scheduler_config(self, cluster_id: str, target_version: int | None = None) -> None:
        """Back to the defaults (everything Enabled). None stored -> NotFoundError. With
        ``target_version``, only if the config is still at that version (else StaleVersionError)."""
        op = "delete_scheduler_config"
        condition: dict[str, Any] = {"ConditionExpression": "attribute_exists(pk)"}
        if target_version is not None:
            condition = {
                "ConditionExpression": "attribute_exists(pk) AND version = :v",
                "ExpressionAttributeValues": {":v": target_version},
            }
        try:
            self._call(op, self.table.delete_item, Key={"pk": _cluster_pk(cluster_id), "sk": SCHEDULER_SK}, **condition)
        except ConflictError as exc:
            latest = self.get_scheduler_config(cluster_id) if target_version is not None else None
            if latest is None:
                raise NotFoundError(
                    f"cluster {cluster_id!r} has no scheduler config", operation=op, status=404
                ) from exc
            raise StaleVersionError(
                f"scheduler config of {cluster_id!r} is at version {latest.version}, not {target_version}",
                current_version=latest.version,
            ) from exc

    @staticmethod
    def _scheduler(raw: Mapping[str, Any]) -> StoredQuota:
        item = _Item(raw)
        config_id = item.get_str("config_id")
        if not _ID.match(config_id):
            item.corrupt(f"config_id {config_id!r} is not 12 lowercase alphanumeric characters")
        return StoredQuota(
            name=config_id,
            version=item.get_int("version", minimum=1),
            body=item.json_object("body"),
            created_at=item.get_str("created_at", ""),
            updated_at=item.get_str("updated_at", ""),
        )

    # ------------------------------------------------------------------------------------ pool
    def get_pool(self, cluster_id: str) -> PoolRecord | None:
        item = self._get(_cluster_pk(cluster_id), POOL_SK, "get_pool")
        return None if item is None else self._pool(cluster_id, item)

    def put_pool(self, record: PoolRecord, expected_generation: int) -> None:
        """Generation N+1 (``record.generation``) only if the stored one is still N (0: no pool yet),
        plus the append-only ``HISTORY#`` item with its TTL, in one transaction. Lost race -> ConflictError."""
        op = "put_pool"
        if expected_generation < 0 or record.generation != expected_generation + 1:
            raise PermanentError(
                f"put_pool: generation {record.generation} does not follow expected generation {expected_generation}",
                operation=op,
                status=400,
            )
        if record.apply_status not in APPLY_STATUSES:
            raise PermanentError(f"apply_status {record.apply_status!r} not in {APPLY_STATUSES}", operation=op)
        encoding, pool_text = _encode_pool(record.pool, record.cluster_id)
        extra = _to_json(record.extra, f"extra of the pool of {record.cluster_id}")
        now = self.clock()
        pk = _cluster_pk(record.cluster_id)
        common = {
            "generation": record.generation,
            "digest": record.digest,
            "pool_encoding": encoding,
            "pool": pool_text,
            "computed_at": record.computed_at,
            "extra": extra,
        }
        pool_item = {
            "pk": pk,
            "sk": POOL_SK,
            **common,
            "apply_status": record.apply_status,
            "apply_message": _text(record.apply_message),
            "read_failure": _text(record.read_failure),
            "updated_at": now.astimezone(UTC).isoformat(),
        }
        history_item = {
            "pk": pk,
            "sk": _history_sk(record.generation),
            **common,
            "recorded_at": now.astimezone(UTC).isoformat(),
            "ttl": int(now.timestamp()) + self.history_ttl_days * 86_400,
        }
        condition = (
            "attribute_not_exists(pk) OR generation = :expected"
            if expected_generation == 0
            else "generation = :expected"
        )
        try:
            self._transact(
                op,
                [
                    {
                        "Put": {
                            "Item": _av(pool_item),
                            "ConditionExpression": condition,
                            "ExpressionAttributeValues": _av({":expected": expected_generation}),
                        }
                    },
                    {"Put": {"Item": _av(history_item), "ConditionExpression": "attribute_not_exists(pk)"}},
                ],
            )
        except TransactionCancelledError as exc:
            raise ConflictError(
                f"pool of {record.cluster_id} is no longer at generation {expected_generation}: "
                f"another writer got there first ({', '.join(exc.reasons)})",
                operation=op,
                status=409,
            ) from exc

    def record_apply(self, cluster_id: str, generation: int, status: str, message: str = "") -> None:
        """Record how applying ``generation`` to the cluster went; does nothing if the stored pool has
        moved on (or does not exist): an old apply result never overwrites a newer generation's."""
        op = "record_apply"
        if status not in APPLY_STATUSES:
            raise PermanentError(f"apply status {status!r} not in {APPLY_STATUSES}", operation=op, status=400)
        try:
            self._call(
                op,
                self.table.update_item,
                Key={"pk": _cluster_pk(cluster_id), "sk": POOL_SK},
                UpdateExpression="SET apply_status = :s, apply_message = :m, applied_at = :t",
                ConditionExpression="generation = :g",
                ExpressionAttributeValues={":s": status, ":m": _text(message), ":t": self._now(), ":g": generation},
            )
        except ConflictError:
            return

    def record_read_failure(self, cluster_id: str, message: str) -> None:
        """Record (``message``) or clear (``""``) the last failure to observe the cluster. Keeps the
        pool and its generation; with no POOL item yet, creates one at generation 0 with no pool."""
        self._call(
            "record_read_failure",
            self.table.update_item,
            Key={"pk": _cluster_pk(cluster_id), "sk": POOL_SK},
            UpdateExpression=(
                "SET read_failure = :m, read_failure_at = :t, "
                "generation = if_not_exists(generation, :zero), digest = if_not_exists(digest, :empty), "
                "computed_at = if_not_exists(computed_at, :empty), "
                "apply_status = if_not_exists(apply_status, :pending), "
                "apply_message = if_not_exists(apply_message, :empty)"
            ),
            ExpressionAttributeValues={
                ":m": _text(message),
                ":t": self._now(),
                ":zero": 0,
                ":empty": "",
                ":pending": "Pending",
            },
        )

    def list_history(
        self,
        cluster_id: str,
        limit: int = 20,
        newest_first: bool = True,
        *,
        include_pool: bool = True,
        before_generation: int | None = None,
    ) -> list[PoolRecord]:
        """Past generations (including the current one), newest first by default; at most ``limit``.
        Entries carry the pool as computed (apply fields are the defaults: history is append-only);
        ``extra["expires_at"]`` is the item's TTL (epoch seconds). ``include_pool=False`` skips the pools.
        ``before_generation`` keeps only generations below it (the next page, newest first)."""
        if limit < 1 or (before_generation is not None and before_generation <= 1):
            return []
        sk_condition = (
            Key("sk").begins_with(HISTORY_PREFIX)
            if before_generation is None
            else Key("sk").between(_history_sk(0), _history_sk(before_generation - 1))
        )
        args: dict[str, Any] = {
            "KeyConditionExpression": Key("pk").eq(_cluster_pk(cluster_id)) & sk_condition,
            "ScanIndexForward": not newest_first,
            "Limit": min(limit, 100),
        }
        if not include_pool:
            args["ProjectionExpression"] = "pk, sk, generation, digest, computed_at, extra, #ttl"
            args["ExpressionAttributeNames"] = {"#ttl": "ttl"}
        out: list[PoolRecord] = []
        for raw in self._query("list_history", **args):
            item = _Item(raw)
            extra = item.json_object("extra", "{}")
            extra["expires_at"] = item.get_int("ttl")
            out.append(
                PoolRecord(
                    cluster_id=cluster_id,
                    generation=item.get_int("generation", minimum=1),
                    digest=item.get_str("digest"),
                    pool=item.pool() if include_pool else {},
                    computed_at=item.get_str("computed_at"),
                    extra=extra,
                )
            )
            if len(out) >= limit:
                break
        return out

    # -------------------------------------------------------------------------------- receipts
    def put_receipt(self, receipt: RecalculationReceipt) -> None:
        """Write (or overwrite: a retried recompute) the receipt of an explicit recalculation request;
        it expires after ``RECEIPT_TTL_SECONDS``."""
        op = "put_receipt"
        if receipt.status not in RECEIPT_STATUSES:
            raise PermanentError(f"receipt status {receipt.status!r} not in {RECEIPT_STATUSES}", operation=op)
        request_id = _require_name(receipt.request_id, "request id", op)
        now = self.clock()
        self._call(
            op,
            self.table.put_item,
            Item={
                "pk": _cluster_pk(receipt.cluster_id),
                "sk": f"{RECEIPT_PREFIX}{request_id}",
                "request_id": request_id,
                "status": receipt.status,
                "generation": receipt.generation,
                "changed": bool(receipt.changed),
                "message": _text(receipt.message),
                "completed_at": receipt.completed_at or now.astimezone(UTC).isoformat(),
                "ttl": int(now.timestamp()) + RECEIPT_TTL_SECONDS,
            },
        )

    def get_receipt(self, cluster_id: str, request_id: str) -> RecalculationReceipt | None:
        """The receipt, or None (not written yet, expired, or never requested). Expired items that
        DynamoDB has not yet deleted count as gone."""
        if not request_id or len(request_id) > 255:
            return None
        raw = self._get(_cluster_pk(cluster_id), f"{RECEIPT_PREFIX}{request_id}", "get_receipt")
        if raw is None:
            return None
        item = _Item(raw)
        if item.get_int("ttl") <= int(self.clock().timestamp()):
            return None
        status = item.get_str("status")
        if status not in RECEIPT_STATUSES:
            item.corrupt(f"status {status!r} not in {RECEIPT_STATUSES}")
        changed = raw.get("changed")
        if not isinstance(changed, bool):
            item.corrupt("attribute 'changed' must be a boolean")
        return RecalculationReceipt(
            cluster_id=cluster_id,
            request_id=item.get_str("request_id"),
            status=status,
            generation=item.get_int("generation"),
            changed=changed,
            message=item.get_str("message", ""),
            completed_at=item.get_str("completed_at", ""),
        )

    # ------------------------------------------------------------------------------ node watcher
    def claim_watch(self, cluster_id: str, owner: str) -> WatchBookmark:
        """Take over the cluster's node watch: the lease number goes up by one (the newest invocation always
        wins; an older one's next :meth:`save_watch` is refused and it stops), and what the previous holder
        last saved comes back: the ``resourceVersion`` to resume from and the nodes as they were there.

        Two items: ``WATCH`` (small, written every few seconds: lease, owner, resourceVersion) and
        ``WATCH#NODES`` (every node's view, zlib-compressed JSON, written only when a node changed in a way
        the watcher reports). A write is billed by the size of the whole item, so the frequent checkpoint
        must not carry the nodes."""
        op = "claim_watch"
        owner = _require_name(owner, "watch owner", op)
        response = self._call(
            op,
            self.table.update_item,
            Key={"pk": _cluster_pk(cluster_id), "sk": WATCH_SK},
            UpdateExpression=("SET lease = if_not_exists(lease, :zero) + :one, watch_owner = :owner, claimed_at = :t"),
            ExpressionAttributeValues={":zero": 0, ":one": 1, ":owner": owner, ":t": self._now()},
            ReturnValues="ALL_NEW",
        )
        item = _Item({"pk": _cluster_pk(cluster_id), "sk": WATCH_SK, **response.get("Attributes", {})})
        nodes_raw = self._call(
            op,
            self.table.get_item,
            Key={"pk": _cluster_pk(cluster_id), "sk": WATCH_NODES_SK},
            ConsistentRead=True,
            ProjectionExpression="pk, sk, nodes",
        ).get("Item")
        nodes: dict[str, Any] | None = None
        if nodes_raw is not None:
            blob = nodes_raw.get("nodes")
            data = getattr(blob, "value", blob)
            try:
                decoded = json.loads(zlib.decompress(bytes(data)))
            except (TypeError, ValueError, zlib.error) as exc:
                _Item(nodes_raw).corrupt(f"attribute 'nodes' is not zlib-compressed JSON ({exc})")
            if not isinstance(decoded, dict):
                _Item(nodes_raw).corrupt("attribute 'nodes' must hold a JSON object")
            nodes = decoded
        return WatchBookmark(
            cluster_id=cluster_id,
            lease=item.get_int("lease", minimum=1),
            resource_version=item.get_str("rv", ""),
            nodes=nodes,
        )

    def save_watch(
        self, cluster_id: str, lease: int, resource_version: str, nodes: Mapping[str, Any] | None = None
    ) -> None:
        """Checkpoint the watch at ``resource_version`` (with every node's view when ``nodes`` is given: both
        items in one transaction), only while ``lease`` is still the cluster's current one; else
        :class:`ConflictError` (a newer invocation took over: stop)."""
        op = "save_watch"
        key = {"pk": _cluster_pk(cluster_id), "sk": WATCH_SK}
        now = self._now()
        update: dict[str, Any] = {
            "Key": key,
            "UpdateExpression": "SET rv = :rv, saved_at = :t",
            "ConditionExpression": "lease = :lease",
            "ExpressionAttributeValues": {":rv": resource_version, ":t": now, ":lease": lease},
        }
        if nodes is None:
            self._call(op, self.table.update_item, **update)
            return
        blob = zlib.compress(json.dumps(nodes, separators=(",", ":"), sort_keys=True).encode(), 6)
        if len(blob) > MAX_STORED_POOL:
            raise PermanentError(
                f"{op}: the node views of {cluster_id} take {len(blob)} bytes compressed (at most {MAX_STORED_POOL})",
                operation=op,
            )
        try:
            self._transact(
                op,
                [
                    {"Update": _av(update)},
                    {
                        "Update": {
                            "Key": {"pk": key["pk"], "sk": WATCH_NODES_SK},
                            "UpdateExpression": "SET nodes = :nodes, rv = :rv, saved_at = :t",
                            "ExpressionAttributeValues": _av({":nodes": blob, ":rv": resource_version, ":t": now}),
                        }
                    },
                ],
            )
        except TransactionCancelledError as exc:
            raise ConflictError(
                f"{op}: the node watch of {cluster_id} was taken over (lease {lease} is no longer current)",
                operation=op,
                status=409,
            ) from exc

    @staticmethod
    def _pool(cluster_id: str, raw: Mapping[str, Any]) -> PoolRecord:
        item = _Item(raw)
        generation = item.get_int("generation")
        status = item.get_str("apply_status", "Pending")
        if status not in APPLY_STATUSES:
            item.corrupt(f"apply_status {status!r} not in {APPLY_STATUSES}")
        pool = item.pool() if generation > 0 or "pool" in raw else {}
        return PoolRecord(
            cluster_id=cluster_id,
            generation=generation,
            digest=item.get_str("digest", ""),
            pool=pool,
            computed_at=item.get_str("computed_at", ""),
            apply_status=status,
            apply_message=item.get_str("apply_message", ""),
            read_failure=item.get_str("read_failure", ""),
            extra=item.json_object("extra", "{}"),
        )
