"""Another controller manages idleshare's ClusterQueues too (HyperPod task governance, an admin's GitOps):
idleshare does not fight it for a field unless told to, on the real apiserver."""

from __future__ import annotations

import copy
import dataclasses

from devkit.kube import workloads as wl
from tests.e2e.conftest import GPU, P5, p5_nodes, quota


def test_a_foreign_field_manager_is_reported_not_fought_and_take_ownership_takes_it(make_cluster):
    # Given alpha and beta governed by idleshare
    cluster = make_cluster(p5_nodes(4))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=150))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    assert cluster.limit("alpha", P5, GPU) == "12"  # 150% of its own 8
    # And a GitOps controller that server-side applies its own resourceGroups to alpha's ClusterQueue
    cq = cluster.cluster_queue("alpha")
    theirs = {
        "apiVersion": cq["apiVersion"],
        "kind": "ClusterQueue",
        "metadata": {"name": cq["metadata"]["name"]},
        "spec": {"resourceGroups": copy.deepcopy(cq["spec"]["resourceGroups"])},
    }
    gpu = next(r for r in theirs["spec"]["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == GPU)
    gpu["borrowingLimit"] = "2"
    cluster.kube.apply(theirs, "gitops", force=True)
    # When changes make idleshare want other limits for alpha (BorrowLimit 200%: 16) and beta (one node more)
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=200))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 2}], strategy="Lend"))
    # Then alpha's ClusterQueue keeps GitOps' value, beta's got idleshare's, and the conflict is on record:
    # apply status Conflict naming the object, the field and the other manager (the alarm's metric counts it)
    assert cluster.limit("alpha", P5, GPU) == "2"
    assert cluster.limit("beta", P5, GPU, "nominalQuota") == "16"
    pool = cluster.pipeline.store.get_pool(cluster.spec.cluster_id)
    assert pool.apply_status == "Conflict", cluster.pipeline.logs.getvalue()[-3000:]
    assert "ForeignFieldManager" in pool.apply_message
    assert "ClusterQueue/hyperpod-ns-alpha-clusterqueue: .spec.resourceGroups owned by gitops" in pool.apply_message
    # And every later recompute reports it again, and changes nothing of theirs
    cluster.recalculate()
    assert cluster.limit("alpha", P5, GPU) == "2"
    assert cluster.pipeline.store.get_pool(cluster.spec.cluster_id).apply_status == "Conflict"
    # When the cluster is set to take ownership (field_ownership: Take in the CDK config)
    store, cid = cluster.pipeline.store, cluster.spec.cluster_id
    store.put_cluster(dataclasses.replace(store.get_cluster(cid), field_ownership="Take"))
    cluster.recalculate()
    # Then idleshare's limit is in the cluster (200% of alpha's own 8 = 16) and the status is clean again
    assert cluster.limit("alpha", P5, GPU) == "16"
    assert cluster.pipeline.store.get_pool(cid).apply_status == "Applied"
    managers = {
        m["manager"]
        for m in cluster.cluster_queue("alpha")["metadata"]["managedFields"]
        if m["operation"] == "Apply" and "f:resourceGroups" in str(m.get("fieldsV1"))
    }
    assert managers == {"idleshare"}
    cluster.wait_active("alpha")
    assert wl.cluster_queue_of("alpha") == cluster.cluster_queue("alpha")["metadata"]["name"]
