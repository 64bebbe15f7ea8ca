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
from idleshare.adapters.sqs_records import QueuedRecord, RecomputeMessage
from idleshare.parse.errors import InputError
from idleshare.service.recompute import Outcome, Recomputer
from tests.fakes import batch

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
    ids = (leading["MessageDeduplicationId"], trailing["MessageDeduplicationId"])
    assert ids == (f"demo-{window}-lead", f"demo-{window}")
    assert leading["MessageGroupId"] == trailing["MessageGroupId"] == "demo"


def queued(i: int, cluster: str, not_before: float | None = None) -> QueuedRecord:
    """Message ``m<i>`` for ``cluster``: a leading one, or a trailing one due at ``not_before``."""
    body: dict[str, Any] = {"cluster": cluster} | ({"notBefore": not_before} if not_before is not None else {})
    return QueuedRecord(f"m{i}", json.dumps(body), receipt_handle=f"h{i}", queue_arn="arn:q")


class Recomputes(Recomputer):
    """The recompute as the batch sees it: each call noted with the clock it started at."""

    def __init__(self, clock: list[float], takes: float = 0.0) -> None:
        self.clock, self.takes, self.calls = clock, takes, []

    def recompute(self, cluster: str, *, request_id: str | None = None) -> Any:
        self.calls.append((cluster, self.clock[0]))
        self.clock[0] += self.takes
        return Outcome(cluster, 1, False)

    def acknowledge(self, request_id: str, outcome: Any) -> None: ...


@pytest.mark.parametrize(
    ("records", "now", "takes", "calls", "returned"),
    [
        # a window's two messages 3.5 s before its end (110): the leading one is recomputed now, the trailing one
        # handed back for the 4 s left (its cluster waits)
        ([queued(1, "demo"), queued(2, "demo", 110)], 106.5, 0.0, [("demo", 106.5)], [("h2", 4)]),
        # delivered after the window closed, the leading recompute taking 2 s: started before the window's end, it
        # cannot answer the trailing one, which runs again
        ([queued(1, "demo"), queued(2, "demo", 110)], 109.0, 2.0, [("demo", 109.0), ("demo", 111.0)], []),
        # a recompute after the windows' end answers every message of the cluster
        ([queued(1, "demo", 110), queued(2, "demo"), queued(3, "demo", 120), queued(4, "other")], 125.0, 0.0,
         [("demo", 125.0), ("other", 125.0)], []),
        # the next window's messages behind an early trailing one (FIFO: they fail behind it) come back with it in
        # 4 s, not with a failure's backoff; another cluster's is recomputed
        ([queued(1, "demo", 110), queued(2, "demo"), queued(3, "other")], 106.0, 0.0, [("other", 106.0)],
         [("h1", 4), ("h2", 4)]),
        # a far-off notBefore waits one window at most
        ([queued(1, "demo", 1e12)], 100.0, 0.0, [], [("h1", WINDOW)]),
    ],
)  # fmt: skip
def test_the_batch_recomputes_what_is_due_and_hands_back_the_rest_till_due(records, now, takes, calls, returned):
    clock = [now]
    recomputes = Recomputes(clock, takes)
    failed, handed_back = batch(recomputes, records, clock=lambda: clock[0])
    assert recomputes.calls == calls
    assert failed == [f"m{h[1:]}" for h, _ in returned]
    assert handed_back == ([("arn:q", returned)] if returned else [])


def test_the_queued_body_is_the_wire_format_the_recompute_reads_back() -> None:
    leading, trailing = enqueue_at(12.0)
    (explicit,) = enqueue_at(12.0, request_id="console-1")  # an explicit recalculation: one message, due at once
    assert "notBefore" not in explicit["body"] and explicit["body"]["receipt"] is True
    request_id = trailing["body"]["requestId"]
    head = '{"cluster": "demo", "reason": "Node Changed", "requestId": '
    assert leading["MessageBody"] == f'{head}"{request_id}"}}'
    assert trailing["MessageBody"] == f'{head}"{request_id}", "notBefore": {WINDOW * 2}}}'
    assert explicit["MessageBody"] == f'{head}"console-1", "receipt": true}}'
    assert RecomputeMessage.from_body(trailing["MessageBody"]) == RecomputeMessage(
        "demo", "Node Changed", request_id=request_id, not_before=WINDOW * 2
    )
    read = RecomputeMessage.from_body(explicit["MessageBody"])
    assert (read.receipt_for, read.to_body()) == ("console-1", explicit["MessageBody"])
    # a windowed message's requestId is only its own: no receipt is written for it
    assert RecomputeMessage.from_body(trailing["MessageBody"]).receipt_for is None


@pytest.mark.parametrize(
    ("body", "field"),
    [("not json", "not JSON"), ("[1]", "expected a JSON object"), ('{"reason": "x"}', "cluster"),
     ('{"cluster": 3}', "cluster"), ('{"cluster": "a", "requestId": 7}', "requestId"),
     ('{"cluster": "a", "notBefore": "soon"}', "notBefore"), ('{"cluster": "a", "notBefore": true}', "notBefore"),
     ('{"cluster": "a", "receipt": "yes"}', "receipt")],
)  # fmt: skip
def test_an_unreadable_body_is_an_input_error_naming_the_field(body: str, field: str) -> None:
    with pytest.raises(InputError) as caught:
        RecomputeMessage.from_body(body)
    assert field in str(caught.value) and str(caught.value).startswith("recompute message: ")
