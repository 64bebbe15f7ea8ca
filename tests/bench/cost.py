"""What AWS bills, counted at the boundaries (``bench_cost.py``; the rules: ``tests/bench/prices.json``).

* :class:`Meter` wraps every botocore client of the process (``BaseClient._make_api_call``) and counts, per call:
  DynamoDB write and read request units from the items' sizes (DynamoDB's sizing: attribute names plus values,
  1 KB per write unit, 4 KB per read unit, half for an eventually consistent read, twice in a transaction; an
  update or delete is billed on the stored item, read back by an uncounted probe), SQS requests (one per 64 KB
  chunk of the request's and the answer's payload), EventBridge events (one per 64 KB chunk of an entry);
* :func:`emf_metrics` reads the handlers' captured output: each EMF document's metrics, by name and dimension
  set (the unique metrics CloudWatch bills), and the log bytes;
* :func:`bill` turns a day's counts into a month's bill, line by line, with :func:`prices`.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

PRICES = Path(__file__).with_name("prices.json")
KB = 1024
SQS_CHUNK = 64 * KB
EVENT_CHUNK = 64 * KB
DAYS_PER_MONTH = 30
_TYPES = {"S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS"}


def prices() -> dict[str, Any]:
    """The price table (``prices.json``): each price with its unit, the source and the date read."""
    return dict(json.loads(PRICES.read_text()))


# -- DynamoDB item sizes and units -----------------------------------------------------------------


def _number_size(text: str) -> int:
    """A number's stored size: about one byte per two significant digits, plus one."""
    digits = text.lstrip("-").replace(".", "").lstrip("0").rstrip("0") or "0"
    return math.ceil(len(digits) / 2) + 1


def value_size(value: Any) -> int:
    """The size DynamoDB gives one attribute value, typed (``{"S": ...}``, the wire format) or as boto3's resource
    takes it (str, Decimal, bytes, dict, list, set)."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _TYPES:
        (kind, inner), = value.items()  # fmt: skip
        if kind == "S":
            return len(inner.encode())
        if kind == "N":
            return _number_size(str(inner))
        if kind == "B":
            return len(inner) if isinstance(inner, bytes | bytearray) else len(inner) * 3 // 4  # base64 on the wire
        if kind in ("BOOL", "NULL"):
            return 1
        if kind == "M":
            return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in inner.items())
        if kind == "L":
            return 3 + sum(value_size(v) + 1 for v in inner)
        return sum(value_size({kind[0]: v}) for v in inner)
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, int | float | Decimal):
        return _number_size(str(value))
    if isinstance(value, bytes | bytearray):
        return len(value)
    if hasattr(value, "value") and isinstance(value.value, bytes):  # boto3's Binary
        return len(value.value)
    if isinstance(value, Mapping):
        return 3 + sum(len(str(k).encode()) + value_size(v) + 1 for k, v in value.items())
    if isinstance(value, list | tuple):
        return 3 + sum(value_size(v) + 1 for v in value)
    if isinstance(value, set | frozenset):
        return sum(value_size(v) for v in value)
    raise TypeError(f"no DynamoDB size for {type(value).__name__}")


def item_size(item: Mapping[str, Any]) -> int:
    """An item's size: its attribute names' bytes plus their values' sizes."""
    return sum(len(k.encode()) + value_size(v) for k, v in item.items())


def write_units(size: int, *, transactional: bool = False) -> int:
    """Write request units of writing an item of ``size`` bytes: 1 per KB begun (at least 1), twice in a transaction."""
    return max(1, math.ceil(size / KB)) * (2 if transactional else 1)


def read_units(size: int, *, consistent: bool = False, transactional: bool = False) -> float:
    """Read request units of reading ``size`` bytes (one item, or a query's items added up): 1 per 4 KB begun (at
    least 1); half for an eventually consistent read, twice in a transaction."""
    units = max(1, math.ceil(size / (4 * KB)))
    if transactional:
        return units * 2.0
    return float(units) if consistent else units / 2


# -- the meter --------------------------------------------------------------------------------------


@dataclass
class Counts:
    """What one function's invocations (or the whole run) made AWS count."""

    wru: float = 0.0
    rru: float = 0.0
    ddb_calls: Counter[str] = field(default_factory=Counter)
    sqs_requests: int = 0
    events: int = 0
    other_calls: Counter[str] = field(default_factory=Counter)
    item_bytes: Counter[str] = field(default_factory=Counter)  # the largest item written, by its key's sk prefix

    def add(self, other: Counts) -> None:
        self.wru += other.wru
        self.rru += other.rru
        self.ddb_calls.update(other.ddb_calls)
        self.sqs_requests += other.sqs_requests
        self.events += other.events
        self.other_calls.update(other.other_calls)
        for k, v in other.item_bytes.items():
            self.item_bytes[k] = max(self.item_bytes[k], v)


