"""The remote CLI commands (quota, pool, recalc) against the local API Gateway emulator wrapping a fake
admin API: signed requests, the bodies sent, tables and JSON printed, exit codes and error messages."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from idleshare import names
from idleshare.cli import remote
from idleshare.cli.main import CommandError, UsageError, main
from idleshare.cli.plan import plan
from idleshare.cli.present import result_json
from tests.apigw_local import TEST_IDENTITY, ApiGatewayLocal, use_credentials
from tests.builders import quota_body

EXAMPLES = Path(__file__).parents[2] / "events" / "examples"


def quota_doc(name: str = "research", team: str = "research", gpus: int = 8, **extra: Any) -> dict[str, Any]:
    """The CLI tests' quota file: ``name`` (default: the team's name) of ``gpus`` p5 accelerators."""
    return quota_body(team, gpus, name=name, **extra)


def example_pool() -> dict[str, Any]:
    result, _ = plan((EXAMPLES / "nodes.json").read_bytes(), (EXAMPLES / "quotas.json").read_bytes())
    return result_json(result)


class FakeAdminApi:
    """The admin API contract (notes/api-contract.md) in memory, enough to drive the CLI."""

    PAGE = 2
    POOL_SAMPLE = 100  # excluded nodes GET pool shows (as the real API)

    def __init__(self) -> None:
        self.repeat_token = ""  # a server bug: the same NextToken on every page
        self.clusters = {"demo"}
        self.quotas: dict[str, dict[str, Any]] = {}
        self.pool = example_pool()
        self.receipt_after = 2  # GETs of a receipt answered 404 before it exists
        self.receipt_status = "Done"
        self.receipt_polls: dict[str, int] = {}
        self.fail_next: list[int] = []  # statuses to answer before serving normally

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        if self.fail_next:
            return self.reply(self.fail_next.pop(0), {"message": "try again"})
        method, parts = event["httpMethod"], event["path"].strip("/").split("/")
        query = event["queryStringParameters"] or {}
        body = json.loads(event["body"]) if event["body"] else None
        if parts[0] != "clusters" or len(parts) < 3:
            return self.reply(404, {"message": "no route"})
        cluster, what, rest = parts[1], parts[2], parts[3:]
        if cluster not in self.clusters:
            return self.reply(404, {"message": f"unknown cluster {cluster!r}", "errors": []})
        if what == "compute-quotas":
            return self.quota(method, cluster, rest[0] if rest else None, query, body)
        if (method, what) == ("GET", "pool"):
            head = {"cluster": cluster, "generation": 7, "computedAt": "2026-12-01T10:00:00Z"}
            status = {"applyStatus": "Failed", "applyMessage": "kube API timeout", "readFailure": ""}
            excluded = self.pool["excludedNodes"]
            shown = sorted(excluded)[: self.POOL_SAMPLE]
            bounded = {
                "excludedNodes": {n: excluded[n] for n in shown},
                "excludedSummary": {
                    "total": len(excluded),
                    "byReason": dict(Counter(excluded.values())),
                    "shown": len(shown),
                    "route": f"/clusters/{cluster}/excluded-nodes",
                },
            }
            return self.reply(200, {**head, **status, **self.pool, **bounded})
        if (method, what) == ("GET", "excluded-nodes"):
            names_ = sorted(self.pool["excludedNodes"])
            token = query.get("NextToken", "0")
            start = 0 if token == self.repeat_token else int(token)
            limit = min(int(query.get("limit", "1000")), self.PAGE)
            chunk = names_[start : start + limit]
            excluded_page: dict[str, Any] = {
                "cluster": cluster,
                "total": len(names_),
                "excludedNodes": {n: self.pool["excludedNodes"][n] for n in chunk},
            }
            if start + limit < len(names_):
                excluded_page["NextToken"] = self.repeat_token or str(start + limit)
            return self.reply(200, excluded_page)
        if (method, what) == ("GET", "grants"):
            teams = self.pool["teams"]
            if rest:
                if rest[0] not in teams:
                    return self.reply(404, {"message": f"unknown team {rest[0]!r}", "errors": []})
                return self.reply(200, {"cluster": cluster, "generation": 7, "team": rest[0], **teams[rest[0]]})
            return self.reply(200, {"cluster": cluster, "generation": 7, "teams": teams})
        if (method, what) == ("GET", "history"):
            start = int(query.get("NextToken", "10"))
            limit = min(int(query.get("limit", "20")), self.PAGE)
            gens = [{"generation": g, "computedAt": f"t{g}", "summary": f"gen {g}"} for g in range(start, 0, -1)]
            page: dict[str, Any] = {"generations": gens[:limit]}
            if len(gens) > limit:
                page["NextToken"] = str(start - limit)
            return self.reply(200, page)
        if (method, what) == ("POST", "recalculate"):
            request_id = f"req-{len(self.receipt_polls) + 1}"
            self.receipt_polls[request_id] = 0
            self.reasons = (body or {}).get("reason")
            return self.reply(202, {"requestId": request_id, "cluster": cluster, "status": "Requested"})
        if (method, what) == ("GET", "recalculations") and rest[0] in self.receipt_polls:
            self.receipt_polls[rest[0]] += 1
            if self.receipt_polls[rest[0]] <= self.receipt_after:
                return self.reply(404, {"message": "no receipt yet", "errors": []})
            receipt = {"requestId": rest[0], "cluster": cluster, "status": self.receipt_status, "generation": 8}
            receipt.update({"changed": True} if self.receipt_status == "Done" else {"message": "kube API down"})
            return self.reply(200, receipt)
        return self.reply(404, {"message": "no route"})

    def quota(self, method: str, cluster: str, name: str | None, query: dict[str, str], body: Any) -> dict[str, Any]:
        if name is None and method == "POST":
            if body.get("Description") == "server says no":
                errors = [{"field": "Description", "message": "refused by the server"}]
                return self.reply(422, {"message": "Validation failed", "errors": errors})
            if body["Name"] in self.quotas:
                return self.reply(409, {"message": f"quota {body['Name']} exists", "errors": []})
            self.quotas[body["Name"]] = {**body, "ComputeQuotaVersion": 1, "Status": "Created", "ClusterId": cluster}
            return self.reply(201, self.quotas[body["Name"]])
        if name is None:
            names_ = sorted(n for n in self.quotas if query.get("NameContains", "") in n)
            start = int(query.get("NextToken", "0"))
            page: dict[str, Any] = {
                "ComputeQuotaSummaries": [self.quotas[n] for n in names_[start : start + self.PAGE]]
            }
            if start + self.PAGE < len(names_):
                page["NextToken"] = str(start + self.PAGE)
            return self.reply(200, page)
        if name not in self.quotas:
            return self.reply(404, {"message": f"no compute quota {name!r} in cluster {cluster!r}", "errors": []})
        current = self.quotas[name]["ComputeQuotaVersion"]
        if method == "GET":
            return self.reply(200, self.quotas[name])
        target = body.get("TargetVersion") if method == "PUT" else query.get("TargetVersion")
        if target is not None and int(target) != current:
            message = f"TargetVersion {target} is stale: the current version is {current}"
            return self.reply(409, {"message": message, "errors": [], "CurrentVersion": current})
        if method == "DELETE":
            del self.quotas[name]
            return {"statusCode": 204, "headers": {}, "body": ""}
        patch = {k: v for k, v in body.items() if k != "TargetVersion"}
        self.quotas[name] = {**self.quotas[name], **patch, "ComputeQuotaVersion": current + 1}
        return self.reply(200, self.quotas[name])

    @staticmethod
    def reply(status: int, payload: Any) -> dict[str, Any]:
        return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": json.dumps(payload)}


@pytest.fixture
def fake() -> FakeAdminApi:
    return FakeAdminApi()


@pytest.fixture
def api(fake: FakeAdminApi, monkeypatch: pytest.MonkeyPatch):
    use_credentials(monkeypatch)
    monkeypatch.setattr(remote, "sleep", lambda seconds: None)
    with ApiGatewayLocal(fake) as gate:
        yield gate


def run(api: ApiGatewayLocal, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--endpoint", api.url])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, document: object, name: str = "q.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def sent(api: ApiGatewayLocal) -> list[tuple[str, str]]:
    return [(e["httpMethod"], e["path"]) for e in api.requests]


# ------------------------------------------------------------------------------------ quota
def test_quota_create_sends_the_create_shape_signed_and_prints_the_described_quota(api, fake, capsys, tmp_path):
    # Given a quota file as `quota describe --format json` printed it (read-only fields included)
    doc = quota_doc(ComputeQuotaVersion=3, ComputeQuotaId="q-1", Status="Created", ClusterArn="arn:x")

    # When it is created
    code, out, err = run(api, capsys, "quota", "create", "--cluster", "demo", "--file", write(tmp_path, doc))

    # Then one signed POST carried only the CreateComputeQuota fields, and the table shows the quota
    assert (code, err) == (0, "")
    assert sent(api) == [("POST", "/clusters/demo/compute-quotas")]
    assert json.loads(api.requests[0]["body"]) == quota_doc()
    assert api.requests[0]["requestContext"]["identity"]["userArn"] == TEST_IDENTITY.user_arn
    assert "research" in out and "LendAndBorrow" in out and "ml.p5.48xlarge" in out
    assert "Version" in out and " 1" in out


def test_quota_create_format_json_prints_the_apis_json(api, fake, capsys, tmp_path):
    code, out, _ = run(
        api, capsys, "quota", "create", "--cluster", "demo", "--file", write(tmp_path, quota_doc()), "--format", "json"
    )
    assert code == 0 and json.loads(out) == fake.quotas["research"]


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (quota_doc(gpus=-1), "ComputeQuotaConfig.ComputeQuotaResources[0].Accelerators"),
        ({**quota_doc(), "ComputeQuotaConfg": {}}, "ComputeQuotaConfg"),
        ({"Name": "x"}, "ComputeQuotaTarget"),
        ([quota_doc()], "expected one compute quota object"),
    ],
)
def test_a_bad_quota_file_exits_2_naming_the_field_and_sends_nothing(api, capsys, tmp_path, document, field):
    code, out, err = run(api, capsys, "quota", "create", "--cluster", "demo", "--file", write(tmp_path, document))
    assert code == 2 and out == ""
    assert field in err and err.count("\n") == 1
    assert api.requests == [] and api.rejected == []


def test_an_unreadable_or_invalid_json_file_exits_2(api, capsys, tmp_path):
    code, _, err = run(api, capsys, "quota", "create", "--cluster", "demo", "--file", str(tmp_path / "missing.json"))
    assert code == 2 and "--file" in err and "cannot read" in err
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = run(api, capsys, "quota", "create", "--cluster", "demo", "--file", str(tmp_path / "bad.json"))
    assert code == 2 and "invalid JSON at line 1" in err
    assert api.requests == []


def test_a_server_validation_error_exits_1_showing_each_field(api, capsys, tmp_path):
    doc = quota_doc(Description="server says no")
    code, _, err = run(api, capsys, "quota", "create", "--cluster", "demo", "--file", write(tmp_path, doc))
    assert code == 1
    assert "HTTP 422: Validation failed" in err and "Description: refused by the server" in err


def test_quota_update_stale_then_current_version(api, fake, capsys, tmp_path):
    # Given a quota at version 2
    fake.quotas["research"] = {**quota_doc(), "ComputeQuotaVersion": 2, "ClusterId": "demo"}
    patch = write(tmp_path, {"ComputeQuotaConfig": quota_doc(gpus=16)["ComputeQuotaConfig"]}, "patch.json")
    update = ("quota", "update", "--cluster", "demo", "--name", "research", "--file", patch)

    # When updating from version 1, Then it fails naming the current version and nothing changes
    code, _, err = run(api, capsys, *update, "--target-version", "1")
    assert code == 1 and "HTTP 409" in err and "current version: 2" in err
    assert fake.quotas["research"]["ComputeQuotaVersion"] == 2

    # When updating from version 2, Then the PUT carried the patch and TargetVersion, and version 3 is shown
    code, out, err = run(api, capsys, *update, "--target-version", "2", "--format", "json")
    assert (code, err) == (0, "")
    assert json.loads(api.requests[-1]["body"])["TargetVersion"] == 2
    assert json.loads(out)["ComputeQuotaVersion"] == 3
    assert fake.quotas["research"]["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["Accelerators"] == 16


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
    args = ("quota", "update", "--cluster", "demo", "--name", "research", "--file", write(tmp_path, patch), *extra)
    code, _, err = run(api, capsys, *args)
    assert code == 2 and needle in err
    assert api.requests == []


def test_quota_list_follows_next_token_and_filters(api, fake, capsys):
    for i in range(5):
        fake.quotas[f"team-{i}"] = {**quota_doc(f"team-{i}", f"team-{i}"), "ComputeQuotaVersion": 1}
    fake.quotas["other"] = {**quota_doc("other", "other"), "ComputeQuotaVersion": 1}

    code, out, _ = run(api, capsys, "quota", "list", "--cluster", "demo", "--name-contains", "team", "--format", "json")

    assert code == 0
    assert [q["Name"] for q in json.loads(out)["ComputeQuotaSummaries"]] == [f"team-{i}" for i in range(5)]
    assert [e["queryStringParameters"].get("NextToken") for e in api.requests] == [None, "2", "4"]
    assert all(e["queryStringParameters"]["NameContains"] == "team" for e in api.requests)
    code, out, _ = run(api, capsys, "quota", "list", "--cluster", "demo")
    assert code == 0 and all(f"team-{i}" in out for i in range(5)) and "50%" in out


def test_quota_describe_and_delete(api, fake, capsys):
    fake.quotas["research"] = {**quota_doc(), "ComputeQuotaVersion": 4, "ClusterId": "demo"}
    code, out, _ = run(api, capsys, "quota", "describe", "--cluster", "demo", "--name", "research")
    assert code == 0 and "research" in out and "4" in out

    code, _, err = run(
        api, capsys, "quota", "delete", "--cluster", "demo", "--name", "research", "--target-version", "3"
    )
    assert code == 1 and "current version: 4" in err and "research" in fake.quotas

    code, out, _ = run(
        api, capsys, "quota", "delete", "--cluster", "demo", "--name", "research", "--target-version", "4"
    )
    assert code == 0 and "Deleted" in out and "research" not in fake.quotas
    assert api.requests[-1]["queryStringParameters"] == {"TargetVersion": "4"}

    code, _, err = run(api, capsys, "quota", "describe", "--cluster", "demo", "--name", "research")
    assert code == 1 and "HTTP 404" in err and "no compute quota 'research'" in err


def test_a_bad_name_exits_2_before_any_request(api, capsys):
    code, _, err = run(api, capsys, "quota", "describe", "--cluster", "demo", "--name", "bad name!")
    assert code == 2 and "--name" in err and api.requests == []


# ------------------------------------------------------------------------------------- pool
def test_pool_show_prints_the_pool_the_apply_status_and_excluded_nodes(api, fake, capsys):
    code, out, _ = run(api, capsys, "pool", "show", "--cluster", "demo")
    assert code == 0
    assert "Generation:" in out and "7" in out and "Failed (kube API timeout)" in out
    p5 = next(line for line in out.splitlines() if line.startswith("ml.p5.48xlarge") and " gpu " in line)
    cells = p5.split()
    pool = fake.pool
    gpu = "nvidia.com/gpu"
    assert cells[2:5] == [
        pool["capacity"]["ml.p5.48xlarge"][gpu],
        pool["allocated"]["ml.p5.48xlarge"][gpu],
        pool["unallocated"]["ml.p5.48xlarge"][gpu],
    ]
    assert pool["excludedNodes"] and all(n in out and r in out for n, r in pool["excludedNodes"].items())


def test_pool_show_pages_through_every_excluded_node_when_the_pool_shows_only_the_first(api, fake, capsys):
    # Given a pool with 4 excluded nodes, of which GET pool shows 1 and GET excluded-nodes pages 2 at a time
    fake.POOL_SAMPLE = 1
    excluded = fake.pool["excludedNodes"]
    assert len(excluded) == 4
    # When the operator shows the pool as JSON
    code, out, _ = run(api, capsys, "pool", "show", "--cluster", "demo", "--format", "json")
    # Then every excluded node is there with its reason, fetched page by page with the token
    assert code == 0 and json.loads(out)["excludedNodes"] == excluded
    pages = [r for r in api.requests if r["path"].endswith("/excluded-nodes")]
    assert [(r["queryStringParameters"] or {}).get("NextToken") for r in pages] == [None, "2"]
    assert all((r["queryStringParameters"] or {}).get("limit") == "1000" for r in pages)
    # And the table counts them per reason
    code, out, _ = run(api, capsys, "pool", "show", "--cluster", "demo")
    assert "Excluded nodes (4): NotReady=1, Unhealthy=1, Unschedulable=1, UntoleratedTaint=1" in out


def test_pool_show_asks_for_no_page_when_the_pool_shows_every_excluded_node(api, fake, capsys):
    code, out, _ = run(api, capsys, "pool", "show", "--cluster", "demo")
    assert code == 0 and [r["path"] for r in api.requests] == ["/clusters/demo/pool"]
    assert all(n in out for n in fake.pool["excludedNodes"])


def test_pool_show_stops_when_the_api_repeats_a_token(api, fake, capsys):
    fake.POOL_SAMPLE, fake.repeat_token = 1, "same"
    code, _, err = run(api, capsys, "pool", "show", "--cluster", "demo")
    assert code != 0 and "repeated NextToken" in err and "Traceback" not in err


def test_pool_show_json_is_the_apis_json(api, fake, capsys):
    code, out, _ = run(api, capsys, "pool", "show", "--cluster", "demo", "--format", "json")
    assert code == 0 and json.loads(out)["capacity"] == fake.pool["capacity"]


def test_pool_explain_shows_each_derivation_and_the_bound_that_won(api, fake, capsys):
    code, out, _ = run(api, capsys, "pool", "explain", "--cluster", "demo", "--team", "infra")
    assert code == 0 and api.requests[-1]["path"] == "/clusters/demo/grants/infra"
    why = fake.pool["teams"]["infra"]["why"]["ml.p5.48xlarge"]["nvidia.com/gpu"]
    row = next(line.split() for line in out.splitlines() if line.startswith("infra") and "ml.p5.48xlarge" in line)
    assert row[-6:] == [
        why["pool"],
        f"{why['percent']}%",
        why["percentCap"],
        why["absoluteCap"] or "-",
        why["limit"],
        why["bound"],
    ]
    assert "cpu" not in {line.split()[3] for line in out.splitlines() if line.startswith("infra ")}

    code, out, _ = run(api, capsys, "pool", "explain", "--cluster", "demo", "--all-resources")
    assert code == 0 and all(team in out for team in fake.pool["teams"]) and " cpu " in out

    code, _, err = run(api, capsys, "pool", "explain", "--cluster", "demo", "--team", "nobody")
    assert code == 1 and "unknown team 'nobody'" in err


def test_pool_history_pages_up_to_the_limit(api, capsys):
    code, out, _ = run(api, capsys, "pool", "history", "--cluster", "demo", "--limit", "5", "--format", "json")
    assert code == 0 and [g["generation"] for g in json.loads(out)["generations"]] == [10, 9, 8, 7, 6]
    assert [e["queryStringParameters"].get("NextToken") for e in api.requests] == [None, "8", "6"]
    code, out, _ = run(api, capsys, "pool", "history", "--cluster", "demo", "--limit", "0")
    assert code == 2


def test_an_unknown_cluster_exits_1_with_the_apis_message(api, capsys):
    code, _, err = run(api, capsys, "pool", "show", "--cluster", "nope")
    assert code == 1 and "HTTP 404: unknown cluster 'nope'" in err


# ----------------------------------------------------------------------------------- recalc
class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_recalc_without_wait_prints_the_request_id(api, fake, capsys):
    code, out, _ = run(api, capsys, "recalc", "--cluster", "demo", "--reason", "quota grew")
    assert code == 0 and "req-1" in out and fake.reasons == "quota grew"
    assert sent(api) == [("POST", "/clusters/demo/recalculate")]


def test_recalc_wait_polls_until_done_quietly_when_stderr_is_not_a_terminal(api, capsys):
    code, out, err = run(api, capsys, "recalc", "--cluster", "demo", "--wait", "60")
    assert (code, err) == (0, "")
    assert "Done" in out and "generation 8" in out
    assert sent(api) == [("POST", "/clusters/demo/recalculate")] + [("GET", "/clusters/demo/recalculations/req-1")] * 3


def test_recalc_wait_shows_progress_on_a_terminal(api, monkeypatch, capsys):
    tty = TtyStream()
    monkeypatch.setattr(remote.sys, "stderr", tty)
    assert main(["recalc", "--cluster", "demo", "--wait", "--endpoint", api.url]) == 0
    assert tty.getvalue().count("recalculation req-1 of demo: waiting") == 3


def test_recalc_wait_exits_1_when_the_recompute_failed(api, fake, capsys):
    fake.receipt_status = "Failed"
    code, out, err = run(api, capsys, "recalc", "--cluster", "demo", "--wait", "60", "--format", "json")
    assert code == 1 and json.loads(out)["status"] == "Failed" and "kube API down" in err


def test_recalc_wait_gives_up_after_the_wait(api, fake, monkeypatch, capsys):
    # Given a receipt that never comes and a clock that advances 10 s per sleep
    fake.receipt_after = 10**6
    now = [0.0]
    monkeypatch.setattr(remote, "monotonic", lambda: now[0])
    monkeypatch.setattr(remote, "sleep", lambda s: now.__setitem__(0, now[0] + 10))
    code, _, err = run(api, capsys, "recalc", "--cluster", "demo", "--wait", "30")
    assert code == 1 and "no result after 30s" in err and "req-1" in err
    assert 3 <= len(api.requests) - 1 <= 5


def test_recalc_reason_too_long_exits_2(api, capsys):
    code, _, err = run(api, capsys, "recalc", "--cluster", "demo", "--reason", "x" * 1025)
    assert code == 2 and "--reason" in err and api.requests == []


# ------------------------------------------------------------------------------- connection
def test_a_get_is_retried_on_throttling_but_a_post_is_not(api, fake, capsys):
    fake.fail_next = [503, 429]
    code, _, _ = run(api, capsys, "pool", "show", "--cluster", "demo")
    assert code == 0 and len(api.requests) == 3
    fake.fail_next = [503]
    code, _, err = run(api, capsys, "recalc", "--cluster", "demo")
    assert code == 1 and "HTTP 503: try again" in err and len(api.requests) == 4


def test_debug_never_prints_credentials_or_the_signature(api, capsys):
    code, out, err = run(api, capsys, "pool", "show", "--cluster", "demo", "--debug")
    assert code == 0 and "> GET http://127.0.0.1" in err and "< 200" in err
    for secret in (
        TEST_IDENTITY.secret_key,
        TEST_IDENTITY.token,
        TEST_IDENTITY.access_key,
        "Signature=",
        "Authorization",
    ):
        assert secret not in out + err


def test_the_endpoint_comes_from_the_environment(api, monkeypatch, capsys):
    monkeypatch.setenv(remote.ENV_API_URL, api.url.rstrip("/"))
    assert main(["pool", "show", "--cluster", "demo"]) == 0
    assert sent(api) == [("GET", "/clusters/demo/pool")]


def test_an_endpoint_without_the_stage_gets_a_hint(api, capsys):
    code = main(["pool", "show", "--cluster", "demo", "--endpoint", api.url.replace("/prod/", "/")])
    err = capsys.readouterr().err
    assert code == 1 and "HTTP 403: Missing Authentication Token" in err and "includes the stage" in err


def test_wrong_credentials_are_refused_by_the_gate(api, monkeypatch, capsys):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    code, _, err = run(api, capsys, "pool", "show", "--cluster", "demo")
    assert code == 1 and "HTTP 403" in err and "signature" in err and api.requests == []


def test_no_credentials_is_a_clear_error(api, monkeypatch, capsys):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    code, _, err = run(api, capsys, "pool", "show", "--cluster", "demo")
    assert code == 1 and "no AWS credentials" in err


def test_an_unreachable_endpoint_is_a_clear_error(api, capsys, monkeypatch):
    use_credentials(monkeypatch)
    code = main(["pool", "show", "--cluster", "demo", "--endpoint", "http://127.0.0.1:9/prod/", "--timeout", "2"])
    assert code == 1 and "cannot reach http://127.0.0.1:9/prod/" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("endpoint", "needle"),
    [
        ("ftp://example.com/prod", "not an http(s) URL"),
        ("http://abc.execute-api.us-east-1.amazonaws.com/prod", "use https"),
        ("https://abc.example.com/prod?x=1", "must not carry a query"),
    ],
)
def test_a_bad_endpoint_exits_2(monkeypatch, capsys, endpoint, needle):
    use_credentials(monkeypatch)
    assert main(["pool", "show", "--cluster", "demo", "--endpoint", endpoint]) == 2
    assert needle in capsys.readouterr().err


def test_the_signing_region_comes_from_an_execute_api_host():
    base, region = remote._check_endpoint("https://a1b2c3.execute-api.eu-west-1.amazonaws.com/prod", "--endpoint")
    assert (base, region) == ("https://a1b2c3.execute-api.eu-west-1.amazonaws.com/prod/", "eu-west-1")
    assert remote._check_endpoint("https://api.example.com", "x") == ("https://api.example.com/", None)


class StubSession:
    """A boto3 session whose CloudFormation client is stubbed."""

    region_name = "us-east-1"

    def __init__(self, response: dict[str, Any] | None = None, error: str | None = None) -> None:
        import boto3

        self.cfn = boto3.client(
            "cloudformation", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b"
        )
        self.stub = Stubber(self.cfn)
        if error:
            self.stub.add_client_error("describe_stacks", "ValidationError", error)
        else:
            self.stub.add_response("describe_stacks", response, {"StackName": names.STACK_NAME})
        self.stub.activate()

    def client(self, name: str, config: Any = None) -> Any:
        assert name == "cloudformation"
        return self.cfn


def stack(outputs: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "Stacks": [
            {
                "StackName": names.STACK_NAME,
                "CreationTime": "2026-01-01T00:00:00Z",
                "StackStatus": "CREATE_COMPLETE",
                "Outputs": outputs,
            }
        ]
    }


def test_the_endpoint_comes_from_the_stack_outputs():
    url = "https://a1b2c3.execute-api.us-east-1.amazonaws.com/prod/"
    session = StubSession(
        stack([{"OutputKey": "Other", "OutputValue": "x"}, {"OutputKey": names.OUTPUT_API_URL, "OutputValue": url}])
    )
    assert remote._endpoint_from_stack(session, names.STACK_NAME, 5) == url


def test_a_missing_stack_or_output_is_a_clear_error():
    with pytest.raises(CommandError, match=r"does not exist.*--endpoint"):
        remote._endpoint_from_stack(StubSession(error="Stack with id idleshare does not exist"), names.STACK_NAME, 5)
    with pytest.raises(CommandError, match=f"no {names.OUTPUT_API_URL} output"):
        remote._endpoint_from_stack(StubSession(stack([])), names.STACK_NAME, 5)


def test_an_unknown_profile_is_a_usage_error(monkeypatch, capsys):
    use_credentials(monkeypatch)
    assert (
        main(["pool", "show", "--cluster", "demo", "--profile", "nobody", "--endpoint", "https://x.example.com/"]) == 2
    )
    assert "--profile nobody" in capsys.readouterr().err


def test_usage_error_is_the_clis_own(monkeypatch):
    # the remote module reuses the CLI's error types (exit codes 2 and 1 come from main)
    assert issubclass(remote.ApiError, CommandError) and UsageError is remote.UsageError
