"""What idleshare promises, on the Kueue this run's stack runs (``IDLESHARE_KUEUE_VERSION``): each case drives the
real router and recompute (:class:`tests.e2e.conftest.Cluster`) and the teams submit real ``batch/v1`` Jobs, which
Kueue's job integration turns into Workloads and admits, holds back or preempts by the limits idleshare wrote.

Where an e2e case already proves a feature with Jobs, the compat case runs that very case (one scenario, one
place); each records the ``kueue.x-k8s.io`` version idleshare's writes were stored through (its field manager's
``apiVersion``), which the support table in docs/getting-started.md shows beside the result.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from devkit.kube import workloads as wl
from devkit.kube.client import Kube
from devkit.kube.stack import KubeStack
from idleshare.adapters.kube import FIELD_MANAGER, LightkubeCluster
from idleshare.domain.kueue import webhook_violations
from idleshare.domain.kueue_versions import up
from idleshare.errors import PermanentError
from tests.e2e import test_usage
from tests.e2e.conftest import GPU, P5, Cluster, quota
from tests.e2e.test_admission import short_of
from tests.e2e.test_usage import alpha_borrows_from_beta

COHORT_FIELD = {"v1beta1": "cohort", "v1beta2": "cohortName"}
"""A ClusterQueue's Cohort, by ``kueue.x-k8s.io`` version (v1beta2 renamed it)."""


def written_api(cluster: Cluster, team: str = "alpha") -> str:
    """The apiVersion idleshare's apply of the team's ClusterQueue was stored through (its managedFields entry)."""
    entries = cluster.cluster_queue(team)["metadata"].get("managedFields") or []
    versions = {e["apiVersion"] for e in entries if e.get("manager") == FIELD_MANAGER}
    assert len(versions) == 1, entries
    return versions.pop()


@pytest.fixture
def teams(make_cluster: Any, record_property: Callable[[str, object], None]) -> Callable[..., Cluster]:
    """``teams(nodes, borrow_limit)``: alpha (LendAndBorrow ``borrow_limit`` % of one p5 node) and beta (Lend, one
    node) on ``nodes`` p5 nodes, through the pipeline; what idleshare wrote through is recorded."""

    def make(nodes: int, borrow_limit: int = 100) -> Cluster:
        cluster = alpha_borrows_from_beta(make_cluster, nodes, borrow_limit=borrow_limit)
        record_property("api", written_api(cluster))
        return cluster

    return make


def admitted_jobs(cluster: Cluster, team: str, jobs: dict[str, int]) -> None:
    """``team`` submits one-pod Jobs of ``jobs`` (name -> GPUs), each admitted before the next."""
    for name, gpus in jobs.items():
        cluster.submit_job(team, name, {GPU: gpus})
        assert cluster.wait_job(name, wl.ADMITTED).state == wl.ADMITTED, name
        cluster.kube.wait_for(lambda n=name: cluster.job_running(n), f"Job {name} unsuspended")


