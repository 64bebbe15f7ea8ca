"""LightkubeCluster against the loopback kube-apiserver simulator (devkit/kubesim/simulator.py)."""

from __future__ import annotations

import base64
import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devkit.kubesim.simulator import KubeSimulator
from idleshare.adapters.eks_auth import ClusterEndpoint
from idleshare.adapters.errors import (
    AuthExpiredError,
    ConflictError,
    NotFoundError,
    PermanentError,
    RetryableError,
)
from idleshare.adapters.kube import LightkubeCluster, diff
from idleshare.edge.nodes import node_from_dict
from tests.kube.fixtures import make_node
from tests.unit.test_kueue import CLUSTER, QUOTAS, objects

pytestmark = pytest.mark.integration

CQ_PATH = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"


@pytest.fixture
def sim() -> Iterator[KubeSimulator]:
    with KubeSimulator() as s:
        yield s


@pytest.fixture
def kube(sim: KubeSimulator) -> Iterator[LightkubeCluster]:
    cluster = LightkubeCluster(sim.url, timeout=2.0, name="sim")
    yield cluster
    cluster.close()


def desired() -> list[dict[str, Any]]:
    return objects(CLUSTER, QUOTAS[:2])[1]  # research and nlp: enough kinds, fewer CEL-validated writes


