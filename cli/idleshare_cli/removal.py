"""Removing idleshare from a cluster: every Kueue object idleshare created there, and nothing else.

An object is idleshare's to remove exactly when the recompute would say so: the cluster's ownership record (DynamoDB,
``OWNED``: the uid of each object idleshare created) holds its identity with its uid (docs/spec.md §3, "Ownership").
A copy of one of idleshare's objects carries its label and creation marker but not its uid: it is kept, and named,
as is any other object labelled like idleshare's. An object whose label someone removed is still found (read by its
recorded identity) and removed. Each delete carries the recorded uid as a precondition. A cluster with no record yet
(no recompute ran since the record exists) is sorted by the once-only adoption rule
(:func:`idleshare.domain.ownership.adoptable`). Namespaces are never deleted (deleting one deletes the team's
Jobs): those idleshare created are named, for the operator to remove once their Jobs are done or moved. The
deletions run in reverse dependency order (LocalQueues first, ResourceFlavors last), so no queue is left naming a
missing one; what was removed leaves the record, logged as a deletion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from idleshare.adapters.ports import KubeCluster, Store
from idleshare.domain.cluster_settings import engine_settings
from idleshare.domain.kueue import KIND_ORDER
from idleshare.domain.kueue_diff import object_identity
from idleshare.domain.model import Settings
from idleshare.errors import ConflictError
from idleshare.service import ownership

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Removal:
    """What an uninstall removes (or, in a dry run, would remove) and what it leaves, each sorted for reading."""

    removed: list[Manifest]  # idleshare's Kueue objects, in the order they are deleted
    namespaces: list[
        Manifest
    ]  # the namespaces labelled as idleshare's (created by it or by hand: never recorded): kept
    foreign: list[Manifest]  # labelled as idleshare's but not recorded as created by it (copies, ...): kept
    lost: list[Manifest] = field(default_factory=list)  # recorded, but its name now holds another object: kept


def settings_of(store: Store, cluster_id: str) -> Settings:
    """The cluster's naming settings (prefix, cohort) as the recompute uses them: what the adoption rule reads."""
    cluster = store.get_cluster(cluster_id)
    if cluster is None:
        return Settings()
    return engine_settings(cluster.settings)


def plan_removal(reading: ownership.Reading) -> Removal:
    """Sort the cluster's objects (:func:`idleshare.service.ownership.read`) into removed and kept."""
    ours = reading.ownership.ours
    removed = [o for o in reading.current if o.get("kind") != "Namespace" and object_identity(o) in ours]
    namespaces = [o for o in reading.current if o.get("kind") == "Namespace"]
    last_first = {kind: i for i, kind in enumerate(reversed(KIND_ORDER))}
    removed.sort(key=lambda o: (last_first[o["kind"]], object_identity(o)))
    namespaces.sort(key=object_identity)
    return Removal(removed, namespaces, list(reading.ownership.foreign))


def uninstall(kube: KubeCluster, store: Store, cluster_id: str, *, dry_run: bool = False) -> Removal:
    """Delete every Kueue object idleshare recorded creating in ``kube`` (none when ``dry_run``), each with its
    recorded uid as a precondition; what it removed and left. The record then no longer holds them."""
    reading = ownership.read(store, kube, cluster_id, kube.list_managed(), settings_of(store, cluster_id))
    removal = plan_removal(reading)
    if dry_run:
        return removal
    deleted: list[tuple[str, str, str]] = []
    lost: list[Manifest] = []
    for obj in removal.removed:
        identity = object_identity(obj)
        try:
            kube.delete(obj, uid=reading.ownership.ours[identity])  # already gone is fine
        except ConflictError:  # another object of that name now: not idleshare's
            lost.append(obj)
            continue
        deleted.append(identity)
    ownership.after_writes(
        store,
        cluster_id,
        reading,
        created={},
        deleted=deleted,
        lost=[object_identity(o) for o in lost],
        generation=0,
        at=datetime.now(UTC).isoformat(),
    )
    kept = {object_identity(o) for o in lost}
    return Removal(
        [o for o in removal.removed if object_identity(o) not in kept], removal.namespaces, removal.foreign, lost
    )
