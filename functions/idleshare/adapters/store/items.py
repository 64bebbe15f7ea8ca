"""The item codec: typed, validated reads of stored items (:class:`StoredItem`), values as JSON text, large
documents (compressed, split into parts when need be: :func:`pack`, :func:`part_items`, :func:`unpack`), the size
of an item as DynamoDB counts it, ids and the small checks every writer shares.

A large document (the pool, a history entry, the watcher's node views) is stored as zlib-compressed JSON in a
binary attribute: in the item itself when the compressed bytes fit in :data:`PART_SIZE`, else split into parts of
:data:`PART_SIZE` bytes, each its own item (``PART#<owner sk>#<index:03d>``, :func:`idleshare.table.part_sk`) written
in the same transaction as the item that references them. The owner holds ``<attr>_parts`` (how many) and
``<attr>_sha256`` (of the whole compressed document); each part holds ``data``, ``part_of`` (that digest) and its
``index``, so a missing, stale or corrupt part is detected on read. Every item written stays under
:data:`ITEM_BUDGET` by construction: the parts' size, plus bounded side attributes (:data:`MAX_SIDE_JSON`,
:data:`MAX_MESSAGE`)."""

from __future__ import annotations

import hashlib
import json
import lzma
import re
import secrets
import string
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NoReturn

from idleshare.errors import PermanentError
from idleshare.table import PK, SK, part_sk

COMPRESS_ABOVE = 1_000  # bytes of pool JSON above which it is stored compressed (binary): a 5k-node pool's
# 58 KB of JSON is ~6 KB compressed, and it is written twice (POOL, HISTORY) in a transaction per change: WRU per KB
ITEM_LIMIT = 409_600  # DynamoDB's item size limit (400 KB), attribute names and values
ITEM_BUDGET = 400_000  # every item this store writes stays under this (checked before each write)
PART_SIZE = 300_000  # bytes of compressed document one item carries (inline, or per part item)
MAX_SIDE_JSON = 32_000  # bytes of JSON of a side attribute beside a document (a pool's extra, its outbox)
TRANSACTION_LIMIT = 4_000_000  # TransactWriteItems: at most 4 MB of items (and 100 of them) in one call
MAX_POOL_PARTS = 6  # the pool and its history entry each hold the parts: 2 x 6 x 300 KB = 3.6 MB per transaction
MAX_WATCH_PARTS = 12  # the watcher's node views, once per transaction: 12 x 300 KB = 3.6 MB
MAX_MESSAGE = 2_000  # apply / read-failure messages are cut to this many characters
ENCODING_JSON = "json"  # pool: JSON text
ENCODING_ZLIB_BINARY = "zlib"  # pool: zlib, binary, inline or in parts
ENCODING_XZ_BINARY = "xz"  # pool: xz (LZMA), binary, inline or in parts: half zlib's size on a pool document, whose
# POOL and HISTORY items are written (and the POOL item updated) on every change, each billed per KB
XZ_MAGIC = b"\xfd7zXZ\x00"
XZ_PRESET = 6 | lzma.PRESET_EXTREME
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

    def get_bytes(self, attr: str) -> bytes:
        value = self.raw.get(attr)
        data = getattr(value, "value", value)  # boto3's Binary
        if not isinstance(data, bytes | bytearray):
            self.corrupt(f"attribute {attr!r} must be binary (got {type(value).__name__})")
        return bytes(data)

    def part_count(self, attr: str, limit: int) -> int:
        """How many parts hold ``attr``'s document (0: inline)."""
        if self.raw.get(f"{attr}_parts") is None:
            return 0
        count = self.get_int(f"{attr}_parts", minimum=1)
        if count > limit:
            self.corrupt(f"attribute '{attr}_parts' must be <= {limit} (got {count})")
        return count

    def document(self, attr: str, blob: bytes) -> dict[str, Any]:
        """A compressed document's JSON object (``blob``: the inline attribute or the parts joined)."""
        try:
            value = json.loads(lzma.decompress(blob) if blob.startswith(XZ_MAGIC) else zlib.decompress(blob))
        except (ValueError, zlib.error, lzma.LZMAError) as exc:
            self.corrupt(f"attribute {attr!r} is not zlib- or xz-compressed JSON ({exc})")
        if not isinstance(value, dict):
            self.corrupt(f"attribute {attr!r} must hold a JSON object")
        return value

    def pool(self, parts: bytes | None = None) -> dict[str, Any]:
        """The pool document: JSON text, or zlib or xz binary inline or (``parts``: the parts joined,
        :func:`unpack`) in part items; any other ``pool_encoding`` is corrupt."""
        encoding = self.get_str("pool_encoding", ENCODING_JSON)
        if encoding in (ENCODING_ZLIB_BINARY, ENCODING_XZ_BINARY):
            return self.document("pool", parts if parts is not None else self.get_bytes("pool"))
        if encoding != ENCODING_JSON:
            self.corrupt(f"unknown pool_encoding {encoding!r}")
        text = self.get_str("pool")
        try:
            value = json.loads(text)
        except ValueError as exc:
            self.corrupt(f"attribute 'pool' is not JSON: {exc}")
        if not isinstance(value, dict):
            self.corrupt("attribute 'pool' must hold a JSON object")
        return value


