"""The node watcher (``idleshare.service.watcher``) in the local pipeline: what the deployed watcher Lambda does
every minute, run as a short pass after each change to the cluster.

A pass resumes the watch from the bookmark the previous pass saved in the store (the first pass lists the nodes
and publishes nothing, as a first deployment does), sees what moved on the real apiserver — a ``kubectl
cordon``, a kubelet's Ready going False, a new MIG layout — and hands each ``Node Changed`` it publishes to the
router, exactly as the bus rule does. Heartbeat-only updates produce nothing.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from idleshare import names


@dataclass
class LocalWatcher:
    """``LocalWatcher(cluster_id, kube, store, route).pass_()`` -> the ``Node Changed`` events it routed."""

    cluster_id: str
    kube: Any  # LightkubeCluster (idleshare's node-watcher reads: list + watch nodes)
    store: Any  # DynamoStore (the bookmark items)
    route: Callable[[dict[str, Any]], Any]  # the router handler, as the bus rule invokes it
    account: str = "111122223333"
    region: str = "us-west-2"
    seconds: float = 1.5
    published: list[dict[str, Any]] = field(default_factory=list)

    def publish_batch(self, events: Iterable[tuple[str, dict[str, Any]]]) -> int:
        n = 0
        for detail_type, detail in events:
            envelope = {
                "version": "0",
                "id": str(uuid.uuid4()),
                "detail-type": detail_type,
                "source": names.EVENT_SOURCE,
                "account": self.account,
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "region": self.region,
                "resources": [],
                "detail": detail,
            }
            self.published.append(envelope)
            self.route(envelope)
            n += 1
        return n

    def pass_(self, seconds: float | None = None) -> list[dict[str, Any]]:
        """Watch for ``seconds`` (resuming from the saved bookmark) and route what moved; returns those events."""
        from idleshare.service.watcher import watch_cluster

        before = len(self.published)
        window = seconds if seconds is not None else self.seconds
        watch_cluster(
            self.cluster_id,
            self.kube,
            self.store,
            self,
            deadline=time.monotonic() + window + 1,
            owner=f"local-{uuid.uuid4().hex[:8]}",
            window_seconds=max(1, round(window)),
        )
        return self.published[before:]
