"""The cost bench counts what AWS bills: item sizes to units, payloads to requests, EMF to unique metrics, the bill."""

from __future__ import annotations

import json
import math
from decimal import Decimal

import boto3
import pytest
from moto import mock_aws

from tests.bench import cost


def test_item_size_is_names_plus_values_in_both_forms() -> None:
    typed = {"pk": {"S": "c#a"}, "n": {"N": "12345"}, "b": {"B": b"xyz"}, "m": {"M": {"k": {"BOOL": True}}}}
    plain = {"pk": "c#a", "n": Decimal("12345"), "b": b"xyz", "m": {"k": True}}
    # pk 2+3, n 1+4 (5 digits: 3 bytes + 1), b 1+3, m 1 + (3 + 1 + 1 + 1)
    assert cost.item_size(typed) == cost.item_size(plain) == 5 + 5 + 4 + 7


@pytest.mark.parametrize(("size", "wru", "twru"), [(1, 1, 2), (1024, 1, 2), (1025, 2, 4), (30 * 1024, 30, 60)])
def test_write_units_per_kb_begun_twice_in_a_transaction(size: int, wru: int, twru: int) -> None:
    assert cost.write_units(size) == wru
    assert cost.write_units(size, transactional=True) == twru


def test_read_units_per_4kb_half_when_eventually_consistent() -> None:
    assert cost.read_units(4096, consistent=True) == 1
    assert cost.read_units(4097, consistent=True) == 2
    assert cost.read_units(4097) == 1
    assert cost.read_units(100, transactional=True) == 2


def test_the_meter_counts_a_known_item_as_its_units() -> None:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        table = boto3.resource("dynamodb", region_name="us-east-1").Table("t")
        meter = cost.Meter()
        with meter.installed():
            body = "x" * (3 * 1024)  # with its names and key: just over 3 KB, 4 WRU
            table.put_item(Item={"pk": "a", "body": body})
            table.get_item(Key={"pk": "a"}, ConsistentRead=True)
            table.update_item(Key={"pk": "a"}, UpdateExpression="SET v = :v", ExpressionAttributeValues={":v": 1})
            sqs = boto3.client("sqs", region_name="us-east-1")
            url = sqs.create_queue(QueueName="q")["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody="y" * (100 * 1024))  # two 64 KB chunks
        counts = meter.take()
    size = 2 + 1 + 4 + len(body)
    assert counts.wru == cost.write_units(size) + cost.write_units(size + 1 + 2) == 8
    assert counts.rru == 1
    assert counts.ddb_calls == {"PutItem": 1, "GetItem": 1, "UpdateItem": 1}
    assert counts.sqs_requests == 1 + math.ceil((100 * 1024 + 100) / cost.SQS_CHUNK)  # create_queue + the send


def test_a_metric_emitted_with_two_dimension_sets_counts_two() -> None:
    doc = {
        "_aws": {
            "Timestamp": 0,
            "CloudWatchMetrics": [
                {
                    "Namespace": "idleshare",
                    "Dimensions": [["cluster"], ["cluster", "resource"]],
                    "Metrics": [{"Name": "Idle"}],
                }
            ],
        },
        "cluster": "a",
        "resource": "nvidia.com/gpu",
        "Idle": 1,
    }
    lines = [json.dumps(doc), json.dumps(doc), json.dumps({**doc, "cluster": "b"}), '{"message": "plain"}']
    unique, log_bytes, emf_bytes = cost.emf_metrics(lines)
    assert len(unique) == 4  # two dimension sets x two clusters; the repeat counts once
    assert log_bytes == sum(len(line) + 1 for line in lines)
    assert emf_bytes == log_bytes - len(lines[-1]) - 1


def test_the_bill_prices_each_line_from_the_table() -> None:
    table = cost.prices()
    assert table["source"] and table["date"]
    day = {"recompute invocations": 1000.0, "recompute GB-s": 100.0, "wru": 1e6, "metrics": 10, "dashboards": 1}
    lines = {line.what: line for line in cost.bill(day, table)}
    p = {k: v["usd"] for k, v in table["prices"].items()}
    assert lines["recompute invocations"].monthly == pytest.approx(30_000 * p["lambda_request"])
    assert lines["recompute GB-s"].monthly == pytest.approx(3_000 * p["lambda_gb_second_arm64"])
    assert lines["DynamoDB writes"].monthly == pytest.approx(30e6 * p["dynamodb_wru"])
    assert lines["CloudWatch custom metrics"].monthly == pytest.approx(10 * p["cloudwatch_metric_month"])
    assert cost.total(lines.values()) == pytest.approx(sum(x.monthly for x in lines.values()))


def test_gb_seconds_rounds_up_to_the_millisecond() -> None:
    assert cost.gb_seconds(0.0101, 1024) == pytest.approx(0.011)
    assert cost.gb_seconds(2.0, 512) == 1.0
