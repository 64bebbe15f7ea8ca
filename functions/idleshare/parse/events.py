"""Every inbound event of SPEC §4, wrapped in Powertools' ``EventBridgeEvent`` data class.

``parse_event(raw)`` returns one of the event classes below — an ``EventBridgeEvent`` per detail-type,
whose ``detail`` is a view of the detail object with its checked members as attributes — or raises
``InputError`` naming each bad field (``detail.ClusterArn``, ``source``, ...).
``cluster_ref(event)`` says which cluster the event concerns, in the terms the event itself uses.

Checked is what idleshare reads, and nothing else:

- ``detail-type`` (one of ``KNOWN_DETAIL_TYPES``; also accepted spelled ``detail_type``, and both
  spellings must agree) and ``source`` (the one that sends that detail-type); ``detail`` is an object
  (the schedule's may be absent, or the string ``'{}'`` EventBridge Scheduler sends for no payload);
- the members the router reads to find the cluster (``cluster_ref``) and to pass a request on:
  ``ClusterArn``, ``Orchestrator.Eks.ClusterArn``, ``EventDetails.ClusterArn``, CloudTrail's
  ``requestParameters`` (and its ``eventSource`` and ``eventName``: which call it reports), the own
  events' ``cluster``, ``eksClusterName`` and ``requestId``, the schedule's ``clusters``;
- the members ``idleshare replay --local`` and the scenarios act on (``devkit/embedded.py``): a health
  event's ``InstanceId`` and ``HealthSummary`` (``HealthStatus``, ``RepairAction``), a ``Node Changed``'s
  ``node`` and ``change``, and a ``Compute Quota Changed``'s ``quotaName``.

Not checked, because nothing reads them: the envelope's ``version``, ``id``, ``account``, ``time``,
``region``, ``resources`` and ``replay-name`` (Powertools' properties return them as they came: ``time``
is a string, and the schedule's input has none of them); detail members such as ``ClusterName``,
``ClusterStatus``, ``errorCode`` or ``reason``; unknown members. A detail member is an attribute only if it
is declared below (the rest stay in the mapping: ``event.detail["ClusterStatus"]``).

Not Powertools' parser models (pydantic): warm, after Powertools and boto3, importing them took about
215 ms, the data classes about 35 ms, of the router's cold start (``make bench``);
tests/bench/test_bench_coldstart.py checks that the router never loads pydantic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, cast, overload

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent
from aws_lambda_powertools.utilities.data_classes.common import DictWrapper

from idleshare import names
from idleshare.parse.errors import FieldError, InputError

T = TypeVar("T")
D = TypeVar("D", bound="Detail")

# -- checks: (a present value, its path) -> what is wrong with it --------------------------------------

Check = Callable[[Any, str], list[FieldError]]


def _kind(value: Any) -> str:
    """``value``'s JSON type, for messages."""
    kinds = (("null", type(None)), ("boolean", bool), ("number", int | float), ("string", str), ("array", list))
    for kind, types_ in (*kinds, ("object", dict)):
        if isinstance(value, types_):
            return kind
    return type(value).__name__


def _shown(value: Any) -> str:
    """``value`` as a message quotes it: short strings and scalars as written, anything else by its kind."""
    if (isinstance(value, str) and len(value) <= 80) or value is None or isinstance(value, bool | int | float):
        return repr(value)
    return f"a {_kind(value)}"


def text(*, min_length: int = 0, max_length: int | None = None, pattern: str = "", what: str = "") -> Check:
    """A string of ``min_length`` to ``max_length`` characters, matching ``pattern`` (``what`` says in words)."""
    regex = re.compile(pattern) if pattern else None

    def check(value: Any, loc: str) -> list[FieldError]:
        if not isinstance(value, str):
            problem = f"expected a string, got {_kind(value)}"
        elif len(value) < min_length:
            problem = "must not be empty"
        elif max_length is not None and len(value) > max_length:
            problem = f"at most {max_length} characters, got {len(value)}"
        elif regex is not None and not regex.fullmatch(value):
            problem = f"expected {what}, got {_shown(value)}"
        else:
            return []
        return [FieldError(loc, problem)]

    return check


