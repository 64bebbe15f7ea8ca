"""The ownership record around a recompute's writes (docs/spec.md §3, "Ownership"; the rules are
:mod:`idleshare.domain.ownership`'s):

1. :func:`read`: the cluster's record (DynamoDB), and each recorded object the labelled list does not show, read by
   identity (its label removed by hand: still idleshare's); the objects sorted into idleshare's and foreign;
2. :func:`before_creates`: the identities about to be created, stored as pending before any create is sent, so that a
   create whose answer is lost (the run ends before step 3) is still recognised as idleshare's by the next run;
3. :func:`after_writes`: the uids the creates answered, minus what was deleted (each deletion logged), stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from idleshare.adapters.ports import KubeCluster, Store
from idleshare.domain.model import Settings
from idleshare.domain.ownership import Identity, Ownership, Record, missing, resolve, same, updated, with_pending

Manifest = dict[str, Any]


@dataclass(slots=True)
class Reading:
    """What :func:`read` found: the stored record (None: never stored), the objects sorted by it, and every object
    the diff compares with (the labelled ones listed, and the recorded ones found by identity)."""

    record: Record | None
    ownership: Ownership
    current: list[Manifest]

    @property
    def pending(self) -> frozenset[Identity]:
        """The identities an earlier run was creating when it stopped (adopted if found with the marker)."""
        return self.record.pending if self.record is not None else frozenset()


def read(store: Store, kube: KubeCluster, cluster_id: str, listed: Sequence[Manifest], settings: Settings) -> Reading:
    """Step 1: the record, the recorded objects the labelled list misses (one GET each; usually none), sorted."""
    record = store.get_owned(cluster_id)
    found = [obj for identity in missing(record, listed) if (obj := kube.get_managed(*identity)) is not None]
    current = [*listed, *found]
    return Reading(record, resolve(record, current, settings), current)


def before_creates(store: Store, cluster_id: str, reading: Reading, creating: Iterable[Identity]) -> None:
    """Step 2: store ``creating`` as pending (nothing when there is nothing to create); ``reading.record`` becomes
    the stored record."""
    identities = frozenset(creating)
    if not identities:
        return
    reading.record = store.put_owned(cluster_id, with_pending(reading.record, reading.ownership, identities))


def after_writes(
    store: Store,
    cluster_id: str,
    reading: Reading,
    *,
    created: Mapping[Identity, str],
    deleted: Sequence[Identity],
    lost: Sequence[Identity],
    refused: Sequence[Identity] = (),
    generation: int,
    at: str,
) -> Record:
    """Step 3: the record after the writes, stored when it changed (the first run always stores one, so the
    adoption rule runs once). ``refused``: creates that found an object there (foreign): no longer pending; a
    create that failed otherwise stays pending (its answer may be what was lost)."""
    creating = reading.record.pending if reading.record is not None else frozenset()
    unanswered = creating - set(created) - set(refused)  # failed or not started: may exist, found by the next run
    new = updated(
        reading.record,
        reading.ownership,
        created=created,
        deleted=deleted,
        lost=lost,
        pending=unanswered,
        generation=generation,
        at=at,
    )
    if reading.record is not None and same(reading.record, new):
        return reading.record
    reading.record = store.put_owned(cluster_id, new)
    return reading.record
