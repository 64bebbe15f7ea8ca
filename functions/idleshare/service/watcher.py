"""The node watcher: node changes that can move the pool become ``Node Changed`` events.

One invocation per governed cluster per minute (``handlers/watcher.py``) calls :func:`watch_cluster`:

1. **Claim** the cluster's watch (:meth:`WatchStore.claim_watch`): the lease number goes up, so the previous
   invocation's next checkpoint is refused and it stops; what it last saved comes back — the
   ``resourceVersion`` to resume from and every node's *view* there (:func:`node_view`).
2. **Resume** a watch on nodes from that ``resourceVersion`` (bookmarks allowed), one request of at most
   ``window_seconds`` at a time, until ``deadline``. Each ``ADDED`` / ``MODIFIED`` / ``DELETED`` event's view
   is compared with the node's previous one (:func:`node_changes`): only a change of something that can
   move the pool — the node added or deleted, ``deletionTimestamp`` set, the Ready condition's status,
   ``spec.unschedulable``, the HyperPod health label, the NoSchedule / NoExecute taints,
   ``status.allocatable``, the instance-type label, the MIG manager's ``nvidia.com/mig.config.state`` label
   — becomes an event. A kubelet's heartbeat (a status update that changes none of these) produces nothing.
   The view is built from the engine's own reading of the node (``parse/nodes.watched_node``);
   ``tests/unit/test_watcher_sees_what_the_engine_reads.py`` holds that a node the engine reads differently is a
   change here.
3. **Publish** each change as ``Node Changed`` (detail: ``cluster``, ``node``, ``change`` — the most
   significant one —, ``changes`` — all of them —, ``resourceVersion``) on idleshare's bus, by batched
   PutEvents from a background thread, so a burst (an AZ's nodes going NotReady) costs one call per ten
   events and a lone change goes out at once. The router coalesces the burst per cluster as for any event.
4. **Checkpoint** after each watch request (and after a relist): wait until every event so far is on the bus,
   then save the ``resourceVersion`` (and the node views, if some changed). Events first, checkpoint second:
   an invocation that dies in between makes the next one publish those events again (duplicates are
   harmless: events are triggers, the recompute is level-triggered); it never loses one.

**Relist.** With nothing saved, or on ``410 Gone`` (the saved ``resourceVersion`` is older than the API
server keeps), the nodes are listed and the watch starts afresh from the list's ``resourceVersion``; the
listed views are compared with the saved ones, so a change made while no watch ran — or inside the expired
window — is still published. The very first run has nothing to compare with and publishes nothing (the
scheduled recompute reads the cluster as it is anyway).

**Failures** (a watch request, a publish, a checkpoint) are counted in the report, the watch is resumed
from the last checkpoint (so nothing is skipped), and the handler logs, counts and alarms on them; the
5-minute scheduled recompute remains the safety net. A publish that can never succeed (an entry EventBridge
refuses for good: :class:`~idleshare.errors.PermanentError`) is counted and not replayed — replaying
it would fail the same way on every run and hold the checkpoint back forever.

**Bounded by the function's time.** Waiting for the publisher (each checkpoint, the last one included) is
bounded by ``publish_time_left`` (the handler: the invocation's remaining time less what the checkpoint write
needs, ``timings.WATCHER_CHECKPOINT_RESERVE_SECONDS``). When it runs out, the events not yet on the bus are
dropped from the publisher's queue, the checkpoint is not written (:class:`PublishTimeout`), and the run ends:
the saved ``resourceVersion`` and views are still those of the last checkpoint, which no unpublished event is
behind, so the next invocation resumes the watch from there (or relists and diffs against those views, on a
410) and derives and publishes the same changes again. Nothing is lost; a call that was in flight may
publish its events twice (harmless, as above).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from idleshare import names, timings
from idleshare.adapters.ports import BatchPublisher, NodeWatchSource, WatchBookmark, WatchStore
from idleshare.domain.model import BLOCKING_TAINT_EFFECTS
from idleshare.errors import IdleshareError, ResourceExpiredError, RetryableError, WatchTakenOverError
from idleshare.parse.nodes import watched_node

PUT_EVENTS = "events:PutEvents"  # the operation a publish failure names


class Change(StrEnum):
    """What changed of a node, most significant first (``change`` in the event is the first that applies)."""

    ADDED = "Added"
    DELETED = "Deleted"
    DELETING = "Deleting"
    READY = "Ready"
    NOT_READY = "NotReady"
    READY_UNKNOWN = "ReadyUnknown"
    CORDONED = "Cordoned"
    UNCORDONED = "Uncordoned"
    HEALTH = "HealthLabel"
    TAINTS = "Taints"
    ALLOCATABLE = "Allocatable"
    INSTANCE_TYPE = "InstanceType"
    MIG_CONFIG_STATE = "MigConfigState"
    LABELS = "Labels"  # any other label: a DaemonSet's node selector or affinity may now match or not (headroom)


# A node's view: [ready, unschedulable, deleting, health, taints, allocatable, instance type, MIG config state,
# labels digest] (JSON-able, compared as a whole first: equal views -> nothing to report). A view saved before the MIG
# state or the labels digest was part of it is shorter: a missing member reads as None (no label; labels unknown), so
# an upgrade publishes nothing by itself. ``ready`` is the Ready condition's status as written and ``allocatable`` the
# quantities as written (as the raw reader before stored them); an unreadable node's view has no allocatable (None).
View = list[Any]
_READY, _UNSCHEDULABLE, _DELETING, _HEALTH, _TAINTS, _ALLOCATABLE, _INSTANCE_TYPE, _MIG_CONFIG_STATE, _LABELS = range(9)


def _named_view(node: Mapping[str, Any]) -> tuple[str, View]:
    """A listed node's name and view (:meth:`NodeWatch._relist` keeps only these)."""
    return str((node.get("metadata") or {}).get("name", "")), node_view(node)


