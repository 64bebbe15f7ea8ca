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
from idleshare.adapters.errors import NotFoundError, PermanentError, RetryableError
from tests.aws_env import fake_aws_env, unreachable_client

REGION = "eu-west-1"
CLUSTER = "hyperpod-eks"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def aws() -> Iterator[None]:
    with fake_aws_env(AWS_DEFAULT_REGION=REGION, AWS_REGION=REGION), mock_aws():
        yield


@pytest.fixture
def eks(aws: None) -> Any:
    client = boto3.client("eks", region_name=REGION)
    client.create_cluster(
        name=CLUSTER, roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={"subnetIds": []}
    )
    return client


def count_calls(client: Any, event: str) -> list[str]:
    calls: list[str] = []
    client.meta.events.register(event, lambda **kw: calls.append(event))
    return calls


def decode(token: str) -> str:
    body = token.removeprefix(TOKEN_PREFIX)
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


# -- token ---------------------------------------------------------------------------------------


def test_the_token_is_a_presigned_regional_sts_get_caller_identity_url_binding_the_cluster(eks):
    # Given a connector in eu-west-1
    connector = EksConnector(eks)
    # When a token is requested
    token = connector.token(CLUSTER)
    # Then it is the aws-iam-authenticator format: prefix + unpadded base64url of a presigned URL
    assert token.startswith("k8s-aws-v1.")
    assert "=" not in token and "+" not in token and "/" not in token
    url = urlsplit(decode(token))
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert (url.scheme, url.netloc, url.path) == ("https", f"sts.{REGION}.amazonaws.com", "/")
    assert query["Action"] == "GetCallerIdentity"
    assert query["Version"] == "2011-06-15"
    assert query["X-Amz-Expires"] == "60"
    assert query["X-Amz-SignedHeaders"].split(";") == ["host", "x-k8s-aws-id"]
    assert f"/{REGION}/sts/aws4_request" in query["X-Amz-Credential"]
    assert len(query["X-Amz-Signature"]) == 64


def test_the_cluster_name_is_signed_into_the_token(eks):
    # Given one connector and two cluster names
    seen: list[str] = []
    sts = boto3.client("sts", region_name=REGION)
    connector = EksConnector(eks, sts, clock=FakeClock())
    sts.meta.events.register(
        "before-sign.sts.GetCallerIdentity", lambda request, **_: seen.append(request.headers["x-k8s-aws-id"])
    )
    # When tokens are signed for each
    connector.token("cluster-a")
    connector.token("cluster-b")
    # Then the x-k8s-aws-id header carried each cluster's name when signing
    assert seen == ["cluster-a", "cluster-b"]


def connector_with_clocks(eks: Any) -> tuple[EksConnector, FakeClock, FakeClock, list[str]]:
    """A connector on a fake wall clock and a fake monotonic clock, and the list of its signatures."""
    wall, mono = FakeClock(), FakeClock()
    wall.now = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    sts = boto3.client("sts", region_name=REGION)
    signed = count_calls(sts, "before-sign.sts.GetCallerIdentity")
    return EksConnector(eks, sts, clock=wall, monotonic=mono), wall, mono, signed


def test_a_token_is_reused_for_10_minutes_then_signed_anew(eks):
    # Given a connector whose clocks the test moves, counting signatures
    connector, wall, mono, signed = connector_with_clocks(eks)
    first = connector.token(CLUSTER)
    # When asked again just before 10 minutes have passed (both clocks)
    wall.now += TOKEN_REFRESH_SECONDS - 1
    mono.now += TOKEN_REFRESH_SECONDS - 1
    # Then the same token is returned without signing
    assert connector.token(CLUSTER) == first
    assert len(signed) == 1
    # When 10 minutes have passed, a new one is signed (5 minutes before EKS would refuse the first)
    wall.now += 1
    mono.now += 1
    connector.token(CLUSTER)
    assert len(signed) == 2
    assert TOKEN_REFRESH_SECONDS <= 15 * 60 - 5 * 60
    # And tokens are cached per cluster
    connector.token("other")
    connector.token("other")
    assert len(signed) == 3


def test_a_token_ages_by_the_wall_clock_even_when_the_monotonic_clock_stood_still(eks):
    # Given a token signed, then the Lambda sandbox frozen for 11 minutes: its monotonic clock did not advance
    connector, wall, _, signed = connector_with_clocks(eks)
    connector.token(CLUSTER)
    wall.now += 11 * 60
    # When a token is asked for after the thaw
    connector.token(CLUSTER)
    # Then it is a new one: EKS judges the token by the wall-clock time signed into it
    assert len(signed) == 2


@pytest.mark.parametrize(
    ("wall_step", "mono_step"),
    [
        pytest.param(-60, 1, id="wall clock stepped back"),
        pytest.param(30, TOKEN_REFRESH_SECONDS, id="stepped back by nearly the time that went on"),
    ],
)
def test_a_wall_clock_that_jumps_back_does_not_keep_an_old_token(eks, wall_step, mono_step):
    # Given a token, then the wall clock stepped back (an NTP correction) while time went on
    connector, wall, mono, signed = connector_with_clocks(eks)
    connector.token(CLUSTER)
    wall.now += wall_step
    mono.now += mono_step
    # When a token is asked for
    connector.token(CLUSTER)
    # Then a new one is signed: an age that is negative, or one the monotonic clock contradicts, is not trusted
    assert len(signed) == 2


