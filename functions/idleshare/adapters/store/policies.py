"""Versioned policies: compute quotas (with their one-per-team guard) and the scheduler config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from boto3.dynamodb.conditions import Key

from idleshare.adapters.ports import StoredQuota
from idleshare.adapters.store.base import TableAccess
from idleshare.adapters.store.errors import TransactionCancelledError
from idleshare.adapters.store.items import ID_PATTERN, StoredItem, attribute_values, new_id, require_name, to_json
from idleshare.errors import AlreadyExistsError, ConflictError, NotFoundError, PermanentError, StaleVersionError
from idleshare.table import PK, QUOTA_PREFIX, SCHEDULER_SK, SK, TEAM_PREFIX, cluster_pk


def _team_taken(team: str, cluster_id: str, operation: str) -> AlreadyExistsError:
    return AlreadyExistsError(
        f"team {team!r} already has a compute quota in cluster {cluster_id!r}",
        field="ComputeQuotaTarget.TeamName",
        operation=operation,
    )


class Policies(TableAccess):
    """Compute quotas and the scheduler config, versioned like SageMaker's ``TargetVersion``."""

    def create_quota(self, cluster_id: str, body: Mapping[str, Any]) -> StoredQuota:
        """Store a new quota at version 1 with a fresh ``ComputeQuotaId``. Its ``Name`` or its team already
        taken in this cluster -> AlreadyExistsError naming the field (nothing written)."""
        op = "create_quota"
        name, team, text = self._quota_parts(body, op)
        now = self._now()
        quota_id = new_id()
        pk = cluster_pk(cluster_id)
        item = {
            PK: pk,
            SK: f"{QUOTA_PREFIX}{name}",
            "name": name,
            "team": team,
            "quota_id": quota_id,
            "version": 1,
            "body": text,
            "created_at": now,
            "updated_at": now,
        }
        try:
            self._transact(
                op,
                [
                    {"Put": {"Item": attribute_values(item), "ConditionExpression": f"attribute_not_exists({PK})"}},
                    {
                        "Put": {
                            "Item": attribute_values({PK: pk, SK: f"{TEAM_PREFIX}{team}", "quota_name": name}),
                            "ConditionExpression": f"attribute_not_exists({PK})",
                        }
                    },
                ],
            )
        except TransactionCancelledError as exc:
            if exc.reasons[:1] == ("ConditionalCheckFailed",):
                raise AlreadyExistsError(
                    f"a compute quota named {name!r} already exists in cluster {cluster_id!r}",
                    field="Name",
                    operation=op,
                ) from exc
            if exc.reasons[1:2] == ("ConditionalCheckFailed",):
                raise _team_taken(team, cluster_id, op) from exc
            raise
        return self._quota(item)

    def get_quota(self, cluster_id: str, name: str) -> StoredQuota | None:
        item = self._get(cluster_pk(cluster_id), f"{QUOTA_PREFIX}{name}", "get_quota")
        return None if item is None else self._quota(item)

    def list_quotas(self, cluster_id: str) -> list[StoredQuota]:
        items = self._query(
            "list_quotas",
            KeyConditionExpression=Key(PK).eq(cluster_pk(cluster_id)) & Key(SK).begins_with(QUOTA_PREFIX),
            ConsistentRead=True,
        )
        return [self._quota(item) for item in items]

    def update_quota(self, cluster_id: str, name: str, body: Mapping[str, Any], target_version: int) -> StoredQuota:
        """Replace the quota's body if its version is still ``target_version`` (-> version + 1).
        The body's ``Name`` (when given) must be ``name``. Stale version -> StaleVersionError with the
        current one; missing -> NotFoundError; new team already has a quota -> AlreadyExistsError."""
        op = "update_quota"
        body = dict(body)
        body.setdefault("Name", name)
        new_name, team, text = self._quota_parts(body, op)
        if new_name != name:
            raise PermanentError(
                f"a compute quota cannot be renamed ({name!r} -> {new_name!r})", operation=op, status=400
            )
        current = self._get(cluster_pk(cluster_id), f"{QUOTA_PREFIX}{name}", op)
        if current is None:
            raise NotFoundError(f"compute quota {name!r} not found in cluster {cluster_id!r}", operation=op, status=404)
        old = StoredItem(current)
        version = old.get_int("version", minimum=1)
        if version != target_version:
            raise StaleVersionError(
                f"compute quota {name!r} is at version {version}, not {target_version}", current_version=version
            )
        old_team = old.get_str("team")
        pk = cluster_pk(cluster_id)
        item = {
            **current,
            "team": team,
            "version": target_version + 1,
            "body": text,
            "updated_at": self._now(),
        }
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "Item": attribute_values(item),
                    "ConditionExpression": f"attribute_exists({PK}) AND version = :v",
                    "ExpressionAttributeValues": attribute_values({":v": target_version}),
                }
            }
        ]
        if team != old_team:
            items += [
                {
                    "Delete": {
                        "Key": attribute_values({PK: pk, SK: f"{TEAM_PREFIX}{old_team}"}),
                        "ConditionExpression": f"attribute_not_exists({PK}) OR quota_name = :n",
                        "ExpressionAttributeValues": attribute_values({":n": name}),
                    }
                },
                {
                    "Put": {
                        "Item": attribute_values({PK: pk, SK: f"{TEAM_PREFIX}{team}", "quota_name": name}),
                        "ConditionExpression": f"attribute_not_exists({PK})",
                    }
                },
            ]
        try:
            self._transact(op, items)
        except TransactionCancelledError as exc:
            if exc.reasons[:1] == ("ConditionalCheckFailed",):
                self._raise_stale(cluster_id, name, target_version, op, exc)
            if exc.reasons[2:3] == ("ConditionalCheckFailed",):
                raise _team_taken(team, cluster_id, op) from exc
            raise
        return self._quota(item)

    def _raise_stale(self, cluster_id: str, name: str, target: int, op: str, cause: Exception) -> NoReturn:
        now = self.get_quota(cluster_id, name)
        if now is None:
            raise NotFoundError(
                f"compute quota {name!r} not found in cluster {cluster_id!r}", operation=op, status=404
            ) from cause
        raise StaleVersionError(
            f"compute quota {name!r} is at version {now.version}, not {target}", current_version=now.version
        ) from cause

    def delete_quota(self, cluster_id: str, name: str, target_version: int | None = None) -> None:
        """Delete the quota and its team guard in one transaction (missing -> NotFoundError). With
        ``target_version``, only if the quota is still at that version (else StaleVersionError)."""
        op = "delete_quota"
        pk = cluster_pk(cluster_id)
        for _attempt in range(3):
            current = self.get_quota(cluster_id, name)
            if current is None:
                raise NotFoundError(
                    f"compute quota {name!r} not found in cluster {cluster_id!r}", operation=op, status=404
                )
            if target_version is not None and current.version != target_version:
                raise StaleVersionError(
                    f"compute quota {name!r} is at version {current.version}, not {target_version}",
                    current_version=current.version,
                )
            team = current.body["ComputeQuotaTarget"]["TeamName"]
            try:
                self._transact(
                    op,
                    [
                        {
                            "Delete": {
                                "Key": attribute_values({PK: pk, SK: f"{QUOTA_PREFIX}{name}"}),
                                "ConditionExpression": "version = :v",
                                "ExpressionAttributeValues": attribute_values({":v": current.version}),
                            }
                        },
                        {
                            "Delete": {
                                "Key": attribute_values({PK: pk, SK: f"{TEAM_PREFIX}{team}"}),
                                "ConditionExpression": f"attribute_not_exists({PK}) OR quota_name = :n",
                                "ExpressionAttributeValues": attribute_values({":n": name}),
                            }
                        },
                    ],
                )
                return
            except TransactionCancelledError:
                continue  # changed under us: re-read and decide again
        raise ConflictError(f"compute quota {name!r} kept changing during delete", operation=op, status=409)

    @staticmethod
    def _quota_parts(body: Mapping[str, Any], op: str) -> tuple[str, str, str]:
        """The quota's ``Name``, team and JSON text to store (the store-managed fields left out); without a
        Name or a team, or not JSON: PermanentError."""
        if not isinstance(body, Mapping):
            raise PermanentError(
                f"a compute quota must be an object (got {type(body).__name__})", operation=op, status=400
            )
        managed = {"ComputeQuotaId", "ComputeQuotaVersion", "CreationTime", "LastModifiedTime"}
        text = to_json({k: v for k, v in body.items() if k not in managed}, f"quota {body.get('Name')!r}")
        name = require_name(body.get("Name"), "Name", op)
        target = body.get("ComputeQuotaTarget")
        team = require_name(
            target.get("TeamName") if isinstance(target, Mapping) else None, "ComputeQuotaTarget.TeamName", op
        )
        return name, team, text

    @staticmethod
    def _quota(raw: Mapping[str, Any]) -> StoredQuota:
        item = StoredItem(raw)
        name = item.get_str("name")
        team = item.get_str("team")
        quota_id = item.get_str("quota_id")
        if not ID_PATTERN.match(quota_id):
            item.corrupt(f"quota_id {quota_id!r} is not 12 lowercase alphanumeric characters")
        version = item.get_int("version", minimum=1)
        body = item.json_object("body")
        if body.get("Name") != name:
            item.corrupt(f"body Name {body.get('Name')!r} differs from the item's name {name!r}")
        target = body.get("ComputeQuotaTarget")
        if not isinstance(target, dict) or target.get("TeamName") != team:
            item.corrupt(f"body ComputeQuotaTarget.TeamName differs from the item's team {team!r}")
        body.update(
            ComputeQuotaId=quota_id,
            ComputeQuotaVersion=version,
            CreationTime=item.get_str("created_at"),
            LastModifiedTime=item.get_str("updated_at"),
        )
        return StoredQuota(
            name=name,
            version=version,
            body=body,
            created_at=item.get_str("created_at"),
            updated_at=item.get_str("updated_at"),
        )

    # ------------------------------------------------------------------------ scheduler config
    def get_scheduler_config(self, cluster_id: str) -> StoredQuota | None:
        item = self._get(cluster_pk(cluster_id), SCHEDULER_SK, "get_scheduler_config")
        return None if item is None else self._scheduler(item)

    def put_scheduler_config(
        self, cluster_id: str, body: Mapping[str, Any], target_version: int | None = None
    ) -> StoredQuota:
        """Create (``target_version=None``; one already there -> AlreadyExistsError) or replace the
        cluster's scheduler config if it is still at ``target_version`` (else StaleVersionError; none
        -> NotFoundError). The body is stored and returned as given (bare ``SchedulerConfig`` or the
        Create/Describe shape)."""
        op = "put_scheduler_config"
        if not isinstance(body, Mapping):
            raise PermanentError(f"a scheduler config must be an object (got {type(body).__name__})", operation=op)
        text = to_json(dict(body), f"scheduler config of {cluster_id}")
        now = self._now()
        pk = cluster_pk(cluster_id)
        if target_version is None:
            item = {
                PK: pk,
                SK: SCHEDULER_SK,
                "config_id": new_id(),
                "version": 1,
                "body": text,
                "created_at": now,
                "updated_at": now,
            }
            try:
                self._call(op, self.table.put_item, Item=item, ConditionExpression=f"attribute_not_exists({PK})")
            except ConflictError as exc:
                raise AlreadyExistsError(
                    f"cluster {cluster_id!r} already has a scheduler config", field="SchedulerConfig", operation=op
                ) from exc
            return self._scheduler(item)
        current = self._get(pk, SCHEDULER_SK, op)
        if current is None:
            raise NotFoundError(f"cluster {cluster_id!r} has no scheduler config", operation=op, status=404)
        item = {**current, "version": target_version + 1, "body": text, "updated_at": now}
        try:
            self._call(
                op,
                self.table.put_item,
                Item=item,
                ConditionExpression=f"attribute_exists({PK}) AND version = :v",
                ExpressionAttributeValues={":v": target_version},
            )
        except ConflictError as exc:
            self._raise_scheduler_stale(cluster_id, target_version, op, exc, re_read=True)
        return self._scheduler(item)

    def delete_scheduler_config(self, cluster_id: str, target_version: int | None = None) -> None:
        """Back to the defaults (everything Enabled). None stored -> NotFoundError. With
        ``target_version``, only if the config is still at that version (else StaleVersionError)."""
        op = "delete_scheduler_config"
        condition: dict[str, Any] = {"ConditionExpression": f"attribute_exists({PK})"}
        if target_version is not None:
            condition = {
                "ConditionExpression": f"attribute_exists({PK}) AND version = :v",
                "ExpressionAttributeValues": {":v": target_version},
            }
        try:
            self._call(op, self.table.delete_item, Key={PK: cluster_pk(cluster_id), SK: SCHEDULER_SK}, **condition)
        except ConflictError as exc:
            self._raise_scheduler_stale(cluster_id, target_version, op, exc, re_read=target_version is not None)

    def _raise_scheduler_stale(
        self, cluster_id: str, target: int | None, op: str, cause: Exception, *, re_read: bool
    ) -> NoReturn:
        """A conditional write of the scheduler config failed: none stored (or not ``re_read``) -> NotFoundError,
        else StaleVersionError with the current version."""
        latest = self.get_scheduler_config(cluster_id) if re_read else None
        if latest is None:
            raise NotFoundError(f"cluster {cluster_id!r} has no scheduler config", operation=op, status=404) from cause
        raise StaleVersionError(
            f"scheduler config of {cluster_id!r} is at version {latest.version}, not {target}",
            current_version=latest.version,
        ) from cause

    @staticmethod
    def _scheduler(raw: Mapping[str, Any]) -> StoredQuota:
        item = StoredItem(raw)
        config_id = item.get_str("config_id")
        if not ID_PATTERN.match(config_id):
            item.corrupt(f"config_id {config_id!r} is not 12 lowercase alphanumeric characters")
        return StoredQuota(
            name=config_id,
            version=item.get_int("version", minimum=1),
            body=item.json_object("body"),
            created_at=item.get_str("created_at", ""),
            updated_at=item.get_str("updated_at", ""),
        )
