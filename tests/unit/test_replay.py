"""`idleshare replay`: argument and file errors (exit 2 naming the file and field), --bus with
moto's EventBridge (batches of 10, failed entries reported), and the devkit pieces it relies on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devkit.embedded import canonical_change, health_label
from devkit.scenario import NodeRefs, kueue_changes
from idleshare_cli import replay
from idleshare_cli.main import main

EVENTS = Path(__file__).parents[2] / "events"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


MISSING_ARN = str(EVENTS / "malformed" / "node-health-missing-cluster-arn.json")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([MISSING_ARN, "--local"], ["node-health-missing-cluster-arn.json", "ClusterArn"]),
        ([MISSING_ARN, "--bus=b"], ["node-health-missing-cluster-arn.json", "ClusterArn"]),
        (["nope.yaml", "--local"], ["nope.yaml"]),
        ([str(EVENTS / "inbound" / "schedule-safety-net.json"), "--local", "--region", "x"], ["--region"]),
    ],
)
def test_a_malformed_event_a_missing_file_or_a_region_without_bus_exits_2_naming_it(argv, says, capsys):
    code, _, err = run(["replay", *argv], capsys)
    assert code == 2 and all(s in err for s in says), err


BAD_STEPS = [
    ({"title": "t", "bogus": 1}, "steps[0].bogus"),
    ({"title": "t", "cordon": "a", "uncordon": "b"}, "steps[0]"),
    ({"title": "t", "cordon": "ml.p5.48xlarge#99"}, "steps[0].cordon"),
    ({"title": "t", "node": {"name": "x", "change": "explode"}}, "steps[0].node.change"),
    ({"title": "t", "recalculate": True, "expect": {"teams": {"a": {"f": {"gpu": {"borrow": 1}}}}}}, "borrow"),
    ({"title": "t", "event": {"source": "idleshare", "detail-type": "Nope", "detail": {}}}, "detail-type"),
]


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("s.yaml", "steps: [unclosed", "not valid YAML"),
        ("e.json", "{not json", "not valid JSON"),
        ("notes.md", "# not an event", "not valid JSON (a scenario is .yaml, an event file .json)"),
        *[("s.json", json.dumps({"quotas": [], "steps": [step]}), field) for step, field in BAD_STEPS],
    ],
)
def test_an_unparsable_file_or_bad_step_exits_2_naming_file_and_fault(tmp_path, capsys, name, text, says):
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run(["replay", str(path), "--local"], capsys)
    assert code == 2 and str(path) in err and says in err and "Traceback" not in err


ALIASES = "not accepted in a scenario"
BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    + "steps: *i\n"
)  # 9^9 = 387 million strings from 430 bytes: 6 GB and 69 s before it was refused


@pytest.mark.parametrize("mode", ["--local", "--bus"])
@pytest.mark.parametrize(
    ("text", "line"),
    [
        (BOMB, "line 1 column 4"),
        ("quotas: &q []\nsteps: []\n", "line 1 column 9"),  # an anchor alone
        ("base: {x: 1}\nsteps:\n  - <<: *base\n", "line 3 column 9"),  # a merge key's alias
    ],
)
def test_a_scenario_with_yaml_anchors_or_aliases_is_refused_naming_file_and_line_at_once(
    tmp_path, capsys, mode, text, line
):
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    argv = ["replay", str(path), mode] + (["idleshare-bus"] if mode == "--bus" else [])
    code, _, err = run(argv, capsys)
    assert code == 2 and f"{path}: {line}: YAML anchors and aliases" in err and ALIASES in err


def test_scenario_files_are_bounded_one_by_one_and_with_the_files_they_name(tmp_path, capsys, monkeypatch):
    from devkit import scenario

    # a file over the bound is refused before it is parsed
    monkeypatch.setattr(scenario, "MAX_FILE_BYTES", 1000)
    big = tmp_path / "big.yaml"
    big.write_text("steps: []\n" + "#" * 1000)
    code, _, err = run(["replay", str(big), "--local"], capsys)
    assert code == 2 and f"{big}: the file is over 1000 bytes" in err
    # and a scenario naming a file many times is refused once they add up past the bound of one load
    monkeypatch.setattr(scenario, "MAX_FILE_BYTES", 10_000)
    monkeypatch.setattr(scenario, "MAX_LOAD_BYTES", 20_000)
    (tmp_path / "empty.json").write_text(json.dumps([]) + " " * 9000)
    (tmp_path / "config.json").write_text(json.dumps({}) + " " * 9000)
    many = tmp_path / "many.json"
    many.write_text(json.dumps({"nodes": "empty.json", "quotas": "empty.json", "schedulerConfig": "config.json"}))
    code, _, err = run(["replay", str(many), "--local"], capsys)
    assert code == 2 and "the files it names are over 20000 bytes in all" in err


def test_bus_puts_every_event_in_batches_of_ten(capsys, monkeypatch):
    files = sorted(str(p) for p in (EVENTS / "inbound").glob("idleshare-*.json")) * 3  # 15 events
    calls: list[int] = []
    with mock_aws():
        client = boto3.client("events", region_name="us-east-1")
        client.create_event_bus(Name="idleshare")
        client.meta.events.register(
            "provide-client-params.events.PutEvents", lambda params, **_: calls.append(len(params["Entries"]))
        )
        monkeypatch.setattr(boto3, "client", lambda *a, **k: client)
        code, out, _ = run(["replay", *files, "--bus", "idleshare", "--region", "us-east-1"], capsys)
    assert code == 0
    assert calls == [10, 5]
    assert "15 of 15 events put on idleshare" in out


def test_bus_cuts_its_calls_at_eventbridges_256_kb_as_the_deployed_publisher_does(tmp_path, capsys, monkeypatch):
    """Three events of ~100 KB each: ten to a call would be one call of ~300 KB, which EventBridge refuses whole;
    the calls are cut where the publisher cuts them (adapters/aws: MAX_ENTRY_BYTES), and an entry over the limit on its
    own is named, never sent."""
    from idleshare.adapters.aws import MAX_ENTRY_BYTES, entry_size

    sample = json.loads((EVENTS / "inbound" / "idleshare-node-changed.json").read_text())
    files = []
    for i, pad in enumerate([100_000, 100_000, 100_000, MAX_ENTRY_BYTES]):
        event = {**sample, "detail": {**sample["detail"], "note": "x" * pad}}
        files.append(tmp_path / f"big-{i}.json")
        files[-1].write_text(json.dumps(event))
    calls: list[list[dict[str, Any]]] = []

    class Recording:
        def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            calls.append(Entries)
            return {"FailedEntryCount": 0, "Entries": [{"EventId": str(i)} for i, _ in enumerate(Entries)]}

    monkeypatch.setattr(boto3, "client", lambda *a, **k: Recording())
    code, out, err = run(["replay", *map(str, files), "--bus", "b"], capsys)
    assert [len(c) for c in calls] == [2, 1]
    assert all(sum(map(entry_size, c)) <= MAX_ENTRY_BYTES for c in calls)
    assert code == 1 and "3 of 4 events put on b" in out
    assert "big-3.json" in err and "256 KB" in err


def test_bus_reports_failed_entries_and_exits_1(capsys, monkeypatch):
    class Refusing:
        def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            return {
                "FailedEntryCount": 1,
                "Entries": [
                    {"ErrorCode": "NotAuthorizedForSourceException", "ErrorMessage": "no"}
                    if e["Source"].startswith("aws.")
                    else {"EventId": "1"}
                    for e in Entries
                ],
            }

    monkeypatch.setattr(boto3, "client", lambda *a, **k: Refusing())
    files = [str(EVENTS / "inbound" / n) for n in ("hyperpod-node-health-event.json", "idleshare-node-changed.json")]
    code, out, err = run(["replay", *files, "--bus", "b"], capsys)
    assert code == 1
    assert "1 of 2 events put on b" in out
    assert "NotAuthorizedForSourceException" in err and "archive" in err


def test_bus_sends_a_scenarios_event_steps_and_skips_operator_steps(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "steps:\n"
        "  - {title: a, event: events/inbound/idleshare-node-changed.json}\n"
        "  - {title: b, cordon: 'ml.p5.48xlarge#0'}\n"
    )
    events, skipped = replay.event_entries(str(path))
    assert [e["detail-type"] for e in events] == ["Node Changed"]
    assert skipped == ["b (cordon)"]
    entry = replay.to_entry(events[0], "bus")
    assert entry["EventBusName"] == "bus" and json.loads(entry["Detail"])["change"] == "NotReady"


@pytest.mark.parametrize(
    ("status", "action", "label"),
    [("Schedulable", None, "Schedulable"), ("Healthy", None, "Schedulable"),
     ("Unhealthy", "Replace", "UnschedulablePendingReplacement"), ("Unhealthy", "Reboot", "UnschedulablePendingReboot"),
     ("Unhealthy", "None", "Unschedulable"), ("UnschedulablePendingReboot", None, "UnschedulablePendingReboot")],
)  # fmt: skip
def test_health_event_status_maps_to_the_node_label(status, action, label):
    assert health_label(status, action) == label


def test_node_changes_are_recognised_case_insensitively_and_nodes_by_instance_type_and_index():
    assert [canonical_change(c) for c in ("Cordon", "notready", "deleted", "explode")] == [
        "cordon", "NotReady", "delete", None
    ]  # fmt: skip
    refs = NodeRefs(json.loads((EVENTS / "examples" / "nodes.json").read_text()))
    first, second = refs.by_type["ml.p5.48xlarge"][:2]
    assert refs.resolve("ml.p5.48xlarge#1", "s", "x") == second != first
    assert refs.resolve("some-node", "s", "x") == "some-node"


def test_kueue_changes_name_created_deleted_and_changed_fields():
    def cq(limit: str) -> dict[str, Any]:
        res = {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": limit}
        return {"kind": "ClusterQueue", "spec": {"resourceGroups": [{"flavors": [{"name": "p5", "resources": [res]}]}]}}

    before = {("ClusterQueue", "", "a"): cq("4"), ("Cohort", "", "gone"): {"spec": {}}}
    after = {("ClusterQueue", "", "a"): cq("2"), ("LocalQueue", "ns", "new"): {"spec": {}}}
    fields = [{"field": "p5/gpu.borrowingLimit", "old": "4", "new": "2"}]
    assert kueue_changes(before, after) == [
        {"op": "updated", "kind": "ClusterQueue", "name": "a", "fields": fields},
        {"op": "deleted", "kind": "Cohort", "name": "gone"},
        {"op": "created", "kind": "LocalQueue", "name": "new", "namespace": "ns"},
    ]
