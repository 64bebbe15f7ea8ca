"""A warm recompute's nodes: its last full list, kept and brought up to date by a watch from that list's version.

At 100,000 nodes a full list is ~1 GB of JSON through one function: the API server's serialization and the client's
decode dominate every recompute, and an isolated cordon could not reach Kueue in seconds. A Lambda container that
stays warm keeps its adapter (``runtime/wiring.py``: one per cluster), so the adapter keeps the last list here — each
node's projection (what ``parse/nodes.py`` reads), msgpack-encoded (about a sixth of the dicts' memory) — with the
list's ``resourceVersion``. The next recompute asks the API server only for what changed since: one watch request
from that version (:meth:`~idleshare.adapters.kube.LightkubeCluster.list_nodes`), whose backlog the server sends at
once from its watch cache; the stream going quiet for :data:`~idleshare.timings.NODE_CATCH_UP_IDLE_SECONDS` ends it.

Why that is the same as a list: a watch from version V delivers every change after V, in order, each node's whole
state (ADDED / MODIFIED / DELETED); applied to the state at V it gives the state at the last event. The change that
triggered this recompute reached the node watcher through the same watch cache, so it is in the backlog. A change made
while the stream is read, or one that arrives after a quiet gap, is delivered to the next recompute (which resumes
from the last version applied here): the router gives every change a trailing recompute after its coalescing window,
so nothing is lost — at worst seen one recompute later, as by a list sent a moment earlier.

When the list is read again: the first recompute of a container (nothing kept), any failure of the watch (an expired
version — 410 Gone —, a timeout before the server answered, an ERROR event, anything else), and at least every
:data:`~idleshare.timings.NODE_CACHE_MAX_AGE_SECONDS` (the scheduled recompute's period), so what is kept never drifts
for long whatever happens. A failure to read stays a failure: a list that fails raises as it always did; what is kept
is never offered as the cluster's state after its list or its catch-up failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from idleshare import timings


class NodeCache:
    """One cluster's nodes as of :attr:`version` (see the module docstring). Not thread-safe: one recompute at a time
    uses an adapter's node list (the batch recomputes its clusters one after the other)."""

    def __init__(
        self,
        *,
        max_age_seconds: float = timings.NODE_CACHE_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        import msgspec

        self._encode = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder().decode
        self._max_age = max_age_seconds
        self._clock = clock
        self._nodes: dict[str, bytes] = {}
        self._order: list[str] | None = None  # the names in list order (by name); None: to sort again
        self.version = ""
        """The ``resourceVersion`` the kept nodes are at; "" while nothing complete is kept."""
        self._listed_at = 0.0

    # -- a full list -------------------------------------------------------------------------------------------------

    def start_list(self) -> None:
        """A full list begins: what was kept is dropped (and stays dropped unless the list completes)."""
        self.drop()

    def listed(self, node: Mapping[str, Any]) -> None:
        """One node of the list in progress (as :meth:`LightkubeCluster.list_nodes` yields it)."""
        self._nodes[_name(node)] = self._encode(node)

    def list_done(self, version: str) -> None:
        """The list ended, at ``version`` (its ``metadata.resourceVersion``): what it gave is kept."""
        if not version:  # no version to resume from: nothing can be brought up to date
            self.drop()
            return
        self.version = version
        self._listed_at = self._clock()
        self._order = None

    # -- a catch-up ----------------------------------------------------------------------------------------------------

    def fresh(self) -> bool:
        """Something complete is kept, listed less than ``max_age_seconds`` ago."""
        return bool(self.version) and self._clock() - self._listed_at < self._max_age

    def apply(self, event_type: str, node: Mapping[str, Any]) -> None:
        """One watch event (``ADDED`` / ``MODIFIED`` / ``DELETED`` / ``BOOKMARK``, its node as ``watch_nodes`` gives
        it: the projection plus ``metadata.resourceVersion``)."""
        meta = node.get("metadata") or {}
        version = str(meta.get("resourceVersion") or "")
        if event_type != "BOOKMARK":
            name = _name(node)
            if event_type == "DELETED":
                self._nodes.pop(name, None)
                self._order = None
            else:
                if name not in self._nodes:
                    self._order = None
                kept = dict(node)
                kept["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}  # as a list gives it
                self._nodes[name] = self._encode(kept)
        if version:
            self.version = version

    def nodes(self) -> Iterator[dict[str, Any]]:
        """The kept nodes, by name (a list's order), each a fresh dict."""
        if self._order is None:
            self._order = sorted(self._nodes)
        decode, kept = self._decode, self._nodes
        for name in self._order:
            yield decode(kept[name])

    def __len__(self) -> int:
        return len(self._nodes)

    def drop(self) -> None:
        self._nodes = {}
        self._order = None
        self.version = ""


def _name(node: Mapping[str, Any]) -> str:
    meta = node.get("metadata") or {}
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
