"""Fights named (issue 41, 5; docs/spec.md §3 "Fights"): with ``field_ownership: Take`` against a controller that
force-applies the same field, idleshare does not rewrite the ClusterQueue on every recompute. The object rewritten on
``timings.FIGHT_REWRITES`` recomputes in a row of one desired state is named with the other field manager, and
idleshare backs off until ``timings.FIGHT_RETRY_SECONDS`` after its last write, or its desired state changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from idleshare import timings
from idleshare.domain.cluster_settings import FieldOwnership
from idleshare.domain.fights import FIELD_MANAGER_FIGHT, track
from idleshare.service.recompute import Recomputer
from tests.builders import quota_body

CQ_A = ("ClusterQueue", "", "hyperpod-ns-a-clusterqueue")
N = timings.FIGHT_REWRITES


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def gpu_limit(kube: Any) -> str:
    for flavor in kube.objects[CQ_A]["spec"]["resourceGroups"][0]["flavors"]:
        for resource in flavor["resources"]:
            if resource["name"] == "nvidia.com/gpu":
                return str(resource.get("borrowingLimit"))
    raise AssertionError("no GPU in a's ClusterQueue")


def gitops_force_applies(kube: Any) -> None:
    """A controller that force-applies its own borrowingLimit to a's ClusterQueue (and is its field manager)."""
    for flavor in kube.objects[CQ_A]["spec"]["resourceGroups"][0]["flavors"]:
        for resource in flavor["resources"]:
            if resource["name"] == "nvidia.com/gpu":
                resource["borrowingLimit"] = "2"
    kube.objects[CQ_A]["metadata"]["managedFields"] = [
        {"manager": "idleshare", "operation": "Apply", "fieldsV1": {}},
        {"manager": "gitops", "operation": "Apply", "fieldsV1": {}},
        {"manager": "kueue", "operation": "Update", "subresource": "status", "fieldsV1": {}},
    ]


def test_a_controller_force_applying_the_same_field_is_named_and_idleshare_backs_off(cluster):
    # Given a Take cluster idleshare has written, and a clock
    store, kube, publisher, _ = cluster
    store.clusters["demo"] = store.clusters["demo"].with_settings(field_ownership=FieldOwnership.TAKE)
    clock = Clock()
    r = Recomputer(store, lambda c: kube, publisher, clock=clock)
    r.recompute("demo")
    ours = gpu_limit(kube)
    assert ours != "2"

    def round_(minutes: float = 5) -> tuple[Any, int]:
        """The controller rewrites, 5 minutes pass (the schedule), idleshare recomputes: (outcome, writes)."""
        gitops_force_applies(kube)
        clock.now += timedelta(minutes=minutes)
        before = kube.applies
        out = r.recompute("demo")
        return out, kube.applies - before

    # When the controller rewrites it before each of N-1 recomputes of the same desired state
    for _ in range(N - 1):
        out, writes = round_()
        # Then idleshare writes it back each time, and names nothing yet
        assert writes == 1 and gpu_limit(kube) == ours and not out.changed
        assert out.fights == [] and store.pools["demo"].apply_status == "Applied"
    # When it rewrites it once more (the N-th time in a row)
    out, writes = round_()
    # Then the fight is named, with the other field manager (not Kueue's status writer), and idleshare stops writing
    assert writes == 0 and gpu_limit(kube) == "2"
    pool = store.pools["demo"]
    assert pool.apply_status == "Conflict"
    assert f"{FIELD_MANAGER_FIGHT}: ClusterQueue/hyperpod-ns-a-clusterqueue: rewritten on {N} recomputes" in (
        pool.apply_message
    )
    assert "by gitops while" in pool.apply_message and "kueue" not in pool.apply_message
    assert [f.managers for f in out.fights] == [("gitops",)]
    # And later recomputes within the back-off write nothing, and still name it
    for _ in range(3):
        out, writes = round_()
        assert writes == 0 and len(out.fights) == 1 and store.pools["demo"].apply_status == "Conflict"
    # When FIGHT_RETRY_SECONDS have passed since idleshare's last write, it writes once more
    clock.now += timedelta(seconds=timings.FIGHT_RETRY_SECONDS)
    out, writes = round_()
    assert writes == 1 and gpu_limit(kube) == ours and out.fights[0].written
    # And when the controller has stopped, the write sticks: the fight is over, the status clean
    clock.now += timedelta(minutes=5)
    out = r.recompute("demo")
    assert out.fights == [] and store.pools["demo"].apply_status == "Applied" and store.pools["demo"].rewrites == {}


def test_a_new_desired_state_is_written_at_once_and_counts_afresh(cluster):
    store, kube, publisher, _ = cluster
    store.clusters["demo"] = store.clusters["demo"].with_settings(field_ownership=FieldOwnership.TAKE)
    r = Recomputer(store, lambda c: kube, publisher, clock=Clock())
    r.recompute("demo")
    for _ in range(N):
        gitops_force_applies(kube)
        out = r.recompute("demo")
    assert len(out.fights) == 1 and gpu_limit(kube) == "2"  # backed off
    # When a's quota changes (a new generation: idleshare's desired state moved)
    store.set_quotas("demo", [quota_body("a", 8, borrow=100, enabled=True), quota_body("b", 8, "Lend", enabled=True)])
    gitops_force_applies(kube)
    out = r.recompute("demo")
    # Then it is written at once, and nothing is named until it has been rewritten N times in a row again
    assert out.changed and gpu_limit(kube) == "8" and out.fights == [] and store.pools["demo"].rewrites == {}


def test_in_respect_mode_nothing_is_counted(cluster):
    # (idleshare's apply does not force: another manager's field is a conflict, ForeignFieldManager, never a fight)
    store, kube, _, r = cluster
    r.recompute("demo")
    for _ in range(N + 1):
        gitops_force_applies(kube)
        out = r.recompute("demo")
        assert out.fights == [] and store.pools["demo"].rewrites == {}


def test_the_count_reads_only_what_it_wrote():
    # an entry that does not read counts from 0; an object no longer rewritten leaves the state
    state = {"A": {"count": "x"}, "B": {"count": 1, "writtenAt": 0.0}, "C": {"count": 5, "writtenAt": 0.0}}
    tracked = track(state, {"A": ("m",), "B": ("m",)}, same_desired=True, now=10.0, threshold=3, retry_seconds=60)
    assert tracked.state == {
        "A": {"count": 1, "writtenAt": 10.0, "managers": ["m"]},
        "B": {"count": 2, "writtenAt": 10.0, "managers": ["m"]},
    }
    assert tracked.skip == frozenset() and tracked.fights == ()
    assert track(state, {"C": ()}, same_desired=False, now=10.0, threshold=3, retry_seconds=60).state == {}
