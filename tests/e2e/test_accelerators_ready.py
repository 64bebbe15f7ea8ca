"""A GPU node whose device plugin is not up yet reports full cpu and memory and no GPU: it lends nothing — its cpu
and memory neither — until the plugin reports its GPUs (issue 31, docs/spec.md §2 `AcceleratorsNotReady`), on the
real stack: the plugin's report reaches idleshare through the node watcher alone, the Cohort follows and the real
Kueue admits the Job that waited."""

from __future__ import annotations

from devkit.kube import workloads as wl
from tests.e2e.conftest import P5, P5_ALLOCATABLE, quota
from tests.kube.fixtures import make_node

UP, BOOTING = "hyperpod-i-p50000", "hyperpod-i-p50001"
NO_GPU = {k: v for k, v in P5_ALLOCATABLE.items() if k != "nvidia.com/gpu"}


def excluded(cluster) -> dict[str, str]:
    return cluster.pipeline.store.get_pool(cluster.spec.cluster_id).pool.get("excludedNodes") or {}


def test_a_gpu_node_lends_nothing_until_its_device_plugin_reports_its_gpus(make_cluster):
    # Given 2 p5 nodes, one whose device plugin has not registered yet (no nvidia.com/gpu allocatable); team a owns
    # 2 GPUs and may borrow 600% of them (12): the pool, not its limit, is what holds it back
    cluster = make_cluster([make_node(UP, P5, allocatable=P5_ALLOCATABLE), make_node(BOOTING, P5, allocatable=NO_GPU)])
    cluster.put_quota(quota("a", [{"InstanceType": P5, "Accelerators": 2}], borrow_limit=600))
    # Then the booting node counts for nothing, its cpu and memory included: the Cohort holds one node less a's share
    assert excluded(cluster) == {BOOTING: "AcceleratorsNotReady"}
    assert cluster.cohort_quota(P5, "nvidia.com/gpu") == "6"
    cpu_one_node = cluster.cohort_quota(P5, "cpu")
    cluster.wait_active("a")
    # When a asks for 8 GPUs (2 own + the 6 the Cohort lends) and then 2 more: the second waits for capacity
    cluster.submit("a", "first", {"nvidia.com/gpu": 8})
    assert cluster.wait("first", wl.ADMITTED).flavors == {"nvidia.com/gpu": P5}
    cluster.submit("a", "second", {"nvidia.com/gpu": 2})
    assert "insufficient" in cluster.wait("second", wl.PENDING).message
    # When the device plugin comes up — only the node's status changes, nobody sends an event
    cluster.pipeline.tick()
    cluster.kube.set_status("Node", BOOTING, {"allocatable": P5_ALLOCATABLE, "capacity": P5_ALLOCATABLE})
    delivery = cluster.pipeline.watch()
    # Then the watcher published that change, the pool followed, and Kueue admits the Job that waited
    assert delivery.events == [f"Node Changed {BOOTING}: Allocatable"], delivery.events
    assert delivery.recomputes >= 1 and not delivery.failures
    assert excluded(cluster) == {}
    assert cluster.cohort_quota(P5, "nvidia.com/gpu") == "14"
    assert cluster.cohort_quota(P5, "cpu") != cpu_one_node
    assert cluster.wait("second", wl.ADMITTED).flavors == {"nvidia.com/gpu": P5}
