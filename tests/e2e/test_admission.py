"""Kueue admission by the limits idleshare wrote: each case asserts what the real Kueue did.

Kueue v0.19's words for "this team's borrowing limit is reached" are those of any quota shortage —
``insufficient unused quota for <resource> in flavor <f>, N more needed`` — so each case also shows that the
cohort still had room and that idleshare's number, not capacity, held the workload back.
"""

from __future__ import annotations

from devkit.kube import workloads as wl
from idleshare.domain.model import BorrowLimitBasis
from tests.e2e.conftest import GPU, P4D, P5, p4d_mig_nodes, p5_nodes, quota

MIG_1G, MIG_3G = "nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.20gb"


def short_of(resource: str, flavor: str, n: int) -> str:
    return f"insufficient unused quota for {resource} in flavor {flavor}, {n} more needed"


def test_a_team_runs_its_quota_then_borrows_idle_gpus_up_to_its_borrowing_limit(make_cluster):
    # Given 4 p5 nodes (32 GPUs); alpha LendAndBorrow 150% with one node's quota, beta Lend with one node
    cluster = make_cluster(p5_nodes(4))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=150))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    # alpha's limit: 150% of its own 8 = 12 GPUs; idle for it: 32 - 16 = 16 unallocated + 8 lent by beta = 24
    assert cluster.limit("alpha", P5, GPU, "nominalQuota") == "8"
    assert cluster.limit("alpha", P5, GPU) == "12"
    cluster.wait_active("alpha", "beta")
    # When alpha runs its guaranteed 8, then borrows 8 + 4
    cluster.submit("alpha", "own", {GPU: 8})
    assert cluster.wait("own", wl.ADMITTED).flavors == {GPU: P5}
    cluster.submit("alpha", "borrow-8", {GPU: 8})
    cluster.submit("alpha", "borrow-4", {GPU: 4})
    states = cluster.settle("own", "borrow-8", "borrow-4")
    assert {s.state for s in states.values()} == {wl.ADMITTED}
    assert cluster.borrowed("alpha") == "12"
    # Then one GPU more stays pending, with Kueue's own reason, although the cohort has 12 GPUs idle
    cluster.submit("alpha", "one-more", {GPU: 1})
    pending = cluster.wait("one-more", wl.PENDING)
    assert short_of(GPU, P5, 1) in pending.message
    # And it is idleshare's limit that holds it: raised to 300% (24), Kueue admits it at once
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=300))
    assert cluster.limit("alpha", P5, GPU) == "24"
    assert cluster.wait("one-more", wl.ADMITTED).state == wl.ADMITTED
    cluster.kube.wait_for(lambda: cluster.borrowed("alpha") == "13", "alpha borrowing 13")


def test_a_failed_node_moves_only_the_cohort_kueue_admits_only_what_is_free(make_cluster):
    # Given 4 p5 nodes, alpha (300% of its one node: may borrow 24) borrowing 12, beta (Lend) idle
    cluster = make_cluster(p5_nodes(4))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=300))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    cluster.wait_active("alpha", "beta")
    cluster.run("alpha", {"own": {GPU: 8}, "borrow-8": {GPU: 8}, "borrow-4": {GPU: 4}})
    assert cluster.borrowed("alpha") == "12" and cluster.cohort_quota() == "16"
    # When a p5 node fails its HyperPod health check (AWS's event -> router -> recompute)
    delivery = cluster.node_health("hyperpod-i-p50003", "Unschedulable")
    # Then only the Cohort moves (32 - 8 = 24 eligible, 16 allocated: 8 unallocated); alpha's limit stays 24
    assert cluster.cohort_quota() == "8"
    assert cluster.limit("alpha", P5, GPU) == "24"
    assert delivery.recomputes >= 1
    # And Kueue admits only what is free: 8 + 8 + 8 = 24 GPUs in the cohort, 20 in use; a borrower of 8 (alpha
    # would borrow 20, within its limit) waits 4 GPUs short, one of 4 is admitted
    cluster.submit("alpha", "late-8", {GPU: 8})
    assert short_of(GPU, P5, 4) in cluster.wait("late-8", wl.PENDING).message
    cluster.submit("alpha", "late-4", {GPU: 4})
    assert cluster.wait("late-4", wl.ADMITTED).state == wl.ADMITTED
    cluster.kube.wait_for(lambda: cluster.borrowed("alpha") == "16", "alpha borrowing 16")
    # And when the node is back, the Cohort grows back and the waiting borrower is admitted, the limit untouched
    cluster.node_health("hyperpod-i-p50003", "Schedulable")
    assert cluster.cohort_quota() == "16" and cluster.limit("alpha", P5, GPU) == "24"
    assert cluster.wait("late-8", wl.ADMITTED).state == wl.ADMITTED


