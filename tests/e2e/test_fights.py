"""Fights named (issue 41, 5; docs/spec.md §3 "Fights"), on the real apiserver: with ``field_ownership: Take``, a
controller that force-applies the same field of a ClusterQueue before every recompute is named with its field
manager's name after ``timings.FIGHT_REWRITES`` recomputes in a row, and idleshare stops rewriting the queue."""

from __future__ import annotations

import copy
import re
import threading
import time

from idleshare import timings
from idleshare.domain.cluster_settings import FieldOwnership
from tests.e2e.conftest import GPU, P5, p5_nodes, quota

N = timings.FIGHT_REWRITES


def test_a_controller_force_applying_the_same_field_is_named_and_no_longer_fought(make_cluster, kube):
    # Given alpha on a cluster whose field ownership is Take
    cluster = make_cluster(p5_nodes(2))
    store, cid = cluster.pipeline.store, cluster.spec.cluster_id
    store.put_cluster(store.get_cluster(cid).with_settings(field_ownership=FieldOwnership.TAKE))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=100))
    assert cluster.limit("alpha", P5, GPU) == "8"
    cq = cluster.cluster_queue("alpha")
    theirs = {
        "apiVersion": cq["apiVersion"],
        "kind": "ClusterQueue",
        "metadata": {"name": cq["metadata"]["name"]},
        "spec": {"resourceGroups": copy.deepcopy(cq["spec"]["resourceGroups"])},
    }
    gpu = next(r for r in theirs["spec"]["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == GPU)
    gpu["borrowingLimit"] = "2"

    stop = threading.Event()

    def gitops() -> None:
        """The other controller: whenever the queue's limit is not its own, it force-applies it back (as a
        controller reconciling on every change does, within moments of idleshare's write)."""
        while not stop.is_set():
            if cluster.limit("alpha", P5, GPU) != "2":
                kube.apply(theirs, "gitops", force=True)
            stop.wait(0.02)

    controller = threading.Thread(target=gitops, daemon=True)
    controller.start()
    try:
        # When idleshare recomputes its unchanged desired state (each delivery: a leading and a trailing recompute)
        for _ in range(N):
            cluster.recalculate()
            if "FieldManagerFight" in store.get_pool(cid).apply_message:
                break
        # Then within N deliveries the fight is named with the other manager's name (idleshare wrote the queue back
        # on each recompute until then: the controller undid each write)
        pool = store.get_pool(cid)
        assert pool.apply_status == "Conflict", pool.apply_message
        found = re.search(
            rf"FieldManagerFight: ClusterQueue/{cq['metadata']['name']}: rewritten on (\d+) recomputes in a row by "
            r"gitops while",
            pool.apply_message,
        )
        assert found and int(found.group(1)) >= N, pool.apply_message  # a delivery's trailing run counts too
        # And idleshare backs off: later recomputes of the same desired state do not touch the queue (the controller
        # has nothing to undo: the resourceVersion stays), and still name the fight
        time.sleep(0.5)
        version = cluster.cluster_queue("alpha")["metadata"]["resourceVersion"]
        cluster.recalculate()
        cluster.recalculate()
        assert cluster.cluster_queue("alpha")["metadata"]["resourceVersion"] == version
        assert cluster.limit("alpha", P5, GPU) == "2"
        assert "FieldManagerFight" in store.get_pool(cid).apply_message
    finally:
        stop.set()
        controller.join(5)
    # When idleshare's desired state changes (alpha may borrow 150%) once the controller is gone: written at once,
    # and the write sticks, the fight over
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=150))
    assert cluster.limit("alpha", P5, GPU) == "12"
    assert store.get_pool(cid).apply_status == "Applied"
