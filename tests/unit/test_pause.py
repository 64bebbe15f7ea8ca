"""Pausing and resuming a cluster (docs/spec.md §3, "Pause"): the admin API on the real store (moto), the recompute
of a paused cluster (reads nothing from the cluster, writes nothing to it, no generation, the skip counted) and the
recompute a resume requests at once."""

from __future__ import annotations

from typing import Any

import pytest

from idleshare import names
from idleshare.adapters.ports import ClusterRecord, PauseEntry, PauseState
from idleshare.adapters.store import DynamoStore
from idleshare.errors import ConflictError, PermanentError
from idleshare.parse.requests import REASON_MAX
from idleshare.service.admin import Admin
from idleshare.service.recompute import PAUSED, Recomputer
from idleshare.table import PAUSE_LOG_MAX
from tests.admin_api import World, call
from tests.builders import k8s_node, quota_body
from tests.fakes import FakePublisher, FakeStore

ADMIN = "arn:aws:iam::111122223333:user/admin"  # the caller tests.builders.proxy_event signs as


def _recalcs(world: World) -> list[dict[str, Any]]:
    return [d for t, d in world.publisher.events if t == names.DT_RECALC_REQUESTED]


def test_pause_is_recorded_with_who_when_why_and_shown_in_pool_and_history(world: World) -> None:
    world.recompute()
    paused = call("POST", "/clusters/demo/pause", {"reason": "GPU maintenance"})
    assert paused.status == 200, paused.body
    assert paused.body["paused"] is True and paused.body["changed"] is True
    assert paused.body["by"] == ADMIN and paused.body["reason"] == "GPU maintenance" and paused.body["since"]
    pool = call("GET", "/clusters/demo/pool").body
    assert pool["pause"]["paused"] is True and pool["pause"]["by"] == ADMIN
    history = call("GET", "/clusters/demo/history").body
    assert [(e["action"], e["reason"]) for e in history["pauses"]] == [("Paused", "GPU maintenance")]
    assert _recalcs(world) == []  # a pause requests nothing


def test_pausing_a_paused_cluster_answers_its_state_and_writes_nothing(world: World) -> None:
    call("POST", "/clusters/demo/pause", {"reason": "first"})
    before = world.items()
    again = call("POST", "/clusters/demo/pause", {"reason": "second"})
    assert again.status == 200 and again.body["changed"] is False and again.body["reason"] == "first"
    assert world.items() == before
    resumed_twice = [call("POST", "/clusters/demo/resume").body["changed"] for _ in range(2)]
    assert resumed_twice == [True, False]
    assert len(_recalcs(world)) == 1  # only the resume that changed something requested a recompute


def test_a_paused_recompute_writes_nothing_and_counts_the_skip(world: World) -> None:
    first = world.recompute()
    call("POST", "/clusters/demo/pause")
    world.kube.nodes.append(k8s_node("p5-new"))  # the cluster changes while paused
    assert call("POST", "/clusters/demo/compute-quotas", quota_body("ml")).status == 201
    writes = (world.kube.applies, world.kube.deletes, dict(world.kube.objects))
    pool_before = world.store.get_pool("demo")
    outcome = world.recompute()
    assert outcome.dropped == PAUSED and not outcome.changed and outcome.generation == first.generation
    assert (world.kube.applies, world.kube.deletes, world.kube.objects) == writes
    assert world.store.get_pool("demo") == pool_before
    state = call("GET", "/clusters/demo/pool").body["pause"]
    assert state["skippedRecomputes"] == 1 and state["lastSkippedAt"]


