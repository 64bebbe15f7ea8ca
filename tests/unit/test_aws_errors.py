"""The one classification of AWS SDK errors (idleshare.adapters.errors.translate_aws), shared by the store,
the EKS connector, the recompute queue and the event bus."""

from __future__ import annotations

import pytest
from botocore import exceptions as sdk
from botocore.exceptions import ClientError

from idleshare.adapters import aws
from idleshare.adapters.errors import RETRYABLE_CODES, translate_aws
from idleshare.errors import IdleshareError, NotFoundError, PermanentError, RetryableError


def client_error(code: str, status: int = 400) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (client_error("ThrottlingException"), RetryableError),
        (client_error("TooManyRequestsException", 429), RetryableError),
        (client_error("SomethingNew", 429), RetryableError),
        (client_error("ProvisionedThroughputExceededException"), RetryableError),
        (client_error("LimitExceededException"), RetryableError),
        (client_error("InternalServerError", 500), RetryableError),
        (client_error("ServiceUnavailable", 503), RetryableError),
        (client_error("SomethingNew", 502), RetryableError),
        (client_error("ExpiredTokenException"), RetryableError),
        (client_error("TransactionConflictException"), RetryableError),
        (client_error("AccessDeniedException", 403), PermanentError),
        (client_error("AccessDenied", 503), PermanentError),
        (client_error("ValidationException"), PermanentError),
        (client_error("ResourceNotFoundException"), NotFoundError),
        (sdk.EndpointConnectionError(endpoint_url="http://x"), RetryableError),
        (sdk.ReadTimeoutError(endpoint_url="http://x"), RetryableError),
        (sdk.ConnectionClosedError(endpoint_url="http://x"), RetryableError),
        (sdk.CredentialRetrievalError(provider="container-role", error_msg="timeout"), RetryableError),
        (sdk.NoCredentialsError(), PermanentError),
        (sdk.ParamValidationError(report="bad"), PermanentError),
        (ValueError("boom"), PermanentError),
    ],
)
def test_translate_aws(exc: Exception, kind: type[IdleshareError]) -> None:
    out = translate_aws(exc, operation="sqs:SendMessage", subject="queue 'q'")
    assert type(out) is kind and out.operation == "sqs:SendMessage"
    # the response's HTTP status, which the API's 503 warning logs (none when no response came)
    assert out.status == (exc.response["ResponseMetadata"]["HTTPStatusCode"] if isinstance(exc, ClientError) else None)
    assert str(out).startswith("sqs:SendMessage queue 'q': ")
    error = RetryableError("x")  # an adapter error is returned as it is
    assert translate_aws(error, operation="op") is error


def test_the_queue_and_bus_translate_with_the_same_classification() -> None:
    for code in sorted(RETRYABLE_CODES):
        assert isinstance(aws.translate(client_error(code), "events:PutEvents"), RetryableError), code
    assert type(aws.translate(client_error("AccessDeniedException", 403), "events:PutEvents")) is PermanentError
    bug = TypeError("not an SDK error")
    assert aws.translate(bug, "events:PutEvents") is bug  # anything else unchanged
