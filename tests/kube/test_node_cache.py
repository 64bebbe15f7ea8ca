"""The warm recompute's node list (``adapters/node_cache.py``) on the real kube-apiserver: a list kept and brought up to
date by a watch gives exactly what a fresh list gives, after every kind of change; any failure of the catch-up lists
again; a failing list is never answered from what was kept."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from devkit.kube.client import Kube
from devkit.kube.proxy import FaultProxy
from devkit.kube.stack import KubeStack
from idleshare.adapters.kube import LightkubeCluster
from idleshare.adapters.node_cache import NodeCache
from idleshare.errors import RetryableError
from idleshare.timings import NODE_CATCH_UP_SECONDS
from tests.kube.fixtures import make_node


@pytest.fixture
def proxy(kube_stack: KubeStack, kube: Kube) -> Iterator[FaultProxy]:
    with FaultProxy(kube_stack.server, kube_stack.ca_file) as p:
        yield p


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cached(kube_stack: KubeStack, proxy: FaultProxy, clock: Clock) -> Iterator[LightkubeCluster]:
    """idleshare's adapter as its own user, through the recording proxy, keeping its node list."""
    cluster = LightkubeCluster(
        proxy.url,
        token=lambda: kube_stack.idleshare_token,
        timeout=10.0,
        name="local",
        node_cache=NodeCache(max_age_seconds=300, clock=clock),
    )
    yield cluster
    cluster.close()


def fresh_list(kube_stack: KubeStack) -> list[dict]:
    plain = LightkubeCluster(kube_stack.server, kube_stack.ca_pem, lambda: kube_stack.idleshare_token, name="plain")
    try:
        return list(plain.list_nodes())
    finally:
        plain.close()


def node_requests(proxy: FaultProxy) -> list[str]:
    return [
        ("watch" if r.query.get("watch") in ("true", "1") else "list")
        for r in proxy.requests
        if r.method == "GET" and r.path == "/api/v1/nodes"
    ]


def test_a_kept_list_brought_up_to_date_is_a_fresh_list(
    kube: Kube, kube_stack: KubeStack, cached: LightkubeCluster, proxy: FaultProxy
) -> None:
    kube.seed_nodes([make_node(f"n-{i}") for i in range(6)])
    assert [n["metadata"]["name"] for n in cached.list_nodes()] == [f"n-{i}" for i in range(6)]
    assert node_requests(proxy) == ["list"]
    # every kind of change a node makes: status (Ready), spec (cordon, taint), labels, deleted, added (sorts between)
    node = kube.get("Node", "n-1")
    node["status"]["conditions"][0]["status"] = "False"
    kube.set_status("Node", "n-1", {"conditions": node["status"]["conditions"]})
    kube.merge_patch("Node", "n-2", {"spec": {"unschedulable": True}})
    kube.merge_patch("Node", "n-3", {"metadata": {"labels": {"sagemaker.amazonaws.com/node-health-status": "X"}}})
    kube.merge_patch("Node", "n-4", {"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}})
    kube.delete("Node", "n-5")
    kube.create(make_node("n-0a"))
    proxy.clear_requests()
    started = time.monotonic()
    caught_up = list(cached.list_nodes())
    assert node_requests(proxy) == ["watch"]  # no list: the watch from the kept version brought it up to date
    # ended by the quiet stream (NODE_CATCH_UP_IDLE_SECONDS), not by the server's timeoutSeconds
    assert time.monotonic() - started < NODE_CATCH_UP_SECONDS / 2
    assert caught_up == fresh_list(kube_stack)
    assert [n["metadata"]["name"] for n in caught_up] == ["n-0", "n-0a", "n-1", "n-2", "n-3", "n-4"]
    # nothing changed since: the same nodes again, still without a list
    proxy.clear_requests()
    assert list(cached.list_nodes()) == caught_up
    assert node_requests(proxy) == ["watch"]


@pytest.fixture
def kept(kube: Kube, cached: LightkubeCluster) -> LightkubeCluster:
    """``cached`` once it has listed the cluster's three nodes, k-0 to k-2: it keeps that list."""
    kube.seed_nodes([make_node(f"k-{i}") for i in range(3)])
    list(cached.list_nodes())
    return cached


def test_an_expired_version_lists_again(
    kube: Kube, kube_stack: KubeStack, kept: LightkubeCluster, proxy: FaultProxy
) -> None:
    kube.merge_patch("Node", "k-0", {"spec": {"unschedulable": True}})
    proxy.inject("GET", r"^/api/v1/nodes$", status=410, message="too old resource version")  # the catch-up
    proxy.clear_requests()
    assert list(kept.list_nodes()) == fresh_list(kube_stack)
    assert node_requests(proxy) == ["watch", "list"]


def test_a_kept_list_too_old_is_listed_again(kept: LightkubeCluster, proxy: FaultProxy, clock: Clock) -> None:
    clock.now += 300  # NODE_CACHE_MAX_AGE_SECONDS as this cache was built
    proxy.clear_requests()
    list(kept.list_nodes())
    assert node_requests(proxy) == ["list"]


def test_a_failed_list_is_not_answered_from_what_was_kept(
    kube_stack: KubeStack, kept: LightkubeCluster, proxy: FaultProxy
) -> None:
    proxy.inject("GET", r"^/api/v1/nodes$", status=500)  # the catch-up (the first request) fails: a list
    proxy.inject("GET", r"^/api/v1/nodes$", status=503, times=None)  # and the list fails
    with pytest.raises(RetryableError):
        list(kept.list_nodes())
    proxy.clear_faults()
    proxy.clear_requests()
    assert list(kept.list_nodes()) == fresh_list(kube_stack)
    assert node_requests(proxy) == ["list"]  # nothing kept after a failed list: listed, not caught up
