"""Event faults through the running pipeline: duplicates, reordering, replays of old events, events for
unknown or deleted clusters, a recompute killed between persist and apply, and drift in the cluster.
Events are triggers, not state (docs/spec.md §4): whatever arrives, the pool follows the cluster as it is."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from idleshare.adapters.kube import LightkubeCluster
from idleshare.domain.cluster_settings import FieldOwnership
from idleshare.handlers import router
from tests.integration.invariants import assert_converged, recovers, settle
from tests.integration.test_pipeline import CONTEXT, EVENTS, harness  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration

HEALTH = "sagemaker.amazonaws.com/node-health-status"
WRITES = ("PATCH", "POST", "PUT", "DELETE")


def event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def health_event(status: str) -> dict[str, Any]:
    e = event("hyperpod-node-health-event.json")
    e["detail"]["HealthSummary"]["HealthStatus"] = status
    return e


def set_health(h: Any, node: str, status: str) -> None:
    obj = h.sim.get("Node", node)
    obj["metadata"]["labels"][HEALTH] = status
    h.sim.set_node(obj)


def writes(h: Any) -> list[Any]:
    return [r for r in h.sim.requests if r.method in WRITES]


def items(h: Any) -> list[dict[str, Any]]:
    return sorted(h.store.table.scan(ConsistentRead=True)["Items"], key=lambda i: (i["pk"], i["sk"]))


def test_duplicates_in_one_window_are_one_recompute_and_across_windows_write_nothing(harness):  # noqa: F811
    # Given a converged cluster with p5-0 now unhealthy
    baseline, log = settle(harness)
    set_health(harness, "p5-0", "Unhealthy")
    # When the same node event is delivered three times within one dedup window
    harness.clock[0] += 60
    for _ in range(3):
        assert router.handler(health_event("Unhealthy"), CONTEXT)["enqueued"] == ["demo"]
    # Then SQS holds the window's two messages: the leading recompute, one new generation (the trailing one waits
    # for the window's end)
    out = harness.drain()
    assert out["records"] == 2 and out["batchItemFailures"] == [] and len(out["deferred"]) == 1
    assert log.observe() == 2
    # And delivered again in later windows, it writes nothing anywhere
    harness.sim.clear_requests()
    for _ in range(2):
        harness.send(health_event("Unhealthy"))
        assert harness.drain()["batchItemFailures"] == []
    assert log.observe() == 2 and writes(harness) == []
    assert recovers(harness, log, baseline)["excludedNodes"] == {"p5-0": "Unhealthy"}


def test_reordered_events_end_in_the_state_the_cluster_is_in(harness):  # noqa: F811
    # Given a converged cluster; p5-0 goes unhealthy, then recovers
    baseline, log = settle(harness)
    set_health(harness, "p5-0", "Unhealthy")
    set_health(harness, "p5-0", "Schedulable")
    # When the "recovered" event arrives before the "unhealthy" one
    for status in ("Healthy", "Unhealthy"):
        harness.send(health_event(status))
        assert harness.drain()["batchItemFailures"] == []
    # Then the pool is the cluster's as it is: nothing excluded, nothing moved
    assert log.observe() == 1
    assert recovers(harness, log, baseline) == baseline


def test_a_replayed_old_event_does_not_resurrect_the_old_state(harness):  # noqa: F811
    # Given p5-0 went unhealthy (generation 2) and recovered (generation 3)
    baseline, log = settle(harness)
    old = health_event("Unhealthy")
    set_health(harness, "p5-0", "Unhealthy")
    harness.send(old)
    harness.drain()
    assert harness.store.get_pool("demo").pool["excludedNodes"] == {"p5-0": "Unhealthy"}
    set_health(harness, "p5-0", "Schedulable")
    harness.send(health_event("Healthy"))
    harness.drain()
    assert log.observe() == 3
    harness.sim.clear_requests()
    # When the old "unhealthy" event is replayed (an EventBridge archive replay, a retry)
    replayed = copy.deepcopy(old) | {"replay-name": "archive-replay"}
    harness.send(replayed)
    assert harness.drain()["batchItemFailures"] == []
    # Then it is a trigger, not state: p5-0 stays eligible, no generation, no write
    assert log.observe() == 3 and writes(harness) == []
    assert harness.store.get_pool("demo").pool["excludedNodes"] == {}
    assert recovers(harness, log, baseline) == baseline


@pytest.mark.parametrize(
    "unknown",
    [
        pytest.param(
            lambda: (
                health_event("Unhealthy")
                | {
                    "detail": health_event("Unhealthy")["detail"]
                    | {"ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/other-cluster"}
                }
            ),
            id="HyperPod event of another cluster",
        ),
        pytest.param(
            lambda: event("idleshare-node-changed.json") | {"detail": {"cluster": "ghost", "node": "n1"}},
            id="own event naming an unknown id",
        ),
        pytest.param(
            lambda: (
                event("idleshare-recalculation-requested-by-eks-name.json")
                | {"detail": {"eksClusterName": "no-such-eks"}}
            ),
            id="unknown EKS name",
        ),
    ],
)
def test_an_event_for_an_unknown_cluster_is_dropped_and_writes_nothing(harness, unknown):  # noqa: F811
    # Given a converged cluster and what the table holds
    settle(harness)
    before = items(harness)
    harness.sim.clear_requests()
    # When an event names a cluster idleshare does not govern
    out = harness.send(unknown())
    # Then it is dropped (no error: EventBridge does not retry it), nothing is queued or written
    assert out == {"enqueued": [], "dropped": "UnknownCluster"}
    assert harness.drain()["records"] == 0
    assert items(harness) == before and writes(harness) == []


def test_a_queued_recompute_for_a_deleted_cluster_is_dropped_not_retried(harness):  # noqa: F811
    # Given a recompute request queued for demo, then demo removed from the registry
    settle(harness)
    harness.send(event("idleshare-node-changed.json"))
    for sk in ("CLUSTER#demo", "EKS#demo-eks", "ARN#arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster"):
        harness.store.table.delete_item(Key={"pk": "REGISTRY", "sk": sk})
    harness.store.table.delete_item(Key={"pk": "CLUSTER#demo", "sk": "META"})
    before = items(harness)
    harness.sim.clear_requests()
    # When the recompute handler gets it
    out = harness.drain()
    # Then it is consumed (not handed back for SQS to retry into the DLQ), and so is the window's trailing message
    # once due, and nothing is written
    assert out["records"] == 2 and out["batchItemFailures"] == []
    trailing = harness.drain()
    assert trailing["records"] == 1 and trailing["batchItemFailures"] == [] and trailing["deferred"] == []
    assert harness.drain()["records"] == 0
    assert items(harness) == before and writes(harness) == []


class KilledAfterPersist(LightkubeCluster):
    """The Lambda times out once the pool is stored: the first call after the persist never returns."""

    def list_managed(self) -> list[dict[str, Any]]:
        raise TimeoutError("Task timed out after 60.00 seconds")


def test_a_recompute_killed_between_persist_and_apply_is_converged_by_the_next(harness):  # noqa: F811
    # Given a converged cluster and a node gone
    baseline, log = settle(harness)
    harness.sim.delete_node("p5-3")
    harness.kube = KilledAfterPersist(harness.sim.url, token=lambda: harness.sim.stack.idleshare_token, name="demo")
    harness.sim.clear_requests()
    # When the recompute dies after storing generation 2, before touching the cluster
    out = harness.recalc()
    assert len(out["batchItemFailures"]) == 1
    stored = harness.store.get_pool("demo")
    assert stored.generation == 2 and stored.apply_status == "Pending" and writes(harness) == []
    assert harness.cq_gpu("a") == "12"  # the cluster still holds generation 1
    # Then the redelivery re-applies although the digest did not change, and records the apply
    harness.kube = harness.sim.adapter()
    out = harness.drain()
    assert out["batchItemFailures"] == []
    assert log.observe() == 2 and harness.cq_gpu("a") == "8"
    assert_converged(harness.sim, harness.store, "demo")
    recovers(harness, log, baseline)


def test_drift_in_the_cluster_is_undone_by_the_next_recompute_without_a_new_generation(harness):  # noqa: F811
    # Given a converged cluster (apply recorded as Applied) whose ClusterQueue someone edits by hand. On the
    # real server the hand edit (an update) takes the field (Kueue's CRD makes resourceGroups one atomic list)
    # from idleshare, which leaves fields another manager owns alone unless told to take them: this cluster is.
    baseline, log = settle(harness)
    harness.store.put_cluster(harness.store.get_cluster("demo").with_settings(field_ownership=FieldOwnership.TAKE))
    cq = harness.sim.get("ClusterQueue", "hyperpod-ns-a-clusterqueue")
    gpu = next(
        r
        for f in cq["spec"]["resourceGroups"][0]["flavors"]
        if f["name"] == "ml.p5.48xlarge"
        for r in f["resources"]
        if r["name"] == "nvidia.com/gpu"
    )
    gpu["borrowingLimit"] = "64"
    harness.sim.put(cq)
    # When any event triggers a recompute
    recovers(harness, log, baseline)
    # Then the cluster is back to the stored grants, on the same generation
    assert harness.cq_gpu("a") == "12" and log.seen[-1] == 1


def test_a_change_is_recomputed_at_once_and_a_later_one_in_its_window_by_the_trailing_recompute(harness):  # noqa: F811
    # Given the deployed queue on the harness's clock and a converged cluster
    from idleshare import timings

    _, log = settle(harness)
    harness.clock[0] = window_start = (harness.clock[0] // 10 + 6) * 10  # the start of a window
    # When p5-0 fails and its event is routed
    set_health(harness, "p5-0", "Unhealthy")
    router.handler(health_event("Unhealthy"), CONTEXT)
    # Then the leading recompute sees it at once (the window's trailing message is handed back until it closes)
    out = harness.drain(max_wait=0)
    assert out["records"] == 2 and out["batchItemFailures"] == [] and len(out["deferred"]) == 1
    assert harness.store.get_pool("demo").pool["excludedNodes"] == {"p5-0": "Unhealthy"}
    assert log.observe() == 2
    # When p5-1 fails 2 s later, in the same window: both its messages are duplicates of the window's two
    harness.clock[0] += 2
    set_health(harness, "p5-1", "Unhealthy")
    router.handler(health_event("Unhealthy"), CONTEXT)
    assert harness.esm.depth() == 1
    # Then once the window has closed, the trailing recompute sees it: two recomputes for the window, no more
    out = harness.drain()
    assert out["records"] == 1 and out["batchItemFailures"] == [] and out["deferred"] == []
    assert harness.esm.invocations[-1].started >= window_start + timings.COALESCE_SECONDS
    assert harness.store.get_pool("demo").pool["excludedNodes"] == {"p5-0": "Unhealthy", "p5-1": "Unhealthy"}
    assert log.observe() == 3
    assert harness.esm.depth() == 0
    assert_converged(harness.sim, harness.store, "demo")


def test_an_isolated_change_costs_a_leading_recompute_and_a_trailing_one_that_writes_nothing(harness):  # noqa: F811
    # Given a converged cluster
    _, log = settle(harness)
    harness.drain()  # the settling recalculation's own trailing message, if any
    harness.clock[0] = (harness.clock[0] // 10 + 6) * 10
    # When one node fails and nothing else happens in its window
    set_health(harness, "p5-0", "Unhealthy")
    router.handler(health_event("Unhealthy"), CONTEXT)
    first = harness.drain(max_wait=0)
    harness.sim.clear_requests()
    second = harness.drain()
    # Then the leading recompute applied it, the trailing one found nothing new: no write, no new generation
    assert first["records"] == 2 and second["records"] == 1 and second["batchItemFailures"] == []
    assert log.observe() == 2
    assert writes(harness) == []
    assert log.observe() == 2
