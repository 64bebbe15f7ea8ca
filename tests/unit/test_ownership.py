"""Ownership recorded, not inferred (docs/spec.md §3, "Ownership"): domain/ownership.py's rules, and the recompute
over fakes. A copy of an idleshare object (its label and creation marker, a uid of its own) is never written nor
deleted and is named; an object whose label and marker were removed is still idleshare's and is deleted when its team
goes; every deletion is named in the apply status and logged in the record, whether or not the pool changed; a
create whose answer was lost is adopted through the pending identities; objects made before the record existed are
adopted once, by name, and a copy is not."""

from __future__ import annotations

import copy

import pytest

from idleshare.domain.kueue_diff import diff, object_identity, with_creation_marker
from idleshare.domain.model import Settings
from idleshare.domain.ownership import Record, adoptable, resolve, updated
from idleshare.errors import RetryableError
from tests.builders import CLUSTER, QUOTAS, objects, quota_body

SETTINGS = Settings()


def desired() -> list[dict]:
    return objects(CLUSTER, QUOTAS[:2])[1]


def as_created(obj: dict, uid: str) -> dict:
    out = with_creation_marker(copy.deepcopy(obj))
    out["metadata"]["uid"] = uid
    return out


def copied(obj: dict, name: str, namespace: str | None = None) -> dict:
    """``kubectl get -o yaml``, renamed, ``kubectl create``: label and marker kept, a new uid."""
    out = copy.deepcopy(obj)
    out["metadata"]["name"] = name
    out["metadata"]["uid"] = f"copy-of-{obj['metadata']['uid']}"
    if namespace is not None:
        out["metadata"]["namespace"] = namespace
    return out


def of_kind(objs: list[dict], kind: str) -> dict:
    return next(o for o in objs if o["kind"] == kind)


# -- the domain ---------------------------------------------------------------------------------


def test_adoption_takes_each_object_by_the_name_idleshare_gives_it_and_no_renamed_or_moved_copy():
    created = [as_created(o, f"u{i}") for i, o in enumerate(desired()) if o["kind"] != "Namespace"]
    assert all(adoptable(o, SETTINGS) for o in created)
    copies = [
        copied(of_kind(created, "ClusterQueue"), "research-extra-cq"),
        copied(of_kind(created, "LocalQueue"), "prod-lq", "ml-prod"),
        copied(of_kind(created, "LocalQueue"), of_kind(created, "LocalQueue")["metadata"]["name"], "ml-prod"),
        copied(of_kind(created, "ResourceFlavor"), "my-flavor"),
        copied(of_kind(created, "Cohort"), "other-pool"),
    ]
    assert not [o for o in copies if adoptable(o, SETTINGS)]
    unmarked = copy.deepcopy(of_kind(created, "ClusterQueue"))
    del unmarked["metadata"]["annotations"]
    assert not adoptable(unmarked, SETTINGS)


def test_a_recorded_object_is_idleshares_by_its_uid_and_a_labelled_copy_is_foreign():
    created = [as_created(o, f"u{i}") for i, o in enumerate(desired()) if o["kind"] != "Namespace"]
    record = Record(objects={object_identity(o): o["metadata"]["uid"] for o in created}, version=3)
    cq_copy = copied(of_kind(created, "ClusterQueue"), "research-extra-cq")
    stripped = copy.deepcopy(of_kind(created, "LocalQueue"))
    stripped["metadata"]["labels"], stripped["metadata"]["annotations"] = {}, {}
    current = [o for o in created if object_identity(o) != object_identity(stripped)] + [stripped, cq_copy]
    owned = resolve(record, current, SETTINGS)
    assert set(owned.ours) == set(record.objects) and owned.adopted == [] and owned.gone == []
    assert owned.foreign == [cq_copy]
    # the diff writes none of the copy and deletes it never; the stripped queue, no longer wanted, is deleted
    wanted = [o for o in desired() if object_identity(o) != object_identity(stripped)]
    to_apply, to_delete = diff(wanted, current, owned.ours)
    assert object_identity(cq_copy) not in {object_identity(o) for o in to_apply + to_delete}
    assert [object_identity(o) for o in to_delete] == [object_identity(stripped)]


