"""Builds the adapters once per container (warm starts reuse them); tests install their own.

Building them writes nothing: the governed clusters are registered at deploy time, by the registrar
custom resource (``handlers/registrar.py``), so the router's role may only read the table. In a Lambda,
importing this module checks the function's configuration (``runtime/env.py``): a missing variable is
an init error naming it, before any event is taken.

``boto3`` is imported here, at module level, on purpose: every invocation needs it, so a handler's
cold start counts it (``make bench`` compares each handler's import with ``import boto3`` alone);
the clients themselves are built on the first invocation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3

from idleshare.adapters.idempotency import RequestLedgers
from idleshare.adapters.ports import ClusterRecord, EventPublisher, KubeCluster, RecomputeQueue, Store
from idleshare.runtime.env import check_at_cold_start, settings

check_at_cold_start()


@dataclass
class Dependencies:
    store: Store
    queue: RecomputeQueue | None = None
    publisher: EventPublisher | None = None
    kube_for: Any = None  # Callable[[ClusterRecord], KubeCluster]
    clock: Callable[[], float] = time.time
    """Epoch seconds: what a queued message's ``notBefore`` is compared with (the devkit's simulated clock)."""
    sleep: Callable[[float], None] = time.sleep
    """How the recompute waits for a coalescing window to close."""
    ledgers: RequestLedgers = field(default_factory=RequestLedgers)
    """The idempotency records of explicit recalculation requests (one persistence layer per table)."""


_installed: Dependencies | None = None


def install(deps: Dependencies | None) -> None:
    """Use these dependencies (tests, the local replay harness); None rebuilds from the environment."""
    global _installed
    _installed = deps


def dependencies() -> Dependencies:
    global _installed
    if _installed is None:
        _installed = _from_environment()
    return _installed


def governed_cluster(cluster_id: str) -> ClusterRecord | None:
    """The governed cluster ``cluster_id``: from this deployment's configuration, else (outside a
    deployment: local runs, tests) from the registry; None when it is not governed."""
    for cluster in settings().clusters:
        if cluster.cluster_id == cluster_id:
            return cluster
    return dependencies().store.get_cluster(cluster_id)


def _from_environment() -> Dependencies:
    from idleshare.adapters.aws import EventBridgePublisher, SqsRecomputeQueue
    from idleshare.adapters.store import DynamoStore

    e = settings()
    store = DynamoStore(boto3.resource("dynamodb").Table(e.table_name), history_ttl_days=e.history_ttl_days)
    queue = SqsRecomputeQueue(boto3.client("sqs"), e.queue_url) if e.queue_url else None
    publisher = EventBridgePublisher(boto3.client("events"), e.event_bus_name) if e.event_bus_name else None
    connectors: dict[str, Any] = {}
    clients: dict[str, KubeCluster] = {}

    def kube_for(cluster: ClusterRecord) -> KubeCluster:
        from idleshare.adapters.eks_auth import EksConnector
        from idleshare.adapters.kube import LightkubeCluster

        if "eks" not in connectors:
            connectors["eks"] = EksConnector(boto3.client("eks"), boto3.Session())
        name = cluster.eks_cluster_name
        if name not in clients:  # one client per cluster: warm starts reuse its TLS connection
            clients[name] = LightkubeCluster.from_eks(connectors["eks"], name)
        return clients[name]

    return Dependencies(store=store, queue=queue, publisher=publisher, kube_for=kube_for)
