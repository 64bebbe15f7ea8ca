"""LightkubeCluster against the real kube-apiserver (with Kueue's CRDs and webhooks), as idleshare's own
restricted user. Requests are seen through the recording proxy (``devkit/kube/proxy.py``), which also makes
the faults a real server will not produce on demand; every answer not faulted is the real server's."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devkit.kube.client import Kube
from devkit.kube.proxy import FaultProxy
from devkit.kube.stack import KubeStack
from idleshare.adapters.kube import LightkubeCluster
from idleshare.domain.kueue import KIND_ORDER
from idleshare.domain.kueue_diff import CREATED_BY_ANNOTATION, created_by_idleshare, diff, object_identity
from idleshare.errors import (
    AuthExpiredError,
    ConflictError,
    FieldOwnershipError,
    ForeignObjectError,
    NotFoundError,
    PermanentError,
    ResourceExpiredError,
    RetryableError,
)
from idleshare.parse.nodes import node_from_dict
from tests.builders import CLUSTER, QUOTAS, objects
from tests.kube.fixtures import FakeConnector, as_written, make_node
from tests.realkube import WATCHER_TOKEN

CQ_PATH = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
STRANGER_TOKEN = "stranger-token"  # tests/realkube.py: a user in no group the RBAC manifest names
RESEARCH_CQ = "hyperpod-ns-research-clusterqueue"


@pytest.fixture
def proxy(kube_stack: KubeStack, kube: Kube) -> Iterator[FaultProxy]:
    with FaultProxy(kube_stack.server, kube_stack.ca_file) as p:
        yield p


@pytest.fixture
def adapter(kube_stack: KubeStack, proxy: FaultProxy) -> Iterator[LightkubeCluster]:
    """idleshare's adapter as its own user, through the recording proxy."""
    cluster = LightkubeCluster(proxy.url, token=lambda: kube_stack.idleshare_token, timeout=10.0, name="local")
    yield cluster
    cluster.close()


def desired() -> list[dict[str, Any]]:
    return objects(CLUSTER, QUOTAS[:2])[1]  # research and nlp: every kind


