"""In-memory fakes of the ports (``adapters/ports.py``) for handler and service unit tests, one per adapter:
:class:`FakeStore` (DynamoStore), :class:`FakeQueue` (SqsRecomputeQueue), :class:`FakePublisher`
(EventBridgePublisher), :class:`FakeKube` (LightkubeCluster). Typed and checked by mypy against the ports they
stand for (the assertions at the end), so a port that changes breaks its fake; each behaves as its adapter does
where a test can tell."""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from devkit.lambda_context import LambdaContext
from idleshare.adapters.ports import (
    ClusterRecord,
    PauseState,
    PoolRecord,
    RecalculationReceipt,
    StoredQuota,
    UsageBucket,
    UsageCursor,
    WatchBookmark,
)
from idleshare.adapters.sqs_records import QueuedRecord
from idleshare.domain.kueue_diff import CREATED_BY_ANNOTATION, created_by_idleshare, with_creation_marker
from idleshare.domain.kueue_versions import HUB_ONLY, KueueApi, down, up
from idleshare.domain.ownership import Record
from idleshare.domain.usage import PODSET_LABEL
from idleshare.errors import (
    AlreadyExistsError,
    ConflictError,
    ForeignObjectError,
    NotFoundError,
    RetryableError,
    StaleVersionError,
    WatchTakenOverError,
)
from idleshare.runtime import wiring
from idleshare.service.batch import RecomputeBatch
from idleshare.table import PAUSE_LOG_MAX


