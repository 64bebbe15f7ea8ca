"""Admitted is not placed (issue 31, deliver 5, its failure half): on the real stack — kube-scheduler and the
daemonset and job controllers running — nodes carry realistic DaemonSets (a GPU device plugin, a CNI, a log agent:
a few hundred millicores and a few GiB each, their pods bound to every node), and a team borrows with Jobs sized to
whole nodes, as idleshare lends them today (a node's whole ``allocatable``: headroom off). Kueue admits the Job (the
quota is there), the scheduler places none of its pods (no node has a whole allocatable left): ``PodScheduled=False``,
``Unschedulable``. The usage sample, taken with the node watcher's own ClusterRole, sees them: per team and flavor,
the pods, and since when.

The other half: with headroom on (``daemonsets``, the default), idleshare lends each node's allocatable less its
DaemonSets' requests, the limits equal the hand-worked numbers, and every pod of the same Job sized to a whole node
as idleshare now lends it binds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from devkit.kube import workloads as wl
from devkit.kube.client import Kube
from idleshare.adapters.kube import LightkubeCluster
from idleshare.domain.model import Headroom
from idleshare.domain.quantity import format_quantity, parse_quantity
from idleshare.service.usage import latest_usage, sample_usage
from tests.e2e.conftest import P5, quota
from tests.e2e.test_hyperpod_examples import INSTANCE, p5

DAEMONSETS = {  # name -> its pod's requests on every node: what EKS GPU nodes run beside the work
    "nvidia-device-plugin": {"cpu": "250m", "memory": "1Gi"},
    "aws-node": {"cpu": "250m", "memory": "2Gi"},  # the VPC CNI
    "fluent-bit": {"cpu": "500m", "memory": "3Gi"},  # a log agent
}
SYSTEM = "kube-system"


def daemonset(name: str, requests: dict[str, str]) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": SYSTEM},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": name, "image": name, "resources": {"requests": requests}}],
                },
            },
        },
    }


def with_daemonsets(kube: Kube) -> None:
    """:data:`DAEMONSETS` created, and their pods bound on every node (the daemonset controller and the scheduler)."""
    for name, requests in DAEMONSETS.items():
        kube.create(daemonset(name, requests))
    kube.wait_for(
        lambda: (
            sorted(p["spec"].get("nodeName", "") for p in kube.objects("Pod", SYSTEM)).count("") == 0
            and len(kube.objects("Pod", SYSTEM)) == 4 * len(DAEMONSETS)
        ),
        "every DaemonSet's pod bound on every node",
    )


def less_daemonsets(resource: str) -> str:
    """One p5's allocatable of ``resource`` less the DaemonSets' requests of it, worked by hand."""
    used = sum((parse_quantity(r.get(resource, "0")) for r in DAEMONSETS.values()), start=parse_quantity("0"))
    return format_quantity(parse_quantity(INSTANCE[resource]) - used, resource)


def three_whole_nodes(cluster: Any, per_pod: dict[str, str]) -> dict[str, Any]:
    """alpha's Job ``whole-nodes`` of three pods asking ``per_pod`` each, submitted and settled by Kueue."""
    kube = cluster.kube
    job = wl.batch_job("alpha", "whole-nodes", per_pod, count=3, instance_type=P5)
    kube.create(job)
    cluster.jobs["whole-nodes"] = job
    kube.wait_for(lambda: wl.workload_of_job(kube, job), "the Workload of the Job")
    wl.settle_jobs(kube, [job], quiet=0.5)
    return job


@pytest.fixture
def watcher(kube: Kube) -> Iterator[LightkubeCluster]:
    """The adapter as a ServiceAccount bound to the node watcher's ClusterRole (infra/k8s/rbac.yaml) only."""
    adapter = kube.watcher_adapter(name="idleshare-placement-e2e")
    yield adapter
    adapter.close()