def node_view(node: Mapping[str, Any]) -> View:
    """What of ``node`` can move the pool, and nothing else (heartbeat times, images, addresses, ...): the engine's
    reading of it (:func:`idleshare.parse.nodes.watched_node`, the decoder the recompute uses), so a field the engine
    reads is a field compared here. An unreadable node's view has no allocatable (None): it counts as nothing."""
    watched = watched_node(node)
    read = watched.node
    taints = [[t.key, t.value or "", t.effect] for t in read.taints if t.effect in BLOCKING_TAINT_EFFECTS]
    return [
        watched.ready_status,
        read.unschedulable,
        read.deleting,
        read.health_status,
        sorted(taints) if len(taints) > 1 else taints,
        watched.allocatable,
        read.instance_type,
        read.mig_config_state,
        _labels_digest(read.labels),
    ]


def _labels_digest(labels: Mapping[str, str]) -> str:
    """A short digest of every label (12 hex digits): a view stays small at any number of labels."""
    import hashlib

    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:12]


def _at(view: View, index: int) -> Any:
    """A member of a view; None when a view saved by an earlier version ends before it."""
    return view[index] if index < len(view) else None


def node_changes(before: View | None, after: View | None) -> list[Change]:
    """The :class:`Change` kinds between two views of one node (None: the node does not exist), most
    significant first; ``[]`` when nothing that can move the pool changed."""
    if before is None and after is None:
        return []
    if before is None:
        return [Change.ADDED]
    if after is None:
        return [Change.DELETED]
    if before == after:
        return []
    out: list[Change] = []
    if after[_DELETING] and not before[_DELETING]:
        out.append(Change.DELETING)
    elif before[_DELETING] and not after[_DELETING]:  # no deletion is undone: a new node of the same name (a relist)
        out.append(Change.ADDED)
    if after[_READY] != before[_READY]:
        out.append({"True": Change.READY, "False": Change.NOT_READY}.get(str(after[_READY]), Change.READY_UNKNOWN))
    if after[_UNSCHEDULABLE] != before[_UNSCHEDULABLE]:
        out.append(Change.CORDONED if after[_UNSCHEDULABLE] else Change.UNCORDONED)
    for index, kind in ((_HEALTH, Change.HEALTH), (_TAINTS, Change.TAINTS), (_ALLOCATABLE, Change.ALLOCATABLE)):
        if after[index] != before[index]:
            out.append(kind)
    if after[_INSTANCE_TYPE] != before[_INSTANCE_TYPE]:
        out.append(Change.INSTANCE_TYPE)
    if _at(after, _MIG_CONFIG_STATE) != _at(before, _MIG_CONFIG_STATE):
        out.append(Change.MIG_CONFIG_STATE)
    labelled = {Change.HEALTH, Change.INSTANCE_TYPE, Change.MIG_CONFIG_STATE} & set(out)
    if not labelled and None not in (_at(before, _LABELS), _at(after, _LABELS)) and before[_LABELS] != after[_LABELS]:
        out.append(Change.LABELS)
    return out


