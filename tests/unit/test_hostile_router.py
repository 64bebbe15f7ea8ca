"""The router against the hostile-input table (tests/hostile.py), for every inbound event type (events/inbound: a
type added there is covered) and every member of it: whatever the event holds, the router returns normally — it
enqueues, or drops the event counted in EventsDropped — and never fails the invocation (a failed one lands in the
router's DLQ). What cannot be encoded (a lone surrogate anywhere) is dropped as Malformed, nothing enqueued."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from idleshare import names
from tests.fakes import ROUTER_CONTEXT, emf_documents
from tests.hostile import FIELD_VALUES, report, with_field
from tests.strategies import paths

INBOUND = Path(__file__).parents[2] / "events" / "inbound"
EVENTS = {p.name: json.loads(p.read_text()) for p in sorted(INBOUND.glob("*.json"))}
SURROGATES = ("lone-surrogate", "surrogate-in-text")


def route(event: Any) -> dict[str, Any]:
    from idleshare.handlers.router import handler  # not at collection: it reads the environment

    return handler(event, ROUTER_CONTEXT)


def decoded(text: str) -> Any:
    """The event as the Lambda runtime hands it over (its JSON decoder reads NaN; a 5,000-digit integer it cannot)."""
    return json.loads(text, parse_int=lambda s: int(s) if len(s) < 4000 else float("inf"))


@pytest.mark.parametrize("name", sorted(EVENTS))
def test_every_member_of_every_inbound_event_against_the_hostile_table(router_deps: Any, name: str) -> None:
    event, failures = EVENTS[name], []
    for path in paths(event):
        for value_name, text in FIELD_VALUES.items():
            try:
                hostile = decoded(with_field(event, path, text))
            except RecursionError:
                continue  # the runtime could not hand it over either
            sent = len(router_deps.queue.sent)
            where = f"{'.'.join(map(str, path)) or '(event)'}={value_name}"
            try:
                out = route(hostile)
            except Exception as exc:
                failures.append(f"{where}: raised {type(exc).__name__}: {exc}"[:300])
                continue
            if "dropped" in out and len(router_deps.queue.sent) != sent:
                failures.append(f"{where}: dropped yet enqueued")
            if value_name in SURROGATES and out.get("dropped") != "Malformed":
                failures.append(f"{where}: a lone surrogate was not dropped as Malformed: {out}")
    assert not failures, report(failures)


def test_a_recalculation_whose_request_id_is_a_lone_surrogate_is_dropped_as_malformed_and_counted(
    router_deps: Any, logs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # It passed parsing, then enqueueing raised UnicodeEncodeError: a failed invocation, the event in the DLQ
    event = json.loads(json.dumps(EVENTS["idleshare-recalculation-requested.json"]))
    event["detail"]["requestId"] = "\ud800"
    assert route(event) == {"enqueued": [], "dropped": "Malformed"}
    assert router_deps.queue.sent == []
    logged = json.loads(logs.getvalue().splitlines()[-1])
    assert logged["message"] == "dropped malformed event" and "detail.requestId" in logged["reason"]
    assert "lone surrogate" in logged["reason"]
    printed = capsys.readouterr().out
    metrics = [m for doc in emf_documents(printed) for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    assert {"Name": names.METRIC_EVENTS_DROPPED, "Unit": "Count"} in metrics