def test_stack_admits_a_job(kube: Kube, kube_stack: KubeStack) -> None:
    # The stack itself, whatever idleshare writes: Kueue serves exactly the versions the table says, and admits a
    # Job into objects written by hand in the newest version it serves (v1beta1 on 0.14; the Cohort v1alpha1 on 0.12)
    facts = kube_stack.kueue_facts
    groups = kube.request("GET", "/apis/kueue.x-k8s.io")["versions"]
    assert sorted(v["version"] for v in groups) == sorted(facts.served)
    team, ns = "stack", wl.namespace_of("stack")
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    resources = [{"name": GPU, "nominalQuota": "8"}]
    kube.create({"apiVersion": facts.api_version_of("ResourceFlavor"), "kind": "ResourceFlavor",
                 "metadata": {"name": P5}, "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": P5}}})  # fmt: skip
    kube.create({"apiVersion": facts.api_version_of("Cohort"), "kind": "Cohort", "metadata": {"name": "by-hand"},
                 "spec": {}})  # fmt: skip
    kube.create({
        "apiVersion": facts.api_version_of("ClusterQueue"), "kind": "ClusterQueue",
        "metadata": {"name": wl.cluster_queue_of(team)},
        "spec": {COHORT_FIELD[facts.api]: "by-hand", "namespaceSelector": {},
                 "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": P5, "resources": resources}]}]},
    })  # fmt: skip
    kube.create({"apiVersion": facts.api_version_of("LocalQueue"), "kind": "LocalQueue",
                 "metadata": {"name": wl.local_queue_of(team), "namespace": ns},
                 "spec": {"clusterQueue": wl.cluster_queue_of(team)}})  # fmt: skip
    wl.wait_active(kube, team)
    jobs = [wl.batch_job(team, "fits", {GPU: 8}, instance_type=P5), wl.batch_job(team, "over", {GPU: 1})]
    for job in jobs:
        kube.create(job)
        kube.wait_for(lambda j=job: wl.workload_of_job(kube, j), f"the Workload of Job {job['metadata']['name']}")
        wl.settle_jobs(kube, jobs[: jobs.index(job) + 1], quiet=0.5)
    fits, over = (wl.state_of(wl.workload_of_job(kube, j) or {}) for j in jobs)
    assert (fits.state, fits.flavors) == (wl.ADMITTED, {GPU: P5})
    kube.wait_for(lambda: wl.job_running(kube, jobs[0]), "Job fits unsuspended")
    assert over.state == wl.PENDING and short_of(GPU, P5, 1) in over.message
    assert not wl.job_running(kube, jobs[1])


def test_borrow_up_to_limit(teams: Callable[..., Cluster]) -> None:
    # Given 4 p5 nodes (32 GPUs): alpha may borrow 150% of its own 8 = 12 (24 idle for it)
    cluster = teams(4, borrow_limit=150)
    assert cluster.limit("alpha", P5, GPU) == "12"
    # When alpha's Jobs take its own 8 and borrow 8 + 4: all admitted, borrowing exactly its limit
    admitted_jobs(cluster, "alpha", {"own": 8, "borrow-8": 8, "borrow-4": 4})
    cluster.kube.wait_for(lambda: cluster.borrowed("alpha") == "12", "alpha borrowing 12")
    # Then a Job of one GPU more waits, with Kueue's own reason, though 12 idle GPUs remain
    cluster.submit_job("alpha", "one-more", {GPU: 1})
    assert short_of(GPU, P5, 1) in cluster.wait_job("one-more", wl.PENDING).message
    assert not cluster.job_running("one-more")
    # And it is idleshare's limit that holds it: raised to 300% (24), Kueue admits the Job
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=300))
    assert cluster.limit("alpha", P5, GPU) == "24"
    assert cluster.wait_job("one-more", wl.ADMITTED).state == wl.ADMITTED
    cluster.kube.wait_for(lambda: cluster.borrowed("alpha") == "13", "alpha borrowing 13")


def test_lender_reclaims(make_cluster: Any, watcher: LightkubeCluster, record_property: Any) -> None:
    # The e2e case, Jobs throughout: beta's Job within its quota preempts alpha's borrowed one, alpha's borrowing
    # drops to 0, the preempted Job waits again, and the usage sample counts the preemption
    made: list[Cluster] = []
    test_usage.test_a_reclaim_is_counted_as_a_preemption_and_borrowed_drops(_keeping(make_cluster, made), watcher)
    record_property("api", written_api(made[0]))


