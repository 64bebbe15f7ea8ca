"""The pause switch of a cluster (``CLUSTER#<id>`` / ``PAUSE``; docs/spec.md §3, "Pause").

Attributes: ``paused`` (boolean), ``since``, ``by``, ``reason`` (of the last pause or resume), ``skipped`` (the
recomputes skipped while paused, reset by a pause), ``last_skipped_at``, ``log`` (JSON text: the last
``PAUSE_LOG_MAX`` pause / resume entries, oldest first), ``updated_at``. No item: the cluster was never paused.
A change is conditional on the flag it found (two admins pausing at once: one wins, the other reads it again).
"""

from __future__ import annotations

import json

from idleshare.adapters.ports import PauseEntry, PauseState
from idleshare.adapters.store.base import TableAccess
from idleshare.adapters.store.items import StoredItem, clip
from idleshare.errors import ConflictError
from idleshare.table import PAUSE_LOG_MAX, PAUSE_SK, PK, SK, cluster_pk


class PauseSwitch(TableAccess):
    """Read and turn the pause switch; count the recomputes it skipped."""

    def get_pause(self, cluster_id: str) -> PauseState | None:
        raw = self._get(cluster_pk(cluster_id), PAUSE_SK, "get_pause")
        if raw is None:
            return None
        item = StoredItem(raw)
        paused = raw.get("paused")
        if not isinstance(paused, bool):
            item.corrupt("attribute 'paused' must be a boolean")
        try:
            entries = json.loads(item.get_str("log", "[]"))
            log = tuple(PauseEntry(**e) for e in entries)
        except (ValueError, TypeError) as exc:
            item.corrupt(f"attribute 'log' is not a list of pause entries: {exc}")
        return PauseState(
            cluster_id=cluster_id,
            paused=paused,
            since=item.get_str("since", ""),
            by=item.get_str("by", ""),
            reason=item.get_str("reason", ""),
            skipped=item.get_int("skipped", default=0),
            last_skipped_at=item.get_str("last_skipped_at", ""),
            log=log,
        )

    def set_pause(self, state: PauseState, *, was_paused: bool) -> None:
        op = "set_pause"
        log = [
            {"action": e.action, "at": e.at, "by": clip(e.by), "reason": clip(e.reason)}
            for e in state.log[-PAUSE_LOG_MAX:]
        ]
        condition = "paused = :was" if was_paused else "attribute_not_exists(paused) OR paused = :was"
        try:
            self._call(
                op,
                self.table.put_item,
                Item={
                    PK: cluster_pk(state.cluster_id),
                    SK: PAUSE_SK,
                    "paused": state.paused,
                    "since": state.since,
                    "by": clip(state.by),
                    "reason": clip(state.reason),
                    "skipped": state.skipped,
                    "last_skipped_at": state.last_skipped_at,
                    "log": json.dumps(log, separators=(",", ":")),
                    "updated_at": self._now(),
                },
                ConditionExpression=condition,
                ExpressionAttributeValues={":was": was_paused},
            )
        except ConflictError as exc:
            raise ConflictError(f"cluster {state.cluster_id!r} was paused or resumed meanwhile", operation=op) from exc

    def record_paused_skip(self, cluster_id: str, at: str) -> None:
        try:
            self._call(
                "record_paused_skip",
                self.table.update_item,
                Key={PK: cluster_pk(cluster_id), SK: PAUSE_SK},
                UpdateExpression="SET skipped = if_not_exists(skipped, :zero) + :one, last_skipped_at = :at",
                ConditionExpression="paused = :true",
                ExpressionAttributeValues={":zero": 0, ":one": 1, ":at": at, ":true": True},
            )
        except ConflictError:  # resumed meanwhile: nothing to count
            return