def one_of(*allowed: str) -> Check:
    expected = repr(allowed[0]) if len(allowed) == 1 else f"one of {', '.join(map(repr, allowed))}"

    def check(value: Any, loc: str) -> list[FieldError]:
        if isinstance(value, str) and value in allowed:
            return []
        return [FieldError(loc, f"expected {expected}, got {_shown(value)}")]

    return check


def _object(value: Any, loc: str) -> list[FieldError]:
    return [] if isinstance(value, dict) else [FieldError(loc, f"expected an object, got {_kind(value)}")]


_STRING = text()
_NON_EMPTY = text(min_length=1)
_CLUSTER_ID = text(
    pattern=r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
    what="a cluster id (1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit)",
)


def _cluster_ids(value: Any, loc: str) -> list[FieldError]:
    """``"all"`` or a list of idleshare cluster ids."""
    if value == "all":
        return []
    if not isinstance(value, list):
        return [FieldError(loc, f"expected 'all' or a list of cluster ids, got {_shown(value)}")]
    return [e for i, item in enumerate(value) for e in _CLUSTER_ID(item, f"{loc}[{i}]")]


def _member_errors(
    data: Mapping[str, Any], name: str, check: Check, loc: str, *, required: bool = True, default: Any = None
) -> list[FieldError]:
    """The errors of member ``name`` of ``data``: absent is refused if ``required``; null is accepted if
    not required and the ``default`` is None."""
    where = f"{loc}.{name}" if loc else name
    if name not in data:
        return [FieldError(where, "required field missing")] if required else []
    if data[name] is None and not required and default is None:
        return []
    return check(data[name], where)


# -- details: the checked members of a detail object, read as attributes -------------------------------


class Member(Generic[T]):
    """A member of a detail object: ``parse_event`` checks it, then it reads as the attribute of its name.
    Optional unless ``required``: absent, it reads as ``default`` (and if that is None, null is accepted
    too). ``view``: the class a nested object is read as."""

    def __init__(
        self, check: Check, *, required: bool = False, default: Any = None, view: type[Detail] | None = None
    ) -> None:
        self.check, self.required, self.default, self.view = check, required, default, view
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Member[T]: ...
    @overload
    def __get__(self, obj: Detail, owner: type) -> T: ...
    def __get__(self, obj: Detail | None, owner: type) -> Any:
        if obj is None:
            return self
        value = obj.get(self.name, self.default)
        return self.view(value) if self.view is not None and value is not None else value

    def errors(self, data: Mapping[str, Any], loc: str) -> list[FieldError]:
        return _member_errors(data, self.name, self.check, loc, required=self.required, default=self.default)


def required(check: Check) -> Member[Any]:
    return Member(check, required=True)


def nested(view: type[Detail], *, required: bool = False) -> Member[Any]:
    """A member that is itself an object, read as ``view``."""
    return Member(view.errors, required=required, view=view)


class Detail(DictWrapper):
    """A view of a detail object (Powertools' ``DictWrapper``): its ``Member``s as attributes."""

    @classmethod
    def errors(cls, value: Any, loc: str) -> list[FieldError]:
        if not isinstance(value, dict):
            return _object(value, loc)
        members = [m for klass in reversed(cls.__mro__) for m in vars(klass).values() if isinstance(m, Member)]
        return [e for m in members for e in m.errors(value, loc)]


# HyperPod (aws.sagemaker)


class NodeHealthSummary(Detail):
    HealthStatus: Member[str] = required(_STRING)
    RepairAction: Member[str | None] = Member(_STRING)


class NodeHealthDetail(Detail):
    ClusterArn: Member[str] = required(_NON_EMPTY)
    InstanceId: Member[str] = required(_NON_EMPTY)
    HealthSummary: Member[NodeHealthSummary] = nested(NodeHealthSummary, required=True)


