"""What every part of :class:`~idleshare.adapters.store.DynamoStore` shares: the table, its clock and the
plumbing of each call (errors translated, Queries paged, transactions)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from boto3.dynamodb.conditions import Key

from idleshare import timings
from idleshare.adapters.store.errors import translate
from idleshare.adapters.store.items import TRANSACTION_LIMIT, check_item_size, item_size
from idleshare.errors import PermanentError
from idleshare.table import PK, SK, part_sk

MAX_TRANSACTION_ITEMS = 100  # TransactWriteItems' limit
_KNOWN_PARTS_MAX = 4096  # entries of the part-count memo (clusters x documents) before it is reset


def _utcnow() -> datetime:
    return datetime.now(UTC)


class TableAccess:
    """The table and the calls every part of the store makes: each SDK error translated, Queries paged,
    transactions addressed to the table."""

    def __init__(
        self,
        table: Any,
        *,
        history_ttl_days: int = timings.HISTORY_TTL_DAYS,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        if history_ttl_days < 1:
            raise ValueError("history_ttl_days must be >= 1")
        self.table = table
        self.client = table.meta.client
        self.table_name: str = table.name
        self.history_ttl_days = history_ttl_days
        self.clock = clock
        self._known_parts: dict[tuple[str, str], tuple[int, int]] = {}
        """(pk, owner sk) -> (version, how many parts the owner item had at that version): the generation of a
        pool read by this instance, the lease of a watch it claimed. A write conditional on that same version
        deletes exactly the parts left over; without it, every part index that can exist."""

    # ------------------------------------------------------------------------------- plumbing
    def _call(self, operation: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except Exception as exc:
            raise translate(exc, operation=operation, table=self.table_name) from exc

    def _get(self, pk: str, sk: str, operation: str) -> dict[str, Any] | None:
        response = self._call(operation, self.table.get_item, Key={PK: pk, SK: sk}, ConsistentRead=True)
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
        """One TransactWriteItems; every ``Put`` item is checked under the item budget and the whole under the
        transaction's limits (100 items, 4 MB) before anything is sent."""
        total = 0
        for entry in items:
            body = next(iter(entry.values()))
            body["TableName"] = self.table_name
            if "Item" in body:
                check_item_size(body["Item"], operation)
                total += item_size(body["Item"])
            else:
                total += item_size(body["Key"]) + item_size(body.get("ExpressionAttributeValues", {}))
        if len(items) > MAX_TRANSACTION_ITEMS or total > TRANSACTION_LIMIT:
            raise PermanentError(
                f"{operation}: a transaction of {len(items)} items and {total} bytes "
                f"(at most {MAX_TRANSACTION_ITEMS} items and {TRANSACTION_LIMIT} bytes)",
                operation=operation,
                status=413,
            )
        self._call(operation, self.client.transact_write_items, TransactItems=items)

    # ------------------------------------------------------------------------------- parts
    def _parts(self, operation: str, pk: str, owner_sk: str, count: int) -> list[dict[str, Any]]:
        """The part items 0..count-1 of the owner ``owner_sk`` (one consistent Query on the parts' keys)."""
        return list(
            self._query(
                operation,
                KeyConditionExpression=Key(PK).eq(pk)
                & Key(SK).between(part_sk(owner_sk, 0), part_sk(owner_sk, count - 1)),
                ConsistentRead=True,
            )
        )

    def _leftover_parts(self, pk: str, owner_sk: str, version: int, count: int, most: int) -> list[dict[str, Any]]:
        """Deletes of the parts of ``owner_sk`` from index ``count`` on that the version replaced (known from this
        instance's read of ``version``; else every index below ``most``)."""
        known = self._known_parts.get((pk, owner_sk))
        previous = known[1] if known is not None and known[0] == version else most
        return [{"Delete": {"Key": {PK: pk, SK: part_sk(owner_sk, i)}}} for i in range(count, previous)]

    def _remember_parts(self, pk: str, owner_sk: str, version: int, count: int | None) -> None:
        if count is None:
            self._known_parts.pop((pk, owner_sk), None)
            return
        if len(self._known_parts) >= _KNOWN_PARTS_MAX:
            self._known_parts.clear()
        self._known_parts[(pk, owner_sk)] = (version, count)

    def _now(self) -> str:
        return self.clock().astimezone(UTC).isoformat()
