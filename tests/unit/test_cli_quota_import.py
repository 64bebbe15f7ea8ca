"""`idleshare quota import` and `idleshare scheduler-config`: SageMaker's compute quotas and scheduler config read
through botocore's real SageMaker model (``Stubber`` checks each request and stubbed answer against it; moto has no
compute-quota APIs) and written through the CLI's fake admin API behind the API Gateway emulator."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import Stubber

from idleshare_cli import quota_import
from idleshare_cli.main import main
from tests import sagemaker_stub as sm
from tests.apigw_local import ApiGatewayLocal

ARN = sm.CLUSTER_ARN


@pytest.fixture
def sagemaker(monkeypatch: pytest.MonkeyPatch):
    """The SageMaker client the command gets (the region it asked for recorded), stubbed per test."""
    client = sm.client()
    asked: list[str] = []

    def make(args: Any, region: str) -> Any:
        asked.append(region)
        return client

    monkeypatch.setattr(quota_import, "sagemaker_client", make)
    with Stubber(client) as stub:
        stub.regions = asked  # type: ignore[attr-defined]
        yield stub
        stub.assert_no_pending_responses()


def stub_cluster(stub: Stubber, quotas: list[dict[str, Any]], scheduler: dict[str, Any] | None) -> None:
    """SageMaker's answers, in the order the import asks: the quota list in pages of two (each quota described as
    it is listed), then the scheduler configs."""
    pages = [quotas[i : i + 2] for i in range(0, len(quotas), 2)] or [[]]
    for n, page in enumerate(pages):
        params = {"ClusterArn": ARN} | ({"NextToken": f"page-{n}"} if n else {})
        response: dict[str, Any] = {"ComputeQuotaSummaries": [sm.summary(q) for q in page]}
        if n + 1 < len(pages):
            response["NextToken"] = f"page-{n + 1}"
        stub.add_response("list_compute_quotas", response, params)
        for q in page:
            if q["Status"] not in quota_import.SKIPPED_STATUSES:
                stub.add_response(
                    "describe_compute_quota", sm.describe_response(q), {"ComputeQuotaId": q["ComputeQuotaId"]}
                )
    summaries = [sm.scheduler_config_summary(scheduler)] if scheduler else []
    stub.add_response(
        "list_cluster_scheduler_configs", {"ClusterSchedulerConfigSummaries": summaries}, {"ClusterArn": ARN}
    )
    if scheduler:
        config_id = {"ClusterSchedulerConfigId": scheduler["ClusterSchedulerConfigId"]}
        stub.add_response("describe_cluster_scheduler_config", scheduler, config_id)


def run(api: ApiGatewayLocal, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--endpoint", api.url])
    out, err = capsys.readouterr()
    return code, out, err


def writes(api: ApiGatewayLocal) -> list[tuple[str, str]]:
    return [(e["httpMethod"], e["path"]) for e in api.requests if e["httpMethod"] != "GET"]


def adopted(quota: dict[str, Any]) -> dict[str, Any]:
    """A SageMaker quota as idleshare should store it: its CreateComputeQuota fields, as JSON."""
    return json.loads(json.dumps({k: quota[k] for k in quota_import.ADOPTED_FIELDS if k in quota}))


def import_(api, capsys, *extra: str) -> tuple[int, str, str]:
    return run(api, capsys, "quota", "import", "--cluster", "demo", "--hyperpod-cluster-arn", ARN, *extra)


# ------------------------------------------------------------------------------------ quota import
def test_a_dry_run_prints_what_it_would_create_and_writes_nothing(api, fake, sagemaker, capsys):
    # Given a HyperPod cluster with four quotas (listed over two pages) and a scheduler config, and nothing in idleshare
    quotas, scheduler = sm.example_quotas(), sm.example_scheduler_config()
    stub_cluster(sagemaker, quotas, scheduler)
    # When the import runs with --dry-run
    code, out, err = import_(api, capsys, "--dry-run")
    # Then it reads SageMaker in the cluster's region, prints a create per quota and the scheduler config's update
    assert (code, err) == (0, "") and sagemaker.regions == ["us-west-2"]
    assert "Dry run: nothing written" in out and f"would make {len(quotas) + 1} change(s)" in out
    for q in quotas:
        assert any(line.split()[:3] == ["create", "quota", q["Name"]] for line in out.splitlines())
    assert any(line.split()[:3] == ["create", "scheduler", "config"] for line in out.splitlines())
    # and writes nothing
    assert writes(api) == [] and fake.quotas == {} and fake.scheduler is None


def test_the_import_creates_each_quota_as_sagemaker_describes_it_and_the_scheduler_config(api, fake, sagemaker, capsys):
    quotas, scheduler = sm.example_quotas(), sm.example_scheduler_config()
    stub_cluster(sagemaker, quotas, scheduler)
    code, out, err = import_(api, capsys)
    assert (code, err) == (0, ""), err
    # one POST per quota, carrying exactly its CreateComputeQuota fields, then the scheduler config's PUT (a create)
    expected = [("POST", "/clusters/demo/compute-quotas")] * len(quotas) + [("PUT", "/clusters/demo/scheduler-config")]
    assert writes(api) == expected
    for q in quotas:
        stored = {k: v for k, v in fake.quotas[q["Name"]].items() if k in quota_import.ADOPTED_FIELDS}
        assert stored == adopted(q)
    assert fake.scheduler is not None and fake.scheduler["SchedulerConfig"] == scheduler["SchedulerConfig"]
    assert f"{len(quotas) + 1} change(s) written" in out


def test_a_second_import_updates_only_what_changed_skips_deleted_quotas_and_keeps_idleshares_own(
    api, fake, sagemaker, capsys
):
    # Given idleshare holds the example quotas (version 1), an own quota SageMaker lacks, and SageMaker's config
    quotas = sm.example_quotas()
    for q in quotas:
        fake.quotas[q["Name"]] = {**adopted(q), "ComputeQuotaVersion": 1, "ClusterId": "demo"}
    own = {"Name": "local-only", "ComputeQuotaTarget": {"TeamName": "local"}, "ComputeQuotaVersion": 4}
    fake.quotas["local-only"] = own
    scheduler = sm.example_scheduler_config()
    fake.scheduler = {"SchedulerConfig": scheduler["SchedulerConfig"], "SchedulerConfigVersion": 3}
    # and in SageMaker one quota's borrow limit changed and a fifth quota is being deleted
    changed = quotas[1]
    changed["ComputeQuotaConfig"]["ResourceSharingConfig"] = {"Strategy": "LendAndBorrow", "BorrowLimit": 10}
    deleting = {**quotas[0], "Name": "old-quota", "ComputeQuotaId": "zzzzzzzzzzzz", "Status": "Deleting"}
    stub_cluster(sagemaker, [*quotas, deleting], scheduler)
    # When it is imported again
    code, out, err = import_(api, capsys)
    # Then one PUT carries that quota's config at the version read; nothing else is written
    assert (code, err) == (0, ""), err
    assert writes(api) == [("PUT", f"/clusters/demo/compute-quotas/{changed['Name']}")]
    assert ("unchanged", "scheduler", "config") in {tuple(line.split()[:3]) for line in out.splitlines()}
    body = json.loads(next(e["body"] for e in api.requests if e["httpMethod"] == "PUT"))
    assert body == {"TargetVersion": 1, "ComputeQuotaConfig": adopted(changed)["ComputeQuotaConfig"]}
    assert fake.quotas["local-only"] == own
    lines = {tuple(line.split()[:3]) for line in out.splitlines()}
    assert {
        ("update", "quota", changed["Name"]),
        ("skip", "quota", "old-quota"),
        ("keep", "quota", "local-only"),
    } <= lines
    assert "SageMaker Status Deleting" in out


def test_a_team_governed_under_another_quota_name_is_a_conflict_and_nothing_is_written(api, fake, sagemaker, capsys):
    quotas = sm.example_quotas()
    team = quotas[0]["ComputeQuotaTarget"]["TeamName"]
    fake.quotas["mine"] = {"Name": "mine", "ComputeQuotaTarget": {"TeamName": team}, "ComputeQuotaVersion": 1}
    stub_cluster(sagemaker, quotas, None)
    code, out, err = import_(api, capsys)
    assert code == 1 and "1 conflict(s) above: nothing written" in err
    assert f"team {team} already has idleshare quota mine" in out
    assert writes(api) == [] and set(fake.quotas) == {"mine"}


def test_a_write_refused_midway_says_how_far_it_got_and_a_second_run_finishes_the_rest(api, fake, sagemaker, capsys):
    # Given the second quota's create is refused by the API
    quotas = sm.example_quotas()
    second = sorted(q["Name"] for q in quotas)[1]
    next(q for q in quotas if q["Name"] == second)["Description"] = "server says no"
    stub_cluster(sagemaker, quotas, None)
    code, _, err = import_(api, capsys)
    assert code == 1 and "HTTP 422" in err and f"1 of {len(quotas)} writes done before this one" in err
    assert len(fake.quotas) == 1
    # When it is run again once SageMaker's quota is fixed, only what is missing is written
    next(q for q in quotas if q["Name"] == second)["Description"] = "fixed"
    stub_cluster(sagemaker, quotas, None)
    api.requests.clear()
    code, _, err = import_(api, capsys)
    assert (code, err) == (0, "") and len(writes(api)) == len(quotas) - 1 and len(fake.quotas) == len(quotas)


def test_a_sagemaker_refusal_is_one_line_naming_the_call(api, sagemaker, capsys):
    sagemaker.add_client_error("list_compute_quotas", "AccessDeniedException", "not authorized to ListComputeQuotas")
    code, out, err = import_(api, capsys)
    assert code == 1 and out == ""
    assert (
        err
        == "idleshare quota: sagemaker ListComputeQuotas: AccessDeniedException: not authorized to ListComputeQuotas\n"
    )


@pytest.mark.parametrize(
    "arn", ["", "arn:aws:sagemaker:us-west-2:123:cluster/x", "arn:aws:eks:us-west-2:123456789012:cluster/k1ft7ynfs0qz"]
)
def test_a_bad_cluster_arn_exits_2_naming_the_flag(api, capsys, arn):
    code, out, err = run(api, capsys, "quota", "import", "--cluster", "demo", "--hyperpod-cluster-arn", arn)
    assert code == 2 and out == "" and err.startswith("idleshare quota: --hyperpod-cluster-arn")
    assert api.requests == []


# ------------------------------------------------------------------------------------ scheduler-config
def test_scheduler_config_show_prints_the_defaults_at_version_0(api, capsys):
    code, out, err = run(api, capsys, "scheduler-config", "show", "--cluster", "demo")
    assert (code, err) == (0, "")
    rows = {tuple(line.split()) for line in out.splitlines()}
    assert {("Version", "0"), ("FairShare", "Enabled"), ("IdleResourceSharing", "Enabled")} <= rows


def test_scheduler_config_set_changes_only_what_it_names_at_the_version_it_read(api, fake, capsys):
    # Given no stored config: the first set creates it (no TargetVersion)
    argv = ("scheduler-config", "set", "--cluster", "demo")
    code, _, err = run(api, capsys, *argv, "--priority-class", "inference=90", "--priority-class", "training=50")
    assert (code, err) == (0, "")
    assert json.loads(api.requests[-1]["body"]) == {
        "SchedulerConfig": {
            "PriorityClasses": [{"Name": "inference", "Weight": 90}, {"Name": "training", "Weight": 50}],
            "FairShare": "Enabled",
            "IdleResourceSharing": "Enabled",
        }
    }
    # When sharing is switched off: the priority classes stay, the version read is the TargetVersion
    code, out, err = run(api, capsys, *argv, "--idle-resource-sharing", "Disabled")
    assert (code, err) == (0, "")
    body = json.loads(api.requests[-1]["body"])
    assert body["TargetVersion"] == 1 and body["SchedulerConfig"]["IdleResourceSharing"] == "Disabled"
    assert len(body["SchedulerConfig"]["PriorityClasses"]) == 2
    assert ("IdleResourceSharing", "Disabled") in {tuple(line.split()) for line in out.splitlines()}
    # and a stale --target-version is refused by the API, naming the current version
    code, _, err = run(api, capsys, *argv, "--fair-share", "Disabled", "--target-version", "1")
    assert code == 1 and "HTTP 409" in err and "(current version: 2)" in err
    assert fake.scheduler is not None and fake.scheduler["SchedulerConfig"]["FairShare"] == "Enabled"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ((), "nothing to change"),
        (("--priority-class", "training"), "--priority-class 'training': expected NAME=WEIGHT"),
        (("--priority-class", "training=500"), "PriorityClasses[0].Weight"),
        (("--priority-class", "Bad_Name=5"), "PriorityClasses[0].Name"),
    ],
)
def test_scheduler_config_set_refuses_bad_flags_with_exit_2_and_send_nothing(api, capsys, flags, message):
    code, out, err = run(api, capsys, "scheduler-config", "set", "--cluster", "demo", *flags)
    assert code == 2 and out == "" and message in err and err.endswith("\n") and err.count("\n") == 1
    assert writes(api) == []


def test_the_idle_sharing_help_says_teams_still_borrow_what_lenders_leave_unused(capsys):
    # docs/spec.md §2: pool_i = [IdleResourceSharing Enabled] x unallocated + what the other teams lend
    with pytest.raises(SystemExit):
        main(["scheduler-config", "set", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "no team borrows" not in text
    assert "teams still borrow what the lending teams leave unused" in text


def test_a_quota_deleted_between_list_and_describe_is_skipped_saying_why(api, fake, sagemaker, capsys):
    # Given SageMaker lists two quotas, and the second is gone by the time it is described
    first, gone = sm.example_quotas()[:2]
    sagemaker.add_response("list_compute_quotas", {"ComputeQuotaSummaries": [sm.summary(first), sm.summary(gone)]},
                           {"ClusterArn": ARN})  # fmt: skip
    sagemaker.add_response(
        "describe_compute_quota", sm.describe_response(first), {"ComputeQuotaId": first["ComputeQuotaId"]}
    )
    sagemaker.add_client_error("describe_compute_quota", "ResourceNotFound", "Resource not found", 400,
                               expected_params={"ComputeQuotaId": gone["ComputeQuotaId"]})  # fmt: skip
    sagemaker.add_response(
        "list_cluster_scheduler_configs", {"ClusterSchedulerConfigSummaries": []}, {"ClusterArn": ARN}
    )
    # When it is imported
    code, out, err = import_(api, capsys)
    # Then the first is created and the second skipped, saying why; no traceback
    assert (code, err) == (0, ""), err
    assert writes(api) == [("POST", "/clusters/demo/compute-quotas")] and set(fake.quotas) == {first["Name"]}
    (line,) = [x for x in out.splitlines() if x.split()[:3] == ["skip", "quota", gone["Name"]]]
    assert "deleted between List and Describe" in line


@pytest.mark.parametrize("status", ["Updating", "UpdateFailed"])
def test_a_quota_whose_update_is_in_flight_or_failed_is_imported_with_a_note(api, fake, sagemaker, capsys, status):
    quotas = sm.example_quotas()
    quotas[0]["Status"] = status
    stub_cluster(sagemaker, quotas, None)
    code, out, err = import_(api, capsys)
    assert (code, err) == (0, ""), err
    assert set(fake.quotas) == {q["Name"] for q in quotas}
    (line,) = [x for x in out.splitlines() if x.split()[:3] == ["create", "quota", quotas[0]["Name"]]]
    assert f"SageMaker Status {status}" in line
    assert all("SageMaker Status" not in x for x in out.splitlines() if quotas[1]["Name"] in x)


def test_two_sagemaker_quotas_for_one_team_are_refused_naming_both_and_nothing_is_written(api, fake, sagemaker, capsys):
    quotas = sm.example_quotas()
    team = quotas[0]["ComputeQuotaTarget"]["TeamName"]
    twin = {**quotas[1], "ComputeQuotaTarget": {**quotas[1]["ComputeQuotaTarget"], "TeamName": team}}
    stub_cluster(sagemaker, [quotas[0], twin, *quotas[2:]], None)
    code, out, err = import_(api, capsys)
    assert code == 1 and "2 conflict(s) above: nothing written" in err
    assert f"team {team} has 2 SageMaker quotas ({' and '.join(sorted([quotas[0]['Name'], twin['Name']]))})" in out
    assert writes(api) == [] and fake.quotas == {}
