"""The adapter on a real API server + Kueue (the stack's: ``make compat`` runs this file on every version of
devkit/kube/kueue_versions.py): discovery of the served kueue.x-k8s.io versions, and objects written in the version
discovery says (domain/kueue_versions.py; docs/spec.md §3).

Kueue v0.19.2 (the default) serves v1beta2 (storage) and v1beta1. The test stack installs its CRDs as Kueue ships them in
config/components/crd/bases, whose conversion strategy is None (no conversion webhook): the API server changes only a
v1beta1 object's apiVersion, so Kueue (which reads v1beta2) does not see a v1beta1 ClusterQueue's ``cohort`` as its
``cohortName`` (tests/kube/test_crds.py). What this stack proves for a v1beta1 write is therefore the adapter's side:
discovery restricted to v1beta1 makes every object go out as v1beta1 (the API server records idleshare's apply entry
in that version, under its field names), what is read back in v1beta1 reads up to the objects idleshare wanted, and a
second sync writes nothing. Kueue's own handling of a v1beta1 object (a v1beta1-only Kueue, v0.12-v0.14) is the
compatibility suite's to prove on those stacks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devkit.kube import kueue_versions as stack_versions
from devkit.kube.client import Kube
from devkit.kube.proxy import FaultProxy
from devkit.kube.stack import KubeStack
from idleshare.adapters.kube import LightkubeCluster
from idleshare.domain import kueue_versions as kv
from idleshare.domain.kueue_diff import diff, first_difference, object_identity
from idleshare.domain.model import Strategy
from idleshare.names import FIELD_MANAGER
from tests.builders import CLUSTER, P5, QUOTAS, entry, objects, quota
from tests.kube.test_adapter import sync


@pytest.fixture
def proxy(kube_stack: KubeStack, kube: Kube) -> Iterator[FaultProxy]:
    with FaultProxy(kube_stack.server, kube_stack.ca_file) as p:
        yield p


def adapter_for(kube_stack: KubeStack, proxy: FaultProxy) -> LightkubeCluster:
    return LightkubeCluster(proxy.url, token=lambda: kube_stack.idleshare_token, timeout=10.0, name="local")


def _in_release(version: str, release: str) -> bool:
    """Whether Kueue ``version`` (``v0.12.3``) is in the ``release`` range idleshare names (``v0.12``,
    ``v0.13–v0.14``, ``v0.20+``)."""
    minors = [int(bound.removeprefix("v0.").rstrip("+")) for bound in release.split("–")]
    top = float("inf") if release.endswith("+") else minors[-1]
    return minors[0] <= int(version.split(".")[1]) <= top


def test_discovery_finds_the_versions_kueue_serves(kube_stack: KubeStack, proxy: FaultProxy) -> None:
    stack = stack_versions.get()  # what this stack's Kueue serves, read from its module's CRDs
    cluster = adapter_for(kube_stack, proxy)
    served = cluster.served_resources()
    assert set(served) == set(stack.served)
    api = cluster.kueue_api()
    newest = {kind: stack.api_version_of(kind).split("/")[1] for kind in kv.VERSIONS}
    assert {kind: api.version(kind) for kind in kv.VERSIONS} == newest
    assert _in_release(stack.version, api.release), (stack.version, api.release)
    before = len(proxy.requests)
    assert cluster.kueue_api() is api and len(proxy.requests) == before  # kept: no second discovery
    assert [r.path for r in proxy.requests if r.path.startswith("/apis/kueue.x-k8s.io")][:1] == ["/apis/kueue.x-k8s.io"]


def only(version: str, cluster: LightkubeCluster) -> LightkubeCluster:
    """``cluster`` whose discovery answers as a Kueue serving ``version`` alone would (the real answer, restricted)."""
    real = cluster.served_resources
    cluster.served_resources = lambda: {v: kinds for v, kinds in real().items() if v == version}  # type: ignore[method-assign]
    return cluster


def v1beta1_objects() -> list[dict[str, Any]]:
    """Every kind idleshare writes, its ClusterQueue without borrowing and lending limits: on this stack Kueue's
    webhook reads a v1beta1 ClusterQueue as v1beta2 (no conversion), where ``cohort`` is no cohort, and refuses a
    limit "when cohort is empty". The limits in v1beta1 are the same fields as in v1beta2 (the CRD schema test)."""
    teams = [quota("research", entry(P5, accelerators=8), borrow=100, strategy=Strategy.DONT_LEND)]
    out = objects(CLUSTER, teams)[1]
    for obj in out:
        for group in obj.get("spec", {}).get("resourceGroups", ()) if obj["kind"] == "ClusterQueue" else ():
            for flavor in group["flavors"]:
                for res in flavor["resources"]:
                    res.pop("borrowingLimit", None)
                    res.pop("lendingLimit", None)
    return out


def test_objects_written_as_v1beta1_are_stored_and_read_back_equal(
    kube_stack: KubeStack, proxy: FaultProxy, kube: Kube
) -> None:
    if "v1beta2" not in stack_versions.get().served:
        pytest.skip("this stack's Kueue serves v1beta1 alone: test_on_a_v1beta1_only_kueue_every_object_round_trips")
    cluster = only("v1beta1", adapter_for(kube_stack, proxy))
    assert cluster.kueue_api().release == "v0.13–v0.14"
    wanted = v1beta1_objects()
    proxy.clear_requests()
    sync(cluster, wanted)
    kueue_writes = [r for r in proxy.requests if r.method in ("POST", "PATCH") and "/kueue.x-k8s.io/" in r.path]
    assert kueue_writes and all("/kueue.x-k8s.io/v1beta1/" in r.path for r in kueue_writes)
    # as stored: idleshare's entry in v1beta1, under v1beta1's field names
    cq = next(o for o in wanted if o["kind"] == "ClusterQueue")
    stored = kube.get("ClusterQueue", cq["metadata"]["name"])
    assert stored is not None
    mine = [
        m for m in stored["metadata"]["managedFields"] if m["manager"] == FIELD_MANAGER and m["operation"] == "Apply"
    ]
    assert [m["apiVersion"] for m in mine] == ["kueue.x-k8s.io/v1beta1"]
    assert "f:cohort" in mine[0]["fieldsV1"]["f:spec"]
    # read back (in v1beta1, up to the hub): every object as wanted, but the ClusterQueue's cohort, which this stack
    # loses (strategy None stores the v1beta1 object as v1beta2 and prunes `cohort` against v1beta2's schema; an
    # apply of it again is then refused by the API server itself, HTTP 500 "failed to convert merged object": a
    # Kueue serving v1beta1 converts it, test_on_a_v1beta1_only_kueue_every_object_round_trips)
    listed = {object_identity(o): o for o in cluster.list_managed()}
    assert listed[object_identity(cq)]["apiVersion"] == kv.HUB_API
    lost = {object_identity(cq): "spec.cohortName: missing"}
    assert {object_identity(o): first_difference(o, listed[object_identity(o)]) for o in wanted} == {
        object_identity(o): lost.get(object_identity(o)) for o in wanted
    }
    assert [object_identity(o) for o in diff(wanted, listed.values())[0]] == [object_identity(cq)]


def test_on_a_v1beta1_only_kueue_every_object_round_trips(kube_stack: KubeStack, proxy: FaultProxy) -> None:
    """A Kueue serving v1beta1 alone (v0.12-v0.14: the compatibility matrix's stacks) stores what idleshare writes in
    v1beta1, limits and cohort included, and reads it back up equal: a second sync writes nothing."""
    cluster = adapter_for(kube_stack, proxy)
    if cluster.kueue_api().version("ClusterQueue") != "v1beta1":
        pytest.skip(f"this stack's Kueue ({cluster.kueue_api().release}) serves v1beta2: the matrix runs this one")
    wanted = objects(CLUSTER, QUOTAS[:2])[1]
    sync(cluster, wanted)
    listed = {object_identity(o): o for o in cluster.list_managed()}
    assert {object_identity(o): first_difference(o, listed[object_identity(o)]) for o in wanted} == {
        object_identity(o): None for o in wanted
    }
    assert sync(cluster, wanted) == ([], [])


def test_a_version_no_longer_served_is_discovered_again_on_404(
    kube_stack: KubeStack, proxy: FaultProxy, kube: Kube
) -> None:
    """The adapter kept a Cohort version this Kueue does not serve (v1alpha1 from a Kueue v0.12 it talked to before an
    upgrade; on v0.12, v1beta2 from before a rollback): the write answers 404, discovery is read again, and the Cohort
    is written in the version served now."""
    cluster = adapter_for(kube_stack, proxy)
    real = dict(cluster.kueue_api().served)
    gone = next(v for v in kv.VERSIONS["Cohort"] if v not in real["Cohort"])
    cluster._api = kv.KueueApi(tuple((k, (gone,) if k == "Cohort" else real[k]) for k in kv.VERSIONS))
    cohort = next(o for o in objects(CLUSTER, QUOTAS[:1])[1] if o["kind"] == "Cohort")
    assert cluster.create(cohort)  # the uid of the object created
    now = cluster.kueue_api().version("Cohort")
    assert now == real["Cohort"][0] != gone
    paths = [r.path for r in proxy.requests if r.method == "POST"]
    assert any(f"/{gone}/cohorts" in p for p in paths) and any(f"/{now}/cohorts" in p for p in paths)
    assert kube.get("Cohort", cohort["metadata"]["name"]) is not None