class FakeStore:
    """The store: clusters, quotas, pools with history, receipts, the watch bookmark of one cluster (``lease``,
    ``rv``, ``nodes``; ``taken_over``: another invocation claimed it, saves are refused) and the usage history
    (``cursors``, ``hours``, ``days``; ``conflict``: the next ``add_usage`` loses the race)."""

    def __init__(self, clusters: Iterable[ClusterRecord] = (), *, bookmark: WatchBookmark | None = None) -> None:
        self.clusters = {c.cluster_id: c for c in clusters}
        self.quotas: dict[str, dict[str, StoredQuota]] = {}
        self.scheduler: dict[str, StoredQuota] = {}
        self.pools: dict[str, PoolRecord] = {}
        self.history: dict[str, list[PoolRecord]] = {}
        self.receipts: dict[tuple[str, str], RecalculationReceipt] = {}
        self.writes = 0
        self.lease = bookmark.lease if bookmark else 0
        self.rv = bookmark.resource_version if bookmark else ""
        self.nodes = bookmark.nodes if bookmark else None
        self.saves: list[tuple[str, bool]] = []  # (resource version, with the nodes) of each save_watch
        self.taken_over = False
        self.cursors: dict[str, UsageCursor] = {}
        self.hours: dict[tuple[str, str], UsageBucket] = {}
        self.days: dict[tuple[str, str], UsageBucket] = {}
        self.conflict = False
        self.owned: dict[str, Record] = {}  # the ownership record per cluster (get_owned / put_owned)
        self.pauses: dict[str, PauseState] = {}  # the pause switch per cluster (get_pause / set_pause)

    # -- Store ----------------------------------------------------------------------------------------

    def get_cluster(self, cluster_id: str) -> ClusterRecord | None:
        return self.clusters.get(cluster_id)

    def find_cluster(
        self, *, eks_cluster_name: str | None = None, hyperpod_arn: str | None = None
    ) -> ClusterRecord | None:
        for c in self.clusters.values():
            if eks_cluster_name and c.eks_cluster_name == eks_cluster_name:
                return c
            if hyperpod_arn and c.hyperpod_cluster_arn == hyperpod_arn:
                return c
        return None

    def list_clusters(self) -> list[ClusterRecord]:
        return sorted(self.clusters.values(), key=lambda c: c.cluster_id)

    def put_cluster(self, cluster: ClusterRecord) -> None:
        self.clusters[cluster.cluster_id] = cluster

    def delete_cluster(self, cluster_id: str) -> bool:
        return self.clusters.pop(cluster_id, None) is not None

    def set_quotas(self, cluster_id: str, bodies: list[dict[str, Any]]) -> None:
        self.quotas[cluster_id] = {b["Name"]: StoredQuota(b["Name"], 1, b) for b in bodies}

    def list_quotas(self, cluster_id: str) -> list[StoredQuota]:
        return list(self.quotas.get(cluster_id, {}).values())

    def get_quota(self, cluster_id: str, name: str) -> StoredQuota | None:
        return self.quotas.get(cluster_id, {}).get(name)

    def get_scheduler_config(self, cluster_id: str) -> StoredQuota | None:
        return self.scheduler.get(cluster_id)

    def get_pool(self, cluster_id: str) -> PoolRecord | None:
        return self.pools.get(cluster_id)

    def put_pool(self, record: PoolRecord, expected_generation: int) -> None:
        current = self.pools.get(record.cluster_id)
        if (current.generation if current else 0) != expected_generation:
            raise ConflictError("generation moved")
        self.pools[record.cluster_id] = record
        self.history.setdefault(record.cluster_id, []).append(record)
        self.writes += 1

    def record_apply(
        self,
        cluster_id: str,
        generation: int,
        status: str,
        message: str = "",
        *,
        rewrites: Mapping[str, Any] | None = None,
    ) -> None:
        current = self.pools.get(cluster_id)
        if current and current.generation == generation:
            kept = current.rewrites if rewrites is None else dict(copy.deepcopy(rewrites))
            self.pools[cluster_id] = replace(current, apply_status=status, apply_message=message, rewrites=kept)
            self.writes += 1

    def record_read_failure(self, cluster_id: str, message: str, *, generation: int | None = None) -> None:
        current = self.pools.get(cluster_id)
        if generation is not None and (current.generation if current else 0) != generation:
            return  # the pool moved on: a late run never reinstates a failure a newer generation cleared
        if current:
            self.pools[cluster_id] = replace(current, read_failure=message)
        self.writes += 1

    def clear_outbox(self, cluster_id: str, generation: int) -> None:
        current = self.pools.get(cluster_id)
        if current and current.generation == generation and current.outbox is not None:
            self.pools[cluster_id] = replace(current, outbox=None)
            self.writes += 1

    def get_owned(self, cluster_id: str) -> Record | None:
        return self.owned.get(cluster_id)

    def put_owned(self, cluster_id: str, record: Record) -> Record:
        """As DynamoStore.put_owned: only while the stored version is ``record.version`` (0: none yet)."""
        current = self.owned.get(cluster_id)
        if (current.version if current else 0) != record.version:
            raise ConflictError("ownership record moved")
        stored = replace(record, version=record.version + 1)
        self.owned[cluster_id] = stored
        self.writes += 1
        return stored

    def list_history(
        self, cluster_id: str, limit: int = 20, *, include_pool: bool = True, before_generation: int | None = None
    ) -> list[PoolRecord]:
        entries = [
            h for h in self.history.get(cluster_id, []) if before_generation is None or h.generation < before_generation
        ]
        entries.sort(key=lambda h: h.generation, reverse=True)
        return [h if include_pool else replace(h, pool={}) for h in entries[:limit]]

    # -- AdminStore: versions as SageMaker's TargetVersion (1 on create, +1 per update) --------------------

    def create_quota(self, cluster_id: str, body: Mapping[str, Any]) -> StoredQuota:
        quotas = self.quotas.setdefault(cluster_id, {})
        if body["Name"] in quotas:
            raise AlreadyExistsError(f"a compute quota named {body['Name']!r} already exists", field="Name")
        quotas[body["Name"]] = StoredQuota(body["Name"], 1, dict(body))
        self.writes += 1
        return quotas[body["Name"]]

    def update_quota(self, cluster_id: str, name: str, body: Mapping[str, Any], target_version: int) -> StoredQuota:
        current = _at_version(self.get_quota(cluster_id, name), target_version, f"compute quota {name!r}")
        self.quotas[cluster_id][name] = replace(current, version=current.version + 1, body={**body, "Name": name})
        self.writes += 1
        return self.quotas[cluster_id][name]

    def delete_quota(self, cluster_id: str, name: str, target_version: int | None = None) -> None:
        _at_version(self.get_quota(cluster_id, name), target_version, f"compute quota {name!r}")
        del self.quotas[cluster_id][name]
        self.writes += 1

    def put_scheduler_config(
        self, cluster_id: str, body: Mapping[str, Any], target_version: int | None = None
    ) -> StoredQuota:
        if target_version is not None:
            version = _at_version(self.scheduler.get(cluster_id), target_version, "the scheduler config").version + 1
        elif cluster_id in self.scheduler:
            raise AlreadyExistsError(f"cluster {cluster_id!r} already has a scheduler config", field="SchedulerConfig")
        else:
            version = 1
        self.scheduler[cluster_id] = StoredQuota("scheduler", version, dict(body))
        self.writes += 1
        return self.scheduler[cluster_id]

    def delete_scheduler_config(self, cluster_id: str, target_version: int | None = None) -> None:
        _at_version(self.scheduler.get(cluster_id), target_version, "the scheduler config")
        del self.scheduler[cluster_id]
        self.writes += 1

    def put_receipt(self, receipt: RecalculationReceipt) -> None:
        self.receipts[(receipt.cluster_id, receipt.request_id)] = receipt
        self.writes += 1

    def get_receipt(self, cluster_id: str, request_id: str) -> RecalculationReceipt | None:
        return self.receipts.get((cluster_id, request_id))

    def get_pause(self, cluster_id: str) -> PauseState | None:
        return self.pauses.get(cluster_id)

    def set_pause(self, state: PauseState, *, was_paused: bool) -> None:
        current = self.pauses.get(state.cluster_id)
        if (current.paused if current else False) != was_paused:
            raise ConflictError(f"cluster {state.cluster_id!r} was paused or resumed meanwhile", operation="set_pause")
        self.pauses[state.cluster_id] = replace(state, log=state.log[-PAUSE_LOG_MAX:])
        self.writes += 1

    def record_paused_skip(self, cluster_id: str, at: str) -> None:
        current = self.pauses.get(cluster_id)
        if current is not None and current.paused:
            self.pauses[cluster_id] = replace(current, skipped=current.skipped + 1, last_skipped_at=at)
            self.writes += 1

    # -- WatchStore -----------------------------------------------------------------------------------

    def claim_watch(self, cluster_id: str, owner: str) -> WatchBookmark:
        self.lease += 1
        return WatchBookmark(cluster_id, self.lease, self.rv, copy.deepcopy(self.nodes))

    def save_watch(
        self, cluster_id: str, lease: int, resource_version: str, nodes: Mapping[str, Any] | None = None
    ) -> None:
        if self.taken_over or lease != self.lease:
            raise WatchTakenOverError("taken over", operation="save_watch")
        self.rv = resource_version
        if nodes is not None:
            self.nodes = copy.deepcopy(dict(nodes))
        self.saves.append((resource_version, nodes is not None))

    # -- UsageHistoryStore, UsageReader ------------------------------------------------------------------

    def get_usage_cursor(self, cluster_id: str) -> UsageCursor | None:
        return self.cursors.get(cluster_id)

    def add_usage(self, cursor: UsageCursor, hours: Mapping[str, UsageBucket], *, expected: str | None) -> None:
        from idleshare.adapters.store.usage import merge_gaps, merge_rows

        cluster_id = cursor.cluster_id
        current = self.cursors.get(cluster_id)
        if self.conflict or (current.cursor_at if current else None) != expected:
            self.conflict = False
            raise ConflictError("the usage cursor moved", operation="add_usage")
        if cursor.sample is None and current is not None:
            cursor = replace(cursor, sample=current.sample, sampled_at=current.sampled_at)
        self.cursors[cluster_id] = cursor
        for hour, delta in hours.items():
            old = self.hours.get((cluster_id, hour), UsageBucket(hour))
            self.hours[(cluster_id, hour)] = UsageBucket(
                hour, merge_rows(old.rows, delta.rows), merge_gaps(old.gaps, delta.gaps)
            )

    def compact_usage_day(self, cluster_id: str, day: str) -> UsageBucket:
        from idleshare.adapters.store.usage import merge_gaps, merge_rows

        bucket = UsageBucket(day)
        for (cid, hour), b in sorted(self.hours.items()):
            if cid == cluster_id and hour.startswith(day):
                bucket = UsageBucket(day, merge_rows(bucket.rows, b.rows), merge_gaps(bucket.gaps, b.gaps))
        self.days[(cluster_id, day)] = bucket
        return bucket

    def usage_buckets(self, cluster_id: str, granularity: str, first: str, last: str) -> list[UsageBucket]:
        source = self.hours if granularity == "hour" else self.days
        return [b for (cid, key), b in sorted(source.items()) if cid == cluster_id and first <= key <= last]


