"""The CLI against the real admin API: `idleshare quota|pool|recalc` in-process, signed requests through the
local API Gateway emulator, the real ``idleshare.api.app.handler``, DynamoStore on moto DynamoDB.
Given a governed cluster, When an operator drives it from the CLI, Then the API and the store follow."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from idleshare import names
from idleshare.adapters.ports import ClusterRecord, PoolRecord, RecalculationReceipt
from idleshare.adapters.store import DynamoStore
from idleshare.runtime import wiring
from idleshare_cli import remote
from idleshare_cli.main import main
from idleshare_cli.plan import plan
from idleshare_cli.present import result_json
from tests.apigw_local import ApiGatewayLocal, Principal, use_credentials
from tests.aws_env import create_table
from tests.builders import quota_body
from tests.fakes import FakePublisher, FakeQueue

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).parents[2] / "events" / "examples"
CLUSTER = "demo"


def quota_doc(name: str = "research", team: str = "research", gpus: int = 8) -> dict[str, Any]:
    """The CLI tests' quota file, every optional member set (description, preemption, weight, activation)."""
    return quota_body(
        team, gpus, name=name, preempt="LowerPriority", weight=10, enabled=True, Description="research team"
    )


class Stack:
    """The deployed stack, locally: emulated API Gateway -> real API handler -> DynamoStore (moto)."""

    def __init__(self, api: ApiGatewayLocal, store: DynamoStore, publisher: FakePublisher) -> None:
        self.api, self.store, self.publisher = api, store, publisher

    def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        code = main([*argv, "--endpoint", self.api.url])
        out, err = capsys.readouterr()
        return code, out, err


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    use_credentials(monkeypatch)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", names.SERVICE)
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    monkeypatch.setattr(remote, "sleep", lambda seconds: None)
    from idleshare.api.app import handler

    with mock_aws():
        # the credentials the CLI will sign with (moto substitutes its own): the gate accepts exactly those
        creds = boto3.Session().get_credentials().get_frozen_credentials()
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        table = create_table(ddb)
        store = DynamoStore(table)
        store.put_cluster(ClusterRecord(CLUSTER, "demo-eks"))
        publisher = FakePublisher()
        wiring.install(wiring.Dependencies(store=store, publisher=publisher, queue=FakeQueue()))
        try:
            with ApiGatewayLocal(
                handler, identities=[Principal(creds.access_key, creds.secret_key, creds.token)]
            ) as api:
                yield Stack(api, store, publisher)
        finally:
            wiring.install(None)


def write(tmp_path: Path, document: object, name: str) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def quota_events(publisher: FakePublisher) -> list[dict[str, Any]]:
    return [detail for kind, detail in publisher.events if kind == names.DT_QUOTA_CHANGED]