def change_detail(cluster_id: str, node: str, changes: Sequence[str], resource_version: str) -> dict[str, Any]:
    """The ``Node Changed`` detail (``idleshare.parse.events.NodeChangedDetail``: ``cluster``, ``node``,
    ``change``; ``changes`` and ``resourceVersion`` ride along as extra members)."""
    return {
        "cluster": cluster_id,
        "node": node,
        "change": changes[0],
        "changes": list(changes),
        "resourceVersion": resource_version,
    }


# -- the run ------------------------------------------------------------------------------------------------


@dataclass
class WatchReport:
    """What one :func:`watch_cluster` did (the handler logs it and turns it into metrics)."""

    cluster_id: str
    lease: int = 0
    resumed_from: str = ""
    resource_version: str = ""
    published: int = 0
    changes: Counter[str] = field(default_factory=Counter)
    ignored: int = 0  # watch events that changed nothing the pool depends on (heartbeats)
    watch_requests: int = 0
    bookmarks: int = 0
    relists: int = 0
    checkpoints: int = 0
    put_events_calls: int = 0
    failures: list[str] = field(default_factory=list)
    superseded: bool = False  # a newer invocation took the watch over
    watched_seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """What the watcher Lambda returns (its invocation's result)."""
        return {
            "cluster": self.cluster_id,
            "published": self.published,
            "changes": dict(self.changes),
            "ignored": self.ignored,
            "relists": self.relists,
            "failures": len(self.failures),
            "superseded": self.superseded,
            "watchedSeconds": round(self.watched_seconds, 1),
            "resourceVersion": self.resource_version,
        }


class PublishTimeout(RetryableError):
    """The publisher did not get every queued event on the bus in the time the run had left for it."""


class _Batcher:
    """Publishes queued events from a thread, up to ten per PutEvents call: a lone event goes at once, a
    burst waits for the call in flight. :meth:`drain` waits — at most the time it is given — until everything
    queued is on the bus, and re-raises what a call raised."""

    def __init__(self, publisher: BatchPublisher, report: WatchReport, batch: int = 10) -> None:
        self._publisher = publisher
        self._report = report
        self._batch = batch
        self._cond = threading.Condition()
        self._pending: deque[tuple[str, dict[str, Any]]] = deque()
        self._in_flight = 0
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="node-watch-publisher", daemon=True)
        self._thread.start()

    def put(self, detail: dict[str, Any]) -> None:
        with self._cond:
            self._pending.append((names.DT_NODE_CHANGED, detail))
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:  # closed, and nothing left to send
                    return
                batch = [self._pending.popleft() for _ in range(min(self._batch, len(self._pending)))]
                self._in_flight = len(batch)
                send = self._error is None  # after a failure, drop until drain() reports it (the run replays)
            error: BaseException | None = None
            calls = 0
            try:
                if send:
                    calls = self._publisher.publish_batch(batch)
            except BaseException as exc:  # kept for drain(): the run decides what a failure means
                error = exc
            with self._cond:
                if error is not None:
                    self._error = self._error or error
                elif send:
                    self._report.put_events_calls += calls
                    self._report.published += len(batch)
                self._in_flight = 0
                self._cond.notify_all()

    def drain(self, timeout: float | None = None) -> None:
        """Until every queued event is on the bus, at most ``timeout`` seconds (None: no bound). Out of time:
        the events not sent yet are dropped and :class:`PublishTimeout` says how many were not on the bus."""
        with self._cond:
            if not self._cond.wait_for(
                lambda: not self._pending and not self._in_flight, None if timeout is None else max(0.0, timeout)
            ):
                unsent, in_flight = len(self._pending), self._in_flight
                self._pending.clear()
                raise PublishTimeout(
                    f"{PUT_EVENTS}: out of time to publish: {unsent + in_flight} events not confirmed on the bus "
                    f"({in_flight} in a call still running); not checkpointed, the next run publishes them again",
                    operation=PUT_EVENTS,
                )
            error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self, timeout: float = 30.0) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=max(0.0, timeout))


