"""The cluster registry: META, its REGISTRY copy and the EKS# / ARN# lookups, written in one transaction (and
deleted in one when a cluster is deregistered)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.conditions import Key

from idleshare.adapters.ports import ClusterRecord
from idleshare.adapters.store.base import TableAccess
from idleshare.adapters.store.errors import TransactionCancelledError
from idleshare.adapters.store.items import StoredItem, attribute_values, require_name
from idleshare.domain.cluster_settings import ClusterSettings, SettingError
from idleshare.errors import AlreadyExistsError, PermanentError
from idleshare.parse.cluster_settings import read_settings, settings_json
from idleshare.table import ARN_PREFIX, CLUSTER_PREFIX, EKS_PREFIX, META_SK, PK, REGISTRY_PK, SK, cluster_pk

_HYPERPOD_ARN = re.compile(
    r"^(?P<prefix>arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:\d{12}):cluster/(?P<segment>[A-Za-z0-9](?:-*[A-Za-z0-9]){0,62})$"
)


def _checked(cluster: ClusterRecord, op: str) -> tuple[str, str, str | None]:
    """The cluster's id, EKS cluster name and HyperPod ARN, once each is valid; the first one that is not ->
    :class:`PermanentError` (400) naming it (its settings were checked when they were made)."""
    cid = require_name(cluster.cluster_id, "cluster_id", op)
    eks = require_name(cluster.eks_cluster_name, "eks_cluster_name", op)
    arn = cluster.hyperpod_cluster_arn
    if arn is not None and not _HYPERPOD_ARN.match(arn):
        raise PermanentError(f"hyperpod_cluster_arn {arn!r} is not a HyperPod cluster ARN", operation=op, status=400)
    return cid, eks, arn


def _attributes(cluster: ClusterRecord, cid: str, eks: str, arn: str | None, *, updated_at: str) -> dict[str, Any]:
    """What META and its REGISTRY copy hold of a cluster; the ARN only when it has one."""
    attrs: dict[str, Any] = {
        "cluster_id": cid,
        "eks_cluster_name": eks,
        "settings": settings_json(cluster.settings),
        "updated_at": updated_at,
    }
    if arn is not None:
        attrs["hyperpod_cluster_arn"] = arn
    return attrs


@dataclass(frozen=True, slots=True)
class _Identity:
    eks_cluster_name: str
    hyperpod_cluster_arn: str | None


def _owned_by(cid: str) -> dict[str, Any]:
    """The condition of a write to a lookup: it is free, or it already names cluster ``cid``."""
    return {
        "ConditionExpression": f"attribute_not_exists({PK}) OR cluster_id = :id",
        "ExpressionAttributeValues": attribute_values({":id": cid}),
    }


def _lookup_put(sk: str, cid: str) -> dict[str, Any]:
    """The write of the lookup ``sk`` (EKS# / ARN#) naming cluster ``cid``, refused while it names another."""
    return {"Put": {"Item": attribute_values({PK: REGISTRY_PK, SK: sk, "cluster_id": cid}), **_owned_by(cid)}}


def _stale_lookups(old: _Identity | None, eks: str, arn: str | None) -> list[str]:
    """The lookups of the cluster as it was registered (``old``) that its new EKS name / ARN no longer use."""
    stale = []
    if old is not None and old.eks_cluster_name != eks:
        stale.append(f"{EKS_PREFIX}{old.eks_cluster_name}")
    if old is not None and old.hyperpod_cluster_arn and old.hyperpod_cluster_arn != arn:
        stale.append(f"{ARN_PREFIX}{old.hyperpod_cluster_arn}")
    return stale


class ClusterRegistry(TableAccess):
    """Register, find and list governed clusters (the :class:`~idleshare.adapters.ports.Store` port's cluster part)."""

    def get_cluster(self, cluster_id: str) -> ClusterRecord | None:
        item = self._get(cluster_pk(cluster_id), META_SK, "get_cluster")
        return None if item is None else self._cluster(item)

    def find_cluster(
        self, *, eks_cluster_name: str | None = None, hyperpod_arn: str | None = None
    ) -> ClusterRecord | None:
        """By EKS cluster name, then by HyperPod cluster ARN. The ARN's last segment may be the 12-char
        cluster id or the cluster name (``cluster/sample-cluster``): an exact registered ARN wins; else
        the segment is tried as an idleshare cluster id, then as an EKS cluster name — accepted only if
        that cluster has no registered ARN or one in the same partition, region and account."""
        if eks_cluster_name:
            found = self._by_lookup(f"{EKS_PREFIX}{eks_cluster_name}")
            if found is not None:
                return found
        if not hyperpod_arn:
            return None
        found = self._by_lookup(f"{ARN_PREFIX}{hyperpod_arn}")
        if found is not None:
            return found
        m = _HYPERPOD_ARN.match(hyperpod_arn)
        if m is None:
            return None
        segment = m.group("segment")
        for candidate in (self.get_cluster(segment), self._by_lookup(f"{EKS_PREFIX}{segment}")):
            if candidate is None:
                continue
            registered = _HYPERPOD_ARN.match(candidate.hyperpod_cluster_arn or "")
            if candidate.hyperpod_cluster_arn is None or (
                registered is not None and registered.group("prefix") == m.group("prefix")
            ):
                return candidate
        return None

    def _by_lookup(self, sk: str) -> ClusterRecord | None:
        item = self._get(REGISTRY_PK, sk, "find_cluster")
        if item is None:
            return None
        return self.get_cluster(StoredItem(item).get_str("cluster_id"))

    def list_clusters(self) -> list[ClusterRecord]:
        items = self._query(
            "list_clusters",
            KeyConditionExpression=Key(PK).eq(REGISTRY_PK) & Key(SK).begins_with(CLUSTER_PREFIX),
            ConsistentRead=True,
        )
        return [self._cluster(item) for item in items]

    def put_cluster(self, cluster: ClusterRecord) -> None:
        """Register or update a cluster: META, its REGISTRY copy and the EKS#/ARN# lookups in one
        transaction. A name or ARN already registered to another cluster -> AlreadyExistsError."""
        op = "put_cluster"
        cid, eks, arn = _checked(cluster, op)
        old = self._identity(cid, op)
        attrs = _attributes(cluster, cid, eks, arn, updated_at=self._now())
        # each write with the field whose value it claims ("": none), to name the one another cluster holds
        writes: list[tuple[dict[str, Any], str]] = [
            ({"Put": {"Item": attribute_values({PK: cluster_pk(cid), SK: META_SK, **attrs})}}, ""),
            ({"Put": {"Item": attribute_values({PK: REGISTRY_PK, SK: cluster_pk(cid), **attrs})}}, ""),
            (_lookup_put(f"{EKS_PREFIX}{eks}", cid), "eks_cluster_name"),
        ]
        if arn is not None:
            writes.append((_lookup_put(f"{ARN_PREFIX}{arn}", cid), "hyperpod_cluster_arn"))
        for sk in _stale_lookups(old, eks, arn):
            writes.append(({"Delete": {"Key": attribute_values({PK: REGISTRY_PK, SK: sk}), **_owned_by(cid)}}, ""))
        try:
            self._transact(op, [write for write, _ in writes])
        except TransactionCancelledError as exc:
            fields = [field for _, field in writes]
            taken = [f for f, r in zip(fields, exc.reasons, strict=False) if r == "ConditionalCheckFailed" and f]
            if taken:
                value = eks if taken[0] == "eks_cluster_name" else arn
                raise AlreadyExistsError(
                    f"{taken[0]} {value!r} is already registered to another cluster", field=taken[0], operation=op
                ) from exc
            raise

    def delete_cluster(self, cluster_id: str) -> bool:
        """Deregister a cluster: META, its REGISTRY copy and its EKS# / ARN# lookups deleted in one transaction
        (a lookup only while it still names this cluster), so no event is routed to it and the schedule's
        ``all`` no longer lists it. Its pool, history, quotas and scheduler config are left as they are. False
        when it was not registered (nothing to delete)."""
        op = "delete_cluster"
        cid = require_name(cluster_id, "cluster_id", op)
        old = self._identity(cid, op)
        if old is None:
            return False
        owned = _owned_by(cid)
        items: list[dict[str, Any]] = [
            {"Delete": {"Key": attribute_values({PK: cluster_pk(cid), SK: META_SK})}},
            {"Delete": {"Key": attribute_values({PK: REGISTRY_PK, SK: cluster_pk(cid)})}},
            {
                "Delete": {
                    "Key": attribute_values({PK: REGISTRY_PK, SK: f"{EKS_PREFIX}{old.eks_cluster_name}"}),
                    **owned,
                }
            },
        ]
        if old.hyperpod_cluster_arn:
            items.append(
                {
                    "Delete": {
                        "Key": attribute_values({PK: REGISTRY_PK, SK: f"{ARN_PREFIX}{old.hyperpod_cluster_arn}"}),
                        **owned,
                    }
                }
            )
        self._transact(op, items)
        return True

    def _identity(self, cid: str, op: str) -> _Identity | None:
        """The cluster as registered, its lookups only: what re-registering or deregistering it replaces, read even
        when its settings no longer read (a corrupt item is mended by registering the cluster again)."""
        raw = self._get(cluster_pk(cid), META_SK, op)
        if raw is None:
            return None
        item = StoredItem(raw)
        return _Identity(item.get_str("eks_cluster_name"), item.get_opt_str("hyperpod_cluster_arn"))

    def _cluster(self, raw: Mapping[str, Any]) -> ClusterRecord:
        item = StoredItem(raw)
        return ClusterRecord(
            cluster_id=item.get_str("cluster_id"),
            eks_cluster_name=item.get_str("eks_cluster_name"),
            hyperpod_cluster_arn=item.get_opt_str("hyperpod_cluster_arn"),
            settings=_settings(item),
        )


def _settings(item: StoredItem) -> ClusterSettings:
    """The cluster's settings as registered (``parse/cluster_settings``'s schema); one that no longer reads is a
    corrupt item naming the setting."""
    try:
        return read_settings(item.raw.get("settings"))
    except SettingError as exc:
        item.corrupt(f"attribute 'settings': {exc}")
