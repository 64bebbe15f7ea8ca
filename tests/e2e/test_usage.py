"""Usage read back from the real Kueue: teams submit real ``batch/v1`` Jobs (label
``kueue.x-k8s.io/queue-name``), Kueue's job integration makes their Workloads and admits, holds back or preempts
them by the limits idleshare wrote; the usage sample — taken as the node watcher takes it, with exactly the watcher's
ClusterRole (a ServiceAccount bound to it: nothing else) — equals what Kueue admitted.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devkit.kube import workloads as wl
from devkit.kube.client import Kube
from idleshare.adapters.kube import LightkubeCluster
from idleshare.service.usage import latest_usage, sample_usage
from tests.e2e.conftest import GPU, P5, Cluster, p5_nodes, quota

SA_NAME = "idleshare-usage-e2e"
_last = [datetime(2000, 1, 1, tzinfo=UTC)]


def job(team: str, name: str, gpus: int) -> dict[str, Any]:
    """A batch/v1 Job of one pod asking for ``gpus`` p5 GPUs, queued in the team's LocalQueue."""
    return wl.batch_job(team, name, {GPU: gpus}, instance_type=P5)


@pytest.fixture
def watcher(kube: Kube) -> Iterator[LightkubeCluster]:
    """The adapter as a ServiceAccount bound to the node watcher's ClusterRole (infra/k8s/rbac.yaml) only."""
    adapter = kube.watcher_adapter(name=SA_NAME)
    yield adapter
    adapter.close()


def sample(cluster: Cluster, adapter: LightkubeCluster) -> dict[str, Any]:
    """One usage sample now (each a second later than the last: the history's cursor only moves forward)."""
    now = max(datetime.now(UTC).replace(microsecond=0), _last[0] + timedelta(seconds=1))
    _last[0] = now
    outcome = sample_usage(cluster.spec.cluster_id, adapter, cluster.pipeline.store, now=now)
    assert not outcome.failure, outcome.failure
    return latest_usage(cluster.pipeline.store, cluster.spec.cluster_id)


def kueue_usage(cluster: Cluster, team: str) -> dict[str, str]:
    return wl.cluster_queue_usage(cluster.kube, team).get(P5, {}).get(GPU, {"total": "0", "borrowed": "0"})


def submit(cluster: Cluster, team: str, name: str, gpus: int, *, admitted: int | None = None) -> None:
    cluster.kube.create(job(team, f"{name}-{uuid.uuid4().hex[:6]}", gpus))  # the last test's Jobs may still be going
    if admitted is not None:
        cluster.kube.wait_for(
            lambda: cluster.cluster_queue(team).get("status", {}).get("admittedWorkloads") == admitted,
            f"{team}: {admitted} workloads admitted",
        )
    time.sleep(0.3)  # Kueue decides each before the next (it orders those created in the same second arbitrarily)


def gpu(usage: dict[str, Any], team: str) -> dict[str, str]:
    return usage["teams"][team]["flavors"][P5][GPU]


def alpha_borrows_from_beta(make_cluster: Any, nodes: int, borrow_limit: int = 100) -> Cluster:
    """``nodes`` p5 nodes; alpha and beta (Lend) one node's nominal each, alpha borrowing up to ``borrow_limit``%."""
    cluster = make_cluster(p5_nodes(nodes))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=borrow_limit))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], strategy="Lend"))
    cluster.wait_active("alpha", "beta")
    return cluster


def test_borrowed_and_lent_equal_what_kueue_admitted(make_cluster: Any, watcher: LightkubeCluster) -> None:
    # Given 3 p5 nodes (24 GPUs): alpha and beta (Lend) one node each: 8 unallocated, the cohort's own quota;
    # alpha may borrow 150% of its own 8: 12
    cluster = alpha_borrows_from_beta(make_cluster, 3, borrow_limit=150)
    # When alpha runs Jobs of 8 (its nominal), 8 and 4 GPUs
    submit(cluster, "alpha", "own", 8, admitted=1)
    submit(cluster, "alpha", "borrow-8", 8, admitted=2)
    submit(cluster, "alpha", "borrow-4", 4, admitted=3)
    usage = sample(cluster, watcher)
    # Then the usage read back is Kueue's own accounting: nominal 8 + 12 borrowed
    assert kueue_usage(cluster, "alpha") == {"total": "20", "borrowed": "12"}
    assert gpu(usage, "alpha") == {"nominal": "8", "inUse": "20", "borrowed": "12", "lent": "0"}
    # And beta, which runs nothing, lends what the cohort's own 8 did not cover: 12 - 8 = 4
    assert gpu(usage, "beta") == {"nominal": "8", "inUse": "0", "borrowed": "0", "lent": "4"}
    assert usage["flavors"][P5][GPU] == {"capacity": "24", "pool": "8", "inUse": "20", "borrowed": "12", "idle": "4"}
    assert usage["teams"]["alpha"]["workloads"]["admitted"] == 3
    assert usage["idleWhilePending"] == []


