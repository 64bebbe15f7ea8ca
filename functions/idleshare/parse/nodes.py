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

Every problem becomes an :class:`~idleshare.parse.errors.InputError` whose locations name the node by
index and name, e.g. ``items[3] (ip-10-0-1-5).status.allocatable["memory"]: invalid quantity "1.2.3Gi"``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import msgspec

from idleshare.domain.model import Amount, Node, Taint
from idleshare.domain.quantity import QuantityError, parse_quantity
from idleshare.parse.errors import MAX_ERRORS as MAX_ERRORS  # the cap of every parser's error list
from idleshare.parse.errors import FieldError, InputError, capped

BETA_INSTANCE_TYPE_LABEL = "beta.kubernetes.io/instance-type"
SHAPE_HINT = "expected a List or NodeList (`kubectl get nodes -o json`) or a JSON array of Node objects"


# The fields idleshare reads, as msgspec Structs: msgspec decodes the JSON in C, skips everything
# else (managedFields, images, annotations, ...: ~90% of a real node's bytes) without building Python
# objects for it, and checks types strictly (a number is not a name, "true" is not a boolean). Any
# refusal is reported by ``idleshare.parse.node_report`` (pydantic, every field named), loaded only then.
class _Labels(msgspec.Struct):
    # a label present is a string (null is refused, as pydantic's report does); UNSET: absent
    instance_type: str | msgspec.UnsetType = msgspec.field(
        default=msgspec.UNSET, name="node.kubernetes.io/instance-type"
    )
    beta_instance_type: str | msgspec.UnsetType = msgspec.field(
        default=msgspec.UNSET, name="beta.kubernetes.io/instance-type"
    )
    health: str | msgspec.UnsetType = msgspec.field(
        default=msgspec.UNSET, name="sagemaker.amazonaws.com/node-health-status"
    )