def test_node_failure_shrinks_cohort(teams: Callable[..., Cluster]) -> None:
    # Given 4 p5 nodes, alpha (300% of its one node: may borrow 24) borrowing 12 through Jobs, beta idle
    cluster = teams(4, borrow_limit=300)
    admitted_jobs(cluster, "alpha", {"own": 8, "borrow-8": 8, "borrow-4": 4})
    cluster.kube.wait_for(lambda: cluster.borrowed("alpha") == "12", "alpha borrowing 12")
    assert cluster.cohort_quota() == "16"
    # When a node fails its HyperPod health check (AWS's event -> router -> recompute)
    cluster.node_health("hyperpod-i-p50003", "Unschedulable")
    # Then the Cohort lends one node less (24 eligible - 16 allocated = 8) and alpha's limit stays 24
    assert cluster.cohort_quota() == "8" and cluster.limit("alpha", P5, GPU) == "24"
    # And Kueue follows: 24 GPUs in the cohort, 20 in use: a Job of 8 waits 4 short, one of 4 is admitted
    cluster.submit_job("alpha", "late-8", {GPU: 8})
    assert short_of(GPU, P5, 4) in cluster.wait_job("late-8", wl.PENDING).message
    admitted_jobs(cluster, "alpha", {"late-4": 4})
    cluster.kube.wait_for(lambda: cluster.borrowed("alpha") == "16", "alpha borrowing 16")
    # And when the node is back, the Cohort grows back and the waiting Job is admitted
    cluster.node_health("hyperpod-i-p50003", "Schedulable")
    assert cluster.cohort_quota() == "16"
    assert cluster.wait_job("late-8", wl.ADMITTED).state == wl.ADMITTED


def test_usage_read_back(make_cluster: Any, watcher: LightkubeCluster, record_property: Any) -> None:
    # The e2e case, Jobs throughout: the usage sample (the node watcher's reads, its ClusterRole only) equals
    # Kueue's own accounting of what it admitted: inUse, borrowed, lent per team and the flavor's idle
    made: list[Cluster] = []
    test_usage.test_borrowed_and_lent_equal_what_kueue_admitted(_keeping(make_cluster, made), watcher)
    record_property("api", written_api(made[0]))


def test_webhook_refusal_named(teams: Callable[..., Cluster]) -> None:
    # Given alpha's ClusterQueue as idleshare wrote it (read back in idleshare's model, whatever version Kueue serves)
    cluster = teams(2)
    stored = up(cluster.cluster_queue("alpha"))
    broken = {k: copy.deepcopy(stored[k]) for k in ("apiVersion", "kind", "spec")}
    broken["metadata"] = {"name": stored["metadata"]["name"]}
    gpu = next(r for r in broken["spec"]["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == GPU)
    gpu["lendingLimit"] = "9"  # above its nominalQuota of 8: a rule only Kueue's validating webhook holds
    # Then idleshare's pre-apply check names it, as the recompute would before writing anything
    assert any("lendingLimit: must be less than or equal to the nominalQuota" in e for e in webhook_violations(broken))
    # When it is written anyway, through idleshare's own adapter (its write path, its RBAC user)
    adapter = cluster.kube.idleshare_adapter()
    try:
        with pytest.raises(PermanentError) as refused:
            adapter.apply(broken)
    finally:
        adapter.close()
    # Then this Kueue's webhook refuses it, and the error names the object, the field and the rule — no raw 4xx
    message = str(refused.value)
    assert refused.value.status == 403, message  # a webhook's denial is the apiserver's Forbidden
    assert f"apply ClusterQueue/{stored['metadata']['name']}: HTTP 403: " in message, message
    assert 'admission webhook "vclusterqueue.kb.io" denied the request' in message, message
    assert "lendingLimit" in message and "must be less than or equal to the nominalQuota" in message, message
    # And nothing was written: the lendingLimit idleshare wrote (alpha lends all of its 8) stands
    assert cluster.limit("alpha", P5, GPU, "lendingLimit") == "8"


def _keeping(make_cluster: Any, made: list[Cluster]) -> Callable[..., Cluster]:
    """``make_cluster`` that keeps each Cluster it makes in ``made`` (read after an e2e case ran on it)."""

    def make(*args: Any, **kwargs: Any) -> Cluster:
        made.append(make_cluster(*args, **kwargs))
        return made[-1]

    return make
