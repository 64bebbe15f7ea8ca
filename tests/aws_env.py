"""The tests' AWS environment: fake credentials and region (:data:`FAKE_ENV`, :func:`fake_aws_env`), the
DynamoDB tables, made exactly as the CDK app makes them (:mod:`idleshare.table`): moto, DynamoDB Local or any
boto3 DynamoDB resource / client, and the recompute queue (:func:`fifo_queue`)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

from idleshare import table as schema

FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_SESSION_TOKEN": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    # botocore >= 1.35 may route DynamoDB to <account>.ddb.<region>... from an account id: never here.
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}
"""Credentials and region that reach nothing real (moto, DynamoDB Local)."""


@contextlib.contextmanager
def fake_aws_env(**extra: str) -> Iterator[None]:
    """:data:`FAKE_ENV` (and ``extra``) in the environment for the block, no AWS profile."""
    import pytest  # not at import: the benchmarks' children use FAKE_ENV without pytest's weight

    with pytest.MonkeyPatch.context() as mp:
        for name, value in {**FAKE_ENV, **extra}.items():
            mp.setenv(name, value)
        mp.delenv("AWS_PROFILE", raising=False)
        yield


def _client(ddb: Any) -> Any:
    """The low-level client of a boto3 DynamoDB resource, or the client itself."""
    return ddb.meta.client if hasattr(ddb, "Table") else ddb


def create_table(ddb: Any, name: str | None = None) -> Any:
    """idleshare's main table (``pk`` / ``sk`` strings, TTL ``ttl``, on demand) named ``name`` (default: a fresh
    ``idleshare-<12 hex>``), ACTIVE when returned. ``ddb``: a boto3 DynamoDB resource (returns the ``Table``)
    or client (returns the table's name)."""
    name = name or f"idleshare-{uuid.uuid4().hex[:12]}"
    client = _client(ddb)
    client.create_table(**schema.create_table_kwargs(name))
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 20})
    client.update_time_to_live(**schema.time_to_live_kwargs(name))
    return ddb.Table(name) if hasattr(ddb, "Table") else name


def create_idempotency_table(ddb: Any, name: str) -> Any:
    """The recompute Lambda's idempotency table (Powertools' layout: ``id``, TTL ``expiration``); returns the
    ``Table`` for a resource, the name for a client."""
    client = _client(ddb)
    client.create_table(**schema.idempotency_table_kwargs(name))
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 20})
    client.update_time_to_live(**schema.time_to_live_kwargs(name, schema.IDEMPOTENCY_TTL_ATTRIBUTE))
    return ddb.Table(name) if hasattr(ddb, "Table") else name


CLOSED_PORT_URL = "http://127.0.0.1:9"
"""An endpoint nothing listens on: every call to it fails to connect at once."""


def unreachable_client(service: str, region: str, config: Any) -> Any:
    """A boto3 ``service`` client with ``config`` (timeouts, retries) pointed at :data:`CLOSED_PORT_URL`."""
    import boto3

    return boto3.client(
        service,
        region_name=region,
        endpoint_url=CLOSED_PORT_URL,
        aws_access_key_id="x",
        aws_secret_access_key="y",
        config=config,
    )


def all_items(table: Any, **query: Any) -> list[dict[str, Any]]:
    """Every item of a boto3 ``Table`` a Scan returns, or a Query given ``query`` (``KeyConditionExpression``, ...),
    page after page (a page holds at most 1 MB: a large pool takes several)."""
    read = table.query if query else table.scan
    items: list[dict[str, Any]] = []
    while True:
        page = read(**query)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        query["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def fifo_queue(sqs: Any, name: str = "recompute.fifo", *, visibility_timeout: int = 0) -> str:
    """A FIFO queue as the recompute queue is (no content-based deduplication), a message not deleted visible
    again after ``visibility_timeout`` seconds (0: at once); its URL. ``sqs``: a boto3 SQS client (moto)."""
    attributes = {"FifoQueue": "true", "VisibilityTimeout": str(visibility_timeout)}
    return sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
