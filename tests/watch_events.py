"""What the node watcher's tests feed it: Nodes as watch events carry them, a cordon event, a saved bookmark, and a
bus that does not answer."""

from __future__ import annotations

import threading
from typing import Any

from idleshare.adapters.ports import WatchBookmark
from idleshare.service import watcher as w
from tests.kube.fixtures import make_node


def watch_node(name: str, rv: str, **kw: Any) -> dict[str, Any]:
    """A Node as a watch event carries it: ``make_node``'s, at resourceVersion ``rv``."""
    node = make_node(name, **kw)
    node["metadata"]["resourceVersion"] = rv
    return node


def cordon(name: str = "a", rv: str = "12") -> tuple[str, dict[str, Any]]:
    """The watch event of Node ``name`` cordoned at resourceVersion ``rv``."""
    return ("MODIFIED", watch_node(name, rv, unschedulable=True))


def saved_bookmark(nodes: list[dict[str, Any]], rv: str) -> WatchBookmark:
    """The bookmark of watcher ``c1`` at ``rv``, holding the views of ``nodes``."""
    return WatchBookmark("c1", 1, rv, {n["metadata"]["name"]: w.node_view(n) for n in nodes})


class StuckPublisher:
    """PutEvents that does not answer (until ``release``): the publisher thread is stuck in its call."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def publish_batch(self, events: Any) -> int:
        self.calls += 1
        self.release.wait(10)
        return 1
