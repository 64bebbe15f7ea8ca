"""Pause and resume (docs/spec.md §3, "Pause"; issue 43), on the real apiserver + Kueue through the real handlers:
while a cluster is paused, a quota change, a node failing and an explicit recalculation each recompute, and none of
them writes to the cluster (every Kueue object keeps its resourceVersion) or makes a generation; resume requests a
recompute at once, and it brings the objects to what changed meanwhile."""

from __future__ import annotations

from typing import Any

from idleshare import names
from idleshare.domain.kueue import MANAGED_BY, MANAGED_BY_LABEL
from idleshare.parse.requests import Pause, parse
from idleshare.service.admin import Admin
from tests.e2e.conftest import GPU, P5, p5_nodes, quota
from tests.fakes import FakePublisher

OPERATOR = "arn:aws:iam::111122223333:role/ops"
KINDS = ("Cohort", "ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass")


def versions(kube: Any) -> dict[tuple[str, str, str], str]:
    """The resourceVersion of each object idleshare wrote, by kind, namespace and name."""
    return {
        (kind, o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for kind in KINDS
        for o in kube.objects(kind, labels=f"{MANAGED_BY_LABEL}={MANAGED_BY}")
    }


def test_a_paused_cluster_is_left_as_it_is_and_resume_recomputes_at_once(make_cluster):
    # Given a governed cluster of 4 p5 nodes, two teams of one node each, Kueue's queues active
    cluster = make_cluster(p5_nodes(4))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=100))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    cluster.wait_active("alpha", "beta")
    assert cluster.limit("alpha", P5, GPU, "nominalQuota") == "8" and cluster.cohort_quota() == "16"
    store, cid, bus = cluster.pipeline.store, cluster.spec.cluster_id, FakePublisher()
    admin = Admin(store, bus)
    generation = admin.pool(cid)["generation"]
    # When an operator pauses it
    paused = admin.pause(cid, parse(Pause, {"reason": "e2e maintenance"}), OPERATOR)
    assert paused["paused"] and paused["changed"] and bus.events == []
    before = versions(cluster.kube)
    assert len(before) >= 5, before
    # And meanwhile alpha's quota doubles, a node fails its health check, and someone asks for a recalculation
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 2}], borrow_limit=100))
    cluster.node_health("hyperpod-i-p50003", "Unschedulable")
    cluster.recalculate()
    # Then nothing in the cluster was written: every object idleshare wrote has its resourceVersion
    assert versions(cluster.kube) == before
    assert cluster.limit("alpha", P5, GPU, "nominalQuota") == "8"
    # And the pool is the one it was, shown paused, with the recomputes it skipped
    pool = admin.pool(cid)
    assert pool["generation"] == generation
    assert pool["pause"]["paused"] and pool["pause"]["by"] == OPERATOR and pool["pause"]["reason"] == "e2e maintenance"
    assert pool["pause"]["skippedRecomputes"] >= 3  # the quota change, the health event, the recalculation
    # When the operator resumes it
    resumed = admin.resume(cid, None, OPERATOR)
    [(detail_type, detail)] = bus.events
    assert detail_type == names.DT_RECALC_REQUESTED and detail["requestId"] == resumed["requestId"]
    delivery = cluster._deliver(detail_type, detail)  # the request, as idleshare's bus hands it to the router
    # Then that recompute ran at once and brought the cluster to what changed meanwhile
    assert delivery.recomputes >= 1 and not delivery.failures
    receipt = store.get_receipt(cid, resumed["requestId"])
    assert receipt is not None and receipt.status == "Done" and receipt.changed
    assert receipt.generation == generation + 1
    assert cluster.limit("alpha", P5, GPU, "nominalQuota") == "16"
    assert cluster.cohort_quota() == "0"  # 24 eligible GPUs, 16 + 8 allocated
    assert versions(cluster.kube) != before
    history = admin.history(cid)
    assert [e["action"] for e in history["pauses"]] == ["Resumed", "Paused"]