def test_on_the_pool_basis_a_failed_node_lowers_the_limit_new_borrowers_wait_and_admitted_ones_run_on(make_cluster):
    # Given a cluster on the Pool basis (BorrowLimit a percentage of the pool the team sees) and alpha borrowing
    # 12 GPUs, its limit: unallocated 32 - 16 = 16 + 8 lent by beta = 24; 50% -> 12
    cluster = make_cluster(p5_nodes(4), basis=BorrowLimitBasis.POOL)
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=50))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    assert cluster.limit("alpha", P5, GPU) == "12"
    cluster.wait_active("alpha", "beta")
    cluster.run("alpha", {"own": {GPU: 8}, "borrow-8": {GPU: 8}, "borrow-4": {GPU: 4}})
    assert cluster.borrowed("alpha") == "12"
    # When a p5 node fails its HyperPod health check (AWS's event -> router -> recompute)
    cluster.node_health("hyperpod-i-p50003", "Unschedulable")
    # Then the limit in the cluster shrinks: 24 - 16 = 8 unallocated + 8 lent = 16; 50% -> 8
    assert cluster.limit("alpha", P5, GPU) == "8"
    cohort = cluster.kube.get("Cohort", "shared-pool")
    assert cohort["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2] == {"name": GPU, "nominalQuota": "8"}
    # And a new borrower beyond it stays pending
    cluster.submit("alpha", "late", {GPU: 1})
    assert short_of(GPU, P5, 1) in cluster.wait("late", wl.PENDING).message
    # And Kueue leaves the workloads it admitted above the new limit running: a limit change evicts nothing
    states = cluster.settle("own", "borrow-8", "borrow-4", "late")
    assert [states[n].state for n in ("own", "borrow-8", "borrow-4")] == [wl.ADMITTED] * 3
    assert cluster.borrowed("alpha") == "12"  # 4 above the new limit, until work finishes
    # When the 4-GPU borrower finishes, alpha borrows 8 = its limit: still no room for one more
    cluster.finish("borrow-4")
    cluster.kube.wait_for(lambda: cluster.borrowed("alpha") == "8", "alpha borrowing 8")
    assert cluster.state("late").state == wl.PENDING
    # When the 8-GPU borrower finishes too, the late one is admitted within the new limit
    cluster.finish("borrow-8")
    assert cluster.wait("late", wl.ADMITTED).state == wl.ADMITTED
    assert cluster.borrowed("alpha") == "1"


def test_a_lender_always_reaches_its_quota_kueue_preempts_the_borrower(make_cluster):
    # Given 2 p5 nodes: alpha (LendAndBorrow 100%: 8 GPUs, its own quota again) and beta (Lend), one node each:
    # nothing unallocated, so all alpha can borrow is what beta lends, 8 GPUs
    cluster = make_cluster(p5_nodes(2))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=100))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    assert cluster.limit("alpha", P5, GPU) == "8" and cluster.limit("beta", P5, GPU, "lendingLimit") == "8"
    cluster.wait_active("alpha", "beta")
    # And alpha running its own 8 GPUs plus beta's idle 8
    cluster.run("alpha", {"own": {GPU: 8}, "borrowed": {GPU: 8}})
    assert cluster.borrowed("alpha") == "8"
    # When beta submits within its own nominal quota
    cluster.submit("beta", "lender", {GPU: 8})
    # Then Kueue preempts one of alpha's workloads — alpha is borrowing, and Kueue picks the victim among the
    # borrowing ClusterQueue's workloads (here two equal ones) — to reclaim beta's lent quota
    victim = wl.wait_any(cluster.kube, [cluster.submitted["own"], cluster.submitted["borrowed"]], wl.PREEMPTED)
    assert victim.reason == "InCohortReclamation", victim
    assert "reclamation within the cohort" in victim.message and "hyperpod-ns-beta-clusterqueue" in victim.message
    # And once the victim's job has stopped (what its Job controller does), beta is admitted and alpha keeps
    # exactly its own quota
    wl.release_evicted(cluster.kube, cluster.submitted[victim.name])
    assert cluster.wait("lender", wl.ADMITTED).state == wl.ADMITTED
    survivor = "own" if victim.name == "borrowed" else "borrowed"
    assert cluster.state(survivor).state == wl.ADMITTED
    cluster.kube.wait_for(lambda: cluster.borrowed("alpha") == "0", "alpha borrowing nothing")
    victim_now = cluster.kube.get("Workload", victim.name, "hyperpod-ns-alpha")
    assert wl.conditions(victim_now)["QuotaReserved"]["status"] == "False"  # queued again, for when room returns