def test_a_recorded_identity_that_now_holds_another_object_is_gone_and_that_object_foreign():
    cq = as_created(of_kind(desired(), "ClusterQueue"), "u-old")
    record = Record(objects={object_identity(cq): "u-old"}, version=1)
    replaced = {**cq, "metadata": {**cq["metadata"], "uid": "u-new"}}
    owned = resolve(record, [replaced], SETTINGS)
    assert owned.ours == {} and owned.gone == [object_identity(cq)] and owned.foreign == [replaced]


def test_with_no_record_the_first_recompute_adopts_by_name_and_a_record_stops_it():
    cq = as_created(of_kind(desired(), "ClusterQueue"), "u-1")
    extra = copied(cq, "research-extra-cq")
    first = resolve(None, [cq, extra], SETTINGS)
    assert first.ours == {object_identity(cq): "u-1"} and first.adopted == [object_identity(cq)]
    assert first.foreign == [extra]
    later = resolve(Record(objects={}, version=1), [cq], SETTINGS)  # recorded once: no more adoption
    assert later.ours == {} and later.foreign == [cq]


def test_the_record_after_a_write_gains_the_creates_loses_the_deletions_and_logs_them():
    before = Record(objects={("ClusterQueue", "", "a"): "u-a", ("ClusterQueue", "", "b"): "u-b"}, version=4)
    owned = resolve(before, [], SETTINGS)
    owned.ours = dict(before.objects)
    after = updated(
        before, owned, created={("Cohort", "", "p"): "u-p"}, deleted=[("ClusterQueue", "", "b")], generation=7, at="t"
    )
    assert after.objects == {("ClusterQueue", "", "a"): "u-a", ("Cohort", "", "p"): "u-p"}
    assert after.removed == ({"object": "ClusterQueue/b", "uid": "u-b", "generation": 7, "at": "t"},)
    assert after.version == 4 and after.pending == frozenset()


# -- the recompute on fakes ---------------------------------------------------------------------


def cluster_object(kube, kind: str, name: str, namespace: str = "") -> dict:
    return kube.objects[(kind, namespace, name)]


def plant_copy(kube, kind: str, name: str, new_name: str, namespace: str = "", new_namespace: str = "") -> tuple:
    theirs = copy.deepcopy(cluster_object(kube, kind, name, namespace))
    theirs["metadata"] = {k: v for k, v in theirs["metadata"].items() if k != "uid"}
    theirs["metadata"]["name"] = new_name
    if new_namespace:
        theirs["metadata"]["namespace"] = new_namespace
    kube.objects[object_identity(theirs)] = theirs
    return object_identity(theirs)


def test_copies_survive_a_recompute_are_named_and_never_written(cluster):
    store, kube, _, r = cluster
    store.put_scheduler_config("demo", {"SchedulerConfig": {"PriorityClasses": [{"Name": "high", "Weight": 9}]}})
    r.recompute("demo")
    assert store.owned["demo"].version >= 1
    copies = [
        plant_copy(kube, "ClusterQueue", "hyperpod-ns-a-clusterqueue", "research-extra-cq"),
        plant_copy(kube, "LocalQueue", "hyperpod-ns-a-localqueue", "prod-lq", "hyperpod-ns-a", "ml-prod"),
        plant_copy(kube, "WorkloadPriorityClass", "high-priority", "high-priority-copy"),
        plant_copy(kube, "ResourceFlavor", "ml.p5.48xlarge", "my-flavor"),
    ]
    before = {k: copy.deepcopy(kube.objects[k]) for k in copies}
    out = r.recompute("demo")
    assert {k: kube.objects.get(k) for k in copies} == before
    named = store.pools["demo"].apply_message
    assert store.pools["demo"].apply_status == "Conflict"
    for kind, namespace, name in copies:
        assert (f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}") in out.foreign
        assert name in named
    assert out.deleted == 0


