"""End to end on the real stack: idleshare's real router and recompute handlers (moto for DynamoDB, SQS and
EventBridge, as in ``make demo``) write limits into the real kube-apiserver, and the real Kueue manager
admits, holds back and preempts the teams' ``Workload`` s by them.

Every change goes in as production sees it: an admin API-style store write followed by the event the
API emits, a HyperPod health event, a node change — routed, queued, recomputed, applied.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from devkit.embedded import ClusterSpec, Delivery, Embedded
from devkit.kube import workloads as wl
from devkit.kube.client import Kube
from devkit.scenario import _event
from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.domain.model import BorrowLimitBasis, Headroom
from tests.builders import quota_body
from tests.kube.fixtures import make_node

P5 = "ml.p5.48xlarge"
P4D = "ml.p4d.24xlarge"
P5_ALLOCATABLE = {"cpu": "191450m", "memory": "2027264Mi", "nvidia.com/gpu": "8", "pods": "737"}
# A p4d cut into MIG slices by the GPU operator: 7 × 1g.5gb on each of 8 GPUs... here 4 GPUs in 1g and 4 in 3g.
P4D_MIG_ALLOCATABLE = {
    "cpu": "95690m",
    "memory": "1109186Mi",
    "nvidia.com/gpu": "0",
    "nvidia.com/mig-1g.5gb": "28",
    "nvidia.com/mig-3g.20gb": "8",
    "pods": "250",
}
GPU = "nvidia.com/gpu"


def p5_nodes(n: int) -> list[dict[str, Any]]:
    return [make_node(f"hyperpod-i-p5{i:04d}", P5, allocatable=P5_ALLOCATABLE) for i in range(n)]


def p4d_mig_nodes(n: int) -> list[dict[str, Any]]:
    return [make_node(f"hyperpod-i-p4d{i:04d}", P4D, allocatable=P4D_MIG_ALLOCATABLE) for i in range(n)]


def quota(
    team: str,
    resources: list[dict[str, Any]],
    *,
    strategy: str = "LendAndBorrow",
    borrow_limit: int | None = None,
    absolute: list[dict[str, Any]] | None = None,
    preempt: str = "LowerPriority",
) -> dict[str, Any]:
    """A SageMaker CreateComputeQuota body (without ClusterArn)."""
    return quota_body(
        team,
        strategy=strategy,
        borrow=borrow_limit,
        resources=resources,
        absolute=absolute,
        preempt=preempt,
        enabled=True,
    )


class Cluster:
    """One governed cluster: the pipeline (``.pipeline``) and the real apiserver + Kueue (``.kube``)."""

    def __init__(self, pipeline: Embedded, kube: Kube) -> None:
        self.pipeline = pipeline
        self.kube = kube
        self.spec: ClusterSpec = pipeline.cluster
        self.submitted: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}

    # -- what an admin and the cluster do, each followed by its event through the pipeline -----------------

    def _deliver(self, detail_type: str, detail: dict[str, Any], source: str = "idleshare") -> Delivery:
        self.pipeline.tick()  # a new coalescing window
        delivery = self.pipeline.deliver(_event(self.spec, detail_type, detail, source))
        assert not delivery.failures, delivery.failures
        assert delivery.recomputes >= 1, delivery
        return delivery

    def put_quota(self, body: Mapping[str, Any]) -> Delivery:
        store, cid = self.pipeline.store, self.spec.cluster_id
        current = store.get_quota(cid, body["Name"])
        if current is None:
            store.create_quota(cid, dict(body))
        else:
            store.update_quota(cid, body["Name"], dict(body), target_version=current.version)
        return self._deliver("Compute Quota Changed", {"cluster": cid, "quotaName": body["Name"]})

    def delete_quota(self, name: str) -> Delivery:
        self.pipeline.store.delete_quota(self.spec.cluster_id, name)
        return self._deliver("Compute Quota Changed", {"cluster": self.spec.cluster_id, "quotaName": name})

    def scheduler_config(self, body: Mapping[str, Any]) -> Delivery:
        store, cid = self.pipeline.store, self.spec.cluster_id
        current = store.get_scheduler_config(cid)
        store.put_scheduler_config(cid, {"SchedulerConfig": dict(body)}, current.version if current else None)
        return self._deliver("Scheduler Config Changed", {"cluster": cid})

    def node_health(self, node: str, status: str, repair: str = "Replace") -> Delivery:
        """The HyperPod health agent's verdict on a node, as AWS sends it (the node's label follows)."""
        detail = {
            "ClusterName": self.spec.hyperpod_cluster_arn.rsplit("/", 1)[-1],
            "ClusterArn": self.spec.hyperpod_cluster_arn,
            "InstanceId": node.removeprefix("hyperpod-"),
            "Tags": {},
            "HealthSummary": {"HealthStatus": status, "HealthStatusReason": "e2e", "RepairAction": repair},
        }
        return self._deliver("SageMaker HyperPod Cluster Node Health Event", detail, "aws.sagemaker")

    def recalculate(self) -> Delivery:
        return self._deliver("Recalculation Requested", {"cluster": self.spec.cluster_id, "reason": "e2e"})

    # -- what Kueue sees -------------------------------------------------------------------------------------

    def cluster_queue(self, team: str) -> dict[str, Any]:
        cq = self.kube.get("ClusterQueue", wl.cluster_queue_of(team))
        assert cq is not None, f"no ClusterQueue for {team}"
        return cq

    def limit(self, team: str, flavor: str, resource: str, field: str = "borrowingLimit") -> str | None:
        for group in self.cluster_queue(team)["spec"]["resourceGroups"]:
            for fl in group["flavors"]:
                if fl["name"] == flavor:
                    for res in fl["resources"]:
                        if res["name"] == resource:
                            return res.get(field)
        return None

    def wait_active(self, *teams: str) -> None:
        """Kueue marks a ClusterQueue Active once its flavors and cohort exist: only then does it admit."""
        for team in teams:
            wl.wait_active(self.kube, team)

    def submit(self, team: str, name: str, requests: Mapping[str, str | int], **kwargs: Any) -> dict[str, Any]:
        body = wl.workload_of(wl.batch_job(team, name, requests, **kwargs))
        self.kube.create(body)
        self.submitted[name] = body
        # Kueue decides before the next one is submitted (it orders workloads created within the same second
        # arbitrarily, so "the third one waits" needs the first two decided first)
        wl.settle(self.kube, [(body["metadata"]["namespace"], name)], quiet=0.3)
        return body

    def state(self, name: str) -> wl.WorkloadState:
        body = self.submitted[name]
        current = self.kube.get("Workload", name, body["metadata"]["namespace"])
        assert current is not None, name
        return wl.state_of(current)

    def wait(self, name: str, *states: str, timeout: float = 30.0) -> wl.WorkloadState:
        return wl.wait_state(self.kube, self.submitted[name], *states, timeout=timeout)

    def settle(self, *names: str) -> dict[str, wl.WorkloadState]:
        wl.settle(self.kube, [(self.submitted[n]["metadata"]["namespace"], n) for n in names])
        return {n: self.state(n) for n in names}

    def run(self, team: str, jobs: Mapping[str, Mapping[str, str | int]]) -> dict[str, wl.WorkloadState]:
        """``team`` submits ``jobs`` (name -> requests) one after the other; their settled states, in order."""
        for name, requests in jobs.items():
            self.submit(team, name, requests)
        return self.settle(*jobs)

    def finish(self, name: str) -> None:
        wl.finish(self.kube, self.submitted[name])

    def borrowed(self, team: str, flavor: str = P5, resource: str = GPU) -> str:
        return wl.cluster_queue_usage(self.kube, team).get(flavor, {}).get(resource, {}).get("borrowed", "0")

    def cohort_quota(self, flavor: str = P5, resource: str = GPU) -> str | None:
        """The Cohort's nominalQuota of ``resource`` on ``flavor`` (the unallocated capacity it lends)."""
        cohort = self.kube.get("Cohort", "shared-pool")
        assert cohort is not None, "no Cohort"
        for group in cohort["spec"]["resourceGroups"]:
            for fl in group["flavors"]:
                if fl["name"] == flavor:
                    for res in fl["resources"]:
                        if res["name"] == resource:
                            return str(res["nominalQuota"])
        return None

    # -- the teams' work as users submit it: batch/v1 Jobs in their LocalQueues ------------------------------

    def submit_job(
        self, team: str, name: str, requests: Mapping[str, str | int], *, count: int = 1, instance_type: str = P5
    ) -> dict[str, Any]:
        """``team`` submits a ``batch/v1`` Job of ``count`` pods each asking for ``requests``; Kueue makes its
        Workload and decides before this returns."""
        job = wl.batch_job(team, name, requests, count=count, instance_type=instance_type)
        self.kube.create(job)
        self.jobs[name] = job
        self.kube.wait_for(lambda: wl.workload_of_job(self.kube, job), f"the Workload of Job {name}")
        wl.settle_jobs(self.kube, self.jobs.values(), quiet=0.5)
        self.assert_placed()
        return job

    def assert_placed(self, timeout: float = 30.0) -> list[wl.Placement]:
        """Admitted means placed: every pod of every Job Kueue admitted (now) exists and is bound to a node of the
        flavor Kueue chose (the real kube-scheduler, by the node labels Kueue gave the pods)."""
        placements = wl.wait_placed(self.kube, self.jobs.values(), timeout=timeout)
        assert all(p.placed for p in placements), placements
        return placements

    def job_state(self, name: str) -> wl.WorkloadState:
        """What Kueue did with the Job's Workload (Admitted, Pending with Kueue's message, ...)."""
        current = wl.workload_of_job(self.kube, self.jobs[name])
        assert current is not None, f"no Workload for Job {name}"
        return wl.state_of(current)

    def wait_job(self, name: str, *states: str, timeout: float = 30.0) -> wl.WorkloadState:
        """Until the Job's Workload reaches one of ``states``."""
        current = wl.workload_of_job(self.kube, self.jobs[name])
        assert current is not None, f"no Workload for Job {name}"
        return wl.wait_state(self.kube, current, *states, timeout=timeout)

    def finish_job(self, name: str) -> None:
        """The Job completed (its pods Succeeded, as a kubelet reports them): the job controller completes it,
        its Workload is Finished and Kueue releases its quota."""
        wl.finish_job(self.kube, self.jobs[name])

    def job_running(self, name: str) -> bool:
        """Kueue admitted the Job and unsuspended it."""
        return wl.job_running(self.kube, self.jobs[name])


