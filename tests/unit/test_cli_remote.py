"""The remote CLI commands (quota, pool, recalc) against the local API Gateway emulator wrapping a fake
admin API: signed requests, the bodies sent, tables and JSON printed, exit codes and error messages."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from idleshare import names
from idleshare_cli import remote
from idleshare_cli.main import CommandError, main
from idleshare_cli.present import human_text
from tests.apigw_local import TEST_IDENTITY, ApiGatewayLocal, use_credentials
from tests.builders import quota_body
from tests.fake_admin_api import FakeAdminApi


def quota_doc(name: str = "research", team: str = "research", gpus: int = 8, **extra: Any) -> dict[str, Any]:
    """The CLI tests' quota file: ``name`` (default: the team's name) of ``gpus`` p5 accelerators."""
    return quota_body(team, gpus, name=name, **extra)


def run(api: ApiGatewayLocal, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--endpoint", api.url])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, document: object) -> str:
    (tmp_path / "q.json").write_text(json.dumps(document))
    return str(tmp_path / "q.json")


def sent(api: ApiGatewayLocal) -> list[tuple[str, str]]:
    return [(e["httpMethod"], e["path"]) for e in api.requests]


def quota(api, capsys, tmp_path, *argv: str, document: object = None) -> tuple[int, str, str]:
    """``idleshare quota <argv> --cluster demo`` (with ``--file`` holding ``document`` when one is given)."""
    files = ("--file", write(tmp_path, document)) if document is not None else ()
    return run(api, capsys, "quota", *argv, "--cluster", "demo", *files)


# ------------------------------------------------------------------------------------ quota
def test_quota_create_sends_the_create_shape_signed_and_prints_the_described_quota(api, fake, capsys, tmp_path):
    # Given a quota file as `quota describe --format json` printed it (read-only fields included)
    doc = quota_doc(ComputeQuotaVersion=3, ComputeQuotaId="q-1", Status="Created", ClusterArn="arn:x")
    code, out, err = quota(api, capsys, tmp_path, "create", document=doc)
    # one signed POST carried only the CreateComputeQuota fields, and the table shows the quota
    assert (code, err, sent(api)) == (0, "", [("POST", "/clusters/demo/compute-quotas")])
    assert json.loads(api.requests[0]["body"]) == quota_doc()
    assert api.requests[0]["requestContext"]["identity"]["userArn"] == TEST_IDENTITY.user_arn
    assert "research" in out and "LendAndBorrow" in out and "ml.p5.48xlarge" in out
    assert "Version" in out and " 1" in out
    # --format json prints the API's JSON
    fake.quotas.clear()
    code, out, _ = quota(api, capsys, tmp_path, "create", "--format", "json", document=quota_doc())
    assert code == 0 and json.loads(out) == fake.quotas["research"]
    # a server's validation error exits 1 showing each field
    code, _, err = quota(api, capsys, tmp_path, "create", document=quota_doc(Description="server says no"))
    assert code == 1 and "HTTP 422: Validation failed" in err and "Description: refused by the server" in err


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (json.dumps(quota_doc(gpus=-1)), "ComputeQuotaConfig.ComputeQuotaResources[0].Accelerators"),
        (json.dumps({**quota_doc(), "ComputeQuotaConfg": {}}), "ComputeQuotaConfg"),
        ('{"Name": "x"}', "ComputeQuotaTarget"),
        (json.dumps([quota_doc()]), "expected one compute quota object"),
        ("{not json", "invalid JSON at line 1"),
        (None, "cannot read"),  # no such file
    ],
)
def test_a_bad_quota_file_exits_2_naming_the_field_and_sends_nothing(api, capsys, tmp_path, text, field):
    if text is not None:
        (tmp_path / "q.json").write_text(text)
    code, out, err = quota(api, capsys, tmp_path, "create", "--file", str(tmp_path / "q.json"))
    assert (code, out) == (2, "") and field in err and f"{tmp_path / 'q.json'}: " in err and err.count("\n") == 1
    assert api.requests == [] and api.rejected == []


def test_quota_update_describe_and_delete_stale_then_at_the_current_version(api, fake, capsys, tmp_path):
    fake.quotas["research"] = {**quota_doc(), "ComputeQuotaVersion": 2, "ClusterId": "demo"}
    patch = {"ComputeQuotaConfig": quota_doc(gpus=16)["ComputeQuotaConfig"]}
    update = ("update", "--name", "research", "--target-version")
    # from version 1: fails naming the current version, nothing changes
    code, _, err = quota(api, capsys, tmp_path, *update, "1", document=patch)
    assert code == 1 and "HTTP 409" in err and "current version: 2" in err
    assert fake.quotas["research"]["ComputeQuotaVersion"] == 2
    # from version 2: the PUT carried the patch and TargetVersion, and version 3 is shown
    code, out, err = quota(api, capsys, tmp_path, *update, "2", "--format", "json", document=patch)
    assert (code, err, json.loads(api.requests[-1]["body"])["TargetVersion"]) == (0, "", 2)
    assert json.loads(out)["ComputeQuotaVersion"] == 3
    assert fake.quotas["research"]["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["Accelerators"] == 16
    # describe, then delete: stale, then at the current version
    code, out, _ = quota(api, capsys, tmp_path, "describe", "--name", "research")
    assert code == 0 and "research" in out and "3" in out
    code, _, err = quota(api, capsys, tmp_path, "delete", "--name", "research", "--target-version", "2")
    assert code == 1 and "current version: 3" in err and "research" in fake.quotas
    code, out, _ = quota(api, capsys, tmp_path, "delete", "--name", "research", "--target-version", "3")
    assert code == 0 and "Deleted" in out and "research" not in fake.quotas
    assert api.requests[-1]["queryStringParameters"] == {"TargetVersion": "3"}
    code, _, err = quota(api, capsys, tmp_path, "describe", "--name", "research")
    assert code == 1 and "HTTP 404" in err and "no compute quota 'research'" in err
    # a bad name exits 2 before any request
    requests = len(api.requests)
    code, _, err = quota(api, capsys, tmp_path, "describe", "--name", "bad name!")
    assert code == 2 and "--name" in err and len(api.requests) == requests


@pytest.mark.parametrize(
    ("patch", "extra", "needle"),
    [
        ({"ActivationState": "Disabled"}, (), "--target-version"),
        ({"ActivationState": "Off"}, ("--target-version", "1"), "ActivationState"),
        ({"Strategy": "Lend"}, ("--target-version", "1"), "Strategy: unknown field"),
        ({"Name": "other", "ActivationState": "Disabled"}, ("--target-version", "1"), "cannot be renamed"),
        ({}, ("--target-version", "1"), "nothing to change"),
        ({"Description": None}, ("--target-version", "1"), "Description: must not be null"),
    ],
)
def test_a_bad_update_exits_2_and_sends_nothing(api, capsys, tmp_path, patch, extra, needle):
    code, _, err = quota(api, capsys, tmp_path, "update", "--name", "research", *extra, document=patch)
    assert code == 2 and needle in err and api.requests == []


def test_quota_list_follows_next_token_and_filters(api, fake, capsys, tmp_path):
    for name in [f"team-{i}" for i in range(5)] + ["other"]:
        fake.quotas[name] = {**quota_doc(name, name), "ComputeQuotaVersion": 1}
    code, out, _ = quota(api, capsys, tmp_path, "list", "--name-contains", "team", "--format", "json")
    assert code == 0
    assert [q["Name"] for q in json.loads(out)["ComputeQuotaSummaries"]] == [f"team-{i}" for i in range(5)]
    assert [e["queryStringParameters"].get("NextToken") for e in api.requests] == [None, "2", "4"]
    assert all(e["queryStringParameters"]["NameContains"] == "team" for e in api.requests)
    code, out, _ = quota(api, capsys, tmp_path, "list")
    assert code == 0 and all(f"team-{i}" in out for i in range(5)) and "50%" in out


# ------------------------------------------------------------------------------------- pool
def test_pool_show_prints_the_pool_the_apply_status_and_excluded_nodes(api, fake, monkeypatch, capsys):
    monkeypatch.setenv(remote.ENV_API_URL, api.url.rstrip("/"))  # the endpoint from the environment
    code, out = main(["pool", "show", "--cluster", "demo"]), capsys.readouterr().out
    assert code == 0 and "Generation:" in out and "7" in out and "Failed (kube API timeout)" in out
    p5 = next(line for line in out.splitlines() if line.startswith("ml.p5.48xlarge") and " gpu " in line)
    pool = [fake.pool[k]["ml.p5.48xlarge"]["nvidia.com/gpu"] for k in ("capacity", "allocated", "unallocated")]
    assert p5.split()[2:5] == pool
    # every excluded node is in GET pool's answer: no page of excluded nodes asked for
    assert fake.pool["excludedNodes"] and all(n in out and r in out for n, r in fake.pool["excludedNodes"].items())
    assert [r["path"] for r in api.requests] == ["/clusters/demo/pool"]


def test_pool_show_pages_through_every_excluded_node_when_the_pool_shows_only_the_first(api, fake, capsys):
    # Given a pool with 4 excluded nodes, of which GET pool shows 1 and GET excluded-nodes pages 2 at a time
    fake.POOL_SAMPLE = 1
    excluded = fake.pool["excludedNodes"]
    assert len(excluded) == 4
    # When the operator shows the pool as JSON: the API's JSON, every excluded node fetched page by page
    code, out, _ = run(api, capsys, "pool", "show", "--cluster", "demo", "--format", "json")
    assert code == 0 and json.loads(out)["excludedNodes"] == excluded
    assert json.loads(out)["capacity"] == fake.pool["capacity"]
    pages = [r["queryStringParameters"] or {} for r in api.requests if r["path"].endswith("/excluded-nodes")]
    assert [(q.get("NextToken"), q.get("limit")) for q in pages] == [(None, "1000"), ("2", "1000")]
    code, out, _ = run(api, capsys, "pool", "show", "--cluster", "demo")
    assert "Excluded nodes (4): NotReady=1, Unhealthy=1, Unschedulable=1, UntoleratedTaint=1" in out
    # a server repeating its NextToken is stopped
    fake.repeat_token = "same"
    code, _, err = run(api, capsys, "pool", "show", "--cluster", "demo")
    assert code != 0 and "repeated NextToken" in err and "Traceback" not in err


def explained(out: str, team: str) -> dict[tuple[str, str], list[str]]:
    """``pool explain``'s rows of ``team`` by (flavor, resource): its cells (split at the table's 2-space gaps)."""
    rows = [re.split(r"\s{2,}", line) for line in out.splitlines() if line.startswith(f"{team} ")]
    return {(cells[2], cells[3]): cells for cells in rows}


def test_pool_explain_shows_each_derivation_and_the_bound_that_won(api, fake, capsys):
    code, out, _ = run(api, capsys, "pool", "explain", "--cluster", "demo", "--team", "infra")
    assert code == 0 and api.requests[-1]["path"] == "/clusters/demo/grants/infra"
    rows = explained(out, "infra")
    why = fake.pool["teams"]["infra"]["why"]["ml.p5.48xlarge"]["nvidia.com/gpu"]
    want = [why["pool"], f"{why['percent']}%", why["percentCap"], why["absoluteCap"] or "-", why["limit"], why["bound"]]
    assert rows[("ml.p5.48xlarge", "gpu")][-6:] == want
    # On the Quota basis (the default), worked by hand from events/examples/quotas.json: infra has no p5 in its
    # quota: 0, "not in quota"; its 4 trn1 (16 Neuron devices each) are 64 devices, BorrowLimit 50% of them: 32
    assert rows[("ml.p5.48xlarge", "gpu")][-2:] == ["0", "not in quota"]
    assert rows[("ml.trn1.32xlarge", "neuron")][4:] == ["64", why_pool(fake, "infra"), "50%", "32", "-", "32",
                                                        "percentage of quota"]  # fmt: skip
    assert "cpu" not in {cells[3] for cells in rows.values()}
    # and the head names the basis and its rule, the legend each rule that won
    head = out.splitlines()[0]
    assert "Quota basis: borrowing limit = BorrowLimit% x the team's quota" in head and "Pool basis" not in head
    assert "not in quota = the instance type is not in the team's quota" in out
    assert "percentage of quota = BorrowLimit % of the team's own quota" in out
    # ml-research: 3 p5 x 8 = 24 GPUs, BorrowLimit 100% -> 24, replaced by its absolute limit of 8 accelerators
    code, out, _ = run(api, capsys, "pool", "explain", "--cluster", "demo", "--team", "ml-research")
    assert explained(out, "ml-research")[("ml.p5.48xlarge", "gpu")][4:] == [
        "24",
        why_pool(fake, "ml-research", "ml.p5.48xlarge", "nvidia.com/gpu"),
        "100%",
        "24",
        "8",
        "8",
        "absolute",
    ]
    code, out, _ = run(api, capsys, "pool", "explain", "--cluster", "demo", "--all-resources")
    assert code == 0 and all(team in out for team in fake.pool["teams"]) and " cpu " in out
    code, _, err = run(api, capsys, "pool", "explain", "--cluster", "demo", "--team", "nobody")
    assert code == 1 and "unknown team 'nobody'" in err


def why_pool(
    fake: FakeAdminApi, team: str, flavor: str = "ml.trn1.32xlarge", resource: str = "aws.amazon.com/neurondevice"
) -> str:
    """The pool ``team`` sees of ``flavor``/``resource`` in the fake's document (information on the Quota basis)."""
    return human_text(fake.pool["teams"][team]["why"][flavor][resource]["pool"], resource, "0")


