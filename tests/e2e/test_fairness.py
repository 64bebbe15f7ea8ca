"""A fair distribution of idle capacity, in the real Kueue, with real ``batch/v1`` Jobs.

Every team's work is a Job labelled ``kueue.x-k8s.io/queue-name`` (and ``kueue.x-k8s.io/priority-class``):
Kueue's Job integration suspends it, makes its Workload, and unsuspends the Job when it admits it — so "running"
here is what Kueue did to the Job (``spec.suspend`` false), and every admitted Job's pods are bound to nodes of
its flavor (:meth:`Cluster.assert_placed`). An evicted Job that Kueue suspends again has its pods deleted by the job
controller (the stack's kubelet stand-in ends them at once) and Kueue releases its quota.

The numbers: 6 p5 nodes (48 GPUs); alpha and beta each own one node (8 GPUs), both LendAndBorrow; 32 GPUs are
unallocated (the cohort's own quota). A BorrowLimit is a percentage of the team's own quota (docs/spec.md §2):
alpha's 250% of 8 = 20, beta's 500% = 40 (more than the 32 + alpha's 8 it could ever find idle). Every Job asks
for 4 GPUs.

Kueue's dominant-resource share of a ClusterQueue is ``borrowed / lendable / weight`` (only GPUs are borrowed:
the Jobs ask for nothing else), the same ``lendable`` (the cohort's 48 GPUs) for both: the fair point of the
32 GPUs above both nominals with weights 1 and 3 is alpha 8, beta 24 (8/1 = 24/3). With the stack's
strategies (LessThanOrEqualToFinalShare, then LessThanInitialShare) beta preempts alpha's borrowed Jobs while
``(b + 4) / 3 <= (32 - b - 4) / 1`` — up to b = 24; at b = 24, 28/3 > 4 (S2-a) and 28/3 > 8 (S2-b): it stops.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from devkit.embedded import Embedded
from devkit.kube import workloads as wl
from devkit.kube.client import Kube
from devkit.kube.stack import KubeStack, StackError, ensure_built
from devkit.lambda_context import LambdaContext
from devkit.scenario import _event
from idleshare import timings
from idleshare.api import app as admin_api
from idleshare.domain.naming import priority_class_name
from idleshare.errors import PermanentError
from idleshare.parse.kueue_config import read_kueue_config
from tests.builders import proxy_event
from tests.e2e.conftest import GPU, P5, Cluster, p5_nodes, quota

JOB_GPUS = 4
API_CONTEXT = LambdaContext(function_name="admin-api", account="111122223333", aws_request_id="e2e-fairness")
PRIORITIES = [{"Name": "inference", "Weight": 100}, {"Name": "training", "Weight": 10}]


def job(team: str, name: str, gpus: int = JOB_GPUS, priority: str | None = None) -> dict[str, Any]:
    """A team's ``batch/v1`` Job of one pod asking for ``gpus`` GPUs, queued in the team's LocalQueue."""
    return wl.batch_job(team, name, {GPU: gpus}, priority_class=priority_class_name(priority) if priority else None)


class Jobs(Cluster):
    """The e2e :class:`Cluster` with the teams' work as Jobs, and the admin API in front of the store."""

    jobs: dict[str, dict[str, Any]]

    def workload_of(self, name: str) -> dict[str, Any] | None:
        return wl.workload_of_job(self.kube, self.jobs[name])

    def running(self, name: str) -> bool:
        return wl.job_running(self.kube, self.jobs[name])

    def settle_jobs(self, quiet: float = 1.0, timeout: float = 60.0) -> None:
        wl.settle_jobs(self.kube, self.jobs.values(), quiet=quiet, timeout=timeout)

    def submit_jobs(self, team: str, names: list[str], priority: str | None = None) -> None:
        """``team`` submits one Job per name, one after the other (each decided before the next)."""
        for name in names:
            body = job(team, name, priority=priority)
            self.kube.create(body)
            self.jobs[name] = body
            self.kube.wait_for(lambda n=name: self.workload_of(n), f"the Workload of Job {name}")
            self.settle_jobs(quiet=0.3)
        self.settle_jobs(quiet=1.0)  # the last one too, however long Kueue takes to admit it
        self.assert_placed()

    def admitted(self, team: str) -> list[str]:
        return [
            n for n, b in self.jobs.items() if b["metadata"]["labels"]["idleshare.io/team"] == team and self.running(n)
        ]

    def usage(self, team: str) -> tuple[int, int]:
        """(GPUs the team's admitted Jobs hold, of which borrowed), from its ClusterQueue's status."""
        per = wl.cluster_queue_usage(self.kube, team).get(P5, {}).get(GPU, {})
        return int(per.get("total", "0")), int(per.get("borrowed", "0"))

    def preempted_by(self, reason: str) -> list[str]:
        return sorted(
            n
            for n in self.jobs
            if (w := self.workload_of(n)) is not None and wl.conditions(w).get("Preempted", {}).get("reason") == reason
        )

    # -- the admin API (the API Lambda's own handler, on the pipeline's store and publisher) ----------------

    def admin(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        """One admin API request (the API Lambda's handler); a write's published events then routed and
        recomputed by the pipeline, one second of queue clock later (inside the coalescing window)."""
        before = len(self.pipeline.published)
        reply = admin_api.handler(proxy_event(method, path, body=body), API_CONTEXT)
        assert reply["statusCode"] in (200, 201), reply
        events = self.pipeline.published[before:]
        if method != "GET":
            assert events, "the admin API published no event"
            self.pipeline.tick(1.0)
        for event in events:
            delivery = self.pipeline.deliver(_event(self.spec, event["detail-type"], event["detail"]))
            assert not delivery.failures and delivery.recomputes >= 1, delivery
        return json.loads(reply["body"]) if reply.get("body") else {}

    def quota_version(self, name: str) -> int:
        return int(self.admin("GET", f"/clusters/{self.spec.cluster_id}/compute-quotas/{name}")["ComputeQuotaVersion"])

    def pool_issues(self) -> list[str]:
        record = self.pipeline.store.get_pool(self.spec.cluster_id)
        assert record is not None
        return [i["code"] for i in record.pool.get("issues", [])]


@contextlib.contextmanager
def jobs_cluster(kube: Kube, nodes: list[dict[str, Any]]) -> Iterator[Jobs]:
    pipeline = Embedded(copy.deepcopy(nodes), sim=kube)
    pipeline.__enter__()
    cluster = Jobs(pipeline, kube)
    cluster.jobs = {}
    try:
        yield cluster
    finally:
        delete_jobs(kube)
        pipeline.__exit__(None, None, None)
        kube.reset()


def delete_jobs(kube: Kube) -> None:
    """Every Job, gone before the Workloads go (else Kueue makes a Job's Workload again)."""
    kube.delete_all("Job")
    kube.wait_for(lambda: not kube.objects("Job"), "every Job deleted")


@pytest.fixture
def fair(kube: Kube) -> Iterator[Jobs]:
    """The suites' stack (Kueue's fair sharing on), 6 p5 nodes."""
    with jobs_cluster(kube, p5_nodes(6)) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kube_without_fair_sharing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """A second stack, Kueue's fair sharing off (no ``fairSharing`` section): started once per session, only by
    the tests that need it."""
    try:
        stack = KubeStack(tmp_path_factory.mktemp("kube-no-fair-sharing"), ensure_built(), fair_sharing=False).start()
    except StackError as exc:
        pytest.fail(f"the second stack (fair sharing off) could not start: {exc}", pytrace=False)
    client = Kube.admin(stack)
    try:
        yield client
    finally:
        client.close()
        stack.stop()


@pytest.fixture
def unfair(kube_without_fair_sharing: Kube) -> Iterator[Jobs]:
    kube_without_fair_sharing.reset()
    with jobs_cluster(kube_without_fair_sharing, p5_nodes(6)) as cluster:
        yield cluster


def quota_with_weight(team: str, borrow: int, weight: int, **kwargs: Any) -> dict[str, Any]:
    body = quota(team, [{"InstanceType": P5, "Count": 1}], borrow_limit=borrow, **kwargs)
    body["ComputeQuotaTarget"] = {"TeamName": team, "FairShareWeight": weight}
    return body


def teams(cluster: Jobs, alpha: tuple[int, int], beta: tuple[int, int], fair_share: str = "Enabled") -> None:
    """alpha and beta as the module says, with (borrow %, weight) each."""
    cluster.scheduler_config({"FairShare": fair_share, "PriorityClasses": PRIORITIES})
    cluster.put_quota(quota_with_weight("alpha", *alpha))
    cluster.put_quota(quota_with_weight("beta", *beta))
    assert cluster.limit("alpha", P5, GPU) == str(8 * alpha[0] // 100)  # BorrowLimit% x its own 8 GPUs
    assert cluster.limit("beta", P5, GPU) == str(8 * beta[0] // 100)
    cluster.wait_active("alpha", "beta")


def job_names(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i:02d}" for i in range(n)]


# -- 1. fair share on: borrowed capacity in proportion to the weights --------------------------------------------


def test_weights_1_and_3_share_the_borrowed_gpus_1_to_3_a_later_team_preempts_until_fair(fair):
    # Given alpha (weight 1, may borrow 20) and beta (weight 3, may borrow 40), fair sharing on everywhere
    teams(fair, alpha=(250, 1), beta=(500, 3))
    cq = {t: fair.cluster_queue(t)["spec"] for t in ("alpha", "beta")}
    assert cq["alpha"]["fairSharing"] == {"weight": "1"} and cq["beta"]["fairSharing"] == {"weight": "3"}
    assert fair.pool_issues() == []  # FairShare Enabled on a Kueue with fair sharing on: nothing to say
    # When alpha, first, queues 12 Jobs of 4 GPUs (48): it runs its 8 and borrows up to its limit, 20
    fair.submit_jobs("alpha", job_names("alpha", 12))
    assert len(fair.admitted("alpha")) == 7 and fair.usage("alpha") == (28, 20)
    # And beta, later, queues 10 (40 GPUs, more than the 32 above both nominals)
    fair.submit_jobs("beta", job_names("beta", 10))
    fair.settle_jobs()
    # Then Kueue reclaimed beta's nominal and evened the borrowing out by weight: alpha borrows 8, beta 24 (1:3)
    assert fair.usage("alpha") == (16, 8)
    assert fair.usage("beta") == (32, 24)
    assert len(fair.admitted("alpha")) == 4 and len(fair.admitted("beta")) == 8
    # And the Jobs Kueue took from alpha were taken by fair sharing (beta had 20 GPUs free, then preempted 3)
    assert len(fair.preempted_by("InCohortFairSharing")) == 3, fair.preempted_by("InCohortFairSharing")
    # And no team is ever below its nominal: alpha keeps its own 8 (and 8 borrowed), beta runs its 8
    assert fair.usage("alpha")[0] - fair.usage("alpha")[1] == 8


# -- 2. fair share off: first come, first served, up to each team's limit ----------------------------------------


def test_fair_share_off_first_come_first_served_up_to_each_teams_borrowing_limit(unfair):
    # Given the same teams on a Kueue with fair sharing off, and FairShare Disabled
    teams(unfair, alpha=(250, 1), beta=(500, 3), fair_share="Disabled")
    assert "fairSharing" not in unfair.cluster_queue("beta")["spec"]  # Disabled: no weight written
    assert unfair.pool_issues() == []
    # When alpha, first, queues 12 Jobs and beta, later, 10
    unfair.submit_jobs("alpha", job_names("alpha", 12))
    assert unfair.usage("alpha") == (28, 20)  # its limit
    unfair.submit_jobs("beta", job_names("beta", 10))
    unfair.settle_jobs()
    # Then alpha keeps what it took first (its 20, nothing preempted), beta gets the rest: 8 own + 12 borrowed
    assert unfair.usage("alpha") == (28, 20)
    assert unfair.usage("beta") == (20, 12)
    assert len(unfair.admitted("alpha")) == 7 and len(unfair.admitted("beta")) == 5
    assert unfair.preempted_by("InCohortFairSharing") == [] and unfair.preempted_by("InCohortReclamation") == []


def test_idleshare_reads_kueues_configuration_and_nothing_else(fair):
    # idleshare's own adapter, as its RBAC user: the one ConfigMap, as the stack's Kueue runs it
    adapter = fair.pipeline.kube
    reading = read_kueue_config(adapter.get_config_map)
    assert reading is not None and reading.config is not None and reading.config.fair_sharing
    assert reading.config.preemption_strategies == ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
    assert reading.config.frameworks == ("batch/job",)
    # and no other ConfigMap (RBAC: get on kueue-manager-config by name only): 403, permanent
    with pytest.raises(PermanentError) as refused:
        adapter.get_config_map("kube-system", "extension-apiserver-authentication")
    assert refused.value.status == 403


def test_the_pool_names_what_kueue_will_not_do(fair):
    # FairShare Disabled on a Kueue with fair sharing on: a named warning (Kueue still evens borrowing out)
    teams(fair, alpha=(250, 1), beta=(500, 3), fair_share="Disabled")
    assert fair.pool_issues() == ["KueueFairSharingWithFairShareDisabled"]
    # Enabled again: nothing to say
    fair.scheduler_config({"FairShare": "Enabled", "PriorityClasses": PRIORITIES})
    assert fair.pool_issues() == []
    # Unreadable (the ConfigMap gone): a warning, the recompute still applies
    fair.kube.request("DELETE", "/api/v1/namespaces/kueue-system/configmaps/kueue-manager-config")
    try:
        fair.recalculate()
        assert fair.pool_issues() == ["KueueConfigUnreadable"]
        assert fair.limit("alpha", P5, GPU) == "20"
    finally:
        fair.kube.stack._write_config_map((fair.kube.stack.workdir / "kueue-config.yaml").read_text())


def test_fair_share_enabled_on_a_kueue_without_fair_sharing_is_named(unfair):
    teams(unfair, alpha=(250, 1), beta=(500, 3))
    assert unfair.pool_issues() == ["FairShareWithoutKueueFairSharing"]


# -- 3. weight 0: only what nobody else wants ---------------------------------------------------------------------


def test_a_weight_0_team_borrows_only_what_nobody_else_wants(fair):
    # Given alpha weight 0 (HyperPod's lowest) and beta weight 1
    teams(fair, alpha=(250, 0), beta=(500, 1))
    assert fair.cluster_queue("alpha")["spec"]["fairSharing"] == {"weight": "0"}
    # When alpha borrows all it may (20) while nobody else wants the GPUs
    fair.submit_jobs("alpha", job_names("alpha", 12))
    assert fair.usage("alpha") == (28, 20)
    # And beta wants 32 (8 own + 24): 20 are free, the other 4 come from alpha's borrowed Jobs
    fair.submit_jobs("beta", job_names("beta", 8))
    fair.settle_jobs()
    # Then alpha keeps only the 8 borrowed GPUs nobody wants
    assert fair.usage("beta") == (32, 24) and fair.usage("alpha") == (16, 8)
    # When beta wants 8 more (40): alpha borrows nothing at all, its own 8 stay
    fair.submit_jobs("beta", job_names("beta-more", 2))
    fair.settle_jobs()
    assert fair.usage("beta") == (40, 32) and fair.usage("alpha") == (8, 0)


# -- 4. priority classes and PreemptTeamTasks ---------------------------------------------------------------------


def test_preempt_team_tasks_never_waits_lower_priority_preempts_the_teams_own_job(kube):
    # Given one team alone on one node, with the priority classes as WorkloadPriorityClasses
    with jobs_cluster(kube, p5_nodes(1)) as cluster:
        cluster.scheduler_config({"PriorityClasses": PRIORITIES})
        assert kube.get("WorkloadPriorityClass", "inference-priority")["value"] == 100
        assert kube.get("WorkloadPriorityClass", "training-priority")["value"] == 10
        cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=0, preempt="Never"))
        assert cluster.cluster_queue("alpha")["spec"]["preemption"]["withinClusterQueue"] == "Never"
        cluster.wait_active("alpha")
        # When a low-priority Job holds the team's 8 GPUs and a high-priority one comes
        cluster.jobs["low"] = job("alpha", "low", 8, "training")
        cluster.kube.create(cluster.jobs["low"])
        cluster.kube.wait_for(lambda: cluster.running("low"), "low running")
        cluster.jobs["high"] = job("alpha", "high", 8, "inference")
        cluster.kube.create(cluster.jobs["high"])
        cluster.kube.wait_for(lambda: cluster.workload_of("high"), "high's Workload")
        cluster.settle_jobs()
        # Then with PreemptTeamTasks Never it waits
        assert cluster.running("low") and not cluster.running("high")
        assert cluster.workload_of("high")["spec"]["priority"] == 100
        # When PreemptTeamTasks becomes LowerPriority (through the admin API)
        cluster.admin(
            "PUT",
            f"/clusters/{cluster.spec.cluster_id}/compute-quotas/alpha-quota",
            {
                "ComputeQuotaConfig": _config(preempt="LowerPriority"),
                "TargetVersion": cluster.quota_version("alpha-quota"),
            },
        )
        assert cluster.cluster_queue("alpha")["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
        # Then Kueue preempts the team's own low-priority Job for the high one
        cluster.kube.wait_for(lambda: cluster.running("high"), "high running", timeout=30)
        cluster.settle_jobs()
        assert not cluster.running("low")
        assert cluster.preempted_by("InClusterQueue") == ["low"]


def test_a_lender_reclaims_borrowed_work_whatever_the_borrowers_preempt_team_tasks(kube):
    # Given 2 p5 nodes: alpha (PreemptTeamTasks Never, BorrowLimit 100%: 8, all beta lends) and beta (Lend)
    with jobs_cluster(kube, p5_nodes(2)) as cluster:
        cluster.scheduler_config({"PriorityClasses": PRIORITIES})
        cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=100, preempt="Never"))
        cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend", preempt="Never"))
        cluster.wait_active("alpha", "beta")
        # And alpha running 4 high-priority Jobs: its own 8 GPUs and beta's idle 8
        cluster.submit_jobs("alpha", job_names("alpha", 4), priority="inference")
        assert cluster.usage("alpha") == (16, 8)
        # When beta submits low-priority Jobs within its own quota
        cluster.submit_jobs("beta", job_names("beta", 2), priority="training")
        cluster.settle_jobs()
        # Then Kueue reclaims beta's 8 from alpha's borrowed work: priorities and PreemptTeamTasks do not matter
        assert cluster.usage("beta") == (8, 0) and cluster.usage("alpha") == (8, 0)
        assert len(cluster.preempted_by("InCohortReclamation")) == 2


