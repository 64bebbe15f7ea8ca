"""Ownership recorded, not inferred (docs/spec.md §3, "Ownership"; issue 41, finding 1), on the real apiserver +
Kueue through the real handlers: a copy of an idleshare object made as people make them (``kubectl get -o yaml``,
renamed, ``kubectl create``: idleshare's label and creation marker kept) survives every recompute and is named; a
team's ClusterQueue whose label and marker someone removed is still deleted when the team goes, and the deletion is
named in the apply status and logged in the ownership record; objects made before the record existed are adopted
once, by the names idleshare gives them, and a copy is not."""

from __future__ import annotations

import copy
from typing import Any

from idleshare import table
from idleshare.domain.kueue import MANAGED_BY_LABEL
from idleshare.domain.kueue_diff import CREATED_BY_ANNOTATION
from tests.e2e.conftest import P5, p5_nodes, quota

SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


def copy_of(kube: Any, kind: str, name: str, new_name: str, namespace: str = "", new_namespace: str = "") -> dict:
    """What ``kubectl get -o yaml > x.yaml``, a rename and ``kubectl create -f x.yaml`` make."""
    theirs = copy.deepcopy(kube.get(kind, name, namespace))
    assert theirs is not None, (kind, name)
    theirs.pop("status", None)
    theirs["metadata"] = {k: v for k, v in theirs["metadata"].items() if k not in SERVER_SET}
    theirs["metadata"]["name"] = new_name
    if new_namespace:
        theirs["metadata"]["namespace"] = new_namespace
    assert theirs["metadata"]["labels"][MANAGED_BY_LABEL] == "idleshare"
    assert CREATED_BY_ANNOTATION in theirs["metadata"]["annotations"]
    return kube.create(theirs)


def test_copies_of_a_cq_an_lq_in_another_namespace_a_wpc_and_a_rf_survive_recomputes_and_are_named(make_cluster):
    # Given a cluster idleshare governs, with a priority class
    cluster = make_cluster(p5_nodes(2))
    cluster.scheduler_config({"PriorityClasses": [{"Name": "training", "Weight": 10}]})
    cluster.put_quota(quota("research", [{"InstanceType": P5, "Count": 1}], borrow_limit=100))
    kube = cluster.kube
    # And copies of its objects, as an operator makes them
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-prod"}})
    copies = [
        copy_of(kube, "ClusterQueue", "hyperpod-ns-research-clusterqueue", "research-extra-cq"),
        copy_of(kube, "LocalQueue", "hyperpod-ns-research-localqueue", "prod-lq", "hyperpod-ns-research", "ml-prod"),
        copy_of(kube, "WorkloadPriorityClass", "training-priority", "training-copy-priority"),
        copy_of(kube, "ResourceFlavor", P5, "p5-copy"),
    ]
    # When recomputed, twice (the second one with the pool unchanged)
    cluster.recalculate()
    cluster.recalculate()
    # Then every copy is there as it was made, and named in the apply status
    for made in copies:
        meta = made["metadata"]
        now = kube.get(made["kind"], meta["name"], meta.get("namespace", ""))
        assert now is not None and now["metadata"]["uid"] == meta["uid"], (made["kind"], meta["name"])
        assert now["metadata"]["resourceVersion"] == meta["resourceVersion"] or made["kind"] in (
            "ClusterQueue",
            "LocalQueue",
            "ResourceFlavor",
        )  # Kueue writes their status and finalizers; nothing of idleshare's
        assert not [m for m in now["metadata"].get("managedFields") or () if m["manager"] == "idleshare"]
    pool = cluster.pipeline.store.get_pool(cluster.spec.cluster_id)
    assert pool.apply_status == "Conflict"
    for name in ("ClusterQueue/research-extra-cq", "LocalQueue/ml-prod/prod-lq", "WorkloadPriorityClass/training-copy",
                 "ResourceFlavor/p5-copy"):  # fmt: skip
        assert name in pool.apply_message, (name, pool.apply_message)
    assert "; deleted: " not in pool.apply_message  # nothing of idleshare's was deleted either
    # And idleshare's own objects are as before
    assert kube.get("ClusterQueue", "hyperpod-ns-research-clusterqueue") is not None


