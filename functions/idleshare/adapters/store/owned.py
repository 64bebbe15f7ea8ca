"""The record of what idleshare created in a cluster (``OWNED``; docs/spec.md §3, "Ownership").

One item per cluster: ``version`` (int >= 1, +1 per write; a write carries the version it read), ``owned`` (zlib
JSON, binary: ``{"objects": {"Kind/namespace/name": uid}, "pending": [...], "removed": [...]}``) inline, or, above
``PART_SIZE`` compressed bytes, ``owned_parts`` + ``owned_sha256`` and ``PART#OWNED#<i>`` part items written in the
same transaction (:mod:`.items`), and ``saved_at``. At 500 teams the document is ~100 KB of JSON (~45 KB
compressed: uids do not compress), inline; the parts are there so that no cluster size makes it refuse a write.
"""

from __future__ import annotations

from typing import Any

from idleshare.adapters.store.base import TableAccess
from idleshare.adapters.store.errors import TransactionCancelledError
from idleshare.adapters.store.items import StoredItem, attribute_values, pack, part_items, unpack
from idleshare.domain.ownership import Record, key_text, parse_key
from idleshare.errors import ConflictError
from idleshare.table import OWNED_SK, PK, SK, cluster_pk, parts_prefix

MAX_OWNED_PARTS = 6
"""At most this many parts of ``PART_SIZE`` bytes (one transaction stays under DynamoDB's 4 MB)."""
_ATTRIBUTES = ("owned", "owned_parts", "owned_sha256")


class OwnedRecords(TableAccess):
    """Read and write a cluster's ownership record (``OWNED``)."""

    def get_owned(self, cluster_id: str) -> Record | None:
        op = "get_owned"
        pk = cluster_pk(cluster_id)
        raw = self._get(pk, OWNED_SK, op)
        if raw is None:
            return None
        item = StoredItem(raw)
        version = item.get_int("version", minimum=1)
        count = item.part_count("owned", MAX_OWNED_PARTS)
        if count:
            blob = unpack(item, "owned", count, self._parts(op, pk, OWNED_SK, count))
            if blob is None:
                item.corrupt(
                    f"a part of attribute 'owned' ({count} parts under {parts_prefix(OWNED_SK)!r}) is missing or "
                    "belongs to another record"
                )
        else:
            blob = item.get_bytes("owned")
        document = item.document("owned", blob)
        self._remember_parts(pk, OWNED_SK, version, count)
        try:
            objects = {parse_key(k): str(v) for k, v in (document.get("objects") or {}).items()}
            pending = frozenset(parse_key(k) for k in document.get("pending") or ())
            removed = tuple(dict(r) for r in document.get("removed") or ())
        except (ValueError, TypeError, AttributeError) as exc:
            item.corrupt(f"attribute 'owned' does not hold an ownership record: {exc}")
        return Record(objects=objects, pending=pending, removed=removed, version=version)

    def put_owned(self, cluster_id: str, record: Record) -> Record:
        op = "put_owned"
        pk = cluster_pk(cluster_id)
        document: dict[str, Any] = {
            "objects": {key_text(k): uid for k, uid in sorted(record.objects.items())},
            "pending": sorted(key_text(k) for k in record.pending),
            "removed": [dict(r) for r in record.removed],
        }
        packed = pack(document, f"the ownership record of {cluster_id}", max_parts=MAX_OWNED_PARTS, operation=op)
        attributes = packed.owner_attributes("owned")
        removed = [a for a in _ATTRIBUTES if a not in attributes]
        version = record.version + 1
        values = {f":{name}": value for name, value in attributes.items()}
        update: dict[str, Any] = {
            "Key": {PK: pk, SK: OWNED_SK},
            "UpdateExpression": "SET "
            + ", ".join(f"{name} = :{name}" for name in attributes)
            + ", version = :v, saved_at = :t"
            + (" REMOVE " + ", ".join(removed) if removed else ""),
            "ConditionExpression": f"attribute_not_exists({PK})" if record.version == 0 else "version = :expected",
            "ExpressionAttributeValues": attribute_values(
                {
                    **values,
                    ":v": version,
                    ":t": self._now(),
                    **({":expected": record.version} if record.version else {}),
                }
            ),
        }
        parts = [{"Put": {"Item": part}} for part in part_items(pk, OWNED_SK, packed)]
        leftovers = self._leftover_parts(pk, OWNED_SK, record.version, len(packed.parts), MAX_OWNED_PARTS)
        self._remember_parts(pk, OWNED_SK, record.version, None)
        try:
            self._transact(op, [{"Update": update}, *parts, *leftovers])
        except TransactionCancelledError as exc:
            raise ConflictError(
                f"{op}: the ownership record of {cluster_id} moved (expected version {record.version})",
                operation=op,
                status=409,
            ) from exc
        self._remember_parts(pk, OWNED_SK, version, len(packed.parts))
        return Record(objects=record.objects, pending=record.pending, removed=record.removed, version=version)