def sync(kube: LightkubeCluster, wanted: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What a recompute does: read the managed objects, diff, apply what idleshare created, create the rest,
    delete."""
    listed = kube.list_managed()
    to_apply, to_delete = diff(wanted, listed)
    ours = {object_identity(o) for o in listed if created_by_idleshare(o)}
    for obj in to_apply:
        if object_identity(obj) in ours:
            kube.apply(obj)
        else:
            kube.create(obj)
    for obj in to_delete:
        kube.delete(obj)
    return to_apply, to_delete


def cq_named(objs: list[dict[str, Any]], team: str) -> dict[str, Any]:
    return next(
        o for o in objs if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == f"hyperpod-ns-{team}-clusterqueue"
    )


def gpu_entry(cq: dict[str, Any], flavor: str = "ml.p5.48xlarge") -> dict[str, Any]:
    fl = next(f for f in cq["spec"]["resourceGroups"][0]["flavors"] if f["name"] == flavor)
    return next(r for r in fl["resources"] if r["name"] == "nvidia.com/gpu")


# -- nodes ---------------------------------------------------------------------------------------


def test_nodes_are_listed_page_by_page(kube, proxy, adapter):
    # Given 1,200 nodes in the real apiserver
    kube.seed_nodes([make_node(f"node-{i:04d}", ready=i % 100 != 0) for i in range(1200)])
    # When listed 500 at a time
    nodes = list(adapter.list_nodes(page_size=500))
    # Then three list requests fetched every node, the later ones with the server's continue token
    lists = [r for r in proxy.requests if r.path == "/api/v1/nodes"]
    assert len(lists) == 3
    assert [r.query.get("limit") for r in lists] == ["500"] * 3
    assert "continue" not in lists[0].query and all(r.query.get("continue") for r in lists[1:])
    # as consistent reads (no resourceVersion: the state as of the request, not whatever the cache last held)
    assert not [r for r in lists if "resourceVersion" in r.query or "resourceVersionMatch" in r.query]
    assert sorted(n["metadata"]["name"] for n in nodes) == [f"node-{i:04d}" for i in range(1200)]
    # And each dict carries what the node parser needs, as the server stored it
    parsed = [node_from_dict(n) for n in nodes]
    assert sum(not n.ready for n in parsed) == 12
    assert parsed[1].instance_type == "ml.p5.48xlarge" and parsed[1].allocatable["nvidia.com/gpu"] == 8


def test_a_node_changed_just_before_a_list_is_listed_as_changed(kube, adapter):
    # Given nodes read once (the API server's watch cache holds them)
    kube.seed_nodes([make_node(f"n{i}") for i in range(5)])
    assert not any(node_from_dict(n).unschedulable for n in adapter.list_nodes(page_size=2))
    # When one is cordoned and the nodes are listed at once, as the recompute its event triggers does
    kube.set_node(make_node("n3", unschedulable=True))
    listed = {n["metadata"]["name"]: node_from_dict(n) for n in adapter.list_nodes(page_size=2)}
    # Then the list shows the change (a level-triggered recompute must see what triggered it)
    assert [name for name, n in listed.items() if n.unschedulable] == ["n3"]


def test_an_error_on_a_later_page_is_translated(kube, proxy, adapter):
    kube.seed_nodes([make_node(f"n{i}") for i in range(10)])
    proxy.inject("GET", "^/api/v1/nodes$", 500, times=None)
    with pytest.raises(RetryableError) as info:
        list(adapter.list_nodes(page_size=3))
    assert "HTTP 500" in str(info.value)


# -- apply / diff --------------------------------------------------------------------------------


def test_a_first_sync_creates_everything_and_a_second_sends_nothing(kube, proxy, adapter):
    # Given an empty cluster
    wanted = desired()
    # When synced
    applied, deleted = sync(adapter, wanted)
    # Then every object exists; Kueue objects were created (POST: a create cannot land on someone else's object)
    # as idleshare, with its creation marker, then their create entry split (a JSON patch of managedFields) into
    # what an apply of the manifest owns and the marker (sent again, read anew, when Kueue's status write moved
    # the object first: the patch's test of the resourceVersion failed, 422); nothing was server-side applied
    assert len(applied) == len(wanted) and deleted == []
    posts = [r for r in proxy.requests if r.method == "POST"]
    patches = [r for r in proxy.requests if r.method == "PATCH"]
    assert len(posts) == len(wanted) and {r.status for r in posts} == {201}
    assert sum(r.status == 200 for r in patches) == sum(o["kind"] != "Namespace" for o in wanted)
    assert {r.status for r in patches} <= {200, 422}
    assert {r.content_type for r in patches} == {"application/json-patch+json"}
    assert {r.query.get("fieldManager") for r in posts + patches} == {"idleshare"}
    for obj in wanted:
        meta = obj["metadata"]
        stored = kube.get(obj["kind"], meta["name"], meta.get("namespace", ""))
        assert stored is not None, obj["metadata"]
        if obj["kind"] != "Namespace":
            assert stored["metadata"]["annotations"][CREATED_BY_ANNOTATION] == "idleshare"
            entries = [m for m in stored["metadata"]["managedFields"] if m.get("subresource") != "status"]
            assert {(m["manager"], m["operation"]) for m in entries} == {
                ("idleshare", "Apply"),
                ("idleshare", "Update"),
            }
            (marker,) = [m for m in entries if m["operation"] == "Update"]
            assert marker["fieldsV1"] == {"f:metadata": {"f:annotations": {".": {}, f"f:{CREATED_BY_ANNOTATION}": {}}}}
    # When synced again with the same desired state (the server defaulted fields and Kueue added finalizers)
    proxy.clear_requests()
    applied, deleted = sync(adapter, wanted)
    # Then nothing is written
    assert applied == [] and deleted == []
    assert [r.method for r in proxy.requests if r.method != "GET"] == []


def test_only_changed_objects_are_applied(kube, proxy, adapter):
    wanted = desired()
    sync(adapter, wanted)
    proxy.clear_requests()
    # When one team's GPU quota changes
    changed = copy.deepcopy(wanted)
    gpu_entry(cq_named(changed, "research"))["nominalQuota"] = "16"
    sync(adapter, changed)
    # Then exactly that ClusterQueue is server-side applied, without force (idleshare's apply owns what its create
    # set: no conflict with itself), and the cluster holds the new quota; the creation marker stays
    patches = [r for r in proxy.requests if r.method == "PATCH"]
    assert [(r.path, r.query.get("force", "false"), r.status) for r in patches] == [
        (f"{CQ_PATH}/{RESEARCH_CQ}", "false", 200)
    ]
    assert {r.content_type for r in patches} == {"application/apply-patch+yaml"}
    stored = kube.get("ClusterQueue", RESEARCH_CQ)
    assert gpu_entry(stored)["nominalQuota"] == "16"
    assert stored["metadata"]["annotations"][CREATED_BY_ANNOTATION] == "idleshare"


def test_a_field_idleshare_stops_setting_is_removed(kube, adapter):
    wanted = desired()
    sync(adapter, wanted)
    assert "fairSharing" in kube.get("ClusterQueue", RESEARCH_CQ)["spec"]
    without = copy.deepcopy(wanted)
    del cq_named(without, "research")["spec"]["fairSharing"]
    applied, _ = sync(adapter, without)
    assert [o["metadata"]["name"] for o in applied] == [RESEARCH_CQ]
    assert "fairSharing" not in kube.get("ClusterQueue", RESEARCH_CQ)["spec"]


def test_a_gone_team_loses_its_queues_but_keeps_its_namespace(kube, proxy, adapter):
    wanted = desired()
    sync(adapter, wanted)
    assert kube.get("Namespace", "hyperpod-ns-nlp") is not None
    proxy.clear_requests()
    remaining = [o for o in wanted if o["metadata"]["labels"].get("idleshare.io/team") != "nlp"]
    _, deleted = sync(adapter, remaining)
    assert [(o["kind"], o["metadata"]["name"]) for o in deleted] == [
        ("LocalQueue", "hyperpod-ns-nlp-localqueue"),
        ("ClusterQueue", "hyperpod-ns-nlp-clusterqueue"),
    ]
    assert kube.get("LocalQueue", "hyperpod-ns-nlp-localqueue", "hyperpod-ns-nlp") is None
    # Kueue's finalizer goes once nothing is admitted through the queue
    kube.wait_for(lambda: kube.get("ClusterQueue", "hyperpod-ns-nlp-clusterqueue") is None, "nlp's CQ deleted")
    assert kube.get("Namespace", "hyperpod-ns-nlp") is not None
    assert proxy.count("DELETE") == 2
    assert kube.get("ClusterQueue", RESEARCH_CQ) is not None


def test_objects_without_our_label_are_neither_listed_nor_deleted(kube, proxy, adapter):
    theirs = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "platform-team", "labels": {"idleshare.io/team": "platform"}},
        "spec": {"namespaceSelector": {}},
    }
    kube.create(theirs)
    sync(adapter, desired())
    managed = adapter.list_managed()
    sync(adapter, [])
    assert "platform-team" not in {o["metadata"]["name"] for o in managed}
    assert kube.get("ClusterQueue", "platform-team") is not None
    assert all(
        r.query.get("labelSelector") == "app.kubernetes.io/managed-by=idleshare"
        for r in proxy.requests
        if r.method == "GET" and "nodes" not in r.path and r.query
    )


def test_an_object_already_terminating_is_not_deleted_again_nor_applied(kube, proxy, adapter):
    # Given nlp's ClusterQueue deleted while something holds it (a finalizer, as Kueue's does while workloads run)
    wanted = desired()
    sync(adapter, wanted)
    nlp_cq = "hyperpod-ns-nlp-clusterqueue"
    kube.merge_patch("ClusterQueue", nlp_cq, {"metadata": {"finalizers": ["idleshare.test/hold"]}})
    remaining = [o for o in wanted if o["metadata"]["labels"].get("idleshare.io/team") != "nlp"]
    try:
        sync(adapter, remaining)
        held = kube.get("ClusterQueue", nlp_cq)
        assert held is not None and held["metadata"].get("deletionTimestamp")
        # When the next recomputes run: one with nlp still gone, one with nlp wanted again
        listed = {o["metadata"]["name"]: o for o in adapter.list_managed()}
        assert listed[nlp_cq]["metadata"].get("deletionTimestamp")  # list_managed shows it terminating
        proxy.clear_requests()
        sync(adapter, remaining)
        again, _ = sync(adapter, wanted)
        # Then it is neither deleted again nor applied while it terminates
        assert proxy.count("DELETE") == 0
        assert nlp_cq not in {o["metadata"]["name"] for o in again if o["kind"] == "ClusterQueue"}
        assert not [r for r in proxy.requests if r.method == "PATCH" and r.path.endswith(nlp_cq)]
    finally:
        kube.merge_patch("ClusterQueue", nlp_cq, {"metadata": {"finalizers": None}})
    # And once it is gone, the next recompute creates it
    kube.wait_for(lambda: kube.get("ClusterQueue", nlp_cq) is None, "nlp's CQ gone")
    sync(adapter, wanted)
    assert kube.get("ClusterQueue", nlp_cq) is not None


def test_list_managed_returns_every_kind_with_kind_and_api_version(adapter):
    wanted = desired()
    sync(adapter, wanted)
    managed = adapter.list_managed()
    assert sorted((o["kind"], o["metadata"]["name"]) for o in managed) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in wanted
    )
    assert {o["apiVersion"] for o in managed if o["kind"] == "Namespace"} == {"v1"}


def test_list_managed_reads_what_the_diff_needs_and_not_kueues_status(kube, proxy, adapter, monkeypatch):
    # Given idleshare's objects, each ClusterQueue with the status Kueue writes (and its managedFields entry)
    wanted = desired()
    sync(adapter, wanted)
    kube.wait_for(lambda: all(cq.get("status") for cq in kube.objects("ClusterQueue")), "Kueue's status")
    full = [o for kind in KIND_ORDER for o in kube.objects(kind, labels="app.kubernetes.io/managed-by=idleshare")]
    assert any(m["manager"] != "idleshare" for o in full for m in o["metadata"].get("managedFields", []))
    # When listed one object a page
    monkeypatch.setattr("idleshare.adapters.kube.DEFAULT_PAGE_SIZE", 1)
    proxy.clear_requests()
    managed = adapter.list_managed()
    # Then every object came, page by page, without its status (a ClusterQueue or Cohort would keep only
    # status.effectiveQuotas: none here), with idleshare's managedFields entries whole and another's by name only
    assert any(r.query.get("continue") for r in proxy.requests if "clusterqueues" in r.path)
    assert not [r for r in proxy.requests if "resourceVersion" in r.query]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in managed) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in full
    )
    assert not [o for o in managed if "status" in o]
    entries = [m for o in managed for m in o["metadata"].get("managedFields", [])]
    assert {m["manager"] for m in entries} == {m["manager"] for o in full for m in o["metadata"]["managedFields"]}
    assert {m["manager"] for m in entries if "fieldsV1" in m} == {"idleshare"}
    research = cq_named(managed, "research")
    stored = kube.get("ClusterQueue", RESEARCH_CQ)
    assert research["spec"] == stored["spec"] and research["metadata"]["labels"] == stored["metadata"]["labels"]
    # And the diff finds in them what it finds in the whole objects: nothing, a changed quota, a field no longer
    # set (idleshare's managedFields entry says it owns it), a team gone
    changed, unset = copy.deepcopy(wanted), copy.deepcopy(wanted)
    gpu_entry(cq_named(changed, "research"))["nominalQuota"] = "16"
    del cq_named(unset, "research")["spec"]["fairSharing"]
    gone = [o for o in wanted if o["metadata"]["labels"].get("idleshare.io/team") != "nlp"]

    def decided(case: list[dict[str, Any]], current: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
        to_apply, to_delete = diff(case, current)
        return [object_identity(o) for o in to_apply], [object_identity(o) for o in to_delete]

    for case in (wanted, changed, unset, gone):
        assert decided(case, managed) == decided(case, full)
    assert decided(wanted, managed) == ([], [])
    assert decided(unset, managed) == ([("ClusterQueue", "", RESEARCH_CQ)], [])
    assert len(decided(gone, managed)[1]) == 2  # nlp's LocalQueue and ClusterQueue


# -- another field manager -------------------------------------------------------------------------


def test_a_field_another_manager_owns_is_not_taken_and_names_the_manager(kube, adapter):
    # Given idleshare's objects, and an admin's GitOps (field manager "gitops") that sets research's GPU
    # borrowing limit through its own server-side apply
    wanted = desired()
    sync(adapter, wanted)
    theirs = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": RESEARCH_CQ},
        "spec": copy.deepcopy(kube.get("ClusterQueue", RESEARCH_CQ)["spec"]),
    }
    gpu_entry(theirs)["borrowingLimit"] = "1"
    kube.apply(theirs, "gitops", force=True)
    # When idleshare wants another value there
    changed = copy.deepcopy(wanted)
    gpu_entry(cq_named(changed, "research"))["borrowingLimit"] = "7"
    # Then the real apiserver refuses the apply, the error names the manager and the field, nothing changed
    with pytest.raises(FieldOwnershipError) as info:
        adapter.apply(cq_named(changed, "research"))
    assert info.value.managers == ("gitops",)
    # Kueue's CRD makes spec.resourceGroups an atomic list: whoever last applied it owns all of it
    assert info.value.fields == (".spec.resourceGroups",)
    assert gpu_entry(kube.get("ClusterQueue", RESEARCH_CQ))["borrowingLimit"] == "1"
    # And with force (field_ownership: Take) idleshare takes the field
    adapter.apply(cq_named(changed, "research"), force=True)
    assert gpu_entry(kube.get("ClusterQueue", RESEARCH_CQ))["borrowingLimit"] == "7"


# -- what idleshare did not create (issue 35) ----------------------------------------------------------------------


def their_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj``'s name and kind as another team writes it (its own label, another value where the kind has one)."""
    theirs = copy.deepcopy(obj)
    theirs["metadata"]["labels"] = {"team": "platform"}
    if obj["kind"] == "WorkloadPriorityClass":
        theirs["value"] = 1
    return theirs


@pytest.mark.parametrize("force", [False, True], ids=["Respect", "Take"])
def test_an_object_another_manager_created_first_is_never_adopted_written_or_deleted(kube, proxy, adapter, force):
    # Given, of every Kueue kind idleshare writes, an object another field manager created first under the name
    # idleshare wants (the LocalQueue's namespace is the team's: it exists, as HyperPod makes it)
    wanted = desired()
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hyperpod-ns-research"}})
    taken = [o for o in wanted if o["kind"] != "Namespace" and o["metadata"]["name"].count("nlp") == 0]
    for obj in taken:
        kube.apply(their_copy(obj), "platform")
    before = {key: kube.get(key[0], key[2], key[1]) for key in map(object_identity, taken)}
    # When idleshare creates each (in either field-ownership mode)
    for obj in taken:
        with pytest.raises(ForeignObjectError) as info:
            adapter.create(obj, force=force)
        # Then the create is refused as someone else's object, named by kind and name, and nothing is written
        assert (info.value.kind, info.value.name) == (obj["kind"], obj["metadata"]["name"])
    assert proxy.count("PATCH") == 0 and proxy.count("DELETE") == 0
    for key, theirs in before.items():
        assert as_written(kube.get(key[0], key[2], key[1])) == as_written(theirs), key
    # And a recompute (list, diff, create, delete) with idleshare's label forced on them by an older Take still
    # neither writes nor deletes them, while nlp's objects, idleshare's own, are created, then deleted
    for obj in taken:
        kube.apply(obj, "idleshare", force=True)  # what an idleshare without the marker did under Take
    labelled = {key: kube.get(key[0], key[2], key[1]) for key in before}
    proxy.clear_requests()
    sync(adapter, wanted)
    sync(adapter, [])
    for key, was in labelled.items():
        now = kube.get(key[0], key[2], key[1])
        assert now is not None and as_written(now) == as_written(was), key
    writes = {(r.method, r.path.rsplit("/", 1)[-1]) for r in proxy.requests if r.method in ("POST", "PATCH", "DELETE")}
    assert not {name for _, name in writes} & {key[2] for key in before}
    assert ("DELETE", "hyperpod-ns-nlp-clusterqueue") in writes


# -- namespaces ----------------------------------------------------------------------------------


def test_ensure_namespace_creates_a_missing_namespace_and_never_touches_an_existing_one(kube, proxy, adapter):
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hyperpod-ns-a", "labels": {"x": "y"}}})
    before = kube.get("Namespace", "hyperpod-ns-a")
    ours = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "hyperpod-ns-a", "labels": {"app.kubernetes.io/managed-by": "idleshare"}},
    }
    proxy.clear_requests()
    assert adapter.ensure_namespace(ours) is False
    adapter.apply(ours)
    assert kube.get("Namespace", "hyperpod-ns-a") == before
    assert {r.method for r in proxy.requests} == {"GET"}
    missing = copy.deepcopy(ours)
    missing["metadata"]["name"] = "hyperpod-ns-b"
    assert adapter.ensure_namespace(missing) is True
    assert kube.get("Namespace", "hyperpod-ns-b")["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "idleshare"


def test_a_namespace_created_concurrently_counts_as_existing(proxy, adapter):
    proxy.inject("POST", "^/api/v1/namespaces$", 409)
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hyperpod-ns-race"}}
    assert adapter.ensure_namespace(obj) is False


def test_a_namespace_is_never_deleted(adapter):
    with pytest.raises(ValueError, match="never deletes namespaces"):
        adapter.delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hyperpod-ns-a"}})


def test_deleting_an_object_already_gone_is_fine(proxy, adapter):
    lq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "gone", "namespace": "default"},
    }
    adapter.delete(lq)
    deletes = [r for r in proxy.requests if r.method == "DELETE"]
    assert [(r.path, r.status) for r in deletes] == [
        ("/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/gone", 404)
    ]


