"""The admin API's input edges a new operator hit (issue 43 item 7): a key given twice, tags SageMaker would refuse, an
integer that is not digits, a null for a field that is not nullable, a bidi control in a recalculation's reason.
Each is refused naming the field, and nothing is stored nor published."""

from __future__ import annotations

import json

import pytest

from tests.admin_api import World, call
from tests.builders import quota_body

QUOTAS = "/clusters/demo/compute-quotas"


@pytest.fixture
def seeded(world: World) -> World:
    assert call("POST", QUOTAS, quota_body("seed", name="seed-quota")).status == 201
    return world


def refused(world: World, method: str, path: str, body: object = None, **kwargs: object) -> tuple[int, list[str], str]:
    before, events = world.items(), len(world.publisher.events)
    reply = call(method, path, body, **kwargs)
    assert world.items() == before and len(world.publisher.events) == events, "a refusal changed something"
    assert "Traceback" not in json.dumps(reply.body)
    return reply.status, [e["field"] for e in reply.body.get("errors", [])], reply.body.get("message", "")


def test_a_key_given_twice_is_refused_naming_it(seeded):
    text = json.dumps(quota_body("twice"))[:-1] + ', "Name": "other-name"}'  # the last Name would have won
    status, fields, message = refused(seeded, "POST", QUOTAS, text)
    assert (status, fields) == (400, ["Name"]) and "key given twice" in message
    nested = json.dumps(quota_body("twice")).replace('"TeamName": "twice"', '"TeamName": "twice", "TeamName": "b"')
    status, fields, _ = refused(seeded, "POST", QUOTAS, nested)
    assert (status, fields) == (400, ["ComputeQuotaTarget.TeamName"])


@pytest.mark.parametrize(
    ("tags", "field", "words"),
    [
        ([{"Key": "team", "Value": "a"}, {"Key": "team", "Value": "b"}], "Tags[1].Key", "given twice (also Tags[0])"),
        ([{"Key": "aws:cloudformation:stack", "Value": "x"}], "Tags[0].Key", "the aws: prefix is reserved"),
        ([{"Key": "AWS:mine", "Value": "x"}], "Tags[0].Key", "the aws: prefix is reserved"),
    ],
)
def test_tags_sagemaker_refuses_are_refused_naming_the_field(seeded, tags, field, words):
    status, fields, message = refused(seeded, "POST", QUOTAS, quota_body("tagged", Tags=tags))
    assert (status, fields) == (422, [field]) and words in message


@pytest.mark.parametrize("version", ["1.0", "+1", " 1", "1e0", "\uff11"])
def test_a_target_version_that_is_not_digits_is_refused(seeded, version):
    status, fields, message = refused(seeded, "DELETE", f"{QUOTAS}/seed-quota", query={"TargetVersion": version})
    assert status == 400 and fields == ["TargetVersion"] and "digits only" in message
    assert call("GET", f"{QUOTAS}/seed-quota").status == 200


def test_digits_still_delete_at_that_version(seeded):
    assert call("DELETE", f"{QUOTAS}/seed-quota", query={"TargetVersion": "1"}).status in (200, 204)
    assert call("GET", f"{QUOTAS}/seed-quota").status == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"SchedulerConfig": {"FairShare": None, "IdleResourceSharing": "Enabled"}}, "SchedulerConfig.FairShare"),
        ({"SchedulerConfig": {"PriorityClasses": None}}, "SchedulerConfig.PriorityClasses"),
    ],
)
def test_a_null_for_a_field_that_is_not_nullable_is_refused_naming_it(seeded, body, field):
    status, fields, message = refused(seeded, "PUT", "/clusters/demo/scheduler-config", body)
    assert (status, fields) == (422, [field]) and "must not be null" in message


def test_a_null_inside_a_quota_is_refused_naming_it(seeded):
    body = quota_body("nulled")
    body["ComputeQuotaTarget"]["FairShareWeight"] = None
    status, fields, _ = refused(seeded, "POST", QUOTAS, body)
    assert (status, fields) == (422, ["ComputeQuotaTarget.FairShareWeight"])


def test_a_reason_holds_what_a_description_may_hold_and_no_more(seeded):
    # U+202E (RIGHT-TO-LEFT OVERRIDE) is refused in a Description: in a reason too, naming it
    for path, body in (
        (QUOTAS, quota_body("bidi", Description="a\u202eb")),
        ("/clusters/demo/recalculate", {"reason": "a\u202eb"}),
    ):
        status, fields, message = refused(seeded, "POST", path, body)
        assert status == 422 and fields in (["Description"], ["reason"]) and "character 1" in message
    assert call("POST", "/clusters/demo/recalculate", {"reason": "nodes replaced — é 日本"}).status == 202
    assert call("POST", "/clusters/demo/recalculate", {"reason": None}).status == 202


def test_the_cli_refuses_the_reason_the_api_refuses_before_sending_it(capsys):
    from idleshare_cli.main import main

    code = main(["recalc", "--cluster", "demo", "--reason", "a\u202eb", "--endpoint", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 2 and "--reason: character 1 ('\\u202e') is not allowed" in err and "Traceback" not in err
