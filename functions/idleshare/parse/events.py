"""Every inbound event of SPEC §4 as a typed, frozen model (typed ``detail``).

``parse_event(raw)`` returns one of the models below or raises ``InputError`` naming each bad field.
``cluster_ref(event)`` says which cluster the event concerns, in the terms the event itself uses.

The models are stdlib dataclasses checked by the small validator at the end of this module, not
pydantic models: importing pydantic and building the models cost more than the router's whole
cold-start budget (``make bench``). The validator keeps the semantics the pydantic models had —
lax-mode coercions (bytes to str, any sequence to a list, ISO 8601 strings and unix timestamps to
``datetime``), ``extra="allow"`` details whose unknown members stay readable as attributes (and in
``model_extra``), envelopes that ignore unknown members, error paths such as ``detail.ClusterArn``
or ``detail.clusters.list[constrained-str].1``, and pydantic's messages.
``tests/unit/test_parse_events.py`` and ``tests/bench/test_bench_coldstart.py`` hold it to Powertools'
``EventBridgeModel`` and to pydantic's ``datetime`` parsing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, ClassVar

from idleshare import names
from idleshare.parse.errors import FieldError, InputError

_CLUSTER_ID = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"

Loc = tuple[str | int, ...]
Errors = list[tuple[Loc, str]]
Check = Any  # (value, loc, errors) -> value, or _BAD after appending to errors
_BAD: Any = object()
_REQUIRED: Any = object()


@dataclass(frozen=True, kw_only=True)
class _Model:
    """Base of every model: ``model_extra`` holds the unknown members of an ``extra="allow"`` model,
    also readable as attributes (as pydantic's ``extra="allow"`` models do)."""

    model_extra: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    _EXTRA: ClassVar[str] = "ignore"

    def __getattr__(self, name: str) -> Any:
        extra = object.__getattribute__(self, "model_extra")
        if extra is not None and name in extra:
            return extra[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def parse(cls, raw: Any, source: str = "event") -> Any:
        """An instance from a JSON-like ``raw``, or ``InputError`` naming each bad field."""
        errors: Errors = []
        value = _model(cls)(raw, (), errors)
        if errors:
            raise InputError(source, [FieldError(".".join(str(p) for p in loc), msg) for loc, msg in errors])
        return value


class EventBridgeModel(_Model):
    """The EventBridge envelope: the fields, aliases and validator of Powertools'
    ``aws_lambda_powertools.utilities.parser.models.EventBridgeModel`` (unknown members ignored);
    ``tests/bench/test_bench_coldstart.py`` keeps the two in step."""

    version: str
    id: str
    source: str
    account: str
    time: datetime
    region: str
    resources: list[str]
    detail_type: str = field(metadata={"alias": "detail-type"})
    detail: Any
    replay_name: str | None = field(default=None, metadata={"alias": "replay-name"})


class _Detail(_Model):
    _EXTRA = "allow"


# -- HyperPod (aws.sagemaker) ------------------------------------------------------------------


class NodeHealthSummary(_Detail):
    HealthStatus: str
    HealthStatusReason: str | None = None
    RepairAction: str | None = None


class NodeHealthDetail(_Detail):
    ClusterArn: str = field(metadata={"min_length": 1})
    ClusterName: str | None = None
    InstanceId: str = field(metadata={"min_length": 1})
    HealthSummary: NodeHealthSummary


class EksRef(_Detail):
    ClusterArn: str


class HyperPodOrchestrator(_Detail):
    Eks: EksRef | None = None


class StateChangeDetail(_Detail):
    ClusterArn: str = field(metadata={"min_length": 1})
    ClusterName: str | None = None
    ClusterStatus: str
    Orchestrator: HyperPodOrchestrator | None = None


class ClusterEventInner(_Detail):
    ClusterArn: str = field(metadata={"min_length": 1})
    ClusterName: str | None = None
    InstanceId: str | None = None
    ResourceType: str | None = None
    Description: str | None = None


class ClusterEventDetail(_Detail):
    EventDetails: ClusterEventInner


class NodeHealthEvent(EventBridgeModel):
    source: str = field(metadata={"literal": ("aws.sagemaker",)})
    detail_type: str = field(metadata={"alias": "detail-type", "literal": (names.DT_HYPERPOD_NODE_HEALTH,)})
    detail: NodeHealthDetail


class StateChangeEvent(EventBridgeModel):
    source: str = field(metadata={"literal": ("aws.sagemaker",)})
    detail_type: str = field(metadata={"alias": "detail-type", "literal": (names.DT_HYPERPOD_STATE_CHANGE,)})
    detail: StateChangeDetail


class ClusterEvent(EventBridgeModel):
    source: str = field(metadata={"literal": ("aws.sagemaker",)})
    detail_type: str = field(metadata={"alias": "detail-type", "literal": (names.DT_HYPERPOD_EVENT,)})
    detail: ClusterEventDetail


# -- CloudTrail API calls ------------------------------------------------------------------------

CLOUDTRAIL_EVENT_NAMES = names.CLOUDTRAIL_EVENT_NAMES  # the rule's filter and the parser's literal, one list


class CloudTrailDetail(_Detail):
    eventSource: str = field(metadata={"literal": ("sagemaker.amazonaws.com",)})
    eventName: str = field(metadata={"literal": CLOUDTRAIL_EVENT_NAMES})
    requestParameters: dict[str, Any] | None = None
    responseElements: dict[str, Any] | None = None
    errorCode: str | None = None


class CloudTrailEvent(EventBridgeModel):
    source: str = field(metadata={"literal": ("aws.sagemaker",)})
    detail_type: str = field(metadata={"alias": "detail-type", "literal": (names.DT_CLOUDTRAIL,)})
    detail: CloudTrailDetail


# -- idleshare's own -----------------------------------------------------------------------------


class OwnDetail(_Detail):
    """Names the cluster by idleshare id (``cluster``) or by EKS cluster name (``eksClusterName``)."""

    cluster: str | None = field(default=None, metadata={"pattern": _CLUSTER_ID})
    eksClusterName: str | None = field(default=None, metadata={"min_length": 1, "max_length": 100})
    requestId: str | None = field(default=None, metadata={"max_length": 128})
    reason: str | None = field(default=None, metadata={"max_length": 1024})


class NodeChangedDetail(OwnDetail):
    node: str | None = field(default=None, metadata={"max_length": 253})
    change: str | None = field(default=None, metadata={"max_length": 64})


class QuotaChangedDetail(OwnDetail):
    quotaName: str | None = field(default=None, metadata={"max_length": 63})


class OwnEvent(EventBridgeModel):
    source: str = field(metadata={"literal": ("idleshare",)})


class NodeChangedEvent(OwnEvent):
    detail_type: str = field(metadata={"alias": "detail-type", "literal": (names.DT_NODE_CHANGED,)})
    detail: NodeChangedDetail


class QuotaChangedEvent(OwnEvent):
    detail_type: str = field(metadata={"alias": "detail-type", "literal": (names.DT_QUOTA_CHANGED,)})
    detail: QuotaChangedDetail


class SchedulerChangedEvent(OwnEvent):
    detail_type: str = field(metadata={"alias": "detail-type", "literal": (names.DT_SCHEDULER_CHANGED,)})
    detail: OwnDetail


class RecalculationRequestedEvent(OwnEvent):
    detail_type: str = field(metadata={"alias": "detail-type", "literal": (names.DT_RECALC_REQUESTED,)})
    detail: OwnDetail


# -- the safety-net schedule -----------------------------------------------------------------------


class ScheduledDetail(_Detail):
    """``clusters``: ``"all"`` or a list of idleshare cluster ids."""

    clusters: str | list[str] = field(default="all", metadata={"clusters": True})


class ScheduledEvent(_Model):
    """The fixed input EventBridge Scheduler sends (see infra): not a full EventBridge envelope."""

    _EXTRA = "allow"
    source: str = field(metadata={"literal": ("aws.scheduler",)})
    detail_type: str = field(metadata={"alias": "detail-type", "literal": (names.DT_SCHEDULED_RECOMPUTE,)})
    detail: ScheduledDetail = field(default_factory=lambda: ScheduledDetail())


# Dataclasses are made here, not with a decorator on each class, so that every subclass is one too.
for _cls in (
    EventBridgeModel,
    _Detail,
    NodeHealthSummary,
    NodeHealthDetail,
    EksRef,
    HyperPodOrchestrator,
    StateChangeDetail,
    ClusterEventInner,
    ClusterEventDetail,
    NodeHealthEvent,
    StateChangeEvent,
    ClusterEvent,
    CloudTrailDetail,
    CloudTrailEvent,
    OwnDetail,
    NodeChangedDetail,
    QuotaChangedDetail,
    OwnEvent,
    NodeChangedEvent,
    QuotaChangedEvent,
    SchedulerChangedEvent,
    RecalculationRequestedEvent,
    ScheduledDetail,
    ScheduledEvent,
):
    dataclass(frozen=True, kw_only=True)(_cls)
del _cls

# The model of each detail-type.
_MODELS: dict[str, type[_Model]] = {
    names.DT_HYPERPOD_NODE_HEALTH: NodeHealthEvent,
    names.DT_HYPERPOD_STATE_CHANGE: StateChangeEvent,
    names.DT_HYPERPOD_EVENT: ClusterEvent,
    names.DT_CLOUDTRAIL: CloudTrailEvent,
    names.DT_NODE_CHANGED: NodeChangedEvent,
    names.DT_QUOTA_CHANGED: QuotaChangedEvent,
    names.DT_SCHEDULER_CHANGED: SchedulerChangedEvent,
    names.DT_RECALC_REQUESTED: RecalculationRequestedEvent,
    names.DT_SCHEDULED_RECOMPUTE: ScheduledEvent,
}

KNOWN_DETAIL_TYPES = (
    *names.HYPERPOD_DETAIL_TYPES,
    names.DT_CLOUDTRAIL,
    *names.OWN_INBOUND_DETAIL_TYPES,
    names.DT_SCHEDULED_RECOMPUTE,
)


def parse_event(raw: Any, source: str = "event") -> Any:
    """The typed event, or ``InputError`` naming each bad field."""
    if not isinstance(raw, dict):
        raise InputError(source, [FieldError("", "an event must be a JSON object")])
    detail_type = raw.get("detail-type", raw.get("detail_type"))
    if detail_type not in KNOWN_DETAIL_TYPES:
        raise InputError(source, [FieldError("detail-type", f"unsupported detail-type {detail_type!r}")])
    if "detail-type" in raw and "detail_type" in raw:
        # As the discriminated union did: the model is picked by ``detail_type`` (then validated
        # reading ``detail-type`` first, so the two must agree).
        tag = raw["detail_type"]
        if not (isinstance(tag, str) and tag in _MODELS):
            expected = ", ".join(f"'{t}'" for t in _MODELS)
            message = (
                f"Input tag '{tag}' found using 'detail_type' | 'detail-type' does not match any of the "
                f"expected tags: {expected}"
            )
            raise InputError(source, [FieldError("", message)])
        detail_type = tag
    return _MODELS[detail_type].parse(raw, source)


# -- which cluster ---------------------------------------------------------------------------------

_ARN = re.compile(r"^arn:aws[a-z-]*:(?P<service>sagemaker|eks):[a-z0-9-]*:\d{12}:cluster/(?P<name>[^/]+)$")


@dataclass(frozen=True, slots=True)
class ClusterRef:
    """How an event names its cluster: at most one of each; ``everything`` for the schedule."""

    cluster_id: str | None = None
    eks_cluster_name: str | None = None
    hyperpod_arn: str | None = None
    everything: bool = False
    explicit_ids: tuple[str, ...] = ()


def eks_name_from_arn(arn: str) -> str | None:
    m = _ARN.match(arn)
    return m.group("name") if m and m.group("service") == "eks" else None


def hyperpod_arn_ok(arn: str) -> bool:
    m = _ARN.match(arn)
    return bool(m and m.group("service") == "sagemaker")


def cluster_ref(event: Any) -> ClusterRef:
    """Which governed cluster(s) the event concerns. Unresolvable → an empty ref (dropped upstream)."""
    if isinstance(event, ScheduledEvent):
        clusters = event.detail.clusters
        return ClusterRef(everything=True) if clusters == "all" else ClusterRef(explicit_ids=tuple(clusters))
    if isinstance(event, NodeHealthEvent | StateChangeEvent):
        eks = None
        if isinstance(event, StateChangeEvent) and event.detail.Orchestrator and event.detail.Orchestrator.Eks:
            eks = eks_name_from_arn(event.detail.Orchestrator.Eks.ClusterArn)
        return ClusterRef(hyperpod_arn=event.detail.ClusterArn, eks_cluster_name=eks)
    if isinstance(event, ClusterEvent):
        return ClusterRef(hyperpod_arn=event.detail.EventDetails.ClusterArn)
    if isinstance(event, CloudTrailEvent):
        params = event.detail.requestParameters or {}
        arn = params.get("clusterArn") or params.get("ClusterArn")
        if isinstance(arn, str) and arn:
            return ClusterRef(hyperpod_arn=arn)
        # Update/Delete calls name only the quota / config id: every HyperPod-linked cluster is recomputed.
        return ClusterRef(everything=True)
    detail = event.detail
    return ClusterRef(cluster_id=detail.cluster, eks_cluster_name=detail.eksClusterName)


# == the validator ==================================================================================
# Each check takes (value, loc, errors) and returns the validated value, or appends (loc, message) to
# errors and returns _BAD. Messages are pydantic's (lax mode, Python input), as the models had.


def _str(value: Any, loc: Loc, errors: Errors) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode()
        except UnicodeDecodeError:
            errors.append((loc, "Input should be a valid string, unable to parse raw data as a unicode string"))
            return _BAD
    errors.append((loc, "Input should be a valid string"))
    return _BAD


def _constrained_str(min_length: int | None, max_length: int | None, pattern: str | None) -> Check:
    regex = re.compile(pattern.removesuffix("$") + r"\Z") if pattern else None  # the Rust regex ``$``: the end

    def check(value: Any, loc: Loc, errors: Errors) -> Any:
        s = _str(value, loc, errors)
        if s is _BAD:
            return s
        if min_length is not None and len(s) < min_length:
            errors.append((loc, f"String should have at least {min_length} character{'s' * (min_length != 1)}"))
        elif max_length is not None and len(s) > max_length:
            errors.append((loc, f"String should have at most {max_length} character{'s' * (max_length != 1)}"))
        elif regex is not None and not regex.match(s):
            errors.append((loc, f"String should match pattern '{pattern}'"))
        else:
            return s
        return _BAD

    return check


def _literal(expected: tuple[str, ...]) -> Check:
    quoted = [f"'{e}'" for e in expected]
    message = "Input should be " + (quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}")

    def check(value: Any, loc: Loc, errors: Errors) -> Any:
        if isinstance(value, str) and value in expected:
            return value
        errors.append((loc, message))
        return _BAD

    return check


def _nullable(inner: Check) -> Check:
    def check(value: Any, loc: Loc, errors: Errors) -> Any:
        return None if value is None else inner(value, loc, errors)

    return check


_LIST_LIKE: tuple[type, ...] = (list, tuple, set, frozenset, type({}.keys()), type({}.values()))


def _list_of(item: Check) -> Check:
    def check(value: Any, loc: Loc, errors: Errors) -> Any:
        if not isinstance(value, _LIST_LIKE):
            errors.append((loc, "Input should be a valid list"))
            return _BAD
        start = len(errors)
        items: Any = value
        out = [item(v, (*loc, i), errors) for i, v in enumerate(items)]
        return out if len(errors) == start else _BAD

    return check


def _dict_str_any(value: Any, loc: Loc, errors: Errors) -> Any:
    if not isinstance(value, dict):
        errors.append((loc, "Input should be a valid dictionary"))
        return _BAD
    start = len(errors)
    out = {}
    for k, v in value.items():
        key = _str(k, (*loc, k, "[key]"), errors)
        out[key] = v
    return out if len(errors) == start else _BAD


_CLUSTER_IDS = _list_of(_constrained_str(None, None, _CLUSTER_ID))
_ALL = _literal(("all",))


def _clusters(value: Any, loc: Loc, errors: Errors) -> Any:
    """``Literal["all"] | list[constrained str]``: a smart union, reporting each member's errors."""
    mine: Errors = []
    if _ALL(value, (*loc, "literal['all']"), mine) is not _BAD:
        return value
    ids = _CLUSTER_IDS(value, (*loc, "list[constrained-str]"), mine)
    if ids is not _BAD:
        return ids
    errors.extend(mine)
    return _BAD


def _model(cls: type[_Model]) -> Check:
    check: Check | None = _MODEL_CHECKS.get(cls)
    if check is None:
        check = _MODEL_CHECKS[cls] = _make_model_check(cls)
    return check


_MODEL_CHECKS: dict[type, Check] = {}


def _make_model_check(cls: type[_Model]) -> Check:
    schema = _schema(cls)
    allow = cls._EXTRA == "allow"
    envelope = issubclass(cls, EventBridgeModel)

    def check(value: Any, loc: Loc, errors: Errors) -> Any:
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            errors.append((loc, f"Input should be a valid dictionary or instance of {cls.__name__}"))
            return _BAD
        start = len(errors)
        values: dict[str, Any] = {}
        used = set()
        for name, names_, field_check, default in schema:
            for key in names_:
                if key in value:
                    used.add(key)
                    v = value[key]
                    if envelope and name == "detail" and values.get("source") == "aws.scheduler" and v == "{}":
                        v = {}  # EventBridge Scheduler sends detail as the string '{}' when there is no payload
                    values[name] = field_check(v, (*loc, key), errors)
                    break
            else:
                if default is _REQUIRED:
                    errors.append(((*loc, names_[0]), "Field required"))
                else:
                    values[name] = default()
        extra: dict[str, Any] | None = None
        if allow:
            extra = {}
            for key, v in value.items():
                if key in used:
                    continue
                if isinstance(key, str):
                    extra[key] = v
                else:
                    errors.append(((*loc, key), "Keys should be strings"))
        if len(errors) != start:
            return _BAD
        return cls(**values, model_extra=extra)

    return check


def _schema(cls: type[_Model]) -> tuple[tuple[str, tuple[str, ...], Check, Any], ...]:
    """(attribute, keys, check, default factory or _REQUIRED) of each field, from the dataclass fields
    (their declared type and ``metadata``)."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name == "model_extra":
            continue
        meta = f.metadata
        keys = (meta["alias"], f.name) if "alias" in meta else (f.name,)
        check = _check_for(hints[f.name], meta)
        if f.default is not dataclasses.MISSING:
            default: Any = (lambda d: lambda: d)(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory
        else:
            default = _REQUIRED
        out.append((f.name, keys, check, default))
    return tuple(out)


def _check_for(hint: Any, meta: Any) -> Check:
    import types
    import typing

    if "literal" in meta:
        return _literal(meta["literal"])
    if meta.get("clusters"):
        return _clusters
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) and type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        return _nullable(_check_for(inner, meta))
    if hint is str:
        if any(k in meta for k in ("min_length", "max_length", "pattern")):
            return _constrained_str(meta.get("min_length"), meta.get("max_length"), meta.get("pattern"))
        return _str
    if hint is datetime:
        return _datetime
    if typing.get_origin(hint) is list and args == (str,):
        return _list_of(_str)
    if typing.get_origin(hint) is dict:
        return _dict_str_any
    if hint is Any:  # the bare envelope's detail
        return _dict_str_any
    if isinstance(hint, type) and issubclass(hint, _Model):
        return lambda value, loc, errors: _model(hint)(value, loc, errors)
    raise TypeError(f"no check for {hint!r}")  # pragma: no cover - a model declared with an unsupported type


# -- datetime, as pydantic parses it (speedate, lax mode, microseconds truncated) -------------------

_UTC = UTC
_EPOCH = datetime(1970, 1, 1, tzinfo=_UTC)
_MS_WATERSHED = 20_000_000_000
_MAX_US = (datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=_UTC) - _EPOCH) // timedelta(microseconds=1)
_MIN_US = (datetime(1, 1, 1, tzinfo=_UTC) - _EPOCH) // timedelta(microseconds=1)
_I64 = 2**63
_DIGITS = frozenset("0123456789")
_INT = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class _DateError(ValueError):
    pass


def _datetime(value: Any, loc: Loc, errors: Errors) -> Any:
    if isinstance(value, datetime):
        return value
    try:
        if isinstance(value, str | bytes):
            b = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
            return _datetime_from_text(b.decode("latin-1"))
        if isinstance(value, bool) or not isinstance(value, int | float):
            errors.append((loc, "Input should be a valid datetime"))
            return _BAD
        return _from_timestamp(value)
    except _DateError as exc:
        errors.append((loc, f"Input should be a valid datetime or date, {exc}"))
    except ValueError as exc:
        errors.append((loc, f"Input should be a valid datetime, {exc}"))
    return _BAD


def _from_timestamp(timestamp: float) -> datetime:
    """A unix timestamp: seconds, or milliseconds above 2e10 in absolute value; UTC."""
    if timestamp != timestamp:
        raise ValueError("NaN values not permitted")
    if isinstance(timestamp, int) and abs(timestamp) >= _I64:
        raise ValueError(
            f"dates {'after 9999' if timestamp > 0 else 'before 0000'} are not supported as unix timestamps"
        )
    scale = 1000 if abs(timestamp) > _MS_WATERSHED else 1_000_000
    if isinstance(timestamp, int):
        us = timestamp * scale
    elif timestamp in (float("inf"), float("-inf")):
        us = _MAX_US + 1 if timestamp > 0 else _MIN_US - 1
    else:  # whole seconds (or milliseconds), then the fraction, to the nearest microsecond
        whole = math.floor(timestamp)
        us = whole * scale + math.floor((timestamp - whole) * scale + 0.5)  # Rust rounds half up here
    if us > _MAX_US:
        raise ValueError("dates after 9999 are not supported as unix timestamps")
    if us < _MIN_US:
        raise ValueError("dates before 0000 are not supported as unix timestamps")
    return _EPOCH + timedelta(microseconds=us)


def _datetime_from_text(b: str) -> datetime:
    """``b``: the input's bytes, one character each. RFC 3339 / ISO 8601 (``T``, ``t``, ``_`` or space
    between date and time; seconds, fraction and offset optional), a date alone (midnight), or a unix
    timestamp. The error is the one pydantic reports: the date parser's."""
    try:
        return _rfc3339(b)
    except _DateError:
        pass
    number: int | float | None = None
    if "." in b:
        if _FLOAT.match(b):
            number = float(b)
    elif _INT.match(b) and abs(int(b)) < _I64:
        number = int(b)
    if number is not None:
        try:
            return _from_timestamp(number)
        except ValueError as exc:
            raise _DateError(str(exc)) from None
    year, month, day = _date(b)
    if len(b) > 10:
        raise _DateError("unexpected extra characters at the end of the input")
    return datetime(year, month, day)


def _digits(b: str, start: int, n: int, what: str) -> int:
    part = b[start : start + n]
    if len(part) != n or not set(part) <= _DIGITS:
        raise _DateError(f"invalid character in {what}")
    return int(part)


def _date(b: str) -> tuple[int, int, int]:
    if len(b) < 10:
        raise _DateError("input is too short")
    year = _digits(b, 0, 4, "year")
    if b[4] != "-":
        raise _DateError("invalid date separator, expected `-`")
    month = _digits(b, 5, 2, "month")
    if b[7] != "-":
        raise _DateError("invalid date separator, expected `-`")
    day = _digits(b, 8, 2, "day")
    if not 1 <= month <= 12:
        raise _DateError("month value is outside expected range of 1-12")
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not 1 <= day <= _DAYS[month - 1] + (month == 2 and leap):
        raise _DateError("day value is outside expected range")
    return year, month, day


def _rfc3339(b: str) -> datetime:
    year, month, day = _date(b)
    if len(b) < 11 or b[10] not in "Tt _":
        raise _DateError("invalid datetime separator, expected `T`, `t`, `_` or space")
    if len(b) - 11 < 5:
        raise _DateError("input is too short")
    hour = _digits(b, 11, 2, "hour")
    if b[13] != ":":
        raise _DateError("invalid time separator, expected `:`")
    minute = _digits(b, 14, 2, "minute")
    if hour > 23:
        raise _DateError("hour value is outside expected range of 0-23")
    if minute > 59:
        raise _DateError("minute value is outside expected range of 0-59")
    pos, second, microsecond = 16, 0, 0
    if b[pos : pos + 1] == ":":
        second = _digits(b, 17, 2, "second")
        if second > 59:
            raise _DateError("second value is outside expected range of 0-59")
        pos = 19
        if b[pos : pos + 1] in (".", ","):
            pos += 1
            end = pos
            while end < len(b) and b[end] in _DIGITS:
                end += 1
            if end == pos:
                raise _DateError("fractional seconds missing")
            microsecond = int(b[pos : min(end, pos + 6)].ljust(6, "0"))
            pos = end
    tz: timezone | None = None
    if pos < len(b):
        c = b[pos]
        pos += 1
        if c in "Zz":
            tz = _UTC
        else:
            if c == "+":
                sign = 1
            elif c == "-":
                sign = -1
            elif c == "\xe2" and b[pos : pos + 2] == "\x88\x92":  # U+2212 MINUS, as UTF-8
                sign, pos = -1, pos + 2
            else:
                raise _DateError("invalid timezone sign")
            hours = _digits(b, pos, 2, "timezone hour")
            if b[pos + 2 : pos + 3] == ":":
                pos += 3
            elif pos + 2 < len(b) and b[pos + 2] in _DIGITS:
                pos += 2
            else:
                raise _DateError("invalid character in timezone minute")
            minutes = _digits(b, pos, 2, "timezone minute")
            if minutes > 59:
                raise _DateError("timezone minute value is outside expected range of 0-59")
            offset = sign * (hours * 3600 + minutes * 60)
            if abs(offset) >= 86_400:
                raise _DateError("timezone offset must be less than 24 hours")
            tz = _UTC if offset == 0 else timezone(timedelta(seconds=offset))
            pos += 2
    if len(b) > pos:
        raise _DateError("unexpected extra characters at the end of the input")
    try:
        return datetime(year, month, day, hour, minute, second, microsecond, tzinfo=tz)
    except ValueError as exc:  # year 0
        raise ValueError(str(exc)) from None
