"""Fixtures the unit tests share: the admin API's world (moto, one mock per module, a table per test), the
recompute's cluster on in-memory fakes, and the CLI's fake admin API behind the API Gateway emulator."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from idleshare.adapters.ports import ClusterRecord
from idleshare.runtime import wiring
from idleshare.service.recompute import Recomputer
from idleshare_cli import remote
from tests.admin_api import World
from tests.apigw_local import ApiGatewayLocal, use_credentials
from tests.aws_env import create_table, fake_aws_env
from tests.builders import k8s_node, quota_body
from tests.fake_admin_api import FakeAdminApi
from tests.fakes import FakeKube, FakePublisher, FakeStore


@pytest.fixture(scope="module")
def aws() -> Iterator[None]:
    # one moto mock per module (starting one costs ~1 s); each test gets its own table
    with fake_aws_env(POWERTOOLS_TRACE_DISABLED="1", POWERTOOLS_METRICS_NAMESPACE="idleshare"), mock_aws():
        yield


@pytest.fixture
def world(aws: None, request: pytest.FixtureRequest) -> Iterator[World]:
    table = create_table(boto3.resource("dynamodb", region_name="us-east-1"), f"t-{abs(hash(request.node.nodeid))}")
    try:
        yield World(table)
    finally:
        wiring.install(None)
        table.delete()


@pytest.fixture
def cluster() -> tuple[FakeStore, FakeKube, FakePublisher, Recomputer]:
    """Cluster ``demo`` on fakes: 4 p5 nodes, teams ``a`` (LendAndBorrow) and ``b`` (Lend) of 8 GPUs, its Recomputer."""
    store = FakeStore([ClusterRecord("demo", "demo-eks")])
    store.set_quotas("demo", [quota_body("a", 8, enabled=True), quota_body("b", 8, "Lend", enabled=True)])
    kube = FakeKube([k8s_node(f"p5-{i}") for i in range(4)])
    publisher = FakePublisher()
    return store, kube, publisher, Recomputer(store, lambda c: kube, publisher)


@pytest.fixture
def fake() -> FakeAdminApi:
    return FakeAdminApi()


@pytest.fixture
def api(fake: FakeAdminApi, monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiGatewayLocal]:
    """The CLI's admin API: ``fake`` behind the API Gateway emulator, signed with test credentials, no retry waits."""
    use_credentials(monkeypatch)
    monkeypatch.setattr(remote, "sleep", lambda seconds: None)
    with ApiGatewayLocal(fake) as gate:
        yield gate
