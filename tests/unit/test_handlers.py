"""Router and recompute handlers with in-memory fakes: every inbound event type, malformed ones, recompute rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devkit.sqs import sqs_record
from idleshare import names
from idleshare.domain.model import BorrowLimitBasis
from idleshare.errors import ClusterReadError, RetryableError
from idleshare.runtime import wiring
from idleshare.service.recompute import Outcome
from tests.builders import k8s_node as node  # the name the recompute tests import it by
from tests.builders import quota_body
from tests.fakes import EXPECTED_CLUSTERS, FakeKube, FakeStore, cq, emf_documents, gpu_limit
from tests.fakes import ROUTER_CONTEXT as CONTEXT

EVENTS = Path(__file__).parents[2] / "events"
P5, GPU = "ml.p5.48xlarge", "nvidia.com/gpu"


def load_event(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


INBOUND = sorted(p.name for p in (EVENTS / "inbound").glob("*.json"))


def test_every_inbound_event_file_has_an_expectation():
    assert set(INBOUND) == set(EXPECTED_CLUSTERS)


def route(event: dict) -> dict:
    from idleshare.handlers.router import handler  # not at collection: it reads the environment

    return handler(event, CONTEXT)


@pytest.mark.parametrize("name", INBOUND)
def test_router_enqueues_one_recompute_per_concerned_cluster(router_deps, name):
    assert route(load_event(f"inbound/{name}"))["enqueued"] == EXPECTED_CLUSTERS[name]
    assert [c for c, _ in router_deps.queue.sent] == EXPECTED_CLUSTERS[name]


MALFORMED = [f"malformed/{p.name}" for p in sorted((EVENTS / "malformed").glob("*.json"))]


@pytest.mark.parametrize("path", [*MALFORMED, "inbound/hyperpod-node-health-event.json"])
def test_a_malformed_or_unknown_cluster_event_is_dropped_with_its_reason(router_deps, logs, path):
    event = load_event(path)
    if path.startswith("inbound/"):  # a well-formed event naming a cluster nobody registered
        event["detail"]["ClusterArn"] = "arn:aws:sagemaker:us-west-2:111122223333:cluster/zzzz9999zzzz"
    why = "Malformed" if path in MALFORMED else "UnknownCluster"
    assert route(event) == {"enqueued": [], "dropped": why}
    assert router_deps.queue.sent == [] and router_deps.store.writes == 0
    logged = json.loads(logs.getvalue().splitlines()[-1])
    if why == "Malformed":  # the reason is the parser's words, naming the field
        assert logged["message"] == "dropped malformed event" and logged["reason"]
    else:
        assert (logged["message"], logged["reason"]) == ("dropped event", "UnknownCluster")


def test_a_cloudtrail_call_from_an_old_archive_is_an_unknown_event_dropped_and_counted(router_deps, logs, capsys):
    # No rule delivers SageMaker's CloudTrail calls (idleshare's quotas are its own); an archive replay of one
    # is dropped as Malformed and counted, never a failed invocation (which would land in the router's DLQ)
    event = load_event("malformed/cloudtrail-create-compute-quota.json")
    assert event["detail-type"] == "AWS API Call via CloudTrail"
    assert route(event) == {"enqueued": [], "dropped": "Malformed"}
    assert router_deps.queue.sent == [] and router_deps.store.writes == 0
    logged = json.loads(logs.getvalue().splitlines()[-1])
    assert logged["message"] == "dropped malformed event" and "unsupported detail-type" in logged["reason"]
    assert logged["detail_type"] == "AWS API Call via CloudTrail"
    metrics = [
        (m["Name"], doc[m["Name"]])
        for doc in emf_documents(capsys.readouterr().out)
        for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    ]
    assert metrics == [(names.METRIC_EVENTS_DROPPED, [1.0])]


# -- recompute ------------------------------------------------------------------------------------


def test_first_recompute_persists_generation_1_applies_and_publishes_then_the_same_state_writes_nothing(cluster):
    store, kube, publisher, r = cluster
    out = r.recompute("demo")
    assert (out.generation, out.changed) == (1, True)
    assert store.pools["demo"].apply_status == "Applied"
    # a may borrow 50% of its own quota (the Quota basis, the default): 50% x 8 = 4
    assert gpu_limit(cq(kube, "a")) == "4"
    # and the Cohort holds the unallocated GPUs: 4 nodes x 8 = 32 - a's 8 - b's 8 = 16
    assert gpu_limit(cohort(kube), "nominalQuota") == "16"
    assert [(kind, detail["generation"]) for kind, detail in publisher.events] == [("Lendable Pool Recomputed", 1)]
    writes, applies = store.writes, kube.applies
    out = r.recompute("demo")
    assert (out.generation, out.changed) == (1, False)
    assert (store.writes, kube.applies, len(publisher.events)) == (writes, applies, 1)


def cohort(kube: FakeKube) -> dict:
    """The Cohort idleshare applied (the cluster record's default name)."""
    return kube.objects[("Cohort", "", "shared-pool")]


def recording_applies(kube: FakeKube) -> list[tuple[str, str]]:
    """From now on, the (kind, name) of every object ``kube`` is asked to apply, in order."""
    applied: list[tuple[str, str]] = []
    apply = kube.apply

    def record(obj: dict, *, force: bool = False) -> None:
        applied.append((obj["kind"], obj["metadata"]["name"]))
        apply(obj, force=force)

    kube.apply = record  # type: ignore[method-assign]
    return applied


def test_a_node_not_ready_shrinks_the_cohort_only_and_a_removed_team_loses_its_objects_in_the_cluster(cluster):
    # Given generation 1 on the Quota basis (the default): a may borrow 4 (50% x its 8), the Cohort holds 16
    store, kube, _, r = cluster
    r.recompute("demo")
    applied = recording_applies(kube)
    # When a node goes NotReady
    kube.nodes[0] = node("p5-0", ready="False")
    out = r.recompute("demo")
    assert out.generation == 2 and out.changes["excludedNodes"]["sample"] == {"p5-0": "NotReady"}
    # Then only the Cohort is rewritten: 3 nodes x 8 = 24 - a's 8 - b's 8 = 8 unallocated GPUs;
    # a's borrowing limit stays 50% x 8 = 4 (Kueue admits only what is free in the Cohort)
    assert applied == [("Cohort", "shared-pool")] and out.applied == 1
    assert gpu_limit(cohort(kube), "nominalQuota") == "8"
    assert gpu_limit(cq(kube, "a")) == "4"
    assert len(store.history["demo"]) == 2
    # a team whose quota is removed loses its Kueue objects, but not its namespace
    store.set_quotas("demo", [quota_body("a", 8, enabled=True)])
    assert r.recompute("demo").deleted == 2
    assert ("ClusterQueue", "", "hyperpod-ns-b-clusterqueue") not in kube.objects
    assert ("Namespace", "", "hyperpod-ns-b") in kube.objects


def test_on_the_pool_basis_a_node_not_ready_rewrites_the_cohort_and_the_borrowers_cluster_queue(cluster):
    # Given the same cluster on the Pool basis: a's pool = 16 unallocated + b's 8 lent = 24, its limit 50% = 12
    store, kube, _, r = cluster
    store.clusters["demo"] = store.clusters["demo"].with_settings(borrow_limit_basis=BorrowLimitBasis.POOL)
    r.recompute("demo")
    assert gpu_limit(cq(kube, "a")) == "12"
    applied = recording_applies(kube)
    # When a node goes NotReady
    kube.nodes[0] = node("p5-0", ready="False")
    r.recompute("demo")
    # Then the Cohort (8 unallocated) and a's ClusterQueue are rewritten: pool 8 + 8 lent = 16, 50% = 8;
    # b lends and never borrows (limit 0 either way): its ClusterQueue is not written
    assert applied == [("Cohort", "shared-pool"), ("ClusterQueue", "hyperpod-ns-a-clusterqueue")]
    assert gpu_limit(cohort(kube), "nominalQuota") == "8"
    assert gpu_limit(cq(kube, "a")) == "8"
    assert store.pools["demo"].pool["teams"]["a"]["why"][P5][GPU]["basis"] == "Pool"


def test_a_failure_to_read_the_cluster_keeps_the_last_pool_and_raises_for_retry(cluster):
    store, kube, _, r = cluster
    r.recompute("demo")
    before = store.pools["demo"]
    kube.down = True
    with pytest.raises(ClusterReadError):
        r.recompute("demo")
    after = store.pools["demo"]
    assert (after.generation, after.pool) == (before.generation, before.pool)
    assert "connection refused" in after.read_failure
    kube.down = False
    r.recompute("demo")
    assert store.pools["demo"].read_failure == ""


def _sqs_record(i: int, cluster: str = "demo") -> dict:
    """The record of a windowed recompute request for ``cluster``."""
    body = json.dumps({"cluster": cluster, "reason": "Node Changed"})
    message = {"MessageId": f"m{i}", "ReceiptHandle": "h", "Body": body, "Attributes": {"MessageGroupId": cluster}}
    return sqs_record(message, "arn:aws:sqs:us-west-2:1:q.fifo")


def run_handler(cluster, records, kube_for=None):
    """The recompute Lambda on ``records``, with the cluster fixture's fakes installed."""
    from idleshare.handlers import recompute as handler_module

    store, kube, publisher, _ = cluster
    wiring.install(wiring.Dependencies(store=store, publisher=publisher, kube_for=kube_for or (lambda c: kube)))
    try:
        return handler_module.handler({"Records": records}, CONTEXT)
    finally:
        wiring.install(None)


@pytest.mark.parametrize("why", ["invalid stored policy", "objects Kueue refuses"])
def test_a_permanent_failure_is_recorded_alarmed_and_not_retried(cluster, monkeypatch, capsys, why):
    store, kube, publisher, recomputer = cluster
    recomputer.recompute("demo")  # a pool to keep
    applied, published = dict(kube.objects), len(publisher.events)
    if why == "invalid stored policy":
        quota = next(iter(store.quotas["demo"].values()))
        quota.body["ComputeQuotaConfig"]["ResourceSharingConfig"]["BorrowLimit"] = -1
    else:
        monkeypatch.setattr("idleshare.service.recompute.webhook_violations", lambda m, *_: ["spec.x: refused"])
    out = run_handler(cluster, [_sqs_record(i) for i in range(3)])
    assert out == {"batchItemFailures": []}  # consumed: retrying cannot help
    assert store.pools["demo"].read_failure  # recorded on the pool (GET /pool shows it), the pool kept
    lines = capsys.readouterr().out.splitlines()
    metrics = [json.loads(line) for line in lines if names.METRIC_PERMANENT_FAILURES in line]
    assert [m[names.METRIC_PERMANENT_FAILURES] for m in metrics] == [[1.0]]  # once for the batch of three
    assert len(publisher.events) == published and kube.objects == applied


def test_a_transient_failure_is_retried(cluster):
    def unreachable(c):
        raise RetryableError("API server unreachable")

    out = run_handler(cluster, [_sqs_record(0), _sqs_record(1, cluster="other")], kube_for=unreachable)
    assert out == {"batchItemFailures": [{"itemIdentifier": "m0"}]}  # SQS delivers it again (DLQ after N)


def test_clusters_from_the_cdk_config_are_registered_once():
    from idleshare.runtime.env import parse_clusters
    from idleshare.service.registry import register_clusters

    store = FakeStore()
    raw = json.dumps([{"id": "demo", "eks_cluster_name": "demo-eks", "hyperpod_cluster_arn": None}])
    assert register_clusters(store, parse_clusters(raw)) == ["demo"]
    assert store.find_cluster(eks_cluster_name="demo-eks").settings.namespace_prefix == "hyperpod-ns-"
    calls = []
    store.put_cluster = calls.append  # a second deploy with the same config writes nothing
    assert register_clusters(store, parse_clusters(raw)) == [] and calls == []


def test_building_the_dependencies_writes_nothing(monkeypatch):
    # a cold start (the router's included) registers no cluster: the registrar custom resource does, at deploy
    monkeypatch.setenv(names.ENV_TABLE_NAME, "idleshare-state")
    monkeypatch.setenv(names.ENV_CLUSTERS, json.dumps([{"id": "demo", "eks_cluster_name": "demo-eks"}]))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    written = []
    monkeypatch.setattr("idleshare.adapters.store.DynamoStore.put_cluster", lambda self, c: written.append(c))
    wiring.install(None)
    try:
        wiring.dependencies()
    finally:
        wiring.install(None)
    assert written == []


def emitted_metrics(capsys, outcome) -> list[dict]:
    """The EMF documents the recompute's metrics print for ``outcome``."""
    from idleshare.runtime.metrics import emit_recompute  # not at collection: it reads the environment

    emit_recompute(outcome)
    return emf_documents(capsys.readouterr().out)


@pytest.mark.parametrize("service_env", [None, "idleshare"], ids=["no POWERTOOLS_SERVICE_NAME", "as deployed"])
def test_every_metric_carries_exactly_the_dimensions_the_dashboard_and_alarms_query(monkeypatch, capsys, service_env):
    """The producer (EMF from the recompute) and the consumer (SCHEMA() in the CDK app) agree, or no alarm matches."""
    from idleshare.domain.fights import Fight
    from idleshare.domain.model import Snapshot
    from idleshare.domain.pool import compute
    from infra.constructs.observability import EXCLUDED_DIMS, GAUGE_DIMS
    from tests.builders import node as domain_node

    if service_env is None:
        monkeypatch.delenv("POWERTOOLS_SERVICE_NAME", raising=False)
    else:  # infra/constructs/functions.py sets it on every function
        monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", service_env)
    result = compute(Snapshot(nodes=(domain_node("n1"), domain_node("n2", ready=False))))
    conflicts = ["ClusterQueue/a: .spec x owned by gitops"]  # objects left to another field manager: counted
    foreign_objects = ["WorkloadPriorityClass/high-priority", "ClusterQueue/b"]  # not idleshare's: counted
    refused = [("NamespaceTerminating", "LocalQueue/ns-g/lq-g: HTTP 403: being terminated")]  # counted, with
    waiting = ["LocalQueue/ns-b/lq-b (needs Namespace/ns-b)"]  # what waits for a refused object
    fights = [Fight("ClusterQueue/a", 3, ("gitops",), 0.0, False)]  # rewritten by another manager: counted
    outcome = Outcome(
        "c1",
        1,
        True,
        result=result,
        conflicts=conflicts,
        foreign=foreign_objects,
        refused=refused,
        waiting=waiting,
        fights=fights,
    )
    emitted = emitted_metrics(capsys, outcome)
    dims = {m["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"]: sorted(m["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0])
            for m in emitted}  # fmt: skip
    assert dims[names.METRIC_UNALLOCATED] == sorted(GAUGE_DIMS), dims
    assert names.METRIC_SHORTFALL not in dims  # no shortfall: a trouble gauge is emitted only above 0
    assert dims["ExcludedNodes"] == sorted(EXCLUDED_DIMS)
    assert dims[names.METRIC_FOREIGN_FIELD_MANAGER] == sorted([names.METRIC_DIM_CLUSTER, "service"])
    (foreign,) = [m for m in emitted if names.METRIC_FOREIGN_FIELD_MANAGER in m]
    assert foreign[names.METRIC_FOREIGN_FIELD_MANAGER] == [1.0]
    assert (foreign["cluster"], foreign["service"]) == ("c1", service_env or names.SERVICE)
    assert dims[names.METRIC_FOREIGN_OBJECTS] == sorted([names.METRIC_DIM_CLUSTER, "service"])
    (objects,) = [m for m in emitted if names.METRIC_FOREIGN_OBJECTS in m]
    assert objects[names.METRIC_FOREIGN_OBJECTS] == [2.0] and objects["cluster"] == "c1"
    assert dims[names.METRIC_OBJECTS_REFUSED] == sorted([names.METRIC_DIM_CLUSTER, "service"])
    (not_written,) = [m for m in emitted if names.METRIC_OBJECTS_REFUSED in m]
    assert not_written[names.METRIC_OBJECTS_REFUSED] == [2.0] and not_written["cluster"] == "c1"
    assert dims[names.METRIC_FIELD_MANAGER_FIGHTS] == sorted([names.METRIC_DIM_CLUSTER, "service"])
    (fought,) = [m for m in emitted if names.METRIC_FIELD_MANAGER_FIGHTS in m]
    assert fought[names.METRIC_FIELD_MANAGER_FIGHTS] == [1.0] and fought["cluster"] == "c1"