def _at_version(current: StoredQuota | None, target: int | None, what: str) -> StoredQuota:
    """``current`` when it exists and is at ``target`` (None: any version): NotFoundError, StaleVersionError."""
    if current is None:
        raise NotFoundError(f"{what} not found", status=404)
    if target is not None and current.version != target:
        raise StaleVersionError(
            f"{what} is at version {current.version}, not {target}", current_version=current.version
        )
    return current


class FakeQueue:
    """The recompute queue: what was sent, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.request_ids: list[str | None] = []  # the explicit request id of each message (None: none)

    def enqueue(self, cluster_id: str, reason: str, *, request_id: str | None = None) -> str:
        # as SqsRecomputeQueue: the body and the deduplication id are UTF-8 (a lone surrogate raises here too)
        "\0".join((cluster_id, reason, request_id or "")).encode()
        self.sent.append((cluster_id, reason))
        self.request_ids.append(request_id)
        return request_id or f"req-{len(self.sent)}"


class FakePublisher:
    """idleshare's bus: every event published, one by one or in batches, as (detail-type, detail).
    ``fail``: that many publishes fail first (throttled, retryable)."""

    def __init__(self, fail: int = 0) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail

    @property
    def details(self) -> list[dict[str, Any]]:
        """The published events' details, in order."""
        return [detail for _, detail in self.events]

    def _throttled(self) -> None:
        if self.fail:
            self.fail -= 1
            raise RetryableError("throttled", operation="events:PutEvents")

    def publish(self, detail_type: str, detail: dict[str, Any], resources: Iterable[str] = ()) -> None:
        self._throttled()
        self.events.append((detail_type, detail))

    def publish_batch(self, events: Iterable[tuple[str, dict[str, Any]]]) -> int:
        """Every event in one PutEvents call (the fake's batches are unbounded); returns the calls made."""
        self._throttled()
        self.events.extend(events)
        return 1


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