def test_with_headroom_off_kueue_admits_a_borrowed_whole_node_job_its_pods_stay_unbound_and_the_usage_sample_sees_them(
    make_cluster: Any, watcher: LightkubeCluster
) -> None:
    # Given 4 p5 nodes, each running a device plugin's, a CNI's and a log agent's pod (1 cpu and 6 GiB in all)
    cluster = make_cluster(p5(4), headroom=Headroom.OFF)
    kube = cluster.kube
    with_daemonsets(kube)
    # And a team owning one node's quota that may borrow two more (200%), lent each node's whole allocatable
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=200))
    assert cluster.limit("alpha", P5, "cpu", "nominalQuota") == INSTANCE["cpu"]  # headroom off: the whole node
    cluster.wait_active("alpha")
    # When it submits a Job of three pods, each sized to a whole node (its own and two borrowed)
    job = three_whole_nodes(cluster, INSTANCE)
    # Then Kueue admits it (the quota is there) and borrows two nodes' worth
    assert cluster.job_state("whole-nodes").state == wl.ADMITTED
    kube.wait_for(lambda: cluster.borrowed("alpha") == "16", "alpha borrowing 16 GPUs")

    # But the scheduler binds none of its pods: every node lacks the DaemonSets' cpu and memory
    def all_unschedulable() -> wl.Placement | None:
        p = wl.placement(kube, job)
        return p if p is not None and len(p.unschedulable) == 3 else None

    seen = kube.wait_for(all_unschedulable, "the Job's 3 pods unschedulable")
    assert not seen.placed and set(seen.pods.values()) == {""}
    for why in seen.unschedulable.values():
        assert why.startswith("Unschedulable: 0/4 nodes are available") and "Insufficient cpu" in why, why
    with pytest.raises(AssertionError, match="whole-nodes"):  # what every e2e test now asserts would fail here
        cluster.assert_placed(timeout=2)
    # And the usage sample, taken as the node watcher takes it (its ClusterRole: list pods), sees them
    time.sleep(1)  # at least a second since Kueue admitted it
    outcome = sample_usage(cluster.spec.cluster_id, watcher, cluster.pipeline.store, now=datetime.now(UTC))
    assert not outcome.failure and outcome.sample is not None, outcome.failure
    usage = latest_usage(cluster.pipeline.store, cluster.spec.cluster_id)
    (unbound,) = usage["unbound"]
    assert (unbound["team"], unbound["flavor"], unbound["pods"], unbound["workloads"]) == ("alpha", P5, 3, 1)
    assert unbound["seconds"] >= 1 and "Insufficient cpu" in unbound["reason"]
    assert (usage["unboundPods"], usage["oldestUnboundSeconds"]) == (3, unbound["seconds"])


def test_with_headroom_on_the_same_whole_node_job_is_admitted_and_every_pod_binds(make_cluster: Any) -> None:
    # Given the same 4 p5 nodes and DaemonSets, the cluster's headroom on (DaemonSets: the default)
    cluster = make_cluster(p5(4), headroom=Headroom.DAEMONSETS)
    kube = cluster.kube
    with_daemonsets(kube)
    # And alpha owning one node (its quota's change recomputes, reading the DaemonSets): each node is lent less them
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=200))
    shape = {r: less_daemonsets(r) if r in ("cpu", "memory") else q for r, q in INSTANCE.items()}
    assert shape["cpu"] == "190450m" and shape["memory"] == "2021120Mi"  # 191450m - 1, 2027264Mi - 6Gi
    for resource in ("cpu", "memory", "nvidia.com/gpu"):
        assert cluster.limit("alpha", P5, resource, "nominalQuota") == shape[resource], resource
    cluster.wait_active("alpha")
    # When it submits the Job of three pods, each sized to a whole node as idleshare lends it
    job = three_whole_nodes(cluster, shape)
    # Then Kueue admits it and every one of its pods binds to a p5 node, one per node
    assert cluster.job_state("whole-nodes").state == wl.ADMITTED
    cluster.assert_placed()
    placed = wl.placement(kube, job)
    assert placed is not None and placed.placed and not placed.unschedulable
    assert len(set(placed.pods.values())) == 3  # one whole node each
