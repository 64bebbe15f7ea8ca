"""The governed clusters of the CDK config, written into the registry at deploy time (never at cold start), and
the clusters no longer configured deregistered."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from idleshare.adapters.ports import ClusterDirectory, ClusterRecord


def register_clusters(store: ClusterDirectory, clusters: Iterable[ClusterRecord]) -> list[str]:
    """Write each cluster whose registry entry is missing or different; returns the ids written.
    Idempotent: a second run with the same clusters reads and writes nothing."""
    written = []
    for record in clusters:
        if store.get_cluster(record.cluster_id) != record:
            store.put_cluster(record)
            written.append(record.cluster_id)
    return written


def deregister_clusters(store: ClusterDirectory, cluster_ids: Iterable[str]) -> list[str]:
    """Delete the registry entries of each cluster (by id, EKS name, ARN); returns the ids that were registered.
    Their pools, history and quotas stay in the table."""
    return [cid for cid in dict.fromkeys(cluster_ids) if store.delete_cluster(cid)]


@dataclass(frozen=True)
class Reconciled:
    registered: list[str]
    deregistered: list[str]


def reconcile_clusters(
    store: ClusterDirectory, clusters: Iterable[ClusterRecord], *, previous: Iterable[ClusterRecord] = ()
) -> Reconciled:
    """Make the registry hold exactly ``clusters``: every registered cluster not among them — those of the
    ``previous`` config (the custom resource's old properties) and any other left registered — is deregistered
    first (so a new cluster may take a removed one's EKS name or ARN), then ``clusters`` are registered."""
    configured = list(clusters)
    keep = {c.cluster_id for c in configured}
    candidates = [c.cluster_id for c in previous] + [c.cluster_id for c in store.list_clusters()]
    removed = deregister_clusters(store, (cid for cid in candidates if cid not in keep))
    return Reconciled(registered=register_clusters(store, configured), deregistered=removed)
