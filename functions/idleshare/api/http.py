"""HTTP plumbing of the admin API: the error body every non-2xx answer carries, the checks made before a
request reaches the router (IAM identity, body size, content type), and exceptions -> status codes.

Error body (docs/operations.md, "Admin HTTP API")::

    {"message": str, "errors": [{"field": "ComputeQuotaConfig.ComputeQuotaResources[0].Count", "message": str}]}

plus ``"CurrentVersion": n`` on a 409 for a stale ``TargetVersion``. A 500 never carries internals: it
names the request id (API Gateway's, the logs' correlation id) and the exception goes to the log.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from idleshare import names
from idleshare.parse import jsontext
from idleshare.parse.errors import FieldError, InputError
from idleshare.parse.schema import show

JSON = "application/json"


def error_body(message: str, errors: Iterable[FieldError] = (), **extra: Any) -> dict[str, Any]:
    return {"message": message, "errors": [{"field": e.loc, "message": e.message} for e in errors], **extra}


def proxy_response(status: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """A complete API Gateway proxy response (for answers given before the router runs)."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": JSON},
        "body": json.dumps(body, separators=(",", ":")),
        "isBase64Encoded": False,
    }


def _header(event: Mapping[str, Any], name: str) -> str | None:
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == name and value is not None:
            return str(value)
    for key, values in (event.get("multiValueHeaders") or {}).items():
        if key.lower() == name and values:
            return str(values[0])
    return None


def body_size(event: Mapping[str, Any]) -> int:
    """Bytes of the request body, without decoding it."""
    body = event.get("body") or ""
    if not isinstance(body, str):
        return 0
    if event.get("isBase64Encoded"):
        return len(body) * 3 // 4 - body[-2:].count("=")
    return len(body.encode("utf-8", errors="surrogatepass"))


BODY = "request body"


def body_problem(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The 400 for a body that is not one JSON object idleshare can read, or None (no body, or an object).

    Powertools reads a JSON array body as its first element (``[q1, q2]`` was q1, 201), and Python's ``json``
    raises ``ValueError`` for an integer of more than 4,300 digits (a 500): the body is decoded here first, with
    :func:`idleshare.parse.jsontext.decode` (NaN, huge numbers, lone surrogates refused, each naming its field)."""
    body = event.get("body")
    if not isinstance(body, str) or not body.strip():
        return None
    raw: str | bytes = body
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return proxy_response(
                400, error_body("the request body is not valid base64", [FieldError("", "not base64")])
            )
    try:
        document = jsontext.decode(raw, BODY)
    except InputError as exc:
        message = f"the {BODY} is not valid JSON: {exc.errors[0]}" if not exc.errors[0].loc else f"{exc}"
        return proxy_response(400, error_body(message, exc.errors))
    if document is None:
        message = "the request needs a JSON object as its body (got null)"
        return proxy_response(400, error_body(message, [FieldError("", message)]))
    if not isinstance(document, dict):
        kind = "an array" if isinstance(document, list) else show(document)
        message = f"the {BODY} must be a JSON object (got {kind}); send one request per object"
        return proxy_response(400, error_body(message, [FieldError("", message)]))
    return None


def _is_json(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() in ("", JSON)


def precheck(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The answer for a request that must not reach the router, or None.

    - 403 unless API Gateway's IAM authorization identified the caller (``requestContext.identity``
      ``userArn`` / ``caller``): defence in depth, the method's ``AWS_IAM`` authorization is the guard;
    - 413 for a body over ``names.API_MAX_BODY_BYTES``, before anything parses it;
    - 415 for a body sent with a content type that is not JSON (none at all is accepted as JSON);
    - 400 for a body that is not one JSON object idleshare can read (:func:`body_problem`)."""
    context = event.get("requestContext")
    identity = context.get("identity") if isinstance(context, Mapping) else None
    if not isinstance(identity, Mapping) or not (identity.get("userArn") or identity.get("caller")):
        return proxy_response(
            403, error_body("the request was not authorized by IAM (sign it with SigV4, service execute-api)")
        )
    size = body_size(event)
    if size > names.API_MAX_BODY_BYTES:
        return proxy_response(
            413, error_body(f"the request body is {size} bytes; at most {names.API_MAX_BODY_BYTES} are accepted")
        )
    content_type = _header(event, "content-type")
    if size and content_type is not None and not _is_json(content_type):
        return proxy_response(415, error_body(f"the request body must be JSON (Content-Type {content_type!r})"))
    return body_problem(event) if size else None


def _param_message(error: Mapping[str, Any]) -> str:
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "required parameter is missing"
    got = error.get("input")
    shown = f" (got {json.dumps(got) if isinstance(got, str) else repr(got)})" if got is not None else ""
    text = {
        "greater_than_equal": f"must be >= {ctx.get('ge')}",
        "less_than_equal": f"must be <= {ctx.get('le')}",
        "int_parsing": "must be an integer",
        "int_type": "must be an integer",
        "string_too_short": f"must be at least {ctx.get('min_length')} characters",
        "string_too_long": f"must be at most {ctx.get('max_length')} characters",
        "literal_error": f"must be one of {ctx.get('expected', '')}".replace("'", ""),
    }.get(kind, str(error.get("msg", "invalid value")))
    return text + shown


def validation_errors(errors: Sequence[Any]) -> tuple[str, list[FieldError]]:
    """Powertools' request validation errors (pydantic's shape) -> a 400 message and the fields."""
    fields: list[FieldError] = []
    message = "invalid request"
    for error in errors:
        loc = [str(p) for p in error.get("loc", ())]
        kind = error.get("type", "")
        where, rest = (loc[0], loc[1:]) if loc else ("", [])
        if where == "body":
            if kind == "json_invalid":
                detail = (error.get("ctx") or {}).get("error", "")
                message = f"the request body is not valid JSON: {detail}".rstrip(": ")
            elif kind == "missing":
                message = "the request needs a JSON object as its body"
            else:
                message = "the request body must be a JSON object"
            fields.append(FieldError("", message))
            continue
        fields.append(FieldError(".".join(rest) or where, _param_message(error)))
        message = "invalid " + ("query parameter" if where == "query" else f"{where} parameter")
    if len(fields) == 1 and fields[0].loc:
        message = f"{message} {fields[0].loc}: {fields[0].message}"
    return message, fields
