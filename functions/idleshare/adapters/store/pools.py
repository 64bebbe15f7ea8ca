"""The lendable pool: its generations (conditional N -> N+1 with an append-only history), apply status, read
failures, and the receipts of explicit recalculation requests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from boto3.dynamodb.conditions import Key

from idleshare import timings
from idleshare.adapters.ports import PoolRecord, RecalculationReceipt
from idleshare.adapters.store.base import TableAccess
from idleshare.adapters.store.errors import TransactionCancelledError
from idleshare.adapters.store.items import (
    COMPRESS_ABOVE,
    ENCODING_JSON,
    MAX_POOL_PARTS,
    Packed,
    StoredItem,
    attribute_values,
    clip,
    pack,
    part_items,
    require_name,
    side_json,
    unpack,
)
from idleshare.errors import ConflictError, PermanentError, RetryableError
from idleshare.table import (
    HISTORY_PREFIX,
    PK,
    POOL_SK,
    RECEIPT_PREFIX,
    SK,
    TTL_ATTRIBUTE,
    cluster_pk,
    history_sk,
    parts_prefix,
)

APPLY_STATUSES = ("Pending", "Applied", "Failed", "Conflict")  # Conflict: objects left to another field manager
RECEIPT_STATUSES = ("Done", "Failed")
RECEIPT_TTL_SECONDS = timings.RECALC_RECEIPT_TTL_SECONDS
_POOL_READ_ATTEMPTS = 4  # reads of a POOL item whose parts a newer generation overwrote meanwhile


class Pools(TableAccess):
    """The pool, its history, apply status and read failures, and recalculation receipts."""

    def get_pool(self, cluster_id: str) -> PoolRecord | None:
        """The POOL item, its document reassembled from its parts when it has some. A Query of the parts can
        interleave with a newer generation's transaction (which overwrites them): then the item is read again; a
        part missing or stale at an unchanged generation is corrupt (``PermanentError`` naming the item)."""
        op = "get_pool"
        pk = cluster_pk(cluster_id)
        seen: int | None = None
        for _ in range(_POOL_READ_ATTEMPTS):
            raw = self._get(pk, POOL_SK, op)
            if raw is None:
                return None
            item = StoredItem(raw)
            count = item.part_count("pool", MAX_POOL_PARTS)
            parts = unpack(item, "pool", count, self._parts(op, pk, POOL_SK, count)) if count else None
            if count and parts is None:
                generation = item.get_int("generation")
                if generation == seen:
                    item.corrupt(
                        f"a part of attribute 'pool' ({count} parts under {parts_prefix(POOL_SK)!r}) is missing "
                        "or belongs to another document"
                    )
                seen = generation
                continue
            record = self._pool(cluster_id, raw, parts)
            self._remember_parts(pk, POOL_SK, record.generation, count)
            return record
        raise RetryableError(
            f"{op}: the pool of {cluster_id} kept moving while its parts were read ({_POOL_READ_ATTEMPTS} attempts)",
            operation=op,
        )

    def put_pool(self, record: PoolRecord, expected_generation: int) -> None:
        """Generation N+1 (``record.generation``) only if the stored one is still N (0: no pool yet),
        plus the append-only ``HISTORY#`` item with its TTL, in one transaction. Lost race -> ConflictError.

        The pool document is JSON text up to ``COMPRESS_ABOVE`` bytes, else zlib-compressed (binary) in the item
        itself up to ``PART_SIZE`` bytes, else in parts (``PART#POOL#<i>``, and ``PART#HISTORY#<generation>#<i>``
        with the history item's TTL) written in the same transaction; the POOL item's parts that the previous
        generation had beyond the new count are deleted in it too. More than ``MAX_POOL_PARTS`` parts (the
        transaction's 4 MB holds the document twice) is refused before writing (413)."""
        op = "put_pool"
        _check_succession(record, expected_generation, op)
        cid = record.cluster_id
        packed = pack(
            record.pool, f"pool of {cid}", max_parts=MAX_POOL_PARTS, operation=op, text_below=COMPRESS_ABOVE, xz=True
        )
        extra = side_json(record.extra, f"extra of the pool of {cid}", op)
        outbox = None if record.outbox is None else side_json(record.outbox, f"outbox of the pool of {cid}", op)
        now = self.clock()
        pk = cluster_pk(cid)
        expires = int(now.timestamp()) + self.history_ttl_days * 86_400
        pool_item, history_item = _pool_and_history_items(record, packed, extra, outbox, now, expires)
        writes = self._pool_writes(record, expected_generation, pool_item, history_item, packed, expires)
        self._remember_parts(pk, POOL_SK, record.generation, None)
        try:
            self._transact(op, writes)
        except TransactionCancelledError as exc:
            raise ConflictError(
                f"pool of {cid} is no longer at generation {expected_generation}: "
                f"another writer got there first ({', '.join(exc.reasons[:2])})",
                operation=op,
                status=409,
            ) from exc
        self._remember_parts(pk, POOL_SK, record.generation, len(packed.parts))

    def _pool_writes(
        self,
        record: PoolRecord,
        expected_generation: int,
        pool_item: dict[str, Any],
        history_item: dict[str, Any],
        packed: Packed,
        expires: int,
    ) -> list[dict[str, Any]]:
        """The transaction of :meth:`put_pool`: the POOL item on the condition that it is still at
        ``expected_generation``, the new HISTORY item, both documents' parts, and the POOL item's leftover parts."""
        pk, hsk = pool_item[PK], history_item[SK]
        condition = (
            f"attribute_not_exists({PK}) OR generation = :expected"
            if expected_generation == 0
            else "generation = :expected"
        )
        parts = [
            *part_items(pk, POOL_SK, packed, generation=record.generation),
            *part_items(pk, hsk, packed, generation=record.generation, **{TTL_ATTRIBUTE: expires}),
        ]
        leftovers = self._leftover_parts(
            pk, POOL_SK, expected_generation, len(packed.parts), 0 if expected_generation == 0 else MAX_POOL_PARTS
        )
        return [
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
            *({"Put": {"Item": attribute_values(part)}} for part in parts),
            *leftovers,
        ]

    def clear_outbox(self, cluster_id: str, generation: int) -> None:
        """Remove the pool's outbox (its event is on the bus), only while the pool is at ``generation``: a pool
        that moved on (or is gone) keeps its own outbox, and this is a no-op."""
        try:
            self._call(
                "clear_outbox",
                self.table.update_item,
                Key={PK: cluster_pk(cluster_id), SK: POOL_SK},
                UpdateExpression="REMOVE outbox",
                ConditionExpression="generation = :g",
                ExpressionAttributeValues={":g": generation},
            )
        except ConflictError:
            return

    def record_apply(
        self,
        cluster_id: str,
        generation: int,
        status: str,
        message: str = "",
        *,
        rewrites: Mapping[str, Any] | None = None,
    ) -> None:
        """Record how applying ``generation`` to the cluster went (and, ``rewrites`` not None, its count of fights:
        the ``rewrites`` attribute, JSON); does nothing if the stored pool has moved on (or does not exist): an old
        apply result never overwrites a newer generation's."""
        op = "record_apply"
        if status not in APPLY_STATUSES:
            raise PermanentError(f"apply status {status!r} not in {APPLY_STATUSES}", operation=op, status=400)
        update = "SET apply_status = :s, apply_message = :m, applied_at = :t"
        values: dict[str, Any] = {":s": status, ":m": clip(message), ":t": self._now(), ":g": generation}
        if rewrites is not None:
            update += ", rewrites = :r"
            values[":r"] = json.dumps(rewrites, separators=(",", ":"), sort_keys=True)
        try:
            self._call(
                op,
                self.table.update_item,
                Key={PK: cluster_pk(cluster_id), SK: POOL_SK},
                UpdateExpression=update,
                ConditionExpression="generation = :g",
                ExpressionAttributeValues=values,
            )
        except ConflictError:
            return

    def record_read_failure(self, cluster_id: str, message: str, *, generation: int | None = None) -> None:
        """Record (``message``) or clear (``""``) the last failure to observe the cluster. Keeps the
        pool and its generation; with no POOL item yet, creates one at generation 0 with no pool. With
        ``generation``, only while the stored generation is that one (0: also when there is no POOL item): a run
        that lost the race to a newer generation changes nothing (it never reinstates a cleared failure)."""
        args: dict[str, Any] = {}
        if generation is not None:
            args["ConditionExpression"] = (
                f"attribute_not_exists({PK}) OR generation = :g" if generation == 0 else "generation = :g"
            )
        try:
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
                    **({} if generation is None else {":g": generation}),
                },
                **args,
            )
        except ConflictError:
            if generation is None:
                raise
            return

    def list_history(
        self, cluster_id: str, limit: int = 20, *, include_pool: bool = True, before_generation: int | None = None
    ) -> list[PoolRecord]:
        """Past generations (including the current one), newest first; at most ``limit``.
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
            "ScanIndexForward": False,
            "Limit": min(limit, 100),
        }
        if not include_pool:
            args["ProjectionExpression"] = f"{PK}, {SK}, generation, digest, computed_at, extra, #ttl"
            args["ExpressionAttributeNames"] = {"#ttl": TTL_ATTRIBUTE}
        out: list[PoolRecord] = []
        pk = cluster_pk(cluster_id)
        for raw in self._query("list_history", **args):
            item = StoredItem(raw)
            extra = item.json_object("extra", "{}")
            expires = item.get_int(TTL_ATTRIBUTE)
            extra["expires_at"] = expires
            pool: dict[str, Any] = {}
            if include_pool:
                count = item.part_count("pool", MAX_POOL_PARTS)
                sk = item.get_str(SK)
                parts = unpack(item, "pool", count, self._parts("list_history", pk, sk, count)) if count else None
                if count and parts is None:
                    if expires <= int(self.clock().timestamp()):
                        continue  # expired: DynamoDB's TTL deletes the entry and its parts, not at once
                    item.corrupt(f"a part of attribute 'pool' ({count} parts under {parts_prefix(sk)!r}) is missing")
                pool = item.pool(parts)
            out.append(
                PoolRecord(
                    cluster_id=cluster_id,
                    generation=item.get_int("generation", minimum=1),
                    digest=item.get_str("digest"),
                    pool=pool,
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
    def _pool(cluster_id: str, raw: Mapping[str, Any], parts: bytes | None = None) -> PoolRecord:
        item = StoredItem(raw)
        generation = item.get_int("generation")
        status = item.get_str("apply_status", "Pending")
        if status not in APPLY_STATUSES:
            item.corrupt(f"apply_status {status!r} not in {APPLY_STATUSES}")
        pool = item.pool(parts) if generation > 0 or "pool" in raw or "pool_parts" in raw else {}
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
            outbox=None if raw.get("outbox") is None else item.json_object("outbox"),
            rewrites=item.json_object("rewrites", "{}"),
        )


def _check_succession(record: PoolRecord, expected_generation: int, op: str) -> None:
    """A pool record that :meth:`put_pool` can write: the generation after ``expected_generation``, a known
    apply status."""
    if expected_generation < 0 or record.generation != expected_generation + 1:
        raise PermanentError(
            f"put_pool: generation {record.generation} does not follow expected generation {expected_generation}",
            operation=op,
            status=400,
        )
    if record.apply_status not in APPLY_STATUSES:
        raise PermanentError(f"apply_status {record.apply_status!r} not in {APPLY_STATUSES}", operation=op)


def _pool_and_history_items(
    record: PoolRecord, packed: Packed, extra: str, outbox: str | None, now: datetime, expires: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The POOL item and the generation's HISTORY item (with its TTL, ``expires``): the same document and extra."""
    pk = cluster_pk(record.cluster_id)
    common = {
        "generation": record.generation,
        "digest": record.digest,
        "pool_encoding": ENCODING_JSON if isinstance(packed.inline, str) else packed.encoding,
        **packed.owner_attributes("pool"),
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
        **({} if outbox is None else {"outbox": outbox}),
    }
    history_item = {
        PK: pk,
        SK: history_sk(record.generation),
        **common,
        "recorded_at": now.astimezone(UTC).isoformat(),
        TTL_ATTRIBUTE: expires,
    }
    return pool_item, history_item