def test_the_token_is_signed_at_the_wall_clock_time(eks):
    # Given the real clocks: the signing time in the token is the wall clock's, which the cache ages by
    before = time.time()
    token = EksConnector(eks).token(CLUSTER)
    query = {k: v[0] for k, v in parse_qs(urlsplit(decode(token)).query).items()}
    signed_at = datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    assert before - 1 <= signed_at <= time.time() + 1


def test_invalidate_forces_a_new_token(eks):
    clock = FakeClock()
    sts = boto3.client("sts", region_name=REGION)
    signed = count_calls(sts, "before-sign.sts.GetCallerIdentity")
    connector = EksConnector(eks, sts, clock=clock)
    connector.token(CLUSTER)
    connector.invalidate(CLUSTER)
    connector.token(CLUSTER)
    assert len(signed) == 2
    connector.invalidate("never-seen")  # no error


def test_the_default_sts_client_uses_the_regional_endpoint(eks):
    assert EksConnector(eks).sts_endpoint == f"https://sts.{REGION}.amazonaws.com"
    session = boto3.Session(region_name="us-east-1")
    assert EksConnector(eks, session=session).sts_endpoint == f"https://sts.{REGION}.amazonaws.com"
    # a Session passed positionally (as the Lambda wiring does) is used to build the client
    assert EksConnector(eks, session).token(CLUSTER).startswith(TOKEN_PREFIX)


# -- describe ------------------------------------------------------------------------------------


def test_describe_returns_endpoint_and_ca_and_calls_eks_once_per_cluster(eks):
    # Given a cluster created in (mocked) EKS
    expected = eks.describe_cluster(name=CLUSTER)["cluster"]
    calls = count_calls(eks, "before-call.eks.DescribeCluster")
    connector = EksConnector(eks)
    # When described twice
    first = connector.describe(CLUSTER)
    second = connector.describe(CLUSTER)
    # Then endpoint and CA are EKS's, and EKS was called once
    assert first.endpoint == expected["endpoint"] and first.endpoint.startswith("https://")
    assert first.ca_data == expected["certificateAuthority"]["data"]
    assert second is first
    assert len(calls) == 1


def test_describe_decodes_the_ca_bundle():
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    eks = boto3.client("eks", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    cluster = {"name": CLUSTER, "endpoint": "https://x.eks.amazonaws.com", "status": "ACTIVE"}
    cluster["certificateAuthority"] = {"data": base64.b64encode(pem.encode()).decode()}  # type: ignore[assignment]
    with Stubber(eks) as stub:
        stub.add_response("describe_cluster", {"cluster": cluster}, {"name": CLUSTER})
        endpoint = EksConnector(eks, boto3.client("sts", region_name=REGION)).describe(CLUSTER)
    assert endpoint.ca_pem == pem


def test_describe_of_an_unknown_cluster_is_a_permanent_not_found_naming_it(eks):
    connector = EksConnector(eks)
    with pytest.raises(NotFoundError) as info:
        connector.describe("no-such-cluster")
    assert isinstance(info.value, PermanentError)  # consumed by the recompute, not handed back: it cannot succeed
    assert "no-such-cluster" in str(info.value)


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
def test_describe_errors_are_translated(code, status, expected):
    # Given EKS answers DescribeCluster with an error
    eks = boto3.client("eks", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    connector = EksConnector(eks, boto3.client("sts", region_name=REGION))
    with Stubber(eks) as stub:
        stub.add_client_error("describe_cluster", code, "nope", http_status_code=status)
        # When described
        with pytest.raises(expected) as info:
            connector.describe(CLUSTER)
    # Then the error says which cluster and what EKS said, and is exactly of the expected class
    assert type(info.value) is expected
    assert CLUSTER in str(info.value) and code in str(info.value)


def test_describe_of_a_cluster_still_creating_is_retryable_and_not_cached():
    eks = boto3.client("eks", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    connector = EksConnector(eks, boto3.client("sts", region_name=REGION))
    ready = {"name": CLUSTER, "status": "ACTIVE", "endpoint": "https://e", "certificateAuthority": {"data": "Q0E="}}
    with Stubber(eks) as stub:
        stub.add_response("describe_cluster", {"cluster": {"name": CLUSTER, "status": "CREATING"}}, {"name": CLUSTER})
        stub.add_response("describe_cluster", {"cluster": ready}, {"name": CLUSTER})
        with pytest.raises(RetryableError, match="CREATING"):
            connector.describe(CLUSTER)
        assert connector.describe(CLUSTER).endpoint == "https://e"


def test_an_unreachable_eks_endpoint_is_retryable():
    # Given an EKS client pointed at a closed loopback port, without retries
    eks = unreachable_client(
        "eks", REGION, Config(connect_timeout=1, read_timeout=1, retries={"total_max_attempts": 1})
    )
    connector = EksConnector(eks, boto3.client("sts", region_name=REGION))
    with pytest.raises(RetryableError, match=CLUSTER):
        connector.describe(CLUSTER)
