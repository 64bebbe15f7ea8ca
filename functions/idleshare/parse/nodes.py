"""Kubernetes Node objects -> :class:`idleshare.domain.model.Node`: the one node schema.

Accepts what ``kubectl get nodes -o json`` prints (``kind: List``), a ``NodeList`` from the API
(``kind: NodeList``, with ``metadata.resourceVersion`` / ``continue``), or a bare JSON array of Node
objects, as JSON text or already decoded (``parse_nodes``: ``idleshare plan``); ``node_from_dict`` and
``cluster_node`` take one decoded Node (the recompute reads the API page by page), ``watched_node`` one from the
node watcher's watch (``service/watcher.node_view``: the watcher compares what the engine reads). Real node objects carry a
lot the engine never looks at (managedFields, images, addresses, nodeInfo, ...): the Structs below declare
only the fields idleshare reads, so msgspec decodes the JSON in C and skips everything else (~90% of a real
node's bytes) without building Python objects for it.

Decisions:

- types are strict (a number is not a name, ``"true"`` is not a boolean); an item's ``kind``, when
  present, must be ``Node`` (``kubectl get pods -o json`` must not parse as nodes without capacity);
  unknown members are ignored;
- allocatable values are quantity strings, read by :func:`idleshare.domain.quantity.parse_quantity` (exact,
  rounded up to 1m as Kubernetes does), an ``int`` when whole, else a ``Fraction``; a plain JSON integer is
  accepted too (Kubernetes accepts unquoted quantities); floats, negative amounts, amounts over 2^63-1 and
  anything the quantity grammar refuses are errors, and so is a fraction of an extended resource (``800m`` or
  ``0.5`` of ``nvidia.com/gpu``: the API server refuses one on a Node). Parsed strings are cached: a flavor's nodes
  share them;
- ``ready`` is the ``Ready`` condition being ``"True"``; no Ready condition means not ready, and
  ``ready_condition`` False (``NoReadyCondition``, not ``NotReady``);
- the instance type is ``node.kubernetes.io/instance-type``, else ``beta.kubernetes.io/instance-type``;
- ``nvidia.com/mig.config.state`` (NVIDIA's MIG manager) is read as written, absent -> None;
- two nodes with one name are an error.

msgspec stops at the first problem; a document it refuses is read again item by item, each item walked
against the same Structs (:func:`idleshare.parse.schema.convert`), so every bad node is named. Every problem
becomes an :class:`~idleshare.parse.errors.InputError` whose locations name the node by index and name, e.g.
``items[3] (ip-10-0-1-5).status.allocatable["memory"]: invalid quantity "1.2.3Gi"``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec

from idleshare.domain.model import (
    BETA_INSTANCE_TYPE_LABEL,
    HEALTH_LABEL,
    INSTANCE_TYPE_LABEL,
    MIG_CONFIG_STATE_LABEL,
    Amount,
    Node,
    Taint,
)
from idleshare.domain.quantity import QuantityError, parse_quantity
from idleshare.parse import schema
from idleshare.parse.errors import FieldError, InputError, capped
from idleshare.parse.schema import NULL, show

SHAPE_HINT = "expected a List or NodeList (`kubectl get nodes -o json`) or a JSON array of Node objects"


# -- the schema: the fields idleshare reads -------------------------------------------------------------
_READ_LABELS = (INSTANCE_TYPE_LABEL, BETA_INSTANCE_TYPE_LABEL, HEALTH_LABEL, MIG_CONFIG_STATE_LABEL)
"""The labels the eligibility rules read: each, when present, must be a string (null is refused). The others are
kept as they are for headroom's node selectors (a value that is not a string matches no selector)."""


