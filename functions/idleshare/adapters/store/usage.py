"""The usage history: the latest sample, hourly and daily amount-seconds per team/flavor/resource.

Items (``CLUSTER#<id>`` partition)::

    USAGE#LATEST            cursor_at, sampled_at, sample (JSON text; over 64 KB: sample_z, zlib), failure, updated_at
                            (no TTL: one per cluster)
    USAGE#H#<YYYY-MM-DDTHH> rows (JSON text: [[team, flavor, resource, allocated, borrowed], ...] amount-seconds as
                            exact fractions "n/d"), gaps (JSON text: [[start, end, reason], ...]), version, ttl
    USAGE#D#<YYYY-MM-DD>    the same, the day's hours summed (:meth:`UsageHistory.compact_usage_day`), ttl

Bounded: an hour holds one row per (team, flavor, resource) in use and at most :data:`MAX_GAPS` gaps (adjacent gaps
with the same reason merge); every item is checked under the item budget before it is written. The cursor and the
hours a sample adds to move together in one transaction, conditional on the cursor and each hour's version, so a
duplicate or overlapping invocation adds nothing twice (it gets :class:`ConflictError`).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

from boto3.dynamodb.conditions import Key

from idleshare.adapters.ports import UsageBucket, UsageCursor, UsageKey
from idleshare.adapters.store.base import TableAccess
from idleshare.adapters.store.errors import TransactionCancelledError
from idleshare.adapters.store.items import ITEM_BUDGET, StoredItem, attribute_values, clip, item_size, pack
from idleshare.errors import ConflictError, PermanentError
from idleshare.table import (
    PK,
    SK,
    USAGE_DAY_PREFIX,
    USAGE_DAY_TTL_DAYS,
    USAGE_HOUR_PREFIX,
    USAGE_HOUR_TTL_DAYS,
    USAGE_LATEST_SK,
    cluster_pk,
    usage_day_sk,
    usage_hour_sk,
)

MAX_GAPS = 120  # per hour or day item
MAX_SAMPLE_TEXT = 64_000  # bytes of sample JSON above which it is stored compressed (USAGE#LATEST's sample_z)


def merge_rows(
    into: dict[UsageKey, tuple[Fraction, Fraction]], rows: Mapping[UsageKey, tuple[Fraction, Fraction]]
) -> dict[UsageKey, tuple[Fraction, Fraction]]:
    out = dict(into)
    for key, (a, b) in rows.items():
        old_a, old_b = out.get(key, (Fraction(0), Fraction(0)))
        out[key] = (old_a + a, old_b + b)
    return out


def merge_gaps(
    into: Iterable[tuple[str, str, str]], gaps: Iterable[tuple[str, str, str]]
) -> tuple[tuple[str, str, str], ...]:
    """Gaps in order; one that starts where the previous one (same reason) ends extends it; at most MAX_GAPS."""
    out: list[tuple[str, str, str]] = []
    for start, end, reason in sorted({*into, *gaps}):
        if out and out[-1][2] == reason and out[-1][1] >= start:
            out[-1] = (out[-1][0], max(out[-1][1], end), reason)
        else:
            out.append((start, end, reason))
    if len(out) > MAX_GAPS:  # keep the first ones and one that covers the rest
        last_end = max(g[1] for g in out)
        out = [*out[: MAX_GAPS - 1], (out[MAX_GAPS - 1][0], last_end, "ManyGaps: more gaps merged into one")]
    return tuple(out)


def _rows_json(rows: Mapping[UsageKey, tuple[Fraction, Fraction]]) -> bytes:
    """The rows as stored: zlib-compressed JSON (binary; an hour's bucket is rewritten every minute, billed per KB).
    Read back: :meth:`UsageStore._bucket`, which also reads the JSON text earlier versions wrote."""
    text = json.dumps([[t, f, r, str(a), str(b)] for (t, f, r), (a, b) in sorted(rows.items())], separators=(",", ":"))
    return zlib.compress(text.encode(), 6)


def _stored_rows(item: StoredItem) -> Any:
    raw = item.raw.get("rows", "[]")
    return json.loads(raw if isinstance(raw, str) else zlib.decompress(item.get_bytes("rows")))


def _ttl(days: int, start: datetime) -> int:
    return int((start + timedelta(days=days)).timestamp())


def _bucket_start(key: str) -> datetime:
    text = key if "T" in key else key + "T00"
    return datetime.strptime(text, "%Y-%m-%dT%H").replace(tzinfo=UTC)


def _latest_update(cursor: UsageCursor, expected: str | None, now: str, op: str) -> dict[str, Any]:
    """The update of USAGE#LATEST: the cursor, the failure and, when the cursor carries one, the sample; conditional
    on the cursor being ``expected`` (on no item when None)."""
    # the sample as JSON text when small, else zlib-compressed in one binary attribute (hundreds of teams: MBs
    # of JSON, tens of KB compressed); more than one item holds is refused, naming the sizes
    packed = (
        None
        if cursor.sample is None
        else pack(
            cursor.sample,
            f"the usage sample of {cursor.cluster_id}",
            max_parts=1,
            operation=op,
            text_below=MAX_SAMPLE_TEXT,
        )
    )
    expression = "SET cursor_at = :c, failure = :f, updated_at = :t"
    values: dict[str, Any] = {":c": cursor.cursor_at, ":f": clip(cursor.failure), ":t": now}
    if packed is not None:
        if isinstance(packed.inline, str):
            expression += ", sampled_at = :s, #sample = :sample REMOVE sample_z"
        else:
            expression += ", sampled_at = :s, sample_z = :sample REMOVE #sample"
        values |= {":s": cursor.sampled_at, ":sample": packed.inline}
    latest: dict[str, Any] = {
        "Key": {PK: cluster_pk(cursor.cluster_id), SK: USAGE_LATEST_SK},
        "UpdateExpression": expression,
        "ExpressionAttributeValues": values,
    }
    if packed is not None:
        latest["ExpressionAttributeNames"] = {"#sample": "sample"}
    if expected is None:
        latest["ConditionExpression"] = f"attribute_not_exists({PK})"
    else:
        latest["ConditionExpression"] = "cursor_at = :expected"
        values[":expected"] = expected
    return latest


class UsageHistory(TableAccess):
    """``USAGE#`` items: :class:`~idleshare.adapters.ports.UsageStore`."""

    def get_usage_cursor(self, cluster_id: str) -> UsageCursor | None:
        raw = self._get(cluster_pk(cluster_id), USAGE_LATEST_SK, "get_usage_cursor")
        if raw is None:
            return None
        item = StoredItem(raw)
        sample_text = item.get_str("sample", "")
        if raw.get("sample_z") is not None:  # a large sample, stored compressed
            sample: dict[str, Any] | None = item.document("sample_z", item.get_bytes("sample_z"))
        else:
            sample = item.json_object("sample") if sample_text else None
        return UsageCursor(
            cluster_id=cluster_id,
            cursor_at=item.get_str("cursor_at"),
            sampled_at=item.get_str("sampled_at", ""),
            sample=sample,
            failure=item.get_str("failure", ""),
        )

    def _bucket(self, item: StoredItem, start: str) -> UsageBucket:
        try:
            rows = {(str(t), str(f), str(r)): (Fraction(a), Fraction(b)) for t, f, r, a, b in _stored_rows(item)}
            gaps = tuple((str(s), str(e), str(why)) for s, e, why in json.loads(item.get_str("gaps", "[]")))
        except (ValueError, TypeError, ZeroDivisionError, zlib.error) as exc:
            item.corrupt(f"usage rows or gaps unreadable: {exc}")
        return UsageBucket(start=start, rows=rows, gaps=gaps)

    def add_usage(self, cursor: UsageCursor, hours: Mapping[str, UsageBucket], *, expected: str | None) -> None:
        """Move the cursor (USAGE#LATEST, conditional on ``expected``: its ``cursor_at``, None for none yet) and add
        each hour's amounts and gaps to its USAGE#H# item, in one transaction; another invocation's write between the
        reads and it -> :class:`ConflictError`."""
        op = "add_usage"
        now = self._now()
        updates = [{"Update": attribute_values(_latest_update(cursor, expected, now, op))}]
        for hour, delta in sorted(hours.items()):
            updates.append({"Update": attribute_values(self._hour_update(cursor.cluster_id, hour, delta, now, op))})
        try:
            self._transact(op, updates)
        except TransactionCancelledError as exc:
            raise ConflictError(
                f"{op}: the usage history of {cursor.cluster_id} moved meanwhile (another sample was recorded)",
                operation=op,
                status=409,
            ) from exc

    def _hour_update(self, cluster_id: str, hour: str, delta: UsageBucket, now: str, op: str) -> dict[str, Any]:
        """The update of the hour item ``hour``: what it holds plus ``delta``, conditional on its version (on its
        absence when new); over the item budget -> :class:`PermanentError`."""
        pk, sk = cluster_pk(cluster_id), usage_hour_sk(hour)
        raw = self._get(pk, sk, op)
        stored = self._bucket(StoredItem(raw), hour) if raw is not None else UsageBucket(hour)
        version = StoredItem(raw).get_int("version", default=0) if raw is not None else 0
        values: dict[str, Any] = {
            ":rows": _rows_json(merge_rows(stored.rows, delta.rows)),
            ":gaps": json.dumps(list(merge_gaps(stored.gaps, delta.gaps)), separators=(",", ":")),
            ":v": version + 1,
            ":ttl": _ttl(USAGE_HOUR_TTL_DAYS, _bucket_start(hour)),
            ":t": now,
        }
        update: dict[str, Any] = {
            "Key": {PK: pk, SK: sk},
            "UpdateExpression": "SET #rows = :rows, gaps = :gaps, version = :v, #ttl = :ttl, updated_at = :t",
            "ExpressionAttributeNames": {"#rows": "rows", "#ttl": "ttl"},
            "ExpressionAttributeValues": values,
        }
        if raw is None:
            update["ConditionExpression"] = f"attribute_not_exists({PK})"
        else:
            update["ConditionExpression"] = "version = :old"
            values[":old"] = version
        self._check(op, sk, values)
        return update

    def _check(self, op: str, sk: str, values: Mapping[str, Any]) -> None:
        size = item_size(values)
        if size > ITEM_BUDGET:
            raise PermanentError(f"{op}: usage item {sk} would be {size} bytes (at most {ITEM_BUDGET})", operation=op)

    def _query_buckets(self, op: str, pk: str, prefix: str, first: str, last: str) -> list[UsageBucket]:
        out = []
        for raw in self._query(
            op,
            KeyConditionExpression=Key(PK).eq(pk) & Key(SK).between(f"{prefix}{first}", f"{prefix}{last}"),
            ConsistentRead=True,
        ):
            item = StoredItem(raw)
            out.append(self._bucket(item, item.get_str(SK).removeprefix(prefix)))
        return out

    def compact_usage_day(self, cluster_id: str, day: str) -> UsageBucket:
        op = "compact_usage_day"
        pk = cluster_pk(cluster_id)
        rows: dict[UsageKey, tuple[Fraction, Fraction]] = {}
        gaps: tuple[tuple[str, str, str], ...] = ()
        for hour in self._query_buckets(op, pk, USAGE_HOUR_PREFIX, f"{day}T00", f"{day}T23"):
            rows = merge_rows(rows, hour.rows)
            gaps = merge_gaps(gaps, hour.gaps)
        values = {
            ":rows": _rows_json(rows),
            ":gaps": json.dumps(list(gaps), separators=(",", ":")),
            ":ttl": _ttl(USAGE_DAY_TTL_DAYS, _bucket_start(day)),
            ":t": self._now(),
        }
        self._check(op, usage_day_sk(day), values)
        self._call(
            op,
            self.table.update_item,
            Key={PK: pk, SK: usage_day_sk(day)},
            UpdateExpression="SET #rows = :rows, gaps = :gaps, #ttl = :ttl, updated_at = :t",
            ExpressionAttributeNames={"#rows": "rows", "#ttl": "ttl"},
            ExpressionAttributeValues=values,
        )
        return UsageBucket(start=day, rows=rows, gaps=gaps)

    def usage_buckets(self, cluster_id: str, granularity: str, first: str, last: str) -> list[UsageBucket]:
        prefix = {"hour": USAGE_HOUR_PREFIX, "day": USAGE_DAY_PREFIX}.get(granularity)
        if prefix is None:
            raise PermanentError(f"usage granularity must be hour or day (got {granularity!r})", operation="usage")
        return self._query_buckets("usage_buckets", cluster_pk(cluster_id), prefix, first, last)
