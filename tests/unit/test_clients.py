"""Every boto3 client the Lambda wiring builds has explicit timeouts and standard retries that fit its function
(``runtime/wiring.py``: ``client_config``; the numbers in ``timings.py``)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from moto import mock_aws

from idleshare import names, timings
from idleshare.adapters.ports import ClusterRecord
from idleshare.runtime import wiring
from idleshare.runtime.env import HANDLER_VARIABLE
from tests.aws_env import CLOSED_PORT_URL, fake_aws_env, unreachable_client

REGION = "eu-west-1"
ENV = {
    names.ENV_TABLE_NAME: "idleshare-test",
    names.ENV_IDEMPOTENCY_TABLE_NAME: "idleshare-idem",
    names.ENV_QUEUE_URL: f"https://sqs.{REGION}.amazonaws.com/123456789012/q.fifo",
    names.ENV_EVENT_BUS_NAME: "idleshare",
    names.ENV_HISTORY_TTL_DAYS: "30",
    names.ENV_TOLERATED_TAINT_KEYS: "",
    names.ENV_CLUSTERS: '[{"id": "c1", "eks_cluster_name": "eks-1"}]',
}
KINDS = {
    names.ROUTER_HANDLER: (timings.ROUTER_CLIENT, timings.ROUTER_FUNCTION_TIMEOUT_SECONDS),
    names.API_HANDLER: (timings.API_CLIENT, timings.API_GATEWAY_TIMEOUT_SECONDS),
    names.REGISTRAR_HANDLER: (timings.REGISTRAR_CLIENT, timings.REGISTRAR_FUNCTION_TIMEOUT_SECONDS),
    names.RECOMPUTE_HANDLER: (timings.RECOMPUTE_CLIENT, timings.RECOMPUTE_BUDGET_SECONDS),
    names.WATCHER_HANDLER: (timings.WATCHER_CLIENT, timings.WATCHER_STOP_BEFORE_SECONDS),
}


@pytest.fixture
def aws() -> Iterator[None]:
    with fake_aws_env(AWS_DEFAULT_REGION=REGION, AWS_REGION=REGION), mock_aws():
        yield


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every botocore client created from here on (by boto3.client, boto3.resource or a Session)."""
    clients: list[Any] = []
    create = botocore.session.Session.create_client

    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = create(self, *args, **kwargs)
        clients.append(client)
        return client

    monkeypatch.setattr(botocore.session.Session, "create_client", recording)
    return clients


@pytest.mark.parametrize("handler", list(KINDS))
def test_every_client_the_wiring_builds_has_the_functions_timeouts_and_standard_retries(
    aws: None, built: list[Any], monkeypatch: pytest.MonkeyPatch, handler: str
) -> None:
    # Given the function's environment, as Lambda sets it
    for key, value in (ENV | {HANDLER_VARIABLE: handler}).items():
        monkeypatch.setenv(key, value)
    connectors: list[Any] = []

    def from_eks(connector: Any, cluster_name: str, **_: Any) -> Any:
        connectors.append(connector)
        return object()

    monkeypatch.setattr("idleshare.adapters.kube.LightkubeCluster.from_eks", from_eks)
    # When the wiring builds its adapters, reaches a cluster (the EKS and STS clients) and the record returns
    deps = wiring._from_environment()
    deps.kube_for(ClusterRecord(cluster_id="c1", eks_cluster_name="eks-1"))
    if deps.returns is not None:
        getattr(deps.returns, "client", None)
    # Then every client built (DynamoDB, SQS, EventBridge, EKS, STS, ...) has the function's settings
    want = KINDS[handler][0]
    for client in built:
        config = client.meta.config
        got = (config.connect_timeout, config.read_timeout, *map(config.retries.get, ("mode", "total_max_attempts")))
        assert got == (want.connect_seconds, want.read_seconds, "standard", want.attempts), client.meta.service_model
    assert {c.meta.service_model.service_name for c in built} >= {"dynamodb", "sqs", "events", "eks", "sts"}
    assert len(connectors) == 1


