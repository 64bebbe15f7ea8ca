"""Bursts through the running pipeline: many node events for one cluster and fewer for many others,
delivered as fast as this process can (router handler in-process, SQS FIFO on moto, the recompute
handler fed batches of up to 10 like the SQS event source, one real kube-apiserver per cluster,
DynamoDB Local). Given N clusters, When a burst of node events arrives, Then recomputes coalesce
(at most one per cluster per dedup window per poll) and the final state of every cluster is exactly
a fresh ``idleshare plan`` of its nodes and quotas.

:class:`BurstRig` is shared with ``tests/bench/bench_burst.py`` (the full 10,000 + 20 x 100 size);
this test runs a scaled-down burst (400 + 2 x 10) to stay fast. Every governed cluster needs a Kubernetes API
of its own (nodes and ResourceFlavors are cluster-wide): "big" is the session's stack (with Kueue), each
other one a kube-apiserver + etcd with Kueue's CRDs and idleshare's RBAC but no Kueue manager (nothing is
admitted in a burst), started in parallel. A real apiserver takes seconds and ~400 MB to start where the
old in-process simulator took milliseconds, hence 2 other clusters here where there were 10.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devkit import sqs as event_source
from devkit.kube.client import Kube
from devkit.kube.stack import KubeStack, ensure_built
from idleshare.adapters.aws import EventBridgePublisher, SqsRecomputeQueue
from idleshare.adapters.kube import LightkubeCluster
from idleshare.adapters.ports import ClusterRecord
from idleshare.adapters.sqs_records import SqsRecordReturns
from idleshare.adapters.store import DynamoStore
from idleshare.handlers import recompute, router
from idleshare.runtime import wiring
from tests.builders import quota_body
from tests.integration.invariants import GenerationLog, assert_converged, assert_pool_invariants
from tests.integration.test_pipeline import CONTEXT
from tests.kube.fixtures import make_node, wait_serving

pytestmark = pytest.mark.integration

HEALTH = "sagemaker.amazonaws.com/node-health-status"
ACCOUNT = "111122223333"


def arn(cluster_id: str) -> str:
    return f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:cluster/{cluster_id}"


def node_health_event(cluster_id: str, seq: int, status: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": f"burst-{cluster_id}-{seq}",
        "detail-type": "SageMaker HyperPod Cluster Node Health Event",
        "source": "aws.sagemaker",
        "account": ACCOUNT,
        "time": "2026-12-01T00:00:00Z",
        "region": "us-west-2",
        "resources": [arn(cluster_id)],
        "detail": {
            "ClusterName": cluster_id,
            "ClusterArn": arn(cluster_id),
            "InstanceId": f"i-{seq:017x}",
            "Tags": {},
            "HealthSummary": {"HealthStatus": status, "HealthStatusReason": "burst", "RepairAction": "None"},
        },
    }


class CountingQueue(SqsRecomputeQueue):
    """The real SQS adapter, noting per cluster which (dedup window, poll) each enqueue fell in:
    the most messages SQS can hold for a cluster, whatever it deduplicates, is the number of those."""

    def __init__(self, client: Any, url: str, rig: BurstRig, clock: Callable[[], float]) -> None:
        super().__init__(client, url, clock=clock)
        self.rig = rig
        self.slots: dict[str, set[tuple[int, int]]] = defaultdict(set)

    def enqueue(self, cluster_id: str, reason: str, **kwargs: Any) -> str:
        self.slots[cluster_id].add((int(self.clock() // self.window_seconds), self.rig.polls))
        return super().enqueue(cluster_id, reason, **kwargs)


@dataclass
class Stats:
    events: dict[str, int] = field(default_factory=Counter)
    recomputes: dict[str, int] = field(default_factory=Counter)
    batches: int = 0
    records: int = 0
    failures: int = 0
    router_seconds: float = 0.0
    drain_seconds: float = 0.0
    wall_seconds: float = 0.0

    @property
    def total_events(self) -> int:
        return sum(self.events.values())

    @property
    def total_recomputes(self) -> int:
        return sum(self.recomputes.values())


class BurstRig:
    """N governed clusters, each with its own kube-apiserver (``nodes`` small nodes, two quotas), wired to
    the real handlers. Use inside ``mock_aws()``; :meth:`close` stops the apiservers it started."""

    def __init__(
        self,
        table: Any,
        cluster_ids: list[str],
        *,
        nodes: int = 4,
        seconds_per_event: float | None = None,
        first: Kube | None = None,
    ) -> None:
        """``seconds_per_event``: a simulated clock for the dedup windows advancing that much per event
        (deterministic coalescing); None: the real clock (as fast as this process goes). ``first``: an
        emptied running stack (its admin client) for the first cluster; the others get one each."""
        self.store = DynamoStore(table)
        self.seconds_per_event = seconds_per_event
        self._now = [1_000_000.0]
        self.polls = 0
        self.stats = Stats()
        sqs = boto3.client("sqs", region_name="us-east-1")
        self.sqs = sqs
        # The deployed queue (its delivery delay, visibility timeout and redrive policy) on the rig's clock: the
        # simulated one, or the wall clock plus the delays skipped (the benchmark times the work for real)
        clock = event_source.WallClock() if seconds_per_event is None else event_source.Clock(self._now)
        self.time = clock
        self._sqs_time = event_source.sqs_time(clock)
        self._sqs_time.__enter__()
        self.queue_url = event_source.create_queue(sqs, "burst.fifo").url
        events = boto3.client("events", region_name="us-east-1")
        events.create_event_bus(Name="idleshare")
        self.queue = CountingQueue(event_source.Deduplicating(sqs, clock), self.queue_url, self, clock)
        self.sims: dict[str, Kube] = {}
        self.kubes: dict[str, LightkubeCluster] = {}
        self._stacks: list[KubeStack] = []
        self._admins: list[Kube] = []
        self.node_names = [f"n{i}" for i in range(nodes)]
        try:
            for cid, sim in zip(cluster_ids, self._start(len(cluster_ids), first), strict=True):
                self.sims[cid] = sim
                sim.seed_nodes([make_node(name, instance_type="ml.p5.48xlarge") for name in self.node_names])
                self.kubes[cid] = sim.idleshare_adapter(timeout=30)
                self.store.put_cluster(ClusterRecord(cid, f"{cid}-eks", arn(cid)))
                self.store.create_quota(cid, quota_body("a", 8))
                self.store.create_quota(cid, quota_body("b", 8, "Lend"))
        except BaseException:
            self.close()
            raise
        wiring.install(
            wiring.Dependencies(
                store=self.store,
                queue=self.queue,
                publisher=EventBridgePublisher(events, "idleshare"),
                kube_for=self._kube_for,
                clock=clock,
                returns=SqsRecordReturns(sqs),
            )
        )

    def _start(self, n: int, first: Kube | None) -> list[Kube]:
        """Admin clients of ``n`` clusters: ``first`` and light stacks started in parallel."""
        from concurrent.futures import ThreadPoolExecutor

        binaries = ensure_built()
        wanted = n - (first is not None)

        def light(_: int) -> KubeStack:
            stack = KubeStack(Path(tempfile.mkdtemp(prefix="idleshare-burst-")), binaries, kueue=False)
            self._stacks.append(stack)  # stopped by close() even when its start fails halfway
            return stack.start()

        with ThreadPoolExecutor(max_workers=max(1, wanted)) as pool:
            stacks = list(pool.map(light, range(wanted)))
        self._admins = [Kube.admin(stack) for stack in stacks]
        for admin in self._admins:
            wait_serving(admin)
        return ([first] if first is not None else []) + self._admins

    def _kube_for(self, cluster: ClusterRecord) -> LightkubeCluster:
        self.stats.recomputes[cluster.cluster_id] += 1  # Recomputer asks once per recompute
        return self.kubes[cluster.cluster_id]

    @property
    def now(self) -> float:
        return self.time()

    @now.setter
    def now(self, value: float) -> None:
        self.time.advance(value - self.time())

    def close(self) -> None:
        wiring.install(None)
        self._sqs_time.__exit__(None, None, None)
        for kube in self.kubes.values():
            kube.close()
        for admin in self._admins:
            admin.close()
        for stack in self._stacks:
            stack.stop()

    # -- driving ----------------------------------------------------------------------------------

    def change_and_send(self, cluster_id: str, seq: int, rng: random.Random) -> None:
        """A node of the cluster changes health, then HyperPod's event for it goes to the router."""
        sim = self.sims[cluster_id]
        node = sim.get("Node", rng.choice(self.node_names))
        assert node is not None
        status = rng.choice(("Unhealthy", "Schedulable", "Schedulable"))
        node["metadata"]["labels"][HEALTH] = status
        sim.set_node(node)
        if self.seconds_per_event is not None:
            self.now += self.seconds_per_event
        started = time.perf_counter()
        out = router.handler(
            node_health_event(cluster_id, seq, "Healthy" if status == "Schedulable" else status), CONTEXT
        )
        self.stats.router_seconds += time.perf_counter() - started
        assert out == {"enqueued": [cluster_id]}, out
        self.stats.events[cluster_id] += 1

    def drain(self) -> int:
        """Everything the queue holds, batch by batch, like the SQS event source; returns the records."""
        started = time.perf_counter()
        self.polls += 1

        esm = event_source.EventSourceMapping(self.sqs, self.queue_url, recompute.handler, self.time)
        invocations = esm.run(max_seconds=3600)
        failed = sum(len(i.failed) for i in invocations)
        self.stats.failures += failed
        assert not failed, f"{failed} recompute(s) failed in a burst"
        delivered = sum(len(i.records) for i in invocations)
        self.stats.batches += len(invocations)
        self.stats.records += delivered
        self.stats.drain_seconds += time.perf_counter() - started
        return delivered

    def burst(
        self,
        per_cluster: dict[str, int],
        *,
        poll_every: int,
        seed: int = 6,
        after_event: Callable[[int], None] | None = None,
    ) -> Stats:
        """Every cluster's events, interleaved at random; the queue is drained every ``poll_every``
        events (the event source polling while events keep coming) and at the end. ``after_event(i)``
        runs after the i-th event, outside the timings (the benchmark samples its floor there)."""
        rng = random.Random(seed)
        order = [cid for cid, n in per_cluster.items() for _ in range(n)]
        rng.shuffle(order)
        seqs: Counter[str] = Counter()
        started = time.perf_counter()
        for i, cid in enumerate(order, 1):
            seqs[cid] += 1
            self.change_and_send(cid, seqs[cid], rng)
            if after_event is not None:
                after_event(i)
            if i % poll_every == 0:
                self.drain()
        while self.drain():
            pass
        self.stats.wall_seconds = time.perf_counter() - started
        return self.stats

    def check(self) -> None:
        """Coalescing bounds and the exact final state of every cluster."""
        for cid in self.sims:
            recomputes = self.stats.recomputes[cid]
            slots = len(self.queue.slots[cid])
            # a window's leading and trailing recompute: at most two per (window, poll) slot
            assert 1 <= recomputes <= 2 * slots, f"{cid}: {recomputes} recomputes for {slots} (window, poll) slots"
            assert recomputes < self.stats.events[cid], f"{cid}: no coalescing"
            assert_converged(self.sims[cid], self.store, cid)
            assert_pool_invariants(self.store, cid)
            GenerationLog(self.store, cid).observe()


