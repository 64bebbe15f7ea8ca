"""The local API Gateway emulator (tests/apigw_local.py) itself: it must refuse what API Gateway's IAM
auth refuses, or the CLI tests that run against it would prove nothing about signing."""

from __future__ import annotations

import datetime as dt
import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.apigw_local import (
    BAD_SIGNATURE,
    MISSING_TOKEN,
    TEST_IDENTITY,
    UNKNOWN_KEY,
    ApiGatewayLocal,
    Principal,
)


class Echo:
    """A handler that answers with what it received."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.events.append(event)
        return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": json.dumps({"ok": True})}


def signed(
    url: str,
    method: str = "GET",
    body: bytes | None = None,
    identity: Principal = TEST_IDENTITY,
    secret: str | None = None,
    region: str = "us-east-1",
    service: str = "execute-api",
) -> AWSRequest:
    request = AWSRequest(method=method, url=url, data=body, headers={"Content-Type": "application/json"})
    creds = Credentials(identity.access_key, secret or identity.secret_key, identity.token)
    SigV4Auth(creds, service, region).add_auth(request)
    return request


def send(url: str, method: str = "GET", body: bytes | None = None, headers: dict[str, str] | None = None):
    request = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read() or b"null"), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null"), dict(exc.headers)


def send_signed(request: AWSRequest, url: str | None = None, body: bytes | None = None):
    return send(url or request.url, request.method, body if body is not None else request.body, dict(request.headers))


@pytest.fixture
def api():
    handler = Echo()
    with ApiGatewayLocal(handler) as gate:
        gate.echo = handler  # type: ignore[attr-defined]
        yield gate


def test_a_signed_request_reaches_the_handler_as_a_rest_proxy_event(api) -> None:
    # Given a request signed for execute-api with the test credentials, with a body and a repeated query key
    url = api.url + "clusters/demo/compute-quotas?NameContains=re&x=1&x=2"
    body = b'{"Name": "research"}'

    # When it is sent
    status, payload, headers = send_signed(signed(url, "POST", body))

    # Then the handler ran with the REST proxy event API Gateway would build
    assert (status, payload) == (200, {"ok": True})
    assert headers["x-amzn-RequestId"]
    (event,) = api.echo.events
    assert event["resource"] == "/{proxy+}"
    assert event["path"] == "/clusters/demo/compute-quotas"
    assert event["httpMethod"] == "POST"
    assert event["pathParameters"] == {"proxy": "clusters/demo/compute-quotas"}
    assert event["queryStringParameters"] == {"NameContains": "re", "x": "2"}
    assert event["multiValueQueryStringParameters"] == {"NameContains": ["re"], "x": ["1", "2"]}
    assert json.loads(event["body"]) == {"Name": "research"} and event["isBase64Encoded"] is False
    context = event["requestContext"]
    assert context["stage"] == "prod" and context["path"] == "/prod/clusters/demo/compute-quotas"
    assert context["identity"]["userArn"] == TEST_IDENTITY.user_arn
    assert context["identity"]["caller"] and context["identity"]["accessKey"] == TEST_IDENTITY.access_key
    assert event["headers"]["Content-Type"] == "application/json"


def test_a_request_without_a_query_or_body_has_null_fields_like_api_gateway(api) -> None:
    status, _, _ = send_signed(signed(api.url + "clusters"))
    assert status == 200
    (event,) = api.echo.events
    assert event["queryStringParameters"] is None and event["multiValueQueryStringParameters"] is None
    assert event["body"] is None


def test_an_unsigned_request_is_refused_with_missing_authentication_token(api) -> None:
    status, payload, headers = send(api.url + "clusters")
    assert (status, payload) == (403, {"message": MISSING_TOKEN})
    assert headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"
    assert api.echo.events == [] and api.rejected == [(403, MISSING_TOKEN)]


@pytest.mark.parametrize(
    "tamper",
    ["body", "path", "query", "method", "secret"],
)
def test_a_tampered_request_is_refused_as_a_signature_mismatch(api, tamper: str) -> None:
    # Given a request signed for one thing
    url = api.url + "clusters/demo/compute-quotas/research?TargetVersion=1"
    body = b'{"TargetVersion": 1}'
    request = signed(url, "PUT", body, secret="wrong" if tamper == "secret" else None)

    # When something else is sent under that signature
    if tamper == "body":
        status, payload, _ = send_signed(request, body=b'{"TargetVersion": 2}')
    elif tamper == "path":
        status, payload, _ = send_signed(request, url=url.replace("research", "other"))
    elif tamper == "query":
        status, payload, _ = send_signed(request, url=url.replace("=1", "=9"))
    elif tamper == "method":
        status, payload, _ = send(url, "POST", body, dict(request.headers))
    else:
        status, payload, _ = send_signed(request)

    # Then the gate refuses it and the handler never runs
    assert (status, payload) == (403, {"message": BAD_SIGNATURE})
    assert api.echo.events == []


def test_an_unknown_access_key_or_a_wrong_session_token_is_refused(api) -> None:
    stranger = Principal("AKIASTRANGER00000000", "secret", None)
    assert send_signed(signed(api.url + "clusters", identity=stranger))[:2] == (403, {"message": UNKNOWN_KEY})
    other_token = Principal(TEST_IDENTITY.access_key, TEST_IDENTITY.secret_key, "another-token")
    assert send_signed(signed(api.url + "clusters", identity=other_token))[:2] == (403, {"message": UNKNOWN_KEY})
    assert api.echo.events == []


def test_a_signature_for_another_service_or_region_is_refused(api) -> None:
    for request in (signed(api.url + "clusters", service="s3"), signed(api.url + "clusters", region="eu-west-1")):
        status, payload, _ = send_signed(request)
        assert status == 403 and "execute-api" in payload["message"]
    assert api.echo.events == []


def test_an_old_signature_is_refused_as_expired() -> None:
    # Given a gate whose clock is ten minutes ahead of the signer's
    handler = Echo()
    with ApiGatewayLocal(handler, now=lambda: dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)) as gate:
        status, payload, _ = send_signed(signed(gate.url + "clusters"))
    assert status == 403 and payload["message"].startswith("Signature expired")
    assert handler.events == []


def test_a_path_outside_the_stage_is_refused_like_an_unknown_route(api) -> None:
    url = api.url.replace("/prod/", "/dev/") + "clusters"
    assert send_signed(signed(url))[:2] == (403, {"message": MISSING_TOKEN})


def test_a_failing_handler_becomes_a_502() -> None:
    def broken(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    with ApiGatewayLocal(broken) as gate:
        status, payload, _ = send_signed(signed(gate.url + "clusters"))
    assert (status, payload) == (502, {"message": "Internal server error"})
