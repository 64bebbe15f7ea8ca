"""A MIG node mid-reconfiguration lends no slices until NVIDIA's MIG manager says ``success`` (issue 29; HyperPod
task governance: "the ``nvidia.com/mig.config.state`` label must show ``success`` for the node to contribute MIG
profiles to unallocated resource sharing"), on the real stack: the label's flip reaches idleshare through the node
watcher alone, the Cohort's quota follows and the real Kueue admits the Job that waited."""

from __future__ import annotations

from typing import Any

from devkit.kube import workloads as wl
from idleshare.domain.model import MIG_CONFIG_STATE_LABEL
from tests.e2e.conftest import P4D, P4D_MIG_ALLOCATABLE, quota
from tests.kube.fixtures import make_node

MIG_1G, MIG_3G = "nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.20gb"
READY_NODE, RECONFIGURING = "hyperpod-i-p4d0000", "hyperpod-i-p4d0001"


def p4d(name: str, mig_state: str) -> dict[str, Any]:
    return make_node(name, P4D, allocatable=P4D_MIG_ALLOCATABLE, labels={MIG_CONFIG_STATE_LABEL: mig_state})


def cohort_quota(cluster: Any, resource: str) -> str | None:
    cohort = cluster.kube.get("Cohort", "shared-pool")
    for group in cohort["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            if flavor["name"] == P4D:
                for res in flavor["resources"]:
                    if res["name"] == resource:
                        return res["nominalQuota"]
    return None


def excluded(cluster: Any) -> dict[str, str]:
    return cluster.pipeline.store.get_pool(cluster.spec.cluster_id).pool.get("excludedNodes") or {}


def test_a_mig_node_mid_reconfiguration_lends_no_slices_until_its_label_turns_success(make_cluster, kube_stack):
    # Given 2 p4d nodes cut into MIG slices (each 28 x 1g.5gb + 8 x 3g.20gb), one whose MIG manager is still
    # applying its layout (label pending); vision owns 14 1g slices and may borrow 200% of them (28)
    cluster = make_cluster([p4d(READY_NODE, "success"), p4d(RECONFIGURING, "pending")])
    vision = [{"InstanceType": P4D, "AcceleratorPartition": {"Type": "mig-1g.5gb", "Count": 14}}]
    cluster.put_quota(quota("vision", vision, borrow_limit=200))
    # Then the reconfiguring node's slices are in no quota: the Cohort holds one node's 28 - 14 = 14 1g, 8 3g
    assert cohort_quota(cluster, MIG_1G) == "14"
    assert cohort_quota(cluster, MIG_3G) == "8"
    assert excluded(cluster) == {RECONFIGURING: "MigNotReady"}
    cluster.wait_active("vision")
    # When vision asks for 34 1g slices (its 14 and 20 borrowed): the Cohort has 14 to lend, so Kueue's most for
    # vision is 14 + 14 = 28 and the Job waits, Kueue's reason naming that maximum
    cluster.submit("vision", "wide", {MIG_1G: 34})
    pending = cluster.wait("wide", wl.PENDING).message
    assert f"insufficient quota for {MIG_1G} in flavor {P4D}" in pending and "(34) > maximum capacity (28)" in pending
    # When the MIG manager finishes — only the label changes, nobody sends an event
    cluster.pipeline.tick()
    kube_stack.kubectl("label", "node", RECONFIGURING, f"{MIG_CONFIG_STATE_LABEL}=success", "--overwrite")
    delivery = cluster.pipeline.watch()
    # Then the node watcher published exactly that change and the pool followed in the same window
    assert delivery.events == [f"Node Changed {RECONFIGURING}: MigConfigState"], delivery.events
    assert delivery.recomputes >= 1 and not delivery.failures
    assert cohort_quota(cluster, MIG_1G) == "42"  # 56 - 14
    assert cohort_quota(cluster, MIG_3G) == "16"
    assert excluded(cluster) == {}
    # And the real Kueue admits the Job that waited, 20 of its slices borrowed
    assert cluster.wait("wide", wl.ADMITTED).flavors == {MIG_1G: P4D}
    cluster.kube.wait_for(lambda: cluster.borrowed("vision", P4D, MIG_1G) == "20", "vision borrowing 20 1g slices")
    # And a status update that is only a heartbeat changes nothing
    node = cluster.kube.get("Node", RECONFIGURING)
    for condition in node["status"]["conditions"]:
        condition["lastHeartbeatTime"] = "2026-12-04T10:00:00Z"
    cluster.kube.set_status("Node", RECONFIGURING, {"conditions": node["status"]["conditions"]})
    cluster.pipeline.tick()
    assert cluster.pipeline.watch().events == []
