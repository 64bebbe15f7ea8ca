"""The admin API client the remote commands share: endpoint discovery, SigV4 signing, errors, output.

The endpoint is ``--endpoint``, else ``$IDLESHARE_API_URL``, else the ``ApiUrl`` output of the
CloudFormation stack (``--stack``, default ``idleshare``). Requests are signed with SigV4 (service
``execute-api``) using the credentials of the boto3 session (``--profile``/``--region`` or the usual
environment) and sent with urllib: no HTTP dependency beyond the standard library. Neither the
credentials nor the ``Authorization`` header are ever printed, ``--debug`` included.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from idleshare import names, pages
from idleshare_cli.main import CommandError, UsageError
from idleshare_cli.present import render_table

ENV_API_URL = "IDLESHARE_API_URL"
SERVICE = "execute-api"
DEFAULT_TIMEOUT = 30.0
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
RETRYABLE_STATUSES = (429, 502, 503, 504)
GET_ATTEMPTS = 3
SAMPLE_ATTEMPTS = 3  # reads of every page of the latest usage when a new sample lands between two of them
_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")

# Indirections the tests replace (no real waiting in tests).
sleep: Callable[[float], None] = time.sleep
monotonic: Callable[[], float] = time.monotonic


class ApiError(CommandError):
    """A non-2xx answer: the API's message, its field errors, and ``CurrentVersion`` on a 409."""

    def __init__(self, method: str, path: str, status: int, body: object) -> None:
        self.status = status
        self.body = body if isinstance(body, dict) else {}
        message = self.body.get("message") or self.body.get("Message") or _reason(status)
        self.api_message = str(message)
        found = self.body.get("errors")
        errors: list[Any] = found if isinstance(found, list) else []
        self.field_errors: list[tuple[str, str]] = [
            (str(e.get("field", "")), str(e.get("message", ""))) for e in errors if isinstance(e, dict)
        ]
        current = self.body.get("CurrentVersion")
        self.current_version = current if isinstance(current, int) and not isinstance(current, bool) else None
        text = f"{method} {path}: HTTP {status}: {self.api_message}"
        if self.current_version is not None:
            text += f" (current version: {self.current_version})"
        if status == 403 and self.api_message == "Missing Authentication Token":
            text += " (API Gateway also says this for an unknown path: check the endpoint includes the stage)"
        for loc, msg in self.field_errors:
            text += f"\n  {loc}: {msg}" if loc else f"\n  {msg}"
        super().__init__(text)


def missing(exc: ApiError) -> bool:
    """The route answered 404, or does not exist (API Gateway answers an unknown path 403 "Missing
    Authentication Token"): what an optional route (the usage a report shows when it has it) degrades on."""
    return exc.status == 404 or (exc.status == 403 and exc.api_message == "Missing Authentication Token")


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "error"