# -- RBAC: what idleshare must not touch -------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        pytest.param("GET", "/api/v1/namespaces/kube-system/pods/p", None, id="read a pod"),  # list only (headroom)
        pytest.param("DELETE", "/api/v1/namespaces/kube-system/pods/p", None, id="delete a pod"),
        pytest.param("GET", "/api/v1/namespaces/kube-system/secrets", None, id="read secrets"),
        # Kueue's config by name in Kueue's namespace only (a Role there): not of that name elsewhere, not another
        pytest.param("GET", "/api/v1/namespaces/default/configmaps/kueue-manager-config", None, id="config elsewhere"),
        pytest.param("GET", "/api/v1/namespaces/kueue-system/configmaps/other", None, id="another configmap"),
        pytest.param("DELETE", "/api/v1/namespaces/default", None, id="delete a namespace"),
        pytest.param("DELETE", "/api/v1/nodes/n1", None, id="delete a node"),
        pytest.param("PATCH", "/api/v1/nodes/n1", {"spec": {"unschedulable": True}}, id="cordon a node"),
        # workloads: list only (headroom, usage), never one read by name, never a write
        pytest.param("GET", "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads/w", None, id="get a workload"),
        pytest.param(
            "DELETE", "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads/w", None, id="delete a workload"
        ),
    ],
)
def test_rbac_forbids_what_idleshare_must_not_touch(kube_stack, kube, method, path, body):
    kube.seed_nodes([make_node("n1")])
    status, answer = kube_stack.request(method, path, body, token=kube_stack.idleshare_token)
    assert status == 403, answer
    assert "idleshare" in answer["message"] and "forbidden" in answer["message"]


