"""Every scenario of events/scenarios/ through the real handlers on embedded services (moto, the real
kube-apiserver + Kueue of the session, emptied before each test). Given a scenario, When it is replayed, Then every expectation holds; and a
wrong expectation makes `idleshare replay` fail."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from devkit import scenario
from devkit.embedded import Embedded
from idleshare_cli.main import main
from tests.integration.invariants import quantity

pytestmark = pytest.mark.integration
SCENARIOS = Path(__file__).parents[2] / "events" / "scenarios"
FILES = sorted(p for p in SCENARIOS.iterdir() if p.suffix in (".yaml", ".yml", ".json"))


@pytest.fixture(autouse=True)
def session_stack(kube, monkeypatch):
    """Every Embedded here (and `idleshare replay --local`) runs on the session's stack, not a new one."""
    monkeypatch.setattr(Embedded, "shared_kube", kube)
    return kube


def test_there_are_scenarios_to_run():
    assert len(FILES) >= 4


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_scenario_expectations_hold(path: Path):
    # Given a scenario file
    sc = scenario.load(path)
    # When it is replayed step by step
    reports = scenario.run(sc)
    # Then every step recomputed without failure and met its expectations
    assert len(reports) == len(sc.steps)
    assert [(r.title, r.failures) for r in reports if r.failures] == []
    assert [(r.title, r.mismatches) for r in reports if r.mismatches] == []
    assert sum(r.checked for r in reports) > 0
    # And each step's usage was read back from Kueue as the deployed watcher reads it (its own RBAC), and adds up:
    # a flavor's in use is its teams' in use, and idle is capacity - in use
    for r in reports:
        assert r.usage.get("flavors"), (r.title, "no usage sample")
        for flavor, per in r.usage["flavors"].items():
            for resource, v in per.items():
                teams = sum(
                    quantity(t["flavors"].get(flavor, {}).get(resource, {}).get("inUse", "0"))
                    for t in r.usage["teams"].values()
                )
                assert quantity(v["inUse"]) == teams, (r.title, flavor, resource)
                assert quantity(v["idle"]) == max(0, quantity(v["capacity"]) - quantity(v["inUse"])), (r.title, flavor)


def test_a_wrong_expectation_fails_replay_with_a_diff(tmp_path, capsys):
    # Given the first step of the lend-only scenario, expecting what an engine ignoring
    # AbsoluteBorrowLimits would grant ml-research (its 100 % of 32), not the cap of 8
    doc = yaml.safe_load((SCENARIOS / "lend-only-team.yaml").read_text())
    doc["nodes"] = str(Path(__file__).parents[2] / "events" / "examples" / "nodes.json")
    doc["quotas"] = str(Path(__file__).parents[2] / "events" / "examples" / "quotas.json")
    doc["steps"] = [
        {
            "title": "wrong on purpose",
            "recalculate": True,
            "expect": {"teams": {"ml-research": {"ml.p5.48xlarge": {"gpu": {"borrowingLimit": 32}}}}},
        }
    ]
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(doc))
    # When it is replayed
    code = main(["replay", str(path), "--local"])
    # Then replay exits non-zero and names the mismatch with both values
    out, err = capsys.readouterr()
    assert code == 1
    assert "team ml-research ml.p5.48xlarge/gpu borrowingLimit: expected 32, got 8" in out
    assert "wrong.yaml" in err


def test_plain_event_files_replay_locally_and_json_output_lists_each_step(capsys):
    # Given two inbound event files (the first names no governed cluster)
    inbound = Path(__file__).parents[2] / "events" / "inbound"
    files = [str(inbound / "hyperpod-cluster-event.json"), str(inbound / "idleshare-recalculation-requested.json")]
    # When they are replayed with --format json
    code = main(["replay", *files, "--local", "--format", "json"])
    # Then each file is a scenario of one step, routed to the default cluster "demo"
    import json

    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [s["steps"][0]["routed"] for s in out] == [["demo"], ["demo"]]
    assert out[1]["steps"][0]["generation"] == 1


def test_a_cluster_that_cannot_be_read_is_reported_and_keeps_the_last_pool(proxied_kube):
    # Given the embedded stack with a first pool computed, idleshare reaching it through the fault proxy
    import json

    event = json.loads(
        (Path(__file__).parents[2] / "events" / "inbound" / "idleshare-recalculation-requested.json").read_text()
    )
    with Embedded(Path(__file__).parents[2] / "events" / "examples" / "nodes.json") as stack:
        stack.kube = proxied_kube.adapter(timeout=10)
        stack.tick()
        assert stack.deliver(event).routed == ["demo"]
        first = stack.store.get_pool("demo")
        # When the Kubernetes API refuses connections and a recompute is requested (a new request id)
        proxied_kube.outage("refuse")
        stack.tick()
        began = stack.clock[0]
        delivery = stack.deliver(event | {"detail": event["detail"] | {"requestId": "console-2"}})
        # Then the record is retried with its backoff as deployed, reaches the DLQ only after 15 minutes of
        # failing, the failure is reported, and the last pool is kept
        from devkit.sqs import DEPLOYED
        from idleshare import timings

        assert delivery.routed == ["demo"] and delivery.recomputes == DEPLOYED.max_receive_count
        assert stack.clock[0] - began >= timings.DLQ_AFTER_SECONDS
        assert len(delivery.failures) == 1 and delivery.failures[0]
        kept = stack.store.get_pool("demo")
        assert kept.generation == first.generation and kept.read_failure


def test_the_same_request_sent_again_is_answered_from_its_idempotency_record():
    # Given the embedded stack (with the deployed stack's idempotency table) and a request that ran
    import json

    from devkit.scenario import NodeRefs

    event = json.loads(
        (Path(__file__).parents[2] / "events" / "inbound" / "idleshare-recalculation-requested.json").read_text()
    )
    with Embedded(Path(__file__).parents[2] / "events" / "examples" / "nodes.json") as stack:
        stack.tick()
        assert stack.deliver(event).recomputes == 1
        first = stack.store.get_pool("demo")
        # When a node fails and the same request (same requestId) arrives again, past SQS's deduplication
        nodes_json = json.loads((Path(__file__).parents[2] / "events" / "examples" / "nodes.json").read_text())
        node = NodeRefs(nodes_json).resolve("ml.p5.48xlarge#0", "test", "node")
        stack.change_node(node, "NotReady")
        stack.tick(600)
        again = stack.deliver(event)
        # Then it was delivered but not recomputed: the pool is the first run's
        assert again.routed == ["demo"] and again.failures == []
        assert stack.store.get_pool("demo").generation == first.generation
        # ... while a new request id recomputes and sees the failed node
        stack.deliver(event | {"detail": event["detail"] | {"requestId": "console-2"}})
        assert stack.store.get_pool("demo").generation == first.generation + 1
