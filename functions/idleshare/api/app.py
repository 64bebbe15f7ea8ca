"""Admin API Lambda: API Gateway REST proxy (IAM auth) -> Powertools ``APIGatewayRestResolver``.

The routes (docs/operations.md, "Admin HTTP API"): compute quotas in SageMaker's shapes,
the scheduler config, the read side (pool, grants with their derivation, history, excluded nodes) and
recalculation requests with their receipts, pausing and resuming a cluster; ``/openapi.json`` and ``/swagger`` serve the generated
OpenAPI document. Each route is one call into :class:`idleshare.service.admin.Admin`; errors are mapped
to statuses here, once (:mod:`idleshare.api.http` has the body shape), never a traceback to the caller.

Imports stay light for the cold start: no lightkube, no Kubernetes adapter; the store and the bus
client come from ``idleshare.runtime.wiring`` on the first request (tests ``install()`` their own).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, cast

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.logging import correlation_paths
from pydantic import BeforeValidator

from idleshare import names, timings
from idleshare.api.http import JSON, error_body, precheck, validation_errors
from idleshare.api.schemas import CreateQuotaBody, PauseBody, RecalculateBody, SchedulerConfigBody, UpdateQuotaBody
from idleshare.errors import (
    AlreadyExistsError,
    ConflictError,
    IdleshareError,
    NotFoundError,
    RetryableError,
    StaleVersionError,
)
from idleshare.pages import (
    EXCLUDED_PAGE_MAX,
    GRANTS_PAGE_MAX,
    HISTORY_PAGE_DEFAULT,
    HISTORY_PAGE_MAX,
    ISSUES_PAGE_MAX,
    POOL_EXCLUDED_SAMPLE,
    POOL_ISSUES_SAMPLE,
    POOL_TEAMS_SAMPLE,
    QUOTAS_PAGE_MAX,
    USAGE_PAGE_MAX,
)
from idleshare.parse import requests
from idleshare.parse.errors import FieldError, InputError
from idleshare.parse.requests import MAX_INT32
from idleshare.runtime.observability import logger, tracer
from idleshare.runtime.wiring import dependencies
from idleshare.service.admin import Admin
from idleshare.service.paging import BadRequestError

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

F = TypeVar("F", bound=Callable[..., Any])
app = APIGatewayRestResolver(enable_validation=True)
OPENAPI: dict[str, Any] = {
    "title": "idleshare admin API",
    "version": "1",
    "description": (
        "Compute quotas (SageMaker's CreateComputeQuota / UpdateComputeQuota shapes, versioned with "
        "TargetVersion), the scheduler config, the lendable pool and each team's grants with their "
        "derivation, history, and recalculation requests. Every request is signed with SigV4 (service "
        "execute-api). Errors: {message, errors: [{field, message}]}, plus CurrentVersion on a stale 409."
    ),
}
app.configure_openapi(**OPENAPI)


def _admin() -> Admin:
    deps = dependencies()
    return Admin(deps.store, deps.publisher)


def _json(status: int, body: Any) -> Response[Any]:
    return Response(status_code=status, content_type=JSON, body=body)


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                "required": ["field", "message"],
            },
        },
        "CurrentVersion": {"type": "integer", "description": "on a 409 for a stale TargetVersion"},
    },
    "required": ["message", "errors"],
}


def _responses(*statuses: int) -> dict[int, OpenAPIResponse]:
    text = {
        200: "OK",
        201: "Created: the Describe shape",
        202: "Accepted: the request is on idleshare's bus",
        204: "Done (no body)",
        400: "Malformed JSON, a body that is not an object, or a bad query parameter",
        404: "Unknown cluster, or no such item",
        409: "Stale TargetVersion (CurrentVersion names the current one), or the name / team is taken",
        413: "Body over 64 KiB",
        422: "Field validation failed: errors names each field",
    }
    out: dict[int, OpenAPIResponse] = {}
    for status in statuses:
        out[status] = {"description": text[status]}
        if status >= 400:
            out[status]["content"] = {JSON: {"schema": ERROR_SCHEMA}}
    return out


Cluster = Annotated[str, Path(description="idleshare's cluster id (GET /clusters lists them)", max_length=128)]
QuotaName = Annotated[str, Path(description="the compute quota's Name", max_length=255)]


def _digits_only(value: object) -> object:
    """An integer query parameter as digits only: ``1.0``, ``+1``, `` 1`` or ``１`` are no version or count (pydantic
    would read each as 1)."""
    if isinstance(value, str) and not _DIGITS.fullmatch(value):
        raise ValueError("must be an integer written in digits only (0-9)")
    return value


_DIGITS = re.compile(r"[0-9]+")
Digits = BeforeValidator(_digits_only)
TargetVersionQuery = Annotated[
    int | None,
    Digits,
    Query(alias="TargetVersion", ge=0, le=MAX_INT32, description="only if still at this version (else 409)"),
]
NextToken = Annotated[str | None, Query(alias="NextToken", max_length=8192, description="from the previous page")]
TeamsLimit = Annotated[
    int, Digits, Query(ge=1, le=GRANTS_PAGE_MAX, description=f"at most this many teams (1..{GRANTS_PAGE_MAX})")
]
NodesLimit = Annotated[
    int, Digits, Query(ge=1, le=EXCLUDED_PAGE_MAX, description=f"at most this many nodes (1..{EXCLUDED_PAGE_MAX})")
]
IssuesLimit = Annotated[
    int, Digits, Query(ge=1, le=ISSUES_PAGE_MAX, description=f"at most this many issues (1..{ISSUES_PAGE_MAX})")
]
UsageLimit = Annotated[
    int,
    Digits,
    Query(ge=1, le=USAGE_PAGE_MAX, description=f"at most this many teams, or rows and gaps (1..{USAGE_PAGE_MAX})"),
]
READ = _responses(200, 400, 404)
WRITE = _responses(200, 400, 404, 409, 413, 422)


def _read(path: str, summary: str, tag: str, description: str | None = None) -> Callable[[F], F]:
    """A GET route: 200, or 400 / 404 with the error body."""
    return app.get(path, summary=summary, description=description, tags=[tag], responses=READ)


# ---------------------------------------------------------------------------------------- clusters
@app.get("/clusters", summary="The governed clusters", tags=["clusters"], responses=_responses(200))
def list_clusters() -> dict[str, Any]:
    return _admin().list_clusters()


# ---------------------------------------------------------------------------------- compute quotas
@app.post(
    "/clusters/<cluster>/compute-quotas",
    summary="Create a compute quota (CreateComputeQuota)",
    tags=["compute quotas"],
    responses=_responses(201, 400, 404, 409, 413, 422),
)
def create_quota(cluster: Cluster, body: Annotated[CreateQuotaBody, Body()]) -> Response[Any]:
    return _json(201, _admin().create_quota(cluster, requests.parse(requests.CreateQuota, body)))


@_read("/clusters/<cluster>/compute-quotas", "List compute quotas (ListComputeQuotas)", "compute quotas")
def list_quotas(
    cluster: Cluster,
    name_contains: Annotated[str | None, Query(alias="NameContains", min_length=1, max_length=63)] = None,
    activation_state: Annotated[Literal["Enabled", "Disabled"] | None, Query(alias="ActivationState")] = None,
    max_results: Annotated[int, Digits, Query(alias="MaxResults", ge=1, le=QUOTAS_PAGE_MAX)] = QUOTAS_PAGE_MAX,
    next_token: NextToken = None,
) -> dict[str, Any]:
    return _admin().list_quotas(
        cluster,
        name_contains=name_contains,
        activation_state=activation_state,
        max_results=max_results,
        next_token=next_token,
    )


@_read("/clusters/<cluster>/compute-quotas/<name>", "Describe a compute quota (DescribeComputeQuota)", "compute quotas")
def describe_quota(cluster: Cluster, name: QuotaName) -> dict[str, Any]:
    return _admin().describe_quota(cluster, name)


@app.put(
    "/clusters/<cluster>/compute-quotas/<name>",
    summary="Update a compute quota (UpdateComputeQuota, TargetVersion required)",
    tags=["compute quotas"],
    responses=WRITE,
)
def update_quota(cluster: Cluster, name: QuotaName, body: Annotated[UpdateQuotaBody, Body()]) -> dict[str, Any]:
    return _admin().update_quota(cluster, name, requests.parse(requests.UpdateQuota, body))


@app.delete(
    "/clusters/<cluster>/compute-quotas/<name>",
    summary="Delete a compute quota (DeleteComputeQuota)",
    tags=["compute quotas"],
    responses=_responses(204, 400, 404, 409),
)
def delete_quota(cluster: Cluster, name: QuotaName, version: TargetVersionQuery = None) -> Response[Any]:
    _admin().delete_quota(cluster, name, version)
    return Response(status_code=204)


# -------------------------------------------------------------------------------- scheduler config
@_read(
    "/clusters/<cluster>/scheduler-config",
    "The scheduler config (the defaults, version 0, when none is stored)",
    "scheduler config",
)
def get_scheduler_config(cluster: Cluster) -> dict[str, Any]:
    return _admin().get_scheduler_config(cluster)


@app.put(
    "/clusters/<cluster>/scheduler-config",
    summary="Create (no TargetVersion) or update the scheduler config",
    tags=["scheduler config"],
    responses=WRITE,
)
def put_scheduler_config(cluster: Cluster, body: Annotated[SchedulerConfigBody, Body()]) -> dict[str, Any]:
    return _admin().put_scheduler_config(cluster, requests.parse(requests.SchedulerConfigRequest, body))


@app.delete(
    "/clusters/<cluster>/scheduler-config",
    summary="Delete the scheduler config (back to the defaults)",
    tags=["scheduler config"],
    responses=_responses(204, 400, 404, 409),
)
def delete_scheduler_config(cluster: Cluster, version: TargetVersionQuery = None) -> Response[Any]:
    _admin().delete_scheduler_config(cluster, version)
    return Response(status_code=204)


# ---------------------------------------------------------------------------------------- read side
@_read(
    "/clusters/<cluster>/pool",
    "The current lendable pool",
    "pool",
    f"The pool document; `excludedNodes` holds the first {POOL_EXCLUDED_SAMPLE} by name, `excludedSummary` counts "
    "them all (per reason) and names the route that lists them: GET /clusters/{cluster}/excluded-nodes. `teams` "
    f"holds the first {POOL_TEAMS_SAMPLE} teams by name, `teamsSummary` counts them all and names GET "
    f"/clusters/{{cluster}}/grants, which pages through them. `issues` holds the first {POOL_ISSUES_SAMPLE} issues, "
    "`issuesSummary` counts them all (per code) and names GET /clusters/{cluster}/issues. Each sample stops early "
    "when it would be too large to answer.",
)
def get_pool(cluster: Cluster) -> dict[str, Any]:
    return _admin().pool(cluster)


@_read(
    "/clusters/<cluster>/grants",
    "Every team's limits with their derivation (why), sorted by team, paginated",
    "pool",
    "A page of `teams` ({team: grant}) sorted by team name; `total` counts them all, `generation` names the pool "
    "the page was read from. `NextToken` in the answer continues with the next page.",
)
def get_grants(cluster: Cluster, limit: TeamsLimit = GRANTS_PAGE_MAX, next_token: NextToken = None) -> dict[str, Any]:
    return _admin().grants(cluster, limit=limit, next_token=next_token)


@_read("/clusters/<cluster>/grants/<team>", "One team's limits and why", "pool")
def get_grant(cluster: Cluster, team: Annotated[str, Path(max_length=63)]) -> dict[str, Any]:
    return _admin().grant(cluster, team)


@_read("/clusters/<cluster>/history", "Past generations, newest first", "pool")
def get_history(
    cluster: Cluster,
    limit: Annotated[int, Digits, Query(ge=1, le=HISTORY_PAGE_MAX)] = HISTORY_PAGE_DEFAULT,
    next_token: NextToken = None,
) -> dict[str, Any]:
    return _admin().history(cluster, limit=limit, next_token=next_token)


@_read(
    "/clusters/<cluster>/excluded-nodes",
    "Nodes left out of the capacity, with the reason (sorted by name, paginated)",
    "pool",
    "A page of `excludedNodes` ({node: reason}), sorted by node name; `total` and `byReason` count them all. "
    "`NextToken` in the answer continues with the next page.",
)
def get_excluded_nodes(
    cluster: Cluster, limit: NodesLimit = EXCLUDED_PAGE_MAX, next_token: NextToken = None
) -> dict[str, Any]:
    return _admin().excluded_nodes(cluster, limit=limit, next_token=next_token)


@_read(
    "/clusters/<cluster>/issues",
    "The pool's issues (paginated)",
    "pool",
    "A page of `issues` in the recompute's order; `total` and `byCode` count them all, `generation` names the pool "
    "the page was read from. `NextToken` in the answer continues with the next page.",
)
def get_issues(cluster: Cluster, limit: IssuesLimit = ISSUES_PAGE_MAX, next_token: NextToken = None) -> dict[str, Any]:
    return _admin().issues(cluster, limit=limit, next_token=next_token)


# -------------------------------------------------------------------------------------- recalculate
@app.post(
    "/clusters/<cluster>/recalculate",
    summary="Request a recalculation (202); with waitSeconds, wait for its receipt (200)",
    tags=["recalculation"],
    responses=_responses(200, 202, 400, 404, 413, 422),
)
def recalculate(
    cluster: Cluster,
    wait_seconds: Annotated[int, Digits, Query(alias="waitSeconds", ge=0, le=timings.API_MAX_WAIT_SECONDS)] = 0,
    body: Annotated[RecalculateBody | None, Body()] = None,
) -> Response[Any]:
    request = None if body is None else requests.parse(requests.Recalculate, body)
    answer = _admin().recalculate(cluster, request, wait_seconds)
    return _json(200 if answer.done else 202, answer.body)


@_read(
    "/clusters/<cluster>/recalculations/<request_id>",
    "The receipt of a recalculation request (404 until the recompute has run)",
    "recalculation",
)
def get_recalculation(cluster: Cluster, request_id: Annotated[str, Path(max_length=128)]) -> dict[str, Any]:
    return _admin().receipt(cluster, request_id)


# ------------------------------------------------------------------------------------------- pause
def _caller() -> str:
    """Who is calling: the IAM identity API Gateway authorized (``precheck`` refused a request without one)."""
    identity = app.current_event.raw_event.get("requestContext", {}).get("identity") or {}
    return str(identity.get("userArn") or identity.get("caller") or "unknown")


def _pause_route(path: str, summary: str) -> Callable[[F], F]:
    return app.post(path, summary=summary, tags=["pause"], responses=_responses(200, 400, 404, 409, 413, 422))


@_pause_route(
    "/clusters/<cluster>/pause",
    "Stop governing the cluster, leaving its Kueue objects as they are (a paused cluster: its state, unchanged)",
)
def pause(cluster: Cluster, body: Annotated[PauseBody | None, Body()] = None) -> dict[str, Any]:
    request = None if body is None else requests.parse(requests.Pause, body)
    return _admin().pause(cluster, request, _caller())


@_pause_route(
    "/clusters/<cluster>/resume",
    "Govern the cluster again: a recompute is requested at once (requestId: its receipt)",
)
def resume(cluster: Cluster, body: Annotated[PauseBody | None, Body()] = None) -> dict[str, Any]:
    request = None if body is None else requests.parse(requests.Pause, body)
    return _admin().resume(cluster, request, _caller())


# ------------------------------------------------------------------------------------------- usage
@_read(
    "/clusters/<cluster>/usage",
    "Usage read back from Kueue: the latest sample, or allocated / borrowed hours over a period",
    "usage",
    "Without from/to: the latest sample (per flavor capacity, pool, inUse, borrowed, idle; per team nominal, inUse, "
    "borrowed, lent, workloads, preemptions; idleWhilePending). With from and to (ISO 8601): allocatedHours and "
    "borrowedHours per bucket (granularity hour or day), team, flavor and resource, and the gaps no sample covers, "
    "with their reason. Paged (`limit`, `NextToken`): the latest sample by team (`teamsTotal` counts them, each page "
    "names `sampledAt`), a period by row then gap.",
)
def get_usage(
    cluster: Cluster,
    start: Annotated[str | None, Query(alias="from", max_length=64, description="ISO 8601, inclusive")] = None,
    end: Annotated[str | None, Query(alias="to", max_length=64, description="ISO 8601, exclusive")] = None,
    granularity: Annotated[Literal["hour", "day"], Query()] = "day",
    limit: UsageLimit = USAGE_PAGE_MAX,
    next_token: NextToken = None,
) -> dict[str, Any]:
    return _admin().usage(cluster, start, end, granularity, limit=limit, next_token=next_token)


# --------------------------------------------------------------------------------------- the document
@cache
def openapi_json() -> str:
    return app.get_openapi_json_schema(**OPENAPI)


@app.get(names.API_OPENAPI_PATH, include_in_schema=False)
def openapi_document() -> Response[Any]:
    return _json(200, openapi_json())


app.enable_swagger(path=names.API_SWAGGER_PATH, **OPENAPI)


# ------------------------------------------------------------------------------------------- errors
def _on(exc_class: type[Exception]) -> Callable[[F], F]:
    """``app.exception_handler``, typed."""
    return cast(Callable[[F], F], app.exception_handler(exc_class))


@_on(RequestValidationError)
def _invalid_request(exc: RequestValidationError) -> Response[Any]:
    message, fields = validation_errors(exc.errors())
    return _json(400, error_body(message, fields))


@_on(RecursionError)
def _too_deep(exc: RecursionError) -> Response[Any]:
    return _json(400, error_body("the request body is nested too deeply", [FieldError("", "nested too deeply")]))


@_on(BadRequestError)
def _bad_request(exc: BadRequestError) -> Response[Any]:
    return _json(400, error_body(_summary(exc), exc.errors))


@_on(InputError)
def _unprocessable(exc: InputError) -> Response[Any]:
    return _json(422, error_body(_summary(exc), exc.errors))


@_on(NotFoundError)
def _not_found_item(exc: NotFoundError) -> Response[Any]:
    return _json(404, error_body(str(exc)))


@_on(StaleVersionError)
def _stale(exc: StaleVersionError) -> Response[Any]:
    field = FieldError("TargetVersion", f"the current version is {exc.current_version}")
    return _json(409, error_body(str(exc), [field], CurrentVersion=exc.current_version))


@_on(ConflictError)
def _conflict(exc: ConflictError) -> Response[Any]:
    return _json(409, error_body(f"{exc}; read it again and retry"))


@_on(IdleshareError)
def _idleshare_error(exc: IdleshareError) -> Response[Any]:
    if isinstance(exc, AlreadyExistsError):
        return _json(409, error_body(str(exc), [FieldError(exc.field, "already taken")]))
    if isinstance(exc, RetryableError):
        logger.warning(
            "dependency unavailable", extra={"error": str(exc), "operation": exc.operation, "status": exc.status}
        )
        response = _json(503, error_body(f"temporarily unavailable, retry (request id {_request_id()})"))
        response.headers["Retry-After"] = "1"
        return response
    return _internal(exc)


@_on(Exception)
def _internal(exc: Exception) -> Response[Any]:
    logger.exception("request failed", extra={"error_type": type(exc).__name__})
    return _json(500, error_body(f"internal error (request id {_request_id()}); the details are in the logs"))


@app.not_found
def _no_route(exc: Exception) -> Response[Any]:
    event = app.current_event
    return _json(404, error_body(f"no route for {event.http_method} {event.path}"))


def _summary(exc: InputError) -> str:
    if len(exc.errors) == 1:
        return str(exc.errors[0])
    return f"{len(exc.errors)} invalid fields"


def _request_id() -> str:
    try:
        return str(app.current_event.request_context.request_id)
    except (AttributeError, KeyError, TypeError):
        return "unknown"


# ------------------------------------------------------------------------------------------ handler
@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    refused = precheck(event)
    if refused is not None:
        logger.warning("request refused", extra={"status": refused["statusCode"], "path": event.get("path")})
        return refused
    return app.resolve(event, context)
