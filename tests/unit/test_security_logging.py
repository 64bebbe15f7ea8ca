"""No secret or token is ever logged, even with every logger at DEBUG (as Lambda sets them when an operator asks),
while the EKS auth path, the router and the recompute handler run against a real kube-apiserver and moto."""

from __future__ import annotations

import base64
import io
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from devkit.kube.client import Kube
from devkit.kube.stack import IDLESHARE_GROUP, KubeStack, ensure_built
from devkit.lambda_context import LambdaContext
from devkit.sqs import sqs_event
from idleshare.adapters.aws import SqsRecomputeQueue
from idleshare.adapters.eks_auth import TOKEN_PREFIX, EksConnector
from idleshare.adapters.kube import LightkubeCluster
from idleshare.adapters.ports import ClusterRecord
from idleshare.adapters.store import DynamoStore
from idleshare.handlers import recompute, router
from idleshare.runtime import wiring
from idleshare.runtime.observability import logger
from tests.aws_env import create_table
from tests.builders import quota_body
from tests.kube.fixtures import make_node, wait_serving

REGION = "us-west-2"
EKS_NAME = "demo-eks"
HYPERPOD_ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster"
ACCESS_KEY = "AKIAIDLESHARELOGTEST1"
SECRET_KEY = "idleshareSECRETkeyMustNeverBeLogged0001"
SESSION_TOKEN = "idleshareSESSIONtokenMustNeverBeLogged0001"
CONTEXT = LambdaContext(function_name="f", region="us-west-2", account="111122223333", aws_request_id="r")


@dataclass
class Captured:
    root: io.StringIO
    powertools: io.StringIO

    def text(self, capsys: pytest.CaptureFixture[str]) -> str:
        out, err = capsys.readouterr()
        return "\n".join([self.root.getvalue(), self.powertools.getvalue(), out, err])


@pytest.fixture
def everything_at_debug(monkeypatch: pytest.MonkeyPatch) -> Iterator[Captured]:
    """Every logger at DEBUG into two buffers: the root logger's and Powertools' own handler."""
    for name, value in (("LOG_LEVEL", "DEBUG"), ("TRACE_DISABLED", "1"), ("METRICS_NAMESPACE", "idleshare")):
        monkeypatch.setenv(f"POWERTOOLS_{name}", value)
    root = logging.getLogger()
    root_stream, pt_stream = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(root_stream)
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    old_root_level, old_pt_level = root.level, logger.log_level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    logger.setLevel("DEBUG")
    old_stream = logger.registered_handler.setStream(pt_stream)
    try:
        yield Captured(root_stream, pt_stream)
    finally:
        logger.registered_handler.setStream(old_stream)
        logger.setLevel(old_pt_level)
        root.setLevel(old_root_level)
        root.removeHandler(handler)


CREDENTIALS = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_SESSION_TOKEN": SESSION_TOKEN}
CREDENTIALS |= {"AWS_DEFAULT_REGION": REGION, "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled"}


def use_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def secrets_of(token: str) -> dict[str, str]:
    """Every string whose appearance in a log would leak the token or the credentials."""
    url = base64.urlsafe_b64decode(token.removeprefix(TOKEN_PREFIX) + "==").decode()
    query = parse_qs(urlsplit(url).query)
    found = {
        "token": token,
        "token body": token.removeprefix(TOKEN_PREFIX)[:48],
        "presigned URL": url,
        "URL signature": query["X-Amz-Signature"][0],
        "secret key": SECRET_KEY,
        "session token": SESSION_TOKEN,
        "Authorization header": "Authorization': b'AWS4-HMAC-SHA256",
        "bearer header": "Bearer ",
    }
    assert query["X-Amz-Security-Token"] == [SESSION_TOKEN]  # the token does carry the session token
    return found


def assert_nothing_leaked(text: str, secrets: dict[str, str]) -> None:
    assert text.strip(), "nothing was logged: the capture is broken"
    found = {what: text.find(secret) for what, secret in secrets.items()}
    assert {what: text[text.rfind("\n", 0, at) + 1 :][:200] for what, at in found.items() if at >= 0} == {}


def rotate(connector: EksConnector) -> None:
    """The token the connector holds is no longer the one the server knows: the connector signs anew
    (a later signing time), which the server's token file does not list: a real 401."""
    old = connector.token(EKS_NAME)
    connector.invalidate(EKS_NAME)
    while connector.token(EKS_NAME) == old:  # signed within the same second: sign again
        time.sleep(0.2)
        connector.invalidate(EKS_NAME)


