"""A scenario's `quotas:` is read by the reader `idleshare plan --quotas` uses (idleshare.parse.quotas): the AWS CLI's
`list-compute-quotas` output, a `describe-compute-quota`, an array or `{ComputeQuotas: [...]}` alike; a quota that
no longer governs (Deleted, CreateFailed) is left out as plan and `quota import` leave it out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devkit import scenario
from idleshare.parse.errors import InputError
from idleshare.parse.quotas import CREATE_FIELDS, parse_quotas
from tests import sagemaker_stub

STEPS = [{"title": "first", "recalculate": True}]


def _names(path: Path) -> list[str]:
    return [q["Name"] for q in scenario.parse({"quotas": str(path), "steps": STEPS}, "s.yaml", path.parent).quotas]


def test_the_aws_clis_list_compute_quotas_output_is_a_scenarios_quotas(tmp_path):
    listed = tmp_path / "quotas.json"
    listed.write_text(sagemaker_stub.list_compute_quotas_output())
    sc = scenario.parse({"quotas": str(listed), "steps": STEPS}, "s.yaml", tmp_path)
    # the quotas plan reads from that file, each stored in the CreateComputeQuota shape
    assert [q["Name"] for q in sc.quotas] == [q.name for q in parse_quotas(listed.read_text())]
    assert sc.quotas and all(set(q) <= set(CREATE_FIELDS) for q in sc.quotas)


def test_one_described_quota_and_a_deleted_one_are_read_as_plan_reads_them(tmp_path):
    first, second = sagemaker_stub.example_quotas()[:2]
    one = tmp_path / "one.json"
    one.write_text(sagemaker_stub.cli_json(sagemaker_stub.describe_response(first)))
    assert _names(one) == [first["Name"]]
    listed = tmp_path / "listed.json"
    listed.write_text(sagemaker_stub.list_compute_quotas_output([first, {**second, "Status": "Deleted"}]))
    assert _names(listed) == [first["Name"]]


def test_a_bad_quotas_document_is_refused_naming_the_field(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ComputeQuotaSummaries": [{"Name": "x"}]}))
    with pytest.raises(InputError) as caught:
        _names(bad)
    assert [e.loc for e in caught.value.errors] == ["ComputeQuotaSummaries[0].ComputeQuotaTarget"]
