"""`idleshare plan --extra-resource NAME` (issue 40.4): a resource the engine does not track by default (an AMD GPU, a
FPGA) is tracked, and is what a quota's ``Accelerators`` counts on a flavor whose nodes expose no other accelerator."""

from __future__ import annotations

import json
from typing import Any

import pytest

from idleshare_cli.main import main

AMD = "amd.com/gpu"


def amd_node(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "191450m", "memory": "2058810000Ki", AMD: "8", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": "mi300x.48xlarge"}},
        "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.fixture
def files(tmp_path: Any) -> list[str]:
    quota = {
        "Name": "a-quota",
        "ComputeQuotaTarget": {"TeamName": "a"},
        "ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "mi300x.48xlarge", "Accelerators": 2}]},
    }
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "List", "items": [amd_node("m0"), amd_node("m1")]}))
    (tmp_path / "quotas.json").write_text(json.dumps([quota]))
    return ["plan", "--nodes", str(tmp_path / "nodes.json"), "--quotas", str(tmp_path / "quotas.json")]


def test_an_extra_resource_is_tracked_and_counted_as_the_flavors_accelerator(
    files: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*files, "--format", "json"]) == 0
    without = json.loads(capsys.readouterr().out)
    assert AMD not in without["resources"]
    assert main([*files, "--extra-resource", AMD, "--extra-resource", "example.com/fpga", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert AMD in doc["resources"]
    assert doc["capacity"]["mi300x.48xlarge"][AMD] == "16"
    assert doc["teams"]["a"]["nominal"]["mi300x.48xlarge"][AMD] == "2"
    cohort = next(m for m in doc["manifests"] if m["kind"] == "Cohort")
    assert AMD in cohort["spec"]["resourceGroups"][0]["coveredResources"]


@pytest.mark.parametrize("name", ["not a name", "", "-x/y", "a/b/c"])
def test_a_name_that_is_no_resource_name_exits_2_naming_the_flag(
    files: list[str], capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert main([*files, f"--extra-resource={name}", "--format", "json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--extra-resource" in err and "not a valid resource name" in err and "Traceback" not in err
