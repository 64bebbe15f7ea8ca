"""The node watcher's rules (``idleshare.service.watcher``) with fakes: what is a change, what is a heartbeat,
how a failure, a 410 or a takeover is handled, and what is checkpointed when publishing runs out of time."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest

from idleshare.domain.model import HEALTH_LABEL
from idleshare.errors import PermanentError, ResourceExpiredError, RetryableError
from idleshare.service import watcher as w
from tests.fakes import FakeKube, FakePublisher, FakeStore
from tests.kube.fixtures import make_node
from tests.watch_events import StuckPublisher, cordon, saved_bookmark, watch_node


def _changed(node: dict[str, Any], edit: Any) -> list[str]:
    after = copy.deepcopy(node)
    edit(after)
    return w.node_changes(w.node_view(node), w.node_view(after))


def _ready(status: str) -> Any:
    return lambda n: n["status"].update(conditions=[{"type": "Ready", "status": status}])


CASES = [
    ("cordon", lambda n: n["spec"].update(unschedulable=True), ["Cordoned"]),
    ("not ready", _ready("False"), ["NotReady"]),
    ("unknown", _ready("Unknown"), ["ReadyUnknown"]),
    ("deleting", lambda n: n["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z"), ["Deleting"]),
    ("health", lambda n: n["metadata"]["labels"].update({HEALTH_LABEL: "Unschedulable"}), ["HealthLabel"]),
    ("label gone", lambda n: n["metadata"]["labels"].pop("kubernetes.io/hostname", None), ["Labels"]),
    ("taint", lambda n: n["spec"].update(taints=[{"key": "k", "effect": "NoExecute"}]), ["Taints"]),
    ("allocatable", lambda n: n["status"]["allocatable"].update({"nvidia.com/mig-1g.10gb": "7"}), ["Allocatable"]),
    ("itype", lambda n: n["metadata"]["labels"].update({"node.kubernetes.io/instance-type": "x"}), ["InstanceType"]),
    ("several", lambda n: (_ready("False")(n), n["spec"].update(unschedulable=True)), ["NotReady", "Cordoned"]),
    # and what cannot move the pool is no change
    ("heartbeat", lambda n: n["status"]["conditions"][0].update(lastHeartbeatTime="2026-01-01T00:00:09Z"), []),
    ("soft taint", lambda n: n["spec"].update(taints=[{"key": "k", "effect": "PreferNoSchedule"}]), []),
    # a DaemonSet's node selector or affinity may match the node now (headroom, docs/spec.md §2)
    ("other label", lambda n: n["metadata"]["labels"].update(team="a"), ["Labels"]),
    ("capacity", lambda n: n["status"].update(capacity={"cpu": "1"}), []),
    ("finalizer", lambda n: n["metadata"].update(finalizers=["x"]), []),
]


@pytest.mark.parametrize(("what", "edit", "expected"), CASES, ids=[c[0] for c in CASES])
def test_only_changes_that_can_move_the_pool_are_changes(what, edit, expected):
    assert _changed(make_node("a"), edit) == expected


def test_added_and_deleted():
    view = w.node_view(make_node("a"))
    assert w.node_changes(None, view) == ["Added"]
    assert w.node_changes(view, None) == ["Deleted"]
    assert w.node_changes(None, None) == []
    assert json.loads(json.dumps(view)) == view  # views are stored as JSON


# -- watch_cluster with fakes --------------------------------------------------------------------------------


class Ticks:
    """A clock that moves one second per reading: the run ends after ``n`` readings."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def _run(kube: FakeKube, store: FakeStore, publisher: Any, readings: int = 8, **options: Any) -> w.WatchReport:
    return w.watch_cluster(
        "c1", kube, store, publisher, deadline=readings, owner="me", clock=Ticks(), sleep=lambda s: None, **options
    )


def resume(script: list[Any], saved: list[dict[str, Any]], publisher: Any = None, readings: int = 8, **kube: Any):
    """A run resuming from ``saved`` node views at rv 10, its watch answering ``script``."""
    kube_ = FakeKube(kube.get("nodes", []), kube.get("rv", ""), script)
    store, publisher = FakeStore(bookmark=saved_bookmark(saved, "10")), publisher or FakePublisher()
    return kube_, store, publisher, _run(kube_, store, publisher, readings)