@pytest.mark.parametrize("handler", list(KINDS))
def test_one_calls_worst_case_fits_its_function(handler: str) -> None:
    # every attempt timing out, plus the longest backoffs: within what the function can spend on one call
    want, budget = KINDS[handler]
    assert want.attempts >= 2 and want.worst_case_seconds() <= budget  # a throttled or reset call is tried again
    if handler in (names.ROUTER_HANDLER, names.REGISTRAR_HANDLER, names.API_HANDLER):
        assert 2 * want.worst_case_seconds() <= budget  # the two calls of a request, at worst, still answer
    if handler == names.WATCHER_HANDLER:  # its last checkpoint's reserve holds one DynamoDB call at worst
        assert want.worst_case_seconds() < timings.WATCHER_CHECKPOINT_RESERVE_SECONDS < budget


def test_outside_lambda_the_default_settings_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HANDLER_VARIABLE, raising=False)
    assert wiring.client_timings() == timings.DEFAULT_CLIENT
    monkeypatch.setenv(HANDLER_VARIABLE, names.WATCHER_HANDLER)
    assert wiring.client_timings() == timings.WATCHER_CLIENT


# -- what the settings do (a real botocore client, real sockets) ---------------------------------------------
@pytest.fixture
def silent_server() -> Iterator[str]:
    """An HTTP endpoint that accepts connections and never answers."""
    server = socket.create_server(("127.0.0.1", 0), backlog=16)
    server.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in [*accepted, server]:
        conn.close()


def test_a_silent_or_refused_endpoint_is_tried_the_configured_number_of_times(silent_server: str) -> None:
    # Given an EventBridge client with the watcher's settings, pointed at an endpoint that never answers
    config = wiring.client_config(names.WATCHER_HANDLER)
    keys = {"aws_access_key_id": "x", "aws_secret_access_key": "y"}
    client = boto3.client("events", region_name=REGION, endpoint_url=silent_server, config=config, **keys)
    attempts: list[str] = []
    client.meta.events.register("before-send.events.PutEvents", lambda **_: attempts.append("sent"))
    started = time.monotonic()
    with pytest.raises(ReadTimeoutError):
        client.put_events(Entries=[{"Source": "s", "DetailType": "d", "Detail": "{}"}])
    elapsed, want = time.monotonic() - started, timings.WATCHER_CLIENT
    # it tried the configured number of times, each cut at the read timeout, not botocore's 60 s
    assert len(attempts) == want.attempts
    assert want.attempts * want.read_seconds <= elapsed <= want.worst_case_seconds() + 1
    # and a refused connection is retried the configured number of times
    client = unreachable_client("sqs", REGION, wiring.client_config(names.RECOMPUTE_HANDLER))
    client.meta.events.register("before-send.sqs.SendMessage", lambda **_: attempts.append("sent"))
    with pytest.raises(EndpointConnectionError):
        client.send_message(QueueUrl=f"{CLOSED_PORT_URL}/1/q", MessageBody="x")
    assert len(attempts) == want.attempts + timings.RECOMPUTE_CLIENT.attempts


def test_a_cluster_keeps_one_adapter_whose_node_list_a_warm_recompute_reuses(
    aws: None, built: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the recompute's environment, as Lambda sets it
    for key, value in (ENV | {HANDLER_VARIABLE: "recompute"}).items():
        monkeypatch.setenv(key, value)
    made: list[dict[str, Any]] = []

    def from_eks(connector: Any, cluster_name: str, **options: Any) -> Any:
        made.append(options)
        return object()

    monkeypatch.setattr("idleshare.adapters.kube.LightkubeCluster.from_eks", from_eks)
    deps = wiring._from_environment()
    record = ClusterRecord(cluster_id="c1", eks_cluster_name="eks-1")
    # When two invocations of the same container reach the cluster
    first, second = deps.kube_for(record), deps.kube_for(record)
    # Then it is one adapter, built with a node cache (adapters/node_cache.py): the second recompute catches up by a watch
    from idleshare.adapters.node_cache import NodeCache

    assert first is second and len(made) == 1
    assert isinstance(made[0].get("node_cache"), NodeCache)
