"""Trailing-edge coalescing (names.RECOMPUTE_COALESCE_SECONDS): one message per cluster per window, and
that message's recompute reads the cluster only after the window has closed, so SQS deduplicating the
window's later messages never hides a change made in it."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idleshare import names
from idleshare.adapters.aws import SqsRecomputeQueue
from idleshare.adapters.ports import RecomputeMessage
from idleshare.parse.errors import InputError
from idleshare.service.batch import RecomputeBatch, latest_not_before

WINDOW = names.RECOMPUTE_COALESCE_SECONDS


class Client:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_message(self, **kwargs: Any) -> None:
        self.sent.append(kwargs)


def enqueue_at(t: float, **kwargs: Any) -> dict[str, Any]:
    client = Client()
    SqsRecomputeQueue(client, "url", clock=lambda: t).enqueue("demo", "Node Changed", **kwargs)
    return client.sent[0] | {"body": json.loads(client.sent[0]["MessageBody"])}


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_a_windowed_message_is_due_at_its_windows_end_which_the_queue_delay_reaches(t: float) -> None:
    # Given an event routed at time t
    sent = enqueue_at(t)
    # Then its notBefore is the end of the window t falls in ...
    not_before = sent["body"]["notBefore"]
    assert t < not_before <= t + WINDOW
    # ... every event of that window shares its dedup id (and so its one message) ...
    assert sent["MessageDeduplicationId"] == f"demo-{int(not_before // WINDOW) - 1}"
    # ... and the queue's delivery delay (the window) delivers it no earlier than notBefore
    assert t + WINDOW >= not_before


def test_an_explicit_recalculation_is_not_held_for_a_window() -> None:
    assert "notBefore" not in enqueue_at(12.0, request_id="console-1")["body"]


def record(i: int, body: Any) -> dict[str, Any]:
    return {"messageId": f"m{i}", "body": body if isinstance(body, str) else json.dumps(body)}


def test_the_latest_not_before_per_cluster_is_taken_and_unreadable_records_are_skipped() -> None:
    event = {
        "Records": [
            record(0, {"cluster": "a", "notBefore": 20}),
            record(1, {"cluster": "a", "notBefore": 30}),
            record(2, {"cluster": "b"}),
            record(3, "not json"),
            record(4, {"cluster": "c", "notBefore": True}),
            record(5, {"notBefore": 40}),
        ]
    }
    assert latest_not_before(r["body"] for r in event["Records"]) == {"a": 30.0}


class Waits:
    def __init__(self, now: float) -> None:
        self.now, self.slept = now, []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def waits() -> Waits:
    return Waits(now=100.0)


def batch(waits: Waits, remaining_ms: int = 300_000) -> RecomputeBatch:
    """A batch on the test's clock, in a function with ``remaining_ms`` left."""
    return RecomputeBatch(
        SimpleNamespace(), [], clock=lambda: waits.now, sleep=waits.sleep, remaining_seconds=lambda: remaining_ms / 1000
    )


@pytest.mark.parametrize(
    ("not_before", "remaining_ms", "expected"),
    [
        (None, 300_000, []),  # an explicit request, or a message from before notBefore existed
        (99.0, 300_000, []),  # the window has closed: no wait (the queue delay's normal case)
        (100.0, 300_000, []),
        (104.5, 300_000, [4.5]),  # early: wait for the window's end
        (1e12, 300_000, [float(WINDOW)]),  # a far-off notBefore (a skewed clock) waits one window at most
        (104.5, 62_000, [2.0]),  # never into the time the recompute itself needs
        (104.5, 30_000, []),
    ],
)
def test_a_recompute_handed_a_message_early_waits_for_its_window_bounded(
    waits: Waits, not_before: float | None, remaining_ms: int, expected: list[float]
) -> None:
    waited = batch(waits, remaining_ms).hold(not_before)
    assert waits.slept == pytest.approx(expected)
    assert waited == pytest.approx(sum(expected))


def test_the_queued_body_is_the_wire_format_the_recompute_reads_back() -> None:
    windowed = enqueue_at(12.0)
    explicit = enqueue_at(12.0, request_id="console-1")
    request_id = windowed["body"]["requestId"]
    assert windowed["MessageBody"] == (
        f'{{"cluster": "demo", "reason": "Node Changed", "requestId": "{request_id}", "notBefore": {WINDOW * 2}}}'
    )
    assert explicit["MessageBody"] == (
        '{"cluster": "demo", "reason": "Node Changed", "requestId": "console-1", "receipt": true}'
    )
    assert RecomputeMessage.from_body(windowed["MessageBody"]) == RecomputeMessage(
        "demo", "Node Changed", request_id=request_id, not_before=WINDOW * 2
    )
    read = RecomputeMessage.from_body(explicit["MessageBody"])
    assert (read.receipt_for, read.to_body()) == ("console-1", explicit["MessageBody"])
    # a windowed message's requestId is only its own: no receipt is written for it
    assert RecomputeMessage.from_body(windowed["MessageBody"]).receipt_for is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("not json", "not JSON"),
        ("[1]", "expected a JSON object"),
        ('{"reason": "x"}', "cluster"),
        ('{"cluster": 3}', "cluster"),
        ('{"cluster": "a", "requestId": 7}', "requestId"),
        ('{"cluster": "a", "notBefore": "soon"}', "notBefore"),
        ('{"cluster": "a", "notBefore": true}', "notBefore"),
        ('{"cluster": "a", "receipt": "yes"}', "receipt"),
    ],
)
def test_an_unreadable_body_is_an_input_error_naming_the_field(body: str, field: str) -> None:
    with pytest.raises(InputError) as caught:
        RecomputeMessage.from_body(body)
    assert field in str(caught.value) and str(caught.value).startswith("recompute message: ")
