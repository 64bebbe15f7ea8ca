"""Router logic: typed event -> the governed clusters it concerns -> one recompute request each."""

from __future__ import annotations

from dataclasses import dataclass

from idleshare.adapters.ports import ClusterRecord, RecomputeQueue, Store
from idleshare.parse.events import ClusterRef, Event, RecalculationRequestedEvent, cluster_ref, hyperpod_arn_ok


@dataclass(frozen=True, slots=True)
class RouteOutcome:
    enqueued: tuple[str, ...]
    dropped_reason: str | None = None


def resolve(ref: ClusterRef, store: Store) -> list[ClusterRecord]:
    if ref.everything:
        return store.list_clusters()
    if ref.explicit_ids:
        found = [store.get_cluster(c) for c in ref.explicit_ids]
        return [c for c in found if c is not None]
    candidates: list[ClusterRecord | None] = []
    if ref.cluster_id:
        candidates.append(store.get_cluster(ref.cluster_id))
    if ref.hyperpod_arn and hyperpod_arn_ok(ref.hyperpod_arn):
        candidates.append(store.find_cluster(hyperpod_arn=ref.hyperpod_arn))
    if ref.eks_cluster_name:
        candidates.append(store.find_cluster(eks_cluster_name=ref.eks_cluster_name))
    return [c for c in candidates if c is not None][:1]


def route(event: Event, store: Store, queue: RecomputeQueue, *, reason: str) -> RouteOutcome:
    """Enqueue one recompute per concerned cluster; an event naming no governed cluster is dropped.
    A ``Recalculation Requested`` event carrying a ``requestId`` passes it on: its message is never
    deduplicated with others and the recompute writes a receipt for it."""
    ref = cluster_ref(event)
    clusters = resolve(ref, store)
    if not clusters:
        return RouteOutcome((), "UnknownCluster")
    ids = tuple(sorted({c.cluster_id for c in clusters}))
    request_id = event.detail.requestId if isinstance(event, RecalculationRequestedEvent) else None
    for cluster_id in ids:
        queue.enqueue(cluster_id, reason, request_id=request_id or None)
    return RouteOutcome(ids)
