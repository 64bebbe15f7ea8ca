"""HyperPod's own task governance on a cluster idleshare governs, on the real apiserver + Kueue: its objects are
made as it makes them (its labelled team namespace, its unallocated-resource-sharing lender ClusterQueue, its field
manager on one of idleshare's queues), the recompute names it as a pool issue and changes nothing of theirs.

Dynamic Quota Orchestration is not here: the stack's Kueue v0.19.2 ClusterQueue and Cohort CRDs have no
``status.effectiveQuotas`` and the apiserver prunes it (tests/unit/test_coexistence.py proves the rule and the
adapter's projection on v0.20's shape; docs/decisions.md)."""

from __future__ import annotations

from devkit.kube import workloads as wl
from idleshare.domain.coexistence import HYPERPOD_MANAGED_NAMESPACE_LABEL, HYPERPOD_TASK_GOVERNANCE_ACTIVE
from idleshare.names import FIELD_MANAGER
from tests.e2e.conftest import GPU, P5, p5_nodes, quota

HYPERPOD = "sagemaker-hyperpod-task-governance"  # a field manager of HyperPod's, as it would write
LENDER = "hyperpod-ns-idle-resource-sharing-cq-1"
TEAM_NS = "hyperpod-ns-gamma"


def managers(obj: dict) -> set[str]:
    return {m["manager"] for m in obj["metadata"].get("managedFields") or ()}


def test_hyperpod_task_governance_is_named_and_its_objects_are_left_alone(make_cluster):
    # Given a cluster idleshare governs (team alpha)
    cluster = make_cluster(p5_nodes(2))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=100))
    cid = cluster.spec.cluster_id
    issues = cluster.pipeline.store.get_pool(cid).pool["issues"]
    assert HYPERPOD_TASK_GOVERNANCE_ACTIVE not in {i["code"] for i in issues}
    # And task governance turned on beside it: a team namespace it labels, a lender queue of its unallocated
    # resource sharing, and its field manager on alpha's ClusterQueue (a label it sets)
    kube = cluster.kube
    labels = {HYPERPOD_MANAGED_NAMESPACE_LABEL: "true", "sagemaker.amazonaws.com/quota-allocation-id": "gamma"}
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM_NS, "labels": labels}}, HYPERPOD)
    resources = [{"name": GPU, "nominalQuota": "8"}]
    lender = {
        "apiVersion": cluster.cluster_queue("alpha")["apiVersion"],
        "kind": "ClusterQueue",
        "metadata": {"name": LENDER},
        "spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": P5, "resources": resources}]}]},
    }
    kube.apply(lender, HYPERPOD)
    alpha = wl.cluster_queue_of("alpha")
    kube.apply(
        {
            "apiVersion": lender["apiVersion"],
            "kind": "ClusterQueue",
            "metadata": {"name": alpha, "labels": {"sagemaker.amazonaws.com/team": "alpha"}},
        },
        HYPERPOD,
    )
    before = {k: kube.get(*k) for k in (("Namespace", TEAM_NS), ("ClusterQueue", LENDER))}
    # When idleshare recomputes
    cluster.recalculate()
    # Then the pool names task governance, each sign it saw, and how to keep one of the two
    pool = cluster.pipeline.store.get_pool(cid)
    (issue,) = [i for i in pool.pool["issues"] if i["code"] == HYPERPOD_TASK_GOVERNANCE_ACTIVE]
    assert issue["severity"] == "error", issue
    assert f"namespaces labelled {HYPERPOD_MANAGED_NAMESPACE_LABEL}=true ({TEAM_NS})" in issue["message"]
    assert f"ClusterQueues ({LENDER})" in issue["message"]
    assert f"field manager {HYPERPOD} on ClusterQueue/{alpha}" in issue["message"]
    assert "idleshare uninstall" in issue["message"] and "delete-compute-quota" in issue["message"]
    # And idleshare changed nothing of theirs: neither the namespace nor the lender queue is written or adopted
    after = {k: kube.get(*k) for k in before}
    assert after[("Namespace", TEAM_NS)] == before[("Namespace", TEAM_NS)]
    lender_after = after[("ClusterQueue", LENDER)]
    assert lender_after["spec"] == before[("ClusterQueue", LENDER)]["spec"]
    assert lender_after["metadata"].get("labels") == before[("ClusterQueue", LENDER)]["metadata"].get("labels")
    assert FIELD_MANAGER not in managers(lender_after) | managers(after[("Namespace", TEAM_NS)])
    # and it keeps writing its own queue (the label HyperPod set stays HyperPod's)
    assert cluster.limit("alpha", P5, GPU, "nominalQuota") == "8"
    assert cluster.cluster_queue("alpha")["metadata"]["labels"]["sagemaker.amazonaws.com/team"] == "alpha"
    # When task governance is switched off (its objects gone, its manager's fields released)
    kube.delete("ClusterQueue", LENDER)
    kube.drop_namespace(TEAM_NS)
    kube.apply({"apiVersion": lender["apiVersion"], "kind": "ClusterQueue", "metadata": {"name": alpha}}, HYPERPOD)
    kube.wait_for(lambda: kube.get("ClusterQueue", LENDER) is None, "the lender queue gone")
    cluster.recalculate()
    # Then the issue is gone
    pool = cluster.pipeline.store.get_pool(cid)
    assert HYPERPOD_TASK_GOVERNANCE_ACTIVE not in {i["code"] for i in pool.pool["issues"]}
