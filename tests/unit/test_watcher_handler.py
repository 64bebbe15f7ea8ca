"""The node watcher Lambda (``handlers/watcher.py``): its input, its report and its metrics."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from devkit.lambda_context import LambdaContext
from idleshare import names, timings
from idleshare.adapters.ports import ClusterRecord
from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.handlers import watcher as handler_module
from idleshare.runtime import wiring
from tests.fakes import FakeKube, FakePublisher, FakeStore, emf_documents
from tests.kube.fixtures import make_node
from tests.watch_events import StuckPublisher, cordon, saved_bookmark

CLUSTERS = json.dumps([{"id": "c1", "eks_cluster_name": "eks-1"}])

WATCHING = (timings.WATCHER_STOP_BEFORE_SECONDS + 2) * 1000  # two seconds of watching left
CONTEXT = LambdaContext(function_name="w", memory_limit_in_mb=256, aws_request_id="req-1", remaining_ms=WATCHING)


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv(names.ENV_TABLE_NAME, "idleshare-test")
    monkeypatch.setenv(names.ENV_CLUSTERS, CLUSTERS)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", names.SERVICE)
    kube = FakeKube([], "", [[cordon()]])
    store, publisher = FakeStore(bookmark=saved_bookmark([make_node("a")], "10")), FakePublisher()
    seen: list[str] = []

    def kube_for(cluster: Any) -> FakeKube:
        seen.append(cluster.eks_cluster_name)
        return kube

    wiring.install(wiring.Dependencies(store=store, publisher=publisher, kube_for=kube_for))
    yield SimpleNamespace(kube=kube, store=store, publisher=publisher, seen=seen)
    wiring.install(None)


def test_watches_the_named_cluster_and_reports(installed, capsys):
    out = handler_module.handler({"cluster": "c1"}, CONTEXT)
    assert installed.seen == ["eks-1"]
    assert out["published"] == 1 and out["changes"] == {"Cordoned": 1} and out["failures"] == 0
    assert [e["change"] for e in installed.publisher.details] == ["Cordoned"]
    emitted = emf_documents(capsys.readouterr().out)
    metrics = {m["Name"] for e in emitted for d in e["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
    assert {names.METRIC_NODE_WATCH_SECONDS, names.METRIC_NODE_CHANGES_PUBLISHED} <= metrics
    dims = {tuple(sorted(ds)) for e in emitted for d in e["_aws"]["CloudWatchMetrics"] for ds in d["Dimensions"]}
    assert dims == {(names.METRIC_DIM_CLUSTER, "service")}  # what the "watch not running" alarm reads


@pytest.mark.parametrize("event", [{}, {"cluster": ""}, {"cluster": "unknown"}, "x"])
def test_refuses_an_input_naming_no_governed_cluster(installed, event):
    installed.store.get_cluster = lambda cluster_id: None
    with pytest.raises(handler_module.WatcherInputError):
        handler_module.handler(event, CONTEXT)


def test_publishing_stops_in_time_for_the_last_checkpoint(installed):
    # Given a bus that does not answer, and an invocation with 2 s of watching left before its stop margin
    stuck = StuckPublisher()
    installed.publisher.publish_batch = stuck.publish_batch
    remaining = CONTEXT.get_remaining_time_in_millis() / 1000
    started = time.monotonic()
    try:
        out = handler_module.handler({"cluster": "c1"}, CONTEXT)
        elapsed = time.monotonic() - started
    finally:
        stuck.release.set()
    # Then the handler returns with the checkpoint's reserve still left, the publish reported as failed,
    # and nothing checkpointed past the change that is not on the bus (the next invocation publishes it again)
    assert elapsed <= remaining - timings.WATCHER_CHECKPOINT_RESERVE_SECONDS + 1
    assert stuck.calls == 1 and out["failures"] >= 1 and out["published"] == 0
    assert installed.store.saves == [] and installed.store.rv == "10"


@pytest.mark.parametrize(
    ("hold", "remaining", "expected"),
    [
        # the cluster's hold, when the invocation has time for it
        (timings.DEFAULT_NODE_WATCH_SECONDS, 75.0, float(timings.DEFAULT_NODE_WATCH_SECONDS)),
        (timings.NODE_WATCH_MAX_SECONDS, 75.0, 75.0 - timings.WATCHER_STOP_BEFORE_SECONDS),
        # less when the invocation's timeout allows less, never negative
        (30, timings.WATCHER_STOP_BEFORE_SECONDS + 4.0, 4.0),
        (30, timings.WATCHER_STOP_BEFORE_SECONDS - 3.0, 0.0),
    ],
)
def test_the_watch_is_held_the_clusters_node_watch_seconds_or_what_the_timeout_allows(
    hold: int, remaining: float, expected: float
) -> None:
    cluster = ClusterRecord(
        cluster_id="c1", eks_cluster_name="eks-1", settings=ClusterSettings(node_watch_seconds=hold)
    )
    assert handler_module.watch_hold_seconds(cluster, remaining) == pytest.approx(expected)


def test_a_cluster_holds_the_default_node_watch_seconds_when_none_is_set() -> None:
    cluster = ClusterRecord(cluster_id="c1", eks_cluster_name="eks-1")
    assert cluster.settings.node_watch_seconds == timings.DEFAULT_NODE_WATCH_SECONDS
    assert handler_module.watch_hold_seconds(cluster, 75.0) == timings.DEFAULT_NODE_WATCH_SECONDS


@pytest.mark.parametrize("bad", [0, -1, timings.NODE_WATCH_MAX_SECONDS + 1, 2.5, True, "10", None])
def test_node_watch_seconds_outside_its_bounds_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValueError, match=r"^node_watch_seconds: must be a whole number"):
        ClusterRecord(cluster_id="c1", eks_cluster_name="eks-1", settings=ClusterSettings(node_watch_seconds=bad))  # type: ignore[arg-type]


def test_the_longest_hold_is_what_the_watcher_timeout_allows() -> None:
    assert (
        timings.NODE_WATCH_MAX_SECONDS == timings.WATCHER_FUNCTION_TIMEOUT_SECONDS - timings.WATCHER_STOP_BEFORE_SECONDS
    )
    ClusterRecord(
        cluster_id="c1",
        eks_cluster_name="eks-1",
        settings=ClusterSettings(node_watch_seconds=timings.NODE_WATCH_MAX_SECONDS),
    )
    ClusterRecord(cluster_id="c1", eks_cluster_name="eks-1", settings=ClusterSettings(node_watch_seconds=1))
