"""The admin API's request Shapes (idleshare.parse.requests): the one validation path of a write, used by
the API, the CLI and the OpenAPI document. Every problem of a body is reported together, each naming its
field with the message the API answers in its 422. Given / When / Then."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from idleshare.api.schemas import schema
from idleshare.parse.errors import InputError
from idleshare.parse.requests import (
    MAX_INT32,
    CreateQuota,
    Recalculate,
    SchedulerConfigRequest,
    UpdateQuota,
    name_problem,
    parse,
)

P5 = "ml.p5.48xlarge"
QUOTA: dict[str, Any] = {
    "Name": "a-quota",
    "ComputeQuotaConfig": {
        "ComputeQuotaResources": [{"InstanceType": P5, "Accelerators": 8, "VCpu": Decimal("0.1")}],
        "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 50},
    },
    "ComputeQuotaTarget": {"TeamName": "a"},
}


def errors(model: Any, body: Any) -> dict[str, str]:
    with pytest.raises(InputError) as caught:
        parse(model, body)
    assert caught.value.source == "request body"
    return {e.loc: e.message for e in caught.value.errors}


def test_a_valid_create_keeps_what_was_sent_exactly() -> None:
    request = parse(CreateQuota, QUOTA | {"Description": "research", "Tags": [{"Key": "owner", "Value": ""}]})
    assert request.fields.ComputeQuotaTarget.TeamName == "a"
    given = request.given()
    assert given["ComputeQuotaConfig"] is QUOTA["ComputeQuotaConfig"]  # stored as sent: 0.1 stays Decimal("0.1")
    assert set(given) == {"Name", "ComputeQuotaConfig", "ComputeQuotaTarget", "Description", "Tags"}


def test_every_problem_of_a_body_is_reported_together_naming_its_field() -> None:
    body = QUOTA | {
        "Name": "-bad-",
        "ActivationState": None,
        "ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdef123456",
        "ComputeQuotaId": "q-1",
        "ComputeQuotaConfg": {},
        "Description": "x" * 1025,
        "Tags": [{"Key": "", "Value": "v"}, {"Key": "k"}, {"Key": "k", "Valeu": "v"}, "tag"],
    }
    entity_name = "must be a valid EntityName, matching [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
    assert name_problem("research") is None and name_problem("bad name!") == f'{entity_name} (got "bad name!")'
    assert errors(CreateQuota, body) == {
        "Name": f'{entity_name} (got "-bad-")',
        "ActivationState": "must not be null (omit the field instead)",
        "ClusterArn": "not accepted here: the cluster is the one in the path",
        "ComputeQuotaId": "set by idleshare: not accepted in a request",
        "ComputeQuotaConfg": "unknown field; did you mean ComputeQuotaConfig?",
        "Description": "must be at most 1024 characters (got 1025)",
        "Tags[0].Key": "must be 1 to 128 characters (got 0)",
        "Tags[1].Value": "required field is missing",
        "Tags[2].Value": "required field is missing",
        "Tags[2].Valeu": "unknown field; did you mean Value?",
        "Tags[3]": 'must be an object (got "tag")',
    }


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("Description", "line\u0000", "character 4 ('\\x00') is not allowed"),
        ("Description", 5, "must be a string (got 5)"),
        ("Tags", [{"Key": "a*b", "Value": ""}], "character 1 ('*') is not allowed"),
        ("Tags", [{"Key": "k", "Value": "v" * 257}], "must be at most 256 characters (got 257)"),
        ("Tags", [{"Key": "k", "Value": "v"}] * 51, "must have at most 50 items (got 51)"),
        ("Tags", {"Key": "k"}, "must be an array (got an object)"),
    ],
)
def test_description_and_tags_follow_botocores_unicode_rules(field: str, value: Any, message: str) -> None:
    assert message in errors(CreateQuota, QUOTA | {field: value}).values()


def test_a_create_needs_name_config_and_target_and_checks_what_botocore_cannot_say() -> None:
    assert errors(CreateQuota, {"Name": "x"}) == {
        "ComputeQuotaConfig": "required field is missing",
        "ComputeQuotaTarget": "required field is missing",
    }
    twice = {"ComputeQuotaResources": [{"InstanceType": P5, "Count": 1}, {"InstanceType": P5, "Count": 2}]}
    assert errors(CreateQuota, QUOTA | {"ComputeQuotaConfig": twice, "Description": 5}) == {
        "Description": "must be a string (got 5)",
        "ComputeQuotaConfig.ComputeQuotaResources[1].InstanceType": f'instance type "{P5}" listed twice (also [0])',
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"TargetVersion": "1"}, 'must be an integer (got "1")'),
        ({"TargetVersion": True}, "must be an integer (got true)"),
        ({"TargetVersion": 1.0}, "must be an integer (got 1.0)"),
        ({"TargetVersion": -1}, "must be >= 0 (got -1)"),
        ({"TargetVersion": MAX_INT32 + 1}, f"must be <= {MAX_INT32} (got {MAX_INT32 + 1})"),
    ],
)
def test_target_version_is_botocores_integer(body: dict[str, Any], message: str) -> None:
    assert errors(UpdateQuota, body) == {"TargetVersion": message}
    assert errors(SchedulerConfigRequest, {"SchedulerConfig": {}} | body) == {"TargetVersion": message}
    assert parse(UpdateQuota, {"TargetVersion": MAX_INT32}).fields.TargetVersion == MAX_INT32


def test_target_version_is_required_in_an_update_and_never_null() -> None:
    assert errors(UpdateQuota, {}) == {"TargetVersion": "required field is missing"}
    assert errors(UpdateQuota, {"TargetVersion": None}) == {"TargetVersion": "must be an integer (got null)"}
    assert errors(SchedulerConfigRequest, {"SchedulerConfig": {}, "TargetVersion": None}) == {
        "TargetVersion": "must not be null (omit the field instead)"
    }
    assert parse(SchedulerConfigRequest, {"SchedulerConfig": {}}).fields.target_version() is None


def test_an_update_neither_renames_nor_retags_and_keeps_only_what_it_carries() -> None:
    assert errors(UpdateQuota, {"TargetVersion": 1, "Name": "b", "Tags": []}) == {
        "Name": "a compute quota cannot be renamed (its name is in the path)",
        "Tags": "tags are set when the quota is created (UpdateComputeQuota has no Tags)",
    }
    request = parse(UpdateQuota, {"TargetVersion": 3, "ActivationState": "Disabled"})
    assert request.given("TargetVersion") == {"ActivationState": "Disabled"} and request.fields.TargetVersion == 3


def test_a_scheduler_config_names_each_field_and_duplicate_priority_classes() -> None:
    classes = [{"Name": "training", "Weight": 10}, {"Name": "training", "Weight": 1}]
    assert errors(SchedulerConfigRequest, {"SchedulerConfig": {"PriorityClasses": classes}, "Name": "x"}) == {
        "Name": "not accepted here: a cluster has one scheduler config, the cluster in the path",
        "SchedulerConfig.PriorityClasses[1].Name": 'duplicate priority class "training" (also PriorityClasses[0])',
    }
    assert errors(SchedulerConfigRequest, {"SchedulerConfig": None}) == {
        "SchedulerConfig": "must be an object (got null)"
    }
    assert errors(SchedulerConfigRequest, {"SchedulerConfig": {"FairShare": "On", "Bogus": 1}}) == {
        "SchedulerConfig.FairShare": 'must be one of Disabled, Enabled (got "On")',
        "SchedulerConfig.Bogus": "unknown field",
    }


def test_a_recalculation_reason_is_an_optional_bounded_string() -> None:
    assert parse(Recalculate, {}).fields.reason is None and parse(Recalculate, {"reason": None}).fields.reason is None
    assert errors(Recalculate, {"reason": 5, "why": "x"}) == {
        "reason": "must be a string (got 5)",
        "why": "unknown field",
    }
    assert errors(Recalculate, {"reason": "x" * 1025}) == {"reason": "must be at most 1024 characters (got 1025)"}


def test_a_body_that_is_not_an_object_or_too_deep_is_one_error_for_the_whole() -> None:
    assert errors(Recalculate, [1]) == {"": "expected a JSON object (got an array)"}
    deep: Any = {}
    for _ in range(10_000):
        deep = {"ComputeQuotaConfig": deep}
    assert list(errors(CreateQuota, QUOTA | {"ComputeQuotaConfig": deep})) != []


SAMPLES = Path(__file__).resolve().parents[2] / "events" / "api"


@pytest.mark.parametrize(
    ("model", "sample", "field", "beyond"),
    [
        (CreateQuota, "create-compute-quota.json", "Name", "a" * 64),
        (CreateQuota, "create-compute-quota.json", "Tags", [{"Key": "k", "Value": "v"}] * 51),
        (CreateQuota, "create-compute-quota.json", "Bogus", 1),  # no other properties
        (UpdateQuota, "update-compute-quota.json", "TargetVersion", MAX_INT32 + 1),
        (SchedulerConfigRequest, "put-scheduler-config.json", "TargetVersion", -1),
        (Recalculate, "recalculate.json", "reason", "x" * 1025),
    ],
)
def test_the_openapi_schema_accepts_and_refuses_what_the_shape_does(
    model: Any, sample: str, field: str, beyond: Any
) -> None:
    body = json.loads((SAMPLES / sample).read_text())
    parse(model, body)
    jsonschema.validate(body, schema(model))  # what a client generated from the document sends is accepted
    assert field in errors(model, body | {field: beyond})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body | {field: beyond}, schema(model))


# --------------------------------------------------------------- botocore bounds, from the bad-input corpus
# tests/corpus (derived from botocore's service model): every file breaking a numeric bound, a list length or a
# string length of the SageMaker shapes, as an update (test_corpus.py refuses each file as a create).
REPO = Path(__file__).resolve().parents[2]
CORPUS: dict[str, dict[str, str]] = json.loads((REPO / "tests" / "corpus" / "expected.json").read_text())
BOUND_VIOLATIONS = ("above-max", "below-min", "too-many-items", "too-long", "too-short")
BOUND_CASES = sorted(
    p
    for p, e in CORPUS.items()
    if e["kind"] in ("quotas", "scheduler") and Path(p).stem.split("--")[1] in BOUND_VIOLATIONS
)


def test_the_corpus_has_bound_cases_for_every_write() -> None:
    kinds = [CORPUS[p]["kind"] for p in BOUND_CASES]
    assert kinds.count("quotas") >= 20 and kinds.count("scheduler") >= 2


@pytest.mark.parametrize("path", [p for p in BOUND_CASES if not CORPUS[p]["field"].startswith("[0].Name")])
def test_an_update_breaking_a_botocore_bound_is_refused_naming_the_field(path: str) -> None:
    doc = json.loads((REPO / path).read_text(encoding="utf-8"))
    field = CORPUS[path]["field"].removeprefix("[0].")
    model, body = (UpdateQuota, doc[0]) if CORPUS[path]["kind"] == "quotas" else (SchedulerConfigRequest, doc)
    patch = {k: v for k, v in body.items() if k != "Name"} | {"TargetVersion": 1}  # the name is in the path
    with pytest.raises(InputError) as caught:
        parse(model, patch)
    assert field in [e.loc for e in caught.value.errors], caught.value.errors
    assert field in str(caught.value)
