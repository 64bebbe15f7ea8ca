"""Kubernetes API faults through the running pipeline (router -> SQS -> recompute, DynamoDB Local, the real
kube-apiserver + Kueue; the faults a real server will not make on demand come from the recording proxy in
front of it, every other answer is the server's own): Given a converged cluster and a change to push, When the API server fails in some way,
Then the failure is recorded, nothing stored is wrong, and one more recompute converges the cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from idleshare.adapters.kube import LightkubeCluster
from idleshare.domain.model import BorrowLimitBasis
from tests.integration.invariants import assert_converged, assert_pool_invariants, recovers, settle
from tests.integration.test_pipeline import EVENTS, Harness, governed, harness  # noqa: F401  (fixture)
from tests.kube.fixtures import FakeConnector, ProxiedKube

pytestmark = pytest.mark.integration

NODES = "^/api/v1/nodes$"
CQS = "^/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
CQ_A = "^/apis/kueue.x-k8s.io/v1beta2/clusterqueues/hyperpod-ns-a-clusterqueue$"
CLIENT_TIMEOUT = 2.0  # the real server over TLS on a busy 2-core machine; a held request waits 8 s


def invalid_body() -> dict[str, Any]:
    """A 422 as Kueue's webhook phrases it, with the field it refuses."""
    field = "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit"
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "reason": "Invalid",
        "code": 422,
        "message": f'ClusterQueue.kueue.x-k8s.io "hyperpod-ns-a-clusterqueue" is invalid: {field}: Invalid value',
        "details": {"causes": [{"reason": "FieldValueInvalid", "message": "Invalid value", "field": field}]},
    }


# (fault, where it strikes: "read" before anything is persisted, "apply" after generation 2 is stored)
FAULTS = [
    pytest.param(lambda s: s.inject("GET", NODES, 500), "read", "HTTP 500", id="500 listing nodes"),
    pytest.param(lambda s: s.inject("GET", NODES, 503), "read", "HTTP 503", id="503 listing nodes"),
    pytest.param(lambda s: s.inject("GET", CQS + "$", 502), "apply", "HTTP 502", id="502 listing queues"),
    pytest.param(lambda s: s.inject("PATCH", CQ_A, 500), "apply", "HTTP 500", id="500 applying"),
    pytest.param(lambda s: s.inject("PATCH", CQ_A, 409), "apply", "HTTP 409", id="409 conflict applying"),
    pytest.param(
        lambda s: s.inject("PATCH", CQ_A, 422, body=invalid_body()),
        "apply",
        "borrowingLimit",
        id="422 rejected",
    ),
    pytest.param(lambda s: s.inject("GET", NODES, drop_connection=True), "read", "list nodes", id="dropped"),
    pytest.param(lambda s: s.inject_timeout("GET", NODES, seconds=8), "read", "timed out", id="timeout listing"),
    pytest.param(lambda s: s.inject_timeout("PATCH", CQ_A, seconds=8), "apply", "timed out", id="timeout applying"),
]


PERMANENT = {"422 rejected"}  # docs/operations.md's failure table: Kueue refusing one object is not retried, and
# is that object's alone (apply status Conflict, WriteRefused): the rest of the recompute is written


@pytest.mark.parametrize(("inject", "where", "message"), FAULTS)
def test_an_api_fault_is_recorded_retried_and_converges(harness, inject, where, message, request):  # noqa: F811
    # Given a converged cluster, a fast client timeout, and a node gone (limits must shrink)
    baseline, log = settle(harness)
    harness.kube = harness.sim.adapter(timeout=CLIENT_TIMEOUT)
    harness.sim.delete_node("p5-3")
    # When the API server fails during the recompute
    inject(harness.sim)
    out = harness.recalc()
    # Then the failure is recorded where it happened; a transient one hands the message back to SQS, a
    # permanent one (Kueue refused the object: retrying the same apply cannot help) is consumed and alarmed
    permanent = request.node.callspec.id in PERMANENT
    assert len(out["batchItemFailures"]) == (0 if permanent else 1)
    stored = harness.store.get_pool("demo")
    if where == "read":  # a failed read is not zero capacity: the last pool stays
        assert stored.generation == 1 and stored.pool == baseline
        assert message in stored.read_failure
    else:  # the new pool is stored; its apply failed (or, refused for good, the object is named) and says why
        assert stored.generation == 2 and stored.apply_status == ("Conflict" if permanent else "Failed")
        assert message in stored.apply_message
        assert ("WriteRefused: ClusterQueue/hyperpod-ns-a-clusterqueue" in stored.apply_message) == permanent
    # And the next recompute (SQS's redelivery, or for a permanent failure the schedule's) converges, invariants
    # holding throughout
    harness.sim.clear_faults()
    pool = recovers(harness, log, baseline)
    assert pool["capacity"]["ml.p5.48xlarge"]["nvidia.com/gpu"] == "24"
    assert log.seen[-1] == 2


class FailingMidList(LightkubeCluster):
    """Small pages; the API server goes away once the first page has been read."""

    def __init__(self, sim: ProxiedKube) -> None:
        super().__init__(sim.url, token=lambda: sim.stack.idleshare_token, timeout=CLIENT_TIMEOUT, name="demo")
        self.sim = sim

    def list_nodes(self, page_size: int = 500) -> Iterator[dict[str, Any]]:
        for i, node in enumerate(super().list_nodes(page_size=2)):
            if i == 0:  # page 1 is in hand; page 2 is not
                self.sim.outage("refuse")
            yield node