def test_a_marker_stripped_clusterqueue_of_a_removed_team_is_deleted_and_the_deletion_named(make_cluster):
    # Given two teams
    cluster = make_cluster(p5_nodes(2))
    cluster.put_quota(quota("research", [{"InstanceType": P5, "Count": 1}]))
    cluster.put_quota(quota("nlp", [{"InstanceType": P5, "Count": 1}]))
    kube = cluster.kube
    nlp_cq = "hyperpod-ns-nlp-clusterqueue"
    # And nlp's ClusterQueue stripped of idleshare's label and creation marker by hand
    kube.merge_patch(
        "ClusterQueue",
        nlp_cq,
        {"metadata": {"labels": {MANAGED_BY_LABEL: None}, "annotations": {CREATED_BY_ANNOTATION: None}}},
    )
    stripped = kube.get("ClusterQueue", nlp_cq)
    assert MANAGED_BY_LABEL not in (stripped["metadata"].get("labels") or {})
    # When nlp's quota goes
    cluster.delete_quota("nlp-quota")
    # Then its ClusterQueue (8 GPUs of nominal quota in the cohort) is deleted all the same, and named
    kube.wait_for(lambda: kube.get("ClusterQueue", nlp_cq) is None, "nlp's stripped ClusterQueue deleted")
    pool = cluster.pipeline.store.get_pool(cluster.spec.cluster_id)
    assert f"ClusterQueue/{nlp_cq}" in pool.apply_message, pool.apply_message
    owned = cluster.pipeline.store.get_owned(cluster.spec.cluster_id)
    assert ("ClusterQueue", "", nlp_cq) not in owned.objects
    assert f"ClusterQueue/{nlp_cq}" in [r["object"] for r in owned.removed]


def test_objects_made_before_the_record_are_adopted_once_by_name_and_a_copy_is_not(make_cluster):
    # Given a cluster whose objects an idleshare before the ownership record made (the record is not there)
    cluster = make_cluster(p5_nodes(2))
    cluster.put_quota(quota("research", [{"InstanceType": P5, "Count": 1}]))
    cluster.put_quota(quota("nlp", [{"InstanceType": P5, "Count": 1}]))
    store, cid, kube = cluster.pipeline.store, cluster.spec.cluster_id, cluster.kube
    store.table.delete_item(Key={table.PK: table.cluster_pk(cid), table.SK: table.OWNED_SK})
    assert store.get_owned(cid) is None
    # And a copy of nlp's LocalQueue in another namespace, and of its ClusterQueue under another name
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-prod"}})
    lq = copy_of(kube, "LocalQueue", "hyperpod-ns-nlp-localqueue", "hyperpod-ns-nlp-localqueue", "hyperpod-ns-nlp",
                 "ml-prod")  # fmt: skip
    cq = copy_of(kube, "ClusterQueue", "hyperpod-ns-nlp-clusterqueue", "nlp-extra-cq")
    # When recomputed: idleshare's objects are adopted by their names, the copies are not and are named
    cluster.recalculate()
    owned = store.get_owned(cid)
    assert ("ClusterQueue", "", "hyperpod-ns-nlp-clusterqueue") in owned.objects
    assert ("LocalQueue", "hyperpod-ns-nlp", "hyperpod-ns-nlp-localqueue") in owned.objects
    assert ("ClusterQueue", "", "nlp-extra-cq") not in owned.objects
    assert ("LocalQueue", "ml-prod", "hyperpod-ns-nlp-localqueue") not in owned.objects
    message = store.get_pool(cid).apply_message
    assert "ClusterQueue/nlp-extra-cq" in message and "LocalQueue/ml-prod/hyperpod-ns-nlp-localqueue" in message
    # When nlp goes: its own objects are deleted, the copies stay
    cluster.delete_quota("nlp-quota")
    kube.wait_for(lambda: kube.get("ClusterQueue", "hyperpod-ns-nlp-clusterqueue") is None, "nlp's own CQ deleted")
    assert kube.get("LocalQueue", "hyperpod-ns-nlp-localqueue", "hyperpod-ns-nlp") is None
    for made in (lq, cq):
        meta = made["metadata"]
        now = kube.get(made["kind"], meta["name"], meta.get("namespace", ""))
        assert now is not None and now["metadata"]["uid"] == meta["uid"]
