"""What the services need from the outside world, every port in one place: adapters implement them, tests fake
them (``tests/fakes.py``, checked against them by mypy), and ``runtime/wiring.py`` holds one of each. Protocols
only, and the plain values they take and return (the recompute queue's messages and records are
``adapters/sqs_records.py``'s).

A service asks for the narrowest port that does its job (the router a :class:`Store`, the watcher a
:class:`WatchStore`); the wiring holds what implements them all (:class:`FullStore`, :class:`ClusterConnection`,
:class:`EventBus`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Protocol

from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.domain.kueue_versions import KueueApi
from idleshare.domain.ownership import Record


@dataclass(frozen=True, slots=True)
class ClusterRecord:
    """A governed cluster: idleshare's id <-> EKS cluster name <-> HyperPod cluster ARN (None: plain EKS), and what
    its operator set for it (:class:`~idleshare.domain.cluster_settings.ClusterSettings`: where idleshare writes in
    it, how, and what it reads)."""

    cluster_id: str
    eks_cluster_name: str
    hyperpod_cluster_arn: str | None = None
    settings: ClusterSettings = field(default_factory=ClusterSettings)

    def with_settings(self, **changes: Any) -> ClusterRecord:
        """This cluster with some of its settings changed (checked like any others)."""
        return replace(self, settings=self.settings.replace(**changes))


@dataclass(frozen=True, slots=True)
class StoredQuota:
    """A compute quota as stored: the SageMaker Describe shape (PascalCase dict) and its version."""

    name: str
    version: int
    body: dict[str, Any]
    created_at: str = ""  # ISO 8601, set by the store ("" when it does not know)
    updated_at: str = ""


@dataclass(frozen=True, slots=True)
class PoolRecord:
    """The current pool item of a cluster."""

    cluster_id: str
    generation: int
    digest: str  # hash of the desired state; equal digests -> nothing changed
    pool: dict[str, Any]  # idleshare.domain.document.pool_document(result)
    computed_at: str
    apply_status: str = "Pending"  # Pending | Applied | Failed | Conflict (objects left to another field manager)
    apply_message: str = ""
    read_failure: str = ""  # last failure to observe the cluster, "" when the last read worked
    extra: dict[str, Any] = field(default_factory=dict)
    outbox: dict[str, Any] | None = None
    """The ``Lendable Pool Recomputed`` detail of this generation not yet published (None: published, or none);
    stored with the generation, removed by ``Store.clear_outbox`` once it is on the bus."""
    rewrites: dict[str, Any] = field(default_factory=dict)
    """This generation's count of the objects another field manager keeps rewriting (``domain/fights.py``), kept
    with its apply status (``Store.record_apply``); a new generation starts without one (a new desired state counts
    afresh)."""


@dataclass(frozen=True, slots=True)
class RecalculationReceipt:
    """What became of an explicit recalculation request (``Recalculation Requested`` with a requestId):
    written by the recompute, read by ``GET /clusters/{cluster}/recalculations/{requestId}``."""

    cluster_id: str
    request_id: str
    status: str  # Done | Failed
    generation: int
    changed: bool
    message: str = ""
    completed_at: str = ""


@dataclass(frozen=True, slots=True)
class PauseEntry:
    """One pause or resume of a cluster (``action`` ``Paused`` | ``Resumed``), in the history of its governance."""

    action: str
    at: str  # ISO 8601 UTC
    by: str  # the caller's identity (the IAM ARN the admin API saw)
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PauseState:
    """Whether idleshare governs a cluster now (``CLUSTER#<id>`` / ``PAUSE``; docs/spec.md §3, "Pause"): ``paused``
    since ``since`` by ``by`` for ``reason`` (of the last pause or resume), how many recomputes were skipped while
    paused and when the last was, and the last :data:`idleshare.table.PAUSE_LOG_MAX` entries (oldest first). No item: governed."""

    cluster_id: str
    paused: bool
    since: str = ""
    by: str = ""
    reason: str = ""
    skipped: int = 0
    last_skipped_at: str = ""
    log: tuple[PauseEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class WatchBookmark:
    """Where a cluster's node watcher resumes (``CLUSTER#<id>`` / ``WATCH`` and ``WATCH#NODES``).

    ``lease``: this claim's number (every claim increments it; a save carrying an older one is refused, so
    an invocation that was taken over stops writing). ``resource_version``: the last point the watch had
    fully handled ("" when none). ``nodes``: what each node looked like there, in the watcher's terms
    (``idleshare.service.watcher.node_view``), or None when never saved."""

    cluster_id: str
    lease: int
    resource_version: str = ""
    nodes: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class UsageCursor:
    """Where a cluster's usage history stands (``USAGE#LATEST``): the last sample (its document, None when none
    was ever taken), when it was taken, and when a sample was last attempted (``cursor_at``: the start of the next
    interval; ISO 8601 UTC)."""

    cluster_id: str
    cursor_at: str
    sampled_at: str = ""
    sample: dict[str, Any] | None = None
    failure: str = ""


UsageKey = tuple[str, str, str]  # (team, flavor, resource)


@dataclass(frozen=True, slots=True)
class UsageBucket:
    """One hour (``start`` ``YYYY-MM-DDTHH``) or day (``YYYY-MM-DD``) of a cluster's usage: exact amount-seconds
    ``(allocated, borrowed)`` per (team, flavor, resource), and the intervals no sample covers, with why."""

    start: str
    rows: dict[UsageKey, tuple[Fraction, Fraction]] = field(default_factory=dict)
    gaps: tuple[tuple[str, str, str], ...] = ()


class UsageStore(Protocol):
    """The usage history (``adapters/store/usage.py``)."""

    def get_usage_cursor(self, cluster_id: str) -> UsageCursor | None: ...

    def add_usage(self, cursor: UsageCursor, hours: Mapping[str, UsageBucket], *, expected: str | None) -> None:
        """Move the cluster's cursor to ``cursor`` (only while it is still at ``expected``; None: no cursor yet) and
        add each hour's amount-seconds and gaps to its stored hour, in one transaction; ConflictError when the
        cursor moved."""
        ...

    def compact_usage_day(self, cluster_id: str, day: str) -> UsageBucket:
        """Sum the day's hours into its day item (idempotent) and return it."""
        ...

    def usage_buckets(self, cluster_id: str, granularity: str, first: str, last: str) -> list[UsageBucket]:
        """The stored hours (``"hour"``) or days (``"day"``) from ``first`` to ``last`` (inclusive), in order."""
        ...


