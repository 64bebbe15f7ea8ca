"""The node watcher against the real kube-apiserver, as idleshare's own RBAC user.

Every change that can move the pool produces exactly one ``Node Changed`` per node change; heartbeats of
1,000 nodes produce none; a 410 relists and still reports what changed; a watcher started after another
stopped reports what happened in between, and one that takes over from a running one leaves no gap.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from devkit.kube.client import Kube
from devkit.kube.proxy import FaultProxy
from devkit.kube.stack import KubeStack
from idleshare import names
from idleshare.adapters.kube import LightkubeCluster
from idleshare.adapters.store import DynamoStore
from idleshare.domain.model import HEALTH_LABEL, INSTANCE_TYPE_LABEL, MIG_CONFIG_STATE_LABEL
from idleshare.errors import ResourceExpiredError
from idleshare.parse.events import NodeChangedEvent, parse_event
from tests.kube.fixtures import ProxiedKube, make_node
from tests.kube.watcher_harness import (  # noqa: F401 - the ``aws`` fixture
    CollectingPublisher,
    WatcherThread,
    aws_fixture,
    moto_table,
    run_once,
)
from tests.realkube import WATCHER_TOKEN


@pytest.fixture
def store(aws: None) -> Iterator[DynamoStore]:
    with moto_table() as s:
        yield s


@pytest.fixture
def proxy(proxied_kube: ProxiedKube) -> FaultProxy:
    return proxied_kube.proxy


@pytest.fixture
def adapter(proxied_kube: ProxiedKube) -> Iterator[LightkubeCluster]:
    """idleshare's adapter as the node watcher's own user (its restricted RBAC group), through the recording proxy."""
    cluster = proxied_kube.watcher(name="local")
    yield cluster
    cluster.close()


def _heartbeat(kube: Kube, name: str, beat: int) -> None:
    """What a kubelet sends every few seconds: the same conditions with a new heartbeat time."""
    stamp = f"2026-01-01T00:{beat // 60 % 60:02d}:{beat % 60:02d}Z"
    kube.merge_patch(
        "Node",
        name,
        {
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": stamp}
                ]
            }
        },
        subresource="status",
    )


# -- the adapter ------------------------------------------------------------------------------------------


def test_watch_nodes_yields_projected_events(kube: Kube, adapter: LightkubeCluster) -> None:
    kube.set_node(make_node("w1"))
    nodes, rv = adapter.list_nodes_snapshot()
    assert [n["metadata"]["name"] for n in nodes] == ["w1"] and rv
    kube.stack.kubectl("cordon", "w1")
    events = list(adapter.watch_nodes(rv, timeout_seconds=4))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "MODIFIED" and set(kinds[1:]) <= {"BOOKMARK"}, kinds  # the server's progress notices
    node = events[0][1]
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["resourceVersion"] and "managedFields" not in node["metadata"]
    assert set(node) <= {"metadata", "spec", "status"}


def test_watch_nodes_410_is_resource_expired(kube: Kube, adapter: LightkubeCluster, proxy: FaultProxy) -> None:
    _, rv = adapter.list_nodes_snapshot()
    proxy.inject("GET", r"^/api/v1/nodes$", status=410, message="too old resource version: 1 (2)")
    with pytest.raises(ResourceExpiredError):
        list(adapter.watch_nodes(rv, timeout_seconds=2))


@pytest.mark.parametrize("token", [WATCHER_TOKEN, KubeStack.idleshare_token], ids=["watcher", "recompute"])
def test_the_watchers_and_the_recomputes_rbac_users_may_watch_nodes(kube_stack: KubeStack, token: str) -> None:
    """The watcher holds a watch; a warm recompute watches from its last node list (adapters/node_cache.py)."""
    status, review = kube_stack.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {"spec": {"resourceAttributes": {"verb": "watch", "resource": "nodes"}}},
        token=token,
    )
    assert status == 201 and review["status"]["allowed"] is True


# -- every change kind: exactly one event -----------------------------------------------------------------


CHANGES: list[tuple[str, str]] = [
    ("n-added", "Added"),
    ("n-deleted", "Deleted"),
    ("n-deleting", "Deleting"),
    ("n-notready", "NotReady"),
    ("n-cordon", "Cordoned"),
    ("n-health", "HealthLabel"),
    ("n-taint", "Taints"),
    ("n-noexecute", "Taints"),
    ("n-alloc", "Allocatable"),
    ("n-itype", "InstanceType"),
    ("n-mig", "MigConfigState"),
    ("n-label", "Labels"),  # any other label: a DaemonSet's node selector may now match it (headroom)
]
UNREPORTED = ("n-prefer", "n-heartbeat")  # a PreferNoSchedule taint, a heartbeat


def _make_changes(kube: Kube) -> None:
    stack = kube.stack
    kube.set_node(make_node("n-added"))
    kube.delete_node("n-deleted")
    kube.mark_deleting("n-deleting")
    kube.merge_patch(
        "Node",
        "n-notready",
        {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}},
        subresource="status",
    )
    stack.kubectl("cordon", "n-cordon")
    stack.kubectl("label", "node", "n-health", f"{HEALTH_LABEL}=UnschedulablePendingReplacement", "--overwrite")
    stack.kubectl("taint", "node", "n-taint", "nvidia.com/gpu-fault=true:NoSchedule")
    stack.kubectl("taint", "node", "n-noexecute", "maintenance=now:NoExecute")
    kube.merge_patch("Node", "n-alloc", {"status": {"allocatable": {"nvidia.com/gpu": "7"}}}, subresource="status")
    stack.kubectl("label", "node", "n-itype", f"{INSTANCE_TYPE_LABEL}=ml.p4d.24xlarge", "--overwrite")
    stack.kubectl("label", "node", "n-mig", f"{MIG_CONFIG_STATE_LABEL}=success", "--overwrite")  # was pending
    stack.kubectl("label", "node", "n-label", "team=research")
    stack.kubectl("taint", "node", "n-prefer", "soft=true:PreferNoSchedule")
    _heartbeat(kube, "n-heartbeat", 1)


def _seed_for_changes(kube: Kube) -> None:
    names_present = [n for n, _ in CHANGES if n != "n-added"] + list(UNREPORTED)
    labels = {HEALTH_LABEL: "Schedulable", MIG_CONFIG_STATE_LABEL: "pending"}
    kube.seed_nodes([make_node(n, labels=labels) for n in names_present])


def _assert_one_each(events: list[dict[str, Any]]) -> None:
    by_node: dict[str, list[str]] = {}
    for event in events:
        by_node.setdefault(event["node"], []).append(event["change"])
        assert event["cluster"] == "local" and event["changes"][0] == event["change"]
        assert event["resourceVersion"]
        typed = parse_event(
            {
                "version": "0",
                "id": "1",
                "source": names.EVENT_SOURCE,
                "detail-type": names.DT_NODE_CHANGED,
                "account": "123456789012",
                "time": "2026-01-01T00:00:00Z",
                "region": "us-east-1",
                "resources": [],
                "detail": event,
            }
        )
        assert isinstance(typed, NodeChangedEvent) and typed.detail.node == event["node"]
    assert by_node == {node: [change] for node, change in CHANGES}, by_node


def test_every_change_kind_makes_exactly_one_event(kube: Kube, adapter: LightkubeCluster, store: DynamoStore) -> None:
    _seed_for_changes(kube)
    first = run_once(adapter, store, CollectingPublisher())
    assert first.published == 0 and first.relists == 1  # nothing saved yet: nothing to compare with

    publisher = CollectingPublisher()
    watcher = WatcherThread(adapter, store, publisher).start()
    watcher.wait_started()
    _make_changes(kube)
    publisher.wait_for(len(CHANGES))
    time.sleep(1.0)  # anything more would arrive now
    report = watcher.stop()
    _assert_one_each(publisher.events)
    assert report.relists == 0 and not report.failures
    assert report.ignored >= len(UNREPORTED)  # the finalizer, the soft taint, the heartbeat


def test_a_restarted_watcher_misses_nothing_that_happened_between(
    kube: Kube, adapter: LightkubeCluster, store: DynamoStore
) -> None:
    _seed_for_changes(kube)
    run_once(adapter, store, CollectingPublisher())  # the first run: lists and saves
    run_once(adapter, store, CollectingPublisher())  # a run that saw nothing change
    _make_changes(kube)  # while no watcher runs
    publisher = CollectingPublisher()
    report = run_once(adapter, store, publisher)  # resumes from the saved resourceVersion
    publisher.wait_for(len(CHANGES), timeout=1)
    _assert_one_each(publisher.events)
    assert report.relists == 0


def test_a_410_relists_and_still_reports_what_changed(
    kube: Kube, adapter: LightkubeCluster, store: DynamoStore, proxy: FaultProxy
) -> None:
    _seed_for_changes(kube)
    run_once(adapter, store, CollectingPublisher())
    _make_changes(kube)
    proxy.clear_requests()
    proxy.inject("GET", r"^/api/v1/nodes$", status=410, message="too old resource version", times=1)
    publisher = CollectingPublisher()
    report = run_once(adapter, store, publisher)
    assert report.relists == 1 and any("relist" in f for f in report.failures)
    watches = [r for r in proxy.requests if r.query.get("watch") == "true"]
    lists = [r for r in proxy.requests if r.path == "/api/v1/nodes" and r.query.get("watch") != "true"]
    assert watches[0].status == 410 and lists, (watches, lists)
    _assert_one_each(publisher.events)  # the diff of the relist against the saved views


def test_heartbeats_of_1000_nodes_make_no_event(kube: Kube, adapter: LightkubeCluster, store: DynamoStore) -> None:
    nodes = [f"hb-{i:04d}" for i in range(1000)]
    kube.seed_nodes([make_node(n) for n in nodes], workers=8)
    run_once(adapter, store, CollectingPublisher())
    publisher = CollectingPublisher()
    watcher = WatcherThread(adapter, store, publisher).start()
    watcher.wait_started()
    kube.map(lambda n: _heartbeat(kube, n, 7), nodes, workers=8)
    kube.stack.kubectl("cordon", "hb-0999")  # the last change: once it is seen, every heartbeat was
    publisher.wait_for(1, timeout=60)
    report = watcher.stop()
    assert [(e["node"], e["change"]) for e in publisher.events] == [("hb-0999", "Cordoned")]
    assert report.ignored >= 1000 and report.relists == 0, report


def test_a_newer_invocation_takes_over_without_a_gap(kube: Kube, adapter: LightkubeCluster, store: DynamoStore) -> None:
    _seed_for_changes(kube)
    run_once(adapter, store, CollectingPublisher())
    shared = CollectingPublisher()
    old = WatcherThread(adapter, store, shared, owner="old").start()
    old.wait_started()
    kube.stack.kubectl("cordon", "n-cordon")  # seen by the old one
    shared.wait_for(1)
    new = WatcherThread(adapter, store, shared, owner="new").start()  # claims: the old one stops at its checkpoint
    kube.stack.kubectl("taint", "node", "n-taint", "nvidia.com/gpu-fault=true:NoSchedule")  # during the handover
    deadline = time.monotonic() + 20
    while old.report is None and old.error is None and time.monotonic() < deadline:
        time.sleep(0.1)
    old_report = old.stop()
    assert old_report.superseded
    kube.stack.kubectl("label", "node", "n-itype", f"{INSTANCE_TYPE_LABEL}=ml.g5.xlarge", "--overwrite")  # after
    shared.wait_for(3)
    time.sleep(1.0)
    new_report = new.stop()
    changes = {(e["node"], e["change"]) for e in shared.events}
    assert changes == {("n-cordon", "Cordoned"), ("n-taint", "Taints"), ("n-itype", "InstanceType")}
    assert not new_report.superseded and new_report.lease == old_report.lease + 1
