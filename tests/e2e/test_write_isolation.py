"""One team's trouble stays that team's (issue 41, 2; docs/spec.md §3 "One object's refusal is that object's"): on
the real apiserver, a namespace held Terminating by a finalizer and a ResourceQuota on LocalQueues each refuse one
team's LocalQueue for good; every other team is still written, a removed team's queues and a priority class are
deleted in the same recompute, and the refusal is named."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devkit.kube import workloads as wl
from devkit.kube.client import Kube
from tests.e2e.conftest import GPU, P5, p5_nodes, quota

HOLD = "idleshare.test/hold"
PRIORITIES = [{"Name": "high", "Weight": 100}, {"Name": "low", "Weight": 10}]
LQ_QUOTA = "count/localqueues.kueue.x-k8s.io"


def one_node_each(team: str) -> dict[str, Any]:
    return quota(team, [{"InstanceType": P5, "Count": 1}])


def quota_in_kueue(kube: Kube) -> int:
    """The GPUs of p5 nominal quota in Kueue's cohort tree: every ClusterQueue's and the Cohort's."""
    total = 0
    for obj in [*kube.objects("ClusterQueue"), *kube.objects("Cohort")]:
        for group in obj["spec"].get("resourceGroups") or ():
            for flavor in group["flavors"]:
                if flavor["name"] == P5:
                    total += sum(int(r["nominalQuota"]) for r in flavor["resources"] if r["name"] == GPU)
    return total


@pytest.fixture
def held_namespace(kube: Kube) -> Iterator[list[str]]:
    """Namespaces a test holds Terminating with a finalizer: let go at the end (else no reset can remove them)."""
    held: list[str] = []
    yield held
    for name in held:
        ns = kube.get("Namespace", name)
        if ns is not None and HOLD in (ns["metadata"].get("finalizers") or ()):
            kube.merge_patch("Namespace", name, {"metadata": {"finalizers": None}})
            kube.wait_for(lambda name=name: kube.get("Namespace", name) is None, f"namespace {name} gone")


def test_a_namespace_stuck_terminating_blocks_only_its_own_localqueue(make_cluster, kube, held_namespace):
    # Given three teams of one p5 node each on three nodes (24 GPUs), and two priority classes
    cluster = make_cluster(p5_nodes(3))
    cluster.scheduler_config({"PriorityClasses": PRIORITIES})
    for team in ("alpha", "gamma", "delta"):
        cluster.put_quota(one_node_each(team))
    assert kube.get("WorkloadPriorityClass", "low-priority") is not None
    assert quota_in_kueue(kube) == 24
    # And gamma's namespace deleted while a finalizer holds it: Terminating, its LocalQueue deleted with its content
    gamma_ns, gamma_lq = wl.namespace_of("gamma"), wl.local_queue_of("gamma")
    kube.merge_patch("Namespace", gamma_ns, {"metadata": {"finalizers": [HOLD]}})
    held_namespace.append(gamma_ns)
    kube.delete("Namespace", gamma_ns)
    kube.wait_for(lambda: kube.get("LocalQueue", gamma_lq, gamma_ns) is None, "gamma's LocalQueue deleted")
    assert kube.get("Namespace", gamma_ns)["status"]["phase"] == "Terminating"
    # When delta's quota and the low priority class go, and alpha may borrow more (each a recompute that also wants
    # gamma's LocalQueue back, which the API server refuses: its namespace is being terminated)
    cluster.delete_quota(one_node_each("delta")["Name"])
    # Then delta's ClusterQueue and LocalQueue are gone in that same recompute: the cohort tree holds no more quota
    # than the nodes (the Cohort lends delta's 8 now: 8 + alpha's 8 + gamma's 8)
    assert kube.get("ClusterQueue", wl.cluster_queue_of("delta")) is None
    assert kube.get("LocalQueue", wl.local_queue_of("delta"), wl.namespace_of("delta")) is None
    assert quota_in_kueue(kube) == 24
    cluster.scheduler_config({"PriorityClasses": PRIORITIES[:1]})
    assert kube.get("WorkloadPriorityClass", "low-priority") is None
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=100))
    assert cluster.limit("alpha", P5, GPU) == "8"  # other teams are still written
    # And the refusal is named: apply status Conflict, NamespaceTerminating, gamma's LocalQueue and its namespace
    pool = cluster.pipeline.store.get_pool(cluster.spec.cluster_id)
    assert pool.apply_status == "Conflict", (pool.apply_status, pool.apply_message)
    assert f"NamespaceTerminating: LocalQueue/{gamma_ns}/{gamma_lq}" in pool.apply_message
    assert f"namespace {gamma_ns}" in pool.apply_message and "WriteRefused" not in pool.apply_message
    # When the finalizer is dropped and the namespace is gone, the next recompute creates both again, status clean
    kube.merge_patch("Namespace", gamma_ns, {"metadata": {"finalizers": None}})
    kube.wait_for(lambda: kube.get("Namespace", gamma_ns) is None, "gamma's namespace gone")
    cluster.recalculate()
    assert kube.get("LocalQueue", gamma_lq, gamma_ns) is not None
    assert cluster.pipeline.store.get_pool(cluster.spec.cluster_id).apply_status == "Applied"


def test_a_resourcequota_on_localqueues_refuses_one_team_and_the_others_are_written(make_cluster, kube):
    # Given alpha and delta governed, and beta's namespace made beforehand by its owners with a ResourceQuota that
    # allows no LocalQueue (its status as the resource-quota controller would write it)
    cluster = make_cluster(p5_nodes(3))
    for team in ("alpha", "delta"):
        cluster.put_quota(one_node_each(team))
    beta_ns = wl.namespace_of("beta")
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": beta_ns}})
    rq = f"/api/v1/namespaces/{beta_ns}/resourcequotas"
    body = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-queues"},
        "spec": {"hard": {LQ_QUOTA: "0"}},
    }
    created = kube.request("POST", rq, body)
    try:
        created["status"] = {"hard": {LQ_QUOTA: "0"}, "used": {LQ_QUOTA: "0"}}
        kube.request("PUT", f"{rq}/no-queues/status", created)
        # When beta gets a quota, then delta's quota goes
        cluster.put_quota(one_node_each("beta"))
        cluster.delete_quota(one_node_each("delta")["Name"])
        # Then beta's ClusterQueue is written, its LocalQueue is not (refused), delta's queues are deleted in the
        # same recompute that was refused beta's LocalQueue again, and alpha's stay
        assert kube.get("ClusterQueue", wl.cluster_queue_of("beta")) is not None
        assert kube.get("LocalQueue", wl.local_queue_of("beta"), beta_ns) is None
        assert kube.get("ClusterQueue", wl.cluster_queue_of("delta")) is None
        assert kube.get("LocalQueue", wl.local_queue_of("alpha"), wl.namespace_of("alpha")) is not None
        assert quota_in_kueue(kube) == 24  # alpha 8, beta 8, the Cohort the last 8
        # And the refusal is named with the API server's status and message
        pool = cluster.pipeline.store.get_pool(cluster.spec.cluster_id)
        assert pool.apply_status == "Conflict", (pool.apply_status, pool.apply_message)
        assert f"WriteRefused: LocalQueue/{beta_ns}/{wl.local_queue_of('beta')}" in pool.apply_message
        assert "HTTP 403" in pool.apply_message and "exceeded quota" in pool.apply_message
    finally:  # a ResourceQuota left in etcd would come back with the next test's namespace of that name
        kube.request("DELETE", f"{rq}/no-queues", ok=(200, 202, 404))