def test_a_dont_lend_teams_idle_quota_is_never_used_by_anyone_else(make_cluster):
    # Given 3 p5 nodes: gamma DontLend with one node's quota, alpha LendAndBorrow 100% with one node
    cluster = make_cluster(p5_nodes(3))
    cluster.put_quota(quota("gamma", [{"InstanceType": P5, "Count": 1}], strategy="DontLend"))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=100))
    # alpha's limit: 100% of its own 8; idle for it: the 8 unallocated, nothing from gamma; gamma lends nothing,
    # borrows nothing
    assert cluster.limit("alpha", P5, GPU) == "8"
    assert cluster.limit("gamma", P5, GPU, "lendingLimit") == "0"
    assert cluster.limit("gamma", P5, GPU) == "0"
    cluster.wait_active("alpha", "gamma")
    # When alpha runs its 8, borrows the 8 unallocated, and asks for 8 more while gamma is idle
    states = cluster.run("alpha", {name: {GPU: 8} for name in ("own", "unallocated", "gammas")})
    # Then Kueue never admits the third: gamma's 8 GPUs stay gamma's
    assert [s.state for s in states.values()] == [wl.ADMITTED, wl.ADMITTED, wl.PENDING]
    assert short_of(GPU, P5, 8) in states["gammas"].message
    # And gamma gets its whole quota at once, preempting nobody
    cluster.submit("gamma", "gamma-job", {GPU: 8})
    assert cluster.wait("gamma-job", wl.ADMITTED).state == wl.ADMITTED
    assert cluster.state("unallocated").state == wl.ADMITTED


def test_idle_sharing_disabled_leaves_borrowers_only_what_lenders_lend(make_cluster):
    # Given 3 p5 nodes: alpha LendAndBorrow 100% and beta Lend, one node each; 8 GPUs unallocated
    cluster = make_cluster(p5_nodes(3))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=100))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    assert cluster.limit("alpha", P5, GPU) == "8"  # 100% of its own 8
    assert cluster.cohort_quota() == "8"
    # When the scheduler config turns idle resource sharing off
    cluster.scheduler_config({"IdleResourceSharing": "Disabled"})
    # Then the cohort's own quota is 0; alpha's limit stays 8 (a share of its own quota), what beta lends
    assert cluster.cohort_quota() == "0"
    assert cluster.limit("alpha", P5, GPU) == "8"
    cluster.wait_active("alpha", "beta")
    # And Kueue admits alpha's own 8 and beta's lent 8, never the unallocated node's
    states = cluster.run("alpha", {name: {GPU: 8} for name in ("own", "lent", "unallocated")})
    assert [s.state for s in states.values()] == [wl.ADMITTED, wl.ADMITTED, wl.PENDING]
    assert cluster.borrowed("alpha") == "8"


