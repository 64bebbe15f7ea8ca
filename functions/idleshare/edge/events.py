"""Every inbound event of SPEC §4 as a typed model (Powertools parser models, typed ``detail``).

``parse_event(raw)`` returns one of the models below or raises ``InputError`` naming the field.
``clusters_of(event)`` says which cluster the event concerns, in the terms the event itself uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from idleshare import names
from idleshare.edge.errors import FieldError, InputError

_CLUSTER_ID = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


class EventBridgeModel(BaseModel):
    """The EventBridge envelope: the fields, aliases and validator of Powertools'
    ``aws_lambda_powertools.utilities.parser.models.EventBridgeModel``, declared here because importing
    that module loads every Powertools parser model (about half of ``import boto3``'s time), a cold-start
    cost the router does not need. ``tests/bench/test_bench_coldstart.py`` keeps the two in step."""

    model_config = ConfigDict(populate_by_name=True, defer_build=True)

    version: str
    id: str
    source: str
    account: str
    time: datetime
    region: str
    resources: list[str]
    detail_type: str = Field(..., alias="detail-type")
    detail: dict[str, Any] | type[BaseModel] | BaseModel
    replay_name: str | None = Field(None, alias="replay-name")

    @field_validator("detail", mode="before")
    @classmethod
    def validate_detail(cls, v: Any, fields: Any) -> Any:
        # EventBridge Scheduler sends detail as the string '{}' when there is no payload
        return {} if fields.data.get("source") == "aws.scheduler" and v == "{}" else v


class _Detail(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


# -- HyperPod (aws.sagemaker) ------------------------------------------------------------------


class NodeHealthSummary(_Detail):
    HealthStatus: str
    HealthStatusReason: str | None = None
    RepairAction: str | None = None


class NodeHealthDetail(_Detail):
    ClusterArn: str = Field(min_length=1)
    ClusterName: str | None = None
    InstanceId: str = Field(min_length=1)
    HealthSummary: NodeHealthSummary


class EksRef(_Detail):
    ClusterArn: str


class HyperPodOrchestrator(_Detail):
    Eks: EksRef | None = None


class StateChangeDetail(_Detail):
    ClusterArn: str = Field(min_length=1)
    ClusterName: str | None = None
    ClusterStatus: str
    Orchestrator: HyperPodOrchestrator | None = None


class ClusterEventInner(_Detail):
    ClusterArn: str = Field(min_length=1)
    ClusterName: str | None = None
    InstanceId: str | None = None
    ResourceType: str | None = None
    Description: str | None = None


class ClusterEventDetail(_Detail):
    EventDetails: ClusterEventInner


class NodeHealthEvent(EventBridgeModel):
    source: Literal["aws.sagemaker"]
    detail_type: Literal["SageMaker HyperPod Cluster Node Health Event"] = Field(alias="detail-type")
    detail: NodeHealthDetail


class StateChangeEvent(EventBridgeModel):
    source: Literal["aws.sagemaker"]
    detail_type: Literal["SageMaker HyperPod Cluster State Change"] = Field(alias="detail-type")
    detail: StateChangeDetail


class ClusterEvent(EventBridgeModel):
    source: Literal["aws.sagemaker"]
    detail_type: Literal["SageMaker HyperPod Cluster Event"] = Field(alias="detail-type")
    detail: ClusterEventDetail


# -- CloudTrail API calls ------------------------------------------------------------------------


class CloudTrailDetail(_Detail):
    eventSource: Literal["sagemaker.amazonaws.com"]
    eventName: Literal[
        "CreateComputeQuota",
        "UpdateComputeQuota",
        "DeleteComputeQuota",
        "CreateClusterSchedulerConfig",
        "UpdateClusterSchedulerConfig",
        "DeleteClusterSchedulerConfig",
    ]
    requestParameters: dict[str, Any] | None = None
    responseElements: dict[str, Any] | None = None
    errorCode: str | None = None


class CloudTrailEvent(EventBridgeModel):
    source: Literal["aws.sagemaker"]
    detail_type: Literal["AWS API Call via CloudTrail"] = Field(alias="detail-type")
    detail: CloudTrailDetail


# -- idleshare's own -----------------------------------------------------------------------------


class OwnDetail(_Detail):
    """Names the cluster by idleshare id (``cluster``) or by EKS cluster name (``eksClusterName``)."""

    cluster: str | None = Field(default=None, pattern=_CLUSTER_ID)
    eksClusterName: str | None = Field(default=None, min_length=1, max_length=100)
    requestId: str | None = Field(default=None, max_length=128)
    reason: str | None = Field(default=None, max_length=1024)


class NodeChangedDetail(OwnDetail):
    node: str | None = Field(default=None, max_length=253)
    change: str | None = Field(default=None, max_length=64)


class QuotaChangedDetail(OwnDetail):
    quotaName: str | None = Field(default=None, max_length=63)


class OwnEvent(EventBridgeModel):
    source: Literal["idleshare"]


class NodeChangedEvent(OwnEvent):
    detail_type: Literal["Node Changed"] = Field(alias="detail-type")
    detail: NodeChangedDetail


class QuotaChangedEvent(OwnEvent):
    detail_type: Literal["Compute Quota Changed"] = Field(alias="detail-type")
    detail: QuotaChangedDetail


class SchedulerChangedEvent(OwnEvent):
    detail_type: Literal["Scheduler Config Changed"] = Field(alias="detail-type")
    detail: OwnDetail


class RecalculationRequestedEvent(OwnEvent):
    detail_type: Literal["Recalculation Requested"] = Field(alias="detail-type")
    detail: OwnDetail


# -- the safety-net schedule -----------------------------------------------------------------------


class ScheduledDetail(_Detail):
    clusters: Literal["all"] | list[Annotated[str, Field(pattern=_CLUSTER_ID)]] = "all"


class ScheduledEvent(BaseModel):
    """The fixed input EventBridge Scheduler sends (see infra): not a full EventBridge envelope."""

    model_config = ConfigDict(populate_by_name=True, extra="allow", defer_build=True)
    source: Literal["aws.scheduler"]
    detail_type: Literal["Scheduled Recompute"] = Field(alias="detail-type")
    detail: ScheduledDetail = ScheduledDetail()


InboundEvent = Annotated[
    NodeHealthEvent
    | StateChangeEvent
    | ClusterEvent
    | CloudTrailEvent
    | NodeChangedEvent
    | QuotaChangedEvent
    | SchedulerChangedEvent
    | RecalculationRequestedEvent
    | ScheduledEvent,
    Field(discriminator="detail_type"),
]
# One model per detail-type. Every model is ``defer_build``: its validator is built the first time an
# event of its type arrives, so a cold start builds one validator, not all nine (``make bench``).
_MODELS: dict[str, type[BaseModel]] = {
    get_args(model.model_fields["detail_type"].annotation)[0]: model for model in get_args(get_args(InboundEvent)[0])
}


@cache
def _union() -> TypeAdapter[Any]:
    """The whole discriminated union, for the odd event that carries both ``detail-type`` and ``detail_type``."""
    return TypeAdapter(InboundEvent)


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
    both = "detail-type" in raw and "detail_type" in raw
    try:
        if both:  # the union picks the tag (``detail_type`` first) and reports it in each error's loc
            return _union().validate_python(raw)
        return _MODELS[detail_type].model_validate(raw)
    except ValidationError as exc:
        errors = []
        for e in exc.errors():
            loc = [str(p) for p in e["loc"]][1 if both else 0 :]  # drop the union tag
            errors.append(FieldError(".".join(loc), e["msg"]))
        raise InputError(source, errors) from None


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
