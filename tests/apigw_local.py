"""A local stand-in for API Gateway (REST API, ``{proxy+}`` Lambda proxy integration, IAM auth).

Serves ``http://127.0.0.1:<port>/<stage>/...`` from a thread, checks each request's SigV4 signature
(service ``execute-api``) with botocore against known test credentials, and answers as API Gateway
does when it fails (403 with ``{"message": ...}`` and an ``x-amzn-ErrorType`` header). A signed
request becomes a REST proxy event for ``handler(event, context)``; the handler's proxy response
becomes the HTTP response (a handler exception becomes 502 ``Internal server error``).

    with ApiGatewayLocal(handler, credentials={"AKIDEXAMPLE": "secret"}) as api:
        api.url  # -> "http://127.0.0.1:PORT/prod/"
        api.requests  # every request that reached the handler (events), in order
        api.rejected  # every request refused at the gate: (status, message)
"""

from __future__ import annotations

import base64
import datetime as dt
import hmac
import json
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from devkit.lambda_context import LambdaContext

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

MISSING_TOKEN = "Missing Authentication Token"
BAD_SIGNATURE = (
    "The request signature we calculated does not match the signature you provided. Check your AWS "
    "Secret Access Key and signing method. Consult the service documentation for details."
)
UNKNOWN_KEY = "The security token included in the request is invalid."
_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/,\s]+)/(?P<service>[^/,\s]+)"
    r"/aws4_request,\s*SignedHeaders=(?P<signed>[a-z0-9;\-]+),\s*Signature=(?P<signature>[0-9a-f]{64})$"
)
MAX_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class Principal:
    """Credentials the gate accepts and the IAM identity it reports for them."""

    access_key: str
    secret_key: str
    token: str | None = None
    account: str = "123456789012"

    @property
    def user_arn(self) -> str:
        return f"arn:aws:iam::{self.account}:user/idleshare-admin"

    @property
    def caller(self) -> str:
        return f"AIDA{self.access_key[-8:].upper()}"


class _Refused(Exception):
    def __init__(self, status: int, message: str, error_type: str) -> None:
        super().__init__(message)
        self.status, self.message, self.error_type = status, message, error_type