class EksRef(Detail):
    ClusterArn: Member[str] = required(_STRING)


class HyperPodOrchestrator(Detail):
    Eks: Member[EksRef | None] = nested(EksRef)


class StateChangeDetail(Detail):
    ClusterArn: Member[str] = required(_NON_EMPTY)
    Orchestrator: Member[HyperPodOrchestrator | None] = nested(HyperPodOrchestrator)


class ClusterEventInner(Detail):
    ClusterArn: Member[str] = required(_NON_EMPTY)


class ClusterEventDetail(Detail):
    EventDetails: Member[ClusterEventInner] = nested(ClusterEventInner, required=True)


# CloudTrail API calls

CLOUDTRAIL_EVENT_NAMES = names.CLOUDTRAIL_EVENT_NAMES  # the rule's filter and the parser's, one list


class CloudTrailDetail(Detail):
    eventSource: Member[str] = required(one_of("sagemaker.amazonaws.com"))
    eventName: Member[str] = required(one_of(*CLOUDTRAIL_EVENT_NAMES))
    requestParameters: Member[dict[str, Any] | None] = Member(_object)


# idleshare's own


class OwnDetail(Detail):
    """Names the cluster by idleshare id (``cluster``) or by EKS cluster name (``eksClusterName``)."""

    cluster: Member[str | None] = Member(_CLUSTER_ID)
    eksClusterName: Member[str | None] = Member(text(min_length=1, max_length=100))
    requestId: Member[str | None] = Member(text(max_length=128))


class NodeChangedDetail(OwnDetail):
    node: Member[str | None] = Member(text(max_length=253))
    change: Member[str | None] = Member(text(max_length=64))


class QuotaChangedDetail(OwnDetail):
    quotaName: Member[str | None] = Member(text(max_length=63))


# the safety-net schedule


class ScheduledDetail(Detail):
    clusters: Member[str | list[str]] = Member(_cluster_ids, default="all")


# -- the events --------------------------------------------------------------------------------------


class Event(EventBridgeEvent, Generic[D]):
    """An inbound event: Powertools' EventBridge data class, for one detail-type sent by one ``SOURCE``;
    ``detail`` is read as ``D``."""

    SOURCE: ClassVar[str]
    DETAIL_TYPE: ClassVar[str]
    DETAIL: ClassVar[type[Detail]]  # D

    @property
    def detail(self) -> D:  # type: ignore[override]  # the typed view of the dict Powertools returns
        return cast(D, self.DETAIL(self["detail"]))


class NodeHealthEvent(Event[NodeHealthDetail]):
    SOURCE, DETAIL_TYPE, DETAIL = "aws.sagemaker", names.DT_HYPERPOD_NODE_HEALTH, NodeHealthDetail


class StateChangeEvent(Event[StateChangeDetail]):
    SOURCE, DETAIL_TYPE, DETAIL = "aws.sagemaker", names.DT_HYPERPOD_STATE_CHANGE, StateChangeDetail


class ClusterEvent(Event[ClusterEventDetail]):
    SOURCE, DETAIL_TYPE, DETAIL = "aws.sagemaker", names.DT_HYPERPOD_EVENT, ClusterEventDetail


class CloudTrailEvent(Event[CloudTrailDetail]):
    SOURCE, DETAIL_TYPE, DETAIL = "aws.sagemaker", names.DT_CLOUDTRAIL, CloudTrailDetail


class NodeChangedEvent(Event[NodeChangedDetail]):
    SOURCE, DETAIL_TYPE, DETAIL = names.EVENT_SOURCE, names.DT_NODE_CHANGED, NodeChangedDetail


class QuotaChangedEvent(Event[QuotaChangedDetail]):
    SOURCE, DETAIL_TYPE, DETAIL = names.EVENT_SOURCE, names.DT_QUOTA_CHANGED, QuotaChangedDetail