def test_without_the_rbac_grant_every_call_is_a_permanent_403_naming_the_operation(kube_stack, kube):
    # Given a user whose group the RBAC manifest does not name (the access entry maps another group)
    stranger = LightkubeCluster(
        kube_stack.server, kube_stack.ca_pem, lambda: STRANGER_TOKEN, timeout=10.0, name="local"
    )
    # Then listing nodes and applying are refused by the real RBAC authorizer, permanently
    with pytest.raises(PermanentError) as listing:
        list(stranger.list_nodes())
    with pytest.raises(PermanentError) as applying:
        stranger.apply(cq_named(desired(), "research"))
    for info, operation in ((listing, "list nodes"), (applying, f"apply ClusterQueue/{RESEARCH_CQ}")):
        assert operation in str(info.value) and "HTTP 403" in str(info.value) and "forbidden" in str(info.value)


# -- errors --------------------------------------------------------------------------------------


def test_an_invalid_cluster_queue_is_a_permanent_error_naming_the_field(adapter):
    bad = cq_named(desired(), "research")
    bad["spec"]["preemption"]["withinClusterQueue"] = "Sometimes"
    with pytest.raises(PermanentError) as info:
        adapter.apply(bad)
    assert "HTTP 422" in str(info.value) and "spec.preemption.withinClusterQueue" in str(info.value)
    assert RESEARCH_CQ in str(info.value)


