"""The few errors adapters raise: every SDK / HTTP error is translated into one of these."""

from __future__ import annotations


class AdapterError(Exception):
    """Base: something outside idleshare failed."""

    retryable: bool = False

    def __init__(self, message: str, *, operation: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.operation = operation
        self.status = status


class RetryableError(AdapterError):
    """Throttling, timeouts, 5xx, connection errors: the same call may succeed later."""

    retryable = True


class ResourceExpiredError(RetryableError):
    """HTTP 410 Gone: the ``resourceVersion`` a watch resumed from (or a list's ``continue`` token) is older
    than what the API server still keeps. Retrying the same call cannot help: list again, then watch from
    the list's ``resourceVersion``."""


class PermanentError(AdapterError):
    """Bad request, forbidden, invalid object: retrying the same call cannot help."""


class NotFoundError(PermanentError):
    """The item / object does not exist."""


class ConflictError(AdapterError):
    """A conditional write lost a race (stale generation or version); re-read and decide again."""

    retryable = True


class FieldOwnershipError(PermanentError):
    """Server-side apply refused: another field manager owns fields idleshare wants to set (HTTP 409 with
    ``FieldManagerConflict`` causes). Not retried: idleshare does not fight another controller for a field
    unless the cluster is configured to take ownership (``field_ownership: Take``)."""

    def __init__(self, message: str, *, operation: str, managers: tuple[str, ...], fields: tuple[str, ...]) -> None:
        super().__init__(message, operation=operation, status=409)
        self.managers = managers
        self.fields = fields


class ForeignObjectError(PermanentError):
    """An object of the name idleshare wants exists and idleshare did not create it (no creation marker): it is
    someone else's and is neither written nor ever deleted, in either field-ownership mode. ``kind``/``name``
    (``namespace``) name it."""

    def __init__(self, message: str, *, operation: str, kind: str, name: str, namespace: str = "") -> None:
        super().__init__(message, operation=operation, status=409)
        self.kind = kind
        self.name = name
        self.namespace = namespace


class KueueNotInstalledError(PermanentError):
    """The API server serves no version of ``kueue.x-k8s.io`` that idleshare writes a kind in (Kueue not installed,
    its CRDs not established, or a Kueue newer than idleshare knows): nothing can be written; the recompute keeps
    the last pool and names it (``code``: ``KueueNotInstalled``)."""

    code = "KueueNotInstalled"


class StaleVersionError(PermanentError):
    """An update carried a TargetVersion that is not the current one."""

    def __init__(self, message: str, *, current_version: int) -> None:
        super().__init__(message, operation="update", status=409)
        self.current_version = current_version


class AuthExpiredError(RetryableError):
    """The API server refused the bearer token (HTTP 401) twice: the cached token is already invalidated, so the
    next attempt signs a new one."""


# ------------------------------------------------------------------------------ AWS SDK (botocore) errors
# The one classification of botocore's error codes, for every AWS call idleshare makes (DynamoDB, EKS, STS,
# SQS, EventBridge). Retryable: what botocore's own "standard" retry mode counts as throttled or transient
# (botocore/retries/standard.py), the services' 5xx codes, DynamoDB's transaction races, and expired
# credentials (the SDK or the Lambda runtime supplies fresh ones: the same call succeeds later).
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "RequestThrottled",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "SlowDown",
        "EC2ThrottledException",
    }
)
SERVER_ERROR_CODES = frozenset(
    {
        "InternalServerError",
        "InternalFailure",
        "InternalError",
        "InternalException",
        "ServerException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
    }
)
TRANSACTION_RACE_CODES = frozenset(
    {"TransactionConflict", "TransactionConflictException", "TransactionInProgressException"}
)
EXPIRED_CREDENTIAL_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "RequestExpired"})
RETRYABLE_CODES = THROTTLING_CODES | SERVER_ERROR_CODES | TRANSACTION_RACE_CODES | EXPIRED_CREDENTIAL_CODES
"""Every botocore error code that makes an AWS call retryable (any other code is permanent, unless its HTTP
status is 429 or 5xx)."""
ACCESS_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "AuthorizationError",
        "UnauthorizedOperation",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
    }
)
"""Permanent whatever the status: the role lacks the permission (or the key is not AWS's); retrying cannot help."""


