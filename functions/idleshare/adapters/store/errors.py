"""The translation of DynamoDB's errors into idleshare's (:mod:`idleshare.errors`): failed conditions, cancelled
transactions (:class:`TransactionCancelledError`, the store's own) and a missing table here, everything else by
:func:`idleshare.adapters.errors.translate_aws`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from idleshare.adapters.errors import translate_aws
from idleshare.errors import ConflictError, IdleshareError, PermanentError, RetryableError

_RETRYABLE_REASONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)
"""Cancellation reasons of a transaction that make it retryable."""


class TransactionCancelledError(ConflictError):
    """A conditional check of a transaction failed; ``reasons`` holds one code per action
    (``"None"`` where that action's condition held)."""

    def __init__(self, message: str, *, reasons: tuple[str, ...], operation: str = "") -> None:
        super().__init__(message, operation=operation, status=400)
        self.reasons = reasons


def translate(exc: BaseException, *, operation: str, table: str) -> IdleshareError:
    """A botocore error -> the domain error (see the package docstring): DynamoDB's failed conditions,
    cancelled transactions and a missing table here, everything else by
    :func:`~idleshare.adapters.errors.translate_aws` (throttling, 5xx, connection errors, credentials)."""
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        text = str(error.get("Message", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        message = f"{operation} on table {table!r}: {code}: {text}"
        if code == "ConditionalCheckFailedException":
            return ConflictError(message, operation=operation, status=status)
        if code == "TransactionCanceledException":
            reasons = _cancellation_reasons(exc.response, text)
            if "ConditionalCheckFailed" in reasons:
                return TransactionCancelledError(message, reasons=reasons, operation=operation)
            if any(r in _RETRYABLE_REASONS for r in reasons):
                return RetryableError(message, operation=operation, status=status)
            return PermanentError(message, operation=operation, status=status)
        if code == "ResourceNotFoundException":
            return PermanentError(
                f"{operation}: table {table!r} does not exist (or is not ACTIVE): {text}",
                operation=operation,
                status=status,
            )
    return translate_aws(exc, operation=operation, subject=f"on table {table!r}")


def _cancellation_reasons(response: Mapping[str, Any], message: str) -> tuple[str, ...]:
    listed = response.get("CancellationReasons")
    if isinstance(listed, list) and listed:
        return tuple(str(r.get("Code", "None")) if isinstance(r, dict) else "None" for r in listed)
    # "Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]"
    m = re.search(r"\[([^\]]*)\]\s*$", message)
    if not m:
        return ()
    return tuple(part.strip() for part in m.group(1).split(","))
