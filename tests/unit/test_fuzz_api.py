"""Fuzzing the admin API (Hypothesis): whatever the body, path or query, a documented status with a JSON error naming
what is wrong — never a 500, never a traceback — and a refused write changes nothing stored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.admin_api import World, call
from tests.builders import quota_body
from tests.corpus.make_corpus import mutate
from tests.strategies import json_values, mutation_values, paths

HEALTH = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=HEALTH)
DOCUMENTED = {200, 201, 202, 204, 400, 404, 409, 413, 422}
REFUSED = {400, 404, 409, 413, 422}
QUOTA = quota_body("fuzz")
UPDATE = {"TargetVersion": 1, "ComputeQuotaConfig": QUOTA["ComputeQuotaConfig"], "ActivationState": "Disabled"}
SCHEDULER = {"SchedulerConfig": {"PriorityClasses": [{"Name": "training", "Weight": 40}], "FairShare": "Enabled"}}
WRITES = [
    ("POST", "/clusters/demo/compute-quotas", QUOTA),
    ("PUT", "/clusters/demo/compute-quotas/seed-quota", UPDATE),
    ("PUT", "/clusters/demo/scheduler-config", SCHEDULER),
    ("POST", "/clusters/demo/recalculate", {"reason": "fuzz"}),
]
ROUTES = ("compute-quotas", "compute-quotas/seed-quota", "pool", "grants", "history", "excluded-nodes")
READS = [f"/clusters/demo/{route}" for route in (*ROUTES, "recalculations/r-1")]
QUERY_KEYS = ["limit", "NextToken", "MaxResults", "NameContains", "ActivationState", "waitSeconds", "x"]


def check(reply: Any) -> None:
    assert reply.status in DOCUMENTED, (reply.status, reply.body)
    text = json.dumps(reply.body)
    assert "Traceback" not in text and 'File "' not in text
    if reply.status in REFUSED:
        assert isinstance(reply.body, dict) and reply.body.get("message"), reply.body
        for error in reply.body.get("errors", []):
            assert isinstance(error["field"], str) and error["message"], error


@pytest.fixture
def seeded(world: World) -> World:
    assert call("POST", "/clusters/demo/compute-quotas", quota_body("seed")).status == 201
    return world


def _mutations(doc: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.builds(lambda p, v: mutate(doc, p, v), st.sampled_from(list(paths(doc))), mutation_values)


@FUZZ
@given(
    st.sampled_from(range(len(WRITES))).flatmap(
        lambda i: st.tuples(st.just(i), st.one_of(_mutations(WRITES[i][2]), json_values))
    )
)
def test_fuzz_a_write_with_a_broken_body_is_refused_cleanly_and_changes_nothing(seeded: World, case: Any) -> None:
    (method, path, _), body = WRITES[case[0]], case[1]
    before, events = seeded.items(), len(seeded.publisher.events)
    reply = call(method, path, body)
    check(reply)
    if reply.status in REFUSED:
        assert seeded.items() == before and len(seeded.publisher.events) == events


@FUZZ
@given(st.sampled_from(READS), st.dictionaries(st.sampled_from(QUERY_KEYS), st.text(max_size=40), max_size=3))
def test_fuzz_reads_with_any_query_answer_cleanly(seeded: World, path: str, query: dict[str, str]) -> None:
    check(call("GET", path, query=query or None))


@FUZZ
@given(st.text(min_size=1, max_size=80), st.sampled_from(["GET", "PUT", "DELETE", "POST"]))
def test_fuzz_any_path_segment_answers_cleanly(seeded: World, segment: str, method: str) -> None:
    body = {"TargetVersion": 1} if method in ("PUT", "POST") else None
    check(call(method, f"/clusters/{segment}/compute-quotas/{segment}", body))
    check(call(method, f"/clusters/demo/{segment}", body))
