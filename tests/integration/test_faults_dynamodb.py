"""DynamoDB faults through the running pipeline: throttling on any call of a recompute, two recomputes
racing on the conditional pool write, and DynamoDB Local restarted (every table lost) mid-run."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from idleshare.adapters.ports import ClusterRecord
from idleshare.adapters.store import DynamoStore
from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.domain.model import BorrowLimitBasis
from idleshare.errors import ConflictError, PermanentError, RetryableError
from idleshare.handlers import router
from idleshare.service.recompute import Recomputer
from tests.builders import quota_body
from tests.integration.conftest import create_table
from tests.integration.invariants import (
    GenerationLog,
    assert_converged,
    assert_pool_invariants,
    managed_specs,
    recovers,
    settle,
)
from tests.integration.test_pipeline import CONTEXT, EVENTS, harness  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration


class Throttle:
    """A botocore ``before-call`` hook: the ``nth`` call of ``operation`` answers
    ProvisionedThroughputExceededException (as DynamoDB does once the SDK's own retries are spent)."""

    def __init__(self, operation: str, nth: int = 1) -> None:
        self.operation, self.nth, self.calls, self.thrown = operation, nth, 0, 0

    def __call__(self, model: Any, **_: Any) -> Any:
        if model.name != self.operation:
            return None
        self.calls += 1
        if self.calls != self.nth:
            return None
        self.thrown += 1
        error = {"Code": "ProvisionedThroughputExceededException", "Message": "Rate of requests exceeds capacity"}
        return SimpleNamespace(status_code=400, headers={}), {
            "Error": error,
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }


@pytest.fixture
def throttled(harness):  # noqa: F811
    """Installs a Throttle on the harness's DynamoDB client for the test, removing it afterwards."""
    events = harness.store.client.meta.events
    installed: list[Throttle] = []

    def install(operation: str, nth: int = 1) -> Throttle:
        hook = Throttle(operation, nth)
        events.register("before-call.dynamodb.*", hook, unique_id=f"throttle-{id(hook)}")
        installed.append(hook)
        return hook

    yield install
    for hook in installed:
        events.unregister("before-call.dynamodb.*", unique_id=f"throttle-{id(hook)}")


# Every DynamoDB call a changing recompute makes, in order: cluster, quotas, scheduler config, pool
# (GetItem x3 + Query), the conditional pool write, the apply record.
@pytest.mark.parametrize(
    ("operation", "nth"),
    [
        pytest.param("GetItem", 1, id="reading the cluster"),
        pytest.param("Query", 1, id="listing quotas"),
        pytest.param("GetItem", 3, id="reading the pool"),
        pytest.param("TransactWriteItems", 1, id="writing the pool"),
        pytest.param("UpdateItem", 1, id="recording the apply"),
    ],
)
def test_throttling_anywhere_in_a_recompute_is_retried_and_converges(harness, throttled, operation, nth):  # noqa: F811
    # Given a converged cluster and a node gone (the next recompute must write generation 2)
    baseline, log = settle(harness)
    harness.sim.delete_node("p5-3")
    harness.send(json.loads((EVENTS / "idleshare-recalculation-requested.json").read_text()))
    hook = throttled(operation, nth)
    # When DynamoDB throttles one call of the recompute
    out = harness.drain()
    # Then the record goes back to SQS (a retryable failure), nothing half-written
    assert hook.thrown == 1
    assert len(out["batchItemFailures"]) == 1
    assert_pool_invariants(harness.store, "demo", baseline)
    log.observe()
    # And the redelivery converges on generation 2, the apply recorded
    recovers(harness, log, baseline)
    assert log.seen[-1] == 2 and harness.cq_gpu("a") == "8"


def test_a_throttled_router_lookup_is_a_retryable_error_and_enqueues_nothing(harness, throttled):  # noqa: F811
    # Given DynamoDB throttles the router's cluster lookup
    throttled("GetItem")
    event = json.loads((EVENTS / "idleshare-node-changed.json").read_text())
    # When the event arrives, Then the router fails retryably (EventBridge retries the invocation)
    with pytest.raises(RetryableError, match="ProvisionedThroughputExceeded"):
        router.handler(event, CONTEXT)
    assert harness.drain()["records"] == 0
    # And the retry goes through
    assert router.handler(event, CONTEXT)["enqueued"] == ["demo"]


class RaceOnce:
    """A Store proxy for recompute A: right after A has read the pool and the nodes (when it reads the quotas),
    ``meanwhile`` runs once (B)."""

    def __init__(self, store: DynamoStore, meanwhile: Any) -> None:
        self._store, self._meanwhile = store, meanwhile

    def list_quotas(self, cluster_id: str) -> Any:
        record = self._store.list_quotas(cluster_id)
        if self._meanwhile is not None:
            run, self._meanwhile = self._meanwhile, None
            run()
        return record

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def not_ready(h: Any, name: str) -> None:
    node = h.sim.get("Node", name)
    node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    h.sim.set_node(node)


def test_two_racing_recomputes_one_loses_and_no_update_is_lost(harness):  # noqa: F811
    # Given a converged cluster, then node p5-2 NotReady (both recomputes below see a change)
    baseline, log = settle(harness)
    not_ready(harness, "p5-2")
    kube_for = harness.deps.kube_for
    b = Recomputer(harness.store, kube_for, None)
    seen_by_b: list[Any] = []

    def b_runs_after_another_node_went() -> None:
        harness.sim.delete_node("p5-3")
        seen_by_b.append(b.recompute("demo"))

    a = Recomputer(RaceOnce(harness.store, b_runs_after_another_node_went), kube_for, None)
    # When A has listed the nodes and read generation 1, B sees p5-3 gone too and stores generation 2
    with pytest.raises(ConflictError, match="no longer at generation 1"):
        a.recompute("demo")
    # Then A's stale view lost the conditional write and never reached the cluster: B's newer one holds
    assert seen_by_b[0].generation == 2 and seen_by_b[0].changed
    stored = harness.store.get_pool("demo")
    assert stored.generation == 2 and stored.pool["capacity"]["ml.p5.48xlarge"]["nvidia.com/gpu"] == "16"
    assert_converged(harness.sim, harness.store, "demo")
    assert harness.cq_gpu("a") == "4"  # 0 unallocated + b's 8 lent, 50 %
    # And A's retry (SQS redelivers) agrees with B: nothing new to write
    again = a.recompute("demo")
    assert (again.generation, again.changed, again.applied) == (2, False, 0)
    assert recovers(harness, log, baseline)["capacity"]["ml.p5.48xlarge"]["nvidia.com/gpu"] == "16"
    assert log.seen[-1] == 2


def test_a_racing_recompute_that_saw_no_change_is_healed_by_the_next_one(harness):  # noqa: F811
    # Given a converged cluster; A reads the unchanged cluster, then B stores and applies a change
    # (FIFO message groups keep one cluster's recomputes serial in production: this is the fallback)
    baseline, log = settle(harness)
    kube_for = harness.deps.kube_for
    b = Recomputer(harness.store, kube_for, None)

    def b_runs_after_a_node_went() -> None:
        harness.sim.delete_node("p5-3")
        b.recompute("demo")

    a = Recomputer(RaceOnce(harness.store, b_runs_after_a_node_went), kube_for, None)
    # When A finishes with its stale "nothing changed"
    outcome = a.recompute("demo")
    # Then the store kept B's generation (A wrote no pool), and one more recompute converges the cluster
    assert not outcome.changed
    assert harness.store.get_pool("demo").generation == 2
    assert recovers(harness, log, baseline)["capacity"]["ml.p5.48xlarge"]["nvidia.com/gpu"] == "24"
    assert log.seen[-1] == 2 and harness.cq_gpu("a") == "8"


def test_dynamodb_local_restarted_mid_run_errors_cleanly_then_recovers(
    harness,  # noqa: F811
    dynamodb_local_server,
    ddb_resource,
    ddb_table,
):
    # Given a converged cluster
    settle(harness)
    objects_before = managed_specs(harness.sim)
    harness.sim.clear_requests()
    event = json.loads((EVENTS / "idleshare-node-changed.json").read_text())
    try:
        # When DynamoDB is down: the router and the recompute fail retryably
        dynamodb_local_server.stop()
        with pytest.raises(RetryableError):
            router.handler(event, CONTEXT)
        with pytest.raises(RetryableError):
            Recomputer(harness.store, harness.deps.kube_for, None).recompute("demo")
    finally:
        # When it is back (in memory: the table and everything in it are gone)
        dynamodb_local_server.launch()
    # Then every call names the missing table as a permanent error; the cluster is untouched
    with pytest.raises(PermanentError, match="does not exist"):
        router.handler(event, CONTEXT)
    with pytest.raises(PermanentError, match="does not exist"):
        Recomputer(harness.store, harness.deps.kube_for, None).recompute("demo")
    writes = [r for r in harness.sim.requests if r.method in ("PATCH", "POST", "PUT", "DELETE")]
    assert writes == []
    assert managed_specs(harness.sim) == objects_before
    # When the table is recreated and the configuration registered again (a cold start does it), as it was (the
    # harness's cluster is on the Pool basis)
    create_table(ddb_resource, ddb_table.name)
    harness.store.put_cluster(
        ClusterRecord(
            "demo",
            "demo-eks",
            "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster",
            settings=ClusterSettings(borrow_limit_basis=BorrowLimitBasis.POOL),
        )
    )
    harness.store.create_quota("demo", quota_body("a", 8))
    harness.store.create_quota("demo", quota_body("b", 8, "Lend"))
    # Then one recompute stores generation 1 again and the cluster needs no write: it already holds it
    out = harness.recalc()
    assert out["batchItemFailures"] == []
    log = GenerationLog(harness.store, "demo")
    assert log.observe() == 1
    assert_converged(harness.sim, harness.store, "demo")
    writes = [r for r in harness.sim.requests if r.method in ("PATCH", "POST", "PUT", "DELETE")]
    assert writes == []
