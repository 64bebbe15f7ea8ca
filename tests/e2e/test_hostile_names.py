"""Issue 35 on the real stack: a name the apiserver would refuse — a node's instance-type label, a priority class
stored before the API bounded it — is named in the pool and left out; every other object is still written."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import GPU, P5, P5_ALLOCATABLE, p5_nodes, quota
from tests.kube.fixtures import make_node

ODD = "GPU_Box.X"  # a valid label value (a kubelet may set it on itself), not a ResourceFlavor name


def _names(cluster: Any, kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in cluster.kube.objects(kind)}


def _pool(cluster: Any) -> Any:
    return cluster.pipeline.store.get_pool(cluster.spec.cluster_id)


def test_a_node_labelled_with_an_unwritable_instance_type_stops_nothing(make_cluster):
    # Given two p5 nodes and one that calls itself GPU_Box.X
    odd = make_node("hyperpod-i-odd0001", ODD, allocatable=P5_ALLOCATABLE)
    cluster = make_cluster([*p5_nodes(2), odd])
    # When two teams get quotas (each delivery recomputes and applies)
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=50))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    # Then every object is in the apiserver: the p5 flavor, the Cohort, both ClusterQueues with their limits
    pool = _pool(cluster)
    assert pool.apply_status == "Applied", (pool.apply_status, pool.apply_message, pool.read_failure)
    assert _names(cluster, "ResourceFlavor") == {P5}
    assert "shared-pool" in _names(cluster, "Cohort")
    assert cluster.limit("alpha", P5, GPU, "nominalQuota") == "8"
    assert cluster.limit("alpha", P5, GPU) == "4"  # 16 on two nodes, all allocated; beta lends 8: 50% of 8
    assert cluster.limit("beta", P5, GPU, "lendingLimit") == "8"
    cluster.wait_active("alpha", "beta")  # Kueue found every flavor and the cohort
    # And the pool names the node with its reason, and the issue names the node and the value
    assert pool.pool["excludedNodes"] == {"hyperpod-i-odd0001": "InvalidInstanceType"}
    issue = next(i for i in pool.pool["issues"] if i["code"] == "InvalidInstanceType")
    assert issue["subject"] == ODD and "hyperpod-i-odd0001" in issue["message"]
    # And again on the next run (the failure used to be permanent from the second run on)
    cluster.recalculate()
    assert _pool(cluster).apply_status == "Applied" and _names(cluster, "ResourceFlavor") == {P5}


def test_a_stored_priority_class_no_job_could_name_leaves_the_others_written(make_cluster):
    # Given a cluster with a quota, and priority classes stored straight into the store (before the API's bound)
    cluster = make_cluster(p5_nodes(2))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=50))
    long, unusable = "p" * 300, "u" * 55  # <name>-priority: 309 characters; 64, past a label value's 63
    classes = [{"Name": long, "Weight": 1}, {"Name": unusable, "Weight": 2}, {"Name": "training", "Weight": 40}]
    # When the scheduler config is written (and recomputed), then a quota changes
    cluster.scheduler_config({"PriorityClasses": classes})
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    # Then the good priority class and every other object are written, the two bad ones left out and named
    pool = _pool(cluster)
    assert pool.apply_status == "Applied", (pool.apply_status, pool.apply_message, pool.read_failure)
    assert _names(cluster, "WorkloadPriorityClass") == {"training-priority"}
    assert cluster.limit("alpha", P5, GPU) == "4" and cluster.limit("beta", P5, GPU, "lendingLimit") == "8"
    cluster.wait_active("alpha", "beta")
    left_out = {i["subject"] for i in pool.pool["issues"] if i["code"] == "InvalidObjectName"}
    assert left_out == {f"WorkloadPriorityClass/{long[:100]}", f"WorkloadPriorityClass/{unusable}-priority"}