class UsageHistoryStore(UsageStore, Protocol):
    """What the usage sample writes to (``service/usage.py``): the history, and the pool it reads the cohort from."""

    def get_pool(self, cluster_id: str) -> PoolRecord | None: ...


class UsageReader(Protocol):
    """What the usage reports read (``GET /clusters/{c}/usage``)."""

    def get_cluster(self, cluster_id: str) -> ClusterRecord | None: ...
    def get_usage_cursor(self, cluster_id: str) -> UsageCursor | None: ...
    def usage_buckets(self, cluster_id: str, granularity: str, first: str, last: str) -> list[UsageBucket]: ...


class UsageSource(Protocol):
    """What the usage sample reads from a cluster (read-only: ``get``/``list`` on these kinds)."""

    def list_cluster_queues(self) -> list[dict[str, Any]]:
        """idleshare's ClusterQueues (by label), spec and status, read up to the hub version."""
        ...

    def list_workloads(self) -> list[dict[str, Any]]:
        """Every Kueue Workload, all namespaces, read up to the hub version."""
        ...

    def list_unbound_pods(self) -> list[dict[str, Any]]:
        """Every pod of a workload Kueue admitted (its ``kueue.x-k8s.io/podset`` label) that no node has taken
        and that has not ended, all namespaces: ``metadata`` (namespace, name, uid, labels, ownerReferences' uids)
        and the ``PodScheduled`` condition only."""
        ...


