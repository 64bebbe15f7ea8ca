"""Another controller manages idleshare's ClusterQueues too (HyperPod task governance, an admin's GitOps):
idleshare does not fight it for a field unless told to, on the real apiserver."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from devkit.kube import workloads as wl
from idleshare.domain.cluster_settings import FieldOwnership
from tests.e2e.conftest import GPU, P5, p5_nodes, quota
from tests.kube.fixtures import as_written


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
    store.put_cluster(store.get_cluster(cid).with_settings(field_ownership=FieldOwnership.TAKE))
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


KUEUE = "kueue.x-k8s.io/v1beta2"
VICTIM_CQ = "hyperpod-ns-victim-clusterqueue"


def platform_objects() -> list[dict[str, Any]]:
    """What a platform team made before idleshare came (server-side applied as its own field manager): a priority
    class and a ClusterQueue under the names idleshare will want (priority class ``high``, team ``victim``)."""
    return [
        {
            "apiVersion": KUEUE,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high-priority"},
            "value": 1000,
            "description": "the platform team's",
        },
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": VICTIM_CQ, "labels": {"team": "platform"}},
            "spec": {"namespaceSelector": {}, "stopPolicy": "Hold"},
        },
    ]


@pytest.mark.parametrize("ownership", ["Respect", "Take"])
def test_objects_another_manager_created_are_never_adopted_nor_deleted_and_are_named(make_cluster, ownership):
    # Given a cluster in either field-ownership mode, where a platform team created (as field manager "platform")
    # the WorkloadPriorityClass high-priority and the ClusterQueue of team "victim" before idleshare wrote anything
    cluster = make_cluster(p5_nodes(4))
    store, cid = cluster.pipeline.store, cluster.spec.cluster_id
    store.put_cluster(store.get_cluster(cid).with_settings(field_ownership=FieldOwnership(ownership)))
    for obj in platform_objects():
        cluster.kube.apply(obj, "platform")
    before = {o["kind"]: cluster.kube.get(o["kind"], o["metadata"]["name"]) for o in platform_objects()}
    # When a quota admin gives team victim (and alpha) a quota and configures priority classes high and low
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}]))
    cluster.put_quota(quota("victim", [{"InstanceType": P5, "Count": 1}]))
    cluster.scheduler_config({"PriorityClasses": [{"Name": "high", "Weight": 100}, {"Name": "low", "Weight": 10}]})
    # Then the platform's objects are exactly as they were: not labelled, not marked, not written at all
    for kind, theirs in before.items():
        now = cluster.kube.get(kind, theirs["metadata"]["name"])
        assert as_written(now) == as_written(theirs), kind
        assert as_written(now)["managers"] == {"platform"}, kind
    # And both are named as ForeignObject on the pool (apply status Conflict), every time
    pool = store.get_pool(cid)
    assert pool.apply_status == "Conflict", pool.apply_message
    assert f"ForeignObject: WorkloadPriorityClass/high-priority, ClusterQueue/{VICTIM_CQ} " in pool.apply_message
    # And everything else is written as usual: idleshare's own objects, created with its marker
    for kind, name in [("WorkloadPriorityClass", "low-priority"), ("ClusterQueue", "hyperpod-ns-alpha-clusterqueue")]:
        ours = cluster.kube.get(kind, name)
        assert ours["metadata"]["annotations"]["idleshare.io/created-by"] == "idleshare", (kind, name)
    assert cluster.kube.get("LocalQueue", "hyperpod-ns-victim-localqueue", "hyperpod-ns-victim") is not None
    assert cluster.limit("alpha", P5, GPU, "nominalQuota") == "8"
    # When idleshare's own objects change (alpha's quota grows), they are updated as before
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 2}]))
    assert cluster.limit("alpha", P5, GPU, "nominalQuota") == "16"
    # When the quota admin removes victim's quota and both priority classes
    cluster.delete_quota("victim-quota")
    store.delete_scheduler_config(cid)
    cluster.recalculate()
    # Then the platform's objects are still there, untouched; idleshare's own ones are deleted as before
    for kind, theirs in before.items():
        now = cluster.kube.get(kind, theirs["metadata"]["name"])
        assert now is not None and as_written(now) == as_written(theirs), kind
    assert cluster.kube.get("WorkloadPriorityClass", "low-priority") is None
    assert cluster.kube.get("LocalQueue", "hyperpod-ns-victim-localqueue", "hyperpod-ns-victim") is None
    # And with no wanted name held by someone else, the conflict is over
    assert store.get_pool(cid).apply_status == "Applied", store.get_pool(cid).apply_message


@pytest.mark.parametrize("ownership", ["Respect", "Take"])
def test_an_object_an_older_take_labelled_is_not_ours_and_never_deleted(make_cluster, ownership):
    # Given the platform's priority class as an idleshare without the creation marker left it after a Take: its
    # managed-by label and fields applied, forced, by field manager idleshare
    cluster = make_cluster(p5_nodes(2))
    store, cid = cluster.pipeline.store, cluster.spec.cluster_id
    store.put_cluster(store.get_cluster(cid).with_settings(field_ownership=FieldOwnership(ownership)))
    theirs = platform_objects()[0]
    cluster.kube.apply(theirs, "platform")
    old_take = {
        **theirs,
        "metadata": {"name": "high-priority", "labels": {"app.kubernetes.io/managed-by": "idleshare"}},
    }
    cluster.kube.apply(old_take | {"value": 100, "description": "SageMaker HyperPod priority class high"}, "idleshare",
                       force=True)  # fmt: skip
    taken = cluster.kube.get("WorkloadPriorityClass", "high-priority")
    # When the priority class is configured, then removed
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}]))
    cluster.scheduler_config({"PriorityClasses": [{"Name": "high", "Weight": 5}]})
    # Then it is named, not written (the weight 5 never reaches it) ...
    assert "ForeignObject: WorkloadPriorityClass/high-priority" in store.get_pool(cid).apply_message
    assert cluster.kube.get("WorkloadPriorityClass", "high-priority")["value"] == 100
    store.delete_scheduler_config(cid)
    cluster.recalculate()
    # ... and never deleted: the label alone does not make it idleshare's
    now = cluster.kube.get("WorkloadPriorityClass", "high-priority")
    assert now is not None and as_written(now) == as_written(taken)