class SchedulerChangedEvent(Event[OwnDetail]):
    SOURCE, DETAIL_TYPE, DETAIL = names.EVENT_SOURCE, names.DT_SCHEDULER_CHANGED, OwnDetail


class RecalculationRequestedEvent(Event[OwnDetail]):
    SOURCE, DETAIL_TYPE, DETAIL = names.EVENT_SOURCE, names.DT_RECALC_REQUESTED, OwnDetail


class ScheduledEvent(Event[ScheduledDetail]):
    """The fixed input EventBridge Scheduler sends (see infra): not a full EventBridge envelope."""

    SOURCE, DETAIL_TYPE, DETAIL = "aws.scheduler", names.DT_SCHEDULED_RECOMPUTE, ScheduledDetail


_EVENTS: dict[str, type[Event[Any]]] = {
    cls.DETAIL_TYPE: cls
    for cls in (
        NodeHealthEvent,
        StateChangeEvent,
        ClusterEvent,
        CloudTrailEvent,
        NodeChangedEvent,
        QuotaChangedEvent,
        SchedulerChangedEvent,
        RecalculationRequestedEvent,
        ScheduledEvent,
    )
}

KNOWN_DETAIL_TYPES = tuple(_EVENTS)


def parse_event(raw: Any, source: str = "event") -> Event[Any]:
    """The event as its class, or ``InputError`` naming each bad field (``source`` names the input)."""
    if not isinstance(raw, dict):
        raise InputError(source, [FieldError("", "an event must be a JSON object")])
    detail_type = raw.get("detail-type", raw.get("detail_type"))
    cls = _EVENTS.get(detail_type) if isinstance(detail_type, str) else None
    if cls is None:
        raise InputError(source, [FieldError("detail-type", f"unsupported detail-type {_shown(detail_type)}")])
    errors: list[FieldError] = []
    if raw.get("detail_type", detail_type) != detail_type:
        errors.append(
            FieldError("detail_type", f"{_shown(raw['detail_type'])} disagrees with detail-type {detail_type!r}")
        )
    data = {**raw, "detail-type": detail_type}
    if cls is ScheduledEvent and data.get("detail", "{}") == "{}":
        data["detail"] = {}  # EventBridge Scheduler's input: no detail, or the string '{}' for no payload
    errors += _member_errors(data, "source", one_of(cls.SOURCE), "")
    errors += _member_errors(data, "detail", cls.DETAIL.errors, "")
    if errors:
        raise InputError(source, errors)
    return cls(data)


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


def cluster_ref(event: Event[Any]) -> ClusterRef:
    """Which governed cluster(s) the event concerns. Unresolvable → an empty ref (dropped upstream)."""
    if isinstance(event, ScheduledEvent):
        clusters = event.detail.clusters
        return ClusterRef(everything=True) if clusters == "all" else ClusterRef(explicit_ids=tuple(clusters))
    if isinstance(event, NodeHealthEvent):
        return ClusterRef(hyperpod_arn=event.detail.ClusterArn)
    if isinstance(event, StateChangeEvent):
        orchestrator = event.detail.Orchestrator
        eks = orchestrator.Eks if orchestrator else None
        return ClusterRef(
            hyperpod_arn=event.detail.ClusterArn, eks_cluster_name=eks_name_from_arn(eks.ClusterArn) if eks else None
        )
    if isinstance(event, ClusterEvent):
        return ClusterRef(hyperpod_arn=event.detail.EventDetails.ClusterArn)
    if isinstance(event, CloudTrailEvent):
        params = event.detail.requestParameters or {}
        arn = params.get("clusterArn") or params.get("ClusterArn")
        if isinstance(arn, str) and arn:
            return ClusterRef(hyperpod_arn=arn)
        # Update/Delete calls name only the quota / config id: every HyperPod-linked cluster is recomputed.
        return ClusterRef(everything=True)
    detail: OwnDetail = event.detail
    return ClusterRef(cluster_id=detail.cluster, eks_cluster_name=detail.eksClusterName)