class _Metadata(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    labels: _Labels | None = None
    deletionTimestamp: str | None = None


class _Taint(msgspec.Struct):
    key: str
    effect: str
    value: str | None = None


class _Spec(msgspec.Struct):
    unschedulable: bool | None = None
    taints: list[_Taint] | None = None


class _Condition(msgspec.Struct):
    type: str
    status: str


class _Status(msgspec.Struct):
    allocatable: dict[str, Any] | None = None  # values checked and parsed below, each error named
    conditions: list[_Condition] | None = None


class _Node(msgspec.Struct):
    metadata: _Metadata
    kind: Literal["Node"] | None = None  # absent on the items of an API NodeList
    spec: _Spec | None = None
    status: _Status | None = None


class _NodeList(msgspec.Struct):
    kind: Literal["List", "NodeList"] | None = None
    items: list[_Node] | None = None


_LIST_DECODER = msgspec.json.Decoder(_NodeList)
_ARRAY_DECODER = msgspec.json.Decoder(list[_Node])


class _QuantityError(ValueError):
    pass


QUANTITY_MAX = 2**63 - 1
"""Kubernetes quantities are int64-backed: a node reporting more (``10^30``, ``9000Ei``) is garbage."""


@functools.lru_cache(maxsize=4096)
def _parse_quantity_string(text: str) -> Amount:
    try:
        value = parse_quantity(text)
    except QuantityError:
        raise _QuantityError(f"invalid quantity {json.dumps(text[:40])}") from None
    if value < 0:
        raise _QuantityError(f"negative quantity {json.dumps(text)}")
    if value > QUANTITY_MAX:
        raise _QuantityError(f"quantity {json.dumps(text[:40])} out of range (at most 2^63-1)")
    return value


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
    raise _QuantityError(f"expected a quantity string, got {json_type(value)}")


def json_type(value: object) -> str:
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
    meta = raw.metadata
    labels = meta.labels
    instance_type = health = None
    if labels is not None:
        instance_type = labels.instance_type or labels.beta_instance_type or None
        health = labels.health if labels.health is not msgspec.UNSET else None
    spec, status = raw.spec, raw.status
    allocatable: dict[str, Amount] = {}
    ready = False
    if status is not None:
        quantities = status.allocatable
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
        conditions = status.conditions
        if conditions:
            ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    taints: tuple[Taint, ...] = ()
    unschedulable = False
    if spec is not None:
        unschedulable = bool(spec.unschedulable)
        if spec.taints:
            taints = tuple(Taint(t.key, t.effect, t.value) for t in spec.taints)
    return Node(
        name=meta.name,
        instance_type=instance_type,
        allocatable=allocatable,
        ready=ready,
        unschedulable=unschedulable,
        deleting=meta.deletionTimestamp is not None,
        health_status=health,
        taints=taints,
    )


def _convert(items: Sequence[_Node], prefix: str, source: str) -> tuple[Node, ...]:
    errors: list[FieldError] = []
    nodes: list[Node] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        name = item.metadata.name
        where = f"{prefix}[{index}] ({name})"
        node = _to_node(item, where, errors)
        first = seen.setdefault(name, index)
        if first != index:
            errors.append(FieldError(f"{where}.metadata.name", f"duplicate node name (also {prefix}[{first}])"))
        if node is not None:
            nodes.append(node)
    if errors:
        raise InputError(source, capped(errors))
    return tuple(nodes)


def parse_nodes(raw: bytes | str | list[Any] | dict[str, Any], source: str = "nodes") -> tuple[Node, ...]:
    """Nodes from a ``kubectl get nodes -o json`` List, an API NodeList or a JSON array of Nodes.

    ``raw`` is JSON text (``bytes`` / ``str``) or the already decoded value. ``source`` names the
    input in error messages (a file name, say). Raises :class:`InputError` on anything invalid:
    malformed JSON, wrong types, a missing ``metadata.name``, an invalid quantity, duplicate names.
    """
    if isinstance(raw, (bytearray, memoryview)):
        raw = bytes(raw)
    items: list[_Node] | None
    try:
        if isinstance(raw, (bytes, str)):
            items = _ARRAY_DECODER.decode(raw) if first_char(raw) == "[" else _LIST_DECODER.decode(raw).items
        elif isinstance(raw, list):
            items = msgspec.convert(raw, list[_Node])
        elif isinstance(raw, dict):
            items = msgspec.convert(raw, _NodeList).items
        else:
            raise InputError(
                source, [FieldError("", f"expected JSON text, an object or an array, got {json_type(raw)}")]
            )
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise InputError(source, _report(raw, exc)) from None
    if items is None:
        raise InputError(source, [FieldError("items", f"required field missing: {SHAPE_HINT}")])
    return _convert(items, "items", source)


def node_from_dict(obj: dict[str, Any], source: str = "node") -> Node:
    """One Node object as the Kubernetes API returns it (a decoded dict) -> :class:`Node`."""
    try:
        item = msgspec.convert(obj, _Node)
    except msgspec.ValidationError as exc:
        raise InputError(source, _report(obj, exc, single=True)) from None
    errors: list[FieldError] = []
    node = _to_node(item, f"node ({item.metadata.name})", errors)
    if node is None or errors:
        raise InputError(source, errors)
    return node


def cluster_node(obj: object, position: int) -> tuple[Node, InputError | None]:
    """A Node object as read from the cluster. One that does not parse is not a cluster failure: it is an
    :attr:`~idleshare.domain.model.ExclusionReason.UNREADABLE` node that counts as nothing, named by its
    ``metadata.name`` when that is a string (else ``<unreadable node #position>``), returned with its error."""
    try:
        if not isinstance(obj, dict):
            raise InputError(f"node #{position}", [FieldError("", "a Node object is required")])
        return node_from_dict(obj, source=f"node #{position}"), None
    except InputError as exc:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            name = f"<unreadable node #{position}>"
        return Node(name=name, instance_type=None, allocatable={}, unreadable=True), exc


def _report(raw: object, exc: Exception, *, single: bool = False) -> list[FieldError]:
    """Every bad field of a document msgspec refused (pydantic names them all; loaded only now)."""
    from idleshare.parse import node_report

    errors = node_report.field_errors(raw, single=single)
    return errors or [FieldError("", str(exc))]  # pydantic found nothing: msgspec's own message


def first_char(text: bytes | str) -> str:
    for ch in text[:4096] if isinstance(text, str) else text[:4096].decode("utf-8", "replace"):
        if not ch.isspace() and ch != "\ufeff":
            return ch
    return ""