def _replays(exc: IdleshareError) -> bool:
    """Whether a failure may have left events off the bus that publishing again can put there."""
    return exc.operation == PUT_EVENTS and isinstance(exc, RetryableError)


def watch_cluster(
    cluster_id: str,
    kube: NodeWatchSource,
    store: WatchStore,
    publisher: BatchPublisher,
    *,
    deadline: float,
    owner: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    window_seconds: int = timings.WATCHER_WINDOW_SECONDS,
    on_change: Callable[[dict[str, Any]], None] | None = None,
    publish_time_left: Callable[[], float] | None = None,
) -> WatchReport:
    """Watch the cluster's nodes until ``deadline`` (on ``clock``), publishing what moved (module docstring).

    ``owner``: who claims the watch (the Lambda request id). ``on_change``: called with each detail as it is
    queued (tests, the local pipeline). ``publish_time_left``: the seconds (real time) waiting for the
    publisher may still take; None: no bound. Returns early when a newer invocation took the watch over."""
    started = clock()
    watch = NodeWatch(
        store.claim_watch(cluster_id, owner),
        kube,
        store,
        publisher,
        window_seconds=window_seconds,
        on_change=on_change,
        publish_time_left=publish_time_left,
    )
    try:
        watch.run(deadline, clock, sleep)
    finally:
        watch.close()
        watch.report.watched_seconds = max(0.0, clock() - started)
    return watch.report