def is_retryable_code(code: str, status: object = None) -> bool:
    """Whether an AWS error with this ``code`` (and HTTP ``status``) may succeed if the call is made again."""
    if code in ACCESS_DENIED_CODES:
        return False
    return code in RETRYABLE_CODES or (isinstance(status, int) and (status == 429 or status >= 500))


def translate_aws(exc: BaseException, *, operation: str, subject: str = "") -> AdapterError:
    """A botocore error -> an adapter error; the message starts with ``operation`` and ``subject`` (what was
    acted on, e.g. ``on table 'x'`` or ``cluster 'y'``), then the service's code and message.

    - an :class:`AdapterError` is returned as it is;
    - a ``ClientError``: ``ResourceNotFoundException`` -> :class:`NotFoundError`; a code or status
      :func:`is_retryable_code` accepts -> :class:`RetryableError`; anything else (validation, access denied)
      -> :class:`PermanentError`. ``status`` is the response's HTTP status;
    - connection errors and timeouts (botocore's ``ConnectionError`` / ``HTTPClientError``) and failures to
      fetch credentials from the instance / container metadata endpoint -> :class:`RetryableError`;
    - no (or partial) credentials, parameter validation and any other error -> :class:`PermanentError`.
    Callers with codes of their own (the store's failed conditions) map those first, then call this."""
    from botocore.exceptions import (
        ClientError,
        ConnectionError,
        CredentialRetrievalError,
        HTTPClientError,
        MetadataRetrievalError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    if isinstance(exc, AdapterError):
        return exc
    prefix = f"{operation} {subject}" if subject else operation
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = f"{prefix}: {code}: {error.get('Message', '') or exc}"
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "ResourceNotFoundException":
            return NotFoundError(message, operation=operation, status=status)
        if is_retryable_code(code, status):
            return RetryableError(message, operation=operation, status=status)
        return PermanentError(message, operation=operation, status=status)
    if isinstance(exc, ConnectionError | HTTPClientError | CredentialRetrievalError | MetadataRetrievalError):
        return RetryableError(f"{prefix}: {type(exc).__name__}: {exc}", operation=operation)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return PermanentError(f"{prefix}: no AWS credentials ({exc})", operation=operation)
    return PermanentError(f"{prefix}: {type(exc).__name__}: {exc}", operation=operation)


# ------------------------------------------------------------------------------ PutEvents entry errors
# PutEvents answers 200 and reports each entry's failure in the response (``Entries[i].ErrorCode``); the codes
# EventBridge documents as transient are retried, every other one (ValidationException, AccessDeniedException,
# MalformedDetail, InvalidArgument, NotAuthorizedForSourceException, ...) cannot succeed by sending it again.
PUT_EVENTS_RETRYABLE_CODES = (
    frozenset({"ThrottlingException", "InternalFailure", "InternalException", "ServiceUnavailable"})
    | THROTTLING_CODES
    | SERVER_ERROR_CODES
)


def put_events_entry_error(code: object, message: object, *, detail_type: str, failed: int = 1) -> AdapterError:
    """The error of a PutEvents entry that failed with ``code`` (:data:`PUT_EVENTS_RETRYABLE_CODES` ->
    :class:`RetryableError`, anything else -> :class:`PermanentError`); the message names the entry's
    detail-type, the code and EventBridge's message (and how many entries failed, when more than one)."""
    what = f"{failed} {detail_type!r} entries" if failed > 1 else f"the {detail_type!r} entry"
    text = f"events:PutEvents: {what} failed: {code or 'no error code'}: {message or ''}".rstrip(": ")
    if str(code or "") in PUT_EVENTS_RETRYABLE_CODES:
        return RetryableError(text, operation="events:PutEvents")
    return PermanentError(text, operation="events:PutEvents")
