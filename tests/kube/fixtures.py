"""Test-side helpers for the real Kubernetes stack (the stack's own fixtures are in ``tests/realkube.py``).

- :func:`make_node`: a minimal but realistic core/v1 Node.
- :class:`ProxiedKube` and the ``proxied_kube`` fixture: the real cluster as the pipeline tests see it —
  the admin client's hooks (:class:`devkit.kube.client.Kube`: ``get``, ``objects``, ``set_node``,
  ``delete_node``, ``seed_nodes``...) go straight to the apiserver; idleshare's own adapter (:meth:`adapter`,
  its restricted RBAC user) goes through a :class:`devkit.kube.proxy.FaultProxy`, whose hooks (``inject``,
  ``inject_timeout``, ``outage``, ``restore``, ``clear_faults``, ``requests``, ``clear_requests``) are here
  too. So ``requests`` holds what idleshare sent, never the test's own reads and writes.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from typing import Any

import pytest

from devkit.kube.client import Kube
from devkit.kube.proxy import FaultProxy, RequestRecord
from devkit.kube.stack import KubeStack
from idleshare.adapters.eks_auth import ClusterEndpoint
from idleshare.adapters.kube import LightkubeCluster

__all__ = ["ProxiedKube", "as_written", "make_node", "proxied_kube", "wait_serving"]


def as_written(obj: dict[str, Any]) -> dict[str, Any]:
    """What anyone but Kueue's status writes could have changed in an object: its labels, annotations and fields,
    and the managers of everything but its status (Kueue writes a queue's status, and so its resourceVersion, at
    any time)."""
    meta = obj["metadata"]
    managers = {m["manager"] for m in meta.get("managedFields") or () if m.get("subresource") != "status"}
    fields = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    return {"labels": meta.get("labels"), "annotations": meta.get("annotations"), "managers": managers, **fields}


def make_node(
    name: str,
    instance_type: str | None = "ml.p5.48xlarge",
    *,
    allocatable: dict[str, str] | None = None,
    ready: bool = True,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A minimal but realistic core/v1 Node."""
    alloc = allocatable or {"cpu": "191450m", "memory": "2027264Mi", "nvidia.com/gpu": "8", "pods": "737"}
    node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    if instance_type:
        node_labels["node.kubernetes.io/instance-type"] = instance_type
    node_labels.update(labels or {})
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": {},
        "status": {
            "allocatable": copy.deepcopy(alloc),
            "capacity": copy.deepcopy(alloc),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}],
        },
    }
    if taints:
        node["spec"]["taints"] = taints
    if unschedulable:
        node["spec"]["unschedulable"] = True
    return node


def wait_serving(admin: Kube, timeout: float = 60.0) -> None:
    """Until a freshly started apiserver lists every Kueue kind: for a moment after it is ready it answers
    429 "storage is (re)initializing" to custom-resource lists (its watch cache is filling)."""
    from devkit.kube.client import KubeRequestError

    def serving() -> bool:
        try:
            for kind in ("ResourceFlavor", "WorkloadPriorityClass", "Cohort", "ClusterQueue", "LocalQueue"):
                admin.objects(kind)
        except KubeRequestError as exc:
            if exc.status == 429:
                return False
            raise
        return True

    admin.wait_for(serving, "serving Kueue lists", timeout=timeout)


class ProxiedKube:
    """The real apiserver: the admin's hooks direct, idleshare's adapter through the fault proxy."""

    def __init__(self, stack: KubeStack, admin: Kube, proxy: FaultProxy) -> None:
        self.stack, self.admin, self.proxy = stack, admin, proxy

    @property
    def url(self) -> str:
        """Where idleshare's adapter connects (the proxy)."""
        return self.proxy.url

    def adapter(self, *, timeout: float = 10.0, name: str = "demo") -> LightkubeCluster:
        """idleshare's adapter as its own RBAC user, through the proxy."""
        return LightkubeCluster(self.proxy.url, token=lambda: self.stack.idleshare_token, timeout=timeout, name=name)

    def watcher(self, *, timeout: float = 10.0, name: str = "demo") -> LightkubeCluster:
        """idleshare's adapter as the node watcher's RBAC user (its own group), through the proxy."""
        from tests.realkube import WATCHER_TOKEN

        return LightkubeCluster(self.proxy.url, token=lambda: WATCHER_TOKEN, timeout=timeout, name=name)

    # -- the proxy's hooks ---------------------------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        return self.proxy.requests

    def clear_requests(self) -> None:
        self.proxy.clear_requests()

    def inject(self, *args: Any, **kwargs: Any) -> Any:
        return self.proxy.inject(*args, **kwargs)

    def inject_timeout(self, *args: Any, **kwargs: Any) -> Any:
        return self.proxy.inject_timeout(*args, **kwargs)

    def clear_faults(self) -> None:
        self.proxy.clear_faults()

    def outage(self, mode: str = "refuse") -> None:
        self.proxy.outage(mode)

    def restore(self) -> None:
        self.proxy.restore()

    # -- the admin client's hooks (Kube) -------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        return getattr(self.admin, name)


@pytest.fixture
def proxied_kube(kube_stack: KubeStack, kube: Kube) -> Iterator[ProxiedKube]:
    """An emptied real cluster with a fresh recording fault proxy in front of it."""
    with FaultProxy(kube_stack.server, kube_stack.ca_file) as proxy:
        yield ProxiedKube(kube_stack, kube, proxy)


class FakeConnector:
    """EksConnector's surface (describe, token, invalidate) in front of the real TLS apiserver (``url``, default
    the stack's own): after N invalidations it hands out ``token-N``; the apiserver takes ``token-N`` for N at least
    ``current`` (a freshly signed token is valid: it is idleshare's RBAC token), older ones are presigned-looking
    tokens it no longer knows, so the real authenticator answers 401."""

    def __init__(
        self, stack: KubeStack, url: str | None = None, *, name: str = "local", current: int = 0, valid: str = ""
    ) -> None:
        self.stack = stack
        self.valid = valid or stack.idleshare_token  # the token it hands out once current (another RBAC user's)
        self.endpoint = ClusterEndpoint(name, url or stack.server, base64.b64encode(stack.ca_pem).decode())
        self.invalidated = 0
        self.current = current

    def describe(self, cluster_name: str) -> ClusterEndpoint:
        return self.endpoint

    def token(self, cluster_name: str) -> str:
        n = self.invalidated
        return self.valid if n >= self.current else f"k8s-aws-v1.token-{n}"

    def invalidate(self, cluster_name: str) -> None:
        self.invalidated += 1
