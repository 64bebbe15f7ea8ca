"""The recompute on a bad day, with in-memory fakes: unreadable Nodes, a mass failure's bounded change summary,
the generation's event published once whatever fails after the pool was stored, and a batch's failed records
handed back with their backoff (and out of time, at once)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

import pytest

from idleshare import timings
from idleshare.adapters.ports import ClusterRecord, RequestAnswer
from idleshare.adapters.sqs_records import QueuedRecord
from idleshare.domain.cluster_settings import FieldOwnership
from idleshare.errors import RetryableError
from idleshare.service.recompute import EXCLUDED_SAMPLE
from tests.builders import k8s_node as node
from tests.builders import quota_body
from tests.fakes import batch, cq, gpu_limit


def test_a_node_that_cannot_be_read_is_excluded_as_unreadable_and_the_rest_counts(cluster):
    # Given a cluster one of whose Node objects has an allocatable of the wrong type, and one without a name
    store, kube, _, r = cluster
    kube.nodes[1]["status"]["allocatable"] = "eight GPUs"
    kube.nodes.append({"metadata": {"name": 7}, "status": []})
    out = r.recompute("demo")
    # Then the cluster is not failed: those nodes are excluded, named (by position without a name), errors kept
    pool = store.pools["demo"].pool
    assert pool["excludedNodes"] == {"p5-1": "Unreadable", "<unreadable node #4>": "Unreadable"}
    assert pool["capacity"]["ml.p5.48xlarge"]["nvidia.com/gpu"] == "24"
    assert len(out.unreadable) == 2 and "allocatable" in out.unreadable[0]
    # and the rest is lent: 3 readable nodes x 8 = 24 GPUs - a's 8 - b's 8 = 8 unallocated, the Cohort's quota
    assert pool["unallocated"]["ml.p5.48xlarge"]["nvidia.com/gpu"] == "8"
    assert gpu_limit(kube.objects[("Cohort", "", "shared-pool")], "nominalQuota") == "8"
    # a's borrowing limit is 50% of its own 8 GPUs (the Quota basis, the default): 4
    assert gpu_limit(cq(kube, "a")) == "4"


def test_a_mass_failure_is_summarised_in_counts_and_a_bounded_sample(cluster):
    # Given a converged cluster of 5,000 nodes with EKS-shaped names
    store, kube, publisher, r = cluster
    kube.nodes[:] = [node(f"ip-10-1-{i // 256}-{i % 256}.us-west-2.compute.internal") for i in range(5000)]
    r.recompute("demo")
    # When 4,000 go NotReady at once
    for n in kube.nodes[:4000]:
        n["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    out = r.recompute("demo")
    # Then the generation's change summary and event are counts plus a sample, not the 4,000 names
    excluded = out.changes["excludedNodes"]
    assert excluded["count"] == excluded["added"] == 4000 and excluded["byReason"] == {"NotReady": 4000}
    assert len(excluded["sample"]) == EXCLUDED_SAMPLE
    event = publisher.details[-1]
    assert event["generation"] == 2 and len(json.dumps(event)) < 4096
    assert len(store.pools["demo"].pool["excludedNodes"]) == 4000  # the pool itself keeps every name


@pytest.mark.parametrize("fails", ["publish", "apply"])
def test_an_event_lost_to_a_failure_after_the_pool_was_stored_is_published_by_the_retry_once(cluster, fails):
    # Given generation 1, then a node gone and EventBridge, or the apply's listing, failing once
    store, kube, publisher, r = cluster
    r.recompute("demo")
    kube.nodes.pop()
    if fails == "publish":
        publisher.fail = 1
    else:  # the apply's listing fails once the pool is stored
        kube.down, original = True, kube.list_nodes
        kube.list_nodes = lambda page_size=500: iter(kube.nodes)
        kube.list_daemonsets = lambda: []  # the reads before the pool is stored succeed
    # When the recompute stores generation 2 and then fails
    with pytest.raises(RetryableError):
        r.recompute("demo")
    assert store.pools["demo"].generation == 2 and store.pools["demo"].outbox is not None
    assert [d["generation"] for d in publisher.details] == [1]
    if fails == "apply":
        kube.down, kube.list_nodes = False, original
        del kube.list_daemonsets
    # Then the retry (nothing changed since: same digest) publishes generation 2, and a third run does not again
    r.recompute("demo")
    r.recompute("demo")
    assert [d["generation"] for d in publisher.details] == [1, 2]
    assert store.pools["demo"].outbox is None


# -- the batch: backoff, FIFO, the function's time --------------------------------------------------------------


def record(i: int, cluster: str = "demo", count: int = 1) -> QueuedRecord:
    body = json.dumps({"cluster": cluster, "reason": "test", "requestId": f"r{i}"})
    return QueuedRecord(f"m{i}", body, receipt_handle=f"h{i}", receive_count=count, queue_arn="arn:q")


@pytest.mark.parametrize("count", [1, 2, 3, 5, 30])
def test_a_failed_record_is_handed_back_with_its_backoff_not_the_visibility_timeout(cluster, count):
    # Given a cluster that cannot be read, its record received ``count`` times
    _, kube, _, r = cluster
    kube.down = True
    failed, returned = batch(r, [record(1, count=count), record(2, count=count)])
    # Then both records of the cluster fail and come back after the backoff of their receive count (≤ 20 s)
    delay = timings.retry_delay(count)
    assert (failed, returned) == (["m1", "m2"], [("arn:q", [("h1", delay), ("h2", delay)])])
    assert delay <= timings.RETRY_MAX_SECONDS <= 30


def test_a_cluster_is_not_started_without_the_time_a_recompute_needs_and_comes_back_at_once(cluster):
    # Given a batch of two clusters and a function with 70 s left, the first recompute taking 20 s of it
    store, kube, _, r = cluster
    store.put_cluster(ClusterRecord("other", "other-eks"))
    left = [70.0]
    original = kube.list_nodes

    def slow(page_size=500):
        left[0] -= 20
        return original(page_size)

    kube.list_nodes = slow
    failed, returned = batch(r, [record(1), record(2, cluster="other")], remaining_seconds=lambda: left[0])
    # Then the first is recomputed, the second is handed back to be retried at once (0 s), not lost to a timeout
    assert (failed, returned) == (["m2"], [("arn:q", [("h2", 0)])])
    assert store.pools["demo"].generation == 1 and "other" not in store.pools


def test_the_dlq_comes_only_after_fifteen_minutes_of_failing():
    assert timings.seconds_to_dlq(timings.DEFAULT_MAX_RECEIVE_COUNT) >= timings.DLQ_AFTER_SECONDS
    assert timings.seconds_to_dlq(timings.DEFAULT_MAX_RECEIVE_COUNT - 1) < timings.DLQ_AFTER_SECONDS
    assert [timings.retry_delay(n) for n in range(1, 7)] == [2, 4, 8, 16, 20, 20]


def request(i: int, cluster: str = "demo") -> QueuedRecord:
    """An explicit recalculation request ``r<i>`` (its receipt is written) as record ``m<i>``."""
    body = json.dumps({"cluster": cluster, "reason": "Recalculation Requested", "requestId": f"r{i}", "receipt": True})
    return QueuedRecord(f"m{i}", body, receipt_handle=f"h{i}", queue_arn="arn:q")


class Ledger:
    """A request ledger in memory: a request answered once is answered again without running."""

    def __init__(self, answered: dict[tuple[str, str], RequestAnswer] | None = None) -> None:
        self.answered = dict(answered or {})

    def once(self, cluster_id: str, request_id: str, run: Callable[[], RequestAnswer]) -> RequestAnswer:
        if (cluster_id, request_id) not in self.answered:
            self.answered[cluster_id, request_id] = run()  # a run that raised leaves no trace
        return self.answered[cluster_id, request_id]


def broken_policy(store) -> None:
    """Cluster demo's first stored quota breaks a bound: its recompute fails permanently."""
    quota = next(iter(store.quotas["demo"].values()))
    quota.body["ComputeQuotaConfig"]["ResourceSharingConfig"]["BorrowLimit"] = -1