_UIDS = itertools.count(1)


def _labelled(obj: dict[str, Any]) -> bool:
    return ((obj.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/managed-by") == "idleshare"


def _selected(objects: Iterable[dict[str, Any]], kind: str, label_selector: str) -> list[str]:
    """The names of ``objects`` of ``kind`` a label selector of ``key=value`` / ``key!=value`` terms matches."""
    terms = [t.partition("!=") if "!=" in t else t.partition("=") for t in label_selector.split(",") if t]
    found = []
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        if obj.get("kind") == kind and all((labels.get(k) == v) == (op == "=") for k, op, v in terms):
            found.append(obj["metadata"]["name"])
    return found


KUEUE_CONFIG_FAIR_SHARING = json.dumps(
    {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        "integrations": {"frameworks": ["batch/job"]},
    }
)
"""Kueue's Configuration as the devkit stack writes it (JSON is YAML): what FakeKube's ConfigMap holds."""


class FakeKube:
    """A cluster: nodes as dicts and stored objects; counts writes; can be made unreachable (``down``).
    Its node watch is scripted: each ``watch_nodes`` call takes the next step of ``script``, a list of
    (type, node) events or an exception to raise; ``list_nodes_snapshot`` answers ``nodes`` at ``rv``."""

    def __init__(self, nodes: list[dict[str, Any]], rv: str = "", script: Iterable[Any] = ()) -> None:
        self.nodes = nodes
        self.rv, self.script = rv, list(script)
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.uids: dict[tuple[str, str, str], str] = {}  # the uid of each stored object without metadata.uid
        self.applies = 0
        self.deletes = 0
        self.down = False
        self.lists = 0  # list_nodes_snapshot calls
        self.watches: list[str] = []  # the resource version each watch_nodes call started from
        self.workloads: list[dict[str, Any]] | Exception = []  # Kueue Workloads (list_workloads; an exception: raised)
        self.daemonsets: list[dict[str, Any]] | Exception = []  # list_daemonsets (an exception: raised)
        self.pods: list[dict[str, Any]] | Exception = []  # every pod: list_bound_pods (headroom) and
        # list_unbound_pods (Kueue's, unplaced) select theirs as the adapter does (an exception: both raise it)
        self.kueue: KueueApi | Exception = HUB_ONLY
        """The Kueue versions it serves (kueue_api; an exception: raised, as discovery's failure): objects are
        stored written down to them and listed read back up, as the adapter does."""
        # (namespace, name) -> data: Kueue's manager configuration with fair sharing on, as the real stack runs it
        self.config_maps: dict[tuple[str, str], dict[str, str] | Exception] = {
            ("kueue-system", "kueue-manager-config"): {"controller_manager_config.yaml": KUEUE_CONFIG_FAIR_SHARING}
        }

    def _reachable(self, operation: str) -> None:
        if self.down:
            raise RetryableError("connection refused", operation=operation)

    # -- KubeCluster ----------------------------------------------------------------------------------

    def list_nodes(self, page_size: int = 500) -> Iterator[dict[str, Any]]:
        self._reachable("list nodes")
        yield from copy.deepcopy(self.nodes)

    def kueue_api(self) -> KueueApi:
        """As the adapter's: kept once read (reachable or not); ``kueue`` an exception: discovery failing."""
        if isinstance(self.kueue, Exception):
            raise self.kueue
        return self.kueue

    def list_managed(self) -> list[dict[str, Any]]:
        """As the adapter's: the objects labelled as idleshare's (each given a uid, as the apiserver has one)."""
        self._reachable("list")
        return [up(copy.deepcopy(self._with_uid(o))) for o in self.objects.values() if _labelled(o)]

    def get_managed(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self._reachable("get")
        found = self.objects.get((kind, namespace, name))
        return None if found is None else up(copy.deepcopy(self._with_uid(found)))

    def _with_uid(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``obj`` (stored) with its uid: its own ``metadata.uid``, else one the fake keeps for its
        identity (a test's object stored without one gets the next, and keeps it until deleted)."""
        meta = obj.get("metadata") or {}
        uid = meta.get("uid") or self.uids.setdefault(_key(obj), f"uid-{next(_UIDS):06d}")
        return {**obj, "metadata": {**meta, "uid": uid}}

    def list_namespace_names(self, label_selector: str, limit: int) -> list[str]:
        self._reachable("list Namespace")
        return sorted(_selected(self.objects.values(), "Namespace", label_selector))[:limit]

    def list_cluster_queue_names(self, label_selector: str) -> list[str]:
        self._reachable("list ClusterQueue names")
        return sorted(_selected(self.objects.values(), "ClusterQueue", label_selector))

    def list_daemonsets(self) -> list[dict[str, Any]]:
        self._reachable("list DaemonSet")
        if isinstance(self.daemonsets, Exception):
            raise self.daemonsets
        return copy.deepcopy(self.daemonsets)

    def list_bound_pods(self) -> list[dict[str, Any]]:
        self._reachable("list Pod")
        if isinstance(self.pods, Exception):
            raise self.pods
        finished = ("Succeeded", "Failed")  # the adapter's field selector
        return [
            copy.deepcopy(p)
            for p in self.pods
            if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("phase") not in finished
        ]

    def apply(self, obj: dict[str, Any], *, force: bool = False) -> None:
        """The object as applied; a creation marker it had stays (server-side apply never removes what it did
        not set)."""
        self._reachable("apply")
        new = down(copy.deepcopy(obj), self.kueue_api())
        had = self.objects.get(_key(obj))
        if had is not None and created_by_idleshare(had):
            new = with_creation_marker(new)
        if had is not None and (had.get("metadata") or {}).get("uid"):
            new["metadata"]["uid"] = had["metadata"]["uid"]  # the same object: its uid stays (else in ``uids``)
        self.objects[_key(obj)] = new
        self.applies += 1

    def create(self, obj: dict[str, Any], *, force: bool = False) -> str:
        """As LightkubeCluster.create: stored with the creation marker and a new uid, which it answers; one that
        exists: ForeignObjectError (with its uid and whether it carries the marker), nothing written."""
        if obj.get("kind") == "Namespace":
            self.ensure_namespace(obj)
            return ""
        self._reachable("create")
        had = self.objects.get(_key(obj))
        if had is None:
            self.uids.pop(_key(obj), None)  # a new object: a new uid
            self.objects[_key(obj)] = down(copy.deepcopy(with_creation_marker(obj)), self.kueue_api())
            self.applies += 1
            return str(self._with_uid(self.objects[_key(obj)])["metadata"]["uid"])
        if (had.get("metadata") or {}).get("deletionTimestamp"):
            return ""
        marked = (had.get("metadata", {}).get("annotations") or {}).get(CREATED_BY_ANNOTATION) is not None
        raise ForeignObjectError(
            f"{_key(obj)} exists",
            operation="create",
            kind=obj["kind"],
            name=_key(obj)[2],
            namespace=_key(obj)[1],
            uid=str(self._with_uid(had)["metadata"]["uid"]),
            marked=marked,
        )

    def ensure_namespace(self, obj: dict[str, Any]) -> bool:
        self._reachable("create namespace")
        if _key(obj) in self.objects:
            return False
        self.objects[_key(obj)] = copy.deepcopy(obj)
        self.applies += 1
        return True

    def delete(self, obj: dict[str, Any], *, uid: str | None = None) -> None:
        """As LightkubeCluster.delete: already gone is fine; never a Namespace; with ``uid``, another object of that
        name is ConflictError (the precondition), not deleted."""
        if obj.get("kind") == "Namespace":
            raise ValueError("idleshare never deletes namespaces: it would delete the team's workloads")
        self._reachable("delete")
        had = self.objects.get(_key(obj))
        if had is None:
            return
        if uid and self._with_uid(had)["metadata"]["uid"] != uid:
            raise ConflictError(f"{_key(obj)}: precondition failed: uid {uid}", operation="delete", status=409)
        del self.objects[_key(obj)]
        self.uids.pop(_key(obj), None)
        self.deletes += 1

    def get_config_map(self, namespace: str, name: str) -> dict[str, str]:
        """``config_maps[(namespace, name)]``; missing: NotFoundError, as the adapter's 404; an exception
        stored there is raised (a 403, say)."""
        self._reachable("get config map")
        found = self.config_maps.get((namespace, name))
        if isinstance(found, Exception):
            raise found
        if found is None:
            raise NotFoundError(f"ConfigMap {namespace}/{name} not found", operation="get config map", status=404)
        return dict(found)

    # -- UsageSource: ``objects`` holds the ClusterQueues (with status), ``workloads`` the Workloads ---------

    def list_cluster_queues(self) -> list[dict[str, Any]]:
        self._reachable("list ClusterQueue")
        return [up(copy.deepcopy(o)) for o in self.objects.values() if o.get("kind") == "ClusterQueue"]

    def list_workloads(self) -> list[dict[str, Any]]:
        self._reachable("list Workload")
        if isinstance(self.workloads, Exception):
            raise self.workloads
        return copy.deepcopy(self.workloads)

    def list_unbound_pods(self) -> list[dict[str, Any]]:
        """``pods`` as the adapter selects them: Kueue's (the pod-set label), no node, not ended."""
        self._reachable("list Pod")
        if isinstance(self.pods, Exception):
            raise self.pods
        return [
            copy.deepcopy(p)
            for p in self.pods
            if PODSET_LABEL in (p["metadata"].get("labels") or {})
            and not (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]

    # -- NodeWatchSource ------------------------------------------------------------------------------

    def list_nodes_snapshot(
        self, page_size: int = 500, transform: Callable[[dict[str, Any]], Any] | None = None
    ) -> tuple[list[Any], str]:
        self.lists += 1
        nodes = copy.deepcopy(self.nodes)
        return ([transform(n) for n in nodes] if transform else nodes), self.rv

    def watch_nodes(
        self, resource_version: str, *, timeout_seconds: int, bookmarks: bool = True
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        self.watches.append(resource_version)
        step = self.script.pop(0) if self.script else []
        if isinstance(step, Exception):
            raise step
        yield from step


# -- the router on fakes ------------------------------------------------------------------------------

HYPERPOD_ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster"
"""The HyperPod cluster the inbound events (events/inbound) name: governed as ``demo``."""
ROUTER_CLUSTERS = (
    ClusterRecord("demo", "my-hyperPod-eks-cluster", HYPERPOD_ARN),
    ClusterRecord("other", "other-eks", "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcd1234efgh"),
)
ROUTER_CONTEXT = LambdaContext(function_name="router", memory_limit_in_mb=256, region="us-west-2", aws_request_id="r1")
# the clusters of ROUTER_CLUSTERS each inbound event file (events/inbound) routes to
EXPECTED_CLUSTERS = {
    "hyperpod-node-health-event.json": ["demo"], "hyperpod-cluster-state-change.json": ["demo"],
    "hyperpod-cluster-event.json": ["demo"],
    "idleshare-node-changed.json": ["demo"], "idleshare-compute-quota-changed.json": ["demo"],
    "idleshare-scheduler-config-changed.json": ["demo"], "idleshare-recalculation-requested.json": ["demo"],
    "idleshare-recalculation-requested-by-eks-name.json": ["demo"], "schedule-safety-net.json": ["demo", "other"],
}  # fmt: skip


@contextlib.contextmanager
def router_dependencies(clusters: Iterable[ClusterRecord] = ROUTER_CLUSTERS) -> Iterator[wiring.Dependencies]:
    """The router's dependencies installed in wiring for the block: a FakeStore governing ``clusters``
    (default: ``demo`` for the inbound events' cluster and ``other``), a FakeQueue and a FakePublisher;
    metrics in the ``idleshare`` namespace, no X-Ray. The fixture ``router_deps`` (tests/conftest.py)."""
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POWERTOOLS_METRICS_NAMESPACE", "idleshare")
        mp.setenv("POWERTOOLS_TRACE_DISABLED", "1")
        deps = wiring.Dependencies(store=FakeStore(clusters), queue=FakeQueue(), publisher=FakePublisher())
        wiring.install(deps)
        try:
            yield deps
        finally:
            wiring.install(None)


if TYPE_CHECKING:  # each fake is what its ports say (mypy checks this module: pyproject's [tool.mypy])
    from idleshare.adapters.ports import ClusterConnection, EventBus, FullStore, RecomputeQueue

    _store: FullStore = FakeStore()
    _queue: RecomputeQueue = FakeQueue()
    _publisher: EventBus = FakePublisher()
    _kube: ClusterConnection = FakeKube([])


def emf_documents(printed: str) -> list[dict[str, Any]]:
    """The CloudWatch embedded-metric-format documents among the lines Powertools' metrics printed."""
    return [json.loads(line) for line in printed.splitlines() if line.startswith('{"_aws"')]


def cq(kube: FakeKube, team: str) -> dict[str, Any]:
    """The ClusterQueue idleshare applied for ``team``."""
    return kube.objects[("ClusterQueue", "", f"hyperpod-ns-{team}-clusterqueue")]


def gpu_limit(obj: dict[str, Any], field: str = "borrowingLimit") -> Any:
    """A ClusterQueue's (or Cohort's) ``field`` of nvidia.com/gpu in its first flavor."""
    flavor = obj["spec"]["resourceGroups"][0]["flavors"][0]
    return next(r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu")[field]


# -- a batch of SQS records as the recompute's batch processor runs it ---------------------------------------------
class Returns:
    """The record-returns port: the records handed back to their queue, with their delays."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []

    def retry_later(self, queue_arn: str, entries: Sequence[tuple[str, int]]) -> int:
        self.calls.append((queue_arn, list(entries)))
        return len(entries)


def deliverer(records: list[QueuedRecord], fifo: bool = True) -> Callable[[Callable[[str], Any]], dict[str, Any]]:
    """What the batch processor answers: each record's failure; FIFO: later records of a failed group fail too."""

    def deliver(handle: Callable[[str], Any]) -> dict[str, Any]:
        failed: list[dict[str, str]] = []
        groups: set[str] = set()
        for rec in records:
            group = json.loads(str(rec.body))["cluster"] if fifo else rec.message_id
            try:
                if group in groups:
                    raise RuntimeError("behind a failed record of its group")
                handle(rec.message_id)
            except Exception:
                failed.append({"itemIdentifier": rec.message_id})
                groups.add(group)
        return {"batchItemFailures": failed}

    return deliver


def batch(
    recomputer: Any, records: list[QueuedRecord], fifo: bool = True, **options: Any
) -> tuple[list[str], list[tuple[str, list[tuple[str, int]]]]]:
    """The batch's failed message ids, and the records it handed back to the queue: [(queue, [(handle, delay)])]."""
    returns = Returns()
    answer = RecomputeBatch(recomputer, records, **options).run(deliverer(records, fifo), returns)
    return [f["itemIdentifier"] for f in answer["batchItemFailures"]], returns.calls