def cluster_ids(others: int) -> list[str]:
    return ["big", *(f"c{i:02d}" for i in range(1, others + 1))]


@pytest.fixture
def rig_factory(ddb_table, kube, monkeypatch) -> Iterator[Callable[..., BurstRig]]:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    rigs: list[BurstRig] = []
    with mock_aws():

        def make(ids: list[str], **kwargs: Any) -> BurstRig:
            rig = BurstRig(ddb_table, ids, first=kube, **kwargs)
            rigs.append(rig)
            return rig

        try:
            yield make
        finally:
            for rig in rigs:
                rig.close()


def test_a_burst_coalesces_and_every_cluster_ends_exactly_right(rig_factory):
    # Given 3 small clusters, "big" and 2 others; events 20 ms apart (simulated clock): 3 dedup windows
    ids = cluster_ids(2)
    rig = rig_factory(ids, seconds_per_event=0.02)
    # When 400 node events for "big" and 10 for each other arrive, the queue polled every 250 events
    stats = rig.burst({"big": 400, **{cid: 10 for cid in ids[1:]}}, poll_every=250)
    # Then every event was routed, recomputes coalesced, and every cluster's pool and objects are exact
    assert stats.total_events == 420 and stats.failures == 0
    rig.check()
    # a leading and a trailing recompute for each of 2 polls + at most 2 window boundaries, not 400
    assert stats.recomputes["big"] <= 8
    assert stats.total_recomputes <= 8 * len(ids)