@pytest.mark.parametrize("first", [record(1), request(1)], ids=["after-a-windowed-message", "after-a-request"])
def test_a_request_behind_a_permanent_failure_in_its_batch_gets_the_failure_as_its_receipt(cluster, first):
    # Given a cluster whose stored policy breaks a bound, and a batch with a recalculation request r2 behind the
    # cluster's first message, which fails permanently
    store, _, _, r = cluster
    r.recompute("demo")  # generation 1
    broken_policy(store)
    runs: list[str] = []
    recompute = r.recompute
    r.recompute = lambda c, **kw: runs.append(c) or recompute(c, **kw)  # type: ignore[method-assign]
    failed, returned = batch(r, [first, request(2)], ledger=Ledger())
    # Then both records are consumed (retrying cannot help), the cluster recomputed once ...
    assert (failed, returned, runs) == ([], [], ["demo"])
    # ... and r2's requester is answered: Failed, at the pool's generation, naming the policy's problem
    receipt = store.get_receipt("demo", "r2")
    assert receipt is not None and (receipt.status, receipt.generation) == ("Failed", 1)
    assert "BorrowLimit" in receipt.message and receipt.message.startswith("PermanentError: ")
    if json.loads(str(first.body)).get("receipt"):  # the same answer as the first request recorded
        first_receipt = store.get_receipt("demo", "r1")
        assert first_receipt is not None
        assert (first_receipt.status, first_receipt.message) == (receipt.status, receipt.message)