def test_a_marker_stripped_clusterqueue_of_a_removed_team_is_deleted_and_named_with_the_pool_unchanged(cluster):
    store, kube, _, r = cluster
    r.recompute("demo")
    cq = cluster_object(kube, "ClusterQueue", "hyperpod-ns-b-clusterqueue")
    cq["metadata"]["labels"], cq["metadata"]["annotations"] = {}, {}
    store.set_quotas("demo", [quota_body("a", 8, enabled=True)])
    out = r.recompute("demo")
    assert ("ClusterQueue", "", "hyperpod-ns-b-clusterqueue") not in kube.objects
    assert "ClusterQueue/hyperpod-ns-b-clusterqueue" in out.deleted_objects
    assert "ClusterQueue/hyperpod-ns-b-clusterqueue" in store.pools["demo"].apply_message
    assert ("ClusterQueue", "", "hyperpod-ns-b-clusterqueue") not in store.owned["demo"].objects
    # an object deleted by a recompute whose pool did not change is named too
    lq = ("LocalQueue", "hyperpod-ns-a", "hyperpod-ns-a-localqueue")
    stray = {**store.owned["demo"].objects, ("LocalQueue", "hyperpod-ns-x", "hyperpod-ns-x-localqueue"): "uid-x"}
    store.owned["demo"] = Record(objects=stray, version=store.owned["demo"].version)
    kube.objects[("LocalQueue", "hyperpod-ns-x", "hyperpod-ns-x-localqueue")] = {
        **copy.deepcopy(kube.objects[lq]),
        "metadata": {"name": "hyperpod-ns-x-localqueue", "namespace": "hyperpod-ns-x", "uid": "uid-x"},
    }
    generation = store.pools["demo"].generation
    out = r.recompute("demo")
    assert not out.changed and store.pools["demo"].generation == generation
    assert (
        store.pools["demo"].apply_message == "0 applied, 1 deleted: LocalQueue/hyperpod-ns-x/hyperpod-ns-x-localqueue"
    )
    assert store.owned["demo"].removed[-1]["object"] == "LocalQueue/hyperpod-ns-x/hyperpod-ns-x-localqueue"


def test_a_create_whose_answer_was_lost_is_adopted_by_the_next_recompute(cluster, monkeypatch):
    store, kube, _, r = cluster
    real_create = kube.create

    def lost(obj, *, force=False):
        real_create(obj, force=force)
        if obj["kind"] == "Cohort":
            raise RetryableError("the answer was lost", operation="create")
        return str(kube._with_uid(kube.objects[object_identity(obj)])["metadata"]["uid"])

    monkeypatch.setattr(kube, "create", lost)
    with pytest.raises(RetryableError):
        r.recompute("demo")
    assert ("Cohort", "", "shared-pool") not in store.owned["demo"].objects
    monkeypatch.setattr(kube, "create", real_create)
    out = r.recompute("demo")
    assert ("Cohort", "", "shared-pool") in store.owned["demo"].objects and out.foreign == []
    assert store.owned["demo"].pending == frozenset()


def test_objects_made_before_the_record_are_adopted_once_and_a_copy_is_not(cluster):
    store, kube, _, r = cluster
    r.recompute("demo")
    copy_id = plant_copy(kube, "ClusterQueue", "hyperpod-ns-b-clusterqueue", "research-extra-cq")
    store.owned.clear()  # as an idleshare before the record left the cluster
    out = r.recompute("demo")
    assert "ClusterQueue/research-extra-cq" in out.foreign
    assert ("ClusterQueue", "", "hyperpod-ns-b-clusterqueue") in store.owned["demo"].objects
    assert copy_id not in store.owned["demo"].objects
    store.set_quotas("demo", [quota_body("a", 8, enabled=True)])
    r.recompute("demo")
    assert ("ClusterQueue", "", "hyperpod-ns-b-clusterqueue") not in kube.objects and copy_id in kube.objects