class ClusterDirectory(Protocol):
    """The cluster registry as the registrar keeps it (``service/registry.py``; ``adapters/store/registry.py``)."""

    def get_cluster(self, cluster_id: str) -> ClusterRecord | None: ...
    def list_clusters(self) -> list[ClusterRecord]: ...
    def put_cluster(self, cluster: ClusterRecord) -> None: ...
    def delete_cluster(self, cluster_id: str) -> bool:
        """Deregister the cluster (its pools, history and quotas stay); False when it was not registered."""
        ...


class Store(Protocol):
    """What the pipeline (router, recompute) reads and writes: the registry, the policies, the pool and its
    receipts."""

    def get_cluster(self, cluster_id: str) -> ClusterRecord | None: ...
    def find_cluster(
        self, *, eks_cluster_name: str | None = None, hyperpod_arn: str | None = None
    ) -> ClusterRecord | None: ...
    def list_clusters(self) -> list[ClusterRecord]: ...
    def put_cluster(self, cluster: ClusterRecord) -> None: ...

    def list_quotas(self, cluster_id: str) -> list[StoredQuota]: ...
    def get_scheduler_config(self, cluster_id: str) -> StoredQuota | None: ...

    def get_pool(self, cluster_id: str) -> PoolRecord | None: ...
    def put_pool(self, record: PoolRecord, expected_generation: int) -> None:
        """Write generation N+1 only if the stored generation is still N (0 = none yet), with an
        append-only history item carrying a TTL. Raises ConflictError when it lost the race."""
        ...

    def record_apply(
        self,
        cluster_id: str,
        generation: int,
        status: str,
        message: str = "",
        *,
        rewrites: Mapping[str, Any] | None = None,
    ) -> None:
        """How applying ``generation`` went, and (``rewrites``, None: left as stored) its count of fights; nothing when
        the stored pool has moved on."""

    def record_read_failure(self, cluster_id: str, message: str, *, generation: int | None = None) -> None:
        """Record (``message``) or clear (``""``) the last failure to observe the cluster; with ``generation``,
        only while the stored generation is that one (0: also no pool item yet) — else a no-op."""
        ...

    def clear_outbox(self, cluster_id: str, generation: int) -> None:
        """Remove the pool's outbox once its event is published, only while the pool is at ``generation``
        (a pool that moved on carries its own outbox: a no-op)."""
        ...

    def put_receipt(self, receipt: RecalculationReceipt) -> None:
        """Write (or overwrite) the receipt of an explicit recalculation request, with a TTL."""
        ...

    def get_receipt(self, cluster_id: str, request_id: str) -> RecalculationReceipt | None: ...

    def get_pause(self, cluster_id: str) -> PauseState | None:
        """Whether the cluster is paused (None: never paused: governed)."""
        ...

    def record_paused_skip(self, cluster_id: str, at: str) -> None:
        """Count a recompute skipped because the cluster is paused (a no-op once it is resumed)."""
        ...

    def get_owned(self, cluster_id: str) -> Record | None:
        """The record of what idleshare created in the cluster (uids by identity; docs/spec.md §3, "Ownership"), or
        None when none was ever stored (then the once-only adoption rule applies)."""
        ...

    def put_owned(self, cluster_id: str, record: Record) -> Record:
        """Store ``record`` only if the stored one is still at ``record.version`` (0: none yet); the record as
        stored (its new version). Raises ConflictError when it lost the race."""
        ...


class PauseStore(Protocol):
    """The pause switch the admin API turns (``adapters/store/pause.py``)."""

    def get_pause(self, cluster_id: str) -> PauseState | None: ...
    def set_pause(self, state: PauseState, *, was_paused: bool) -> None:
        """Store ``state`` (its last log entry the change) only if the cluster's paused flag is still ``was_paused``
        (False: also no item yet); else ConflictError (operation ``set_pause``)."""
        ...


