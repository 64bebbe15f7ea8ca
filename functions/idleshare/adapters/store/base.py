"""What every part of :class:`~idleshare.adapters.store.DynamoStore` shares: the table, its clock and the
plumbing of each call (errors translated, Queries paged, transactions)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from idleshare.adapters.store.errors import translate
from idleshare.table import PK, SK


def _utcnow() -> datetime:
    return datetime.now(UTC)


class TableAccess:
    """The table and the calls every part of the store makes: each SDK error translated, Queries paged,
    transactions addressed to the table."""

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
        for entry in items:
            body = next(iter(entry.values()))
            body["TableName"] = self.table_name
        self._call(operation, self.client.transact_write_items, TransactItems=items)

    def _now(self) -> str:
        return self.clock().astimezone(UTC).isoformat()