@dataclass
class ApiGatewayLocal:
    """The emulator; use as a context manager (starts/stops the server thread)."""

    handler: Handler
    identities: list[Principal] = field(default_factory=lambda: [TEST_IDENTITY])
    region: str = "us-east-1"
    stage: str = "prod"
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    requests: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> ApiGatewayLocal:
        gate = self

        class _RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                gate._serve(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _RequestHandler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="apigw-local", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        assert self._server is not None, "use ApiGatewayLocal as a context manager"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/{self.stage}/"

    # -- one request -------------------------------------------------------------------------------
    def _serve(self, http: BaseHTTPRequestHandler) -> None:
        length = int(http.headers.get("Content-Length") or 0)
        body = http.rfile.read(length) if length else b""
        try:
            identity = self._authenticate(http, body)
            event = self._event(http, body, identity)
        except _Refused as refused:
            with self._lock:
                self.rejected.append((refused.status, refused.message))
            self._send(
                http,
                refused.status,
                {"Content-Type": "application/json", "x-amzn-ErrorType": refused.error_type},
                json.dumps({"message": refused.message}).encode(),
            )
            return
        with self._lock:
            self.requests.append(event)
        context = LambdaContext(function_name="idleshare-api", region=self.region, aws_request_id=str(uuid.uuid4()))
        try:
            response = self.handler(event, context)
            status, headers, payload = _proxy_response(response)
        except Exception:  # API Gateway hides a failing integration behind a 502
            status, headers, payload = (
                502,
                {"Content-Type": "application/json"},
                b'{"message": "Internal server error"}',
            )
        headers.setdefault("x-amzn-RequestId", event["requestContext"]["requestId"])
        self._send(http, status, headers, payload)

    @staticmethod
    def _send(http: BaseHTTPRequestHandler, status: int, headers: Mapping[str, str], payload: bytes) -> None:
        http.send_response(status)
        for name, value in headers.items():
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                http.send_header(name, value)
        http.send_header("Content-Length", str(len(payload)))
        http.end_headers()
        if http.command != "HEAD":
            http.wfile.write(payload)

    def _authenticate(self, http: BaseHTTPRequestHandler, body: bytes) -> Principal:
        authorization = http.headers.get("Authorization")
        if not authorization:
            raise _Refused(403, MISSING_TOKEN, "MissingAuthenticationTokenException")
        match = _AUTH.match(authorization.strip())
        if match is None:
            raise _Refused(403, "Authorization header requires 'Credential' parameter.", "IncompleteSignatureException")
        identity = next((i for i in self.identities if i.access_key == match["key"]), None)
        if identity is None:
            raise _Refused(403, UNKNOWN_KEY, "UnrecognizedClientException")
        if identity.token is not None and http.headers.get("X-Amz-Security-Token") != identity.token:
            raise _Refused(403, UNKNOWN_KEY, "UnrecognizedClientException")
        stamp = http.headers.get("X-Amz-Date", "")
        try:
            when = dt.datetime.strptime(stamp, SIGV4_TIMESTAMP).replace(tzinfo=dt.UTC)
        except ValueError:
            raise _Refused(
                403,
                "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
                "IncompleteSignatureException",
            ) from None
        if match["service"] != "execute-api" or match["region"] != self.region or match["date"] != stamp[:8]:
            raise _Refused(
                403,
                f"Credential should be scoped to a valid region and service execute-api, not '{match['region']}/{match['service']}'.",
                "InvalidSignatureException",
            )
        if abs(self.now() - when) > MAX_SKEW:
            raise _Refused(403, f"Signature expired: {stamp} is now earlier than allowed", "InvalidSignatureException")
        signed = match["signed"].split(";")
        headers = {}
        for name in signed:
            values = http.headers.get_all(name)
            if values is None:
                raise _Refused(403, BAD_SIGNATURE, "InvalidSignatureException")
            headers[name] = ",".join(values)
        host = http.headers.get("Host", "")
        request = AWSRequest(method=http.command, url=f"http://{host}{http.path}", data=body, headers=headers)
        request.context["timestamp"] = stamp
        auth = SigV4Auth(
            Credentials(identity.access_key, identity.secret_key, identity.token), "execute-api", self.region
        )
        expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
        if auth.signed_headers(auth.headers_to_sign(request)) != match["signed"] or not hmac.compare_digest(
            expected, match["signature"]
        ):
            raise _Refused(403, BAD_SIGNATURE, "InvalidSignatureException")
        return identity

    def _event(self, http: BaseHTTPRequestHandler, body: bytes, identity: Principal) -> dict[str, Any]:
        parts = urlsplit(http.path)
        prefix = f"/{self.stage}"
        if parts.path != prefix and not parts.path.startswith(prefix + "/"):
            raise _Refused(403, MISSING_TOKEN, "MissingAuthenticationTokenException")  # API Gateway: unknown route
        path = unquote(parts.path[len(prefix) :]) or "/"
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        multi_query: dict[str, list[str]] = {}
        for key, value in pairs:
            multi_query.setdefault(key, []).append(value)
        multi_headers: dict[str, list[str]] = {}
        for key, value in http.headers.items():
            multi_headers.setdefault(key, []).append(value)
        try:
            text: str | None = body.decode("utf-8") if body else None
            is_base64 = False
        except UnicodeDecodeError:
            text, is_base64 = base64.b64encode(body).decode(), True
        request_id = str(uuid.uuid4())
        now = self.now()
        return {
            "resource": "/{proxy+}",
            "path": path,
            "httpMethod": http.command,
            "headers": {k: v[-1] for k, v in multi_headers.items()} or None,
            "multiValueHeaders": multi_headers or None,
            "queryStringParameters": {k: v[-1] for k, v in multi_query.items()} or None,
            "multiValueQueryStringParameters": multi_query or None,
            "pathParameters": {"proxy": path.lstrip("/")} if path != "/" else None,
            "stageVariables": None,
            "requestContext": {
                "accountId": identity.account,
                "apiId": "local",
                "resourceId": "proxy",
                "resourcePath": "/{proxy+}",
                "httpMethod": http.command,
                "path": parts.path,
                "protocol": "HTTP/1.1",
                "requestId": request_id,
                "extendedRequestId": request_id,
                "requestTime": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
                "requestTimeEpoch": int(now.timestamp() * 1000),
                "stage": self.stage,
                "domainName": http.headers.get("Host", ""),
                "identity": {
                    "accountId": identity.account,
                    "accessKey": identity.access_key,
                    "caller": identity.caller,
                    "user": identity.caller,
                    "userArn": identity.user_arn,
                    "sourceIp": http.client_address[0],
                    "userAgent": http.headers.get("User-Agent", ""),
                    "cognitoIdentityId": None,
                    "cognitoIdentityPoolId": None,
                    "cognitoAuthenticationType": None,
                    "cognitoAuthenticationProvider": None,
                },
            },
            "body": text,
            "isBase64Encoded": is_base64,
        }


def _proxy_response(response: object) -> tuple[int, dict[str, str], bytes]:
    """A Lambda proxy response -> (status, headers, body); anything malformed is API Gateway's 502."""
    if not isinstance(response, dict) or not isinstance(response.get("statusCode"), int):
        raise ValueError("malformed Lambda proxy response")
    headers: dict[str, str] = {}
    for name, values in (response.get("multiValueHeaders") or {}).items():
        headers[name] = ",".join(str(v) for v in values)
    for name, value in (response.get("headers") or {}).items():
        headers[name] = str(value)
    body = response.get("body") or ""
    payload = base64.b64decode(body) if response.get("isBase64Encoded") else str(body).encode()
    return response["statusCode"], headers, payload


TEST_IDENTITY = Principal(
    access_key="AKIAIDLESHARETEST001",
    secret_key="idleshare/test/secret/key/do-not-use/0001",
    token="idleshare-test-session-token",
)


def use_credentials(monkeypatch: Any, identity: Principal = TEST_IDENTITY, region: str = "us-east-1") -> None:
    """Point boto3 at ``identity`` only: no profile, no config files, no IMDS, no API URL from the shell."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "IDLESHARE_API_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", identity.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", identity.secret_key)
    if identity.token:
        monkeypatch.setenv("AWS_SESSION_TOKEN", identity.token)
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
