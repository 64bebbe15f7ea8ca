"""The governed clusters of the CDK config, written into the registry at deploy time (never at cold start)."""

from __future__ import annotations

from collections.abc import Iterable

from idleshare.adapters.ports import ClusterRecord, Store


def register_clusters(store: Store, clusters: Iterable[ClusterRecord]) -> list[str]:
    """Write each cluster whose registry entry is missing or different; returns the ids written.
    Idempotent: a second run with the same clusters reads and writes nothing."""
    written = []
    for record in clusters:
        if store.get_cluster(record.cluster_id) != record:
            store.put_cluster(record)
            written.append(record.cluster_id)
    return written
