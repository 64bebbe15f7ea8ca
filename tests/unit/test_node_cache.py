"""The kept node list (``adapters/node_cache.py``) on its own: what a list and the watch events after it leave is the
state a list at the last event would give (``tests/kube/test_node_cache.py`` checks it against the real apiserver)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from idleshare.adapters.node_cache import NodeCache


def node(name: str, ready: str = "True", version: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name}}
    if version is not None:
        meta["resourceVersion"] = version
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def listed(cache: NodeCache, nodes: list[dict[str, Any]], version: str = "10") -> None:
    cache.start_list()
    for n in nodes:
        cache.listed(n)
    cache.list_done(version)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_events_after_a_list_give_the_nodes_a_later_list_would() -> None:
    cache = NodeCache()
    listed(cache, [node("b"), node("c"), node("d")])
    cache.apply("MODIFIED", node("c", "False", "11"))
    cache.apply("DELETED", node("d", version="12"))
    cache.apply("ADDED", node("a", version="13"))
    assert list(cache.nodes()) == [node("a"), node("b"), node("c", "False")]  # by name, without resourceVersion
    assert cache.version == "13"
    cache.apply("BOOKMARK", {"metadata": {"resourceVersion": "20"}})
    assert cache.version == "20" and len(cache) == 3


def test_only_a_complete_recent_list_is_fresh() -> None:
    clock = Clock()
    cache = NodeCache(max_age_seconds=300, clock=clock)
    assert not cache.fresh()
    cache.start_list()
    cache.listed(node("a"))
    assert not cache.fresh()  # a list in progress (or one that failed half-way) is never offered
    cache.list_done("7")
    assert cache.fresh()
    clock.now = 299.9
    assert cache.fresh()
    clock.now = 300
    assert not cache.fresh()
    listed(cache, [node("a")], version="")  # a list without a version: nothing to resume from
    assert not cache.fresh() and len(cache) == 0


@given(
    st.lists(
        st.tuples(st.sampled_from(["ADDED", "MODIFIED", "DELETED"]), st.sampled_from("abcdef"), st.booleans()),
        max_size=30,
    )
)
def test_any_sequence_of_events_matches_the_state_it_describes(events: list[tuple[str, str, bool]]) -> None:
    cache = NodeCache()
    state = {name: node(name) for name in "ace"}
    listed(cache, [state[k] for k in sorted(state)])
    for i, (kind, name, ready) in enumerate(events):
        sent = node(name, "True" if ready else "False", str(100 + i))
        cache.apply(kind, sent)
        if kind == "DELETED":
            state.pop(name, None)
        else:
            state[name] = node(name, "True" if ready else "False")
    assert list(cache.nodes()) == [state[k] for k in sorted(state)]