def test_kueue_cel_rules_surface_as_a_named_422(adapter):
    # Kueue's CRD CEL rule: borrowingLimit must be nil when the ClusterQueue has no cohort
    bad = cq_named(desired(), "research")
    del bad["spec"]["cohortName"]
    for flavor in bad["spec"]["resourceGroups"][0]["flavors"]:
        for res in flavor["resources"]:
            res.pop("lendingLimit", None)
    with pytest.raises(PermanentError) as info:
        adapter.apply(bad)
    assert "HTTP 422" in str(info.value) and "borrowingLimit" in str(info.value) and "cohort" in str(info.value).lower()


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(400, PermanentError, id="400"),
        pytest.param(403, PermanentError, id="403 forbidden"),
        pytest.param(404, NotFoundError, id="404"),
        pytest.param(409, ConflictError, id="409"),
        pytest.param(410, ResourceExpiredError, id="410 expired continue"),
        pytest.param(429, RetryableError, id="429"),
        pytest.param(500, RetryableError, id="500"),
        pytest.param(503, RetryableError, id="503"),
    ],
)
def test_api_errors_are_translated(proxy, adapter, status, expected):
    proxy.inject("PATCH", CQ_PATH, status)
    with pytest.raises(expected) as info:
        adapter.apply(cq_named(desired(), "research"))
    assert type(info.value) is expected
    assert f"apply ClusterQueue/{RESEARCH_CQ}: HTTP {status}" in str(info.value)


