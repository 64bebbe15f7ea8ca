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
from idleshare.handlers import recompute

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
    assert recompute.latest_not_before(event) == {"a": 30.0}


class Waits:
    def __init__(self, now: float) -> None:
        self.now, self.slept = now, []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> Waits:
    w = Waits(now=100.0)
    monkeypatch.setattr(recompute, "clock", lambda: w.now)
    monkeypatch.setattr(recompute, "sleep", w.sleep)
    return w


def context(remaining_ms: int = 300_000) -> Any:
    return SimpleNamespace(get_remaining_time_in_millis=lambda: remaining_ms)


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
    waited = recompute.hold_until_window_closed(not_before, context(remaining_ms))
    assert waits.slept == pytest.approx(expected)
    assert waited == pytest.approx(sum(expected))
