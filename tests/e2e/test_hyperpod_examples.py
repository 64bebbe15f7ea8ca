"""AWS's worked examples of HyperPod task governance, on the real stack: the policies idleshare writes, real
``batch/v1`` Jobs in the teams' LocalQueues, the real Kueue admitting or holding them (issue 29).

The rule under test (docs/spec.md §2, the default ``Quota`` basis), from the task-governance policies page
(sagemaker-hyperpod-eks-operate-console-ui-governance-policies): "Percentage-based borrow limit: The limit of idle
compute that a team is allowed to borrow, expressed as a percentage of their guaranteed quota [...] This percentage
applies uniformly across all resource types (CPU, GPU, Memory) and instance types in the team's quota." So per
instance type in the quota and per resource ``borrowingLimit = floor(BorrowLimit% x nominal)``; an
``AbsoluteBorrowLimits`` entry replaces it for the resources it names.

Every node is p5-shaped (8 GPUs, 4 EFA devices' worth of ``vpc.amazonaws.com/efa`` as the device plugin reports
them here: 32), so "an instance" is ``Count: 1`` and an 8-GPU pod. Kueue v0.19 says a borrowing limit is reached in
the words of any quota shortage, ``insufficient unused quota for <resource> in flavor <f>, N more needed``: each
case shows the cohort still had room, so it is idleshare's number that held the Job back.
"""

from __future__ import annotations

from typing import Any

from devkit.kube import workloads as wl
from idleshare.domain.quantity import parse_quantity
from tests.e2e.conftest import GPU, P5, Cluster, quota
from tests.kube.fixtures import make_node

EFA = "vpc.amazonaws.com/efa"
P5_NODE = {"cpu": "191450m", "memory": "2027264Mi", GPU: "8", EFA: "32", "pods": "737"}
INSTANCE = {r: q for r, q in P5_NODE.items() if r != "pods"}  # what one whole-instance pod asks for


def p5(n: int) -> list[dict[str, Any]]:
    return [make_node(f"hyperpod-i-p5{i:04d}", P5, allocatable=dict(P5_NODE)) for i in range(n)]


def short_of(resource: str, n: int | str) -> str:
    return f"insufficient unused quota for {resource} in flavor {P5}, {n} more needed"


def flavor_resources(cluster: Cluster, team: str) -> dict[str, dict[str, str]]:
    """The team's ClusterQueue's p5 flavor as Kueue got it: resource -> {nominalQuota, borrowingLimit, ...}."""
    for group in cluster.cluster_queue(team)["spec"]["resourceGroups"]:
        for fl in group["flavors"]:
            if fl["name"] == P5:
                return {r["name"]: r for r in fl["resources"]}
    raise AssertionError(f"{team}'s ClusterQueue has no {P5} flavor")


def why(cluster: Cluster, team: str, resource: str) -> dict[str, Any]:
    """The pool record's derivation of the team's p5 limit on ``resource`` (what the API's grants show)."""
    record = cluster.pipeline.store.get_pool(cluster.spec.cluster_id)
    assert record is not None
    return dict(record.pool["teams"][team]["why"][P5][resource])


def test_the_policies_page_example_team_b_borrows_3_of_team_as_idle_instances_at_borrow_limit_100(make_cluster):
    # Given the policies page's example: Team A's quota is 6 instances and it uses 2, Team B's is 5 and it uses 4;
    # 11 p5 nodes, so nothing is unallocated: all B can borrow is what A lends (its 4 idle instances)
    cluster = make_cluster(p5(11))
    cluster.put_quota(quota("team-a", [{"InstanceType": P5, "Count": 6}]))
    cluster.put_quota(quota("team-b", [{"InstanceType": P5, "Count": 5}]))  # BorrowLimit: the default, 50
    assert cluster.cohort_quota() == "0"  # 88 GPUs - 48 - 40
    assert cluster.limit("team-a", P5, GPU, "lendingLimit") == "48"
    # B's limit at the default 50: floor(50% x 40) = 20 GPUs, two and a half instances (two whole ones)
    assert cluster.limit("team-b", P5, GPU, "nominalQuota") == "40"
    assert cluster.limit("team-b", P5, GPU) == "20"
    assert why(cluster, "team-b", GPU)["bound"] == "percentage of quota"
    cluster.wait_active("team-a", "team-b")
    cluster.submit_job("team-a", "a-run", {GPU: 8}, count=2)
    cluster.submit_job("team-b", "b-run", {GPU: 8}, count=4)
    assert cluster.job_state("a-run").state == cluster.job_state("b-run").state == wl.ADMITTED
    # When B submits a Job needing 4 more instances: 1 of its own is free, the other 3 (24 GPUs) would be borrowed
    cluster.submit_job("team-b", "b-more", {GPU: 8}, count=4)
    # Then at BorrowLimit 50 it waits, with Kueue's own reason (24 borrowed > 20: 4 GPUs short), although A's 4
    # instances (32 GPUs) are idle
    pending = cluster.job_state("b-more")
    assert pending.state == wl.PENDING and short_of(GPU, 4) in pending.message, pending
    assert not cluster.job_running("b-more")
    # And B may borrow 2 instances: a Job of 3 (1 own + 2 borrowed = 16 <= 20) runs beside it
    cluster.submit_job("team-b", "b-three", {GPU: 8}, count=3)
    assert cluster.job_state("b-three").state == wl.ADMITTED
    cluster.kube.wait_for(lambda: cluster.borrowed("team-b") == "16", "team-b borrowing 16")
    cluster.finish_job("b-three")
    cluster.kube.wait_for(lambda: cluster.borrowed("team-b") == "0", "team-b borrowing nothing")
    assert cluster.job_state("b-more").state == wl.PENDING
    # When B's BorrowLimit is 100 (100% x 40 = 40 GPUs, 5 instances)
    cluster.put_quota(quota("team-b", [{"InstanceType": P5, "Count": 5}], borrow_limit=100))
    assert cluster.limit("team-b", P5, GPU) == "40"
    # Then Kueue admits the Job at once: B runs 8 instances, 3 of them borrowed from A, A's 2 run on
    assert cluster.wait_job("b-more", wl.ADMITTED).state == wl.ADMITTED
    cluster.kube.wait_for(lambda: cluster.borrowed("team-b") == "24", "team-b borrowing 24")
    usage = wl.cluster_queue_usage(cluster.kube, "team-b")[P5][GPU]
    assert parse_quantity(usage["total"]) == 64  # 8 instances of 8 GPUs
    assert cluster.job_running("a-run") and cluster.job_running("b-run")
    # And every pod of the three Jobs is bound to a p5 node: 10 of the 11, the whole cluster but A's idle one
    placed = cluster.assert_placed()
    assert sorted(len(p.pods) for p in placed) == [2, 4, 4]
    assert len({node for p in placed for node in p.pods.values()}) == 10


