"""The admin API against the hostile-input table (tests/hostile.py), at every route with a body or a query. The routes
and their query parameters come from the API's own OpenAPI document: a route or a parameter added later is covered,
and a route with a body but no sample below fails until one is given. Each case: a documented status, never a 500 nor
a traceback; a refusal names what is wrong and changes nothing stored (nor publishes anything); what no decoder can
read (NaN, a 5,000-digit integer, a lone surrogate, an array for an object) is a 400 naming its field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from idleshare.parse.schema import loc
from tests.admin_api import Reply, World, call
from tests.builders import quota_body
from tests.hostile import BODIES, FIELD_VALUES, QUERY_VALUES, field_cases, report
from tests.strategies import paths

DOCUMENTED = {200, 201, 202, 204, 400, 404, 409, 413, 422}
REFUSED = {400, 404, 409, 413, 422}
UNREADABLE = {"huge-int", "huge-negative-int", "nan", "infinity", "-infinity", "lone-surrogate", "surrogate-in-text"}
PATH_VALUES = {"cluster": "demo", "name": "seed-quota", "team": "seed", "request_id": "r-1"}
# A valid body of each route that takes one; the hostile cases are derived from its members.
SAMPLES: dict[tuple[str, str], Any] = {
    ("post", "/clusters/{cluster}/compute-quotas"): quota_body("fresh"),
    ("put", "/clusters/{cluster}/compute-quotas/{name}"): {
        "TargetVersion": 1,
        "ComputeQuotaConfig": quota_body("seed")["ComputeQuotaConfig"],
        "ComputeQuotaTarget": {"TeamName": "seed", "FairShareWeight": 1},
        "ActivationState": "Disabled",
        "Description": "d",
    },
    ("put", "/clusters/{cluster}/scheduler-config"): {
        "SchedulerConfig": {
            "PriorityClasses": [{"Name": "training", "Weight": 40}],
            "FairShare": "Enabled",
            "IdleResourceSharing": "Enabled",
        }
    },
    ("post", "/clusters/{cluster}/recalculate"): {"reason": "hostile"},
    ("post", "/clusters/{cluster}/pause"): {"reason": "hostile"},
    ("post", "/clusters/{cluster}/resume"): {"reason": "hostile"},
}
# Parameters that only mean something together: the hostile one is sent with a valid partner.
PARTNERS = {"from": {"to": "2026-01-02T00:00:00Z"}, "to": {"from": "2026-01-01T00:00:00Z"}}


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    from idleshare.api.app import app

    schema = json.loads(app.get_openapi_json_schema())
    return [
        (method, path, op)
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if method in ("get", "put", "post", "delete")
    ]


OPERATIONS = _operations()
WITH_BODY = [(m, p) for m, p, op in OPERATIONS if "requestBody" in op]
WITH_QUERY = [(m, p, q["name"]) for m, p, op in OPERATIONS for q in op.get("parameters", []) if q["in"] == "query"]


def url(template: str) -> str:
    return template.format(**PATH_VALUES)


@pytest.fixture
def seeded(world: World) -> World:
    assert call("POST", "/clusters/demo/compute-quotas", quota_body("seed", name="seed-quota")).status == 201
    return world


def refusal_problem(reply: Reply, before: list[Any], world: World, events: int) -> str | None:
    """What is wrong with ``reply`` as an answer to a hostile request, or None."""
    if reply.status not in DOCUMENTED:
        return f"status {reply.status}: {reply.body}"
    text = json.dumps(reply.body)
    if "Traceback" in text or 'File "' in text:
        return "a traceback"
    if reply.status in REFUSED:
        if not (isinstance(reply.body, dict) and reply.body.get("message")):
            return f"no message: {reply.body}"
        if len(world.publisher.events) != events or world.items() != before:
            return "a refused request changed what is stored or published"
    return None


def test_every_route_with_a_body_has_a_sample_and_the_routes_are_found() -> None:
    assert set(WITH_BODY) == set(SAMPLES), "give each route with a body a valid sample in SAMPLES"
    assert len(WITH_QUERY) >= 12  # the document lists the query parameters (it did: 17)


@pytest.mark.parametrize(("method", "template"), sorted(SAMPLES))
def test_every_field_of_every_body_against_the_hostile_table(seeded: World, method: str, template: str) -> None:
    sample, failures = SAMPLES[(method, template)], []
    # the sample itself is fine (else every case below would be refused for the wrong reason)
    before, events = seeded.items(), len(seeded.publisher.events)
    for name, text in [*BODIES.items(), *field_cases(sample)]:
        reply = call(method.upper(), url(template), text)
        problem = refusal_problem(reply, before, seeded, events)
        if reply.status < 300:  # a hostile value a field may hold (0.5 vCPU): what is stored now is the reference
            before, events = seeded.items(), len(seeded.publisher.events)
        value = name.rpartition("=")[2]
        must_be_400 = name in BODIES or name == "array-of-bodies" or value in UNREADABLE
        if problem is None and must_be_400 and reply.status != 400:
            problem = f"{reply.status}, not 400: {reply.body}"
        if problem is None and value in UNREADABLE:
            path = next(p for p in paths(sample) if ".".join(map(str, p)) == name.rpartition("=")[0])
            if [e["field"] for e in reply.body["errors"]] != [loc(path)]:
                problem = f"the error does not name {loc(path)}: {reply.body}"
        if problem:
            failures.append(f"{name}: {problem}")
    assert not failures, report(failures)
    assert len(FIELD_VALUES) > 15


@pytest.mark.parametrize(("method", "template", "param"), WITH_QUERY, ids=lambda v: str(v))
def test_every_query_parameter_against_the_hostile_table(seeded: World, method: str, template: str, param: str) -> None:
    failures = []
    before, events = seeded.items(), len(seeded.publisher.events)
    for name, value in QUERY_VALUES.items():
        reply = call(method.upper(), url(template), query={**PARTNERS.get(param, {}), param: value})
        problem = refusal_problem(reply, before, seeded, events)
        if reply.status < 300:
            before, events = seeded.items(), len(seeded.publisher.events)
        if problem:
            failures.append(f"{param}={name}: {problem}")
    assert not failures, report(failures)


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("0001-01-01T00:00:00+14:00", "2026-01-01T00:00:00Z"),  # before year 1 in UTC: an overflow was a 500
        ("2026-01-01T00:00:00Z", "9999-12-31T23:59:59-14:00"),  # past year 9999 in UTC
        ("9999-12-31T00:00:00Z", "9999-12-31T23:59:59.999999Z"),
        ("1969-12-31T00:00:00Z", "1970-01-01T01:00:00Z"),
    ],
)
def test_usage_times_at_the_edges_of_the_calendar_are_a_400_naming_the_field(
    seeded: World, start: str, end: str
) -> None:
    reply = call("GET", "/clusters/demo/usage", query={"from": start, "to": end, "granularity": "hour"})
    assert reply.status == 400, reply.body
    assert [e["field"] for e in reply.body["errors"]] in (["from"], ["to"])
    assert "1970-01-01" in reply.body["message"]


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_an_array_of_requests_stores_none_of_them(seeded: World, method: str) -> None:
    # POST [q1, q2] was 201 storing q1 only (Powertools reads an array body as its first element); PUT alike
    before, events = seeded.items(), len(seeded.publisher.events)
    bodies = [quota_body("one"), quota_body("two")]
    path = "/clusters/demo/compute-quotas" if method == "POST" else "/clusters/demo/scheduler-config"
    if method == "PUT":
        bodies = [SAMPLES[("put", "/clusters/{cluster}/scheduler-config")]] * 2
    reply = call(method, path, bodies)
    assert reply.status == 400 and "must be a JSON object (got an array)" in reply.body["message"]
    assert seeded.items() == before and len(seeded.publisher.events) == events
