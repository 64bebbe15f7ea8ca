"""The running system end to end: real handlers, DynamoDB Local, the real kube-apiserver + Kueue (idleshare
as its RBAC user, through a recording fault proxy), and moto for SQS / EventBridge. The recompute queue is the
deployed one (``devkit.sqs.create_queue``: its visibility timeout, delivery delay and redrive policy) and is
polled as Lambda's event source mapping polls it (``devkit.sqs.EventSourceMapping``), on the harness's clock.
Given a governed cluster, When events arrive, Then the pool and the cluster follow."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from devkit import sqs as event_source
from devkit.embedded import CapturingPublisher
from devkit.lambda_context import LambdaContext
from idleshare.adapters.aws import EventBridgePublisher, SqsRecomputeQueue
from idleshare.adapters.ports import ClusterRecord
from idleshare.adapters.sqs_records import SqsRecordReturns
from idleshare.adapters.store import DynamoStore
from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.domain.model import BorrowLimitBasis
from idleshare.handlers import recompute, router
from idleshare.runtime import wiring
from tests.builders import quota_body
from tests.kube.fixtures import ProxiedKube, make_node

pytestmark = pytest.mark.integration
EVENTS = Path(__file__).parents[2] / "events" / "inbound"
CONTEXT = LambdaContext(function_name="f", aws_request_id="r")
GPU = "nvidia.com/gpu"


class Harness:
    """Drives events through router -> SQS FIFO -> recompute, as Lambda would, on ``clock`` (epoch seconds:
    ``clock[0]``), which moto's SQS, the router's windows and the recompute's waits all read."""

    def __init__(self, table, sim: ProxiedKube, basis: BorrowLimitBasis = BorrowLimitBasis.QUOTA) -> None:
        self.sim = sim
        self.store = DynamoStore(table)
        sqs = boto3.client("sqs", region_name="us-east-1")
        self.sqs = sqs
        self.clock = [1_000_000.0]
        self.time = event_source.Clock(self.clock)
        self.queues = event_source.create_queue(sqs, "recompute.fifo")
        self.queue_url = self.queues.url
        events = boto3.client("events", region_name="us-east-1")
        events.create_event_bus(Name="idleshare")
        self.events, self.events_dir = events, EVENTS
        self.published: list[dict] = []  # what reached the bus (PutEvents succeeded)
        self.cleanups: list[Callable[[], None]] = []
        self.kube = sim.adapter(timeout=10)
        self.deps = wiring.Dependencies(
            store=self.store,
            queue=SqsRecomputeQueue(event_source.Deduplicating(sqs, self.time), self.queue_url, clock=self.time),
            publisher=CapturingPublisher(EventBridgePublisher(events, "idleshare"), self.published),
            kube_for=lambda c: self.kube,
            clock=self.time,
            returns=SqsRecordReturns(sqs),
        )
        self.esm = event_source.EventSourceMapping(sqs, self.queue_url, recompute.handler, self.time)
        wiring.install(self.deps)
        self.store.put_cluster(
            ClusterRecord(
                "demo",
                "demo-eks",
                "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster",
                settings=ClusterSettings(borrow_limit_basis=basis),
            )
        )

    def send(self, event: dict) -> dict:
        self.clock[0] += 60  # a new dedup window per step
        return router.handler(event, CONTEXT)

    def use_queue(self, queues: event_source.Queues) -> None:
        """Route to and poll ``queues`` instead (a queue made otherwise than the deployed one)."""
        self.queues, self.queue_url = queues, queues.url
        self.deps.queue = SqsRecomputeQueue(
            event_source.Deduplicating(self.sqs, self.time), queues.url, clock=self.time
        )
        self.esm = event_source.EventSourceMapping(self.sqs, queues.url, recompute.handler, self.time)

    def drain(self, max_wait: float | None = None) -> dict:
        """Deliver the next batch to the recompute handler, like the SQS event source (waiting on the clock, up to
        ``max_wait`` seconds — default: the longest backoff — for one to be visible): its ``batchItemFailures``
        (every record when the invocation raised or timed out), ``records``, and ``deferred``: the trailing records
        handed back because their window had not closed yet (not failures: they come back when it has)."""
        invocation = self.esm.deliver(max_wait=max_wait)
        if invocation is None:
            return {"batchItemFailures": [], "records": 0, "deferred": []}
        out = {
            "batchItemFailures": [{"itemIdentifier": m} for m in invocation.failed],
            "records": len(invocation.records),
            "deferred": invocation.deferred,
        }
        if invocation.ended != "ok":
            out["ended"] = invocation.ended
        return out

    def recalc(self) -> dict:
        """An explicit recalculation request (a new ``requestId`` each time, as the README asks of operators: SQS
        deduplicates a request id sent again within 5 minutes), then its batch."""
        event = json.loads((EVENTS / "idleshare-recalculation-requested.json").read_text())
        self.recalcs = getattr(self, "recalcs", 0) + 1
        event["detail"]["requestId"] = f"test-recalc-{self.recalcs}"
        self.send(event)
        return self.drain()

    def cq_gpu(self, team: str, field: str = "borrowingLimit") -> str:
        cq = self.sim.get("ClusterQueue", f"hyperpod-ns-{team}-clusterqueue")
        flavor = next(f for f in cq["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "ml.p5.48xlarge")
        return next(r for r in flavor["resources"] if r["name"] == GPU)[field]

    def cohort_gpu(self) -> str:
        cohort = self.sim.get("Cohort", "shared-pool")
        flavor = next(f for f in cohort["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "ml.p5.48xlarge")
        return next(r for r in flavor["resources"] if r["name"] == GPU)["nominalQuota"]


@contextlib.contextmanager
def governed(
    table,
    sim: ProxiedKube,
    monkeypatch,
    connect: Callable[[Harness], None] | None = None,
    basis: BorrowLimitBasis = BorrowLimitBasis.QUOTA,
) -> Iterator[Harness]:
    """The harness on cluster ``demo``: 4 p5 nodes, quotas ``a`` (LendAndBorrow 50 %) and ``b`` (Lend) of 8 GPUs
    each, the cluster registered with ``basis``. ``connect``: reaches the cluster its own way (sets ``kube``) before
    the quotas are written."""
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    sim.seed_nodes([make_node(f"p5-{i}", instance_type="ml.p5.48xlarge") for i in range(4)])
    with mock_aws():
        h = Harness(table, sim, basis)
        stack = contextlib.ExitStack()
        stack.enter_context(event_source.sqs_time(h.time))
        if connect is not None:
            connect(h)
        h.store.create_quota("demo", quota_body("a", 8))
        h.store.create_quota("demo", quota_body("b", 8, "Lend"))
        try:
            yield h
        finally:
            for cleanup in h.cleanups:
                cleanup()
            stack.close()
            wiring.install(None)
            h.kube.close()


@pytest.fixture
def harness(ddb_table, proxied_kube, monkeypatch):
    """The governed cluster on the Pool basis (BorrowLimit % of the pool a team sees): a node change moves team
    ``a``'s borrowing limit (12 GPUs with 4 nodes, 8 with 3), so it rewrites a's ClusterQueue as well as the Cohort —
    the write the fault suites (``test_faults_*``, ``recovery.py``) break and watch recover."""
    with governed(ddb_table, proxied_kube, monkeypatch, basis=BorrowLimitBasis.POOL) as h:
        yield h


@pytest.fixture
def quota_harness(ddb_table, proxied_kube, monkeypatch):
    """The governed cluster on the default basis (Quota, HyperPod's): a's limit is 50 % of its own 8 GPUs, 4,
    whatever the nodes do; a node change moves only the Cohort's quota."""
    with governed(ddb_table, proxied_kube, monkeypatch) as h:
        yield h


def test_node_goes_not_ready_capacity_leaves_the_cohort_and_only_the_cohort_is_written(quota_harness):
    harness = quota_harness
    assert harness.recalc()["batchItemFailures"] == []
    # 4 nodes x 8 = 32 - 16 allocated = 16 unallocated; a: 50 % of its own 8
    assert harness.cohort_gpu() == "16" and harness.cq_gpu("a") == "4"
    node = harness.sim.get("Node", "p5-0")
    node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    harness.sim.set_node(node)
    harness.sim.clear_requests()
    harness.send(json.loads((EVENTS / "hyperpod-node-health-event.json").read_text()))
    assert harness.drain()["batchItemFailures"] == []
    # Then the Cohort lends 24 - 16 = 8, a's limit stays 4, and the Cohort is the one object written
    assert harness.cohort_gpu() == "8" and harness.cq_gpu("a") == "4"
    writes = [
        (r.method, r.path.split("?")[0]) for r in harness.sim.requests if r.method in ("PATCH", "POST", "PUT", "DELETE")
    ]
    assert writes == [("PATCH", "/apis/kueue.x-k8s.io/v1beta2/cohorts/shared-pool")], writes
    pool = harness.store.get_pool("demo")
    assert pool.generation == 2 and pool.pool["excludedNodes"] == {"p5-0": "NotReady"}
    assert [h.generation for h in reversed(harness.store.list_history("demo"))] == [1, 2]


def test_on_the_pool_basis_a_node_going_not_ready_shrinks_the_limits_in_the_cluster(harness):
    assert harness.recalc()["batchItemFailures"] == []
    assert harness.cq_gpu("a") == "12"  # pool 16 unallocated + 8 lent by b -> 50 %
    node = harness.sim.get("Node", "p5-0")
    node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    harness.sim.set_node(node)
    harness.send(json.loads((EVENTS / "hyperpod-node-health-event.json").read_text()))
    assert harness.drain()["batchItemFailures"] == []
    assert harness.cq_gpu("a") == "8"
    pool = harness.store.get_pool("demo")
    assert pool.generation == 2 and pool.pool["excludedNodes"] == {"p5-0": "NotReady"}
    assert [h.generation for h in reversed(harness.store.list_history("demo"))] == [1, 2]


def test_quota_raised_unallocated_shrinks(quota_harness):
    harness = quota_harness
    harness.recalc()
    current = harness.store.get_quota("demo", "a-quota")
    harness.store.update_quota("demo", "a-quota", quota_body("a", 16), target_version=current.version)
    harness.recalc()
    assert harness.store.get_pool("demo").pool["unallocated"]["ml.p5.48xlarge"][GPU] == "8"
    assert harness.cohort_gpu() == "8"
    assert harness.cq_gpu("a", "nominalQuota") == "16"
    assert harness.cq_gpu("a") == "8"  # 50 % of its own 16


def test_idle_resource_sharing_disabled_cohort_quota_zero(quota_harness):
    harness = quota_harness
    harness.recalc()
    assert harness.cohort_gpu() == "16"
    harness.store.put_scheduler_config("demo", {"SchedulerConfig": {"IdleResourceSharing": "Disabled"}})
    harness.recalc()
    assert harness.cohort_gpu() == "0"
    assert harness.cq_gpu("a") == "4"  # 50 % of its own 8, as before: all it finds idle now is b's lent 8


def test_on_the_pool_basis_idle_resource_sharing_disabled_leaves_what_lenders_lend(harness):
    harness.recalc()
    assert harness.cq_gpu("a") == "12"  # (16 unallocated + 8 lent by b) x 50 %
    harness.store.put_scheduler_config("demo", {"SchedulerConfig": {"IdleResourceSharing": "Disabled"}})
    harness.recalc()
    assert harness.cohort_gpu() == "0"
    assert harness.cq_gpu("a") == "4"  # only b's 8 lent GPUs, 50 %


def test_the_same_event_twice_writes_nothing_the_second_time(quota_harness):
    harness = quota_harness
    harness.recalc()
    pool = harness.store.get_pool("demo")
    harness.sim.clear_requests()
    harness.recalc()
    again = harness.store.get_pool("demo")
    assert (again.generation, again.computed_at) == (pool.generation, pool.computed_at)
    writes = [r for r in harness.sim.requests if r.method in ("PATCH", "POST", "PUT", "DELETE")]
    assert writes == []
    assert len(harness.store.list_history("demo")) == 1


def test_kubernetes_outage_keeps_the_last_pool_then_converges(quota_harness):
    harness = quota_harness
    harness.recalc()
    before = harness.store.get_pool("demo")
    harness.sim.outage("refuse")
    out = harness.recalc()
    assert len(out["batchItemFailures"]) == 1  # SQS retries it
    kept = harness.store.get_pool("demo")
    assert kept.generation == before.generation and kept.pool == before.pool
    assert kept.read_failure
    harness.sim.restore()
    harness.sim.delete_node("p5-3")
    assert harness.recalc()["batchItemFailures"] == []
    after = harness.store.get_pool("demo")
    assert after.generation == before.generation + 1 and after.read_failure == ""
    assert harness.cohort_gpu() == "8"  # 24 - 16 allocated
    assert harness.cq_gpu("a") == "4"  # 50 % of its own 8
