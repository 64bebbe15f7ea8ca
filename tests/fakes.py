"""In-memory fakes of the ports (adapters/ports.py) for handler and service unit tests."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from idleshare.adapters.errors import ConflictError, NotFoundError, RetryableError
from idleshare.adapters.ports import ClusterRecord, PoolRecord, RecalculationReceipt, StoredQuota


class FakeStore:
    def __init__(self, clusters: list[ClusterRecord] = ()) -> None:  # type: ignore[assignment]
        self.clusters = {c.cluster_id: c for c in clusters}
        self.quotas: dict[str, dict[str, StoredQuota]] = {}
        self.scheduler: dict[str, StoredQuota] = {}
        self.pools: dict[str, PoolRecord] = {}
        self.history: dict[str, list[PoolRecord]] = {}
        self.receipts: dict[tuple[str, str], RecalculationReceipt] = {}
        self.writes = 0

    def get_cluster(self, cluster_id):
        return self.clusters.get(cluster_id)

    def find_cluster(self, *, eks_cluster_name=None, hyperpod_arn=None):
        for c in self.clusters.values():
            if eks_cluster_name and c.eks_cluster_name == eks_cluster_name:
                return c
            if hyperpod_arn and c.hyperpod_cluster_arn == hyperpod_arn:
                return c
        return None

    def list_clusters(self):
        return sorted(self.clusters.values(), key=lambda c: c.cluster_id)

    def put_cluster(self, cluster):
        self.clusters[cluster.cluster_id] = cluster

    def set_quotas(self, cluster_id: str, bodies: list[dict[str, Any]]) -> None:
        self.quotas[cluster_id] = {b["Name"]: StoredQuota(b["Name"], 1, b) for b in bodies}

    def list_quotas(self, cluster_id):
        return list(self.quotas.get(cluster_id, {}).values())

    def get_quota(self, cluster_id, name):
        return self.quotas.get(cluster_id, {}).get(name)

    def get_scheduler_config(self, cluster_id):
        return self.scheduler.get(cluster_id)

    def get_pool(self, cluster_id):
        return self.pools.get(cluster_id)

    def put_pool(self, record, expected_generation):
        current = self.pools.get(record.cluster_id)
        if (current.generation if current else 0) != expected_generation:
            raise ConflictError("generation moved")
        self.pools[record.cluster_id] = record
        self.history.setdefault(record.cluster_id, []).append(record)
        self.writes += 1

    def record_apply(self, cluster_id, generation, status, message=""):
        current = self.pools.get(cluster_id)
        if current and current.generation == generation:
            self.pools[cluster_id] = replace(current, apply_status=status, apply_message=message)
            self.writes += 1

    def record_read_failure(self, cluster_id, message):
        current = self.pools.get(cluster_id)
        if current:
            self.pools[cluster_id] = replace(current, read_failure=message)
        self.writes += 1

    def list_history(self, cluster_id, limit=20, newest_first=True, *, include_pool=True, before_generation=None):
        entries = [
            h for h in self.history.get(cluster_id, []) if before_generation is None or h.generation < before_generation
        ]
        entries.sort(key=lambda h: h.generation, reverse=newest_first)
        return [h if include_pool else replace(h, pool={}) for h in entries[:limit]]

    def put_receipt(self, receipt):
        self.receipts[(receipt.cluster_id, receipt.request_id)] = receipt
        self.writes += 1

    def get_receipt(self, cluster_id, request_id):
        return self.receipts.get((cluster_id, request_id))


class FakeQueue:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.request_ids: list[str | None] = []  # the explicit request id of each message (None: none)

    def enqueue(self, cluster_id, reason, dedup_window_seconds=10, *, request_id=None):
        self.sent.append((cluster_id, reason))
        self.request_ids.append(request_id)
        return request_id or f"req-{len(self.sent)}"


class FakePublisher:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def publish(self, detail_type, detail, resources=()):
        self.events.append((detail_type, detail))


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


class FakeKube:
    """A cluster: nodes as dicts and stored objects; counts writes; can be made unreachable."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = nodes
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.applies = 0
        self.deletes = 0
        self.down = False

    def list_nodes(self, page_size=500):
        if self.down:
            raise RetryableError("connection refused", operation="list nodes")
        yield from copy.deepcopy(self.nodes)

    def list_managed(self):
        if self.down:
            raise RetryableError("connection refused", operation="list")
        return [copy.deepcopy(o) for o in self.objects.values()]

    def apply(self, obj, *, force=False):
        if self.down:
            raise RetryableError("connection refused", operation="apply")
        self.objects[_key(obj)] = copy.deepcopy(obj)
        self.applies += 1

    def ensure_namespace(self, obj):
        if _key(obj) in self.objects:
            return False
        self.objects[_key(obj)] = copy.deepcopy(obj)
        self.applies += 1
        return True

    def delete(self, obj):
        if self.objects.pop(_key(obj), None) is None:
            raise NotFoundError("gone")
        self.deletes += 1
