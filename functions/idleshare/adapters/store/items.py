"""The item codec: typed, validated reads of stored items (:class:`StoredItem`), values as JSON text, the pool's
compression, ids and the small checks every writer shares."""

from __future__ import annotations

import base64
import json
import re
import secrets
import string
import zlib
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NoReturn

from idleshare.adapters.errors import PermanentError
from idleshare.table import PK, SK

COMPRESS_ABOVE = 350_000  # bytes of pool JSON above which it is stored compressed
MAX_STORED_POOL = 380_000  # bytes of the (possibly compressed) pool text one item may carry
MAX_MESSAGE = 2_000  # apply / read-failure messages are cut to this many characters
ENCODING_JSON = "json"
ENCODING_ZLIB = "zlib+base64"
_ID_ALPHABET = string.ascii_lowercase + string.digits
ID_PATTERN = re.compile(r"^[a-z0-9]{12}$")  # quota and scheduler config ids


def new_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(12))


def clip(value: str, limit: int = MAX_MESSAGE) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def to_json(value: Any, what: str) -> str:
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


def require_name(value: object, what: str, operation: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 255:
        raise PermanentError(f"{what} must be a non-empty string (got {value!r})", operation=operation, status=400)
    return value


def attribute_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Values for TransactWriteItems: plain Python, since the Table resource's ``meta.client`` (de)serializes
    attribute values itself (boto3's resource transformation hooks also apply to its client)."""
    return dict(values)


class StoredItem:
    """Typed, validated access to one item read back; every problem names the item's key."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = raw
        self.key = f"{PK}={raw.get(PK)!r} {SK}={raw.get(SK)!r}"

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


def encode_pool(pool: Mapping[str, Any], cluster_id: str) -> tuple[str, str]:
    text = to_json(pool, f"pool of {cluster_id}")
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
