"""The full error report for a NodeList the fast decoder refused (``idleshare.parse.nodes``).

``idleshare.parse.nodes`` decodes with msgspec, which stops at the first problem. When it refuses a
document, this module validates the same document with pydantic (strict TypedDicts declaring the
fields idleshare reads) to name every bad field, node by index and name. Imported only then: pydantic
costs the ``idleshare plan`` command and the recompute Lambda nothing on valid input.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Required

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from idleshare.parse.errors import FieldError, capped
from idleshare.parse.nodes import SHAPE_HINT, first_char, json_type

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


_LIST: TypeAdapter[_NodeList] = TypeAdapter(_NodeList)
_ARRAY: TypeAdapter[list[_Node]] = TypeAdapter(list[_Node])
_NODE: TypeAdapter[_Node] = TypeAdapter(_Node)


def field_errors(raw: object, *, single: bool = False) -> list[FieldError]:
    """Every problem pydantic finds in ``raw`` (JSON text or decoded), located; [] when it finds none."""
    top_is_array = not single and _is_array(raw)
    adapter: TypeAdapter[Any] = _NODE if single else (_ARRAY if top_is_array else _LIST)
    try:
        if isinstance(raw, (bytes, str)):
            adapter.validate_json(raw)
        else:
            adapter.validate_python(raw)
    except ValidationError as exc:
        return _field_errors(exc, raw, top_is_array=top_is_array, single=single)
    return []


def _is_array(raw: object) -> bool:
    if isinstance(raw, (bytes, str)):
        return first_char(raw) == "["
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
    return capped(errors)


# pydantic's error type -> what the field should have been
_EXPECTED = {
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "an array",
    "string_type": "a string",
    "bool_type": "true or false",
}


def _message(error: Any) -> str:
    kind, loc = error["type"], error["loc"]
    if not loc or loc == ("kind",):
        if kind in ("dict_type", "list_type"):
            return f"{SHAPE_HINT}, got {json_type(error['input'])}"
        if kind == "literal_error":
            return f"{SHAPE_HINT}, got kind {json.dumps(error['input'])}"
    if kind == "literal_error":
        return f"expected {error['ctx']['expected']}, got {json.dumps(error['input'])}"
    if kind == "missing":
        return "required field missing"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {json_type(error['input'])}"
    if kind == "string_too_short":
        return "must not be empty"
    return str(error["msg"])
