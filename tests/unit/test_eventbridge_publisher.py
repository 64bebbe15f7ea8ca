"""idleshare's event bus (``adapters/aws.py`` EventBridgePublisher): PutEvents entry errors classified by their
ErrorCode, the entry-size check before any call, and the watcher's batches cut to EventBridge's limits."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from idleshare import names
from idleshare.adapters.aws import MAX_ENTRY_BYTES, PUT_EVENTS_BATCH, EventBridgePublisher, entry_size
from idleshare.errors import PermanentError, RetryableError

DT = names.DT_POOL_RECOMPUTED


class Bus:
    """A PutEvents client: records each call's entries; ``failures`` maps a call number (1-based) to the
    ErrorCode of each failed entry index in that call."""

    def __init__(self, failures: dict[int, dict[int, str]] | None = None) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.failures = failures or {}

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(Entries)
        failing = self.failures.get(len(self.calls), {})
        results = [{"ErrorCode": failing[i], "ErrorMessage": f"{failing[i]} on entry {i}"} if i in failing
                   else {"EventId": "e"} for i in range(len(Entries))]  # fmt: skip
        return {"FailedEntryCount": len(failing), "Entries": results}


def publisher(bus: Any) -> EventBridgePublisher:
    return EventBridgePublisher(bus, "idleshare", sleep=lambda s: None)


def stubbed_client() -> Any:
    return boto3.client("events", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="y")


# -- publish: one entry ---------------------------------------------------------------------------------------


TRANSIENT = ("ThrottlingException", "InternalFailure", "InternalException", "ServiceUnavailable")
REFUSED = ("ValidationException", "AccessDeniedException", "MalformedDetail", "InvalidArgument", "SomethingNew")


@pytest.mark.parametrize(
    ("code", "kind"),
    [(code, RetryableError) for code in TRANSIENT]
    + [(code, PermanentError) for code in (*REFUSED, "NotAuthorizedForSourceException")],
)
def test_a_failed_entry_is_handed_back_or_refused_by_its_code_and_named(code, kind):
    client = stubbed_client()
    with Stubber(client) as stub:
        stub.add_response(
            "put_events", {"FailedEntryCount": 1, "Entries": [{"ErrorCode": code, "ErrorMessage": "no such thing"}]}
        )
        with pytest.raises(kind) as info:
            publisher(client).publish(DT, {"cluster": "c1"})
    # the class is what the caller reads: a RetryableError is handed back to the queue, a PermanentError consumed
    assert type(info.value) is kind and info.value.operation == "events:PutEvents"
    assert code in str(info.value) and "no such thing" in str(info.value) and DT in str(info.value)


def test_a_published_entry_is_sent_as_given():
    client, arn = stubbed_client(), "arn:aws:eks:eu-west-1:1:cluster/x"
    entry = {"Source": names.EVENT_SOURCE, "DetailType": DT, "Detail": json.dumps({"cluster": "c1"})}
    with Stubber(client) as stub:
        ok = {"FailedEntryCount": 0, "Entries": [{"EventId": "e"}]}
        stub.add_response("put_events", ok, {"Entries": [{**entry, "EventBusName": "idleshare", "Resources": [arn]}]})
        publisher(client).publish(DT, {"cluster": "c1"}, [arn])
        stub.assert_no_pending_responses()


def test_an_oversized_detail_is_refused_without_a_call_counting_the_size_as_eventbridge_does():
    # Given a detail that makes the entry 1 byte over 256 KB
    bus = Bus()
    base = entry_size({"Source": names.EVENT_SOURCE, "DetailType": DT, "Detail": json.dumps({"x": ""})})
    detail = {"x": "a" * (MAX_ENTRY_BYTES - base + 1)}
    with pytest.raises(PermanentError) as info:
        publisher(bus).publish(DT, detail)
    # Then nothing was sent, and the error names the detail-type and the size
    assert bus.calls == []
    assert DT in str(info.value) and f"{MAX_ENTRY_BYTES + 1:,} bytes" in str(info.value)
    # and an entry of exactly the limit goes out
    publisher(bus).publish(DT, {"x": "a" * (MAX_ENTRY_BYTES - base)})
    assert len(bus.calls) == 1
    # the size is counted as EventBridge documents it
    # 9 bytes, 2 (Ü in UTF-8), 10, 5 + 6; the bus name is not counted
    entry = {"Source": "idleshare", "DetailType": "Ü", "Detail": '{"a":"é"}', "Resources": ["arn:x", "arn:yy"]}
    entry["EventBusName"] = "not counted"
    assert entry_size(entry) == 9 + 2 + 10 + 11
    assert entry_size({**entry, "Time": "2026-01-01T00:00:00Z"}) == 9 + 2 + 10 + 11 + 14


# -- publish_batch: the watcher's batches ------------------------------------------------------------------


def events(n: int, size: int = 10) -> list[tuple[str, dict[str, Any]]]:
    return [(names.DT_NODE_CHANGED, {"node": f"n{i}", "pad": "p" * size}) for i in range(n)]


def test_a_batch_is_cut_at_ten_entries_and_at_256_kb_per_call_and_an_oversized_event_is_refused_alone():
    # Given 25 small events, then 5 events of 100 KB each
    bus = Bus()
    small = publisher(bus).publish_batch(events(25))
    assert [len(c) for c in bus.calls] == [10, 10, 5] and small == 3
    bus.calls.clear()
    publisher(bus).publish_batch(events(5, size=100_000))
    # Then no call carries more than 256 KB of entries
    assert [len(c) for c in bus.calls] == [2, 2, 1]
    assert all(sum(entry_size(e) for e in call) <= MAX_ENTRY_BYTES for call in bus.calls)
    assert all(len(call) <= PUT_EVENTS_BATCH for call in bus.calls)
    # and an event too large for any call is refused, naming it, while the others are sent
    bus.calls.clear()
    with pytest.raises(PermanentError) as info:
        publisher(bus).publish_batch([*events(2), (names.DT_NODE_CHANGED, {"pad": "x" * MAX_ENTRY_BYTES}), *events(1)])
    assert [len(c) for c in bus.calls] == [3]
    assert names.DT_NODE_CHANGED in str(info.value) and "bytes" in str(info.value)


def test_a_throttled_entry_is_resent_a_permanent_one_is_not_and_one_throttled_past_the_attempts_stops_the_batch():
    # Given a first call in which entry 1 is throttled and entry 2 is invalid
    bus = Bus({1: {1: "ThrottlingException", 2: "ValidationException"}})
    with pytest.raises(PermanentError) as info:
        publisher(bus).publish_batch(events(4))
    # Then the throttled entry was sent again (alone), the invalid one never again, and the error names it
    assert [[e["Detail"] for e in call] for call in bus.calls][1:] == [[bus.calls[0][1]["Detail"]]]
    assert "ValidationException" in str(info.value) and names.DT_NODE_CHANGED in str(info.value)
    # an entry still failing after the attempts is retryable, and the events after it are never sent
    bus = Bus({1: {0: "ThrottlingException"}, 2: {0: "ThrottlingException"}, 3: {0: "InternalFailure"}})
    with pytest.raises(RetryableError) as info:
        publisher(bus).publish_batch(events(12), attempts=3)
    assert [len(c) for c in bus.calls] == [10, 1, 1] and "InternalFailure" in str(info.value)
