"""How a recompute reads, with in-memory fakes: the cluster's Kueue objects are listed while the nodes are, from the
first node on (on a thread of its own that never outlives the recompute), a failure of that listing is the apply's,
not the read's, and Python's cyclic garbage collector is paused for the recompute only."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from idleshare.adapters.ports import ClusterRecord
from idleshare.errors import ClusterReadError, RetryableError
from idleshare.service.recompute import Recomputer
from tests.builders import k8s_node as node
from tests.builders import quota_body
from tests.fakes import FakeKube, FakePublisher, FakeStore

WAIT = 5.0  # seconds a read waits for the other before the test fails (never reached when they overlap)


class ReadsKube(FakeKube):
    """A FakeKube whose node list and managed-object list can be made to wait for each other, or to fail."""

    def __init__(self) -> None:
        super().__init__([node(f"p5-{i}") for i in range(4)])
        self.meet: threading.Barrier | None = None  # both reads wait here: only reads running at once pass it
        self.managed_error: Exception | None = None
        self.managed_calls = 0
        self.managed_done = threading.Event()
        self.gc_enabled: list[bool] = []  # gc.isenabled() as each node list started

    def list_nodes(self, page_size: int = 500) -> Iterator[dict[str, Any]]:
        self.gc_enabled.append(gc.isenabled())
        for i, obj in enumerate(super().list_nodes(page_size)):
            yield obj
            if i == 0 and self.meet is not None:  # the first page is in: the rest waits for the other read
                self.meet.wait()

    def list_managed(self) -> list[dict[str, Any]]:
        self.managed_calls += 1
        try:
            if self.meet is not None:
                self.meet.wait()
            if self.managed_error is not None:
                raise self.managed_error
            return super().list_managed()
        finally:
            self.managed_done.set()


@pytest.fixture
def cluster() -> tuple[FakeStore, ReadsKube, Recomputer]:
    store = FakeStore([ClusterRecord("demo", "demo-eks")])
    store.set_quotas("demo", [quota_body("a", 8, enabled=True), quota_body("b", 8, "Lend", enabled=True)])
    kube = ReadsKube()
    return store, kube, Recomputer(store, lambda c: kube, FakePublisher())


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kube-read"]


def test_the_kueue_objects_are_listed_while_the_nodes_are(cluster):
    # Given a cluster whose two reads each wait until the other has started (a barrier of two)
    store, kube, r = cluster
    r.recompute("demo")
    kube.meet = threading.Barrier(2, timeout=WAIT)
    # When recomputed (a change: one node gone)
    kube.nodes.pop()
    out = r.recompute("demo")
    # Then both reads ran at once (one after the other, the barrier would have broken and failed the run), and the
    # objects listed are what the apply diffed against: the changed queues were applied, nothing else
    assert not kube.meet.broken
    assert out.generation == 2 and out.applied >= 1 and store.pools["demo"].apply_status == "Applied"
    assert not reader_threads()
    # and they are listed even when there are no nodes
    kube.meet = None
    kube.nodes.clear()
    assert r.recompute("demo").generation == 3 and kube.managed_calls == 3
    assert store.pools["demo"].apply_status == "Applied"


def test_a_failed_listing_of_the_kueue_objects_fails_the_apply_and_a_failed_node_read_leaves_no_thread(cluster):
    # Given generation 1, then a node gone, and the listing of the Kueue objects refused
    store, kube, r = cluster
    r.recompute("demo")
    kube.nodes.pop()
    kube.managed_error = RetryableError("connection reset", operation="list ClusterQueue")
    with pytest.raises(RetryableError, match="connection reset"):
        r.recompute("demo")
    # Then the nodes were read and the new generation stored; its apply is Failed, naming the listing's error
    pool = store.pools["demo"]
    assert pool.generation == 2 and pool.read_failure == ""
    assert pool.apply_status == "Failed" and "connection reset" in pool.apply_message
    assert kube.applies == len(kube.objects)  # nothing written since generation 1
    # And a node list failing after its first page while the Kueue objects take a while to list fails the read, and
    # the listing has ended before the recompute returns: no thread is left
    kube.managed_error = None
    kube.managed_done.clear()

    def failing(page_size: int = 500) -> Iterator[dict[str, Any]]:
        yield kube.nodes[0]
        raise RetryableError("connection reset", operation="list nodes")

    kube.list_nodes = failing  # type: ignore[method-assign]
    kube.list_managed = lambda: (time.sleep(0.2), kube.managed_done.set(), [])[-1]  # type: ignore[method-assign]
    with pytest.raises(ClusterReadError):
        r.recompute("demo")
    assert store.pools["demo"].read_failure
    assert kube.managed_done.is_set() and not reader_threads()


def test_a_node_list_refused_at_once_fails_before_the_kueue_objects_are_asked_for_and_gc_is_paused_meanwhile(cluster):
    # Given a node list refused at once (an expired token, say: the node list renews it and asks again, alone)
    _, kube, r = cluster
    assert gc.isenabled()
    kube.down = True
    # When recomputed, Then the read failed and the Kueue objects were never asked for
    with pytest.raises(ClusterReadError):
        r.recompute("demo")
    assert kube.managed_calls == 0 and not reader_threads()
    # and Python's cyclic GC was paused while each recompute ran (also the one that failed), enabled again after
    kube.down = False
    r.recompute("demo")
    assert kube.gc_enabled == [False, False] and gc.isenabled()
    # and a caller that had paused it itself finds it still paused
    gc.disable()
    try:
        r.recompute("demo")
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert kube.gc_enabled == [False, False, False]
