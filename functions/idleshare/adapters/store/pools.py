"""The lendable pool: its generations (conditional N -> N+1 with an append-only history), apply status, read
failures, and the receipts of explicit recalculation requests."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC
from typing import Any

from boto3.dynamodb.conditions import Key

from idleshare.adapters.errors import ConflictError, PermanentError
from idleshare.adapters.ports import PoolRecord, RecalculationReceipt
from idleshare.adapters.store.base import TableAccess
from idleshare.adapters.store.errors import TransactionCancelledError
from idleshare.adapters.store.items import StoredItem, attribute_values, clip, encode_pool, require_name, to_json
from idleshare.table import HISTORY_PREFIX, PK, POOL_SK, RECEIPT_PREFIX, SK, TTL_ATTRIBUTE, cluster_pk, history_sk

APPLY_STATUSES = ("Pending", "Applied", "Failed", "Conflict")  # Conflict: objects left to another field manager
RECEIPT_STATUSES = ("Done", "Failed")
RECEIPT_TTL_SECONDS = 24 * 3600  # idleshare.names.RECALC_RECEIPT_TTL_SECONDS


class Pools(TableAccess):
    """The pool, its history, apply status and read failures, and recalculation receipts."""

    def get_pool(self, cluster_id: str) -> PoolRecord | None:
        item = self._get(cluster_pk(cluster_id), POOL_SK, "get_pool")
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
        encoding, pool_text = encode_pool(record.pool, record.cluster_id)
        extra = to_json(record.extra, f"extra of the pool of {record.cluster_id}")
        now = self.clock()
        pk = cluster_pk(record.cluster_id)
        common = {
            "generation": record.generation,
            "digest": record.digest,
            "pool_encoding": encoding,
            "pool": pool_text,
            "computed_at": record.computed_at,
            "extra": extra,
        }
        pool_item = {
            PK: pk,
            SK: POOL_SK,
            **common,
            "apply_status": record.apply_status,
            "apply_message": clip(record.apply_message),
            "read_failure": clip(record.read_failure),
            "updated_at": now.astimezone(UTC).isoformat(),
        }
        history_item = {
            PK: pk,
            SK: history_sk(record.generation),
            **common,
            "recorded_at": now.astimezone(UTC).isoformat(),
            TTL_ATTRIBUTE: int(now.timestamp()) + self.history_ttl_days * 86_400,
        }
        condition = (
            f"attribute_not_exists({PK}) OR generation = :expected"
            if expected_generation == 0
            else "generation = :expected"
        )
        try:
            self._transact(
                op,
                [
                    {
                        "Put": {
                            "Item": attribute_values(pool_item),
                            "ConditionExpression": condition,
                            "ExpressionAttributeValues": attribute_values({":expected": expected_generation}),
                        }
                    },
                    {
                        "Put": {
                            "Item": attribute_values(history_item),
                            "ConditionExpression": f"attribute_not_exists({PK})",
                        }
                    },
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
                Key={PK: cluster_pk(cluster_id), SK: POOL_SK},
                UpdateExpression="SET apply_status = :s, apply_message = :m, applied_at = :t",
                ConditionExpression="generation = :g",
                ExpressionAttributeValues={":s": status, ":m": clip(message), ":t": self._now(), ":g": generation},
            )
        except ConflictError:
            return

    def record_read_failure(self, cluster_id: str, message: str) -> None:
        """Record (``message``) or clear (``""``) the last failure to observe the cluster. Keeps the
        pool and its generation; with no POOL item yet, creates one at generation 0 with no pool."""
        self._call(
            "record_read_failure",
            self.table.update_item,
            Key={PK: cluster_pk(cluster_id), SK: POOL_SK},
            UpdateExpression=(
                "SET read_failure = :m, read_failure_at = :t, "
                "generation = if_not_exists(generation, :zero), digest = if_not_exists(digest, :empty), "
                "computed_at = if_not_exists(computed_at, :empty), "
                "apply_status = if_not_exists(apply_status, :pending), "
                "apply_message = if_not_exists(apply_message, :empty)"
            ),
            ExpressionAttributeValues={
                ":m": clip(message),
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
            Key(SK).begins_with(HISTORY_PREFIX)
            if before_generation is None
            else Key(SK).between(history_sk(0), history_sk(before_generation - 1))
        )
        args: dict[str, Any] = {
            "KeyConditionExpression": Key(PK).eq(cluster_pk(cluster_id)) & sk_condition,
            "ScanIndexForward": not newest_first,
            "Limit": min(limit, 100),
        }
        if not include_pool:
            args["ProjectionExpression"] = f"{PK}, {SK}, generation, digest, computed_at, extra, #ttl"
            args["ExpressionAttributeNames"] = {"#ttl": TTL_ATTRIBUTE}
        out: list[PoolRecord] = []
        for raw in self._query("list_history", **args):
            item = StoredItem(raw)
            extra = item.json_object("extra", "{}")
            extra["expires_at"] = item.get_int(TTL_ATTRIBUTE)
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
        request_id = require_name(receipt.request_id, "request id", op)
        now = self.clock()
        self._call(
            op,
            self.table.put_item,
            Item={
                PK: cluster_pk(receipt.cluster_id),
                SK: f"{RECEIPT_PREFIX}{request_id}",
                "request_id": request_id,
                "status": receipt.status,
                "generation": receipt.generation,
                "changed": bool(receipt.changed),
                "message": clip(receipt.message),
                "completed_at": receipt.completed_at or now.astimezone(UTC).isoformat(),
                TTL_ATTRIBUTE: int(now.timestamp()) + RECEIPT_TTL_SECONDS,
            },
        )

    def get_receipt(self, cluster_id: str, request_id: str) -> RecalculationReceipt | None:
        """The receipt, or None (not written yet, expired, or never requested). Expired items that
        DynamoDB has not yet deleted count as gone."""
        if not request_id or len(request_id) > 255:
            return None
        raw = self._get(cluster_pk(cluster_id), f"{RECEIPT_PREFIX}{request_id}", "get_receipt")
        if raw is None:
            return None
        item = StoredItem(raw)
        if item.get_int(TTL_ATTRIBUTE) <= int(self.clock().timestamp()):
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

    @staticmethod
    def _pool(cluster_id: str, raw: Mapping[str, Any]) -> PoolRecord:
        item = StoredItem(raw)
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