class _Metadata(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    labels: Any = None
    """An object of strings, checked in _to_node (each error named), not converted by msgspec: a real node has ~35
    labels, and the node watcher reads every node of a 100k-node cluster."""
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
    allocatable: dict[str, Any] | None = None  # each value read by parse_quantity_value, each error named
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


# -- quantities ------------------------------------------------------------------------------------------
QUANTITY_MAX = 2**63 - 1
"""Kubernetes quantities are int64-backed: a node reporting more (``10^30``, ``9000Ei``) is garbage."""


@functools.lru_cache(maxsize=4096)
def _parse_quantity_string(text: str) -> Amount:
    try:
        value = parse_quantity(text)
    except QuantityError:
        raise ValueError(f"invalid quantity {show(text)}") from None
    if value < 0:
        raise ValueError(f"negative quantity {show(text)}")
    if value > QUANTITY_MAX:
        raise ValueError(f"quantity {show(text)} out of range (at most 2^63-1)")
    return value


def parse_quantity_value(value: object) -> Amount:
    """One allocatable value: a Kubernetes quantity string (or a plain JSON integer) -> exact amount.

    Raises ``ValueError`` with a message naming the value when it is not a valid quantity.
    """
    if isinstance(value, str):
        return _parse_quantity_string(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"negative quantity {value}")
        if value > QUANTITY_MAX:
            raise ValueError(f"quantity out of range (at most 2^63-1, got a {value.bit_length()}-bit integer)")
        return value
    raise ValueError(f"must be a quantity string (got {show(value)})")


# -- reading ---------------------------------------------------------------------------------------------
def _to_node(raw: _Node, where: str, errors: list[FieldError]) -> Node | None:
    meta = raw.metadata
    labels = _labels(meta.labels, where, errors)
    if labels is None:
        return None
    read, kept = labels
    spec, status = raw.spec, raw.status
    allocatable: dict[str, Amount] = {}
    ready = ready_condition = False
    if status is not None:
        parsed = _allocatable(status.allocatable, where, errors)
        if parsed is None:
            return None
        allocatable = parsed
        conditions = status.conditions
        if conditions:
            ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
            ready_condition = any(c.type == "Ready" for c in conditions)
    taints: tuple[Taint, ...] = ()
    unschedulable = False
    if spec is not None:
        unschedulable = bool(spec.unschedulable)
        if spec.taints:
            taints = tuple(Taint(t.key, t.effect, t.value) for t in spec.taints)
    return Node(
        name=meta.name,
        instance_type=read.get(INSTANCE_TYPE_LABEL) or read.get(BETA_INSTANCE_TYPE_LABEL) or None,
        allocatable=allocatable,
        ready=ready,
        ready_condition=ready_condition,
        unschedulable=unschedulable,
        deleting=meta.deletionTimestamp is not None,
        health_status=read.get(HEALTH_LABEL),
        taints=taints,
        mig_config_state=read.get(MIG_CONFIG_STATE_LABEL),
        labels=kept,
    )


def _labels(labels: object, where: str, errors: list[FieldError]) -> tuple[dict[str, str], dict[str, str]] | None:
    """A node's labels as (the ones idleshare reads, every string one kept), or None after naming each problem."""
    if labels is not None and not isinstance(labels, dict):
        errors.append(FieldError(f"{where}.metadata.labels", f"must be an object (got {show(labels)})"))
        return None
    if not labels:
        return {}, {}
    read: dict[str, str] = {}
    bad = False
    for key in _READ_LABELS:
        if key in labels:
            value = labels[key]
            if not isinstance(value, str):
                bad = True
                problem = NULL if value is None else f"must be a string (got {show(value)})"
                errors.append(FieldError(f"{where}.metadata.labels[{json.dumps(key)}]", problem))
            else:
                read[key] = value
    if bad:
        return None
    # in real nodes every key and value is a string: then copied whole, in C
    same = set(map(type, labels)) <= {str} and set(map(type, labels.values())) <= {str}
    kept = dict(labels) if same else {k: v for k, v in labels.items() if type(k) is str and type(v) is str}
    return read, kept


@functools.lru_cache(maxsize=1024)
def is_extended_resource(resource: str) -> bool:
    """Kubernetes' extended resources (``nvidia.com/gpu``, ``aws.amazon.com/neuron``, a MIG profile, ...): a name with
    a domain that is not ``kubernetes.io``'s, nor a ``requests.`` quota name. The API server accepts only whole
    numbers of them (``IsIntegerResourceName``); cpu, memory, ``hugepages-*`` and the like may be fractional."""
    domain, slash, _ = resource.partition("/")
    if not slash or resource.startswith("requests."):
        return False
    return domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


@functools.lru_cache(maxsize=8192)
def _allocatable_entry(resource: str, text: str) -> Amount:
    """One allocatable string of ``resource``, parsed (cached: a flavor's nodes share them); ``ValueError`` when it is
    no quantity or a fraction of an extended resource."""
    value = _parse_quantity_string(text)
    if type(value) is not int and is_extended_resource(resource):
        raise ValueError(_fraction_problem(text))
    return value


def _fraction_problem(value: object) -> str:
    return (
        f"must be a whole number (got {show(value)}): a device count; the API server refuses a fraction of an "
        "extended resource"
    )


def _allocatable(quantities: dict[str, Any] | None, where: str, errors: list[FieldError]) -> dict[str, Amount] | None:
    """A node's ``status.allocatable`` parsed, or None after naming each value that is not a quantity, or a fraction
    of an extended resource (``0.5`` GPUs, ``800m`` Neuron devices)."""
    if not quantities:
        return {}
    allocatable: dict[str, Amount] = {}
    try:  # the common case, in C: every value a string, each parse cached (a flavor's nodes share them)
        if set(map(type, quantities.values())) <= {str}:
            return dict(zip(quantities, map(_allocatable_entry, quantities, quantities.values()), strict=True))
    except ValueError:
        pass
    ok = True
    for resource, value in quantities.items():
        at = f"{where}.status.allocatable[{json.dumps(resource)}]"
        try:
            amount = parse_quantity_value(value)
        except ValueError as exc:
            ok = False
            errors.append(FieldError(at, str(exc)))
            continue
        if type(amount) is not int and is_extended_resource(resource):
            ok = False
            errors.append(FieldError(at, _fraction_problem(value)))
        allocatable[resource] = amount
    return allocatable if ok else None


def _checked(item: object, where: str, errors: list[FieldError]) -> _Node | None:
    """A decoded item as a ``_Node``, or None after naming each of its problems (at ``where``)."""
    try:
        return schema.convert(item, _Node, where)
    except InputError as exc:
        errors += [FieldError(where + _below(e.loc), e.message) for e in exc.errors]
        return None


def _below(loc: str) -> str:
    """A path inside an item, after the item's place."""
    return "" if not loc else (loc if loc[0] == "[" else f".{loc}")


def _where(prefix: str, index: int | None, name: object) -> str:
    """``items[3] (ip-10-0-1-5)``: the item's place, and its name when it has one."""
    at = prefix if index is None else f"{prefix}[{index}]"
    return f"{at} ({name})" if isinstance(name, str) and name else at


def _name_of(item: object) -> object:
    meta = item.get("metadata") if isinstance(item, dict) else None
    return meta.get("name") if isinstance(meta, dict) else None


def _convert(items: Sequence[_Node | object], prefix: str, source: str) -> tuple[Node, ...]:
    """The nodes of ``items``: decoded ``_Node`` s, or (a document msgspec refused) decoded JSON values,
    each checked here so that every bad one is named."""
    errors: list[FieldError] = []
    nodes: list[Node] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        name = item.metadata.name if isinstance(item, _Node) else _name_of(item)
        where = _where(prefix, index, name)
        raw = item if isinstance(item, _Node) else _checked(item, where, errors)
        node = _to_node(raw, where, errors) if raw is not None else None
        first = seen.setdefault(name, index) if isinstance(name, str) and name else index
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
    items: Sequence[_Node | object] | None
    try:
        if isinstance(raw, (bytes, str)):
            items = _ARRAY_DECODER.decode(raw) if _first_char(raw) == "[" else _LIST_DECODER.decode(raw).items
        elif isinstance(raw, list):
            items = msgspec.convert(raw, list[_Node])
        elif isinstance(raw, dict):
            items = msgspec.convert(raw, _NodeList).items
        else:
            raise InputError(source, [FieldError("", f"expected JSON text, an object or an array, got {show(raw)}")])
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        items = _refused_items(raw, source)
    if items is None:
        raise InputError(source, [FieldError("items", f"required field missing: {SHAPE_HINT}")])
    return _convert(items, "items", source)


def _refused_items(raw: object, source: str) -> list[object]:
    """The items of a document msgspec refused, as decoded JSON values for :func:`_convert` to check one by one;
    ``InputError`` if the document itself is not JSON, not a list of nodes, or its envelope is wrong."""
    document = raw
    if isinstance(raw, (bytes, str)):
        try:
            document = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise InputError(source, [FieldError("", _json_problem(raw, str(exc)))]) from None
        except msgspec.ValidationError as exc:  # a number beyond a double's range
            problem, _, at = str(exc).partition(" - at `$")
            raise InputError(source, [FieldError("", f"invalid JSON: {problem.lower()} at {at.rstrip('`')}")]) from None
        except RecursionError:
            raise InputError(source, [FieldError("", "invalid JSON: nested too deeply")]) from None
    if isinstance(document, list):
        return document
    if not isinstance(document, dict):
        raise InputError(source, [FieldError("", f"{SHAPE_HINT}, got {show(document)}")])
    items = document.get("items")
    envelope = {**document, "items": []} if isinstance(items, list) else document
    schema.convert(envelope, _NodeList, source)  # raises naming ``kind`` / ``items``
    if not isinstance(items, list):
        raise InputError(source, [FieldError("items", f"required field missing: {SHAPE_HINT}")])
    return items


def _json_problem(raw: bytes | str, problem: str) -> str:
    """msgspec's reason JSON text is not JSON, with the line and column it refers to."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    reason, _, byte = problem.removeprefix("JSON is malformed: ").partition(" (byte ")
    at = int(byte.rstrip(")")) if byte else len(data)
    if not byte:
        reason = "unexpected end of input" if "truncated" in reason else reason
    line = data.count(b"\n", 0, at) + 1
    column = at - (data.rfind(b"\n", 0, at) + 1) + 1
    return f"invalid JSON at line {line} column {column}: {reason}"


def node_from_dict(obj: dict[str, Any], source: str = "node") -> Node:
    """One Node object as the Kubernetes API returns it (a decoded dict) -> :class:`Node`."""
    errors: list[FieldError] = []
    where = _where("node", None, _name_of(obj))
    try:
        item: _Node | None = msgspec.convert(obj, _Node)
    except msgspec.ValidationError:
        item = _checked(obj, where, errors)
    node = _to_node(item, where, errors) if item is not None else None
    if node is None or errors:
        raise InputError(source, errors)
    return node


@dataclass(frozen=True, slots=True)
class WatchedNode:
    """A Node object as the node watcher keeps it: the engine's :class:`Node`, read by the same decoder, plus two
    members as the object wrote them (what the watcher stores per node, so views saved earlier still compare)."""

    node: Node
    ready_status: str | None = None
    """The last ``Ready`` condition's ``status`` as written (``True``, ``False``, ``Unknown``; None without one):
    the engine reads ``node.ready`` (any ``Ready`` condition ``True``) from these conditions."""
    allocatable: dict[str, str] | None = None
    """``status.allocatable`` as written, sorted by resource; the engine's ``node.allocatable`` is these parsed.
    None for an unreadable node."""


def watched_node(obj: object) -> WatchedNode:
    """A Node object from a watch event or a list, read as :func:`cluster_node` reads it (one that does not parse
    is an unreadable Node, its errors not named: the recompute names them)."""
    try:
        item = msgspec.convert(obj, _Node) if isinstance(obj, dict) else None
    except msgspec.ValidationError:
        item = None
    node = _to_node(item, "node", []) if item is not None else None
    if item is None or node is None:
        name = _name_of(obj)
        unreadable = Node(
            name=name if isinstance(name, str) else "", instance_type=None, allocatable={}, unreadable=True
        )
        return WatchedNode(unreadable)
    status = item.status
    ready_status = None
    allocatable: dict[str, str] = {}
    if status is not None:
        for condition in status.conditions or ():
            if condition.type == "Ready":
                ready_status = condition.status
        written = status.allocatable
        if written:
            same = set(map(type, written.values())) <= {str}
            allocatable = dict(sorted(written.items())) if same else {k: str(v) for k, v in sorted(written.items())}
    return WatchedNode(node, ready_status, allocatable)


def cluster_node(obj: object, position: int) -> tuple[Node, InputError | None]:
    """A Node object as read from the cluster. One that does not parse is not a cluster failure: it is an
    :attr:`~idleshare.domain.model.ExclusionReason.UNREADABLE` node that counts as nothing, named by its
    ``metadata.name`` when that is a string (else ``<unreadable node #position>``), returned with its error."""
    try:
        if not isinstance(obj, dict):
            raise InputError(f"node #{position}", [FieldError("", "a Node object is required")])
        return node_from_dict(obj, source=f"node #{position}"), None
    except InputError as exc:
        name = _name_of(obj)
        if not isinstance(name, str) or not name:
            name = f"<unreadable node #{position}>"
        return Node(name=name, instance_type=None, allocatable={}, unreadable=True), exc


def _first_char(text: bytes | str) -> str:
    for ch in text[:4096] if isinstance(text, str) else text[:4096].decode("utf-8", "replace"):
        if not ch.isspace() and ch != "\ufeff":
            return ch
    return ""
