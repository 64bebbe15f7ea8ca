"""The event parser (idleshare.parse.events): stdlib dataclasses and a hand-written validator.

Given each inbound detail-type in a real-shaped payload (events/inbound, AWS's own samples), When it
is parsed, Then the typed model comes back; Given a payload broken in one field, Then ``InputError``
names that field's path; ``time`` is read exactly as pydantic reads a ``datetime`` (checked against
pydantic itself). That the router never loads pydantic is checked in tests/bench/test_bench_coldstart.py
(import and parsing) and tests/unit/test_env.py (its first event's wiring).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from idleshare.parse import events
from idleshare.parse.errors import InputError
from idleshare.parse.events import ClusterRef, cluster_ref, parse_event

ROOT = Path(__file__).resolve().parents[2]
INBOUND = {p.name: json.loads(p.read_text()) for p in sorted((ROOT / "events" / "inbound").glob("*.json"))}
AWS = {p.name: json.loads(p.read_text()) for p in sorted(Path("/work/shared/aws-events").glob("*.json"))}
SAMPLES = INBOUND | {f"aws/{k}": v for k, v in AWS.items()}
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
    if "time" in raw:
        assert event.time.tzinfo is not None and event.time == datetime.fromisoformat(raw["time"])
        assert event.resources == raw["resources"]
    assert isinstance(cluster_ref(event), ClusterRef)
    with pytest.raises(AttributeError):
        event.detail.not_a_member  # noqa: B018


def test_the_typed_details_and_the_cluster_each_event_names() -> None:
    health = parse_event(AWS["hyperpod-node-health-event.json"])
    assert health.detail.HealthSummary.HealthStatus and health.detail.InstanceId
    assert cluster_ref(health) == ClusterRef(hyperpod_arn=health.detail.ClusterArn)
    change = parse_event(INBOUND["hyperpod-cluster-state-change.json"])
    assert cluster_ref(change).hyperpod_arn == change.detail.ClusterArn
    cluster_event = parse_event(AWS["hyperpod-cluster-event.json"])
    assert cluster_ref(cluster_event) == ClusterRef(hyperpod_arn=cluster_event.detail.EventDetails.ClusterArn)
    recalc = parse_event(INBOUND["idleshare-recalculation-requested.json"])
    assert (recalc.detail.cluster, recalc.detail.requestId) == ("demo", "console-1")
    assert cluster_ref(recalc) == ClusterRef(cluster_id="demo")
    by_eks = parse_event(INBOUND["idleshare-recalculation-requested-by-eks-name.json"])
    assert cluster_ref(by_eks).eks_cluster_name == by_eks.detail.eksClusterName
    assert cluster_ref(parse_event(INBOUND["schedule-safety-net.json"])) == ClusterRef(everything=True)
    delete = parse_event(INBOUND["cloudtrail-delete-compute-quota.json"])
    assert cluster_ref(delete) == ClusterRef(everything=True)


def test_a_state_change_names_its_eks_cluster_from_the_orchestrator_arn() -> None:
    eks = "arn:aws:eks:us-west-2:111122223333:cluster/my-eks"
    raw = sample("hyperpod-cluster-state-change.json", detail__Orchestrator={"Eks": {"ClusterArn": eks}})
    assert cluster_ref(parse_event(raw)).eks_cluster_name == "my-eks"


def test_unknown_members_stay_readable_on_details_and_are_ignored_on_envelopes() -> None:
    raw = sample("idleshare-node-changed.json", detail__colour="blue", extraTop=1)
    event = parse_event(raw)
    assert event.detail.colour == "blue" and event.detail.model_extra == {"colour": "blue"}
    assert not hasattr(event, "extraTop")
    schedule = parse_event({**INBOUND["schedule-safety-net.json"], "note": "x"})
    assert schedule.note == "x"  # the schedule's input allows extras, as its model did


def test_the_lax_coercions_the_models_had() -> None:
    raw = sample("idleshare-recalculation-requested.json", resources=("a", "b"), account=b"111122223333")
    raw["time"] = 1_700_000_000
    event = parse_event(raw)
    assert event.resources == ["a", "b"] and event.account == "111122223333"
    assert event.time == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert parse_event({**raw, "time": "2024-01-01"}).time == datetime(2024, 1, 1)


def test_the_schedule_defaults_and_explicit_ids() -> None:
    bare = parse_event({"source": "aws.scheduler", "detail-type": "Scheduled Recompute"})
    assert bare.detail.clusters == "all"
    ids = parse_event({"source": "aws.scheduler", "detail-type": "Scheduled Recompute", "detail": {"clusters": ["a"]}})
    assert cluster_ref(ids) == ClusterRef(explicit_ids=("a",))


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

PATTERN = "String should match pattern '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'"
HEALTH = "hyperpod-node-health-event.json"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param([], [("", "an event must be a JSON object")], id="not-an-object"),
        pytest.param({}, [("detail-type", "unsupported detail-type None")], id="no-detail-type"),
        pytest.param(
            sample(HEALTH, **{"detail-type": "Nope"}), [("detail-type", "unsupported detail-type 'Nope'")], id="unknown"
        ),
        pytest.param(sample(HEALTH, source="aws.ec2"), [("source", "Input should be 'aws.sagemaker'")], id="source"),
        pytest.param(
            sample(HEALTH, detail__ClusterArn=DELETE), [("detail.ClusterArn", "Field required")], id="missing"
        ),
        pytest.param(
            sample(HEALTH, detail__ClusterArn=5), [("detail.ClusterArn", "Input should be a valid string")], id="type"
        ),
        pytest.param(
            sample(HEALTH, detail__ClusterArn=""),
            [("detail.ClusterArn", "String should have at least 1 character")],
            id="empty-arn",
        ),
        pytest.param(
            sample(HEALTH, detail__HealthSummary="ok"),
            [("detail.HealthSummary", "Input should be a valid dictionary or instance of NodeHealthSummary")],
            id="nested-not-object",
        ),
        pytest.param(
            sample(HEALTH, detail__HealthSummary__HealthStatus=None),
            [("detail.HealthSummary.HealthStatus", "Input should be a valid string")],
            id="nested-field",
        ),
        pytest.param(
            sample(HEALTH, id=None, time="not a time", resources=[1]),
            [
                ("id", "Input should be a valid string"),
                ("time", "Input should be a valid datetime or date, invalid character in year"),
                ("resources.0", "Input should be a valid string"),
            ],
            id="envelope-fields-in-order",
        ),
        pytest.param(sample(HEALTH, detail=DELETE), [("detail", "Field required")], id="no-detail"),
        pytest.param(
            sample("hyperpod-cluster-state-change.json", detail__Orchestrator={"Eks": {"ClusterArn": 1}}),
            [("detail.Orchestrator.Eks.ClusterArn", "Input should be a valid string")],
            id="orchestrator",
        ),
        pytest.param(
            sample("hyperpod-cluster-event.json", detail__EventDetails__ClusterArn=DELETE),
            [("detail.EventDetails.ClusterArn", "Field required")],
            id="cluster-event",
        ),
        pytest.param(
            sample("cloudtrail-create-compute-quota.json", detail__eventSource="ec2.amazonaws.com"),
            [("detail.eventSource", "Input should be 'sagemaker.amazonaws.com'")],
            id="cloudtrail-service",
        ),
        pytest.param(
            sample("cloudtrail-create-compute-quota.json", detail__eventName="CreateCluster"),
            [
                (
                    "detail.eventName",
                    "Input should be 'CreateComputeQuota', 'UpdateComputeQuota', 'DeleteComputeQuota', "
                    "'CreateClusterSchedulerConfig', 'UpdateClusterSchedulerConfig' or 'DeleteClusterSchedulerConfig'",
                )
            ],
            id="cloudtrail-name",
        ),
        pytest.param(
            sample("cloudtrail-create-compute-quota.json", detail__requestParameters=[]),
            [("detail.requestParameters", "Input should be a valid dictionary")],
            id="cloudtrail-params",
        ),
        pytest.param(
            sample("idleshare-recalculation-requested.json", detail__cluster="Demo"),
            [("detail.cluster", PATTERN)],
            id="cluster-id",
        ),
        pytest.param(
            sample("idleshare-recalculation-requested.json", detail__cluster="demo\n"),
            [("detail.cluster", PATTERN)],
            id="cluster-id-trailing-newline",
        ),
        pytest.param(
            sample("idleshare-recalculation-requested.json", detail__requestId="r" * 129),
            [("detail.requestId", "String should have at most 128 characters")],
            id="request-id",
        ),
        pytest.param(
            sample("idleshare-recalculation-requested-by-eks-name.json", detail__eksClusterName=""),
            [("detail.eksClusterName", "String should have at least 1 character")],
            id="eks-name",
        ),
        pytest.param(
            sample("idleshare-node-changed.json", detail__node="n" * 254),
            [("detail.node", "String should have at most 253 characters")],
            id="node",
        ),
        pytest.param(
            sample("idleshare-compute-quota-changed.json", detail__quotaName="q" * 64),
            [("detail.quotaName", "String should have at most 63 characters")],
            id="quota-name",
        ),
        pytest.param(
            sample("idleshare-scheduler-config-changed.json", detail="x"),
            [("detail", "Input should be a valid dictionary or instance of OwnDetail")],
            id="own-detail",
        ),
        pytest.param(
            sample("idleshare-recalculation-requested.json", source="aws.scheduler"),
            [("source", "Input should be 'idleshare'")],
            id="own-source",
        ),
        pytest.param(
            sample("idleshare-recalculation-requested.json", detail={1: "x"}),
            [("detail.1", "Keys should be strings")],
            id="extra-key-not-a-string",
        ),
        pytest.param(
            sample("schedule-safety-net.json", detail__clusters=["ok", "BAD", 3]),
            [
                ("detail.clusters.literal['all']", "Input should be 'all'"),
                ("detail.clusters.list[constrained-str].1", PATTERN),
                ("detail.clusters.list[constrained-str].2", "Input should be a valid string"),
            ],
            id="schedule-clusters",
        ),
        pytest.param(
            sample("schedule-safety-net.json", detail=None),
            [("detail", "Input should be a valid dictionary or instance of ScheduledDetail")],
            id="schedule-detail",
        ),
    ],
)
def test_each_malformed_event_is_refused_naming_the_field(raw: Any, expected: list[tuple[str, str]]) -> None:
    assert errors_of(raw) == expected


def test_both_spellings_of_detail_type_must_agree_and_the_underscore_one_picks_the_model() -> None:
    raw = {**INBOUND["idleshare-recalculation-requested.json"], "detail_type": "Scheduled Recompute"}
    assert errors_of(raw) == [
        ("source", "Input should be 'aws.scheduler'"),
        ("detail-type", "Input should be 'Scheduled Recompute'"),
    ]
    ((loc, message),) = errors_of({**raw, "detail_type": "Nope"})
    assert loc == "" and message.startswith("Input tag 'Nope' found using 'detail_type' | 'detail-type'")


@pytest.mark.parametrize("path", sorted((ROOT / "events" / "malformed").glob("*.json")), ids=lambda p: p.name)
def test_the_checked_in_malformed_events_are_refused(path: Path) -> None:
    expected = json.loads((ROOT / "tests" / "corpus" / "expected.json").read_text())[f"events/malformed/{path.name}"]
    assert any(expected["field"] in loc for loc in locs(json.loads(path.read_text())))


# ------------------------------------------------------------------------------ time, as pydantic

DATETIME = TypeAdapter(datetime)


def as_pydantic(value: Any) -> Any:
    try:
        return DATETIME.validate_python(value)
    except ValidationError:
        return "refused"


def as_ours(value: Any) -> Any:
    errors: list[Any] = []
    parsed = events._datetime(value, ("time",), errors)
    return "refused" if errors else parsed


def same(a: Any, b: Any) -> bool:
    if isinstance(a, datetime) and isinstance(b, datetime):
        return a.replace(tzinfo=None) == b.replace(tzinfo=None) and a.utcoffset() == b.utcoffset()
    return bool(a == b)


TIMES = [
    "2026-11-30T10:15:00Z",
    "2025-04-28T16:59:01.123Z",
    "2024-01-01t10:00:00z",
    "2024-01-01 10:00",
    "2024-01-01_10:00:00+01:00",
    "2024-01-01T10:00:00-0530",
    "2024-01-01T10:00:00\u221205:00",
    "2024-01-01T10:00:00.1234567891Z",
    "2024-01-01T10:00:00,5",
    "2024-02-29",
    "2023-02-29",
    "2024-13-01",
    "0000-01-01",
    "2024-01-01T24:00:00",
    "2024-01-01T10:00:60",
    "2024-01-01T10:00:00+24:00",
    "2024-01-01T10:00:00+01",
    "2024-01-01T10",
    "2024-01-01T10:00:00.",
    "2024-01-01T10:00:00 ",
    " 2024-01-01",
    "not a time",
    "",
    "1700000000",
    "+1700000000",
    "-1.9",
    "1.5e9",
    "1e3",
    ".5",
    "20000000001",
    "9999999999999999",
    b"2024-01-01",
    bytearray(b"2024-01-01"),
    1_700_000_000,
    1_700_000_000.5,
    -1.25,
    20_000_000_001,
    253_402_300_800_000,
    10**30,
    float("nan"),
    float("inf"),
    True,
    None,
    [],
]


@pytest.mark.parametrize("value", TIMES, ids=repr)
def test_time_is_read_as_pydantic_reads_a_datetime(value: Any) -> None:
    assert same(as_ours(value), as_pydantic(value))


DIGITS = st.sampled_from("0123456789")


@st.composite
def iso_like(draw: st.DrawFn) -> str:
    two = st.integers(0, 99).map(lambda n: f"{n:02d}")
    s = f"{draw(st.integers(0, 9999)):04d}-{draw(two)}-{draw(two)}"
    if draw(st.booleans()):
        s += draw(st.sampled_from("Tt _x")) + draw(two) + ":" + draw(two)
        if draw(st.booleans()):
            s += ":" + draw(two) + draw(st.sampled_from(["", ".", ","])) + "".join(draw(st.lists(DIGITS, max_size=9)))
        s += draw(st.sampled_from(["", "Z", "z", "x", "+", "-", "\u2212"]))
        if s[-1] in "+-\u2212":
            s += draw(two) + draw(st.sampled_from([":", "", ";"])) + draw(two)
    return s + draw(st.text(st.sampled_from("0123456789:.-Z"), max_size=2))


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        iso_like(),
        st.integers(-(10**15), 10**15),
        st.floats(-1e13, 1e13),
        st.integers(-(10**15), 10**15).map(str),
        st.floats(-1e13, 1e13).map(str),
    )
)
def test_time_agrees_with_pydantic_on_generated_values(value: Any) -> None:
    assert same(as_ours(value), as_pydantic(value))