def test_an_error_response_that_is_not_a_status_is_translated_too(proxy, adapter):
    proxy.inject("GET", "^/api/v1/nodes$", 502, headers={"Content-Type": "text/html"}, body={"not": "a status"})
    with pytest.raises(RetryableError) as info:
        list(adapter.list_nodes())
    assert "HTTP 502" in str(info.value)


def test_a_rejected_token_is_renewed_and_the_request_sent_again_within_the_call(kube_stack, kube, proxy):
    # Given the real server, which knows idleshare's token but not "stale"
    tokens = ["stale"]
    invalidated: list[bool] = []

    def on_expired() -> None:
        invalidated.append(True)
        tokens[0] = kube_stack.idleshare_token

    cluster = LightkubeCluster(proxy.url, token=lambda: tokens[0], on_auth_expired=on_expired, timeout=10.0)
    # When a read is refused with a 401
    # Then the same call signs in again and answers: one 401, one invalidation, no error
    assert cluster.list_managed() == []
    assert invalidated == [True]
    assert [r.status for r in proxy.requests][:2] == [401, 200]
    assert len([r for r in proxy.requests if r.status == 401]) == 1


def test_a_second_401_is_auth_expired(kube_stack, kube, proxy):
    # Given a token provider whose every token the server refuses
    invalidated: list[bool] = []
    cluster = LightkubeCluster(
        proxy.url, token=lambda: "never-valid", on_auth_expired=lambda: invalidated.append(True), timeout=10.0
    )
    # When a call is made
    with pytest.raises(AuthExpiredError) as info:
        cluster.list_managed()
    # Then it was sent twice (once with a fresh token), and the second 401 is raised (a RetryableError: handed
    # back to the queue) naming the call
    assert "list Namespace" in str(info.value) and "HTTP 401" in str(info.value)
    assert [r.status for r in proxy.requests] == [401, 401]
    assert invalidated == [True, True]  # the next invocation signs anew too


