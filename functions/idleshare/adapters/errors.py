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


class StaleVersionError(PermanentError):
    """An update carried a TargetVersion that is not the current one."""

    def __init__(self, message: str, *, current_version: int) -> None:
        super().__init__(message, operation="update", status=409)
        self.current_version = current_version


class AuthExpiredError(RetryableError):
    """The API server refused the bearer token (HTTP 401): sign a new token, then retry."""

    invalidate_token: bool = True