def test_pool_explain_of_a_pool_stored_before_the_basis_names_the_pool_basis_and_its_rule(api, fake, capsys):
    # Given a pool document stored before derivations named their basis (the Pool basis, then the only one)
    for grant in fake.pool["teams"].values():
        for per in grant["why"].values():
            for d in per.values():
                del d["basis"]
    code, out, _ = run(api, capsys, "pool", "explain", "--cluster", "demo")
    # Then explain says it was the Pool basis and gives that rule, not the Quota basis's
    head = out.splitlines()[0]
    assert code == 0 and "Pool basis: borrowing limit = min(BorrowLimit% x pool seen, absolute cap, pool seen)" in head
    assert "Quota basis" not in head


def test_pool_explain_and_show_read_every_team_from_the_grants_pages_of_one_generation(api, fake, capsys):
    # Given 4 teams, GET grants answering 2 a page, GET pool showing only the first team
    fake.TEAMS_SAMPLE = 1
    teams = fake.pool["teams"]
    assert len(teams) == 4
    # When the operator explains every team: both pages read, every team shown
    code, out, _ = run(api, capsys, "pool", "explain", "--cluster", "demo", "--format", "json")
    assert code == 0 and json.loads(out)["teams"] == teams and json.loads(out)["generation"] == 7
    grants = [r["queryStringParameters"] or {} for r in api.requests if r["path"] == "/clusters/demo/grants"]
    assert [(q.get("NextToken"), q.get("limit")) for q in grants] == [(None, "100"), ("2", "100")]
    # And pool show fills in the teams GET pool left out
    code, out, _ = run(api, capsys, "pool", "show", "--cluster", "demo", "--format", "json")
    assert code == 0 and json.loads(out)["teams"] == teams and json.loads(out)["teamsSummary"]["shown"] == 4
    # And a recompute landing between two pages makes it read them again, from the first
    api.requests.clear()
    fake.grant_generations = [7, 8]
    code, out, _ = run(api, capsys, "pool", "explain", "--cluster", "demo", "--format", "json")
    assert code == 0 and json.loads(out)["teams"] == teams
    assert sum(r["path"] == "/clusters/demo/grants" for r in api.requests) == 4
    # And a pool that changes on every read is an error naming the generations, not a mix of two
    fake.grant_generations = [7, 8, 8, 9, 9, 10]
    code, _, err = run(api, capsys, "pool", "explain", "--cluster", "demo")
    assert code == 1 and "the pool changed while its pages were read, 3 times (generations 9, 10)" in err


