"""The node watcher's bookmark: a lease per cluster, the resourceVersion to resume from, every node's view."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from idleshare.adapters.ports import WatchBookmark
from idleshare.adapters.store.base import TableAccess
from idleshare.adapters.store.errors import TransactionCancelledError
from idleshare.adapters.store.items import (
    MAX_WATCH_PARTS,
    StoredItem,
    attribute_values,
    pack,
    part_items,
    require_name,
    unpack,
)
from idleshare.errors import ConflictError, WatchTakenOverError
from idleshare.table import PK, SK, WATCH_NODES_SK, WATCH_SK, cluster_pk, parts_prefix


class WatchBookmarks(TableAccess):
    """Claim and checkpoint a cluster's node watch (``WATCH`` and ``WATCH#NODES``)."""

    def claim_watch(self, cluster_id: str, owner: str) -> WatchBookmark:
        """Take over the cluster's node watch: the lease number goes up by one (the newest invocation always
        wins; an older one's next :meth:`save_watch` is refused and it stops), and what the previous holder
        last saved comes back: the ``resourceVersion`` to resume from and the nodes as they were there.

        Two items: ``WATCH`` (small, written every few seconds: lease, owner, resourceVersion) and
        ``WATCH#NODES`` (every node's view, zlib-compressed JSON, written only when a node changed in a way
        the watcher reports; above ``PART_SIZE`` compressed bytes in ``PART#WATCH#NODES#<i>`` part items). A
        write is billed by the size of the whole item, so the frequent checkpoint must not carry the nodes."""
        op = "claim_watch"
        owner = require_name(owner, "watch owner", op)
        response = self._call(
            op,
            self.table.update_item,
            Key={PK: cluster_pk(cluster_id), SK: WATCH_SK},
            UpdateExpression=("SET lease = if_not_exists(lease, :zero) + :one, watch_owner = :owner, claimed_at = :t"),
            ExpressionAttributeValues={":zero": 0, ":one": 1, ":owner": owner, ":t": self._now()},
            ReturnValues="ALL_NEW",
        )
        item = StoredItem({PK: cluster_pk(cluster_id), SK: WATCH_SK, **response.get("Attributes", {})})
        pk = cluster_pk(cluster_id)
        lease = item.get_int("lease", minimum=1)
        nodes_raw = self._call(
            op,
            self.table.get_item,
            Key={PK: pk, SK: WATCH_NODES_SK},
            ConsistentRead=True,
            ProjectionExpression=f"{PK}, {SK}, nodes, nodes_parts, nodes_sha256",
        ).get("Item")
        nodes: dict[str, Any] | None = None
        count = 0
        if nodes_raw is not None:
            stored = StoredItem(nodes_raw)
            count = stored.part_count("nodes", MAX_WATCH_PARTS)
            if count:  # the lease moved before this read: no older holder's checkpoint can commit in between
                blob = unpack(stored, "nodes", count, self._parts(op, pk, WATCH_NODES_SK, count))
                if blob is None:
                    stored.corrupt(
                        f"a part of attribute 'nodes' ({count} parts under {parts_prefix(WATCH_NODES_SK)!r}) is "
                        "missing or belongs to another checkpoint"
                    )
            else:
                blob = stored.get_bytes("nodes")
            nodes = stored.document("nodes", blob)
        self._remember_parts(pk, WATCH_NODES_SK, lease, count)
        return WatchBookmark(
            cluster_id=cluster_id,
            lease=lease,
            resource_version=item.get_str("rv", ""),
            nodes=nodes,
        )

    def save_watch(
        self, cluster_id: str, lease: int, resource_version: str, nodes: Mapping[str, Any] | None = None
    ) -> None:
        """Checkpoint the watch at ``resource_version`` (with every node's view when ``nodes`` is given: both
        items in one transaction), only while ``lease`` is still the cluster's current one; else
        :class:`ConflictError` (a newer invocation took over: stop)."""
        op = "save_watch"
        key = {PK: cluster_pk(cluster_id), SK: WATCH_SK}
        now = self._now()
        update: dict[str, Any] = {
            "Key": key,
            "UpdateExpression": "SET rv = :rv, saved_at = :t",
            "ConditionExpression": "lease = :lease",
            "ExpressionAttributeValues": {":rv": resource_version, ":t": now, ":lease": lease},
        }
        if nodes is None:
            try:
                self._call(op, self.table.update_item, **update)
            except ConflictError as exc:
                raise WatchTakenOverError(
                    f"{op}: the node watch of {cluster_id} was taken over (lease {lease} is no longer current)",
                    operation=op,
                    status=409,
                ) from exc
            return
        packed = pack(nodes, f"the node views of {cluster_id}", max_parts=MAX_WATCH_PARTS, operation=op)
        count = len(packed.parts)
        attributes = packed.owner_attributes("nodes")
        removed = [a for a in ("nodes", "nodes_parts", "nodes_sha256") if a not in attributes]
        values = {f":{name}": value for name, value in attributes.items()}
        nodes_update = {
            "Key": {PK: key[PK], SK: WATCH_NODES_SK},
            "UpdateExpression": "SET "
            + ", ".join(f"{name} = :{name}" for name in attributes)
            + ", rv = :rv, saved_at = :t REMOVE "
            + ", ".join(removed),
            "ExpressionAttributeValues": attribute_values({**values, ":rv": resource_version, ":t": now}),
        }
        parts = [
            {
                "Update": {
                    "Key": {PK: part[PK], SK: part[SK]},
                    "UpdateExpression": "SET #data = :data, part_of = :of, #index = :i, saved_at = :t",
                    "ExpressionAttributeNames": {"#data": "data", "#index": "index"},
                    "ExpressionAttributeValues": attribute_values(
                        {":data": part["data"], ":of": part["part_of"], ":i": part["index"], ":t": now}
                    ),
                }
            }
            for part in part_items(key[PK], WATCH_NODES_SK, packed)
        ]
        leftovers = self._leftover_parts(key[PK], WATCH_NODES_SK, lease, count, MAX_WATCH_PARTS)
        self._remember_parts(key[PK], WATCH_NODES_SK, lease, None)
        try:
            self._transact(op, [{"Update": attribute_values(update)}, {"Update": nodes_update}, *parts, *leftovers])
        except TransactionCancelledError as exc:
            raise WatchTakenOverError(
                f"{op}: the node watch of {cluster_id} was taken over (lease {lease} is no longer current)",
                operation=op,
                status=409,
            ) from exc
        self._remember_parts(key[PK], WATCH_NODES_SK, lease, count)
