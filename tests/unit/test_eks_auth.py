"""EKS access: DescribeCluster (cached, errors translated) and the aws-iam-authenticator bearer token."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from moto import mock_aws

from idleshare.adapters.eks_auth import TOKEN_PREFIX, TOKEN_REFRESH_SECONDS, EksConnector
from idleshare.errors import NotFoundError, PermanentError, RetryableError
from tests.aws_env import fake_aws_env, unreachable_client

REGION = "eu-west-1"
CLUSTER = "hyperpod-eks"


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def eks() -> Iterator[Any]:
    with fake_aws_env(AWS_DEFAULT_REGION=REGION, AWS_REGION=REGION), mock_aws():
        client = boto3.client("eks", region_name=REGION)
        vpc = {"subnetIds": []}
        client.create_cluster(name=CLUSTER, roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig=vpc)
        yield client


def token_query(token: str) -> tuple[Any, dict[str, str]]:
    """The presigned URL inside an aws-iam-authenticator token, and its query."""
    body = token.removeprefix(TOKEN_PREFIX)
    url = urlsplit(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode())
    return url, {k: v[0] for k, v in parse_qs(url.query).items()}


def stubbed() -> tuple[Any, EksConnector]:
    """An EKS client to stub (no AWS behind it) and a connector on it."""
    eks = boto3.client("eks", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    return eks, EksConnector(eks, boto3.client("sts", region_name=REGION))


# -- token ---------------------------------------------------------------------------------------
def test_the_token_is_a_presigned_regional_sts_get_caller_identity_url_signed_at_the_wall_clock_time(eks):
    before = time.time()
    token = EksConnector(eks).token(CLUSTER)
    # the default STS client, and one built from a Session (passed positionally as the Lambda wiring does), are the
    # cluster's region's
    assert EksConnector(eks).sts_endpoint == f"https://sts.{REGION}.amazonaws.com"
    session = boto3.Session(region_name="us-east-1")
    assert EksConnector(eks, session=session).sts_endpoint == f"https://sts.{REGION}.amazonaws.com"
    assert EksConnector(eks, session).token(CLUSTER).startswith(TOKEN_PREFIX)
    # the aws-iam-authenticator format: prefix + unpadded base64url of a presigned URL
    assert token.startswith("k8s-aws-v1.") and "=" not in token and "+" not in token and "/" not in token
    url, query = token_query(token)
    assert (url.scheme, url.netloc, url.path) == ("https", f"sts.{REGION}.amazonaws.com", "/")
    assert (query["Action"], query["Version"], query["X-Amz-Expires"]) == ("GetCallerIdentity", "2011-06-15", "60")
    assert query["X-Amz-SignedHeaders"].split(";") == ["host", "x-k8s-aws-id"]
    assert f"/{REGION}/sts/aws4_request" in query["X-Amz-Credential"] and len(query["X-Amz-Signature"]) == 64
    # signed at the wall clock's time, which the cache ages the token by
    signed_at = datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    assert before - 1 <= signed_at <= time.time() + 1


def connector_with_clocks(eks: Any) -> tuple[EksConnector, FakeClock, FakeClock, list[str]]:
    """A connector on a fake wall clock and a fake monotonic clock, and the cluster of each token it signs."""
    wall, mono = FakeClock(1_767_225_600.0), FakeClock()  # 2026-01-01T00:00:00Z
    sts = boto3.client("sts", region_name=REGION)
    connector, signed = EksConnector(eks, sts, clock=wall, monotonic=mono), list[str]()
    sts.meta.events.register(  # after the connector's own handler, which names the cluster in x-k8s-aws-id
        "before-sign.sts.GetCallerIdentity", lambda request, **_: signed.append(request.headers["x-k8s-aws-id"])
    )
    return connector, wall, mono, signed


def test_a_token_is_reused_for_10_minutes_per_cluster_then_signed_anew_or_when_invalidated(eks):
    connector, wall, mono, signed = connector_with_clocks(eks)
    first = connector.token(CLUSTER)
    # just before 10 minutes have passed (both clocks): the same token, not signed again
    wall.now += TOKEN_REFRESH_SECONDS - 1
    mono.now += TOKEN_REFRESH_SECONDS - 1
    assert connector.token(CLUSTER) == first and len(signed) == 1
    # at 10 minutes a new one is signed (5 minutes before EKS would refuse the first)
    wall.now += 1
    mono.now += 1
    connector.token(CLUSTER)
    assert len(signed) == 2 and TOKEN_REFRESH_SECONDS <= 15 * 60 - 5 * 60
    # tokens are cached per cluster, each signed with its name in the x-k8s-aws-id header
    connector.token("other")
    connector.token("other")
    assert signed == [CLUSTER, CLUSTER, "other"]
    # invalidated: signed anew (a cluster never seen is no error)
    connector.invalidate(CLUSTER)
    connector.invalidate("never-seen")
    connector.token(CLUSTER)
    assert len(signed) == 4


@pytest.mark.parametrize(
    ("wall_step", "mono_step"),
    [
        pytest.param(11 * 60, 0, id="sandbox frozen: the monotonic clock stood still"),
        pytest.param(-60, 1, id="wall clock stepped back"),
        pytest.param(30, TOKEN_REFRESH_SECONDS, id="stepped back by nearly the time that went on"),
    ],
)
def test_a_token_ages_by_the_wall_clock_and_a_clock_jumping_back_keeps_no_old_token(eks, wall_step, mono_step):
    # EKS judges the token by the wall-clock time signed into it; an age that is negative, or one the
    # monotonic clock contradicts, is not trusted
    connector, wall, mono, signed = connector_with_clocks(eks)
    connector.token(CLUSTER)
    wall.now += wall_step
    mono.now += mono_step
    connector.token(CLUSTER)
    assert len(signed) == 2


# -- describe ------------------------------------------------------------------------------------
def test_describe_returns_endpoint_and_ca_and_calls_eks_once_per_cluster(eks):
    expected = eks.describe_cluster(name=CLUSTER)["cluster"]
    calls: list[str] = []
    eks.meta.events.register("before-call.eks.DescribeCluster", lambda **_: calls.append("DescribeCluster"))
    connector = EksConnector(eks)
    first = connector.describe(CLUSTER)
    assert first.endpoint == expected["endpoint"] and first.endpoint.startswith("https://")
    assert first.ca_data == expected["certificateAuthority"]["data"]
    assert connector.describe(CLUSTER) is first and len(calls) == 1
    # an unknown cluster is a permanent not-found naming it (consumed by the recompute: it cannot succeed)
    with pytest.raises(NotFoundError, match="no-such-cluster") as info:
        connector.describe("no-such-cluster")
    assert isinstance(info.value, PermanentError)


def test_describe_decodes_the_ca_bundle_and_a_cluster_still_creating_is_retryable_and_not_cached():
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    ca = {"data": base64.b64encode(pem.encode()).decode()}
    ready = {"name": CLUSTER, "status": "ACTIVE", "endpoint": "https://e", "certificateAuthority": ca}
    eks, connector = stubbed()
    with Stubber(eks) as stub:
        stub.add_response("describe_cluster", {"cluster": {"name": CLUSTER, "status": "CREATING"}}, {"name": CLUSTER})
        stub.add_response("describe_cluster", {"cluster": ready}, {"name": CLUSTER})
        with pytest.raises(RetryableError, match="CREATING"):
            connector.describe(CLUSTER)
        assert (connector.describe(CLUSTER).endpoint, connector.describe(CLUSTER).ca_pem) == ("https://e", pem)


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        pytest.param("ThrottlingException", 400, RetryableError, id="throttled"),
        pytest.param("TooManyRequestsException", 429, RetryableError, id="429"),
        pytest.param("ServerException", 500, RetryableError, id="eks server error"),
        pytest.param("ServiceUnavailableException", 503, RetryableError, id="unavailable"),
        pytest.param("AccessDeniedException", 403, PermanentError, id="access denied"),
        pytest.param("InvalidParameterException", 400, PermanentError, id="bad parameter"),
    ],
)
def test_describe_errors_are_translated_naming_the_cluster_and_what_eks_said(code, status, expected):
    eks, connector = stubbed()
    with Stubber(eks) as stub:
        stub.add_client_error("describe_cluster", code, "nope", http_status_code=status)
        with pytest.raises(expected) as info:
            connector.describe(CLUSTER)
    assert type(info.value) is expected and CLUSTER in str(info.value) and code in str(info.value)


def test_an_unreachable_eks_endpoint_is_retryable():
    config = Config(connect_timeout=1, read_timeout=1, retries={"total_max_attempts": 1})
    connector = EksConnector(unreachable_client("eks", REGION, config), boto3.client("sts", region_name=REGION))
    with pytest.raises(RetryableError, match=CLUSTER):
        connector.describe(CLUSTER)
