"""Leading- and trailing-edge coalescing (timings.COALESCE_SECONDS): each change sends a leading message (recomputed at
once) and a trailing one (recomputed once its window has closed), both deduplicated per cluster and window, so an
isolated change is in Kueue within one recompute, a window costs at most two, and SQS deduplicating the window's
later messages never hides a change made in it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idleshare import timings
from idleshare.adapters.aws import SqsRecomputeQueue
from idleshare.adapters.ports import QueuedRecord, RecomputeMessage
from idleshare.parse.errors import InputError
from tests.unit.test_recompute_reliability import Returns, _deliver_each, deliver_all

WINDOW = timings.COALESCE_SECONDS


class Client:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_message(self, **kwargs: Any) -> None:
        self.sent.append(kwargs)

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.sent.extend({"QueueUrl": QueueUrl, **e} for e in Entries)
        return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}


def enqueue_at(t: float, **kwargs: Any) -> list[dict[str, Any]]:
    client = Client()
    SqsRecomputeQueue(client, "url", clock=lambda: t).enqueue("demo", "Node Changed", **kwargs)
    return [m | {"body": json.loads(m["MessageBody"])} for m in client.sent]


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_a_change_sends_a_leading_and_a_trailing_message_per_window(t: float) -> None:
    # Given an event routed at time t
    leading, trailing = enqueue_at(t)
    # Then the leading message is due at once, the trailing one at the end of the window t falls in ...
    assert "notBefore" not in leading["body"]
    not_before = trailing["body"]["notBefore"]
    assert t < not_before <= t + WINDOW
    # ... and every event of that window shares their two dedup ids (so at most two messages a window), one group
    window = int(not_before // WINDOW) - 1
    assert (leading["MessageDeduplicationId"], trailing["MessageDeduplicationId"]) == (
        f"demo-{window}-lead",
        f"demo-{window}",
    )
    assert leading["MessageGroupId"] == trailing["MessageGroupId"] == "demo"


def test_an_explicit_recalculation_is_one_message_due_at_once() -> None:
    (sent,) = enqueue_at(12.0, request_id="console-1")
    assert "notBefore" not in sent["body"] and sent["body"]["receipt"] is True


def queued(i: int, cluster: str, not_before: float | None = None) -> QueuedRecord:
    """Message ``m<i>`` for ``cluster``: a leading one, or a trailing one due at ``not_before``."""
    body: dict[str, Any] = {"cluster": cluster} | ({"notBefore": not_before} if not_before is not None else {})
    return QueuedRecord(f"m{i}", json.dumps(body), receipt_handle=f"h{i}", queue_arn="arn:q")


class Recomputes:
    """The recompute as the batch sees it: each call noted with the clock it started at."""

    def __init__(self, clock: list[float], takes: float = 0.0) -> None:
        self.clock, self.takes, self.calls = clock, takes, []

    def recompute(self, cluster: str, *, request_id: str | None = None) -> Any:
        from idleshare.service.recompute import Outcome

        self.calls.append((cluster, self.clock[0]))
        self.clock[0] += self.takes
        return Outcome(cluster, 1, False)

    def acknowledge(self, request_id: str, outcome: Any) -> None: ...

    def run_batch(self, records, deliver, **options):
        from idleshare.service.recompute import Recomputer

        return Recomputer.run_batch(self, records, deliver, **options)  # type: ignore[arg-type]


def run(records: list[QueuedRecord], now: float, takes: float = 0.0) -> tuple[Recomputes, dict[str, Any], Returns]:
    clock = [now]
    recomputes, returns = Recomputes(clock, takes), Returns()
    answer = recomputes.run_batch(records, _deliver_each(records), returns=returns, clock=lambda: clock[0])
    return recomputes, answer, returns


def test_the_leading_message_recomputes_at_once_and_the_early_trailing_one_is_handed_back_until_its_window_ends():
    # Given a window's two messages delivered 3.5 s into a window ending at 110
    records = [queued(1, "demo"), queued(2, "demo", 110)]
    recomputes, answer, returns = run(records, now=106.5)
    # Then the leading one is recomputed now, the trailing one handed back for the 4 s left (its cluster waits)
    assert recomputes.calls == [("demo", 106.5)]
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == ["m2"]
    assert returns.calls == [("arn:q", [("h2", 4)])]


def test_a_trailing_message_due_recomputes_even_after_a_leading_one_in_the_same_batch():
    # Given the two messages delivered after the window closed, the leading recompute taking 2 s
    records = [queued(1, "demo"), queued(2, "demo", 110)]
    recomputes, answer, _ = run(records, now=109.0, takes=2.0)
    # Then the leading recompute started before the window's end cannot answer the trailing one: it runs again
    assert recomputes.calls == [("demo", 109.0), ("demo", 111.0)]
    assert answer["batchItemFailures"] == []


def test_a_recompute_after_the_windows_end_answers_every_message_of_the_cluster():
    records = [queued(1, "demo", 110), queued(2, "demo"), queued(3, "demo", 120), queued(4, "other")]
    recomputes, answer, _ = run(records, now=125.0)
    assert recomputes.calls == [("demo", 125.0), ("other", 125.0)]
    assert answer["batchItemFailures"] == []


def test_the_records_behind_an_early_trailing_one_come_back_with_it():
    # Given a trailing message 4 s early followed by the next window's messages of the same cluster (FIFO: they
    # fail behind it) and another cluster's
    records = [queued(1, "demo", 110), queued(2, "demo"), queued(3, "other")]

    clock = [106.0]
    recomputes, returns = Recomputes(clock), Returns()
    recomputes.run_batch(records, deliver_all(records), returns=returns, clock=lambda: clock[0])
    # Then both of demo's come back in 4 s (not with a failure's backoff), and other is recomputed
    assert returns.calls == [("arn:q", [("h1", 4), ("h2", 4)])]
    assert recomputes.calls == [("other", 106.0)]


def test_a_far_off_not_before_waits_one_window_at_most():
    records = [queued(1, "demo", 1e12)]
    _, _, returns = run(records, now=100.0)
    assert returns.calls == [("arn:q", [("h1", WINDOW)])]


def test_the_queued_body_is_the_wire_format_the_recompute_reads_back() -> None:
    leading, trailing = enqueue_at(12.0)
    (explicit,) = enqueue_at(12.0, request_id="console-1")
    request_id = trailing["body"]["requestId"]
    assert trailing["MessageBody"] == (
        f'{{"cluster": "demo", "reason": "Node Changed", "requestId": "{request_id}", "notBefore": {WINDOW * 2}}}'
    )
    assert leading["MessageBody"] == f'{{"cluster": "demo", "reason": "Node Changed", "requestId": "{request_id}"}}'
    assert explicit["MessageBody"] == (
        '{"cluster": "demo", "reason": "Node Changed", "requestId": "console-1", "receipt": true}'
    )
    assert RecomputeMessage.from_body(trailing["MessageBody"]) == RecomputeMessage(
        "demo", "Node Changed", request_id=request_id, not_before=WINDOW * 2
    )
    read = RecomputeMessage.from_body(explicit["MessageBody"])
    assert (read.receipt_for, read.to_body()) == ("console-1", explicit["MessageBody"])
    # a windowed message's requestId is only its own: no receipt is written for it
    assert RecomputeMessage.from_body(trailing["MessageBody"]).receipt_for is None


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
