"""idleshare's errors: one taxonomy for every layer. Adapters translate SDK / HTTP errors into these
(``adapters/errors.py``, ``adapters/kube.py``, ``adapters/store/errors.py``), services raise and handle them, the
entry points answer them. It imports nothing of idleshare's, so every layer can import it (beside ``names`` and
``timings``).

Two questions, each answered by the class alone:

- **Retry?** Every error is a :class:`RetryableError` (the same call, or the same step from a fresh read, may
  succeed later: an SQS record is handed back, a watch relists) or a :class:`PermanentError` (retrying cannot help
  until someone changes something: the record is consumed, the failure recorded and reported), never both. There is
  no ``retryable`` attribute: ``isinstance(exc, RetryableError)``.
- **Whose fault?** A :class:`DomainOutcome` is an answer about idleshare's own state from a call that worked: the
  item is not there, it changed meanwhile, the name is taken, the object is someone else's, Kueue is not installed.
  Every other error is an **infrastructure failure**: the call did not get its answer (throttled, timed out, 5xx,
  unreachable, a token or a resource version expired, refused as forbidden or malformed, a stored item unreadable).
"""

from __future__ import annotations


class IdleshareError(Exception):
    """Base of every error below. ``operation``: what was being done (``"put_pool"``, ``"apply ClusterQueue/a"``);
    ``status``: the HTTP status the other side answered, when there was one."""

    def __init__(self, message: str, *, operation: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.operation = operation
        self.status = status


class RetryableError(IdleshareError):
    """The same call (or step, from a fresh read) may succeed later: throttling, timeouts, 5xx, connection errors,
    a lost race."""


class PermanentError(IdleshareError):
    """Retrying the same call cannot help: bad request, forbidden, an invalid object or stored item, something that
    is not idleshare's."""


class DomainOutcome(IdleshareError):
    """Marks an answer about idleshare's own state (not a failure to get one); each is also retryable or
    permanent."""


# ------------------------------------------------------------------------------ domain outcomes
class ConflictError(DomainOutcome, RetryableError):
    """A conditional write lost a race (stale generation or version, a transaction cancelled by a condition):
    re-read and decide again. Retryable: the retry reads what won the race (a recompute, a watch checkpoint)."""


class WatchTakenOverError(ConflictError):
    """A node watch checkpoint was refused: a newer watcher invocation holds the cluster's watch (its lease) and
    resumes from the last checkpoint; the older one stops."""


class NotFoundError(DomainOutcome, PermanentError):
    """The item / object does not exist."""


class AlreadyExistsError(DomainOutcome, PermanentError):
    """A create (or rename) collides with an existing item; ``field`` names what is taken (``Name``,
    ``ComputeQuotaTarget.TeamName``, ``SchedulerConfig``, ``eks_cluster_name``, ``hyperpod_cluster_arn``).
    SageMaker answers ``ConflictException`` here; retrying cannot help."""

    def __init__(self, message: str, *, field: str, operation: str = "") -> None:
        super().__init__(message, operation=operation, status=409)
        self.field = field


class StaleVersionError(DomainOutcome, PermanentError):
    """An update carried a TargetVersion that is not the current one: the same request cannot succeed (the caller
    reads the current version, ``current_version``, and decides again)."""

    def __init__(self, message: str, *, current_version: int) -> None:
        super().__init__(message, operation="update", status=409)
        self.current_version = current_version


class FieldOwnershipError(DomainOutcome, PermanentError):
    """Server-side apply refused: another field manager owns fields idleshare wants to set (HTTP 409 with
    ``FieldManagerConflict`` causes). Not retried: idleshare does not fight another controller for a field
    unless the cluster is configured to take ownership (``field_ownership: Take``)."""

    def __init__(self, message: str, *, operation: str, managers: tuple[str, ...], fields: tuple[str, ...]) -> None:
        super().__init__(message, operation=operation, status=409)
        self.managers = managers
        self.fields = fields


class ForeignObjectError(DomainOutcome, PermanentError):
    """An object of the name idleshare wants exists and idleshare did not record creating it: it is someone else's
    and is neither written nor ever deleted, in either field-ownership mode. ``kind``/``name`` (``namespace``) name
    it."""

    def __init__(
        self,
        message: str,
        *,
        operation: str,
        kind: str,
        name: str,
        namespace: str = "",
        uid: str = "",
        marked: bool = False,
    ) -> None:
        super().__init__(message, operation=operation, status=409)
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.uid = uid
        """The existing object's uid (when the create read it)."""
        self.marked = marked
        """It carries idleshare's creation marker: a copy, or idleshare's own create whose answer was lost (which of
        the two only the record says: :mod:`idleshare.domain.ownership`)."""


class KueueNotInstalledError(DomainOutcome, PermanentError):
    """The API server serves no version of ``kueue.x-k8s.io`` that idleshare writes a kind in (Kueue not installed,
    its CRDs not established, or a Kueue newer than idleshare knows): nothing can be written; the recompute keeps
    the last pool and names it (``code``: ``KueueNotInstalled``)."""

    code = "KueueNotInstalled"


# ------------------------------------------------------------------------------ infrastructure failures
# (besides RetryableError and PermanentError themselves, which the translators raise for what needs no class)
class ResourceExpiredError(RetryableError):
    """HTTP 410 Gone: the ``resourceVersion`` a watch resumed from (or a list's ``continue`` token) is older than
    what the API server still keeps. The same request cannot succeed, the same step can: list again, then watch
    from the list's ``resourceVersion`` (the watcher does at once; a recompute retried lists afresh)."""


class AuthExpiredError(RetryableError):
    """The API server refused the bearer token (HTTP 401) twice: the cached token is already invalidated, so the
    next attempt signs a new one."""


class NamespaceTerminatingError(PermanentError):
    """The API server refused to create an object in a namespace that is being deleted (HTTP 403 with a
    ``NamespaceTerminating`` cause): nothing can be created there until the namespace is gone (a finalizer may hold
    it for ever). ``namespace`` names it. Permanent for this object only: the recompute names it (issue
    ``NamespaceTerminating``) and writes everything else."""

    def __init__(self, message: str, *, operation: str, namespace: str, status: int | None = 403) -> None:
        super().__init__(message, operation=operation, status=status)
        self.namespace = namespace


class ClusterReadError(RetryableError):
    """A recompute could not observe the cluster (its nodes, Kueue's API versions, the DaemonSets or pods headroom
    reads): not an observation of zero capacity. The last pool is kept and the failure recorded on it; the request
    is retried (SQS) until the cluster answers."""