def test_a_write_refused_with_a_401_is_sent_again_with_a_fresh_token(kube_stack, kube, proxy):
    # Given idleshare's objects in the cluster, and the next PATCH (server-side apply) refused with a 401
    connector = FakeConnector(kube_stack, proxy.url)
    cluster = LightkubeCluster.from_eks(connector, "local", timeout=10.0)  # type: ignore[arg-type]
    sync(cluster, desired())
    cq = cq_named(desired(), "research")
    gpu_entry(cq)["nominalQuota"] = "40"
    proxy.clear_requests()
    proxy.inject("PATCH", CQ_PATH, 401, message="Unauthorized")
    connector.current = 1  # the token the apiserver takes once the 401 invalidated the first
    # When the changed ClusterQueue is applied
    cluster.apply(cq)
    # Then the apply was sent again with the next token, and the cluster holds it
    assert [r.status for r in proxy.requests if r.method == "PATCH"] == [401, 200]
    assert connector.invalidated == 1
    assert gpu_entry(kube.get("ClusterQueue", RESEARCH_CQ))["nominalQuota"] == "40"


def test_a_watch_refused_with_a_401_is_opened_again_with_a_fresh_token(kube_stack, kube, proxy):
    # Given a node, and a token the apiserver refuses until the connector is invalidated once
    kube.seed_nodes([make_node("n1")])
    connector = FakeConnector(kube_stack, proxy.url, valid=WATCHER_TOKEN)  # the watcher's RBAC user: it may watch
    cluster = LightkubeCluster.from_eks(connector, "local", timeout=10.0)  # type: ignore[arg-type]
    _, version = cluster.list_nodes_snapshot()  # with token 0
    connector.current = 1  # token 0 has expired
    kube.set_node(make_node("n1", unschedulable=True))
    # When a watch is opened
    events = list(cluster.watch_nodes(version, timeout_seconds=1))
    # Then it was opened again with token 1 and delivered the change
    assert connector.invalidated == 1
    assert ("MODIFIED", "n1") in [(kind, node["metadata"]["name"]) for kind, node in events]
    assert [r.status for r in proxy.requests if r.query.get("watch")][:2] == [401, 200]


