"""The node watcher (``idleshare.service.watcher``) run in a thread against a real apiserver, stopped on demand.

Used by ``tests/kube/test_watcher.py`` and ``tests/bench/bench_watcher.py``: the store is a real
:class:`DynamoStore` (on moto, or whatever table the caller gives), the publisher keeps every batch (or
forwards it, e.g. to the router handler).
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from moto import mock_aws

from idleshare import names
from idleshare.adapters.store import PK, SK, DynamoStore
from idleshare.service.watcher import NodeWatchSource, WatchReport, watch_cluster
from tests.aws_env import create_table, fake_aws_env

CLUSTER_ID = "local"


@pytest.fixture(name="aws", scope="module")
def aws_fixture() -> Iterator[None]:
    """moto for the module, with fake credentials (nothing leaves the machine)."""
    with fake_aws_env(), mock_aws():
        yield


class CollectingPublisher:
    """``publish_batch`` that keeps every event; ``forward`` (optional) gets each batch too."""

    def __init__(self, forward: Callable[[list[tuple[str, dict[str, Any]]]], None] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.batches: list[int] = []
        self.forward = forward
        self._lock = threading.Lock()

    def publish_batch(self, events: Iterable[tuple[str, dict[str, Any]]]) -> int:
        batch = list(events)
        assert all(dt == names.DT_NODE_CHANGED for dt, _ in batch)
        assert 1 <= len(batch) <= 10
        if self.forward is not None:
            self.forward(batch)
        with self._lock:
            self.events.extend(detail for _, detail in batch)
            self.batches.append(len(batch))
        return 1

    def by_node(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for event in list(self.events):
            out.setdefault(event["node"], []).append(event)
        return out

    def wait_for(self, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.events) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.events)} events after {timeout:.0f} s, {count} expected: {self.events}")
            time.sleep(0.05)
        return list(self.events)


class WatcherThread:
    """One watcher invocation in a thread; :meth:`stop` moves its clock past the deadline and returns its report."""

    def __init__(
        self,
        adapter: NodeWatchSource,
        store: DynamoStore,
        publisher: CollectingPublisher,
        *,
        cluster_id: str = CLUSTER_ID,
        window_seconds: int = 2,
        owner: str | None = None,
    ) -> None:
        self._stopped = False
        self._store, self._cluster_id, self._lease_before = store, cluster_id, 0
        self.report: WatchReport | None = None
        self.error: BaseException | None = None

        def clock() -> float:
            return math.inf if self._stopped else time.monotonic()

        def run() -> None:
            try:
                self.report = watch_cluster(
                    cluster_id,
                    adapter,
                    store,
                    publisher,
                    deadline=time.monotonic() + 3600,
                    owner=owner or uuid.uuid4().hex,
                    clock=clock,
                    window_seconds=window_seconds,
                )
            except BaseException as exc:
                self.error = exc

        self._thread = threading.Thread(target=run, name="node-watcher", daemon=True)

    def start(self) -> WatcherThread:
        self._lease_before = self._lease()
        self._thread.start()
        return self

    def _lease(self) -> int:
        item = self._store.table.get_item(Key={PK: f"CLUSTER#{self._cluster_id}", SK: "WATCH"}, ConsistentRead=True)
        return int((item.get("Item") or {}).get("lease", 0))

    def wait_started(self, timeout: float = 20.0) -> None:
        """Until this run has claimed the watch and saved a first checkpoint (a first run relists and saves
        before it watches; a resumed one checkpoints after its first watch request)."""
        deadline = time.monotonic() + timeout
        key = {PK: f"CLUSTER#{self._cluster_id}", SK: "WATCH"}
        while True:
            item = self._store.table.get_item(Key=key, ConsistentRead=True).get("Item") or {}
            claimed = int(item.get("lease", 0)) > self._lease_before
            if claimed and item.get("rv") and str(item.get("saved_at", "")) >= str(item.get("claimed_at", "")):
                return
            if self.error is not None:
                raise self.error
            if time.monotonic() > deadline:
                raise TimeoutError("the watcher did not start")
            time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> WatchReport:
        self._stopped = True
        self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        assert self.report is not None, "the watcher did not finish"
        return self.report


def run_once(
    adapter: NodeWatchSource, store: DynamoStore, publisher: CollectingPublisher, **kwargs: Any
) -> WatchReport:
    """A short invocation: start, wait for its first checkpoint, stop."""
    thread = WatcherThread(adapter, store, publisher, **kwargs).start()
    thread.wait_started()
    return thread.stop()


@contextmanager
def moto_table() -> Iterator[DynamoStore]:
    """A DynamoStore on a fresh moto table (the caller runs inside ``moto.mock_aws``)."""
    ddb = boto3.resource("dynamodb", region_name="us-east-1")
    table = create_table(ddb, f"idleshare-watch-{uuid.uuid4().hex[:8]}")
    try:
        yield DynamoStore(table)
    finally:
        table.delete()