# --------------------------------------------------------------------------------- arguments
def verbs(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """The command ``idleshare <name> VERB``: what its verbs are added to (a verb is required)."""
    return sub.add_parser(name, help=help).add_subparsers(dest="verb", required=True, metavar="VERB")


def cluster_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    func: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """A remote command on one cluster: the connection flags, ``--cluster``, and ``func`` to run it."""
    p = sub.add_parser(name, parents=[remote_parent()], help=help)
    p.add_argument("--cluster", required=True)
    p.set_defaults(func=func)
    return p


def remote_parent() -> argparse.ArgumentParser:
    """The flags every remote command takes (a parent parser for ``add_parser(parents=[...])``)."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection")
    group.add_argument("--endpoint", metavar="URL", help=f"the admin API URL (default: ${ENV_API_URL}, else the stack)")
    group.add_argument("--stack", default=names.STACK_NAME, help="CloudFormation stack to read the URL from")
    group.add_argument("--region", help="AWS region (default: the profile's or $AWS_REGION)")
    group.add_argument("--profile", help="AWS profile for credentials")
    group.add_argument(
        "--timeout", type=_positive_float, default=DEFAULT_TIMEOUT, metavar="SECONDS", help="per request"
    )
    group.add_argument("--debug", action="store_true", help="print each request and response status to stderr")
    parent.add_argument("--format", choices=["table", "json"], default="table", help="output (default: table)")
    return parent


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value > 3600:
        raise argparse.ArgumentTypeError(f"must be > 0 and <= 3600 (got {text})")
    return value


# ------------------------------------------------------------------------------------ client
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A signed request is never re-sent elsewhere: a redirect is an error."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass
class ApiClient:
    """Signed JSON requests against the admin API at ``endpoint`` (ending in ``/``)."""

    endpoint: str
    credentials: Any  # botocore Credentials (refreshable ones are frozen per request)
    region: str
    timeout: float = DEFAULT_TIMEOUT
    debug: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        self._opener = urllib.request.build_opener(_NoRedirect())

    # -- verbs -------------------------------------------------------------------------------------
    def get(self, path: Sequence[str], query: Mapping[str, object] | None = None) -> Any:
        return self.call("GET", path, query=query)[1]

    def post(self, path: Sequence[str], body: object = None, query: Mapping[str, object] | None = None) -> Any:
        return self.call("POST", path, query=query, body=body)

    def put(self, path: Sequence[str], body: object) -> Any:
        return self.call("PUT", path, body=body)[1]

    def delete(self, path: Sequence[str], query: Mapping[str, object] | None = None) -> Any:
        return self.call("DELETE", path, query=query)[1]

    def pages(self, path: Sequence[str], key: str, query: Mapping[str, object] | None = None) -> list[Any]:
        """Every item of a paginated list (follows ``NextToken`` until the API stops returning one)."""
        items: list[Any] = []
        for page in self.each_page(path, key, query, list):
            items.extend(page[key])
        return items

    def merged_pages(self, path: Sequence[str], key: str, query: Mapping[str, object] | None = None) -> dict[str, Any]:
        """Every entry of a paginated object (``key`` holds a JSON object on each page), merged."""
        entries: dict[str, Any] = {}
        for page in self.each_page(path, key, query):
            entries.update(page[key])
        return entries

    def each_page(
        self, path: Sequence[str], key: str, query: Mapping[str, object] | None = None, kind: type = dict
    ) -> Iterator[dict[str, Any]]:
        """Each page (its ``key`` checked to be of type ``kind``), following ``NextToken`` until the API stops
        returning one."""
        params = dict(query or {})
        seen: set[str] = set()
        what = "list" if kind is list else "object"
        while True:
            page = self.get(path, params)
            if not isinstance(page, dict) or not isinstance(page.get(key), kind):
                raise CommandError(f"GET {_path(path)}: unexpected response: no {key} {what}")
            yield page
            token = page.get("NextToken")
            if not token:
                return
            if token in seen:  # a server bug must not loop forever
                raise CommandError(f"GET {_path(path)}: the API repeated NextToken {str(token)[:40]!r}")
            seen.add(token)
            params["NextToken"] = token

    # -- one call ----------------------------------------------------------------------------------
    def call(
        self,
        method: str,
        path: Sequence[str],
        *,
        query: Mapping[str, object] | None = None,
        body: object = None,
    ) -> tuple[int, Any]:
        """(status, decoded JSON or None). Non-2xx raises :class:`ApiError`, a network failure
        :class:`CommandError`. GETs are retried on 429/5xx/network errors (3 attempts)."""
        shown = _path(path)
        url = self.endpoint + "/".join(quote(str(p), safe="") for p in path)
        pairs = [(k, str(v)) for k, v in (query or {}).items() if v is not None]
        if pairs:
            url += "?" + urlencode(sorted(pairs), quote_via=quote, safe="-_.~")
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        attempts = GET_ATTEMPTS if method == "GET" else 1
        for attempt in range(1, attempts + 1):
            try:
                return self._send(method, url, data, shown)
            except ApiError as exc:
                if attempt == attempts or exc.status not in RETRYABLE_STATUSES:
                    raise
            except _NetworkError as exc:
                if attempt == attempts:
                    raise CommandError(str(exc)) from None
            sleep(0.5 * 2 ** (attempt - 1))
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(self, method: str, url: str, data: bytes | None, shown: str) -> tuple[int, Any]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = AWSRequest(method=method, url=url, data=data, headers=headers)
        SigV4Auth(self.credentials.get_frozen_credentials(), SERVICE, self.region).add_auth(request)
        prepared = urllib.request.Request(url, data=data, headers=dict(request.headers.items()), method=method)
        self._trace(f"> {method} {url}")
        try:
            with self._opener.open(prepared, timeout=self.timeout) as response:
                status, raw, request_id = response.status, response.read(MAX_RESPONSE_BYTES + 1), _request_id(response)
        except urllib.error.HTTPError as exc:
            status, raw, request_id = exc.code, exc.read(MAX_RESPONSE_BYTES + 1), _request_id(exc)
            exc.close()
        except TimeoutError:
            raise _NetworkError(f"{method} {shown}: no answer from {self.endpoint} within {self.timeout:g}s") from None
        except urllib.error.URLError as exc:
            raise _NetworkError(f"{method} {shown}: cannot reach {self.endpoint}: {exc.reason}") from None
        except OSError as exc:
            raise _NetworkError(f"{method} {shown}: connection to {self.endpoint} failed: {exc}") from None
        self._trace(f"< {status} ({len(raw)} bytes, request id {request_id or '-'})")
        if len(raw) > MAX_RESPONSE_BYTES:
            raise CommandError(f"{method} {shown}: response larger than {MAX_RESPONSE_BYTES} bytes")
        decoded = _decode(raw)
        if not 200 <= status < 300:
            raise ApiError(method, shown, status, decoded if decoded is not _INVALID else {"message": _snippet(raw)})
        if decoded is _INVALID:
            raise CommandError(f"{method} {shown}: HTTP {status} but the body is not JSON: {_snippet(raw)}")
        return status, decoded

    def _trace(self, line: str) -> None:
        if self.debug is not None:
            self.debug(line)


class _NetworkError(Exception):
    pass


_INVALID = object()


def _decode(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return _INVALID


def _snippet(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip().replace("\n", " ")
    return (text[:200] + "...") if len(text) > 200 else text or "(empty)"


def _request_id(response: Any) -> str:
    headers = getattr(response, "headers", None)
    return str(headers.get("x-amzn-RequestId") or headers.get("x-amz-apigw-id") or "") if headers else ""


def _path(path: Sequence[str]) -> str:
    return "/" + "/".join(str(p) for p in path)


# ------------------------------------------------------------------------------- connection
def connect(args: argparse.Namespace) -> ApiClient:
    """The client for these arguments: the session, the endpoint, the signing region."""
    import os

    import boto3
    from botocore.exceptions import BotoCoreError, ProfileNotFound

    try:
        session = boto3.Session(profile_name=args.profile, region_name=args.region)
    except ProfileNotFound:
        raise UsageError(f"--profile {args.profile}: no such profile in the AWS config") from None
    except BotoCoreError as exc:
        raise UsageError(f"AWS configuration: {exc}") from None
    if args.endpoint:
        endpoint, source = args.endpoint, "--endpoint"
    elif os.environ.get(ENV_API_URL):
        endpoint, source = os.environ[ENV_API_URL], ENV_API_URL
    else:
        endpoint, source = _endpoint_from_stack(session, args.stack, args.timeout), f"stack {args.stack} output"
    endpoint, host_region = _check_endpoint(endpoint, source)
    region = host_region or session.region_name
    if not region:
        raise UsageError("no AWS region to sign requests for: pass --region or set AWS_REGION")
    try:
        credentials = session.get_credentials()
    except BotoCoreError as exc:
        raise CommandError(f"cannot load AWS credentials: {exc}") from None
    if credentials is None:
        raise CommandError("no AWS credentials found: configure a profile (--profile) or the AWS_* variables")
    debug = (lambda line: print(line, file=sys.stderr)) if getattr(args, "debug", False) else None
    return ApiClient(endpoint, credentials, region, timeout=args.timeout, debug=debug)


def _check_endpoint(endpoint: str, source: str) -> tuple[str, str | None]:
    """The endpoint with a trailing ``/``, and the region named by an execute-api host name."""
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise UsageError(f"{source}: not an http(s) URL: {endpoint!r}")
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK:
        raise UsageError(f"{source}: use https (plain http is only accepted for localhost): {endpoint!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise UsageError(f"{source}: the URL must not carry a query, a fragment or credentials")
    match = _EXECUTE_API_HOST.match(parts.hostname)
    base = parts._replace(path=parts.path.rstrip("/") + "/").geturl()
    return base, match.group(1) if match else None


def _endpoint_from_stack(session: Any, stack: str, timeout: float) -> str:
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    hint = f"pass --endpoint URL or set {ENV_API_URL}"
    try:
        client = session.client(
            "cloudformation", config=Config(connect_timeout=timeout, read_timeout=timeout, retries={"max_attempts": 3})
        )
        stacks = client.describe_stacks(StackName=stack)["Stacks"]
    except NoRegionError:
        raise UsageError(f"no AWS region to look up stack {stack!r} in: pass --region, or {hint}") from None
    except NoCredentialsError:
        raise CommandError(f"no AWS credentials to look up stack {stack!r}: configure a profile, or {hint}") from None
    except ClientError as exc:
        message = exc.response.get("Error", {}).get("Message", str(exc))
        raise CommandError(f"cannot read stack {stack!r} in {session.region_name}: {message}; {hint}") from None
    except BotoCoreError as exc:
        raise CommandError(f"cannot read stack {stack!r}: {exc}; {hint}") from None
    for output in (stacks[0].get("Outputs") or []) if stacks else []:
        if output.get("OutputKey") == names.OUTPUT_API_URL and output.get("OutputValue"):
            return str(output["OutputValue"])
    raise CommandError(f"stack {stack!r} has no {names.OUTPUT_API_URL} output (is the API deployed?); {hint}")


def fetch_usage(api: ApiClient, cluster: str, query: Mapping[str, object] | None = None) -> Any:
    """``GET /clusters/{cluster}/usage``, every page: the latest sample (every team, of one sample: read again from
    the first page when a new sample lands in between), or (``query``: from, to, granularity) every row and gap."""
    path = ["clusters", cluster, "usage"]
    params = {**(query or {}), "limit": pages.USAGE_PAGE_MAX}
    if query:
        first: dict[str, Any] = {}
        rows: list[Any] = []
        gaps: list[Any] = []
        for page in api.each_page(path, "rows", params, list):
            first = first or page
            rows += page["rows"]
            gaps += page.get("gaps") or []
        return {k: v for k, v in first.items() if k != "NextToken"} | {"rows": rows, "gaps": gaps}
    stamps: list[Any] = []
    for _ in range(SAMPLE_ATTEMPTS):
        first, stamps = {}, []
        teams: dict[str, Any] = {}
        by_team: dict[str, list[Any]] = {"idleWhilePending": [], "pending": [], "aboveLimit": []}
        for page in api.each_page(path, "teams", params):
            first = first or page
            teams.update(page["teams"])
            for key, entries in by_team.items():
                entries += page.get(key) or []
            if page.get("sampledAt") not in stamps:
                stamps.append(page.get("sampledAt"))
        if len(stamps) == 1:
            whole = {k: v for k, v in first.items() if k != "NextToken"}
            return whole | {"teams": teams} | {k: v for k, v in by_team.items() if k in first}
    raise CommandError(
        f"GET {_path(path)}: a new sample landed while its pages were read, {SAMPLE_ATTEMPTS} times "
        f"(sampled at {', '.join(str(s) for s in stamps)}); try again"
    )


# ----------------------------------------------------------------------------------- output
def emit(args: argparse.Namespace, data: object, table: Callable[[Any], str]) -> None:
    """``--format json``: the API's JSON as received; otherwise the readable rendering."""
    if args.format == "json":
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(table(data))


def table(rows: Iterable[Sequence[object]], header: Sequence[str]) -> str:
    materialized = [[_cell(c) for c in row] for row in rows]
    if not materialized:
        return "(none)"
    return render_table(materialized, list(header))


def _cell(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def progress(line: str) -> None:
    """One self-overwriting status line on stderr, only on a terminal."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K" + line)
        sys.stderr.flush()


def end_progress() -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()