def _kind(key: Mapping[str, Any]) -> str:
    sk = key.get("sk")
    text = sk.get("S", "") if isinstance(sk, dict) else str(sk or "")
    return text.split("#", 1)[0] or "item"


def _payload(value: Any) -> int:
    return len(json.dumps(value, default=str).encode())


class Meter:
    """Counts what every botocore client call in the block costs (``with Meter() as m: ...; m.counts``);
    :meth:`take` hands over what was counted since the last take."""

    def __init__(self) -> None:
        self.counts = Counts()
        self._probe: Any = None
        self._inside = False

    @contextlib.contextmanager
    def installed(self) -> Iterator[Meter]:
        from botocore.client import BaseClient

        original = BaseClient._make_api_call
        meter = self

        def counted(client: Any, operation: str, params: dict[str, Any]) -> Any:
            if meter._inside:  # the probe's own calls
                return original(client, operation, params)
            service = client.meta.service_model.service_name
            before = meter._before(client, service, operation, params)
            answer = original(client, operation, params)
            meter._inside = True
            try:
                meter._count(client, service, operation, params, answer, before)
            finally:
                meter._inside = False
            return answer

        BaseClient._make_api_call = counted  # type: ignore[method-assign]
        try:
            yield self
        finally:
            BaseClient._make_api_call = original  # type: ignore[method-assign]

    def take(self) -> Counts:
        taken, self.counts = self.counts, Counts()
        return taken

    def _stored_size(self, client: Any, table: str, key: Mapping[str, Any]) -> int:
        self._inside = True
        try:
            item = client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        finally:
            self._inside = False
        return item_size(item) if item else 0

    def _before(self, client: Any, service: str, operation: str, params: dict[str, Any]) -> int:
        """What an update or delete is billed on besides its result: the item stored before it."""
        if service == "dynamodb" and operation in ("UpdateItem", "DeleteItem"):
            return self._stored_size(client, params["TableName"], params["Key"])
        return 0

    def _count(
        self, client: Any, service: str, operation: str, params: dict[str, Any], answer: Any, before: int
    ) -> None:
        c = self.counts
        if service == "dynamodb":
            c.ddb_calls[operation] += 1
            self._dynamodb(client, operation, params, answer, before)
        elif service == "sqs":
            c.sqs_requests += max(1, math.ceil((_payload(params) + _payload(answer)) / SQS_CHUNK))
        elif service == "events" and operation == "PutEvents":
            c.events += sum(max(1, math.ceil(_payload(e) / EVENT_CHUNK)) for e in params.get("Entries", []))
        else:
            c.other_calls[f"{service}:{operation}"] += 1

    def _write(self, size: int, key: Mapping[str, Any], *, transactional: bool = False) -> None:
        self.counts.wru += write_units(size, transactional=transactional)
        kind = _kind(key)
        self.counts.item_bytes[kind] = max(self.counts.item_bytes[kind], size)

    def _dynamodb(self, client: Any, op: str, params: dict[str, Any], answer: Any, before: int) -> None:
        c = self.counts
        consistent = bool(params.get("ConsistentRead"))
        if op == "PutItem":
            self._write(item_size(params["Item"]), params["Item"])
        elif op == "UpdateItem":
            after = self._stored_size(client, params["TableName"], params["Key"])
            self._write(max(before, after), params["Key"])
        elif op == "DeleteItem":
            self._write(before, params["Key"])
        elif op == "BatchWriteItem":
            for requests in params["RequestItems"].values():
                for r in requests:
                    if "PutRequest" in r:
                        self._write(item_size(r["PutRequest"]["Item"]), r["PutRequest"]["Item"])
                    else:
                        self._write(KB, r["DeleteRequest"]["Key"])  # a deleted item's size: not read back
        elif op == "TransactWriteItems":
            for entry in params["TransactItems"]:
                ((action, body),) = entry.items()
                if action == "Put":
                    self._write(item_size(body["Item"]), body["Item"], transactional=True)
                elif action == "ConditionCheck":
                    c.rru += read_units(0, transactional=True)
                else:  # Update, Delete: billed on the item stored
                    self._write(
                        self._stored_size(client, body["TableName"], body["Key"]), body["Key"], transactional=True
                    )
        elif op == "GetItem":
            c.rru += read_units(item_size(answer.get("Item") or {}), consistent=consistent)
        elif op in ("Query", "Scan"):
            c.rru += read_units(sum(item_size(i) for i in answer.get("Items", [])), consistent=consistent)
        elif op == "BatchGetItem":
            for table, items in answer.get("Responses", {}).items():
                strong = bool(params["RequestItems"].get(table, {}).get("ConsistentRead"))
                c.rru += sum(read_units(item_size(i), consistent=strong) for i in items)
        elif op == "TransactGetItems":
            c.rru += sum(read_units(item_size(r.get("Item") or {}), transactional=True) for r in answer["Responses"])