def test_an_outage_on_the_second_page_of_nodes_is_not_a_smaller_cluster(harness):  # noqa: F811
    # Given a converged cluster read two nodes per page
    baseline, log = settle(harness)
    harness.kube = FailingMidList(harness.sim)
    # When the API server goes away after page 1
    out = harness.recalc()
    # Then the half-read node list is not taken as the cluster: the pool is kept, the failure recorded
    assert len(out["batchItemFailures"]) == 1
    stored = harness.store.get_pool("demo")
    assert stored.generation == 1 and stored.pool == baseline and "list nodes" in stored.read_failure
    # And once it is back, one more recompute converges and nothing moved
    harness.sim.restore()
    harness.kube = harness.sim.adapter(timeout=CLIENT_TIMEOUT)
    assert recovers(harness, log, baseline) == baseline
    assert log.seen[-1] == 1 and harness.store.get_pool("demo").read_failure == ""


class DyingMidApply(LightkubeCluster):
    """The API server goes away after ``survive`` writes of Kueue objects (creates, on a cluster never written to;
    server-side applies)."""

    def __init__(self, sim: ProxiedKube, survive: int) -> None:
        super().__init__(sim.url, token=lambda: sim.stack.idleshare_token, timeout=CLIENT_TIMEOUT, name="demo")
        self.sim, self.survive, self.applied = sim, survive, 0
        self.write_concurrency = 1  # "dies after 3 applies" means 3 in sequence

    def apply(self, obj: dict[str, Any], *, force: bool = False) -> None:
        if self.applied == self.survive:
            self.sim.outage("refuse")
        super().apply(obj, force=force)
        self.applied += 1

    def create(self, obj: dict[str, Any], *, force: bool = False) -> str:
        if self.applied == self.survive:
            self.sim.outage("refuse")
        created = super().create(obj, force=force)
        self.applied += 1
        return created


def test_an_outage_halfway_through_the_first_apply_is_finished_by_the_next_recompute(harness):  # noqa: F811
    # Given a cluster idleshare has never written to, whose API server dies after 3 applies
    harness.kube = DyingMidApply(harness.sim, survive=3)
    # When the first recompute runs
    out = harness.recalc()
    # Then generation 1 is stored, its apply is Failed, and the cluster holds only part of it
    assert len(out["batchItemFailures"]) == 1
    stored = harness.store.get_pool("demo")
    assert stored.generation == 1 and stored.apply_status == "Failed"
    assert harness.kube.applied == 3
    assert harness.sim.get("ClusterQueue", "hyperpod-ns-b-clusterqueue") is None
    assert_pool_invariants(harness.store, "demo")
    # When the API server is back and the message is redelivered
    harness.sim.restore()
    harness.kube = harness.sim.adapter(timeout=CLIENT_TIMEOUT)
    out = harness.drain()
    # Then the cluster converges on the same generation (the digest did not change; the diff did)
    assert out["batchItemFailures"] == []
    assert harness.store.get_pool("demo").generation == 1
    assert_converged(harness.sim, harness.store, "demo")
    assert harness.cq_gpu("a") == "12"


@pytest.fixture
def eks_harness(ddb_table, proxied_kube, monkeypatch) -> Iterator[Harness]:
    def through_eks(h: Harness) -> None:
        h.kube.close()
        connector = FakeConnector(h.sim.stack, h.sim.proxy.url, name="demo-eks")
        h.kube = LightkubeCluster.from_eks(connector, "demo-eks", timeout=5.0)  # type: ignore[arg-type]
        h.connector = connector  # type: ignore[attr-defined]

    with governed(ddb_table, proxied_kube, monkeypatch, connect=through_eks, basis=BorrowLimitBasis.POOL) as h:
        yield h


@pytest.mark.parametrize("during", ["read", "apply"])
def test_an_expired_token_is_refreshed_and_retried_within_the_invocation(eks_harness, during):
    # Given a converged cluster reached with EKS token 0
    h = eks_harness
    baseline, log = settle(h)
    h.sim.delete_node("p5-3")
    # When token 0 expires (the API server now takes only newer ones) during the read or during the apply
    if during == "read":
        h.connector.current = 1
    else:
        h.sim.inject("PATCH", CQ_A, 401, message="Unauthorized")
    out = h.recalc()
    # Then the 401 signs a fresh token and the same request is retried at once: the recompute converges in the same
    # invocation, nothing is handed back to SQS and no failure is recorded
    assert out["batchItemFailures"] == []
    assert h.connector.invalidated == 1
    stored = h.store.get_pool("demo")
    assert "HTTP 401" not in stored.read_failure + stored.apply_message
    assert h.cq_gpu("a") == "8"
    assert [r.status for r in h.sim.requests].count(401) == 1
    assert recovers(h, log, baseline)["capacity"]["ml.p5.48xlarge"]["nvidia.com/gpu"] == "24"


def test_an_outage_keeps_the_invariants_for_every_event_in_it(harness):  # noqa: F811
    # Given a converged cluster whose API server refuses connections
    baseline, log = settle(harness)
    harness.sim.outage("refuse")
    # When several events arrive during the outage
    for _ in range(3):
        harness.send(json.loads((EVENTS / "hyperpod-node-health-event.json").read_text()))
        out = harness.drain()
        # every one handed back to SQS: the leading ones failed, the trailing ones behind them not due yet
        assert len(out["batchItemFailures"]) >= 1
        assert len(out["batchItemFailures"]) + len(out["deferred"]) == out["records"]
        log.observe()
    # Then nothing moved, and once it is back one more recompute converges
    assert harness.store.get_pool("demo").pool == baseline
    harness.sim.restore()
    assert recovers(harness, log, baseline) == baseline