def test_a_redelivered_request_answered_before_keeps_its_answer_behind_a_permanent_failure(cluster):
    # Given request r2 answered Done at generation 1 by an earlier batch, then the cluster's policy broken
    store, _, _, r = cluster
    r.recompute("demo", request_id="r2")
    done = store.get_receipt("demo", "r2")
    broken_policy(store)
    ledger = Ledger({("demo", "r2"): RequestAnswer("r2", 1, True)})
    # When r2 is delivered again behind a request that fails permanently
    assert batch(r, [request(1), request(2)], ledger=ledger) == ([], [])
    # Then r1 is answered Failed and r2 keeps its first answer
    assert store.get_receipt("demo", "r1").status == "Failed"
    assert store.get_receipt("demo", "r2") == done


def test_an_unreadable_message_fails_its_record_only(cluster):
    _, _, _, r = cluster
    records = [QueuedRecord("bad", "not json", receipt_handle="hb", queue_arn="arn:q"), record(1)]
    assert batch(r, records, fifo=False) == (["bad"], [("arn:q", [("hb", timings.retry_delay(1))])])


@pytest.mark.parametrize("ownership", ["Respect", "Take"])
def test_an_object_idleshare_did_not_create_is_named_never_written_and_never_deleted(cluster, ownership):
    # Given a platform's priority class high-priority (labelled as idleshare's by an older Take, no creation marker)
    # and team b's ClusterQueue made by someone else, in a cluster of either field-ownership mode
    store, kube, _, r = cluster
    store.clusters["demo"] = store.clusters["demo"].with_settings(field_ownership=FieldOwnership(ownership))
    theirs = {
        ("WorkloadPriorityClass", "", "high-priority"): {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high-priority", "labels": {"app.kubernetes.io/managed-by": "idleshare"}},
            "value": 1,
        },
        ("ClusterQueue", "", "hyperpod-ns-b-clusterqueue"): {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "hyperpod-ns-b-clusterqueue"},
            "spec": {},
        },
    }
    kube.objects.update(copy.deepcopy(theirs))
    store.put_scheduler_config("demo", {"SchedulerConfig": {"PriorityClasses": [{"Name": "high", "Weight": 9}]}})
    # When recomputed
    out = r.recompute("demo")
    # Then both are named, in apply order, on the pool's apply status; neither is written; the rest is
    assert out.foreign == ["WorkloadPriorityClass/high-priority", "ClusterQueue/hyperpod-ns-b-clusterqueue"]
    assert store.pools["demo"].apply_status == "Conflict"
    assert store.pools["demo"].apply_message.startswith(
        "ForeignObject: WorkloadPriorityClass/high-priority, ClusterQueue/hyperpod-ns-b-clusterqueue ("
    )
    assert {k: kube.objects[k] for k in theirs} == theirs
    assert cq(kube, "a")["metadata"]["annotations"] == {"idleshare.io/created-by": "idleshare"}
    # When the priority class and team b go
    store.delete_scheduler_config("demo")
    store.set_quotas("demo", [quota_body("a", 8, enabled=True)])
    out = r.recompute("demo")
    # Then neither is deleted; the one labelled as idleshare's is still named (it is not recorded as idleshare's:
    # docs/spec.md §3, "Ownership"), the unlabelled one, no longer wanted, no more
    assert {k: kube.objects.get(k) for k in theirs} == theirs
    assert out.foreign == ["WorkloadPriorityClass/high-priority"] and store.pools["demo"].apply_status == "Conflict"