def test_a_reclaim_is_counted_as_a_preemption_and_borrowed_drops(make_cluster: Any, watcher: LightkubeCluster) -> None:
    # Given 2 p5 nodes, nothing unallocated: alpha (100% of its own 8) borrows beta's whole idle quota
    cluster = alpha_borrows_from_beta(make_cluster, 2)
    submit(cluster, "alpha", "own", 8, admitted=1)
    submit(cluster, "alpha", "borrowed", 8, admitted=2)
    before = sample(cluster, watcher)
    assert gpu(before, "alpha")["borrowed"] == "8" and gpu(before, "beta")["lent"] == "8"
    # When beta takes its quota back with a Job of its own
    submit(cluster, "beta", "reclaim", 8, admitted=1)
    cluster.kube.wait_for(lambda: kueue_usage(cluster, "alpha")["borrowed"] == "0", "alpha's borrowing released")
    after = sample(cluster, watcher)
    preempted = [c for w in cluster.kube.objects("Workload", wl.namespace_of("alpha")) for c in w["status"].get("conditions", [])
                 if c["type"] in ("Preempted", "Evicted")]  # fmt: skip
    assert any(c["status"] == "True" for c in preempted), preempted
    # Then the preemption is counted on alpha, alpha borrows nothing, beta lends nothing and uses its own 8
    assert after["teams"]["alpha"]["preemptions"] == 1
    assert gpu(after, "alpha") == {"nominal": "8", "inUse": "8", "borrowed": "0", "lent": "0"}
    assert gpu(after, "beta") == {"nominal": "8", "inUse": "8", "borrowed": "0", "lent": "0"}
    assert after["teams"]["alpha"]["workloads"]["pending"] == 1  # the preempted Job waits again
    # And the next sample does not count it again
    assert sample(cluster, watcher)["teams"]["alpha"]["preemptions"] == 0


def test_idle_while_pending_rises_when_a_borrower_waits_behind_its_limit(
    make_cluster: Any, watcher: LightkubeCluster
) -> None:
    # Given 4 p5 nodes (32 GPUs); alpha may borrow 150% of its own 8: 12 (of the 16 unallocated + 8 beta lends)
    cluster = alpha_borrows_from_beta(make_cluster, 4, borrow_limit=150)
    assert cluster.limit("alpha", P5, GPU) == "12"
    submit(cluster, "alpha", "own", 8, admitted=1)
    submit(cluster, "alpha", "borrow-8", 8, admitted=2)
    submit(cluster, "alpha", "borrow-4", 4, admitted=3)
    assert sample(cluster, watcher)["idleWhilePending"] == []
    # When one more Job waits behind alpha's borrowing limit while 12 GPUs sit idle
    submit(cluster, "alpha", "one-more", 1)
    cluster.kube.wait_for(
        lambda: cluster.cluster_queue("alpha").get("status", {}).get("pendingWorkloads") == 1, "alpha: 1 pending"
    )
    usage = sample(cluster, watcher)
    # Then idle-while-pending names alpha, the flavor, the idle GPUs and Kueue's own reason
    (waiting,) = usage["idleWhilePending"]
    assert {k: waiting[k] for k in ("team", "flavor", "resource", "idle")} == {
        "team": "alpha", "flavor": P5, "resource": GPU, "idle": "12"
    }  # fmt: skip
    assert f"insufficient unused quota for {GPU} in flavor {P5}" in waiting["pendingReason"]
    assert usage["flavors"][P5][GPU]["idle"] == "12"
    assert usage["teams"]["alpha"]["workloads"]["pending"] == 1
