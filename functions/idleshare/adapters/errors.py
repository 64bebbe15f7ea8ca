"""Translating AWS SDK (botocore) errors, and PutEvents' per-entry errors, into idleshare's
(:mod:`idleshare.errors`); the Kubernetes API's are translated by ``adapters/kube.py``, DynamoDB's conditions by
``adapters/store/errors.py``."""

from __future__ import annotations

from idleshare.errors import IdleshareError, NotFoundError, PermanentError, RetryableError

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


def translate_aws(exc: BaseException, *, operation: str, subject: str = "") -> IdleshareError:
    """A botocore error -> an idleshare error; the message starts with ``operation`` and ``subject`` (what was
    acted on, e.g. ``on table 'x'`` or ``cluster 'y'``), then the service's code and message.

    - an :class:`~idleshare.errors.IdleshareError` is returned as it is;
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

    if isinstance(exc, IdleshareError):
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


def put_events_entry_error(code: object, message: object, *, detail_type: str, failed: int = 1) -> IdleshareError:
    """The error of a PutEvents entry that failed with ``code`` (:data:`PUT_EVENTS_RETRYABLE_CODES` ->
    :class:`RetryableError`, anything else -> :class:`PermanentError`); the message names the entry's
    detail-type, the code and EventBridge's message (and how many entries failed, when more than one)."""
    what = f"{failed} {detail_type!r} entries" if failed > 1 else f"the {detail_type!r} entry"
    text = f"events:PutEvents: {what} failed: {code or 'no error code'}: {message or ''}".rstrip(": ")
    if str(code or "") in PUT_EVENTS_RETRYABLE_CODES:
        return RetryableError(text, operation="events:PutEvents")
    return PermanentError(text, operation="events:PutEvents")