def sync(kube: LightkubeCluster, wanted: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What a recompute does: read the managed objects, diff, apply, delete."""
    to_apply, to_delete = diff(wanted, kube.list_managed())
    for obj in to_apply:
        kube.apply(obj)
    for obj in to_delete:
        kube.delete(obj)
    return to_apply, to_delete


def cq_named(objs: list[dict[str, Any]], team: str) -> dict[str, Any]:
    return next(
        o for o in objs if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == f"hyperpod-ns-{team}-clusterqueue"
    )


# -- nodes ---------------------------------------------------------------------------------------


def test_nodes_are_listed_page_by_page(sim, kube):
    # Given 1,200 nodes
    sim.seed_nodes([make_node(f"node-{i:04d}", ready=i % 100 != 0) for i in range(1200)])
    sim.clear_requests()
    # When listed 500 at a time
    nodes = list(kube.list_nodes(page_size=500))
    # Then three list requests fetched every node, the later ones with a continue token
    lists = [r for r in sim.requests if r.path == "/api/v1/nodes"]
    assert len(lists) == 3
    assert [r.query.get("limit") for r in lists] == ["500"] * 3
    assert "continue" not in lists[0].query and all(r.query.get("continue") for r in lists[1:])
    assert sorted(n["metadata"]["name"] for n in nodes) == [f"node-{i:04d}" for i in range(1200)]
    # And each dict carries what the node parser needs
    parsed = [node_from_dict(n) for n in nodes]
    assert sum(not n.ready for n in parsed) == 12
    assert parsed[1].instance_type == "ml.p5.48xlarge" and parsed[1].allocatable["nvidia.com/gpu"] == 8


def test_an_error_on_a_later_page_is_translated(sim, kube):
    sim.seed_nodes([make_node(f"n{i}") for i in range(10)])
    sim.inject("GET", "^/api/v1/nodes$", 500, times=None)
    with pytest.raises(RetryableError) as info:
        list(kube.list_nodes(page_size=3))
    assert info.value.status == 500


# -- apply / diff --------------------------------------------------------------------------------


def test_a_first_sync_creates_everything_and_a_second_sends_nothing(sim, kube):
    # Given an empty cluster
    wanted = desired()
    # When synced
    applied, deleted = sync(kube, wanted)
    # Then every object exists; Kueue objects were server-side applied as idleshare, with force
    assert len(applied) == len(wanted) and deleted == []
    patches = [r for r in sim.requests if r.method == "PATCH"]
    assert len(patches) == sum(o["kind"] != "Namespace" for o in wanted)
    assert {r.content_type for r in patches} == {"application/apply-patch+yaml"}
    assert {(r.query.get("fieldManager"), r.query.get("force")) for r in patches} == {("idleshare", "true")}
    assert not any(
        r.method == "PATCH" and "/namespaces/" in r.path and "localqueues" not in r.path for r in sim.requests
    )
    for obj in wanted:
        meta = obj["metadata"]
        assert sim.get(obj["kind"], meta["name"], meta.get("namespace", "")) is not None
    # When synced again with the same desired state
    sim.clear_requests()
    applied, deleted = sync(kube, wanted)
    # Then nothing is written
    assert applied == [] and deleted == []
    assert [r.method for r in sim.requests if r.method != "GET"] == []


def test_only_changed_objects_are_applied(sim, kube):
    # Given the cluster in sync
    wanted = desired()
    sync(kube, wanted)
    sim.clear_requests()
    # When one team's GPU quota changes
    changed = copy.deepcopy(wanted)
    res = cq_named(changed, "research")["spec"]["resourceGroups"][0]["flavors"]
    p5 = next(f for f in res if f["name"] == "ml.p5.48xlarge")
    next(r for r in p5["resources"] if r["name"] == "nvidia.com/gpu")["nominalQuota"] = "16"
    sync(kube, changed)
    # Then exactly that ClusterQueue is patched, and the cluster holds the new quota
    assert [r.path for r in sim.requests if r.method == "PATCH"] == [f"{CQ_PATH}/hyperpod-ns-research-clusterqueue"]
    stored = sim.get("ClusterQueue", "hyperpod-ns-research-clusterqueue")
    flavors = stored["spec"]["resourceGroups"][0]["flavors"]
    p5_stored = next(f for f in flavors if f["name"] == "ml.p5.48xlarge")
    assert next(r for r in p5_stored["resources"] if r["name"] == "nvidia.com/gpu")["nominalQuota"] == "16"


def test_a_field_idleshare_stops_setting_is_removed(sim, kube):
    # Given research's ClusterQueue with fairSharing applied by idleshare
    wanted = desired()
    sync(kube, wanted)
    assert "fairSharing" in sim.get("ClusterQueue", "hyperpod-ns-research-clusterqueue")["spec"]
    # When fair sharing is no longer desired
    without = copy.deepcopy(wanted)
    del cq_named(without, "research")["spec"]["fairSharing"]
    applied, _ = sync(kube, without)
    # Then the object is applied and the field is gone
    assert [o["metadata"]["name"] for o in applied] == ["hyperpod-ns-research-clusterqueue"]
    assert "fairSharing" not in sim.get("ClusterQueue", "hyperpod-ns-research-clusterqueue")["spec"]


def test_a_gone_team_loses_its_queues_but_keeps_its_namespace(sim, kube):
    # Given the cluster in sync with team nlp, and a workload-ish object in nlp's namespace
    wanted = desired()
    sync(kube, wanted)
    assert sim.get("Namespace", "hyperpod-ns-nlp") is not None
    sim.clear_requests()
    # When nlp's quota is gone
    remaining = [o for o in wanted if o["metadata"]["labels"].get("idleshare.io/team") != "nlp"]
    _, deleted = sync(kube, remaining)
    # Then its LocalQueue then its ClusterQueue are deleted, and its namespace stays
    assert [(o["kind"], o["metadata"]["name"]) for o in deleted] == [
        ("LocalQueue", "hyperpod-ns-nlp-localqueue"),
        ("ClusterQueue", "hyperpod-ns-nlp-clusterqueue"),
    ]
    assert sim.get("ClusterQueue", "hyperpod-ns-nlp-clusterqueue") is None
    assert sim.get("LocalQueue", "hyperpod-ns-nlp-localqueue", "hyperpod-ns-nlp") is None
    assert sim.get("Namespace", "hyperpod-ns-nlp") is not None
    assert sim.count("DELETE") == 2
    assert sim.get("ClusterQueue", "hyperpod-ns-research-clusterqueue") is not None


def test_objects_without_our_label_are_neither_listed_nor_deleted(sim, kube):
    # Given a ClusterQueue someone else created
    theirs = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "platform-team", "labels": {"idleshare.io/team": "platform"}},
        "spec": {"namespaceSelector": {}},
    }
    sim.put(theirs)
    sync(kube, desired())
    # When listing managed objects and syncing with nothing desired
    managed = kube.list_managed()
    sync(kube, [])
    # Then it was never listed nor deleted
    assert "platform-team" not in {o["metadata"]["name"] for o in managed}
    assert sim.get("ClusterQueue", "platform-team") is not None
    assert all(
        r.query.get("labelSelector") == "app.kubernetes.io/managed-by=idleshare"
        for r in sim.requests
        if r.method == "GET" and "nodes" not in r.path and r.query
    )


def test_list_managed_returns_every_kind_with_kind_and_api_version(sim, kube):
    wanted = desired()
    sync(kube, wanted)
    managed = kube.list_managed()
    assert sorted((o["kind"], o["metadata"]["name"]) for o in managed) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in wanted
    )
    assert {o["apiVersion"] for o in managed if o["kind"] == "Namespace"} == {"v1"}


# -- namespaces ----------------------------------------------------------------------------------


def test_ensure_namespace_creates_a_missing_namespace_and_never_touches_an_existing_one(sim, kube):
    # Given a namespace someone else created, without our labels
    sim.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hyperpod-ns-a", "labels": {"x": "y"}}})
    before = sim.get("Namespace", "hyperpod-ns-a")
    ours = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "hyperpod-ns-a", "labels": {"app.kubernetes.io/managed-by": "idleshare"}},
    }
    sim.clear_requests()
    # When ensured (directly and through apply)
    assert kube.ensure_namespace(ours) is False
    kube.apply(ours)
    # Then it is unchanged, and only read
    assert sim.get("Namespace", "hyperpod-ns-a") == before
    assert {r.method for r in sim.requests} == {"GET"}
    # When a missing one is ensured, it is created with our labels
    missing = copy.deepcopy(ours)
    missing["metadata"]["name"] = "hyperpod-ns-b"
    assert kube.ensure_namespace(missing) is True
    assert sim.get("Namespace", "hyperpod-ns-b")["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "idleshare"


def test_a_namespace_created_concurrently_counts_as_existing(sim, kube):
    sim.inject("POST", "^/api/v1/namespaces$", 409)
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hyperpod-ns-race"}}
    assert kube.ensure_namespace(obj) is False


def test_a_namespace_is_never_deleted(kube):
    with pytest.raises(ValueError, match="never deletes namespaces"):
        kube.delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hyperpod-ns-a"}})


def test_deleting_an_object_already_gone_is_fine(sim, kube):
    lq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "gone", "namespace": "default"},
    }
    kube.delete(lq)
    assert sim.count("DELETE", "/namespaces/default/localqueues/gone") == 1


# -- errors --------------------------------------------------------------------------------------


def test_an_invalid_cluster_queue_is_a_permanent_error_naming_the_field(sim, kube):
    bad = cq_named(desired(), "research")
    bad["spec"]["preemption"]["withinClusterQueue"] = "Sometimes"
    with pytest.raises(PermanentError) as info:
        kube.apply(bad)
    assert info.value.status == 422 and not info.value.retryable
    assert "spec.preemption.withinClusterQueue" in str(info.value)
    assert "hyperpod-ns-research-clusterqueue" in str(info.value)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(400, PermanentError, id="400"),
        pytest.param(403, PermanentError, id="403 forbidden"),
        pytest.param(404, NotFoundError, id="404"),
        pytest.param(409, ConflictError, id="409"),
        pytest.param(410, RetryableError, id="410 expired continue"),
        pytest.param(429, RetryableError, id="429"),
        pytest.param(500, RetryableError, id="500"),
        pytest.param(503, RetryableError, id="503"),
    ],
)
def test_api_errors_are_translated(sim, kube, status, expected):
    sim.inject("PATCH", CQ_PATH, status)
    with pytest.raises(expected) as info:
        kube.apply(cq_named(desired(), "research"))
    assert type(info.value) is expected
    assert info.value.status == status
    assert "apply ClusterQueue/hyperpod-ns-research-clusterqueue" in str(info.value)


def test_an_error_response_that_is_not_a_status_is_translated_too(sim, kube):
    sim.inject("GET", "^/api/v1/nodes$", 502, headers={"Content-Type": "text/html"})
    with pytest.raises(RetryableError) as info:
        list(kube.list_nodes())
    assert info.value.status == 502


def test_a_rejected_token_is_auth_expired_and_the_next_call_uses_a_fresh_one(sim):
    # Given the API server accepts only "fresh", and the provider still hands out "stale"
    sim.require_token("fresh")
    tokens = ["stale"]
    invalidated: list[bool] = []

    def on_expired() -> None:
        invalidated.append(True)
        tokens[0] = "fresh"

    kube = LightkubeCluster(sim.url, token=lambda: tokens[0], on_auth_expired=on_expired, timeout=2.0)
    # When listing
    with pytest.raises(AuthExpiredError) as info:
        kube.list_managed()
    # Then it is a retryable auth error, the token was invalidated, and a retry succeeds
    assert info.value.retryable and info.value.invalidate_token and info.value.status == 401
    assert invalidated == [True]
    assert kube.list_managed() == []
    auth_requests = [r for r in sim.requests if r.status == 401]
    assert len(auth_requests) == 1


def test_a_slow_api_server_times_out_as_retryable_within_the_timeout(sim):
    kube = LightkubeCluster(sim.url, timeout=0.3)
    sim.inject_timeout("GET", "^/api/v1/nodes$", seconds=3)
    started = time.monotonic()
    with pytest.raises(RetryableError, match="timed out"):
        list(kube.list_nodes())
    assert time.monotonic() - started < 2


def test_an_unreachable_api_server_is_retryable(sim, kube):
    sim.outage("refuse")
    with pytest.raises(RetryableError):
        kube.list_managed()


def test_a_dropped_connection_is_retryable(sim, kube):
    sim.inject("GET", None, drop_connection=True, times=None)
    with pytest.raises(RetryableError):
        list(kube.list_nodes())


# -- TLS and EKS wiring --------------------------------------------------------------------------


class FakeConnector:
    """EksConnector's surface, pointing at the TLS simulator."""

    def __init__(self, sim: KubeSimulator) -> None:
        assert sim.ca_pem is not None
        self.endpoint = ClusterEndpoint("sim", sim.url, base64.b64encode(sim.ca_pem.encode()).decode())
        self.issued = 0
        self.invalidated = 0

    def describe(self, cluster_name: str) -> ClusterEndpoint:
        return self.endpoint

    def token(self, cluster_name: str) -> str:
        return f"k8s-aws-v1.token-{self.invalidated}"

    def invalidate(self, cluster_name: str) -> None:
        self.invalidated += 1


@pytest.fixture
def tls_sim() -> Iterator[KubeSimulator]:
    with KubeSimulator(tls=True) as s:
        yield s


def test_from_eks_verifies_tls_against_the_cluster_ca_and_sends_the_eks_token(tls_sim):
    # Given a TLS API server that wants the second token
    connector = FakeConnector(tls_sim)
    tls_sim.require_token("k8s-aws-v1.token-1")
    tls_sim.seed_nodes([make_node("n1")])
    kube = LightkubeCluster.from_eks(connector, "sim", timeout=2.0)  # type: ignore[arg-type]
    # When the first token is refused, the connector is told; the retry carries the new token
    with pytest.raises(AuthExpiredError):
        list(kube.list_nodes())
    assert connector.invalidated == 1
    assert [n["metadata"]["name"] for n in kube.list_nodes()] == ["n1"]


def test_a_server_whose_certificate_the_ca_did_not_sign_is_refused(tls_sim):
    # Given a client that trusts only the system CAs, not the simulator's
    kube = LightkubeCluster(tls_sim.url, ca_pem=None, timeout=2.0)
    with pytest.raises(RetryableError, match=r"(?i)certificate|ssl"):
        kube.list_managed()
    assert tls_sim.requests == []