def _config(preempt: str, borrow: int = 0) -> dict[str, Any]:
    return {
        "ComputeQuotaResources": [{"InstanceType": P5, "Count": 1}],
        "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": borrow},
        "PreemptTeamTasks": preempt,
    }


# -- 5. a change through the admin API reaches Kueue within the coalescing window ----------------------------------


def test_a_weight_and_fair_share_changed_through_the_admin_api_reach_kueue(fair):
    # Given the two teams, weights 1 and 3
    teams(fair, alpha=(250, 1), beta=(500, 3))
    cid = fair.spec.cluster_id
    window = timings.COALESCE_SECONDS
    # When beta's weight is changed through the admin API (UpdateComputeQuota)
    t0 = fair.pipeline.clock[0]
    version = fair.quota_version("beta-quota")
    fair.admin(
        "PUT",
        f"/clusters/{cid}/compute-quotas/beta-quota",
        {"ComputeQuotaTarget": {"TeamName": "beta", "FairShareWeight": 7}, "TargetVersion": version},
    )
    # Then Kueue's ClusterQueue carries it within one coalescing window (queue clock: the API call, one second,
    # the window's hold)
    assert fair.cluster_queue("beta")["spec"]["fairSharing"] == {"weight": "7"}
    assert fair.pipeline.clock[0] - t0 <= window + 1
    # When FairShare is turned off through the admin API (UpdateClusterSchedulerConfig)
    t1 = fair.pipeline.clock[0]
    current = fair.admin("GET", f"/clusters/{cid}/scheduler-config")
    fair.admin(
        "PUT",
        f"/clusters/{cid}/scheduler-config",
        {
            "SchedulerConfig": {"FairShare": "Disabled", "PriorityClasses": PRIORITIES},
            "TargetVersion": current["SchedulerConfigVersion"],
        },
    )
    # Then the weights are gone from Kueue within the window, and the pool names what this Kueue still does
    assert "fairSharing" not in fair.cluster_queue("beta")["spec"]
    assert "fairSharing" not in fair.cluster_queue("alpha")["spec"]
    assert fair.pipeline.clock[0] - t1 <= window + 1
    assert fair.pool_issues() == ["KueueFairSharingWithFairShareDisabled"]