def test_pool_history_pages_up_to_the_limit(api, capsys):
    code, out, _ = run(api, capsys, "pool", "history", "--cluster", "demo", "--limit", "5", "--format", "json")
    assert code == 0 and [g["generation"] for g in json.loads(out)["generations"]] == [10, 9, 8, 7, 6]
    assert [e["queryStringParameters"].get("NextToken") for e in api.requests] == [None, "8", "6"]
    assert run(api, capsys, "pool", "history", "--cluster", "demo", "--limit", "0")[0] == 2
    code, _, err = run(api, capsys, "pool", "show", "--cluster", "nope")  # an unknown cluster: the API's message
    assert code == 1 and "HTTP 404: unknown cluster 'nope'" in err


# ----------------------------------------------------------------------------------- recalc
def test_recalc_without_wait_prints_the_request_id(api, fake, capsys):
    code, out, _ = run(api, capsys, "recalc", "--cluster", "demo", "--reason", "quota grew")
    assert code == 0 and "req-1" in out and fake.reasons == "quota grew"
    assert sent(api) == [("POST", "/clusters/demo/recalculate")]
    code, _, err = run(api, capsys, "recalc", "--cluster", "demo", "--reason", "x" * 1025)
    assert code == 2 and "--reason" in err and len(api.requests) == 1


