"""The event parser (idleshare.parse.events): one msgspec Struct per detail-type, declaring what idleshare reads;
a payload broken where the router or the local replay reads is refused naming that field, the rest is not checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from idleshare.parse import events
from idleshare.parse.errors import InputError
from idleshare.parse.events import ClusterRef, cluster_ref, parse_event
from tests.corpus.make_corpus import DELETE, mutate

ROOT = Path(__file__).resolve().parents[2]
# AWS's own samples of the HyperPod events, and real-shaped ones of the others
SAMPLES = {p.name: json.loads(p.read_text()) for p in sorted((ROOT / "events" / "inbound").glob("*.json"))}

ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster"
EKS = "arn:aws:eks:us-west-2:111122223333:cluster"

EXPECTED_MODEL = {
    "SageMaker HyperPod Cluster Node Health Event": events.NodeHealthEvent,
    "SageMaker HyperPod Cluster State Change": events.StateChangeEvent,
    "SageMaker HyperPod Cluster Event": events.ClusterEvent,
    "Node Changed": events.NodeChangedEvent,
    "Compute Quota Changed": events.QuotaChangedEvent,
    "Scheduler Config Changed": events.SchedulerChangedEvent,
    "Recalculation Requested": events.RecalculationRequestedEvent,
    "Scheduled Recompute": events.ScheduledEvent,
}


def errors_of(raw: Any) -> list[tuple[str, str]]:
    with pytest.raises(InputError) as caught:
        parse_event(raw, source="e")
    assert caught.value.source == "e"
    return [(e.loc, e.message) for e in caught.value.errors]


def sample(name: str, **changes: Any) -> dict[str, Any]:
    """The sample ``name`` with ``a__b=value`` set (removed for ``DELETE``)."""
    raw = SAMPLES[name]
    for path, value in changes.items():
        raw = mutate(raw, tuple(path.split("__")), value)
    return raw


# ---------------------------------------------------------------------------------- accepted
def test_every_detail_type_has_a_sample() -> None:
    assert {raw["detail-type"] for raw in SAMPLES.values()} == set(events.KNOWN_DETAIL_TYPES) == set(EXPECTED_MODEL)


EVERYTHING, DEMO = ClusterRef(everything=True), ClusterRef(cluster_id="demo")
REFS = [
    ("schedule-safety-net", EVERYTHING),
    ("hyperpod-cluster-event hyperpod-node-health-event", ClusterRef(hyperpod_arn=ARN)),
    ("hyperpod-cluster-state-change", ClusterRef(hyperpod_arn=ARN, eks_cluster_name="my-hyperPod-eks-cluster")),
    ("idleshare-compute-quota-changed idleshare-node-changed idleshare-recalculation-requested", DEMO),
    ("idleshare-scheduler-config-changed", DEMO),
    ("idleshare-recalculation-requested-by-eks-name", ClusterRef(eks_cluster_name="my-hyperPod-eks-cluster")),
]
EXPECTED_REF = {f"{name}.json": ref for names, ref in REFS for name in names.split()}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_real_shaped_event_parses_to_its_model_and_names_its_cluster(name: str) -> None:
    raw = SAMPLES[name]
    event = parse_event(raw)
    assert type(event) is EXPECTED_MODEL[raw["detail-type"]]
    assert event.detail_type == raw["detail-type"] and event.source == raw["source"]
    assert cluster_ref(event) == EXPECTED_REF[name]
    with pytest.raises(AttributeError):
        event.detail.not_a_member  # noqa: B018


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            sample("hyperpod-cluster-state-change.json", detail__Orchestrator={"Eks": {"ClusterArn": f"{EKS}/my-eks"}}),
            ClusterRef(hyperpod_arn=ARN, eks_cluster_name="my-eks"),  # from the orchestrator's ARN
        ),
        ({"source": "aws.scheduler", "detail-type": "Scheduled Recompute"}, EVERYTHING),  # clusters: "all"
        # EventBridge Scheduler sends detail as the string '{}' when there is no payload
        ({"source": "aws.scheduler", "detail-type": "Scheduled Recompute", "detail": "{}"}, EVERYTHING),
        (
            {"source": "aws.scheduler", "detail-type": "Scheduled Recompute", "detail": {"clusters": ["a"]}},
            ClusterRef(explicit_ids=("a",)),
        ),
    ],
    ids=["orchestrator", "schedule-bare", "schedule-string-detail", "schedule-ids"],
)
def test_the_cluster_an_event_names(raw: Any, expected: ClusterRef) -> None:
    assert cluster_ref(parse_event(raw)) == expected


def test_unknown_members_and_the_members_nothing_reads_are_not_checked() -> None:
    raw = sample("idleshare-node-changed.json", detail__colour="blue", extraTop=1)
    event = parse_event(raw)
    assert event == parse_event(SAMPLES["idleshare-node-changed.json"])
    assert not hasattr(event.detail, "colour") and not hasattr(event, "extraTop")
    schedule = parse_event({**SAMPLES["schedule-safety-net.json"], "note": "x"})
    assert schedule == parse_event(SAMPLES["schedule-safety-net.json"])
    # an envelope and a detail broken only where nothing reads are accepted as they are
    raw = sample(
        HEALTH, id=None, time="not a time", resources=[1], account=5, detail__ClusterName=7, detail__InstanceId="i-1"
    )
    del raw["version"], raw["region"]
    event = parse_event(raw)
    health = (event.detail.InstanceId, event.detail.ClusterArn, event.detail.HealthSummary.HealthStatus)
    assert health == ("i-1", ARN, "Unhealthy")
    change = sample("hyperpod-cluster-state-change.json", detail__ClusterStatus=DELETE)
    assert cluster_ref(parse_event(change)).hyperpod_arn == ARN
    recalc = sample("idleshare-recalculation-requested.json", detail__reason="x" * 1025)
    assert parse_event(recalc).detail.requestId == "console-1"


def test_the_arn_helpers() -> None:
    assert events.hyperpod_arn_ok(ARN)
    assert not events.hyperpod_arn_ok(f"{EKS}/x")
    assert not events.hyperpod_arn_ok(ARN + "/extra")
    assert events.eks_name_from_arn(f"{EKS}/x") == "x"


# ---------------------------------------------------------------------------------- rejected
CLUSTER_ID = "must be a valid cluster id, matching [a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
MISSING = "required field is missing"
HEALTH = "hyperpod-node-health-event.json"
RECALC = "idleshare-recalculation-requested.json"
SCHEDULE = "schedule-safety-net.json"
STATE, CLUSTER, NODE = (
    "hyperpod-cluster-state-change.json",
    "hyperpod-cluster-event.json",
    "idleshare-node-changed.json",
)
BY_EKS = "idleshare-recalculation-requested-by-eks-name.json"
QUOTA, SCHED = "idleshare-compute-quota-changed.json", "idleshare-scheduler-config-changed.json"

# id -> (the event, [(where, what)] in the order of the fields)
REFUSED = [  # (the sample, the change to it, where, what): one problem, named
    (None, [], "", "an event must be a JSON object"),
    (None, {}, "detail-type", "unsupported detail-type null"),
    (HEALTH, {"detail-type": "Nope"}, "detail-type", 'unsupported detail-type "Nope"'),
    (HEALTH, {"source": "aws.ec2"}, "source", 'must be aws.sagemaker (got "aws.ec2")'),
    (HEALTH, {"detail__ClusterArn": DELETE}, "detail.ClusterArn", MISSING),
    (HEALTH, {"detail__ClusterArn": 5}, "detail.ClusterArn", "must be a string (got 5)"),
    (HEALTH, {"detail__ClusterArn": ""}, "detail.ClusterArn", "must not be empty"),
    (HEALTH, {"detail__HealthSummary": "ok"}, "detail.HealthSummary", 'must be an object (got "ok")'),
    (
        HEALTH,
        {"detail__HealthSummary__HealthStatus": None},
        "detail.HealthSummary.HealthStatus",
        "must be a string (got null)",
    ),
    (HEALTH, {"detail": DELETE}, "detail", MISSING),
    (
        STATE,
        {"detail__Orchestrator": {"Eks": {"ClusterArn": 1}}},
        "detail.Orchestrator.Eks.ClusterArn",
        "must be a string (got 1)",
    ),
    (CLUSTER, {"detail__EventDetails__ClusterArn": DELETE}, "detail.EventDetails.ClusterArn", MISSING),
    (RECALC, {"detail__cluster": "Demo"}, "detail.cluster", f'{CLUSTER_ID} (got "Demo")'),
    (RECALC, {"detail__cluster": "demo\n"}, "detail.cluster", f'{CLUSTER_ID} (got "demo\\n")'),
    (RECALC, {"detail__requestId": "r" * 129}, "detail.requestId", "must be at most 128 characters (got 129)"),
    (BY_EKS, {"detail__eksClusterName": ""}, "detail.eksClusterName", "must not be empty"),
    (NODE, {"detail__node": "n" * 254}, "detail.node", "must be at most 253 characters (got 254)"),
    (QUOTA, {"detail__quotaName": "q" * 64}, "detail.quotaName", "must be at most 63 characters (got 64)"),
    (SCHED, {"detail": "x"}, "detail", 'must be an object (got "x")'),
    (RECALC, {"source": "aws.scheduler"}, "source", 'must be idleshare (got "aws.scheduler")'),
    (SCHEDULE, {"detail__clusters": 5}, "detail.clusters", "must be a string or an array (got 5)"),
    (SCHEDULE, {"detail__clusters": "some"}, "detail.clusters", 'must be all (got "some")'),
    (SCHEDULE, {"detail": None}, "detail", "must be an object (got null)"),
]


@pytest.mark.parametrize(
    ("name", "changes", "where", "what"), REFUSED, ids=[f"{r[2]}-{i}" for i, r in enumerate(REFUSED)]
)
def test_each_malformed_event_is_refused_naming_the_field(
    name: str | None, changes: Any, where: str, what: str
) -> None:
    assert errors_of(sample(name, **changes) if name else changes) == [(where, what)]


def test_a_sagemaker_cloudtrail_call_is_an_unsupported_detail_type() -> None:
    # no rule delivers SageMaker's CloudTrail calls (idleshare's quotas are its own): one from an old archive is
    # unknown, whatever call it reports
    trail = json.loads((ROOT / "events" / "malformed" / "cloudtrail-create-compute-quota.json").read_text())
    assert (trail["source"], trail["detail"]["eventSource"]) == ("aws.sagemaker", "sagemaker.amazonaws.com")
    assert "AWS API Call via CloudTrail" not in events.KNOWN_DETAIL_TYPES
    assert errors_of(trail) == [("detail-type", 'unsupported detail-type "AWS API Call via CloudTrail"')]


def test_every_problem_is_named_in_the_order_of_the_fields() -> None:
    assert errors_of(sample(HEALTH, source=None, detail__InstanceId="", detail__HealthSummary__RepairAction=1)) == [
        ("source", "must be a string (got null)"),
        ("detail.InstanceId", "must not be empty"),
        ("detail.HealthSummary.RepairAction", "must be a string (got 1)"),
    ]
    assert errors_of(sample(SCHEDULE, detail__clusters=["ok", "BAD", 3])) == [
        ("detail.clusters[1]", f'{CLUSTER_ID} (got "BAD")'),
        ("detail.clusters[2]", "must be a string (got 3)"),
    ]


def test_detail_type_may_be_spelled_with_an_underscore_and_both_spellings_must_agree() -> None:
    raw = {**SAMPLES["idleshare-recalculation-requested.json"], "detail_type": "Scheduled Recompute"}
    disagree = 'disagrees with detail-type "Recalculation Requested"'
    assert errors_of(raw) == [("detail_type", f'"Scheduled Recompute" {disagree}')]
    assert errors_of({**raw, "detail_type": "Nope"}) == [("detail_type", f'"Nope" {disagree}')]
    assert isinstance(parse_event({**raw, "detail_type": raw["detail-type"]}), events.RecalculationRequestedEvent)
    alone = sample("idleshare-node-changed.json")  # detail_type may stand in for detail-type
    alone["detail_type"] = alone.pop("detail-type")
    assert isinstance(parse_event(alone), events.NodeChangedEvent)