class NodeWatch:
    """One run of :func:`watch_cluster`, its state in fields: the last checkpoint (``saved_rv``, ``saved_nodes``:
    None when nothing was ever saved), where the watch is now (``rv``; "" to list again) and each node's view there
    (``known``; ``dirty`` when it differs from the checkpoint's)."""

    def __init__(
        self,
        bookmark: WatchBookmark,
        kube: NodeWatchSource,
        store: WatchStore,
        publisher: BatchPublisher,
        *,
        window_seconds: int = timings.WATCHER_WINDOW_SECONDS,
        on_change: Callable[[dict[str, Any]], None] | None = None,
        publish_time_left: Callable[[], float] | None = None,
    ) -> None:
        self.kube, self.store = kube, store
        self.window_seconds, self.on_change, self.publish_time_left = window_seconds, on_change, publish_time_left
        self.report = WatchReport(bookmark.cluster_id, lease=bookmark.lease, resumed_from=bookmark.resource_version)
        self.saved_nodes: dict[str, View] | None = dict(bookmark.nodes) if bookmark.nodes is not None else None
        self.saved_rv = bookmark.resource_version if self.saved_nodes is not None else ""
        self.known: dict[str, View] = dict(self.saved_nodes or {})
        self.rv = self.saved_rv
        self.dirty = False
        self.batcher = _Batcher(publisher, self.report)

    def run(self, deadline: float, clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
        """Watch (or list, when there is no ``rv``) and checkpoint until ``deadline``, a takeover, or no time left
        to publish; a failure resumes from the last checkpoint (module docstring)."""
        while (remaining := deadline - clock()) >= 1:
            try:
                if self.rv:
                    self._watch(remaining)
                else:
                    self._relist()
            except ResourceExpiredError as exc:
                if self._recover(f"relist: {exc}", exc):
                    break
                self.rv = ""  # list again at once (the events seen so far are on the bus, or are derived again)
            except WatchTakenOverError:
                self.report.superseded = True  # a newer invocation took the watch over: it resumes from our checkpoint
                break
            except IdleshareError as exc:  # a watch request, a publish or a checkpoint failed
                if self._recover(str(exc), exc):
                    break  # no time left to publish: what is not checkpointed is the next invocation's
                sleep(min(1.0, max(0.0, deadline - clock())))

    def close(self) -> None:
        """Stop the publisher (waiting at most the time left for publishing, 30 s at most) and report where the
        watch stands."""
        left = self._time_left()
        self.batcher.close(30.0 if left is None else min(30.0, left))
        self.report.resource_version = self.rv

    def _time_left(self) -> float | None:
        return None if self.publish_time_left is None else self.publish_time_left()

    def _watch(self, remaining: float) -> None:
        """One watch request from ``rv`` (at most ``window_seconds``), then a checkpoint."""
        self.report.watch_requests += 1
        timeout = max(1, min(self.window_seconds, int(remaining)))
        for kind, node in self.kube.watch_nodes(self.rv, timeout_seconds=timeout):
            meta = node.get("metadata") or {}
            version = str(meta.get("resourceVersion") or self.rv)
            if kind == "BOOKMARK":
                self.report.bookmarks += 1
            else:
                self._observe(str(meta.get("name", "")), None if kind == "DELETED" else node_view(node), version)
            self.rv = version
        self._checkpoint()

    def _observe(self, name: str, after: View | None, version: str) -> None:
        """A node's new view (None: deleted): published when it changed something the pool depends on."""
        changes = node_changes(self.known.get(name), after)
        if not changes:
            self.report.ignored += 1
            return
        self._emit(name, changes, version)
        if after is None:
            self.known.pop(name, None)
        else:
            self.known[name] = after
        self.dirty = True

    def _relist(self) -> None:
        """List the nodes, publish what changed since the checkpoint's views (none saved: nothing), checkpoint."""
        # each node's view as it is read: at 100k nodes the list itself is never held (docs/benchmarks.md)
        listed, version = self.kube.list_nodes_snapshot(transform=_named_view)
        self.report.relists += 1
        fresh = dict(listed)
        if self.saved_nodes is not None:  # changes made while nobody watched (or in the expired window)
            for name in sorted(set(self.known) | set(fresh)):
                changes = node_changes(self.known.get(name), fresh.get(name))
                if changes:
                    self._emit(name, changes, version)
        self.known, self.rv, self.dirty = fresh, version, True
        self._checkpoint()

    def _emit(self, name: str, changes: list[Change], version: str) -> None:
        detail = change_detail(self.report.cluster_id, name, changes, version)
        self.report.changes.update(changes)
        self.batcher.put(detail)
        if self.on_change is not None:
            self.on_change(detail)

    def _checkpoint(self) -> None:
        self.batcher.drain(self._time_left())  # events first: a checkpoint never gets ahead of what is on the bus
        self.store.save_watch(
            self.report.cluster_id, self.report.lease, self.rv, dict(self.known) if self.dirty else None
        )
        self.report.checkpoints += 1
        self.saved_rv = self.rv
        if self.dirty:
            self.saved_nodes, self.dirty = dict(self.known), False

    def _recover(self, failure: str, exc: IdleshareError) -> bool:
        """After a failure: wait for what is queued to reach the bus; when events may not be on it, go back to the
        checkpoint (its views and ``rv``), so they are derived and published again. True when there is no time
        left to publish: the run ends there."""
        self.report.failures.append(failure)
        lost, out_of_time = _replays(exc), isinstance(exc, PublishTimeout)
        try:
            self.batcher.drain(self._time_left())
        except IdleshareError as again:
            self.report.failures.append(str(again))
            lost, out_of_time = lost or _replays(again), out_of_time or isinstance(again, PublishTimeout)
        if lost:
            self.known, self.rv, self.dirty = dict(self.saved_nodes or {}), self.saved_rv, False
        return out_of_time
