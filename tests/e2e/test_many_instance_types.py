"""Issue 40, finding 1, on the real stack: a cluster with more instance types than Kueue holds in the one resource
group idleshare writes (64 flavors per group in the CRD). Before, the Cohort and every ClusterQueue were refused
(``spec.resourceGroups[0].flavors: Too many: 67: must have at most 64 items``) and no team had a queue; now the
flavors quotas name and those with accelerators are governed first, the rest named, and every object is accepted."""

from __future__ import annotations

from typing import Any

from devkit.kube import kueue_versions as stack_versions
from idleshare.domain.catalog import KNOWN_INSTANCE_TYPES
from idleshare.domain.kueue_versions import limits_of
from tests.builders import EC2_CPU_TYPES
from tests.e2e.conftest import GPU, P5, p5_nodes, quota
from tests.kube.fixtures import make_node

MOST = limits_of(stack_versions.get().version).flavors_per_group  # 64 on the default stack's Kueue


def cpu_nodes(n: int) -> list[dict[str, Any]]:
    """One node each of ``n`` distinct real EC2 CPU instance types, as a Karpenter NodePool allowing any type makes."""
    return [
        make_node(
            f"ip-10-0-{i // 250}-{i % 250}.ec2.internal",
            instance_type,
            allocatable={"cpu": f"{vcpu * 1000 - 90}m", "memory": f"{gib * 1024 - 600}Mi", "pods": "110"},
        )
        for i, (instance_type, vcpu, gib) in enumerate(EC2_CPU_TYPES[:n])
    ]


def _names(cluster: Any, kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in cluster.kube.objects(kind)}


def _pool(cluster: Any) -> Any:
    return cluster.pipeline.store.get_pool(cluster.spec.cluster_id)


def _group_flavors(obj: dict[str, Any]) -> list[str]:
    (group,) = obj["spec"]["resourceGroups"]
    return [f["name"] for f in group["flavors"]]


def test_two_p5_and_66_cpu_instance_types_leave_every_team_an_active_queue(make_cluster):
    # Given 2 p5 nodes and 66 CPU nodes of distinct instance types (67 flavors)
    cluster = make_cluster([*p5_nodes(2), *cpu_nodes(66)])
    # When two teams get p5 quotas (each delivery recomputes and applies)
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=50))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    # Then the apiserver took every object: 64 ResourceFlavors, the p5 among them, the Cohort, both queues
    pool = _pool(cluster)
    assert pool.apply_status == "Applied", (pool.apply_status, pool.apply_message, pool.read_failure)
    flavors = _names(cluster, "ResourceFlavor")
    assert len(flavors) == MOST and P5 in flavors
    cohort = next(o for o in cluster.kube.objects("Cohort") if o["metadata"]["name"] == "shared-pool")
    assert set(_group_flavors(cohort)) == flavors
    assert set(_group_flavors(cluster.cluster_queue("alpha"))) == flavors
    assert cluster.limit("alpha", P5, GPU, "nominalQuota") == "8"
    assert cluster.limit("alpha", P5, GPU) == "4" and cluster.limit("beta", P5, GPU, "lendingLimit") == "8"
    cluster.wait_active("alpha", "beta")  # Kueue found every flavor and the cohort
    # And the pool names the three left out (the smallest), with a count, as a warning: no quota names them
    issue = next(i for i in pool.pool["issues"] if i["code"] == "FlavorsNotGoverned")
    assert issue["severity"] == "warning" and "3 not governed" in issue["message"], issue
    assert pool.pool["ungoverned"]["flavors"] == ["c5.large", "c6i.large", "c7i.large"]
    assert not flavors & set(pool.pool["ungoverned"]["flavors"])


def test_five_teams_naming_73_instance_types_all_get_an_active_queue(make_cluster):
    # Given 2 p5 nodes, and five quotas stored as they are (the admin API now refuses the last one; a quota
    # imported or stored before that can still be there): 14 CPU types and the p5, then 15, 15, 15, 13 CPU types
    types = sorted(t for t in KNOWN_INSTANCE_TYPES if t.startswith(("ml.c", "ml.m", "ml.r")))[:72]
    cluster = make_cluster(p5_nodes(2))
    sizes = [(0, 14), (14, 29), (29, 44), (44, 59), (59, 72)]
    for i, (lo, hi) in enumerate(sizes):
        entries = [{"InstanceType": t, "VCpu": 1, "MemoryInGiB": 2} for t in types[lo:hi]]
        if i == 0:
            entries.append({"InstanceType": P5, "Count": 1})
        cluster.put_quota(quota(f"team{i}", entries, borrow_limit=50))
    # Then every object is accepted and every team's ClusterQueue is Active
    pool = _pool(cluster)
    assert pool.apply_status == "Applied", (pool.apply_status, pool.apply_message, pool.read_failure)
    flavors = _names(cluster, "ResourceFlavor")
    assert len(flavors) == MOST and P5 in flavors
    cluster.wait_active(*(f"team{i}" for i in range(5)))
    # And an error names the nine quota flavors left out
    issue = next(i for i in pool.pool["issues"] if i["code"] == "FlavorsNotGoverned")
    assert issue["severity"] == "error" and "9 of them named by a quota" in issue["message"], issue
    assert len(pool.pool["ungoverned"]["flavors"]) == 73 - MOST