def test_recalc_wait_polls_until_done_quietly_unless_stderr_is_a_terminal(api, monkeypatch, capsys):
    code, out, err = run(api, capsys, "recalc", "--cluster", "demo", "--wait", "60")
    assert (code, err) == (0, "") and "Done" in out and "generation 8" in out
    assert sent(api) == [("POST", "/clusters/demo/recalculate")] + [("GET", "/clusters/demo/recalculations/req-1")] * 3
    tty = io.StringIO()
    tty.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr(remote.sys, "stderr", tty)
    assert main(["recalc", "--cluster", "demo", "--wait", "--endpoint", api.url]) == 0
    assert tty.getvalue().count("recalculation req-2 of demo: waiting") == 3


def test_recalc_wait_exits_1_when_the_recompute_failed_or_after_the_wait(api, fake, monkeypatch, capsys):
    fake.receipt_status = "Failed"
    code, out, err = run(api, capsys, "recalc", "--cluster", "demo", "--wait", "60", "--format", "json")
    assert code == 1 and json.loads(out)["status"] == "Failed" and "kube API down" in err
    # a receipt that never comes, and a clock that advances 10 s per sleep
    fake.receipt_after, now, sent_before = 10**6, [0.0], len(api.requests)
    monkeypatch.setattr(remote, "monotonic", lambda: now[0])
    monkeypatch.setattr(remote, "sleep", lambda s: now.__setitem__(0, now[0] + 10))
    code, _, err = run(api, capsys, "recalc", "--cluster", "demo", "--wait", "30")
    assert code == 1 and "no result after 30s" in err and "req-2" in err
    assert 3 <= len(api.requests) - sent_before - 1 <= 5