class AdminStore(Store, PauseStore, UsageReader, Protocol):
    """The write and read side the admin API needs beyond what the pipeline uses (DynamoStore)."""

    def create_quota(self, cluster_id: str, body: Mapping[str, Any]) -> StoredQuota: ...
    def get_quota(self, cluster_id: str, name: str) -> StoredQuota | None: ...
    def update_quota(self, cluster_id: str, name: str, body: Mapping[str, Any], target_version: int) -> StoredQuota: ...
    def delete_quota(self, cluster_id: str, name: str, target_version: int | None = None) -> None: ...
    def put_scheduler_config(
        self, cluster_id: str, body: Mapping[str, Any], target_version: int | None = None
    ) -> StoredQuota: ...
    def delete_scheduler_config(self, cluster_id: str, target_version: int | None = None) -> None: ...
    def list_history(
        self, cluster_id: str, limit: int = 20, *, include_pool: bool = True, before_generation: int | None = None
    ) -> list[PoolRecord]:
        """Past generations, newest first, at most ``limit``; ``include_pool=False`` leaves the pools out;
        ``before_generation`` keeps only the generations below it (the next page)."""
        ...


class WatchStore(Protocol):
    """The node watcher's bookmark of a cluster (``service/watcher.py``; ``adapters/store/watch.py``)."""

    def claim_watch(self, cluster_id: str, owner: str) -> WatchBookmark:
        """Take the cluster's watch over (the lease number goes up) and return where the last holder left it."""
        ...

    def save_watch(
        self, cluster_id: str, lease: int, resource_version: str, nodes: Mapping[str, Any] | None = None
    ) -> None:
        """Checkpoint (``nodes`` None: the views are unchanged); ConflictError (operation ``save_watch``) once a
        newer claim took the lease."""
        ...


class FullStore(AdminStore, ClusterDirectory, WatchStore, UsageHistoryStore, Protocol):
    """Everything idleshare keeps in its table (``DynamoStore``): what ``runtime.wiring.Dependencies.store`` holds,
    each service taking the part it needs."""


