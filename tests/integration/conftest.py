"""Fixtures for the integration suite: the real DynamoDB Local (see ``dynamodb_local.py``).

- ``dynamodb_local_server`` (session): the running :class:`DynamoDBLocal` (``.endpoint``, ``.restart()``;
  a restart loses every table: ``-inMemory``).
- ``dynamodb_local`` (session): its endpoint URL.
- ``ddb_resource`` (session): a boto3 DynamoDB resource on it (dummy credentials, us-east-1).
- ``ddb_table`` (function): a fresh table with the CDK app's key schema (:func:`tests.aws_env.create_table`).

Java or the jar missing: the fixtures fail with the reason under CI (``CI=true``), skip with it locally.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.aws_env import create_table, fake_aws_env
from tests.integration.dynamodb_local import DynamoDBLocal, Unavailable

REGION = "us-east-1"
CLIENT_CONFIG = Config(
    connect_timeout=2, read_timeout=10, retries={"max_attempts": 2, "mode": "standard"}, region_name=REGION
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"DynamoDB Local is required in CI: {reason}", pytrace=False)
    pytest.skip(f"DynamoDB Local unavailable: {reason}")


@pytest.fixture(scope="session")
def aws_fake_env() -> Iterator[None]:
    with fake_aws_env():
        yield


@pytest.fixture(scope="session")
def dynamodb_local_server(aws_fake_env: None) -> Iterator[DynamoDBLocal]:
    try:
        server = DynamoDBLocal.start()
    except Unavailable as exc:
        _unavailable(str(exc))
        raise  # unreachable: _unavailable skips or fails
    with server:
        yield server


@pytest.fixture(scope="session")
def dynamodb_local(dynamodb_local_server: DynamoDBLocal) -> str:
    """The endpoint URL of the running DynamoDB Local."""
    return dynamodb_local_server.endpoint


@pytest.fixture(scope="session")
def ddb_resource(dynamodb_local: str) -> Any:
    return boto3.resource(
        "dynamodb",
        endpoint_url=dynamodb_local,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=CLIENT_CONFIG,
    )


@pytest.fixture
def ddb_table(ddb_resource: Any) -> Iterator[Any]:
    table = create_table(ddb_resource)
    yield table
    with contextlib.suppress(Exception):  # after a restart() the in-memory table is already gone
        table.delete()
