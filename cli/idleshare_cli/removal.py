"""Removing idleshare from a cluster: every Kueue object idleshare created there, and nothing else.

An object is idleshare's to remove when it carries both its label (``app.kubernetes.io/managed-by: idleshare``, by
which the objects are listed) and its creation marker (:data:`~idleshare.domain.kueue_diff.CREATED_BY_ANNOTATION`,
set only by the create that made it): an object someone else created — labelled like idleshare's or not — is kept,
and the labelled ones are named. Namespaces are never deleted (deleting one deletes the team's Jobs): those
idleshare created are named, for the operator to remove once their Jobs are done or moved. The deletions run in
reverse dependency order (LocalQueues first, ResourceFlavors last), so no queue is left naming a missing one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from idleshare.adapters.ports import KubeCluster
from idleshare.domain.kueue import KIND_ORDER
from idleshare.domain.kueue_diff import created_by_idleshare, object_identity

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Removal:
    """What an uninstall removes (or, in a dry run, would remove) and what it leaves, each sorted for reading."""

    removed: list[Manifest]  # idleshare's Kueue objects, in the order they are deleted
    namespaces: list[Manifest]  # the namespaces labelled as idleshare's (it created them): kept, with their Jobs
    foreign: list[Manifest]  # labelled as idleshare's but created by someone else: kept


def plan_removal(current: Iterable[Manifest]) -> Removal:
    """Sort the labelled objects of a cluster (``KubeCluster.list_managed``) into removed and kept."""
    removed: list[Manifest] = []
    namespaces: list[Manifest] = []
    foreign: list[Manifest] = []
    for obj in current:
        if obj.get("kind") == "Namespace":  # labelled by idleshare when it created them; never deleted
            namespaces.append(obj)
        elif created_by_idleshare(obj):
            removed.append(obj)
        else:
            foreign.append(obj)
    last_first = {kind: i for i, kind in enumerate(reversed(KIND_ORDER))}
    removed.sort(key=lambda o: (last_first[o["kind"]], object_identity(o)))
    namespaces.sort(key=object_identity)
    foreign.sort(key=lambda o: (KIND_ORDER.index(o["kind"]), object_identity(o)))
    return Removal(removed, namespaces, foreign)


def uninstall(kube: KubeCluster, *, dry_run: bool = False) -> Removal:
    """Delete every Kueue object idleshare created in ``kube`` (none when ``dry_run``); what it removed and left."""
    removal = plan_removal(kube.list_managed())
    if not dry_run:
        for obj in removal.removed:
            kube.delete(obj)  # already gone is fine
    return removal