# -- CloudWatch: the EMF documents and the log bytes -----------------------------------------------


def emf_metrics(lines: Iterable[str]) -> tuple[set[tuple[str, str, tuple[tuple[str, str], ...]]], int, int]:
    """(the unique metrics, as (namespace, name, ((dimension, value)...)); the log bytes; of which EMF bytes) of
    the handlers' output lines. Each of an EMF document's dimension sets makes each of its metrics one more metric."""
    unique: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()
    log_bytes = emf_bytes = 0
    for line in lines:
        if not line.strip():
            continue
        size = len(line.encode()) + 1
        log_bytes += size
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        aws = doc.get("_aws") if isinstance(doc, dict) else None
        if not isinstance(aws, dict):
            continue
        emf_bytes += size
        for directive in aws.get("CloudWatchMetrics", []):
            for dims in directive.get("Dimensions", []):
                dset = tuple(sorted((d, str(doc.get(d, ""))) for d in dims))
                for metric in directive.get("Metrics", []):
                    unique.add((directive.get("Namespace", ""), metric["Name"], dset))
    return unique, log_bytes, emf_bytes


# -- the bill --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    what: str
    quantity: float
    unit: str
    monthly: float


def gb_seconds(seconds: float, memory_mb: int) -> float:
    """Lambda's GB-s: the billed duration (rounded up to the millisecond) times the configured memory."""
    return math.ceil(seconds * 1000) / 1000 * memory_mb / 1024


def bill(day: Mapping[str, float], table: Mapping[str, Any] | None = None) -> list[Line]:
    """A month (:data:`DAYS_PER_MONTH` days) of a day's counts, priced line by line. ``day`` keys: ``<function>
    invocations`` and ``<function> GB-s`` for each function, ``wru``, ``rru``, ``sqs``, ``events``,
    ``schedules``, ``api``, ``log bytes``; month-long quantities: ``metrics``, ``alarms``, ``dashboards``."""
    p = {k: v["usd"] for k, v in (table or prices())["prices"].items()}
    lines: list[Line] = []
    m = DAYS_PER_MONTH
    for key, qty in day.items():
        if key.endswith(" invocations"):
            lines.append(Line(key, qty * m, "requests", qty * m * p["lambda_request"]))
        elif key.endswith(" GB-s"):
            lines.append(Line(key, qty * m, "GB-s", qty * m * p["lambda_gb_second_arm64"]))
    per_day = {
        "wru": ("DynamoDB writes", "WRU", p["dynamodb_wru"]),
        "rru": ("DynamoDB reads", "RRU", p["dynamodb_rru"]),
        "sqs": ("SQS FIFO requests", "requests", p["sqs_fifo_request"]),
        "events": ("EventBridge custom events", "events", p["eventbridge_event"]),
        "schedules": ("EventBridge Scheduler invocations", "invocations", p["scheduler_invocation"]),
        "api": ("API Gateway REST requests", "requests", p["apigateway_rest_request"]),
        "log bytes": ("CloudWatch Logs ingested (EMF included)", "GB", p["logs_ingested_gb"] / 1e9),
    }
    for key, (what, unit, price) in per_day.items():
        if key in day:
            qty = day[key] * m
            lines.append(Line(what, qty / 1e9 if unit == "GB" else qty, unit, qty * price))
    for key, what, price in (
        ("metrics", "CloudWatch custom metrics", p["cloudwatch_metric_month"]),
        ("alarms", "CloudWatch standard alarms (metrics alarmed)", p["cloudwatch_alarm_metric_month"]),
        ("dashboards", "CloudWatch dashboards", p["cloudwatch_dashboard_month"]),
    ):
        if key in day:
            lines.append(Line(what, day[key], "per month", day[key] * price))
    return lines


def total(lines: Iterable[Line]) -> float:
    return sum(line.monthly for line in lines)


def table_text(lines: list[Line]) -> str:
    """The bill as a Markdown table (docs/benchmarks.md)."""
    rows = ["| line | per month | unit | USD / month |", "|---|---:|---|---:|"]
    rows += [f"| {x.what} | {x.quantity:,.2f} | {x.unit} | {x.monthly:.2f} |" for x in lines]
    rows.append(f"| **total** | | | **{total(lines):.2f}** |")
    return "\n".join(rows)