# ------------------------------------------------------------------------------- connection
def test_a_get_is_retried_on_throttling_but_a_post_is_not(api, fake, capsys):
    fake.fail_next = [503, 429]
    assert run(api, capsys, "pool", "show", "--cluster", "demo")[0] == 0 and len(api.requests) == 3
    fake.fail_next = [503]
    code, _, err = run(api, capsys, "recalc", "--cluster", "demo")
    assert code == 1 and "HTTP 503: try again" in err and len(api.requests) == 4


def test_debug_never_prints_credentials_or_the_signature(api, capsys):
    code, out, err = run(api, capsys, "pool", "show", "--cluster", "demo", "--debug")
    assert code == 0 and "> GET http://127.0.0.1" in err and "< 200" in err
    secrets = (TEST_IDENTITY.secret_key, TEST_IDENTITY.token, TEST_IDENTITY.access_key, "Signature=", "Authorization")
    assert [secret for secret in secrets if secret in out + err] == []


NO_CREDENTIALS = "no AWS credentials"


@pytest.mark.parametrize(
    ("env", "endpoint", "needles"),
    [
        ({}, lambda url: url.replace("/prod/", "/"), ["HTTP 403: Missing Authentication Token", "includes the stage"]),
        ({"AWS_SECRET_ACCESS_KEY": "not-the-secret"}, str, ["HTTP 403", "signature"]),
        (dict.fromkeys(("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")), str, [NO_CREDENTIALS]),
        ({}, lambda url: "http://127.0.0.1:9/prod/", ["cannot reach http://127.0.0.1:9/prod/"]),
    ],
    ids=["without-the-stage", "wrong-secret", "no-credentials", "unreachable"],
)
def test_a_request_refused_at_the_gate_or_never_sent_exits_1_saying_why(
    api, monkeypatch, capsys, env, endpoint, needles
):
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value)
    code = main(["pool", "show", "--cluster", "demo", "--endpoint", endpoint(api.url), "--timeout", "2"])
    err = capsys.readouterr().err
    assert code == 1 and all(needle in err for needle in needles), err
    assert api.requests == []


