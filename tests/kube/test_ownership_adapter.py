"""What the ownership record needs of LightkubeCluster, on the real apiserver: a create answers the uid of the object
it made; a delete sent with a uid precondition deletes that object only (another object of that name: 409, kept); an
object is read by identity whether or not it carries idleshare's label; a create that finds an object there says
whether it carries the creation marker, and writes nothing."""

from __future__ import annotations

import pytest

from idleshare.domain.kueue import MANAGED_BY_LABEL
from idleshare.domain.kueue_diff import CREATED_BY_ANNOTATION
from idleshare.errors import ConflictError, ForeignObjectError
from tests.builders import CLUSTER, QUOTAS, objects
from tests.realkube import idleshare_adapter

pytestmark = pytest.mark.integration


def cluster_queue() -> dict:
    return next(o for o in objects(CLUSTER, QUOTAS[:1])[1] if o["kind"] == "ClusterQueue")


def test_a_create_answers_its_uid_and_a_delete_with_another_uid_is_refused(kube_stack, kube):
    adapter = idleshare_adapter(kube_stack)
    try:
        cq = cluster_queue()
        name = cq["metadata"]["name"]
        uid = adapter.create(cq)
        assert uid and kube.get("ClusterQueue", name)["metadata"]["uid"] == uid
        with pytest.raises(ConflictError, match="409"):
            adapter.delete(cq, uid="00000000-0000-0000-0000-000000000000")
        assert kube.get("ClusterQueue", name) is not None
        # read by identity, its label and marker removed by hand
        kube.merge_patch(
            "ClusterQueue",
            name,
            {"metadata": {"labels": {MANAGED_BY_LABEL: None}, "annotations": {CREATED_BY_ANNOTATION: None}}},
        )
        assert name not in {o["metadata"]["name"] for o in adapter.list_managed()}
        found = adapter.get_managed("ClusterQueue", "", name)
        assert found is not None and found["metadata"]["uid"] == uid and "status" not in found
        assert adapter.get_managed("ClusterQueue", "", "no-such-queue") is None
        adapter.delete(cq, uid=uid)
        kube.wait_for(lambda: kube.get("ClusterQueue", name) is None, "the ClusterQueue deleted")
    finally:
        adapter.close()


def test_a_create_that_finds_a_marked_object_writes_nothing_and_says_it_is_marked(kube_stack, kube):
    adapter = idleshare_adapter(kube_stack)
    try:
        cq = cluster_queue()
        uid = adapter.create(cq)
        before = kube.get("ClusterQueue", cq["metadata"]["name"])
        with pytest.raises(ForeignObjectError) as info:
            adapter.create(cq)
        assert info.value.marked and info.value.uid == uid
        entries = kube.get("ClusterQueue", cq["metadata"]["name"])["metadata"]["managedFields"]
        assert [e for e in entries if e["manager"] == "idleshare"] == [
            e for e in before["metadata"]["managedFields"] if e["manager"] == "idleshare"
        ]
    finally:
        adapter.close()