def test_a_team_of_4_instances_at_borrow_limit_50_may_borrow_2_instances_worth_of_every_resource(make_cluster):
    # Given 8 p5 nodes and a team whose quota is 4 of them, BorrowLimit 50
    cluster = make_cluster(p5(8))
    cluster.put_quota(quota("t4", [{"InstanceType": P5, "Count": 4}], borrow_limit=50))
    # Then its ClusterQueue lists every resource of the instance, each with a borrowing limit of 2 instances'
    # worth (50% of 4 x the node's allocatable) and a nominal quota of 4
    resources = flavor_resources(cluster, "t4")
    assert {"cpu", "memory", GPU, EFA} <= set(resources), resources
    for r, per_instance in INSTANCE.items():
        one = parse_quantity(per_instance)
        assert parse_quantity(resources[r]["borrowingLimit"]) == 2 * one, (r, resources[r])
        assert parse_quantity(resources[r]["nominalQuota"]) == 4 * one, (r, resources[r])
        assert why(cluster, "t4", r)["bound"] == "percentage of quota"
    assert resources["cpu"]["borrowingLimit"] == "382900m"  # 2 x 191450m
    assert resources[GPU]["borrowingLimit"] == "16" and resources[EFA]["borrowingLimit"] == "64"
    cluster.wait_active("t4")
    # When it runs 6 whole-instance pods (4 own + 2 borrowed) and then asks for one more instance
    cluster.submit_job("t4", "six", INSTANCE, count=6)
    assert cluster.job_state("six").state == wl.ADMITTED
    cluster.kube.wait_for(lambda: cluster.borrowed("t4") == "16", "t4 borrowing 16 GPUs")
    cluster.submit_job("t4", "seventh", INSTANCE)
    # Then the seventh waits on its limit (every resource is one instance short), with 2 nodes idle in the cohort
    pending = cluster.job_state("seventh")
    assert pending.state == wl.PENDING, pending
    assert "insufficient unused quota for" in pending.message and f"in flavor {P5}" in pending.message, pending
    assert short_of(GPU, 8) in pending.message or short_of("cpu", "191450m") in pending.message, pending
    assert cluster.cohort_quota() == "32"


def test_borrow_limit_0_with_an_absolute_limit_of_8_gpus_borrows_exactly_8(make_cluster):
    # Given 4 p5 nodes and a team whose quota is 2 of them (16 GPUs), BorrowLimit 0 and an absolute limit of 8 GPUs
    cluster = make_cluster(p5(4))
    cluster.put_quota(
        quota(
            "abs8",
            [{"InstanceType": P5, "Count": 2}],
            borrow_limit=0,
            absolute=[{"InstanceType": P5, "Accelerators": 8}],
        )
    )
    # Then the absolute limit replaces the percentage for GPUs only: GPUs 8; cpu, memory, efa 0% of the quota: 0
    resources = flavor_resources(cluster, "abs8")
    assert resources[GPU]["borrowingLimit"] == "8" and why(cluster, "abs8", GPU)["bound"] == "absolute"
    for r in ("cpu", "memory", EFA):
        assert parse_quantity(resources[r]["borrowingLimit"]) == 0, (r, resources[r])
    assert cluster.cohort_quota() == "16"  # 32 - 16: room for more than 8
    cluster.wait_active("abs8")
    # When it asks for its quota + 9 GPUs (25: five pods of 5), then for its quota + 8 (24: three pods of 8)
    cluster.submit_job("abs8", "plus-9", {GPU: 5}, count=5)
    cluster.submit_job("abs8", "plus-8", {GPU: 8}, count=3)
    # Then + 9 waits, with 16 GPUs idle in the cohort: Kueue's own words, the team's maximum is its quota 16 + its
    # borrowing limit 8; and + 8 is admitted: it borrows 8
    pending = cluster.job_state("plus-9")
    assert pending.state == wl.PENDING, pending
    assert f"insufficient quota for {GPU} in flavor {P5}" in pending.message, pending
    assert "current podset request (25) > maximum capacity (24)" in pending.message, pending
    assert cluster.job_state("plus-8").state == wl.ADMITTED
    cluster.kube.wait_for(lambda: cluster.borrowed("abs8") == "8", "abs8 borrowing 8 GPUs")