def test_resume_requests_a_recompute_at_once_and_it_runs(world: World) -> None:
    first = world.recompute()
    call("POST", "/clusters/demo/pause", {"reason": "hold"})
    world.kube.nodes.append(k8s_node("p5-new"))
    world.recompute()
    resumed = call("POST", "/clusters/demo/resume", {"reason": "done"})
    assert resumed.status == 200 and resumed.body["paused"] is False and resumed.body["reason"] == "done"
    [request] = _recalcs(world)
    assert request == {
        "cluster": "demo",
        "requestId": resumed.body["requestId"],
        "reason": "resumed through the admin API",
    }
    recomputer = Recomputer(world.store, lambda c: world.kube, FakePublisher())
    outcome = recomputer.recompute("demo", request_id=request["requestId"])
    assert outcome.changed and outcome.generation == first.generation + 1
    receipt = call("GET", f"/clusters/demo/recalculations/{request['requestId']}").body
    assert receipt["status"] == "Done" and receipt["generation"] == outcome.generation
    actions = [e["action"] for e in call("GET", "/clusters/demo/history").body["pauses"]]
    assert actions == ["Resumed", "Paused"]


def test_the_receipt_of_a_recalculation_while_paused_says_skipped(world: World) -> None:
    world.recompute()
    call("POST", "/clusters/demo/pause")
    Recomputer(world.store, lambda c: world.kube, FakePublisher()).recompute("demo", request_id="r-1")
    receipt = call("GET", "/clusters/demo/recalculations/r-1").body
    assert receipt["status"] == "Done" and receipt["changed"] is False and "paused" in receipt["message"]


def test_unknown_cluster_is_404_and_stores_nothing(world: World) -> None:
    before = world.items()
    for action in ("pause", "resume"):
        reply = call("POST", f"/clusters/nope/{action}", {"reason": "x"})
        assert reply.status == 404 and "nope" in reply.body["message"]
    assert world.items() == before


def test_bad_reason_is_422_naming_the_field_and_stores_nothing(world: World) -> None:
    before = world.items()
    for body in ({"reason": "x" * (REASON_MAX + 1)}, {"reason": 7}, {"why": "typo"}):
        reply = call("POST", "/clusters/demo/pause", body)
        assert reply.status == 422, (body, reply.body)
        assert [e["field"] for e in reply.body["errors"]] == [next(iter(body))]
    assert world.items() == before
    assert world.store.get_pause("demo") is None


def test_the_store_keeps_the_last_entries_only_and_refuses_a_lost_race(world: World) -> None:
    entries = tuple(PauseEntry("Paused" if i % 2 else "Resumed", f"t{i}", ADMIN) for i in range(PAUSE_LOG_MAX + 5))
    world.store.set_pause(PauseState("demo", paused=True, log=entries), was_paused=False)
    stored = world.store.get_pause("demo")
    assert stored is not None and stored.log == entries[-PAUSE_LOG_MAX:]
    with pytest.raises(ConflictError, match="paused or resumed meanwhile"):
        world.store.set_pause(PauseState("demo", paused=True), was_paused=False)
    world.store.set_pause(PauseState("demo", paused=False), was_paused=True)
    world.store.record_paused_skip("demo", "t")  # resumed: nothing counted
    resumed = world.store.get_pause("demo")
    assert resumed is not None and not resumed.paused and resumed.skipped == 0


# ------------------------------------------------------------------------------- the service over the fakes
def test_a_resume_without_a_bus_is_refused_before_anything_is_stored() -> None:
    store = FakeStore([ClusterRecord("demo", "demo-eks")])
    Admin(store, None).pause("demo", None, ADMIN)  # a pause publishes nothing: a read-only wiring may pause
    writes = store.writes
    with pytest.raises(PermanentError, match="no event bus"):
        Admin(store, None).resume("demo", None, ADMIN)
    paused = store.get_pause("demo")
    assert store.writes == writes and paused is not None and paused.paused


def test_a_pause_that_loses_a_race_is_a_409_and_the_winner_stands(world: World) -> None:
    class Racing(DynamoStore):
        def set_pause(self, state: PauseState, *, was_paused: bool) -> None:
            world.store.set_pause(PauseState("demo", True, "t0", "arn:other", "theirs"), was_paused=False)
            super().set_pause(state, was_paused=was_paused)

    world.deps.store = Racing(world.table)
    reply = call("POST", "/clusters/demo/pause", {"reason": "mine"})
    assert reply.status == 409 and "meanwhile" in reply.body["message"]
    stored = world.store.get_pause("demo")
    assert stored is not None and (stored.by, stored.reason) == ("arn:other", "theirs")
