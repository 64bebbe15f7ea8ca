"""The example cluster in events/examples (used by `make demo` and the README) is valid and current."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from idleshare.domain.eligibility import exclusion_reason
from idleshare.domain.model import DEFAULT_TOLERATED_TAINT_KEYS, ExclusionReason
from idleshare.parse.nodes import parse_nodes
from idleshare_cli import plan
from tests.bench.botocore_shapes import violations
from tests.builders import load_script

EXAMPLES = Path(__file__).resolve().parents[2] / "events" / "examples"


def load(name: str) -> Any:
    return json.loads((EXAMPLES / name).read_text())


def test_nodes_json_is_what_make_nodes_generates() -> None:
    module = load_script(EXAMPLES / "make_nodes.py", "make_nodes_under_test")
    assert (EXAMPLES / "nodes.json").read_text() == module.dumps(module.example_cluster()), (
        "run: uv run python events/examples/make_nodes.py"
    )


def test_example_nodes_have_one_node_per_exclusion_case() -> None:
    nodes = parse_nodes((EXAMPLES / "nodes.json").read_bytes(), "nodes.json")
    assert len(nodes) == 36
    reasons = sorted(str(r) for n in nodes if (r := exclusion_reason(n, DEFAULT_TOLERATED_TAINT_KEYS)))
    assert reasons == sorted(
        str(r)
        for r in (
            ExclusionReason.NOT_READY,
            ExclusionReason.UNSCHEDULABLE,
            ExclusionReason.UNHEALTHY,
            ExclusionReason.UNTOLERATED_TAINT,
        )
    )
    assert {n.instance_type for n in nodes} == {
        "ml.p5.48xlarge",
        "ml.p4d.24xlarge",
        "ml.trn1.32xlarge",
        "ml.g5.12xlarge",
        "ml.m5.2xlarge",
    }


@pytest.mark.parametrize("index", range(4))
def test_example_quotas_are_valid_describe_compute_quota_responses(index: int) -> None:
    quotas = load("quotas.json")
    assert len(quotas) == 4
    assert violations("DescribeComputeQuotaResponse", quotas[index]) == []


def test_example_quotas_cover_what_the_readme_walks_through() -> None:
    by_team = {q["ComputeQuotaTarget"]["TeamName"]: q["ComputeQuotaConfig"] for q in load("quotas.json")}
    assert {t: c["ResourceSharingConfig"]["Strategy"] for t, c in by_team.items()} == {
        "ml-research": "LendAndBorrow",
        "nlp": "Lend",
        "vision": "DontLend",
        "infra": "LendAndBorrow",
    }
    research = by_team["ml-research"]["ResourceSharingConfig"]
    assert research["BorrowLimit"] == 100
    assert research["AbsoluteBorrowLimits"] == [{"InstanceType": "ml.p5.48xlarge", "Accelerators": 8}]
    assert "AcceleratorPartition" in by_team["vision"]["ComputeQuotaResources"][0]


def test_example_scheduler_config_is_a_valid_describe_response() -> None:
    config = load("scheduler-config.json")
    assert violations("DescribeClusterSchedulerConfigResponse", config) == []
    assert len(config["SchedulerConfig"]["PriorityClasses"]) == 2
    assert config["SchedulerConfig"]["FairShare"] == config["SchedulerConfig"]["IdleResourceSharing"] == "Enabled"


def test_the_validator_catches_what_botocore_forbids() -> None:
    bad = {"ComputeQuotaResources": [{"InstanceType": "p5.48xlarge", "Count": -1}], "Typo": 1}
    assert len(violations("ComputeQuotaConfig", bad)) == 3


def test_plan_runs_on_the_example() -> None:
    result = plan.plan_from_bytes(
        (EXAMPLES / "nodes.json").read_bytes(),
        (EXAMPLES / "quotas.json").read_bytes(),
        (EXAMPLES / "scheduler-config.json").read_bytes(),
    )
    assert result["capacity"]["ml.p5.48xlarge"]["nvidia.com/gpu"] == "56"  # 7 of 8 nodes are Ready
    assert set(result["teams"]) == {"ml-research", "nlp", "vision", "infra"}
    assert all(not per for per in result["shortfall"].values())
