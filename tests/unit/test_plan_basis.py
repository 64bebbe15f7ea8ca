"""`idleshare plan --borrow-limit-basis quota|pool` (issue 29) on a HyperPod-shaped dump: the nodes as
`kubectl get nodes -o json` prints them, the quotas as `aws sagemaker list-compute-quotas` prints them. By default
HyperPod's numbers (BorrowLimit is a percentage of the team's own quota), with ``pool`` idleshare's former ones (a
percentage of the lendable pool the team sees); every expected number is worked out by hand below."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from idleshare_cli.main import main
from tests.builders import G5, P5, k8s_node

GPU, CPU, MEMORY = "nvidia.com/gpu", "cpu", "memory"
CLUSTER_ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdef123456"


def g5_node(name: str) -> dict[str, Any]:
    """A schedulable g5.12xlarge Node (4 A10G GPUs) as the API server returns it."""
    node = k8s_node(name, gpus=4)
    node["metadata"]["labels"]["node.kubernetes.io/instance-type"] = G5
    node["status"]["allocatable"] |= {"cpu": "47810m", "memory": "180Gi"}
    return node


def summary(team: str, resources: list[dict[str, Any]], sharing: dict[str, Any]) -> dict[str, Any]:
    """One ``ComputeQuotaSummaries`` item of `aws sagemaker list-compute-quotas`, as the AWS CLI prints it."""
    return {
        "ComputeQuotaArn": f"arn:aws:sagemaker:us-west-2:111122223333:compute-quota/{team}0000001",
        "ComputeQuotaId": f"{team}0000001",
        "Name": f"{team}-quota",
        "ComputeQuotaVersion": 1,
        "Status": "Created",
        "ClusterArn": CLUSTER_ARN,
        "ComputeQuotaConfig": {
            "ComputeQuotaResources": resources,
            "ResourceSharingConfig": sharing,
            "PreemptTeamTasks": "Never",
        },
        "ComputeQuotaTarget": {"TeamName": team, "FairShareWeight": 0},
        "ActivationState": "Enabled",
        "CreationTime": "2026-11-02T09:30:00.000000+00:00",
        "LastModifiedTime": "2026-11-02T09:30:00.000000+00:00",
    }


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """6 p5.48xlarge (48 GPUs; each node's allocatable, the instance shape S(p5): 191450m cpu, 2000Gi, 8 GPUs)
    and 2 g5.12xlarge (8 GPUs); three teams:

    - ``a``: 2 p5 instances (``Count``: 2 x S(p5) = 382.9 cpu, 4000Gi, 16 GPUs), LendAndBorrow, no BorrowLimit (50);
    - ``b``: 8 p5 accelerators, Lend;
    - ``c``: 1 g5 instance (4 GPUs), LendAndBorrow, BorrowLimit 100, and no p5 in its quota.
    """
    directory = tmp_path_factory.mktemp("hyperpod-dump")
    nodes = {"apiVersion": "v1", "kind": "List", "items": [*(k8s_node(f"p5-{i}") for i in range(6)),
                                                           *(g5_node(f"g5-{i}") for i in range(2))]}  # fmt: skip
    quotas = {
        "ComputeQuotaSummaries": [
            summary("a", [{"InstanceType": P5, "Count": 2}], {"Strategy": "LendAndBorrow"}),
            summary("b", [{"InstanceType": P5, "Accelerators": 8}], {"Strategy": "Lend"}),
            summary("c", [{"InstanceType": G5, "Count": 1}], {"Strategy": "LendAndBorrow", "BorrowLimit": 100}),
        ]
    }
    (directory / "nodes.json").write_text(json.dumps(nodes))
    (directory / "quotas.json").write_text(json.dumps(quotas))
    return ["plan", "--nodes", str(directory / "nodes.json"), "--quotas", str(directory / "quotas.json")]


def planned(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def limits(doc: dict[str, Any], team: str, flavor: str) -> dict[str, str]:
    return doc["teams"][team]["borrowingLimit"].get(flavor, {})


def cluster_queue_gpu(doc: dict[str, Any], team: str, flavor: str = P5) -> str:
    """The borrowingLimit of GPUs on ``flavor`` in the ClusterQueue manifest ``plan`` emits for ``team``."""
    cq = next(
        m
        for m in doc["manifests"]
        if m["kind"] == "ClusterQueue" and m["metadata"]["name"].endswith(f"-{team}-clusterqueue")
    )
    entry = next(f for f in cq["spec"]["resourceGroups"][0]["flavors"] if f["name"] == flavor)
    return str(next(r for r in entry["resources"] if r["name"] == GPU)["borrowingLimit"])


def test_plan_gives_hyperpods_numbers_by_default(dump: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    doc = planned(capsys, dump)
    # a: BorrowLimit 50 (the default) of its own 2 p5 instances, on every resource: 1 instance's worth —
    # 50% x 16 GPUs = 8 (the field's `nominalQuota: 16, borrowingLimit: 8`), 50% x 382.9 cpu = 191.45 (191450m),
    # 50% x 4000Gi = 2000Gi
    assert limits(doc, "a", P5) == {CPU: "191450m", MEMORY: "2000Gi", GPU: "8"}
    assert cluster_queue_gpu(doc, "a") == "8"
    why = doc["teams"]["a"]["why"][P5][GPU]
    assert (why["basis"], why["nominal"], why["percent"], why["limit"], why["bound"]) == (
        "Quota", "16", 50, "8", "percentage of quota"
    )  # fmt: skip
    # and nothing on g5, which is not in its quota
    assert limits(doc, "a", G5).get(GPU, "0") == "0"
    assert doc["teams"]["a"]["why"][G5][GPU]["bound"] == "not in quota"
    # c: 100% of its own g5 instance: 4 GPUs; p5 is not in its quota: 0, however much p5 lies idle
    assert limits(doc, "c", G5)[GPU] == "4"
    assert limits(doc, "c", P5).get(GPU, "0") == "0" and cluster_queue_gpu(doc, "c") == "0"
    assert doc["teams"]["c"]["why"][P5][GPU]["bound"] == "not in quota"
    # b lends and never borrows
    assert doc["teams"]["b"]["why"][P5][GPU]["bound"] == "strategy" and limits(doc, "b", P5).get(GPU, "0") == "0"
    # and the Cohort holds the unallocated GPUs on either basis: p5 48 - a's 16 - b's 8 = 24; g5 8 - c's 4 = 4
    assert doc["unallocated"][P5][GPU] == "24" and doc["unallocated"][G5][GPU] == "4"
    # `--borrow-limit-basis quota` is the default, spelled out
    assert planned(capsys, [*dump, "--borrow-limit-basis", "quota"]) == doc


def test_plan_gives_the_pool_numbers_with_the_flag(dump: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    doc = planned(capsys, [*dump, "--borrow-limit-basis", "pool"])
    # a sees the p5 pool: 24 unallocated + 24 lent (its own 16 and b's 8) - its own 16 = 32 GPUs; 50% of it: 16
    why = doc["teams"]["a"]["why"][P5][GPU]
    assert (why["basis"], why["pool"], why["percentCap"], why["limit"], why["bound"]) == (
        "Pool", "32", "16", "16", "percentage"
    )  # fmt: skip
    assert limits(doc, "a", P5)[GPU] == "16" and cluster_queue_gpu(doc, "a") == "16"
    # and may borrow g5 too: 4 unallocated + c's 4 lent = 8 GPUs, 50%: 4
    assert limits(doc, "a", G5)[GPU] == "4"
    # c borrows p5 it has no quota of: 24 unallocated + 24 lent = 48 GPUs, BorrowLimit 100%: 48, the whole pool
    assert limits(doc, "c", P5)[GPU] == "48" and cluster_queue_gpu(doc, "c") == "48"
    assert doc["teams"]["c"]["why"][P5][GPU]["bound"] == "pool"
    # and its own g5: 4 unallocated + its own 4 lent - its own 4 = 4, 100% = 4, the whole pool it sees
    assert limits(doc, "c", G5)[GPU] == "4" and doc["teams"]["c"]["why"][G5][GPU]["bound"] == "pool"
    # the pool and the Cohort do not depend on the basis
    default = planned(capsys, dump)
    for field in ("capacity", "allocated", "unallocated"):
        assert doc[field] == default[field]
    cohorts = [[m for m in d["manifests"] if m["kind"] == "Cohort"] for d in (doc, default)]
    assert cohorts[0] == cohorts[1]


@pytest.mark.parametrize("value", ["percent", "Quota", ""])
def test_a_bad_basis_exits_2_naming_the_flag_and_the_choices(
    dump: list[str], capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*dump, "--borrow-limit-basis", value, "--format", "json"])
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == ""
    assert "--borrow-limit-basis" in err and "'quota'" in err and "'pool'" in err and "Traceback" not in err


def table_row(capsys: pytest.CaptureFixture[str], argv: list[str], team: str, flavor: str) -> list[str]:
    """The team grants table's row of ``team`` on ``flavor`` (its cells split at the 2-space column gaps)."""
    assert main([*argv, "--format", "table"]) == 0
    lines = capsys.readouterr().out.split("Team grants", 1)[1].splitlines()
    return next(re.split(r"\s{2,}", line) for line in lines if line.startswith(f"{team} ") and flavor in line)


def test_the_table_shows_each_basiss_limit_and_the_rule_that_set_it(
    dump: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # NOMINAL, BORROW, LEND, POOL SEEN, SET BY of a's p5 GPUs: 50% of its 16 on the Quota basis, of the 32 it sees
    # on the Pool basis (worked out above)
    assert table_row(capsys, dump, "a", P5)[4:] == ["16", "8", "16", "32", "percentage of quota"]
    assert table_row(capsys, [*dump, "--borrow-limit-basis", "pool"], "a", P5)[4:] == [
        "16", "16", "16", "32", "percentage"
    ]  # fmt: skip


def test_the_help_says_what_each_basis_is(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["plan", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert exit_.value.code == 0 and "--borrow-limit-basis {quota,pool}" in text
    assert "quota (HyperPod's: the team's own quota, default)" in text
