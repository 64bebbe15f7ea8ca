"""The event parser (idleshare.parse.events): one msgspec Struct per detail-type, declaring what idleshare
reads.

Given each inbound detail-type in a real-shaped payload (events/inbound, AWS's own samples), When it
is parsed, Then its event class comes back; Given a payload broken in one field the router or the
local replay reads, Then ``InputError`` names that field's path; fields nothing reads are not checked.
That the router never loads pydantic is checked in tests/bench/test_bench_coldstart.py (import and
parsing) and tests/unit/test_env.py (its first event's wiring).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from idleshare.parse import events
from idleshare.parse.errors import InputError
from idleshare.parse.events import ClusterRef, cluster_ref, parse_event
from tests.unit.test_fuzz_parsers import FUZZ, mutations

ROOT = Path(__file__).resolve().parents[2]
# AWS's own samples of the HyperPod events, and real-shaped ones of the others
SAMPLES = {p.name: json.loads(p.read_text()) for p in sorted((ROOT / "events" / "inbound").glob("*.json"))}

ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster"

EXPECTED_MODEL = {
    "SageMaker HyperPod Cluster Node Health Event": events.NodeHealthEvent,
    "SageMaker HyperPod Cluster State Change": events.StateChangeEvent,
    "SageMaker HyperPod Cluster Event": events.ClusterEvent,
    "AWS API Call via CloudTrail": events.CloudTrailEvent,
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


def locs(raw: Any) -> list[str]:
    return [loc for loc, _ in errors_of(raw)]


def sample(name: str, **changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(json.dumps(SAMPLES[name]))
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = raw
        for p in parents:
            node = node[p]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return raw


DELETE = object()

# ---------------------------------------------------------------------------------- accepted


def test_every_detail_type_has_a_sample() -> None:
    assert {raw["detail-type"] for raw in SAMPLES.values()} == set(events.KNOWN_DETAIL_TYPES) == set(EXPECTED_MODEL)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_real_shaped_event_parses_to_its_model(name: str) -> None:
    raw = SAMPLES[name]
    event = parse_event(raw)
    assert type(event) is EXPECTED_MODEL[raw["detail-type"]]
    assert event.detail_type == raw["detail-type"] and event.source == raw["source"]
    assert isinstance(cluster_ref(event), ClusterRef)
    with pytest.raises(AttributeError):
        event.detail.not_a_member  # noqa: B018


def test_the_typed_details_and_the_cluster_each_event_names() -> None:
    health = parse_event(SAMPLES["hyperpod-node-health-event.json"])
    assert health.detail.HealthSummary.HealthStatus and health.detail.InstanceId
    assert cluster_ref(health) == ClusterRef(hyperpod_arn=health.detail.ClusterArn)
    change = parse_event(SAMPLES["hyperpod-cluster-state-change.json"])
    assert cluster_ref(change).hyperpod_arn == change.detail.ClusterArn
    cluster_event = parse_event(SAMPLES["hyperpod-cluster-event.json"])
    assert cluster_ref(cluster_event) == ClusterRef(hyperpod_arn=cluster_event.detail.EventDetails.ClusterArn)
    recalc = parse_event(SAMPLES["idleshare-recalculation-requested.json"])
    assert (recalc.detail.cluster, recalc.detail.requestId) == ("demo", "console-1")
    assert cluster_ref(recalc) == ClusterRef(cluster_id="demo")
    by_eks = parse_event(SAMPLES["idleshare-recalculation-requested-by-eks-name.json"])
    assert cluster_ref(by_eks).eks_cluster_name == by_eks.detail.eksClusterName
    assert cluster_ref(parse_event(SAMPLES["schedule-safety-net.json"])) == ClusterRef(everything=True)
    delete = parse_event(SAMPLES["cloudtrail-delete-compute-quota.json"])
    assert cluster_ref(delete) == ClusterRef(everything=True)


def test_a_state_change_names_its_eks_cluster_from_the_orchestrator_arn() -> None:
    eks = "arn:aws:eks:us-west-2:111122223333:cluster/my-eks"
    raw = sample("hyperpod-cluster-state-change.json", detail__Orchestrator={"Eks": {"ClusterArn": eks}})
    assert cluster_ref(parse_event(raw)).eks_cluster_name == "my-eks"


def test_unknown_members_are_accepted_and_ignored() -> None:
    raw = sample("idleshare-node-changed.json", detail__colour="blue", extraTop=1)
    event = parse_event(raw)
    assert event == parse_event(SAMPLES["idleshare-node-changed.json"])
    assert not hasattr(event.detail, "colour") and not hasattr(event, "extraTop")
    schedule = parse_event({**SAMPLES["schedule-safety-net.json"], "note": "x"})
    assert schedule == parse_event(SAMPLES["schedule-safety-net.json"])


def test_the_members_nothing_reads_are_not_checked() -> None:
    # Given an envelope and a detail broken only where nothing reads, When parsed, Then it is accepted as is
    raw = sample(
        HEALTH, id=None, time="not a time", resources=[1], account=5, detail__ClusterName=7, detail__InstanceId="i-1"
    )
    del raw["version"], raw["region"]
    event = parse_event(raw)
    assert event.detail.InstanceId == "i-1" and event.detail.ClusterArn == ARN
    change = sample("hyperpod-cluster-state-change.json", detail__ClusterStatus=DELETE)
    assert cluster_ref(parse_event(change)).hyperpod_arn == ARN
    trail = sample("cloudtrail-update-scheduler-config.json", detail__errorCode=403, detail__responseElements=[])
    assert isinstance(parse_event(trail), events.CloudTrailEvent)
    recalc = sample("idleshare-recalculation-requested.json", detail__reason="x" * 1025)
    assert parse_event(recalc).detail.requestId == "console-1"


def test_the_schedule_defaults_and_explicit_ids() -> None:
    bare = parse_event({"source": "aws.scheduler", "detail-type": "Scheduled Recompute"})
    assert bare.detail.clusters == "all"
    ids = parse_event({"source": "aws.scheduler", "detail-type": "Scheduled Recompute", "detail": {"clusters": ["a"]}})
    assert cluster_ref(ids) == ClusterRef(explicit_ids=("a",))


def test_the_scheduler_string_detail_is_an_empty_object() -> None:
    # EventBridge Scheduler sends detail as the string '{}' when there is no payload
    raw = {"source": "aws.scheduler", "detail-type": "Scheduled Recompute", "detail": "{}"}
    event = parse_event(raw)
    assert event.detail == events.ScheduledDetail() and cluster_ref(event) == ClusterRef(everything=True)


def test_detail_type_may_be_spelled_with_an_underscore() -> None:
    raw = sample("idleshare-node-changed.json")
    raw["detail_type"] = raw.pop("detail-type")
    assert isinstance(parse_event(raw), events.NodeChangedEvent)


def test_the_arn_helpers() -> None:
    assert events.hyperpod_arn_ok(ARN)
    assert not events.hyperpod_arn_ok("arn:aws:eks:us-west-2:111122223333:cluster/x")
    assert not events.hyperpod_arn_ok(ARN + "/extra")
    assert events.eks_name_from_arn("arn:aws:eks:us-west-2:111122223333:cluster/x") == "x"


# ---------------------------------------------------------------------------------- rejected

CLUSTER_ID = "must be a valid cluster id, matching [a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
MISSING = "required field is missing"
HEALTH = "hyperpod-node-health-event.json"
TRAIL = "cloudtrail-create-compute-quota.json"
RECALC = "idleshare-recalculation-requested.json"
SCHEDULE = "schedule-safety-net.json"
CLOUDTRAIL_NAMES = ", ".join(sorted(events.CLOUDTRAIL_EVENT_NAMES))

# id -> (the event, [(where, what)] in the order of the fields)
REFUSED: dict[str, tuple[Any, list[tuple[str, str]]]] = {
    "not-an-object": ([], [("", "an event must be a JSON object")]),
    "no-detail-type": ({}, [("detail-type", "unsupported detail-type null")]),
    "unknown": (sample(HEALTH, **{"detail-type": "Nope"}), [("detail-type", 'unsupported detail-type "Nope"')]),
    "source": (sample(HEALTH, source="aws.ec2"), [("source", 'must be aws.sagemaker (got "aws.ec2")')]),
    "missing": (sample(HEALTH, detail__ClusterArn=DELETE), [("detail.ClusterArn", MISSING)]),
    "type": (sample(HEALTH, detail__ClusterArn=5), [("detail.ClusterArn", "must be a string (got 5)")]),
    "empty-arn": (sample(HEALTH, detail__ClusterArn=""), [("detail.ClusterArn", "must not be empty")]),
    "nested-not-object": (
        sample(HEALTH, detail__HealthSummary="ok"),
        [("detail.HealthSummary", 'must be an object (got "ok")')],
    ),
    "nested-field": (
        sample(HEALTH, detail__HealthSummary__HealthStatus=None),
        [("detail.HealthSummary.HealthStatus", "must be a string (got null)")],
    ),
    "fields-in-order": (
        sample(HEALTH, source=None, detail__InstanceId="", detail__HealthSummary__RepairAction=1),
        [
            ("source", "must be a string (got null)"),
            ("detail.InstanceId", "must not be empty"),
            ("detail.HealthSummary.RepairAction", "must be a string (got 1)"),
        ],
    ),
    "no-detail": (sample(HEALTH, detail=DELETE), [("detail", MISSING)]),
    "orchestrator": (
        sample("hyperpod-cluster-state-change.json", detail__Orchestrator={"Eks": {"ClusterArn": 1}}),
        [("detail.Orchestrator.Eks.ClusterArn", "must be a string (got 1)")],
    ),
    "cluster-event": (
        sample("hyperpod-cluster-event.json", detail__EventDetails__ClusterArn=DELETE),
        [("detail.EventDetails.ClusterArn", MISSING)],
    ),
    "cloudtrail-service": (
        sample(TRAIL, detail__eventSource="ec2.amazonaws.com"),
        [("detail.eventSource", 'must be sagemaker.amazonaws.com (got "ec2.amazonaws.com")')],
    ),
    "cloudtrail-name": (
        sample(TRAIL, detail__eventName="CreateCluster"),
        [("detail.eventName", f'must be one of {CLOUDTRAIL_NAMES} (got "CreateCluster")')],
    ),
    "cloudtrail-params": (
        sample(TRAIL, detail__requestParameters=[]),
        [("detail.requestParameters", "must be an object (got an array)")],
    ),
    "cluster-id": (sample(RECALC, detail__cluster="Demo"), [("detail.cluster", f'{CLUSTER_ID} (got "Demo")')]),
    "cluster-id-newline": (
        sample(RECALC, detail__cluster="demo\n"),
        [("detail.cluster", f'{CLUSTER_ID} (got "demo\\n")')],
    ),
    "request-id": (
        sample(RECALC, detail__requestId="r" * 129),
        [("detail.requestId", "must be at most 128 characters (got 129)")],
    ),
    "eks-name": (
        sample("idleshare-recalculation-requested-by-eks-name.json", detail__eksClusterName=""),
        [("detail.eksClusterName", "must not be empty")],
    ),
    "node": (
        sample("idleshare-node-changed.json", detail__node="n" * 254),
        [("detail.node", "must be at most 253 characters (got 254)")],
    ),
    "quota-name": (
        sample("idleshare-compute-quota-changed.json", detail__quotaName="q" * 64),
        [("detail.quotaName", "must be at most 63 characters (got 64)")],
    ),
    "own-detail": (
        sample("idleshare-scheduler-config-changed.json", detail="x"),
        [("detail", 'must be an object (got "x")')],
    ),
    "own-source": (sample(RECALC, source="aws.scheduler"), [("source", 'must be idleshare (got "aws.scheduler")')]),
    "schedule-clusters": (
        sample(SCHEDULE, detail__clusters=["ok", "BAD", 3]),
        [("detail.clusters[1]", f'{CLUSTER_ID} (got "BAD")'), ("detail.clusters[2]", "must be a string (got 3)")],
    ),
    "schedule-clusters-kind": (
        sample(SCHEDULE, detail__clusters=5),
        [("detail.clusters", "must be a string or an array (got 5)")],
    ),
    "schedule-clusters-word": (
        sample(SCHEDULE, detail__clusters="some"),
        [("detail.clusters", 'must be all (got "some")')],
    ),
    "schedule-detail": (sample(SCHEDULE, detail=None), [("detail", "must be an object (got null)")]),
}


@pytest.mark.parametrize(("raw", "expected"), REFUSED.values(), ids=REFUSED)
def test_each_malformed_event_is_refused_naming_the_field(raw: Any, expected: list[tuple[str, str]]) -> None:
    assert errors_of(raw) == expected


def test_both_spellings_of_detail_type_must_agree() -> None:
    raw = {**SAMPLES["idleshare-recalculation-requested.json"], "detail_type": "Scheduled Recompute"}
    disagree = 'disagrees with detail-type "Recalculation Requested"'
    assert errors_of(raw) == [("detail_type", f'"Scheduled Recompute" {disagree}')]
    assert errors_of({**raw, "detail_type": "Nope"}) == [("detail_type", f'"Nope" {disagree}')]
    assert isinstance(parse_event({**raw, "detail_type": raw["detail-type"]}), events.RecalculationRequestedEvent)


@pytest.mark.parametrize("path", sorted((ROOT / "events" / "malformed").glob("*.json")), ids=lambda p: p.name)
def test_the_checked_in_malformed_events_are_refused(path: Path) -> None:
    expected = json.loads((ROOT / "tests" / "corpus" / "expected.json").read_text())[f"events/malformed/{path.name}"]
    assert any(expected["field"] in loc for loc in locs(json.loads(path.read_text())))


@FUZZ
@given(mutations(SAMPLES))
def test_fuzz_a_refusal_is_in_the_schema_words_not_msgspec(raw: Any) -> None:
    # msgspec says only where it stopped, in its own words (`str`); the walk of the same Struct names each field
    try:
        parse_event(raw)
    except InputError as exc:
        assert exc.errors and not any("`" in e.message for e in exc.errors), exc.errors