def test_mig_slices_are_borrowed_as_their_own_resources_and_an_absolute_cap_holds(make_cluster):
    # Given 2 p4d nodes cut into MIG slices (each 28 x 1g.5gb + 8 x 3g.20gb); vision owns 14 1g slices,
    # BorrowLimit 100% but an absolute limit of 10 1g slices (AbsoluteBorrowLimits), which replaces it for 1g
    cluster = make_cluster(p4d_mig_nodes(2))
    cluster.put_quota(
        quota(
            "vision",
            [{"InstanceType": P4D, "AcceleratorPartition": {"Type": "mig-1g.5gb", "Count": 14}}],
            borrow_limit=100,
            absolute=[{"InstanceType": P4D, "AcceleratorPartition": {"Type": "mig-1g.5gb", "Count": 10}}],
        )
    )
    # 1g: the absolute 10 (100% of 14 would be 14), with 56 - 14 = 42 unallocated; 3g: 100% of its 0 = 0, with 16
    # unallocated
    assert cluster.limit("vision", P4D, MIG_1G, "nominalQuota") == "14"
    assert cluster.limit("vision", P4D, MIG_1G) == "10"
    assert cluster.limit("vision", P4D, MIG_3G) == "0"
    cluster.wait_active("vision")
    # When vision runs 14 1g slices of its own, borrows 10 more, then asks for one more
    states = cluster.run(
        "vision", {"own": {MIG_1G: 14}, "borrow": {MIG_1G: 10}, "over-cap": {MIG_1G: 1}, "3g": {MIG_3G: 4}}
    )
    # Then the cap holds in Kueue (32 idle 1g slices notwithstanding), and 3g slices, none in its quota, are not
    # borrowed at all (16 idle notwithstanding)
    assert states["own"].state == states["borrow"].state == wl.ADMITTED
    assert states["over-cap"].state == wl.PENDING
    assert short_of(MIG_1G, P4D, 1) in states["over-cap"].message
    assert states["3g"].state == wl.PENDING
    assert "request (4) > maximum capacity (0)" in states["3g"].message, states["3g"]
    cluster.kube.wait_for(lambda: cluster.borrowed("vision", P4D, MIG_1G) == "10", "vision borrowing 10 1g slices")
    assert cluster.borrowed("vision", P4D, MIG_3G) == "0"


def test_a_deleted_quota_removes_the_teams_queues_and_running_work_finishes(make_cluster):
    # Given alpha running one workload with another pending
    cluster = make_cluster(p5_nodes(2))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=0))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    cluster.wait_active("alpha")
    cluster.run("alpha", {"running": {GPU: 8}, "waiting": {GPU: 8}})
    # When alpha's quota is deleted
    cluster.delete_quota("alpha-quota")
    # Then its LocalQueue is gone and its ClusterQueue is being deleted; its namespace stays
    assert cluster.kube.get("LocalQueue", wl.local_queue_of("alpha"), wl.namespace_of("alpha")) is None
    cq = cluster.kube.get("ClusterQueue", wl.cluster_queue_of("alpha"))
    assert cq is None or cq["metadata"].get("deletionTimestamp")
    assert cluster.kube.get("Namespace", wl.namespace_of("alpha")) is not None
    # And Kueue lets the admitted workload run to its end (the ClusterQueue waits for it), the pending one
    # is never admitted
    assert cluster.state("running").state == wl.ADMITTED
    assert cluster.state("waiting").state == wl.PENDING
    cluster.finish("running")
    cluster.kube.wait_for(
        lambda: cluster.kube.get("ClusterQueue", wl.cluster_queue_of("alpha")) is None, "alpha's ClusterQueue gone"
    )
    assert cluster.state("waiting").state == wl.PENDING


def test_a_kubectl_cordon_reaches_idleshare_through_the_node_watcher_alone(make_cluster, kube_stack):
    # Given the local pipeline with its node watcher, 2 idle p5 nodes in the cohort
    cluster = make_cluster(p5_nodes(4))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=100))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    assert cluster.cohort_quota() == "16" and cluster.limit("alpha", P5, GPU) == "8"  # 100% of its own 8
    # When an admin cordons a node with kubectl — no event is sent by anyone
    cluster.pipeline.tick()
    kube_stack.kubectl("cordon", "hyperpod-i-p50003")
    delivery = cluster.pipeline.watch()
    # Then the watcher published exactly one Node Changed for it, and the limit in the cluster shrank
    assert delivery.events == ["Node Changed hyperpod-i-p50003: Cordoned"], delivery.events
    # the leading recompute, and the window's trailing one (which finds nothing new)
    assert delivery.recomputes == 2 and not delivery.failures
    assert cluster.cohort_quota() == "8"  # 24 eligible - 16 allocated
    assert cluster.limit("alpha", P5, GPU) == "8"  # a share of its own quota: unchanged
    # And a heartbeat-like status update (a condition's timestamp) produces nothing
    node = cluster.kube.get("Node", "hyperpod-i-p50002")
    for c in node["status"]["conditions"]:
        c["lastHeartbeatTime"] = "2026-12-03T10:00:00Z"
    cluster.kube.set_status("Node", "hyperpod-i-p50002", {"conditions": node["status"]["conditions"]})
    cluster.pipeline.tick()
    assert cluster.pipeline.watch().events == []
