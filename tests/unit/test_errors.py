"""The one error taxonomy (idleshare.errors): retryable or permanent is decided by class only, for every error
class the package defines, and a batch hands back what is retryable and consumes what is permanent."""

from __future__ import annotations

import importlib
import json
import pkgutil

import pytest

import idleshare
from idleshare import errors, timings
from idleshare.adapters.sqs_records import QueuedRecord
from tests.fakes import batch


def every_error_class() -> list[type[errors.IdleshareError]]:
    """Every subclass of IdleshareError that any module of the package defines (each module imported)."""
    for module in pkgutil.walk_packages(idleshare.__path__, "idleshare."):
        importlib.import_module(module.name)
    found: list[type[errors.IdleshareError]] = []
    todo: list[type[errors.IdleshareError]] = [errors.IdleshareError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(c for c in cls.__subclasses__() if c not in found)
    return found


def test_every_error_is_retryable_or_permanent_by_class_alone():
    classes = every_error_class()
    assert len(classes) > 15  # the package's own: the store's, the batch's, the apply's, the watcher's too
    for cls in classes:
        # no class is both; every class that nothing refines is one of them
        assert not (issubclass(cls, errors.RetryableError) and issubclass(cls, errors.PermanentError)), cls
        if not cls.__subclasses__():
            assert issubclass(cls, errors.RetryableError | errors.PermanentError), f"{cls.__qualname__} is neither"
        # and none answers "retryable?" by an attribute that could disagree with its class
        assert not hasattr(cls, "retryable"), cls


@pytest.mark.parametrize(
    ("cls", "retryable", "domain"),
    [
        (errors.ConflictError, True, True),  # a lost race: re-read and decide again
        (errors.ResourceExpiredError, True, False),  # the step, from a fresh list
        (errors.AuthExpiredError, True, False),
        (errors.ClusterReadError, True, False),
        (errors.NotFoundError, False, True),
        (errors.StaleVersionError, False, True),
        (errors.ForeignObjectError, False, True),
        (errors.KueueNotInstalledError, False, True),
    ],
)
def test_where_each_error_sits(cls, retryable, domain):
    assert issubclass(cls, errors.RetryableError) is retryable
    assert issubclass(cls, errors.PermanentError) is not retryable
    assert issubclass(cls, errors.DomainOutcome) is domain


def error(cls: type[errors.IdleshareError]) -> errors.IdleshareError:
    if cls is errors.ForeignObjectError:
        return errors.ForeignObjectError(
            "ClusterQueue/a is not ours", operation="create", kind="ClusterQueue", name="a"
        )
    return cls(f"{cls.__name__} in a test", operation="test")


@pytest.mark.parametrize(
    ("cls", "handed_back"),
    [
        (errors.ConflictError, True),
        (errors.ResourceExpiredError, True),
        (errors.AuthExpiredError, True),
        (errors.RetryableError, True),
        (errors.NotFoundError, False),
        (errors.ForeignObjectError, False),
        (errors.KueueNotInstalledError, False),
        (errors.PermanentError, False),
    ],
)
def test_a_batch_hands_back_a_retryable_failure_and_consumes_a_permanent_one(cluster, cls, handed_back):
    # Given two records of cluster demo, whose recompute fails with ``cls``
    _, _, _, r = cluster

    def recompute(cluster_id: str, *, request_id: str | None = None):
        raise error(cls)

    r.recompute = recompute  # type: ignore[method-assign]
    records = [
        QueuedRecord("m1", json.dumps({"cluster": "demo"}), receipt_handle="h1", queue_arn="arn:q"),
        QueuedRecord("m2", json.dumps({"cluster": "demo"}), receipt_handle="h2", queue_arn="arn:q"),
    ]
    failed, returned = batch(r, records)
    # Then a retryable failure hands both records of the cluster back with their backoff; a permanent one consumes
    # them (recomputed once: the second is answered by the first's failure)
    if handed_back:
        delay = timings.retry_delay(1)
        assert (failed, returned) == (["m1", "m2"], [("arn:q", [("h1", delay), ("h2", delay)])])
    else:
        assert (failed, returned) == ([], [])
