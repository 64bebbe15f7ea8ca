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

from tests.apigw_local import BAD_SIGNATURE, MISSING_TOKEN, TEST_IDENTITY, UNKNOWN_KEY, ApiGatewayLocal, Principal


class Echo:
    """A handler that answers with what it received."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.events.append(event)
        return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": json.dumps({"ok": True})}


def signed(url: str, method: str = "GET", body: bytes | None = None, identity: Principal = TEST_IDENTITY, **scope: str):
    """A request signed with SigV4 (``scope``: another ``secret``, ``region`` or ``service`` to sign with)."""
    request = AWSRequest(method=method, url=url, data=body, headers={"Content-Type": "application/json"})
    creds = Credentials(identity.access_key, scope.get("secret", identity.secret_key), identity.token)
    SigV4Auth(creds, scope.get("service", "execute-api"), scope.get("region", "us-east-1")).add_auth(request)
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
    status, payload, headers = send_signed(signed(url, "POST", b'{"Name": "research"}'))
    # Then the handler ran with the REST proxy event API Gateway would build
    assert (status, payload) == (200, {"ok": True}) and headers["x-amzn-RequestId"]
    assert send_signed(signed(api.url + "clusters"))[0] == 200  # no query, no body
    event, bare = api.echo.events
    path = "/clusters/demo/compute-quotas"
    want = {"resource": "/{proxy+}", "path": path, "httpMethod": "POST", "pathParameters": {"proxy": path[1:]}}
    assert {k: event[k] for k in want} == want and event["isBase64Encoded"] is False
    assert event["queryStringParameters"] == {"NameContains": "re", "x": "2"}
    assert event["multiValueQueryStringParameters"] == {"NameContains": ["re"], "x": ["1", "2"]}
    assert json.loads(event["body"]) == {"Name": "research"}
    context, identity = event["requestContext"], event["requestContext"]["identity"]
    assert context["stage"] == "prod" and context["path"] == "/prod/clusters/demo/compute-quotas"
    assert identity["userArn"] == TEST_IDENTITY.user_arn and identity["caller"]
    assert identity["accessKey"] == TEST_IDENTITY.access_key
    assert event["headers"]["Content-Type"] == "application/json"
    # API Gateway's null fields for a request without a query or a body
    assert (bare["queryStringParameters"], bare["multiValueQueryStringParameters"], bare["body"]) == (None, None, None)


URL, BODY = "clusters/demo/compute-quotas/research?TargetVersion=1", b'{"TargetVersion": 1}'
STRANGER = Principal("AKIASTRANGER00000000", "secret", None)
OTHER_TOKEN = Principal(TEST_IDENTITY.access_key, TEST_IDENTITY.secret_key, "another-token")
SCOPE = "Credential should be scoped to a valid region and service execute-api, not '{}'."


def put(url: str, **signing: Any) -> AWSRequest:
    return signed(url, "PUT", BODY, **signing)


ERROR_TYPES = {MISSING_TOKEN: "MissingAuthenticationTokenException", UNKNOWN_KEY: "UnrecognizedClientException"}
REFUSALS = {  # how a request goes wrong: (send it, API Gateway's message)
    "unsigned": (lambda url: send(url, "PUT", BODY), MISSING_TOKEN),
    "outside the stage": (lambda url: send_signed(put(url.replace("/prod/", "/dev/"))), MISSING_TOKEN),
    "tampered body": (lambda url: send_signed(put(url), body=b'{"TargetVersion": 2}'), BAD_SIGNATURE),
    "tampered path": (lambda url: send_signed(put(url), url=url.replace("research", "other")), BAD_SIGNATURE),
    "tampered query": (lambda url: send_signed(put(url), url=url.replace("=1", "=9")), BAD_SIGNATURE),
    "tampered method": (lambda url: send(url, "POST", BODY, dict(put(url).headers)), BAD_SIGNATURE),
    "wrong secret": (lambda url: send_signed(put(url, secret="wrong")), BAD_SIGNATURE),
    "unknown key": (lambda url: send_signed(put(url, identity=STRANGER)), UNKNOWN_KEY),
    "another session token": (lambda url: send_signed(put(url, identity=OTHER_TOKEN)), UNKNOWN_KEY),
    "another service": (lambda url: send_signed(put(url, service="s3")), SCOPE.format("us-east-1/s3")),
    "another region": (lambda url: send_signed(put(url, region="eu-west-1")), SCOPE.format("eu-west-1/execute-api")),
}


@pytest.mark.parametrize("how", list(REFUSALS))
def test_what_iam_auth_refuses_is_a_403_and_never_reaches_the_handler(api, how: str) -> None:
    send_it, message = REFUSALS[how]
    status, payload, headers = send_it(api.url + URL)
    assert (status, payload) == (403, {"message": message})
    assert headers["x-amzn-ErrorType"] == ERROR_TYPES.get(message, "InvalidSignatureException")
    assert api.echo.events == [] and api.rejected == [(403, message)]


def test_an_old_signature_is_refused_as_expired_and_a_failing_handler_becomes_a_502() -> None:
    # Given a gate whose clock is ten minutes ahead of the signer's
    handler = Echo()
    with ApiGatewayLocal(handler, now=lambda: dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)) as gate:
        status, payload, _ = send_signed(signed(gate.url + "clusters"))
    assert status == 403 and payload["message"].startswith("Signature expired") and handler.events == []

    def broken(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    with ApiGatewayLocal(broken) as gate:
        status, payload, _ = send_signed(signed(gate.url + "clusters"))
    assert (status, payload) == (502, {"message": "Internal server error"})
