"""The node watcher's bookmark: a lease per cluster, the resourceVersion to resume from, every node's view."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from idleshare.adapters.errors import ConflictError, PermanentError
from idleshare.adapters.ports import WatchBookmark
from idleshare.adapters.store.base import TableAccess
from idleshare.adapters.store.errors import TransactionCancelledError
from idleshare.adapters.store.items import MAX_STORED_POOL, StoredItem, attribute_values, require_name
from idleshare.table import PK, SK, WATCH_NODES_SK, WATCH_SK, cluster_pk


class WatchBookmarks(TableAccess):
    """Claim and checkpoint a cluster's node watch (``WATCH`` and ``WATCH#NODES``)."""

    def claim_watch(self, cluster_id: str, owner: str) -> WatchBookmark:
        """Take over the cluster's node watch: the lease number goes up by one (the newest invocation always
        wins; an older one's next :meth:`save_watch` is refused and it stops), and what the previous holder
        last saved comes back: the ``resourceVersion`` to resume from and the nodes as they were there.

        Two items: ``WATCH`` (small, written every few seconds: lease, owner, resourceVersion) and
        ``WATCH#NODES`` (every node's view, zlib-compressed JSON, written only when a node changed in a way
        the watcher reports). A write is billed by the size of the whole item, so the frequent checkpoint
        must not carry the nodes."""
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
        nodes_raw = self._call(
            op,
            self.table.get_item,
            Key={PK: cluster_pk(cluster_id), SK: WATCH_NODES_SK},
            ConsistentRead=True,
            ProjectionExpression=f"{PK}, {SK}, nodes",
        ).get("Item")
        nodes: dict[str, Any] | None = None
        if nodes_raw is not None:
            blob = nodes_raw.get("nodes")
            data = getattr(blob, "value", blob)
            try:
                decoded = json.loads(zlib.decompress(bytes(data)))
            except (TypeError, ValueError, zlib.error) as exc:
                StoredItem(nodes_raw).corrupt(f"attribute 'nodes' is not zlib-compressed JSON ({exc})")
            if not isinstance(decoded, dict):
                StoredItem(nodes_raw).corrupt("attribute 'nodes' must hold a JSON object")
            nodes = decoded
        return WatchBookmark(
            cluster_id=cluster_id,
            lease=item.get_int("lease", minimum=1),
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
            self._call(op, self.table.update_item, **update)
            return
        blob = zlib.compress(json.dumps(nodes, separators=(",", ":"), sort_keys=True).encode(), 6)
        if len(blob) > MAX_STORED_POOL:
            raise PermanentError(
                f"{op}: the node views of {cluster_id} take {len(blob)} bytes compressed (at most {MAX_STORED_POOL})",
                operation=op,
            )
        try:
            self._transact(
                op,
                [
                    {"Update": attribute_values(update)},
                    {
                        "Update": {
                            "Key": {PK: key[PK], SK: WATCH_NODES_SK},
                            "UpdateExpression": "SET nodes = :nodes, rv = :rv, saved_at = :t",
                            "ExpressionAttributeValues": attribute_values(
                                {":nodes": blob, ":rv": resource_version, ":t": now}
                            ),
                        }
                    },
                ],
            )
        except TransactionCancelledError as exc:
            raise ConflictError(
                f"{op}: the node watch of {cluster_id} was taken over (lease {lease} is no longer current)",
                operation=op,
                status=409,
            ) from exc