def test_quota_lifecycle_through_the_cli(stack: Stack, capsys, tmp_path) -> None:
    quota_file = write(tmp_path, quota_doc(), "q.json")

    # When a quota is created from a file
    code, out, err = stack.cli(capsys, "quota", "create", "--cluster", CLUSTER, "--file", quota_file)
    # Then it is stored at version 1 and a Compute Quota Changed event went out
    assert (code, err) == (0, ""), err
    assert "research" in out and "LowerPriority" in out
    assert stack.store.get_quota(CLUSTER, "research").version == 1
    assert [e["quotaName"] for e in quota_events(stack.publisher)] == ["research"]

    # When it is described as JSON, Then it is the Describe shape of what was sent
    code, out, _ = stack.cli(
        capsys, "quota", "describe", "--cluster", CLUSTER, "--name", "research", "--format", "json"
    )
    described = json.loads(out)
    assert code == 0 and described["ComputeQuotaVersion"] == 1 and described["Status"] == "Created"
    assert described["ComputeQuotaConfig"] == quota_doc()["ComputeQuotaConfig"]

    # When updated from a stale version, Then exit 1 naming the current version, and nothing changes
    patch = write(tmp_path, {"ComputeQuotaConfig": quota_doc(gpus=16)["ComputeQuotaConfig"]}, "patch.json")
    update = ("quota", "update", "--cluster", CLUSTER, "--name", "research", "--file", patch)
    code, _, err = stack.cli(capsys, *update, "--target-version", "7")
    assert code == 1 and "HTTP 409" in err and "current version: 1" in err
    assert stack.store.get_quota(CLUSTER, "research").version == 1

    # When updated from the current version, Then version 2 holds the new resources
    code, out, err = stack.cli(capsys, *update, "--target-version", "1", "--format", "json")
    assert (code, err) == (0, ""), err
    assert json.loads(out)["ComputeQuotaVersion"] == 2
    stored = stack.store.get_quota(CLUSTER, "research")
    assert stored.version == 2
    assert stored.body["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["Accelerators"] == 16
    assert stored.body["ComputeQuotaTarget"] == quota_doc()["ComputeQuotaTarget"]  # untouched by the patch

    # When a second quota exists and both are listed in pages of one, Then the CLI follows NextToken to both
    stack.cli(
        capsys, "quota", "create", "--cluster", CLUSTER, "--file", write(tmp_path, quota_doc("nlp", "nlp"), "n.json")
    )
    before = len(stack.api.requests)
    code, out, _ = stack.cli(capsys, "quota", "list", "--cluster", CLUSTER, "--page-size", "1")
    assert code == 0 and "research" in out and "nlp" in out
    pages = [e["queryStringParameters"] for e in stack.api.requests[before:]]
    assert [p["MaxResults"] for p in pages] == ["1", "1"] and [bool(p.get("NextToken")) for p in pages] == [False, True]
    code, out, _ = stack.cli(
        capsys, "quota", "list", "--cluster", CLUSTER, "--name-contains", "res", "--format", "json"
    )
    assert [q["Name"] for q in json.loads(out)["ComputeQuotaSummaries"]] == ["research"]

    # When deleted with a stale version, Then refused; with the current one, Then gone
    code, _, err = stack.cli(
        capsys, "quota", "delete", "--cluster", CLUSTER, "--name", "research", "--target-version", "1"
    )
    assert code == 1 and "current version: 2" in err
    code, out, _ = stack.cli(
        capsys, "quota", "delete", "--cluster", CLUSTER, "--name", "research", "--target-version", "2"
    )
    assert code == 0 and "Deleted" in out
    assert stack.store.get_quota(CLUSTER, "research") is None
    assert [e["quotaName"] for e in quota_events(stack.publisher)] == ["research", "research", "nlp", "research"]
    code, _, err = stack.cli(capsys, "quota", "describe", "--cluster", CLUSTER, "--name", "research")
    assert code == 1 and "HTTP 404" in err


def test_a_bad_quota_file_exits_2_naming_the_field_and_sends_nothing(stack: Stack, capsys, tmp_path) -> None:
    doc = quota_doc()
    doc["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["Accelerators"] = 20_000_000
    code, out, err = stack.cli(
        capsys, "quota", "create", "--cluster", CLUSTER, "--file", write(tmp_path, doc, "q.json")
    )
    assert code == 2 and out == ""
    assert "ComputeQuotaConfig.ComputeQuotaResources[0].Accelerators: must be <= 10000000" in err
    assert stack.api.requests == [] and stack.store.list_quotas(CLUSTER) == []


def test_the_api_rejects_what_only_it_can_check_and_the_cli_shows_each_field(stack: Stack, capsys, tmp_path) -> None:
    # Given a quota for team "research" already exists, When another quota claims the same team
    stack.cli(capsys, "quota", "create", "--cluster", CLUSTER, "--file", write(tmp_path, quota_doc(), "a.json"))
    code, _, err = stack.cli(
        capsys, "quota", "create", "--cluster", CLUSTER, "--file", write(tmp_path, quota_doc("other"), "b.json")
    )
    # Then the API's 409 and its field reach the user
    assert code == 1 and "HTTP 409" in err and "research" in err
    code, _, err = stack.cli(capsys, "pool", "show", "--cluster", "nowhere")
    assert code == 1 and "HTTP 404" in err and "nowhere" in err


def seed_pool(store: DynamoStore) -> dict[str, Any]:
    result, _ = plan((EXAMPLES / "nodes.json").read_bytes(), (EXAMPLES / "quotas.json").read_bytes())
    pool = result_json(result)
    pool.pop("summary")
    for generation in (1, 2, 3):
        store.put_pool(
            PoolRecord(
                cluster_id=CLUSTER,
                generation=generation,
                digest=f"d{generation}",
                pool=pool,
                computed_at=f"2026-12-0{generation}T10:00:00+00:00",
                extra={
                    "summary": result.summary(),
                    "changes": {"first": True} if generation == 1 else {"teams": ["nlp"]},
                },
            ),
            expected_generation=generation - 1,
        )
    store.record_apply(CLUSTER, 3, "Applied")
    return pool


def test_pool_show_explain_and_history_read_the_stored_pool(stack: Stack, capsys) -> None:
    # Given three stored generations
    code, _, err = stack.cli(capsys, "pool", "show", "--cluster", CLUSTER)
    assert code == 1 and "no pool yet" in err
    pool = seed_pool(stack.store)

    # When the pool is shown, Then the real API's shape renders: generation, apply status, rows, excluded nodes
    code, out, _ = stack.cli(capsys, "pool", "show", "--cluster", CLUSTER)
    assert code == 0 and "Generation:          3" in out and "Applied" in out
    p5 = next(line.split() for line in out.splitlines() if line.startswith("ml.p5.48xlarge") and " gpu " in line)
    assert p5[2] == pool["capacity"]["ml.p5.48xlarge"]["nvidia.com/gpu"]
    assert all(node in out for node in pool["excludedNodes"])

    # When one team's grants are explained, Then each derivation shows the pool seen, the caps and the bound
    code, out, _ = stack.cli(capsys, "pool", "explain", "--cluster", CLUSTER, "--team", "ml-research")
    why = pool["teams"]["ml-research"]["why"]["ml.p5.48xlarge"]["nvidia.com/gpu"]
    row = next(line.split() for line in out.splitlines() if "ml.p5.48xlarge" in line)
    assert code == 0 and row[0] == "ml-research"
    assert row[-6:] == [
        why["pool"],
        f"{why['percent']}%",
        why["percentCap"],
        why["absoluteCap"],
        why["limit"],
        "absolute",
    ]

    # When history is asked for two, Then the newest two, newest first, with what changed
    code, out, _ = stack.cli(capsys, "pool", "history", "--cluster", CLUSTER, "--limit", "2", "--format", "json")
    assert code == 0 and [g["generation"] for g in json.loads(out)["generations"]] == [3, 2]
    code, out, _ = stack.cli(capsys, "pool", "history", "--cluster", CLUSTER)
    assert code == 0 and "first pool" in out and "limits of nlp" in out


def test_recalc_waits_for_the_receipt_the_recompute_writes(stack: Stack, capsys, monkeypatch) -> None:
    # Given a recompute that writes its receipt while the CLI waits
    def recompute_runs(seconds: float) -> None:
        request = next(d for kind, d in stack.publisher.events if kind == names.DT_RECALC_REQUESTED)
        receipt = RecalculationReceipt(CLUSTER, request["requestId"], "Done", generation=4, changed=True)
        stack.store.put_receipt(receipt)

    monkeypatch.setattr(remote, "sleep", recompute_runs)

    # When recalc --wait runs
    code, out, err = stack.cli(capsys, "recalc", "--cluster", CLUSTER, "--reason", "console test", "--wait", "30")

    # Then the request carried the reason, and the CLI reports Done with the generation
    assert (code, err) == (0, ""), err
    (request,) = [d for kind, d in stack.publisher.events if kind == names.DT_RECALC_REQUESTED]
    assert request["reason"] == "console test" and request["cluster"] == CLUSTER
    assert f"Recalculation {request['requestId']} of cluster {CLUSTER}: Done, generation 4 (the pool changed)" in out
