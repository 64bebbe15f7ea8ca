"""Every inbound event, one schema each: a frozen msgspec Struct per detail-type.

``parse_event(raw)`` returns the event as its class below — ``source``, ``detail_type`` and a typed
``detail`` — or raises ``InputError`` naming each bad field (``detail.ClusterArn``, ``source``, ...), a string
holding a lone surrogate among them (no UTF-8 carries it: enqueueing it raised ``UnicodeEncodeError``).
``cluster_ref(event)`` says which cluster the event concerns, in the terms the event itself uses.

Declared (and so checked) is what idleshare reads, and nothing else:

- ``detail-type`` (one of ``KNOWN_DETAIL_TYPES``, exactly the detail-types a rule or the schedule delivers:
  any other, such as SageMaker's ``AWS API Call via CloudTrail`` from an old archive, is refused as unsupported;
  also accepted spelled ``detail_type``, and both spellings must agree) and ``source`` (the one that sends that
  detail-type); ``detail`` is an object (the schedule's may be absent, or the string ``'{}'`` EventBridge
  Scheduler sends for no payload);
- the members the router reads to find the cluster (``cluster_ref``) and to pass a request on:
  ``ClusterArn``, ``Orchestrator.Eks.ClusterArn``, ``EventDetails.ClusterArn``, the own events' ``cluster``,
  ``eksClusterName`` and ``requestId``, the schedule's ``clusters``;
- the members ``idleshare replay --local`` and the scenarios act on (``devkit/embedded.py``): a health
  event's ``InstanceId`` and ``HealthSummary`` (``HealthStatus``, ``RepairAction``), a ``Node Changed``'s
  ``node`` and ``change``, and a ``Compute Quota Changed``'s ``quotaName``.

Ignored, because nothing reads them: the envelope's ``version``, ``id``, ``account``, ``time``, ``region``,
``resources`` and ``replay-name`` (the schedule's input has none of them); detail members such as
``ClusterName``, ``ClusterStatus`` or ``reason``; unknown members.

msgspec, not Powertools' parser models (pydantic) nor its data classes: the router loads neither (importing
the data classes cost more of its cold start than msgspec does; tests/bench/test_bench_coldstart.py checks
that the router never loads pydantic). A refused event is walked against the same Struct
(:func:`idleshare.parse.schema.convert`) to name every problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from idleshare import names
from idleshare.parse import jsontext, schema
from idleshare.parse.errors import FieldError, InputError

# -- the field types ---------------------------------------------------------------------------------

NonEmpty = Annotated[str, Meta(min_length=1)]
CLUSTER_ID = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
ClusterId = Annotated[str, Meta(pattern=f"^{CLUSTER_ID}$(?!\n)", extra={"what": "cluster id", "pattern": CLUSTER_ID})]


class _Object(Struct, frozen=True):
    """A JSON object of an event: its declared members as attributes; the others ignored."""


class Event(_Object, tag_field="detail-type", frozen=True):
    """An inbound event: one detail-type (its tag), sent by one ``source``, its ``detail`` typed."""

    source: str

    @property
    def detail_type(self) -> str:
        return str(self.__struct_config__.tag)


# -- HyperPod (aws.sagemaker) ---------------------------------------------------------------------------


class SageMakerEvent(Event, frozen=True):
    source: Literal["aws.sagemaker"]


class NodeHealthSummary(_Object, frozen=True):
    HealthStatus: str
    RepairAction: str | None = None


class NodeHealthDetail(_Object, frozen=True):
    ClusterArn: NonEmpty
    InstanceId: NonEmpty
    HealthSummary: NodeHealthSummary


class NodeHealthEvent(SageMakerEvent, tag=names.DT_HYPERPOD_NODE_HEALTH, frozen=True):
    detail: NodeHealthDetail


class EksRef(_Object, frozen=True):
    ClusterArn: str


class HyperPodOrchestrator(_Object, frozen=True):
    Eks: EksRef | None = None


class StateChangeDetail(_Object, frozen=True):
    ClusterArn: NonEmpty
    Orchestrator: HyperPodOrchestrator | None = None


class StateChangeEvent(SageMakerEvent, tag=names.DT_HYPERPOD_STATE_CHANGE, frozen=True):
    detail: StateChangeDetail


class ClusterEventInner(_Object, frozen=True):
    ClusterArn: NonEmpty


class ClusterEventDetail(_Object, frozen=True):
    EventDetails: ClusterEventInner


class ClusterEvent(SageMakerEvent, tag=names.DT_HYPERPOD_EVENT, frozen=True):
    detail: ClusterEventDetail


# -- idleshare's own ------------------------------------------------------------------------------------


class OwnDetail(_Object, frozen=True):
    """Names the cluster by idleshare id (``cluster``) or by EKS cluster name (``eksClusterName``)."""

    cluster: ClusterId | None = None
    eksClusterName: Annotated[str, Meta(min_length=1, max_length=100)] | None = None
    requestId: Annotated[str, Meta(max_length=128)] | None = None


class OwnEvent(Event, frozen=True):
    source: Literal["idleshare"]
    detail: OwnDetail


class SchedulerChangedEvent(OwnEvent, tag=names.DT_SCHEDULER_CHANGED, frozen=True):
    pass


class RecalculationRequestedEvent(OwnEvent, tag=names.DT_RECALC_REQUESTED, frozen=True):
    pass


class NodeChangedDetail(OwnDetail, frozen=True):
    node: Annotated[str, Meta(max_length=253)] | None = None
    change: Annotated[str, Meta(max_length=64)] | None = None


class NodeChangedEvent(OwnEvent, tag=names.DT_NODE_CHANGED, frozen=True):
    detail: NodeChangedDetail


class QuotaChangedDetail(OwnDetail, frozen=True):
    quotaName: Annotated[str, Meta(max_length=63)] | None = None


class QuotaChangedEvent(OwnEvent, tag=names.DT_QUOTA_CHANGED, frozen=True):
    detail: QuotaChangedDetail


# -- the safety-net schedule (aws.scheduler) ------------------------------------------------------------


class ScheduledDetail(_Object, frozen=True):
    clusters: Literal["all"] | list[ClusterId] = "all"


class ScheduledEvent(Event, tag=names.DT_SCHEDULED_RECOMPUTE, frozen=True):
    """The fixed input EventBridge Scheduler sends (see infra): not a full EventBridge envelope."""

    source: Literal["aws.scheduler"]
    detail: ScheduledDetail


_EVENTS: dict[str, type[Event]] = {
    str(cls.__struct_config__.tag): cls
    for cls in (
        NodeHealthEvent,
        StateChangeEvent,
        ClusterEvent,
        NodeChangedEvent,
        QuotaChangedEvent,
        SchedulerChangedEvent,
        RecalculationRequestedEvent,
        ScheduledEvent,
    )
}

KNOWN_DETAIL_TYPES = tuple(_EVENTS)


def parse_event(raw: Any, source: str = "event") -> Event:
    """The event as its class, or ``InputError`` naming each bad field (``source`` names the input)."""
    if not isinstance(raw, dict):
        raise InputError(source, [FieldError("", "an event must be a JSON object")])
    detail_type = raw.get("detail-type", raw.get("detail_type"))
    cls = _EVENTS.get(detail_type) if isinstance(detail_type, str) else None
    if cls is None:
        raise InputError(source, [FieldError("detail-type", f"unsupported detail-type {schema.show(detail_type)}")])
    errors: list[FieldError] = jsontext.text_problems(raw)  # a lone surrogate cannot be enqueued (UTF-8)
    if errors:
        raise InputError(source, errors)
    if raw.get("detail_type", detail_type) != detail_type:
        disagrees = f"disagrees with detail-type {schema.show(detail_type)}"
        errors.append(FieldError("detail_type", f"{schema.show(raw['detail_type'])} {disagrees}"))
    data = {**raw, "detail-type": detail_type}
    if cls is ScheduledEvent and data.get("detail", "{}") == "{}":
        data["detail"] = {}  # EventBridge Scheduler's input: no detail, or the string '{}' for no payload
    try:
        event = schema.convert(data, cls, source)
    except InputError as exc:
        errors += exc.errors
    if errors:
        raise InputError(source, errors)
    return event


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


def cluster_ref(event: Event) -> ClusterRef:
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
    if isinstance(event, OwnEvent):
        return ClusterRef(cluster_id=event.detail.cluster, eks_cluster_name=event.detail.eksClusterName)
    return ClusterRef()