@pytest.fixture
def make_cluster(kube: Kube) -> Iterator[Any]:
    """``make_cluster(nodes, basis=..., headroom=...) -> Cluster``: the pipeline on the (emptied) real stack with
    these nodes, registered with that BorrowLimit basis (default: the registry's, ``Quota``) and headroom setting
    (default: the registry's). Jobs it submitted are deleted first when it closes (else Kueue makes a Job's Workload
    again)."""
    opened: list[tuple[Embedded, Cluster]] = []

    def _make(
        nodes: list[dict[str, Any]],
        basis: BorrowLimitBasis = BorrowLimitBasis.QUOTA,
        headroom: Headroom | None = None,
    ) -> Cluster:
        spec = ClusterSpec(settings=ClusterSettings(borrow_limit_basis=basis))
        if headroom is not None:
            spec = dataclasses.replace(spec, settings=spec.settings.replace(headroom=headroom))
        pipeline = Embedded(copy.deepcopy(nodes), cluster=spec, sim=kube)
        pipeline.__enter__()
        cluster = Cluster(pipeline, kube)
        opened.append((pipeline, cluster))
        return cluster

    yield _make
    for pipeline, cluster in reversed(opened):
        if cluster.jobs:
            kube.delete_all("Job")
            kube.wait_for(lambda: not kube.objects("Job"), "every Job deleted")
        pipeline.__exit__(None, None, None)
