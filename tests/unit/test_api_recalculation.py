"""Explicit recalculation requests end to end, in process: POST /clusters/{c}/recalculate -> idleshare's bus ->
router -> SQS FIFO (moto) -> recompute -> receipt -> GET /clusters/{c}/recalculations/{id}."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from devkit import sqs as event_source
from idleshare import names
from idleshare.adapters.aws import SqsRecomputeQueue
from idleshare.handlers import recompute, router
from idleshare.runtime import wiring
from idleshare.service.admin import Admin
from tests.admin_api import CONTEXT, World, call
from tests.aws_env import create_idempotency_table, create_table, fifo_queue
from tests.builders import quota_body

INBOUND = Path(__file__).parents[2] / "events" / "inbound"


def envelope(detail_type: str, detail: dict[str, Any]) -> dict[str, Any]:
    """The event as EventBridge delivers it to the router's rule target."""
    event = {"version": "0", "id": str(uuid.uuid4()), "detail-type": detail_type, "source": names.EVENT_SOURCE}
    event |= {"account": "111122223333", "time": "2026-12-01T10:00:00Z", "region": "us-east-1", "resources": []}
    return event | {"detail": detail}


class Pipeline(World):
    """World + idleshare's bus (in order), the router, the recompute queue (moto SQS FIFO) and the recompute handler;
    ``synchronous``: delivered and drained as soon as something is published (faster than any poll)."""

    def __init__(self, table: Any) -> None:
        super().__init__(table)
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        self.queue_url = fifo_queue(self.sqs, f"recompute-{uuid.uuid4().hex[:8]}.fifo")
        self.now = [1_000_000.0]
        self.bus: list[dict[str, Any]] = []
        self.synchronous = False
        self.deps.queue = SqsRecomputeQueue(self.sqs, self.queue_url, clock=lambda: self.now[0])
        self.deps.publisher = self
        self.publisher = self  # type: ignore[assignment]

    # EventPublisher
    def publish(self, detail_type: str, detail: dict[str, Any], resources: Any = ()) -> None:
        self.bus.append(envelope(detail_type, detail))
        if self.synchronous:
            self.deliver()
            self.drain()

    @property
    def events(self) -> list[tuple[str, dict[str, Any]]]:
        return [(e["detail-type"], e["detail"]) for e in self.bus]

    def deliver(self) -> None:
        """EventBridge: every event published so far reaches the router (the rule matches idleshare's own)."""
        pending, self.bus = self.bus, []
        for event in pending:
            router.handler(event, CONTEXT)

    def messages(self) -> list[dict[str, Any]]:
        return self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages", [])

    def drain(self, messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The SQS event source: one batch (``messages``, or what the queue holds) to the recompute handler;
        successes are deleted. Its ``batchItemFailures`` and ``records``."""
        batch = event_source.drain(
            self.sqs, self.queue_url, recompute.handler, CONTEXT, messages=messages, max_batches=1
        )
        return batch.response


@pytest.fixture
def pipe(aws: None, request: pytest.FixtureRequest) -> Iterator[Pipeline]:
    table = create_table(boto3.resource("dynamodb", region_name="us-east-1"), f"r-{abs(hash(request.node.nodeid))}")
    try:
        p = Pipeline(table)
        call("POST", "/clusters/demo/compute-quotas", quota_body("a"))
        call("POST", "/clusters/demo/compute-quotas", quota_body("b", strategy="Lend"))
        p.bus.clear()
        yield p
    finally:
        wiring.install(None)
        table.delete()


def test_recalculate_is_202_with_a_request_id_and_puts_the_request_on_the_bus(pipe: Pipeline) -> None:
    reply = call("POST", "/clusters/demo/recalculate", {"reason": "new nodes racked"})
    assert (reply.status, reply.body["status"], reply.body["cluster"]) == (202, "Requested", "demo")
    detail = {"cluster": "demo", "requestId": reply.body["requestId"], "reason": "new nodes racked"}
    assert pipe.events == [(names.DT_RECALC_REQUESTED, detail)]
    assert call("POST", "/clusters/demo/recalculate").status == 202  # no body at all is fine


@pytest.mark.parametrize(
    ("body", "query", "status", "field"),
    [
        ({"reason": 5}, None, 422, "reason"),
        ({"reason": "x" * 1025}, None, 422, "reason"),
        ({"cluster": "other"}, None, 422, "cluster"),
        (None, {"waitSeconds": "26"}, 400, "waitSeconds"),
        (None, {"waitSeconds": "-1"}, 400, "waitSeconds"),
    ],
)
def test_a_bad_recalculate_request_is_refused_and_publishes_nothing(
    pipe: Pipeline, body: Any, query: Any, status: int, field: str
) -> None:
    reply = call("POST", "/clusters/demo/recalculate", body, query=query)
    assert (reply.status, [e["field"] for e in reply.body["errors"]]) == (status, [field])
    assert pipe.events == []
    assert call("POST", "/clusters/nowhere/recalculate").status == 404 and pipe.events == []


def test_the_receipt_appears_once_the_recompute_ran(pipe: Pipeline) -> None:
    request_id = call("POST", "/clusters/demo/recalculate").body["requestId"]
    assert call("GET", f"/clusters/demo/recalculations/{request_id}").status == 404  # not before the recompute
    pipe.deliver()
    # the SQS message carries the request id and asks for a receipt
    [message] = pipe.messages()
    want = {"cluster": "demo", "reason": "", "requestId": request_id, "receipt": True}
    assert json.loads(message["Body"]) | {"reason": ""} == want
    assert pipe.drain([message])["batchItemFailures"] == []
    # the receipt says Done, with the generation it produced
    reply = call("GET", f"/clusters/demo/recalculations/{request_id}")
    receipt = {"requestId": request_id, "cluster": "demo", "status": "Done", "generation": 1, "changed": True}
    blank = {"completedAt": "", "message": ""}
    assert (reply.status, reply.body | blank) == (200, receipt | blank)
    assert reply.body["completedAt"] and "ml.p5.48xlarge" in reply.body["message"]
    assert call("GET", "/clusters/demo/pool").body["generation"] == 1
    # a request sent from the EventBridge console (docs/operations.md's "Send events" JSON) gets one too
    router.handler(json.loads((INBOUND / "idleshare-recalculation-requested.json").read_text()), CONTEXT)
    pipe.drain()
    reply = call("GET", "/clusters/demo/recalculations/console-1")
    assert (reply.status, reply.body["status"]) == (200, "Done")


def test_waiting_returns_200_with_the_outcome_when_the_receipt_arrives_in_time(pipe: Pipeline) -> None:
    pipe.synchronous = True
    reply = call("POST", "/clusters/demo/recalculate", query={"waitSeconds": "5"})
    assert reply.status == 200
    assert (reply.body["status"], reply.body["generation"], reply.body["changed"]) == ("Done", 1, True)
    again = call("POST", "/clusters/demo/recalculate", {"reason": "again"}, query={"waitSeconds": "5"})
    assert (again.status, again.body["generation"], again.body["changed"]) == (200, 1, False)


def test_an_event_triggered_recompute_keeps_no_receipt_nor_idempotency_record(pipe: Pipeline, idempotent: Any) -> None:
    # Given a quota change made through the API (its event triggers a recompute)
    call("POST", "/clusters/demo/compute-quotas", quota_body("c", gpus=4))
    assert [e[0] for e in pipe.events] == [names.DT_QUOTA_CHANGED]
    pipe.deliver()
    messages = pipe.messages()  # the window's leading and trailing message
    assert len(messages) == 2 and not any("receipt" in json.loads(m["Body"]) for m in messages)
    pipe.drain(messages)
    # Then the pool moved, no receipt was written and no idempotency record kept (level-triggered)
    assert call("GET", "/clusters/demo/pool").body["generation"] == 1
    assert [i for i in pipe.items() if i["sk"].startswith("RECALC#")] == [] and idempotent.scan()["Items"] == []
    # And a recompute that changes nothing writes nothing either (no pool, no history, no receipt)
    before = pipe.items()
    pipe.now[0] += 60  # a new dedup window
    router.handler(envelope(names.DT_NODE_CHANGED, {"cluster": "demo"}), CONTEXT)
    assert pipe.drain()["records"] == 2  # leading and trailing, one recompute
    assert pipe.items() == before


def test_explicit_requests_are_never_deduplicated_away_and_a_coalesced_burst_answers_every_one(pipe: Pipeline) -> None:
    # Given, within one dedup window, two plain events and three explicit requests for the same cluster
    for _ in range(2):
        router.handler(envelope(names.DT_NODE_CHANGED, {"cluster": "demo"}), CONTEXT)
    ids = [call("POST", "/clusters/demo/recalculate").body["requestId"] for _ in range(3)]
    pipe.deliver()
    # Then the queue holds the window's two plain messages (leading, trailing) and one per explicit request
    messages = pipe.messages()
    bodies = [json.loads(m["Body"]) for m in messages]
    assert sorted(b.get("requestId") for b in bodies if b.get("receipt")) == sorted(ids)
    assert len([b for b in bodies if not b.get("receipt")]) == 2
    # And one recompute for the whole burst answers every request
    out = pipe.drain(messages)
    assert (out["records"], out["batchItemFailures"]) == (5, [])
    answers = [call("GET", f"/clusters/demo/recalculations/{i}").body for i in ids]
    assert {(a["status"], a["generation"]) for a in answers} == {("Done", 1)}
    assert len(pipe.store.list_history("demo")) == 1


def test_a_failed_recompute_answers_failed_keeps_no_record_then_done_on_retry(pipe: Pipeline, idempotent: Any) -> None:
    request_id = call("POST", "/clusters/demo/recalculate").body["requestId"]
    pipe.deliver()
    pipe.kube.down = True
    assert len(pipe.drain()["batchItemFailures"]) == 1  # SQS retries it
    failed = call("GET", f"/clusters/demo/recalculations/{request_id}").body
    assert failed["status"] == "Failed" and "connection refused" in failed["message"]
    assert idempotent.scan()["Items"] == []  # deleted with the failure: a retry is not a duplicate
    pipe.kube.down = False
    assert pipe.drain()["batchItemFailures"] == []
    done = call("GET", f"/clusters/demo/recalculations/{request_id}").body
    assert (done["status"], done["generation"]) == ("Done", 1)
    assert [i["status"] for i in idempotent.scan()["Items"]] == ["COMPLETED"]


def test_the_dedup_id_of_an_explicit_request_is_bounded_whatever_the_id_holds() -> None:
    sent: list[dict[str, Any]] = []

    class Client:
        def send_message(self, **kwargs: Any) -> None:
            sent.append(kwargs)

        def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            sent.extend(Entries)
            return {"Successful": [{"Id": e["Id"]} for e in Entries]}

    queue = SqsRecomputeQueue(Client(), "url", clock=lambda: 5.0)
    queue.enqueue("c" * 63, "Recalculation Requested", request_id="ä b/" * 32)
    queue.enqueue("c" * 63, "Recalculation Requested", request_id="ä b/" * 31)
    queue.enqueue("c" * 63, "Node Changed")  # the window's leading and trailing message
    ids = [m["MessageDeduplicationId"] for m in sent]
    assert len(set(ids)) == 4 and all(len(d) <= 128 and d.isascii() and " " not in d for d in ids)
    assert json.loads(sent[0]["MessageBody"])["requestId"] == "ä b/" * 32


# ------------------------------------------------------------------------------ waiting (service level)
class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_waiting_gives_up_after_wait_seconds_or_stops_polling_as_soon_as_the_receipt_arrives(pipe: Pipeline) -> None:
    from idleshare.parse.requests import Recalculate, parse

    clock = Clock()
    answer = Admin(pipe.store, pipe, clock=clock, sleep=clock.sleep, poll_interval=0.5).recalculate("demo", None, 2)
    assert not answer.done and answer.body["status"] == "Requested"  # the 202 shape
    assert sum(clock.sleeps) == 2 and len(clock.sleeps) == 4
    pipe.deliver()  # the first request, and its recompute, out of the way
    pipe.drain()
    clock = Clock()

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if len(clock.sleeps) == 2:  # the pipeline catches up during the second pause
            pipe.deliver()
            pipe.drain()

    admin = Admin(pipe.store, pipe, clock=clock, sleep=sleep, poll_interval=0.5)
    answer = admin.recalculate("demo", parse(Recalculate, {"reason": "x"}), wait_seconds=25)
    assert answer.done and answer.body["status"] == "Done" and len(clock.sleeps) == 2


# ------------------------------------------------------------------ idempotency records (docs/spec.md §5)
@pytest.fixture
def idempotent(pipe: Pipeline, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The deployed recompute Lambda's idempotency table (Powertools' layout: ``id``, TTL ``expiration``)."""
    name = f"idem-{uuid.uuid4().hex[:8]}"
    table = create_idempotency_table(boto3.resource("dynamodb", region_name="us-east-1"), name)
    monkeypatch.setenv(names.ENV_IDEMPOTENCY_TABLE_NAME, name)
    try:
        yield table
    finally:
        table.delete()


def test_a_redelivered_request_is_answered_from_its_idempotency_record(pipe: Pipeline, idempotent: Any) -> None:
    # Given a recalculation request that ran: generation 1, its receipt Done, one idempotency record
    request_id = call("POST", "/clusters/demo/recalculate").body["requestId"]
    pipe.deliver()
    [message] = pipe.messages()
    assert pipe.drain([message])["batchItemFailures"] == []
    [record] = idempotent.scan()["Items"]
    assert record["status"] == "COMPLETED" and json.loads(record["data"])["generation"] == 1
    # When the cluster changes and the same request is delivered again (EventBridge's at-least-once, a replay)
    pipe.kube.nodes[0]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    again = message | {"MessageId": f"again-{uuid.uuid4().hex[:8]}", "ReceiptHandle": "again"}  # at least once
    batch = event_source.sqs_event([again], "arn:aws:sqs:us-east-1:111122223333:recompute.fifo")
    assert recompute.handler(batch, CONTEXT)["batchItemFailures"] == []
    # Then it did not recompute: still generation 1, one history item, the receipt as the first run wrote it
    assert call("GET", "/clusters/demo/pool").body["generation"] == 1
    assert len(pipe.store.list_history("demo")) == 1
    assert call("GET", f"/clusters/demo/recalculations/{request_id}").body["generation"] == 1
    # ... while a new request does recompute and sees the change
    call("POST", "/clusters/demo/recalculate")
    pipe.deliver()
    assert pipe.drain()["batchItemFailures"] == []
    assert call("GET", "/clusters/demo/pool").body["generation"] == 2
    assert len(idempotent.scan()["Items"]) == 2
