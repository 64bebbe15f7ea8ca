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
    NamespaceTerminatingError,
    PermanentError,
    RetryableError,
)
from idleshare.service.apply import (
    NAMESPACE_TERMINATING,
    WRITE_REFUSED,
    RetryableWritesFailed,
    WritesFailed,
    describe,
    needs,
    refusal_code,
    write,
)


def obj(kind: str, name: str, namespace: str = "", spec: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{kind}-{namespace}-{name}"}  # as listed: each has its uid
    if namespace:
        meta["namespace"] = namespace
    return {"kind": kind, "metadata": meta} | ({"spec": spec} if spec is not None else {})


FLAVORS = [f"flavor-{f}" for f in range(3)]


def cluster_objects(teams: int = 6) -> list[dict[str, Any]]:
    """As diff orders them: namespaces, flavors, the priority class, the cohort, then the queues (each ClusterQueue
    naming the cohort and every flavor, each LocalQueue its ClusterQueue, as idleshare writes them)."""
    groups = [{"flavors": [{"name": f, "resources": []} for f in FLAVORS]}]
    out = [obj("Namespace", f"ns-{t}") for t in range(teams)]
    out += [obj("ResourceFlavor", f) for f in FLAVORS] + [obj("WorkloadPriorityClass", "high")]
    out += [obj("Cohort", "pool", spec={"resourceGroups": groups})]
    out += [obj("ClusterQueue", f"cq-{t}", spec={"cohortName": "pool", "resourceGroups": groups}) for t in range(teams)]
    out += [obj("LocalQueue", f"lq-{t}", f"ns-{t}", spec={"clusterQueue": f"cq-{t}"}) for t in range(teams)]
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


REMOVED_TEAM = [obj("LocalQueue", "old-lq", "ns-9"), obj("ClusterQueue", "old-cq"), obj("WorkloadPriorityClass", "low")]
"""What a recompute deletes when a team and a priority class went: its queues hold quota in the cohort."""


def forbidden(what: str) -> PermanentError:
    return PermanentError(f"c1: create {what}: HTTP 403: denied by policy", operation="create", status=403)


def test_what_idleshare_writes_needs_only_its_namespace_its_clusterqueue_and_its_flavors() -> None:
    cq, lq = cluster_objects(1)[-2:]
    cohort = next(o for o in cluster_objects(1) if o["kind"] == "Cohort")
    assert needs(lq) == [("Namespace", "", "ns-0"), ("ClusterQueue", "", "cq-0")]
    assert needs(cq) == [("ResourceFlavor", "", f) for f in FLAVORS]  # not the Cohort: Kueue forms it from the name
    assert needs(cohort) == [] and needs(obj("WorkloadPriorityClass", "high")) == []


def test_a_refused_object_holds_back_only_what_needs_it_and_every_deletion_still_runs() -> None:
    # Given a cluster that refuses one team's namespace (an admission policy), another team's LocalQueue (its
    # namespace is being deleted) and a third team's ClusterQueue (422), in a recompute that also removes a team
    kube = RecordingKube()
    kube.fail["Namespace/ns-1"] = forbidden("Namespace/ns-1")
    kube.fail["LocalQueue/ns-3/lq-3"] = NamespaceTerminatingError(
        "c1: create LocalQueue/ns-3/lq-3: HTTP 403: unable to create new content in namespace ns-3 because it is "
        "being terminated",
        operation="create",
        namespace="ns-3",
    )
    kube.fail["ClusterQueue/cq-4"] = PermanentError("c1: create ClusterQueue/cq-4: HTTP 422: bad", status=422)
    done = write(kube, cluster_objects(), REMOVED_TEAM, force=False)
    # Then only what needs a refused object that is not there waits: team 1's LocalQueue (no namespace), team 4's
    # (no ClusterQueue); everything else is written, and the removed team's queues and the priority class are
    # deleted in the same run
    assert [what for what, _ in done.refused] == ["Namespace/ns-1", "ClusterQueue/cq-4", "LocalQueue/ns-3/lq-3"]
    assert [refusal_code(exc) for _, exc in done.refused] == [WRITE_REFUSED, WRITE_REFUSED, NAMESPACE_TERMINATING]
    assert done.waiting == [
        ("LocalQueue/ns-1/lq-1", ["Namespace/ns-1"]),
        ("LocalQueue/ns-4/lq-4", ["ClusterQueue/cq-4"]),
    ]
    assert not kube.started("LocalQueue/ns-1/") and not kube.started("LocalQueue/ns-4/")
    assert done.applied == 3 + 1 + 1 + 5 + 3 and done.namespaces_created == 5
    assert done.deleted == 3 and len(kube.started("delete")) == 3
    # and nothing is raised: the caller names the refusals (retrying cannot help)
    assert not done.failures
    done.raise_failures()


def test_a_refused_new_flavor_holds_back_the_queues_naming_it_but_not_the_queues_of_queues_already_there() -> None:
    # Given team 0's ClusterQueue in the cluster already and a new flavor the cluster refuses
    kube = RecordingKube()
    kube.fail["ResourceFlavor/flavor-2"] = forbidden("ResourceFlavor/flavor-2")
    ours = {("ClusterQueue", "", "cq-0"), ("ResourceFlavor", "", "flavor-0"), ("ResourceFlavor", "", "flavor-1")}
    done = write(kube, cluster_objects(2), [obj("ResourceFlavor", "old")], force=False, existing=ours)
    # Then no ClusterQueue is written (Kueue would make it inactive: a flavor it names is missing), team 0's
    # LocalQueue is (its ClusterQueue stands, as it was), team 1's is not (its ClusterQueue does not exist)
    assert done.waiting == [
        ("ClusterQueue/cq-0", ["ResourceFlavor/flavor-2"]),
        ("ClusterQueue/cq-1", ["ResourceFlavor/flavor-2"]),
        ("LocalQueue/ns-1/lq-1", ["ClusterQueue/cq-1"]),
    ]
    assert not kube.started("ClusterQueue") and kube.started("LocalQueue/ns-0/lq-0")
    assert done.deleted == 1  # and the deletion still runs
    done.raise_failures()


def test_a_refused_update_of_an_object_already_there_holds_nothing_back() -> None:
    kube = RecordingKube()
    kube.fail["ResourceFlavor/flavor-0"] = forbidden("ResourceFlavor/flavor-0")
    ours = {("ResourceFlavor", "", f) for f in FLAVORS}
    done = write(kube, cluster_objects(2), [], force=False, existing=ours)
    assert [what for what, _ in done.refused] == ["ResourceFlavor/flavor-0"] and not done.waiting
    assert len(kube.started("ClusterQueue")) == 2 and len(kube.started("LocalQueue")) == 2


def test_a_refused_deletion_is_named_and_the_other_deletions_still_run() -> None:
    kube = RecordingKube()
    kube.fail["delete LocalQueue/ns-9/old-lq"] = forbidden("LocalQueue/ns-9/old-lq")
    done = write(kube, [], REMOVED_TEAM, force=False)
    assert [what for what, _ in done.refused] == ["LocalQueue/ns-9/old-lq"]
    assert done.deleted == 2 and kube.started("delete ClusterQueue/old-cq")  # its ClusterQueue goes all the same


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


def test_one_retryable_failure_is_raised_as_it_came_and_names_the_refusals_beside_it() -> None:
    error = RetryableError("c1: apply ClusterQueue/cq-0: HTTP 503", operation="apply", status=503)
    assert raised({"ClusterQueue/cq-0": error}) is error
    refused = PermanentError("refused", operation="apply", status=422)
    both = raised({"Cohort/pool": refused, "ClusterQueue/cq-0": error}, concurrency=1)
    assert type(both) is RetryableWritesFailed and "Cohort/pool" in str(both) and "ClusterQueue/cq-0" in str(both)


def test_an_error_that_is_not_an_adapters_is_raised_as_is() -> None:
    error = ValueError("idleshare does not write objects of kind 'X'")
    assert raised({"ClusterQueue/cq-3": error}) is error


def test_many_failures_quote_a_few_and_name_the_rest() -> None:
    kube = RecordingKube(delay=0, concurrency=1)
    objects = [obj("ClusterQueue", f"cq-{i}") for i in range(12)]
    for o in objects[1:-1]:
        kube.fail[describe(o)] = PermanentError(f"apply {describe(o)}: HTTP 422: long reason", operation="apply")
    # the retryable one last (one at a time): every refusal before it was attempted
    kube.fail["ClusterQueue/cq-11"] = RetryableError("apply ClusterQueue/cq-11: HTTP 500: long reason")
    done = write(kube, objects, [], force=False)
    with pytest.raises(RetryableWritesFailed) as raised:
        done.raise_failures()
    message = str(raised.value)
    assert message.count("long reason") == 5 and all(describe(o) in message for o in objects[1:])
    assert len(raised.value.failures) == 11