class KubeCluster(Protocol):
    """What the recompute reads from and writes to a cluster."""

    def list_nodes(self, page_size: int = 500) -> Iterator[dict[str, Any]]:
        """Every Node object (dict), read page by page with limit/continue — or, by an adapter that kept its last
        list (``adapters/node_cache.py``), that list brought up to date by one watch from its version."""
        ...

    def kueue_api(self) -> KueueApi:
        """The Kueue API versions the cluster serves, per kind (discovery, kept; re-read when a version is gone).
        None that idleshare writes: :class:`~idleshare.errors.KueueNotInstalledError`."""
        ...

    def list_managed(self) -> list[dict[str, Any]]:
        """Every object idleshare manages (by label), of the kinds it writes, read up to the hub version
        (``kueue.x-k8s.io/v1beta2``) whatever version the cluster serves. :meth:`apply`, :meth:`create` and
        :meth:`delete` take hub objects and write them down to the served version."""
        ...

    def list_namespace_names(self, label_selector: str, limit: int) -> list[str]:
        """At most ``limit`` names of namespaces matching ``label_selector`` (one request)."""
        ...

    def list_cluster_queue_names(self, label_selector: str) -> list[str]:
        """The names of every ClusterQueue matching ``label_selector`` (names only, not the objects)."""
        ...

    def list_daemonsets(self) -> list[dict[str, Any]]:
        """Every DaemonSet (all namespaces), of its pod template what headroom reads (placement and requests)."""
        ...

    def list_bound_pods(self) -> list[dict[str, Any]]:
        """Every pod bound to a node and not finished (all namespaces, paged), what headroom reads of each."""
        ...

    def list_workloads(self) -> list[dict[str, Any]]:
        """Every Kueue Workload, all namespaces, read up to the hub version (headroom on ``all``: who owns which
        admitted Workload)."""
        ...

    def apply(self, obj: dict[str, Any], *, force: bool = False) -> None:
        """Server-side apply with idleshare's field manager, of an object idleshare created; ``force`` takes fields
        other managers own, else such a conflict raises :class:`~idleshare.errors.FieldOwnershipError`."""
        ...

    def create(self, obj: dict[str, Any], *, force: bool = False) -> str:
        """Create the object with idleshare's creation marker; the uid of the object created (from the create's
        answer; "" when nothing was created: a Namespace, or one of that name being deleted). One of that name that
        exists: :class:`~idleshare.errors.ForeignObjectError` (with its ``uid`` and whether it carries the marker)
        and nothing written. A Namespace: :meth:`ensure_namespace`."""
        ...

    def ensure_namespace(self, obj: dict[str, Any]) -> bool:
        """Create the namespace if missing; True when created."""
        ...

    def delete(self, obj: dict[str, Any], *, uid: str) -> None:
        """Delete the object (already gone is fine) only while it has ``uid`` (a ``preconditions.uid``: another
        object of that name raises :class:`~idleshare.errors.ConflictError`). Never a Namespace."""
        ...

    def get_managed(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """One object by identity, as :meth:`list_managed` returns them (label or not); None when there is none."""
        ...

    def get_config_map(self, namespace: str, name: str) -> dict[str, str]:
        """One ConfigMap's ``data`` (read-only: Kueue's ``kueue-system/kueue-manager-config``)."""
        ...


class NodeWatchSource(Protocol):
    """The cluster's nodes as the node watcher lists and watches them."""

    def list_nodes_snapshot(
        self, page_size: int = 500, transform: Callable[[dict[str, Any]], Any] | None = None
    ) -> tuple[list[Any], str]:
        """Every Node object (each passed through ``transform`` as it is read, when given) and the list's
        ``resourceVersion`` (where a watch starts from)."""
        ...

    def watch_nodes(
        self, resource_version: str, *, timeout_seconds: int, bookmarks: bool = True
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """One watch request: ``(type, node)`` events after ``resource_version`` (``BOOKMARK`` events carry only
        a ``resourceVersion``); ResourceExpiredError (410 Gone) when that version is too old."""
        ...


class ClusterConnection(KubeCluster, NodeWatchSource, UsageSource, Protocol):
    """A governed cluster's API server as idleshare reaches it (``LightkubeCluster``): what
    ``runtime.wiring.Dependencies.kube_for`` returns."""


class EventPublisher(Protocol):
    def publish(self, detail_type: str, detail: dict[str, Any], resources: Iterable[str] = ()) -> None: ...


class BatchPublisher(Protocol):
    def publish_batch(self, events: Iterable[tuple[str, dict[str, Any]]]) -> int:
        """Put ``(detail-type, detail)`` events on the bus, as few PutEvents calls as its limits allow; returns
        the calls made."""
        ...


class EventBus(EventPublisher, BatchPublisher, Protocol):
    """idleshare's event bus (``EventBridgePublisher``): what ``runtime.wiring.Dependencies.publisher`` holds."""


class RecomputeQueue(Protocol):
    def enqueue(self, cluster_id: str, reason: str, *, request_id: str | None = None) -> str:
        """Ask for one recompute of the cluster (coalesced per window: ``timings.COALESCE_SECONDS``).
        ``request_id`` (an explicit recalculation request) makes the message carry it, never deduplicated with
        others, and the recompute writes a receipt for it."""
        ...


@dataclass(frozen=True, slots=True)
class RequestAnswer:
    """What the recompute of an explicit recalculation request answered, as its ledger keeps it."""

    request_id: str
    generation: int
    changed: bool


class RequestLedger(Protocol):
    def once(self, cluster_id: str, request_id: str, run: Callable[[], RequestAnswer]) -> RequestAnswer:
        """Run ``run`` once per (cluster, request id) and return its answer; when the request already ran
        (a redelivery), return that run's answer without running. A run that raised leaves no trace: the
        next delivery runs again."""
        ...


class RecordReturns(Protocol):
    def retry_later(self, queue_arn: str, entries: Sequence[tuple[str, int]]) -> int:
        """Make each record (receipt handle) of the queue visible again after its seconds, so that a failed record
        blocks its message group for its backoff only; returns how many were changed. Never raises: a record not
        changed returns after the queue's visibility timeout."""
        ...