def test_a_slow_api_server_times_out_as_retryable_within_the_timeout(kube_stack, proxy):
    cluster = LightkubeCluster(proxy.url, token=lambda: kube_stack.idleshare_token, timeout=0.3)
    proxy.inject_timeout("GET", "^/api/v1/nodes$", seconds=3)
    started = time.monotonic()
    with pytest.raises(RetryableError, match="timed out"):
        list(cluster.list_nodes())
    assert time.monotonic() - started < 2


def test_an_unreachable_api_server_is_retryable(proxy, adapter):
    proxy.outage("refuse")
    with pytest.raises(RetryableError):
        adapter.list_managed()


def test_a_dropped_connection_is_retryable(proxy, adapter):
    proxy.inject("GET", None, drop_connection=True, times=None)
    with pytest.raises(RetryableError):
        list(adapter.list_nodes())


# -- TLS and EKS wiring --------------------------------------------------------------------------


def test_from_eks_verifies_tls_against_the_cluster_ca_and_sends_the_eks_token(kube_stack, kube):
    connector = FakeConnector(kube_stack, current=1)  # the first token has expired, the second is valid
    kube.seed_nodes([make_node("n1")])
    cluster = LightkubeCluster.from_eks(connector, "local", timeout=10.0)  # type: ignore[arg-type]
    # the first page is refused, the list is started again with the second token, within the same call
    assert [n["metadata"]["name"] for n in cluster.list_nodes()] == ["n1"]
    assert connector.invalidated == 1


def test_a_server_whose_certificate_the_ca_did_not_sign_is_refused(kube_stack):
    cluster = LightkubeCluster(kube_stack.server, ca_pem=None, token=lambda: kube_stack.idleshare_token, timeout=5.0)
    with pytest.raises(RetryableError, match=r"(?i)certificate|ssl"):
        cluster.list_managed()


def test_headroom_reads_each_objects_uid_and_its_owner_references_whole(kube, adapter):
    """What tells a DaemonSet's or Kueue's pod apart (docs/spec.md §2, issue 41.3): the DaemonSet's uid, the pod's
    uid and each owner reference's ``apiVersion``, ``kind``, ``uid`` and ``controller``, as the adapter projects them
    from the real apiserver's lists."""
    from idleshare.domain.model import OwnerReference
    from idleshare.parse.workloads import cluster_daemonsets, cluster_pods

    labels = {"app": "hr-agent"}
    ds = kube.create({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "hr-agent", "namespace": "default"},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": {"idleshare.test/none": "x"}, "containers": [{"name": "c", "image": "x"}]}}},
    })  # fmt: skip
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "hr-agent", "uid": ds["metadata"]["uid"]}
    pod = kube.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "hr-pod", "namespace": "default", "ownerReferences": [{**owner, "controller": False}]},
        "spec": {"nodeName": "hr-no-such-node", "automountServiceAccountToken": False,
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
    })  # fmt: skip
    try:
        daemonsets, bad = cluster_daemonsets(adapter.list_daemonsets())
        assert not bad and [d.uid for d in daemonsets if d.name == "hr-agent"] == [ds["metadata"]["uid"]]
        pods, bad = cluster_pods(adapter.list_bound_pods())
        (read,) = [p for p in pods if p.name == "hr-pod"]
        assert read.uid == pod["metadata"]["uid"]
        assert read.owners == (OwnerReference("apps/v1", "DaemonSet", ds["metadata"]["uid"], False),)
    finally:
        kube.request("DELETE", "/api/v1/namespaces/default/pods/hr-pod", params={"gracePeriodSeconds": "0"},
                     ok=(200, 202, 404))  # fmt: skip
        kube.delete("DaemonSet", "hr-agent", "default")


def test_deleting_an_admission_policy_already_gone_is_fine_and_reads_no_kueue_version(adapter):
    # a kind outside Kueue's group has no served version to look up again after its 404
    for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
        assert adapter.delete({"kind": kind, "metadata": {"name": "idleshare-absent"}}) is None
        assert adapter.get_managed(kind, "", "idleshare-absent") is None
