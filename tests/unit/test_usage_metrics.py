"""A usage sample's gauges: accelerators only, per resource (no team, no flavor: bounded), and no gauge for what was
not read; per team: one ``team usage`` log line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from idleshare import names
from idleshare.domain.usage import FlavorUsage, IdleWhilePending, TeamUsage, Unbound, Unreadable, UsageSample
from idleshare.runtime.metrics import emit_usage
from tests.fakes import emf_documents

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
GPU, CPU = "nvidia.com/gpu", "cpu"
DIMS = (names.METRIC_DIM_RESOURCE,)


def team(name: str, in_use: dict[str, int], borrowed: dict[str, int], pending: int | None) -> TeamUsage:
    return TeamUsage(
        team=name,
        namespace=f"ns-{name}",
        nominal={},
        borrowing_limit={},
        lending_limit={},
        in_use={"h100": in_use},
        borrowed={"h100": borrowed},
        pending=pending,
    )


def gauges(printed: str) -> dict[tuple[str, tuple[str, ...]], list[float]]:
    """(metric, its dimension values but the cluster's) -> values, of every EMF document printed."""
    found = {}
    for doc in emf_documents(printed):
        metric = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"]
        assert doc[names.METRIC_DIM_CLUSTER] == "c1" and doc["service"] == names.SERVICE
        assert set(doc) - {"_aws", metric, "service", names.METRIC_DIM_CLUSTER} <= set(DIMS)  # no team, no flavor
        found[metric, tuple(doc[d] for d in DIMS if d in doc)] = doc[metric]
    return found


def test_a_sample_gauges_accelerators_per_resource_logs_the_teams_and_leaves_a_gap_for_what_it_did_not_read(
    capsys, caplog
):
    # Given alpha using 6 GPUs (2 borrowed) and 1 pending workload, beta's pending count unreadable, a flavor of
    # 8 GPUs where beta waits while 2 are idle, and one admitted pod no node has taken for 15 minutes
    sample = UsageSample(
        cluster_id="c1",
        sampled_at=T0,
        flavors={
            "h100": {GPU: FlavorUsage(8, 8, 6, 2), CPU: FlavorUsage(96, 96, 10, 0)},
            "a100": {GPU: FlavorUsage(4, 4, 1, 0), "nvidia.com/mig-1g.10gb": FlavorUsage(7, 7, 0, 0)},
        },
        teams={
            "alpha": team("alpha", {GPU: 6, CPU: 10}, {GPU: 2, CPU: 0}, 1),
            "beta": team("beta", {}, {}, None),
        },
        idle_while_pending=[IdleWhilePending("beta", "h100", GPU, 2, "Pending: insufficient quota")],
        unbound=[Unbound("alpha", "h100", pods=1, workloads=1, since=T0 - timedelta(minutes=15))],
        unreadable=[Unreadable("ClusterQueue/beta", "status.pendingWorkloads", "not a number")],
    )
    capsys.readouterr()
    # When its metrics are emitted
    emit_usage(sample)
    printed = capsys.readouterr().out
    # Then each gauge is per resource, summed over the flavors (h100 2 idle + a100 3), MIG profiles folded; cpu has
    # none; idle while pending only where some is (the MIG profile has none: no gauge)
    mig = "nvidia.com/mig-*"
    assert gauges(printed) == {
        (names.METRIC_FLAVOR_IDLE, (GPU,)): [5.0],
        (names.METRIC_FLAVOR_BORROWED, (GPU,)): [2.0],
        (names.METRIC_FLAVOR_IDLE, (mig,)): [7.0],
        (names.METRIC_FLAVOR_BORROWED, (mig,)): [0.0],
        (names.METRIC_IDLE_WHILE_PENDING, (GPU,)): [2.0],
        (names.METRIC_UNBOUND_PODS, ()): [1.0],
        (names.METRIC_UNBOUND_PODS_OLDEST_SECONDS, ()): [900.0],
    }
    # and the teams are one log line: alpha's GPUs in use and borrowed, its pending count; beta's unread count left out
    (teams,) = [r.teams for r in caplog.records if r.getMessage() == "team usage"]
    assert teams == [
        {"team": "alpha", "pending": 1, "inUseBorrowed": {f"h100/{GPU}": ["6", "2"]}},
        {"team": "beta"},
    ]
    # and the warnings name who waits, the unplaced pod and the value not read
    by_message = {record.getMessage(): record for record in caplog.records}
    assert by_message["accelerators idle while work is pending"].idleWhilePending[0]["team"] == "beta"
    assert by_message["admitted pods no node has taken"].oldestSeconds == 900
    unread = by_message["usage values not read: no gauge for them (a gap, not zero)"].unreadable
    assert unread[0]["object"] == "ClusterQueue/beta"


def test_pods_not_read_have_no_gauge_and_a_warning_naming_why(capsys, caplog):
    sample = UsageSample("c1", T0, {}, {}, [], unbound=None, unbound_error="pods is forbidden")
    capsys.readouterr()
    emit_usage(sample)
    printed = capsys.readouterr().out
    assert gauges(printed) == {}
    (warning,) = caplog.records
    assert warning.getMessage() == "unbound pods not read" and warning.error == "pods is forbidden"