@dataclass(frozen=True)
class Packed:
    """A document as stored: ``inline`` (JSON text or compressed bytes, in the owner item) or ``parts``."""

    inline: str | bytes | None
    parts: tuple[bytes, ...] = ()
    sha256: str = ""
    encoding: str = ENCODING_ZLIB_BINARY
    """How the bytes are compressed (:data:`ENCODING_ZLIB_BINARY` or :data:`ENCODING_XZ_BINARY`); JSON text when
    ``inline`` is a string."""

    def owner_attributes(self, attr: str) -> dict[str, Any]:
        """What the owner item holds: ``attr`` inline, or ``<attr>_parts`` and ``<attr>_sha256``."""
        if not self.parts:
            return {attr: self.inline}
        return {f"{attr}_parts": len(self.parts), f"{attr}_sha256": self.sha256}


def pack(
    document: Mapping[str, Any], what: str, *, max_parts: int, operation: str, text_below: int = 0, xz: bool = False
) -> Packed:
    """``document`` as stored: JSON text when at most ``text_below`` bytes, else zlib-compressed (``xz``: xz), inline
    when the compressed bytes fit in :data:`PART_SIZE`, else in parts; more than ``max_parts`` parts is refused (413).
    The limits apply to the stored (compressed) size."""
    text = to_json(document, what)
    raw = text.encode("utf-8")
    if len(raw) <= text_below:
        return Packed(text)
    blob = lzma.compress(raw, preset=XZ_PRESET) if xz else zlib.compress(raw, 6)
    encoding = ENCODING_XZ_BINARY if xz else ENCODING_ZLIB_BINARY
    if len(blob) <= PART_SIZE:
        return Packed(blob, encoding=encoding)
    parts = tuple(blob[i : i + PART_SIZE] for i in range(0, len(blob), PART_SIZE))
    if len(parts) > max_parts:
        raise PermanentError(
            f"{what} is too large to store: {len(raw)} bytes of JSON, {len(blob)} compressed "
            f"(at most {max_parts * PART_SIZE}: {max_parts} parts of {PART_SIZE} bytes, so that one transaction "
            f"stays under DynamoDB's {TRANSACTION_LIMIT // 1_000_000} MB)",
            operation=operation,
            status=413,
        )
    return Packed(None, parts, hashlib.sha256(blob).hexdigest(), encoding)


def part_items(pk: str, owner_sk: str, packed: Packed, **attributes: Any) -> list[dict[str, Any]]:
    """The part items of ``packed`` (none when inline), each with ``attributes`` (a TTL, say)."""
    return [
        {PK: pk, SK: part_sk(owner_sk, i), "data": data, "part_of": packed.sha256, "index": i, **attributes}
        for i, data in enumerate(packed.parts)
    ]


def unpack(owner: StoredItem, attr: str, count: int, raws: Iterable[Mapping[str, Any]]) -> bytes | None:
    """The compressed document the ``count`` parts ``raws`` hold (read by the owner's parts prefix), or None when a
    part is missing or does not belong to the owner's document (a concurrent overwrite, or an expired entry: the
    caller decides). A part that is there but unreadable is corrupt."""
    expected = owner.get_str(f"{attr}_sha256")
    found: dict[int, bytes] = {}
    for raw in raws:
        part = StoredItem(raw)
        index = part.get_int("index")
        if index >= count or part.raw.get("part_of") != expected:
            continue
        found[index] = part.get_bytes("data")
    if len(found) != count:
        return None
    blob = b"".join(found[i] for i in range(count))
    if hashlib.sha256(blob).hexdigest() != expected:
        owner.corrupt(f"the {count} parts of attribute {attr!r} do not match its digest {expected}")
    return blob


def attribute_size(value: Any) -> int:
    """The bytes DynamoDB counts for one attribute value (an upper bound for numbers)."""
    data = getattr(value, "value", value)
    if isinstance(data, str):
        return len(data.encode("utf-8"))
    if isinstance(data, bytes | bytearray):
        return len(data)
    if data is None or isinstance(data, bool):
        return 1
    if isinstance(data, int | float | Decimal):
        return 1 + (len(str(abs(data)).replace(".", "").strip("0")) + 1) // 2
    if isinstance(data, Mapping):
        return 3 + sum(len(str(k).encode()) + attribute_size(v) + 1 for k, v in data.items())
    if isinstance(data, list | tuple | set | frozenset):
        return 3 + sum(attribute_size(v) + 1 for v in data)
    raise TypeError(f"no DynamoDB size for {type(value).__name__}")


def item_size(item: Mapping[str, Any]) -> int:
    """An item's size as DynamoDB counts it against the 400 KB limit: every attribute name and value."""
    return sum(len(name.encode("utf-8")) + attribute_size(value) for name, value in item.items())


def check_item_size(item: Mapping[str, Any], operation: str) -> None:
    """Refuse (before writing) an item at or above :data:`ITEM_BUDGET`: kept by construction, checked anyway."""
    size = item_size(item)
    if size >= ITEM_BUDGET:
        raise PermanentError(
            f"{operation}: item {PK}={item.get(PK)!r} {SK}={item.get(SK)!r} would take {size} bytes "
            f"(at most {ITEM_BUDGET}; DynamoDB's limit is {ITEM_LIMIT})",
            operation=operation,
            status=413,
        )


def side_json(value: Any, what: str, operation: str) -> str:
    """A bounded JSON attribute beside a document (:data:`MAX_SIDE_JSON` bytes): a pool's extra, its outbox."""
    text = to_json(value, what)
    size = len(text.encode("utf-8"))
    if size > MAX_SIDE_JSON:
        raise PermanentError(
            f"{what} is too large to store: {size} bytes of JSON (at most {MAX_SIDE_JSON})",
            operation=operation,
            status=413,
        )
    return text