def test_a_first_run_lists_and_publishes_nothing_and_a_taken_over_one_stops():
    kube = FakeKube([make_node("a")], "10", [])
    store, publisher = FakeStore(), FakePublisher()
    _run(kube, store, publisher)
    assert kube.lists == 1 and publisher.events == [] and store.saves[0] == ("10", True)
    assert kube.watches and set(kube.watches) == {"10"}
    # and a run whose watch another invocation took over stops
    kube = FakeKube([], "", [[("MODIFIED", watch_node("a", "12"))]])
    store = FakeStore(bookmark=saved_bookmark([make_node("a")], "10"))
    store.taken_over = True
    report = _run(kube, store, FakePublisher(), readings=100)
    assert report.superseded and len(kube.watches) == 1


def test_resume_reports_changes_and_ignores_heartbeats():
    beat = watch_node("a", "11")
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:01Z"
    bookmark = ("BOOKMARK", {"metadata": {"resourceVersion": "15"}})
    kube, store, publisher, report = resume([[("MODIFIED", beat), cordon(), bookmark]], [make_node("a")])
    assert kube.lists == 0 and kube.watches[:2] == ["10", "15"]
    assert [(e["node"], e["change"], e["resourceVersion"]) for e in publisher.details] == [("a", "Cordoned", "12")]
    assert report.ignored == 1 and report.bookmarks == 1 and store.saves[0] == ("15", True)


def test_a_410_relists_and_diffs_against_the_saved_views():
    listed = [make_node("a", ready=False), make_node("c")]
    saved = [make_node("a"), make_node("b")]
    kube, store, publisher, report = resume([ResourceExpiredError("gone")], saved, nodes=listed, rv="30")
    assert report.relists == 1 and kube.lists == 1
    changes = sorted((e["node"], e["change"]) for e in publisher.details)
    assert changes == [("a", "NotReady"), ("b", "Deleted"), ("c", "Added")]
    assert store.rv == "30" and set(store.nodes or {}) == {"a", "c"}


def test_a_failed_publish_replays_from_the_checkpoint():
    # the replay from rv 10 sees the change again
    kube, store, publisher, report = resume([[cordon()], [cordon()]], [make_node("a")], FakePublisher(fail=1), 10)
    assert [e["change"] for e in publisher.details] == ["Cordoned"]
    assert kube.watches[:2] == ["10", "10"] and report.failures and store.rv == "12"


def test_a_watch_error_resumes_where_it_was():
    kube, _, publisher, report = resume([[cordon()], RetryableError("reset")], [make_node("a")])
    assert kube.watches[:3] == ["10", "12", "12"] and report.failures == ["reset"]
    assert [e["change"] for e in publisher.details] == ["Cordoned"]


def test_publishing_is_bounded_by_the_time_left_and_nothing_unpublished_is_checkpointed():
    # Given a cordon to publish, a bus that does not answer, and 0.3 s left for publishing
    a = make_node("a")
    kube = FakeKube([], "", [[cordon()]])
    store, stuck = FakeStore(bookmark=saved_bookmark([a], "10")), StuckPublisher()
    started = time.monotonic()
    try:
        report = _run(kube, store, stuck, readings=100, publish_time_left=lambda: 0.3)
        elapsed = time.monotonic() - started
    finally:
        stuck.release.set()
    # Then the run ends within its publishing time instead of waiting on the bus
    assert elapsed < 2.5 and stuck.calls == 1
    assert any("out of time to publish" in f for f in report.failures)
    # And the checkpoint is not moved past the change that may not be on the bus
    assert store.saves == [] and store.rv == "10" and report.resource_version == "10"
    # So the next invocation resumes from rv 10, sees the change again and publishes it
    kube = FakeKube([], "", [[cordon()]])
    publisher = FakePublisher()
    _run(kube, store, publisher)
    assert kube.watches[0] == "10" and [e["change"] for e in publisher.details] == ["Cordoned"]
    assert store.rv == "12"


def test_a_publish_that_can_never_succeed_is_counted_not_replayed():
    # Given a bus that refuses the first batch for good (e.g. an entry EventBridge says is invalid)
    class Refusing(FakePublisher):
        refused = False

        def publish_batch(self, events: Any) -> int:
            if not self.refused:
                self.refused = True
                raise PermanentError("events:PutEvents: ValidationException: bad", operation="events:PutEvents")
            return super().publish_batch(events)

    script = [[cordon("a", "12")], [cordon("b", "13")]]
    kube, store, publisher, report = resume(script, [make_node("a"), make_node("b")], Refusing(), readings=10)
    # Then the failure is reported, the watch goes on from where it was (no replay of what cannot succeed)
    assert any("ValidationException" in f for f in report.failures)
    assert kube.watches[:2] == ["10", "12"]
    assert [(e["node"], e["change"]) for e in publisher.details] == [("b", "Cordoned")]
    assert store.rv == "13"
