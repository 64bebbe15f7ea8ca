"""Kubernetes Node objects -> :class:`idleshare.domain.model.Node`.

Accepts what ``kubectl get nodes -o json`` prints (``kind: List``), a ``NodeList`` from the API
(``kind: NodeList``, with ``metadata.resourceVersion`` / ``continue``), or a bare JSON array of Node
objects, as JSON text or already decoded; ``node_from_dict`` takes one decoded Node (the pipeline
reads the API page by page). Real node objects carry a lot the engine never looks at (managedFields,
images, addresses, nodeInfo, ...): the TypedDicts below declare only the fields idleshare reads, so
pydantic-core parses the JSON in Rust and builds Python objects only for those fields.

Decisions:

- types are strict (a number is not a name, ``"true"`` is not a boolean); an item's ``kind``, when
  present, must be ``Node`` (``kubectl get pods -o json`` must not parse as nodes without capacity);
- allocatable values are quantity strings, parsed with lightkube's parser (exact ``Decimal``, which
  rounds up to 1m as Kubernetes does) and turned into ``int`` when whole, else ``Fraction``; a plain
  JSON integer is accepted too (Kubernetes accepts unquoted quantities); floats, negative amounts and
  anything lightkube rejects are errors. Parsed strings are cached: a flavor's nodes share them;
- ``ready`` is the ``Ready`` condition being ``"True"``; no Ready condition means not ready;
- the instance type is ``node.kubernetes.io/instance-type``, else ``beta.kubernetes.io/instance-type``;
- two nodes with one name are an error.

Every problem becomes an :class:`~idleshare.edge.errors.InputError` whose locations name the node by
index and name, e.g. ``items[3] (ip-10-0-1-5).status.allocatable["memory"]: invalid quantity "1.2.3Gi"``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any, Literal, Required

from lightkube.utils.quantity import parse_quantity
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from idleshare.domain.model import Amount, Node, Taint
from idleshare.edge.errors import FieldError, InputError

BETA_INSTANCE_TYPE_LABEL = "beta.kubernetes.io/instance-type"
MAX_ERRORS = 50
"""Errors reported per input; a file where every node is broken should not print 20,000 lines."""
_SHAPE = "expected a List or NodeList (`kubectl get nodes -o json`) or a JSON array of Node objects"

# strict: a JSON number is not a name, "true" is not a bool. extra="ignore": skip everything else.
# TypedDicts, not BaseModels: pydantic-core builds plain dicts for them, several times faster than
# model instances (measured: ~35 us per node less on real-sized nodes).
_CONFIG = ConfigDict(extra="ignore", strict=True, cache_strings="all")

# Only the labels idleshare reads; the other labels are skipped without building a dict of them.
_Labels = TypedDict(
    "_Labels",
    {
        "node.kubernetes.io/instance-type": str,
        "beta.kubernetes.io/instance-type": str,
        "sagemaker.amazonaws.com/node-health-status": str,
    },
    total=False,
)
with_config(_CONFIG)(_Labels)


@with_config(_CONFIG)
class _Metadata(TypedDict, total=False):
    name: Required[Annotated[str, Field(min_length=1)]]
    labels: _Labels | None
    deletionTimestamp: str | None


@with_config(_CONFIG)
class _Taint(TypedDict, total=False):
    key: Required[str]
    effect: Required[str]
    value: str | None


@with_config(_CONFIG)
class _Spec(TypedDict, total=False):
    unschedulable: bool | None
    taints: list[_Taint] | None


@with_config(_CONFIG)
class _Condition(TypedDict):
    type: str
    status: str


@with_config(_CONFIG)
class _Status(TypedDict, total=False):
    # values are checked and parsed below (quantity strings; plain integers are accepted too)
    allocatable: dict[str, Any] | None
    conditions: list[_Condition] | None


@with_config(_CONFIG)
class _Node(TypedDict, total=False):
    kind: Literal["Node"] | None  # absent on the items of an API NodeList
    metadata: Required[_Metadata]
    spec: _Spec | None
    status: _Status | None


@with_config(_CONFIG)
class _NodeList(TypedDict, total=False):
    kind: Literal["List", "NodeList"] | None
    items: list[_Node] | None


# Built once at import: the Lambda pays for it in its cold start, not per call.
_LIST: TypeAdapter[_NodeList] = TypeAdapter(_NodeList)
_ARRAY: TypeAdapter[list[_Node]] = TypeAdapter(list[_Node])
_NODE: TypeAdapter[_Node] = TypeAdapter(_Node)


class _QuantityError(ValueError):
    pass


QUANTITY_MAX = 2**63 - 1
"""Kubernetes quantities are int64-backed: a node reporting more (``10^30``, ``9000Ei``) is garbage."""


@functools.lru_cache(maxsize=4096)
def _parse_quantity_string(text: str) -> Amount:
    if not text.isascii():  # Decimal would read "８" (fullwidth) as 8; Kubernetes accepts ASCII only
        raise _QuantityError(f"invalid quantity {json.dumps(text[:40])}")
    try:
        value = parse_quantity(text)
    except (ValueError, ArithmeticError):
        raise _QuantityError(f"invalid quantity {json.dumps(text)}") from None
    if value is None or not value.is_finite():  # pragma: no cover - the parser rejects these already
        raise _QuantityError(f"invalid quantity {json.dumps(text)}")
    if value < 0:
        raise _QuantityError(f"negative quantity {json.dumps(text)}")
    if value > QUANTITY_MAX:
        raise _QuantityError(f"quantity {json.dumps(text[:40])} out of range (at most 2^63-1)")
    return _exact(value)


def _exact(value: Decimal) -> Amount:
    whole = int(value)
    if value == whole:
        return whole
    return Fraction(value)


def parse_quantity_value(value: object) -> Amount:
    """One allocatable value: a Kubernetes quantity string (or a plain JSON integer) -> exact amount.

    Raises ``ValueError`` with a message naming the value when it is not a valid quantity.
    """
    if isinstance(value, str):
        return _parse_quantity_string(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise _QuantityError(f"negative quantity {value}")
        if value > QUANTITY_MAX:
            raise _QuantityError(f"quantity out of range (at most 2^63-1, got a {value.bit_length()}-bit integer)")
        return value
    raise _QuantityError(f"expected a quantity string, got {_json_type(value)}")


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {json.dumps(value[:40])}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    return type(value).__name__  # pragma: no cover - JSON has no other types


def _to_node(raw: _Node, where: str, errors: list[FieldError]) -> Node | None:
    meta = raw["metadata"]
    labels = meta.get("labels")
    instance_type = health = None
    if labels:
        # the same keys as INSTANCE_TYPE_LABEL, BETA_INSTANCE_TYPE_LABEL, HEALTH_LABEL (tested)
        instance_type = labels.get("node.kubernetes.io/instance-type") or labels.get("beta.kubernetes.io/instance-type")
        health = labels.get("sagemaker.amazonaws.com/node-health-status")
    spec, status = raw.get("spec"), raw.get("status")
    allocatable: dict[str, Amount] = {}
    ready = False
    if status:
        quantities = status.get("allocatable")
        if quantities:
            ok = True
            for resource, value in quantities.items():
                try:
                    allocatable[resource] = parse_quantity_value(value)
                except _QuantityError as exc:
                    ok = False
                    errors.append(FieldError(f"{where}.status.allocatable[{json.dumps(resource)}]", str(exc)))
            if not ok:
                return None
        conditions = status.get("conditions")
        if conditions:
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    taints: tuple[Taint, ...] = ()
    unschedulable = False
    if spec:
        unschedulable = bool(spec.get("unschedulable"))
        raw_taints = spec.get("taints")
        if raw_taints:
            taints = tuple(Taint(t["key"], t["effect"], t.get("value")) for t in raw_taints)
    return Node(
        name=meta["name"],
        instance_type=instance_type,
        allocatable=allocatable,
        ready=ready,
        unschedulable=unschedulable,
        deleting=meta.get("deletionTimestamp") is not None,
        health_status=health,
        taints=taints,
    )


def _convert(items: Sequence[_Node], prefix: str, source: str) -> tuple[Node, ...]:
    errors: list[FieldError] = []
    nodes: list[Node] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        name = item["metadata"]["name"]
        where = f"{prefix}[{index}] ({name})"
        node = _to_node(item, where, errors)
        first = seen.setdefault(name, index)
        if first != index:
            errors.append(FieldError(f"{where}.metadata.name", f"duplicate node name (also {prefix}[{first}])"))
        if node is not None:
            nodes.append(node)
    if errors:
        raise InputError(source, _capped(errors))
    return tuple(nodes)


def _capped(errors: list[FieldError]) -> list[FieldError]:
    if len(errors) <= MAX_ERRORS:
        return errors
    return [*errors[:MAX_ERRORS], FieldError("", f"... and {len(errors) - MAX_ERRORS} more errors")]


def parse_nodes(raw: bytes | str | list[Any] | dict[str, Any], source: str = "nodes") -> tuple[Node, ...]:
    """Nodes from a ``kubectl get nodes -o json`` List, an API NodeList or a JSON array of Nodes.

    ``raw`` is JSON text (``bytes`` / ``str``) or the already decoded value. ``source`` names the
    input in error messages (a file name, say). Raises :class:`InputError` on anything invalid:
    malformed JSON, wrong types, a missing ``metadata.name``, an invalid quantity, duplicate names.
    """
    if isinstance(raw, (bytearray, memoryview)):
        raw = bytes(raw)
    try:
        if isinstance(raw, (bytes, str)):
            if _first_char(raw) == "[":
                return _convert(_ARRAY.validate_json(raw), "items", source)
            listing = _LIST.validate_json(raw)
        elif isinstance(raw, list):
            return _convert(_ARRAY.validate_python(raw), "items", source)
        elif isinstance(raw, dict):
            listing = _LIST.validate_python(raw)
        else:
            raise InputError(
                source, [FieldError("", f"expected JSON text, an object or an array, got {_json_type(raw)}")]
            )
    except ValidationError as exc:
        raise InputError(source, _field_errors(exc, raw, top_is_array=_is_array(raw))) from None
    items = listing.get("items")
    if items is None:
        raise InputError(source, [FieldError("items", f"required field missing: {_SHAPE}")])
    return _convert(items, "items", source)


def node_from_dict(obj: dict[str, Any], source: str = "node") -> Node:
    """One Node object as the Kubernetes API returns it (a decoded dict) -> :class:`Node`."""
    try:
        item = _NODE.validate_python(obj)
    except ValidationError as exc:
        raise InputError(source, _field_errors(exc, obj, top_is_array=False, single=True)) from None
    errors: list[FieldError] = []
    node = _to_node(item, f"node ({item['metadata']['name']})", errors)
    if node is None or errors:
        raise InputError(source, errors)
    return node


# --------------------------------------------------------------------------------------- errors


def _first_char(text: bytes | str) -> str:
    for ch in text[:4096] if isinstance(text, str) else text[:4096].decode("utf-8", "replace"):
        if not ch.isspace() and ch != "\ufeff":
            return ch
    return ""


def _is_array(raw: object) -> bool:
    if isinstance(raw, (bytes, str)):
        return _first_char(raw) == "["
    return isinstance(raw, list)


def _decoded(raw: object) -> object:
    """The input as Python values, to look node names up while reporting (slow path only)."""
    if isinstance(raw, (bytes, str)):
        try:
            return json.loads(raw)
        except ValueError:
            return None
    return raw


def _name_of(item: object) -> str | None:
    if isinstance(item, dict):
        meta = item.get("metadata")
        if isinstance(meta, dict):
            name = meta.get("name")
            if isinstance(name, str) and name:
                return name
    return None


_MAP_FIELDS = frozenset({"allocatable", "labels"})


def _format_loc(loc: Sequence[int | str], items: object, *, top_is_array: bool, single: bool) -> str:
    parts: list[str] = []
    rest = list(loc)
    if single:
        parts.append("node")
        item: object = items
        name = _name_of(item)
        if name:
            parts.append(f" ({name})")
    elif top_is_array or (rest and rest[0] == "items"):
        if not top_is_array:
            rest = rest[1:]
        parts.append("items")
        if rest and isinstance(rest[0], int):
            index = int(rest.pop(0))
            parts.append(f"[{index}]")
            seq = items if top_is_array else (items.get("items") if isinstance(items, dict) else None)
            if isinstance(seq, list) and 0 <= index < len(seq):
                name = _name_of(seq[index])
                if name:
                    parts.append(f" ({name})")
    previous: int | str | None = None
    for element in rest:
        if isinstance(element, int):
            parts.append(f"[{element}]")
        elif previous in _MAP_FIELDS or not element.isidentifier():
            parts.append(f"[{json.dumps(element)}]")
        else:
            parts.append(f".{element}" if parts else element)
        previous = element
    return "".join(parts)


def _field_errors(exc: ValidationError, raw: object, *, top_is_array: bool, single: bool = False) -> list[FieldError]:
    decoded: object = None
    looked_up = False
    errors: list[FieldError] = []
    for error in exc.errors(include_url=False, include_context=True, include_input=True):
        if error["type"] == "json_invalid":
            # pydantic-core: "Invalid JSON: expected value at line 3 column 5"
            errors.append(FieldError("", error["msg"]))
            continue
        if not looked_up:
            decoded, looked_up = _decoded(raw), True
        loc = _format_loc(error["loc"], decoded, top_is_array=top_is_array, single=single)
        errors.append(FieldError(loc, _message(error)))
    return _capped(errors)


def _message(error: Any) -> str:
    kind, loc = error["type"], error["loc"]
    if not loc or loc == ("kind",):
        if kind in ("dict_type", "list_type"):
            return f"{_SHAPE}, got {_json_type(error['input'])}"
        if kind == "literal_error":
            return f"{_SHAPE}, got kind {json.dumps(error['input'])}"
    if kind == "literal_error":
        return f"expected {error['ctx']['expected']}, got {json.dumps(error['input'])}"
    if kind == "missing":
        return "required field missing"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected an object, got {_json_type(error['input'])}"
    if kind == "list_type":
        return f"expected an array, got {_json_type(error['input'])}"
    if kind == "string_type":
        return f"expected a string, got {_json_type(error['input'])}"
    if kind == "bool_type":
        return f"expected true or false, got {_json_type(error['input'])}"
    if kind == "string_too_short":
        return "must not be empty"
    return str(error["msg"])
