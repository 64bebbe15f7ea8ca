"""The benchmarks' shared code: the summary table, the machine line, the DynamoDB request counter,
and the engine benchmark's summary rows at a tiny size. Nothing here is timed."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from tests.aws_env import create_table
from tests.bench import bench_common as bc
from tests.bench import bench_plan


def test_the_table_shows_every_row_and_marks_missed_targets() -> None:
    rows = [
        bc.Row("engine", "plan 5k", "10 ms", "json.loads", 2.5, "<= 3x", True),
        bc.Row("coldstart", "import router", "300 ms", "boto3", 1.7, "<= 1.5x", False),
        bc.Row("memory", "floor", "45 MB"),
    ]
    text = bc.table(rows)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["benchmark", "measure", "value"] and set(lines[1]) == {"-"}
    assert len(lines) == 2 + len(rows)
    assert lines[2].endswith("ok") and lines[3].endswith("MISSED") and "1.70x" in lines[3]
    report = bc.Report()
    report.add(*rows)
    assert [r.what for r in report.failed] == ["import router"]


def test_the_machine_line_names_the_cpus_and_python() -> None:
    line = bc.machine()
    assert "CPUs" in line and "Python 3." in line


def test_the_dynamodb_counter_counts_calls_and_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.Session().client("dynamodb", region_name="us-east-1")
        create_table(client, "t")
        # Given a counter on the client, When it writes twice and reads once
        counter = bc.DynamoCounter(client)
        client.put_item(TableName="t", Item={"pk": {"S": "a"}, "sk": {"S": "b"}})
        client.update_item(
            TableName="t",
            Key={"pk": {"S": "a"}, "sk": {"S": "b"}},
            UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"N": "1"}},
        )
        client.get_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "b"}})
        # Then it saw three calls, two of them writes
        assert dict(counter.calls) == {"PutItem": 1, "UpdateItem": 1, "GetItem": 1}
        assert (counter.total, counter.writes) == (3, 2)
        counter.clear()
        assert counter.total == 0


def test_the_engine_benchmark_summarises_each_size_and_checks_the_target_size() -> None:
    report = bc.Report()
    bench_plan.run(report, sizes=(100, 200), process_nodes=0)  # the whole command: not here (fresh processes)
    whats = [r.what for r in report.rows]
    assert whats == ["plan 100 nodes, 200 teams", "plan 200 nodes, 200 teams", "per-node time 200 vs 100"]
    assert all(r.ratio and r.ratio > 0 for r in report.rows[:2])
    assert all(r.ok is None for r in report.rows)  # the target is checked at 5k only