@pytest.mark.parametrize(
    ("endpoint", "needle"),
    [
        ("ftp://example.com/prod", "not an http(s) URL"),
        ("http://abc.execute-api.us-east-1.amazonaws.com/prod", "use https"),
        ("https://abc.example.com/prod?x=1", "must not carry a query"),
        ("https://x.example.com/ --profile nobody", "--profile nobody"),
    ],
)
def test_a_bad_endpoint_or_profile_exits_2(monkeypatch, capsys, endpoint, needle):
    use_credentials(monkeypatch)
    assert main(["pool", "show", "--cluster", "demo", "--endpoint", *endpoint.split()]) == 2
    assert needle in capsys.readouterr().err


class StubSession:
    """A boto3 session whose CloudFormation client answers DescribeStacks with ``outputs``, or ``error``."""

    region_name = "us-east-1"

    def __init__(self, outputs: list[dict[str, str]] | None = None, error: str | None = None) -> None:
        import boto3

        keys = {"aws_access_key_id": "a", "aws_secret_access_key": "b"}
        self.cfn = boto3.client("cloudformation", region_name="us-east-1", **keys)
        stub, stack = Stubber(self.cfn), {"StackName": names.STACK_NAME, "StackStatus": "CREATE_COMPLETE"}
        if error:
            stub.add_client_error("describe_stacks", "ValidationError", error)
        else:
            stack |= {"CreationTime": "2026-01-01T00:00:00Z", "Outputs": outputs}
            stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": names.STACK_NAME})
        stub.activate()

    def client(self, name: str, config: Any = None) -> Any:
        assert name == "cloudformation"
        return self.cfn


def test_the_endpoint_comes_from_the_stack_outputs_and_the_signing_region_from_an_execute_api_host():
    base, region = remote._check_endpoint("https://a1b2c3.execute-api.eu-west-1.amazonaws.com/prod", "--endpoint")
    assert (base, region) == ("https://a1b2c3.execute-api.eu-west-1.amazonaws.com/prod/", "eu-west-1")
    assert remote._check_endpoint("https://api.example.com", "x") == ("https://api.example.com/", None)
    url = "https://a1b2c3.execute-api.us-east-1.amazonaws.com/prod/"
    outputs = [{"OutputKey": "Other", "OutputValue": "x"}, {"OutputKey": names.OUTPUT_API_URL, "OutputValue": url}]
    assert remote._endpoint_from_stack(StubSession(outputs), names.STACK_NAME, 5) == url
    # a missing stack or output is a clear error
    with pytest.raises(CommandError, match=r"does not exist.*--endpoint"):
        remote._endpoint_from_stack(StubSession(error="Stack with id idleshare does not exist"), names.STACK_NAME, 5)
    with pytest.raises(CommandError, match=f"no {names.OUTPUT_API_URL} output"):
        remote._endpoint_from_stack(StubSession([]), names.STACK_NAME, 5)