@pytest.fixture(scope="module")
def eks_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """A real apiserver (no Kueue manager) whose token file holds the presigned token ``connector`` signed
    for ``EKS_NAME`` (cached 14 minutes in the connector)."""
    with pytest.MonkeyPatch.context() as mp:
        use_credentials(mp)
        # a session of its own: boto3's default one may hold another test's credentials, resolved once and kept
        session = boto3.Session(region_name=REGION)
        eks = session.client("eks")
        connector = EksConnector(eks, session.client("sts"))
        tokens = {connector.token(EKS_NAME): (f"eks-{EKS_NAME}", (IDLESHARE_GROUP,))}
    stack = KubeStack(tmp_path_factory.mktemp("eks-stack"), ensure_built(), kueue=False, extra_tokens=tokens)
    stack.start()
    admin = Kube.admin(stack)
    wait_serving(admin)
    try:
        yield SimpleNamespace(stack=stack, admin=admin, connector=connector, eks=eks)
    finally:
        admin.close()
        stack.stop()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    use_credentials(monkeypatch)
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name=REGION)
        table = create_table(ddb)
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="recompute.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        yield SimpleNamespace(table=table, sqs=sqs, queue_url=url)


def test_the_eks_auth_path_the_router_and_the_recompute_handler_log_no_token_or_credential(
    aws: SimpleNamespace,
    everything_at_debug: Captured,
    eks_cluster: SimpleNamespace,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a governed cluster in DynamoDB (moto), its API behind an EKS token (described via a stub), a queue
    eks_cluster.admin.seed_nodes([make_node(f"p5-{i}") for i in range(2)])
    store = DynamoStore(aws.table)
    store.put_cluster(ClusterRecord("demo", EKS_NAME, HYPERPOD_ARN))
    store.create_quota("demo", quota_body("a", 8, None))
    connector, stub, stack = eks_cluster.connector, Stubber(eks_cluster.eks), eks_cluster.stack
    ca = {"data": base64.b64encode(stack.ca_pem).decode()}
    described = {"name": EKS_NAME, "status": "ACTIVE", "endpoint": stack.server, "certificateAuthority": ca}
    stub.add_response("describe_cluster", {"cluster": described}, {"name": EKS_NAME})
    token = connector.token(EKS_NAME)
    clients: dict[str, LightkubeCluster] = {}

    def kube_for(cluster: ClusterRecord) -> LightkubeCluster:  # what wiring.kube_for does, EKS stubbed
        if cluster.eks_cluster_name not in clients:
            with stub:
                clients[cluster.eks_cluster_name] = LightkubeCluster.from_eks(connector, cluster.eks_cluster_name)
        return clients[cluster.eks_cluster_name]

    wiring.install(wiring.Dependencies(store=store, queue=SqsRecomputeQueue(aws.sqs, aws.queue_url), kube_for=kube_for))
    try:
        # When an event is routed and the recompute runs (it reads nodes and applies Kueue objects)
        event = {"version": "0", "id": "e1", "detail-type": "Recalculation Requested", "source": "idleshare"}
        event |= {"account": "111122223333", "time": "2025-06-01T12:00:00Z", "region": REGION, "resources": []}
        event["detail"] = {"cluster": "demo"}
        assert router.handler(event, CONTEXT) == {"enqueued": ["demo"]}
        (message,) = aws.sqs.receive_message(QueueUrl=aws.queue_url)["Messages"]
        batch = sqs_event([message], f"arn:aws:sqs:{REGION}:111122223333:recompute.fifo")
        assert recompute.handler(batch, CONTEXT)["batchItemFailures"] == []
        assert store.get_pool("demo") is not None
        assert [n["metadata"]["name"] for n in clients[EKS_NAME].list_nodes()] == ["p5-0", "p5-1"]
        # and once more with the token rejected (a real 401; the failure path logs the error)
        rotate(connector)
        with pytest.raises(Exception, match=r"401|nauthori"):
            list(clients[EKS_NAME].list_nodes())
        store.create_quota("demo", quota_body("b", 1, None))
        try:
            recompute.handler(batch, CONTEXT)
        except Exception as error:  # every record failed: the batch processor raises
            logging.getLogger("test").exception("the handler raised: %s", error)
    finally:
        wiring.install(None)
        for client in clients.values():
            client.close()

    text = everything_at_debug.text(capsys)
    assert "recomputed" in text  # the capture saw the handler's own log lines
    assert_nothing_leaked(text, secrets_of(token))


def test_the_leak_check_catches_a_logged_token(everything_at_debug: Captured, capsys: pytest.CaptureFixture) -> None:
    # The checks above must be able to fail: log what a careless adapter would, and it is caught (and the capture
    # holds Powertools' own logger's lines).
    url = f"https://sts.{REGION}.amazonaws.com/?Action=GetCallerIdentity&X-Amz-Security-Token={SESSION_TOKEN}&X-Amz-Signature=abc123"
    token = TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    logging.getLogger("lightkube.careless").debug("headers: %s", {"Authorization": f"Bearer {token}"})
    logger.debug("probe %s", json.dumps({"k": "v"}))
    text = everything_at_debug.text(capsys)
    assert "probe" in everything_at_debug.powertools.getvalue()
    with pytest.raises(AssertionError, match="token"):
        assert_nothing_leaked(text, secrets_of(token))
