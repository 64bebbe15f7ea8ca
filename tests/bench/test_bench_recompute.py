"""The recompute benchmark at a tiny size on DynamoDB Local and the real kube-apiserver: Given a governed
cluster, When it is recomputed, then recomputed again with nothing changed, Then the second recompute
writes nothing to DynamoDB or Kubernetes — and the benchmark's counters (the recording proxy, the botocore
hook) see the writes the first made; a node change writes the Cohort only on the Quota basis (the default), the
Cohort and the borrowers' ClusterQueues on the Pool basis. No figure is timed."""

from __future__ import annotations

import pytest

from idleshare.domain.model import BorrowLimitBasis
from tests.bench import bench_recompute
from tests.integration.conftest import (  # noqa: F401 - fixtures
    aws_fake_env,
    ddb_resource,
    ddb_table,
    dynamodb_local,
    dynamodb_local_server,
)

pytestmark = pytest.mark.integration


def test_a_no_op_recompute_writes_nothing_and_the_counters_see_the_first_ones(ddb_table, kube_stack, kube, monkeypatch):  # noqa: F811
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    # Given 100 synthetic nodes (one of them being deleted) in the real apiserver and 5 teams' quotas,
    # When measured (first run, 1 node changed, 2 no-ops; timed, then counted through the proxy)
    m = bench_recompute.measure(100, table=ddb_table, stack=kube_stack, n_teams=5, floor_runs=1)

    # Then the nodes are all there, the one being deleted held by its finalizer, and the floor was measured
    nodes = kube.objects("Node")
    assert len(nodes) == 100 and sum(1 for n in nodes if n["metadata"].get("deletionTimestamp")) == 1
    assert m["seed_ms"] > 0 and m["floor_kubectl"] > 0 and m["kubectl_requests"] >= 1
    # and the first run wrote the pool and created the Kueue objects, seen by both counters
    initial = m["initial"]
    assert initial["ddb_writes"] >= 1 and initial["ddb_by_op"].get("Query", 0) >= 1
    assert initial["kube_writes"] >= 5 and initial["kube_by_method"]["GET"] >= 1
    # the changed node made a new generation: stored, and on the Quota basis (the default) the Cohort alone
    # re-applied (the unallocated capacity moved; every team's limit is a percentage of its own quota)
    assert m["basis"] == "Quota" and m["changed"]["ddb_writes"] >= 1
    assert m["changed"]["kube_written"] == {"cohorts": 1} and m["changed"]["kube_writes"] == 1
    assert m["generation"] == 2
    # and the no-op recomputes read everything but wrote nothing anywhere
    noop = m["noop"]
    assert noop["ddb"] >= 1 and noop["kube"] >= 1
    assert noop["ddb_writes"] == 0 and noop["kube_writes"] == 0 and m["noop_writes"] == 0
    assert all(m[k]["ms"] > 0 and m[k]["ms_proxy"] > 0 for k in ("initial", "changed", "noop"))

    # and the summary rows check exactly that
    rows = {r.what: r for r in bench_recompute.rows(m)}
    assert rows["no-op 100: k8s req / writes"].ok is True
    assert rows["no-op 100: ddb calls / writes"].ok is True
    assert rows["no-op 100: k8s req / writes"].ratio == pytest.approx(noop["kube"] / m["kubectl_requests"])
    assert rows["1 node changed 100 (Quota basis): objects written"].ok is True
    assert all(r.ok is None for r in rows.values() if "no-op" not in r.what and "objects written" not in r.what)


def test_on_the_pool_basis_a_node_change_rewrites_the_borrowers_cluster_queues_too(ddb_table, kube_stack, monkeypatch):  # noqa: F811
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    # Given the same 100 nodes and 5 teams governed on the Pool basis, When measured
    m = bench_recompute.measure(
        100, table=ddb_table, stack=kube_stack, n_teams=5, floor_runs=1, basis=BorrowLimitBasis.POOL
    )
    # Then the node change rewrote the Cohort and at least one borrower's ClusterQueue (its pool moved), nothing else
    written = m["changed"]["kube_written"]
    assert m["basis"] == "Pool" and written["cohorts"] == 1 and written.get("clusterqueues", 0) >= 1
    assert set(written) == {"cohorts", "clusterqueues"} and m["changed"]["kube_writes"] == sum(written.values())
    # and the summary row reports them without a target (the Cohort-only target is the Quota basis's)
    row = {r.what: r for r in bench_recompute.rows(m)}["1 node changed 100 (Pool basis): objects written"]
    assert row.ok is None and row.value.startswith("clusterqueues ")


def test_the_rows_flag_a_no_op_that_writes() -> None:
    # Given a measurement whose no-op recompute wrote to DynamoDB, and whose node change wrote a ClusterQueue
    run = {"ms": 10.0, "kube": 3, "kube_writes": 0, "kube_by_method": {}, "ddb": 4, "ddb_writes": 1, "ddb_by_op": {}}
    m = {
        "n": 5000,
        "basis": "Quota",
        "seed_ms": 1000.0,
        "floor_kubectl": 5.0,
        "kubectl_requests": 2,
        "floor_list": 4.0,
        "floor_json": 2.0,
        "initial": run,
        "changed": run | {"kube_written": {"clusterqueues": 1, "cohorts": 1}},
        "noop": run | {"kube_writes": 2},
    }
    # When summarised, Then both no-op rows miss their target, and the time is a ratio to kubectl's
    rows = {r.what: r for r in bench_recompute.rows(m)}
    assert rows["no-op 5k: ddb calls / writes"].ok is False
    assert rows["no-op 5k: k8s req / writes"].ok is False
    assert rows["1 node changed 5k: k8s req / writes"].ok is None
    assert rows["no-op 5k: time"].ratio == pytest.approx(2.0)
    # and at 5k nodes each time has its target on the Quota basis: first run <= 2x kubectl, one node changed
    # <= 0.35x (it writes the Cohort only), no-op <= 0.35x; 10 ms / 5 ms = 2x misses both
    assert rows["first run 5k: time"].ok is True and rows["first run 5k: time"].target == "<= 2x"
    assert rows["1 node changed 5k: time"].ok is False and rows["1 node changed 5k: time"].target == "<= 0.35x"
    assert rows["no-op 5k: time"].ok is False and rows["no-op 5k: time"].target == "<= 0.35x"
    assert rows["no-op 5k: k8s req / writes"].ratio == pytest.approx(1.5)
    # and a node change that wrote a ClusterQueue besides the Cohort misses "the Cohort only"
    written = rows["1 node changed 5k (Quota basis): objects written"]
    assert (written.value, written.target, written.ok) == ("clusterqueues 1, cohorts 1", "the Cohort only", False)
    # Given the Cohort alone written, Then the row meets it
    cohort_only = m | {"changed": run | {"kube_written": {"cohorts": 1}}}
    assert {r.what: r for r in bench_recompute.rows(cohort_only)}[written.what].ok is True
    # and on the Pool basis one node changed keeps the former target, <= 1x, and the objects row has none
    pool = {r.what: r for r in bench_recompute.rows(m | {"basis": "Pool"})}
    assert pool["1 node changed 5k: time"].target == "<= 1x" and pool["1 node changed 5k: time"].ok is False
    assert pool["1 node changed 5k (Pool basis): objects written"].ok is None
