"""service/apply.py: a recompute's writes in dependency waves, several at once; failures named and aggregated,
conflicts left alone, counts exact (on a thread-safe recording fake; the real apiserver: tests/kube/test_parallel_apply.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from idleshare.errors import (
    AuthExpiredError,
    FieldOwnershipError,
    ForeignObjectError,
    IdleshareError,
    PermanentError,
    RetryableError,
)
from idleshare.service.apply import PermanentWritesFailed, RetryableWritesFailed, WritesFailed, describe, write


def obj(kind: str, name: str, namespace: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{kind}-{namespace}-{name}"}  # as listed: each has its uid
    if namespace:
        meta["namespace"] = namespace
    return {"kind": kind, "metadata": meta}


def cluster_objects(teams: int = 6) -> list[dict[str, Any]]:
    """As diff orders them: namespaces, flavors, the priority class, the cohort, then the queues."""
    out = [obj("Namespace", f"ns-{t}") for t in range(teams)]
    out += [obj("ResourceFlavor", f"flavor-{f}") for f in range(3)] + [obj("WorkloadPriorityClass", "high")]
    out += [obj("Cohort", "pool")]
    out += [obj("ClusterQueue", f"cq-{t}") for t in range(teams)]
    out += [obj("LocalQueue", f"lq-{t}", f"ns-{t}") for t in range(teams)]
    return out


class RecordingKube:
    """Records when each write starts and ends (thread-safe); ``fail``: describe(obj) -> the error to raise."""

    def __init__(self, *, delay: float = 0.01, concurrency: int = 4) -> None:
        self.write_concurrency = concurrency
        self.delay = delay
        self.fail: dict[str, Exception] = {}
        self.existing: set[str] = set()
        self.foreign: set[str] = set()  # describe(obj) of the objects someone else created
        self.calls: list[tuple[str, str]] = []  # ("apply" | "create", object), in the order they were sent
        self.lock = threading.Lock()
        self.log: list[tuple[str, str, float]] = []  # (event, object, time)
        self.in_flight = 0
        self.most_in_flight = 0

    def _write(self, what: str) -> None:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self.log.append(("start", what, time.monotonic()))
        try:
            time.sleep(self.delay)
            if what in self.fail:
                raise self.fail[what]
        finally:
            with self.lock:
                self.in_flight -= 1
                self.log.append(("end", what, time.monotonic()))

    def apply(self, o: dict[str, Any], *, force: bool = False) -> None:
        self._write(describe(o))
        self.calls.append(("apply", describe(o)))

    def create(self, o: dict[str, Any], *, force: bool = False) -> str:
        self._write(describe(o))
        self.calls.append(("create", describe(o)))
        if describe(o) in self.foreign:
            raise ForeignObjectError(describe(o), operation="create", kind=o["kind"], name=o["metadata"]["name"])
        return "uid-new-" + describe(o)

    def ensure_namespace(self, o: dict[str, Any]) -> bool:
        self._write(describe(o))
        return describe(o) not in self.existing

    def delete(self, o: dict[str, Any], *, uid: str | None = None) -> None:
        assert uid, "every delete carries a uid precondition"
        self._write("delete " + describe(o))

    def started(self, prefix: str, event: str = "start") -> list[float]:
        return [t for e, w, t in self.log if e == event and w.startswith(prefix)]

    def ended(self, prefix: str) -> list[float]:
        return self.started(prefix, "end")


def test_each_wave_starts_after_the_one_it_depends_on_and_runs_in_parallel() -> None:
    kube = RecordingKube(concurrency=4)
    kube.existing.add("Namespace/ns-0")
    deletions = [obj("LocalQueue", "old-lq", "ns-9"), obj("ClusterQueue", "old-cq"), obj("ResourceFlavor", "old-f")]
    done = write(kube, cluster_objects(), deletions, force=False)
    # namespaces, flavors, priority class and cohort before any ClusterQueue, those before any LocalQueue, every
    # apply before any deletion (LocalQueues deleted first)
    first_wave = ("Namespace", "ResourceFlavor", "WorkloadPriorityClass", "Cohort")
    assert max(t for p in first_wave for t in kube.ended(p)) <= min(kube.started("ClusterQueue"))
    assert max(kube.ended("ClusterQueue")) <= min(kube.started("LocalQueue"))
    assert max(kube.ended("LocalQueue")) <= min(kube.started("delete"))
    assert max(kube.ended("delete LocalQueue")) <= min(kube.started("delete ClusterQueue"))
    assert max(kube.ended("delete ClusterQueue")) <= min(kube.started("delete ResourceFlavor"))
    assert kube.most_in_flight == 4  # never more
    assert (done.applied, done.namespaces_created, done.deleted) == (3 + 1 + 1 + 6 + 6, 5, 3)  # the 6th ns existed
    assert done.attempted == len(cluster_objects()) + 3 and not done.failures and not done.conflicts
    done.raise_failures()  # nothing to raise


def test_without_a_write_concurrency_the_objects_are_written_one_at_a_time_in_order() -> None:
    kube = RecordingKube()
    del kube.write_concurrency
    write(kube, cluster_objects(2), [], force=False)
    assert kube.most_in_flight == 1
    assert [w for e, w, _ in kube.log if e == "start"] == [describe(o) for o in cluster_objects(2)]


def test_a_foreign_managers_conflict_is_left_alone_and_the_rest_is_written() -> None:
    kube = RecordingKube()
    for name in ("cq-4", "cq-1"):
        kube.fail[f"ClusterQueue/{name}"] = FieldOwnershipError(
            "owned", operation="apply", managers=("gitops",), fields=(".spec.cohortName",)
        )
    done = write(kube, cluster_objects(), [obj("ResourceFlavor", "old")], force=False)
    # both named in apply order, everything else applied, the deletion made, and nothing raised
    assert done.conflicts == [
        "ClusterQueue/cq-1: .spec.cohortName owned by gitops",
        "ClusterQueue/cq-4: .spec.cohortName owned by gitops",
    ]
    assert done.applied == 3 + 1 + 1 + 4 + 6 and done.deleted == 1
    done.raise_failures()


@pytest.mark.parametrize("force", [False, True], ids=["Respect", "Take"])
def test_objects_not_seen_as_ours_are_created_and_a_foreign_one_is_named_never_written(force: bool) -> None:
    # Given a cluster where idleshare created cq-0 and its flavors (seen with the marker), and someone else made
    # the priority class and cq-2 under the names idleshare wants
    kube = RecordingKube()
    kube.foreign = {"WorkloadPriorityClass/high", "ClusterQueue/cq-2"}
    ours = {("ClusterQueue", "", "cq-0")} | {("ResourceFlavor", "", f"flavor-{f}") for f in range(3)}
    # When the recompute writes, in either field-ownership mode
    done = write(kube, cluster_objects(3), [], force=force, existing=ours)
    # Then what is ours is applied, everything else is created (a create cannot adopt), and the two foreign ones
    # are named, in apply order, not counted as written, nothing raised
    sent = dict((what, how) for how, what in kube.calls)
    assert {w for w, how in sent.items() if how == "apply"} == {"ClusterQueue/cq-0"} | {
        f"ResourceFlavor/flavor-{f}" for f in range(3)
    }
    assert {w for w, how in sent.items() if how == "create"} == {
        "WorkloadPriorityClass/high", "Cohort/pool", "ClusterQueue/cq-1", "ClusterQueue/cq-2",
        "LocalQueue/ns-0/lq-0", "LocalQueue/ns-1/lq-1", "LocalQueue/ns-2/lq-2",
    }  # fmt: skip
    assert done.foreign == ["WorkloadPriorityClass/high", "ClusterQueue/cq-2"]
    assert done.applied == 3 + 1 + 1 + 3 + 3 - 2 and not done.conflicts and not done.failures
    done.raise_failures()


def test_without_existing_every_object_is_created() -> None:
    kube = RecordingKube()
    write(kube, cluster_objects(2), [], force=False)
    assert {how for how, _ in kube.calls} == {"create"}  # never an apply that could adopt


def test_several_permanent_failures_are_all_named_and_the_other_writes_still_made() -> None:
    kube = RecordingKube()
    for what in ("ClusterQueue/cq-2", "ClusterQueue/cq-5", "LocalQueue/ns-3/lq-3"):
        kube.fail[what] = PermanentError(f"c1: apply {what}: HTTP 422: invalid", operation="apply", status=422)
    done = write(kube, cluster_objects(), [obj("ResourceFlavor", "old")], force=False)
    # every other object applied (the LocalQueues too), the deletion not made
    assert done.applied == 3 + 1 + 1 + 4 + 5 and done.deleted == 0 and not kube.started("delete")
    assert [what for what, _ in done.failures] == ["ClusterQueue/cq-2", "ClusterQueue/cq-5", "LocalQueue/ns-3/lq-3"]
    # the raised error names them all, is permanent (not retried) and an IdleshareError
    with pytest.raises(PermanentWritesFailed) as raised:
        done.raise_failures()
    assert isinstance(raised.value, PermanentError) and isinstance(raised.value, IdleshareError)
    message = str(raised.value)
    assert message.startswith("3 of ")
    for what in ("ClusterQueue/cq-2", "ClusterQueue/cq-5", "LocalQueue/ns-3/lq-3", "HTTP 422"):
        assert what in message


def test_a_retryable_failure_stops_what_has_not_started() -> None:
    # a server that times out on the first ClusterQueues (an outage), writes 2 at a time
    kube = RecordingKube(concurrency=2)
    kube.fail["ClusterQueue/cq-0"] = RetryableError("c1: apply ClusterQueue/cq-0: timed out", operation="apply")
    kube.fail["ClusterQueue/cq-1"] = AuthExpiredError("c1: apply ClusterQueue/cq-1: HTTP 401", operation="apply")
    done = write(kube, cluster_objects(), [obj("ResourceFlavor", "old")], force=False)
    # the writes in flight finished, nothing after them started (no LocalQueue, no deletion)
    assert not kube.started("LocalQueue") and not kube.started("delete")
    assert len(kube.started("ClusterQueue")) <= 3
    assert done.not_started >= 6 + 6 - 3
    # and the error is retryable, names both failures and how many writes were not started
    with pytest.raises(RetryableWritesFailed) as raised:
        done.raise_failures()
    assert isinstance(raised.value, RetryableError) and isinstance(raised.value, WritesFailed)
    assert "ClusterQueue/cq-0" in str(raised.value) and "ClusterQueue/cq-1" in str(raised.value)
    assert f"{done.not_started} not started" in str(raised.value)


def raised(fail: dict[str, Exception], concurrency: int = 4) -> Exception:
    """What the writes' outcome raises when the cluster fails ``fail``'s objects."""
    kube = RecordingKube(concurrency=concurrency)
    kube.fail = fail
    with pytest.raises((IdleshareError, ValueError)) as caught:
        write(kube, cluster_objects(), [], force=False).raise_failures()
    return caught.value


def test_one_failure_is_raised_as_it_came_one_retryable_among_permanent_makes_all_retryable() -> None:
    error = PermanentError("c1: apply ClusterQueue/cq-0: HTTP 403: forbidden", operation="apply", status=403)
    assert raised({"ClusterQueue/cq-0": error}) is error
    refused = PermanentError("refused", operation="apply", status=422)
    unavailable = RetryableError("HTTP 503", operation="apply", status=503)
    both = raised({"Cohort/pool": refused, "ClusterQueue/cq-0": unavailable}, concurrency=1)
    assert type(both) is RetryableWritesFailed


def test_an_error_that_is_not_an_adapters_is_raised_as_is() -> None:
    error = ValueError("idleshare does not write objects of kind 'X'")
    assert raised({"ClusterQueue/cq-3": error}) is error


def test_many_failures_quote_a_few_and_name_the_rest() -> None:
    kube = RecordingKube(delay=0)
    objects = [obj("ClusterQueue", f"cq-{i}") for i in range(12)]
    for o in objects:
        kube.fail[describe(o)] = PermanentError(f"apply {describe(o)}: HTTP 422: long reason", operation="apply")
    done = write(kube, objects, [], force=False)
    with pytest.raises(PermanentWritesFailed) as raised:
        done.raise_failures()
    message = str(raised.value)
    assert message.count("long reason") == 5 and all(describe(o) in message for o in objects)
    assert len(raised.value.failures) == 12
