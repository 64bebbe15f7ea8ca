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

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import boto3

from idleshare import names, timings
from idleshare.adapters.idempotency import RequestLedgers
from idleshare.adapters.ports import (
    ClusterConnection,
    ClusterRecord,
    EventBus,
    FullStore,
    RecomputeQueue,
    RecordReturns,
)
from idleshare.runtime.env import HANDLER_VARIABLE, check_at_cold_start, settings

if TYPE_CHECKING:  # pragma: no cover
    from botocore.config import Config

    from idleshare.adapters.eks_auth import EksConnector

check_at_cold_start()


@dataclass
class Dependencies:
    """What the deployed functions reach the outside world through, one of each port (``adapters/ports.py``); a
    function that needs one left None says so at its first invocation."""

    store: FullStore
    queue: RecomputeQueue | None = None
    publisher: EventBus | None = None
    kube_for: Callable[[ClusterRecord], ClusterConnection] | None = None
    """The connection to a governed cluster's API server (one per cluster, reused by warm starts)."""
    clock: Callable[[], float] = time.time
    """Epoch seconds: what a queued message's ``notBefore`` is compared with (the devkit's simulated clock)."""
    ledgers: RequestLedgers = field(default_factory=RequestLedgers)
    """The idempotency records of explicit recalculation requests (one persistence layer per table)."""
    returns: RecordReturns | None = None
    """Hands the recompute's failed records back to their queue with a backoff (None: the visibility timeout)."""


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


CLIENT_TIMINGS: dict[str, timings.ClientTimings] = {
    names.ROUTER_HANDLER: timings.ROUTER_CLIENT,
    names.API_HANDLER: timings.API_CLIENT,
    names.REGISTRAR_HANDLER: timings.REGISTRAR_CLIENT,
    names.RECOMPUTE_HANDLER: timings.RECOMPUTE_CLIENT,
    names.WATCHER_HANDLER: timings.WATCHER_CLIENT,
}
"""Each function's boto3 client settings (``timings.py``), by the handler Lambda names in ``_HANDLER``."""


def client_timings(handler: str | None = None) -> timings.ClientTimings:
    """The client settings of the function running ``handler`` (default: the running one; outside Lambda,
    :data:`timings.DEFAULT_CLIENT`)."""
    handler = os.environ.get(HANDLER_VARIABLE) if handler is None else handler
    return CLIENT_TIMINGS.get(handler or "", timings.DEFAULT_CLIENT)


def client_config(handler: str | None = None) -> Config:
    """The ``botocore.config.Config`` every boto3 client of the function running ``handler`` is built with:
    explicit connect / read timeouts and standard retries (:func:`client_timings`)."""
    from botocore.config import Config

    t = client_timings(handler)
    return Config(
        connect_timeout=t.connect_seconds,
        read_timeout=t.read_seconds,
        retries={"mode": "standard", "total_max_attempts": t.attempts},
    )


def _from_environment() -> Dependencies:
    from idleshare.adapters.aws import EventBridgePublisher, SqsRecomputeQueue
    from idleshare.adapters.store import DynamoStore

    e = settings()
    config = client_config()
    store = DynamoStore(
        boto3.resource("dynamodb", config=config).Table(e.table_name), history_ttl_days=e.history_ttl_days
    )
    queue = SqsRecomputeQueue(boto3.client("sqs", config=config), e.queue_url) if e.queue_url else None
    publisher = (
        EventBridgePublisher(boto3.client("events", config=config), e.event_bus_name) if e.event_bus_name else None
    )
    connectors: dict[str, EksConnector] = {}
    clients: dict[str, ClusterConnection] = {}

    def kube_for(cluster: ClusterRecord) -> ClusterConnection:
        from idleshare.adapters.eks_auth import EksConnector
        from idleshare.adapters.kube import LightkubeCluster

        if "eks" not in connectors:
            connectors["eks"] = EksConnector(boto3.client("eks", config=config), session=boto3.Session(), config=config)
        name = cluster.eks_cluster_name
        if name not in clients:  # one client per cluster: warm starts reuse its TLS connection and its last node list
            from idleshare.adapters.node_cache import NodeCache

            clients[name] = LightkubeCluster.from_eks(connectors["eks"], name, node_cache=NodeCache())
        return clients[name]

    from idleshare.adapters.sqs_records import SqsRecordReturns

    # the SQS client for handing failed records back is built when a record first fails
    returns = SqsRecordReturns(lambda: boto3.client("sqs", config=config))
    return Dependencies(
        store=store,
        queue=queue,
        publisher=publisher,
        kube_for=kube_for,
        returns=returns,
        ledgers=RequestLedgers(boto_config=config),  # the idempotency table's client: the same timeouts
    )
