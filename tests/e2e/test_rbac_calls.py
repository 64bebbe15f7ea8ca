"""infra/k8s/rbac.yaml grants exactly what idleshare calls: each ClusterRole's rules, expanded to (apiGroup, resource,
verb) — and the object names of a rule that names some — equal the requests the code sent, recorded by a proxy in
front of the real apiserver and mapped to RBAC's terms (``rbac_of``), never a copy of the YAML.

The recompute: the real pipeline (router, queue, recompute handler, the real adapter as the recompute's RBAC user)
through a first run, a change, a no-op, foreign objects of names it wants (read after its create's 409, never
written), and the deletion of what went stale (a team gone, an instance type gone, a priority class gone, the Cohort
renamed), with headroom ``all``. The node watcher: its watch of the
nodes and its usage sample, as the ServiceAccount bound to the watcher's ClusterRole only. ``uninstall`` runs with the
operator's own kubeconfig (docs/operations.md), not with a role of this manifest.

Discovery (``/api``, ``/apis/<group>/<version>``...) is a non-resource URL, which Kubernetes' default
``system:discovery`` ClusterRole lets every authenticated user read: no rule of ours grants it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from devkit.kube.client import Kube
from devkit.kube.proxy import FaultProxy, RequestRecord
from devkit.kube.stack import KubeStack
from devkit.scenario import _event
from devkit.watch import LocalWatcher
from idleshare import names
from idleshare.adapters.kube import LightkubeCluster
from idleshare.adapters.node_cache import NodeCache
from idleshare.domain.admission import POLICY_NAME
from idleshare.domain.model import Headroom
from idleshare.service.usage import sample_usage
from infra.constructs.eks_access import RBAC_HEADROOM_ALL_MANIFEST, RBAC_MANIFEST, RBAC_MANIFESTS
from tests.e2e.conftest import P4D, P5, Cluster, p4d_mig_nodes, p5_nodes, quota
from tests.kube.fixtures import make_node

Grant = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)
PRIORITIES = [{"Name": "inference", "Weight": 100}, {"Name": "training", "Weight": 10}]
WATCHER_SA = "idleshare-rbac-calls-watcher"
FOREIGN = {"apiVersion": "kueue.x-k8s.io/v1beta2"}  # created by the admin: no creation marker
G5, ITYPE = "ml.g5.xlarge", "node.kubernetes.io/instance-type"
BATCH = {"Name": "batch", "Weight": 5}


def rbac_of(request: RequestRecord) -> tuple[Grant, str | None] | None:
    """The RBAC (apiGroup, resource, verb) and object name a request needs; ``None`` for a non-resource URL.

    ``/api/v1/[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]``, ``/apis/<group>/<version>/...`` the same;
    ``/api/v1/namespaces[/<name>]`` is the namespaces resource itself. GET of a name is ``get``, of a collection
    ``list`` (``watch`` with ``?watch=true``); POST ``create``, PUT ``update``, PATCH ``patch``, DELETE of a name
    ``delete``, of a collection ``deletecollection``."""
    parts = request.path.split("?", 1)[0].strip("/").split("/")
    if parts[0] == "api" and len(parts) > 2:
        group, rest = "", parts[2:]
    elif parts[0] == "apis" and len(parts) > 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource, name = rest[0], rest[1] if len(rest) > 1 else None
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    watch = request.query.get("watch") in ("true", "1")
    verb = {
        "GET": "get" if name else ("watch" if watch else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }[request.method]
    return (group, resource, verb), name


def called(requests: Iterable[RequestRecord]) -> dict[Grant, set[str | None]]:
    """Each (apiGroup, resource, verb) the requests needed, with the object names they named (``None``: none)."""
    out: dict[Grant, set[str | None]] = {}
    for request in requests:
        mapped = rbac_of(request)
        if mapped is not None:
            out.setdefault(mapped[0], set()).add(mapped[1])
    return out


def roles_bound_to(group: str, *manifests: Any) -> list[dict[str, Any]]:
    """The roles (ClusterRoles and Roles) the manifests bind to ``group``."""
    docs = [d for m in manifests for d in yaml.safe_load_all(m.read_text()) if d]
    refs = {
        (b["roleRef"]["kind"], b["roleRef"]["name"])
        for b in docs
        if b["kind"] in ("ClusterRoleBinding", "RoleBinding")
        and {"kind": "Group", "name": group} in [{"kind": s["kind"], "name": s["name"]} for s in b["subjects"]]
    }
    return [d for d in docs if (d["kind"], d["metadata"]["name"]) in refs]


def granted(roles: list[dict[str, Any]]) -> dict[Grant, set[str] | None]:
    """The roles' rules expanded: each (apiGroup, resource, verb) with its resourceNames (``None``: any)."""
    assert roles, "no role"
    out: dict[Grant, set[str] | None] = {}
    for role in roles:
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        key = (group, resource, verb)
                        assert key not in out, f"{role['metadata']['name']}: {group}/{resource} {verb} twice"
                        out[key] = set(rule["resourceNames"]) if "resourceNames" in rule else None
    return out


def assert_exactly(role_name: str, calls: dict[Grant, set[str | None]], *manifests: Any) -> None:
    """What the manifests (default: every one) bind to ``role_name``'s group grants exactly ``calls``."""
    rules = granted(roles_bound_to(role_name, *(manifests or RBAC_MANIFESTS)))
    unused = sorted(set(rules) - set(calls))
    missing = sorted(set(calls) - set(rules))
    assert (unused, missing) == ([], []), (
        f"{role_name}: granted and never called {unused}; called, not granted {missing}"
    )
    for grant, names_ in rules.items():
        if names_ is not None:  # a rule that names its objects: exactly those called, by name
            assert calls[grant] == names_, f"{role_name}: {grant} names {sorted(names_)}, called {calls[grant]}"


@pytest.fixture
def recording(kube_stack: KubeStack) -> Iterator[FaultProxy]:
    with FaultProxy(kube_stack.server, kube_stack.ca_file) as proxy:
        yield proxy


def test_the_recompute_role_grants_exactly_what_the_recompute_calls(
    make_cluster: Any, kube: Kube, kube_stack: KubeStack, recording: FaultProxy
) -> None:
    # Given the pipeline whose recompute talks to the apiserver through the recording proxy, as its own RBAC user
    cluster: Cluster = make_cluster(p5_nodes(2) + p4d_mig_nodes(1), headroom=Headroom.ALL)
    adapter = (
        LightkubeCluster(  # as runtime/wiring.py deploys it: the last node list kept, brought up to date by a watch
            recording.url, token=lambda: kube_stack.idleshare_token, timeout=60, name="recorded", node_cache=NodeCache()
        )
    )
    cluster.pipeline.kube = adapter  # the recompute's kube_for reads it at each recompute
    recording.clear_requests()
    try:
        # When: a first run (every kind created), a change, a no-op
        cluster.scheduler_config({"FairShare": "Enabled", "PriorityClasses": PRIORITIES})
        cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=50))
        cluster.put_quota(quota("beta", [{"InstanceType": P4D, "Count": 1}], borrow_limit=50))
        cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=100))
        cluster.recalculate()
        # foreign objects of names idleshare wants (never written nor deleted: the recompute only reads them)
        kube.create(
            {**FOREIGN, "kind": "ResourceFlavor", "metadata": {"name": G5}, "spec": {"nodeLabels": {ITYPE: G5}}}
        )
        kube.create({**FOREIGN, "kind": "WorkloadPriorityClass", "metadata": {"name": "batch-priority"}, "value": 5})
        # the admission policy's labels stripped by someone: still idleshare's, read by its recorded identity
        for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
            kube.merge_patch(kind, POLICY_NAME, {"metadata": {"labels": None}})
        kube.seed_nodes([*p5_nodes(2), *p4d_mig_nodes(1), make_node("hyperpod-i-g50000", G5)])
        cluster.scheduler_config({"FairShare": "Enabled", "PriorityClasses": [*PRIORITIES, BATCH]})
        # what went stale is deleted: a team gone (ClusterQueue, LocalQueue), an instance type gone (ResourceFlavor),
        # a priority class gone (WorkloadPriorityClass), the Cohort renamed in the registry (the old Cohort)
        cluster.delete_quota("beta-quota")
        kube.delete_node("hyperpod-i-p4d0000")
        cluster.scheduler_config({"FairShare": "Enabled", "PriorityClasses": PRIORITIES[:1]})
        store, cid = cluster.pipeline.store, cluster.spec.cluster_id
        store.put_cluster(store.get_cluster(cid).with_settings(cohort_name="idleshare-renamed"))
        cluster.recalculate()
        # the last team gone: the admission policy and its binding go with it
        cluster.delete_quota("alpha-quota")
        calls = called(recording.requests)
    finally:
        adapter.close()

    # Then the recompute's roles grant exactly that: rbac.yaml's and, for headroom `all`, rbac-headroom-all.yaml's
    assert_exactly(names.K8S_GROUP, calls)
    # and the one ConfigMap it reads is read in Kueue's namespace, where its Role is (no ClusterRole reads one)
    config_reads = {r.path.split("?")[0] for r in recording.requests if "/configmaps" in r.path}
    (kueue_config,) = [d for d in roles_bound_to(names.K8S_GROUP, RBAC_MANIFEST) if d["kind"] == "Role"]
    namespace = kueue_config["metadata"]["namespace"]
    assert config_reads == {f"/api/v1/namespaces/{namespace}/configmaps/kueue-manager-config"}


def test_on_the_default_headroom_the_recompute_calls_nothing_rbac_headroom_all_grants(
    make_cluster: Any, kube_stack: KubeStack, recording: FaultProxy
) -> None:
    # Given the recompute as its own RBAC user on a cluster of the default headroom (daemonsets)
    cluster: Cluster = make_cluster(p5_nodes(2))
    adapter = LightkubeCluster(recording.url, token=lambda: kube_stack.idleshare_token, timeout=60, name="recorded")
    cluster.pipeline.kube = adapter
    recording.clear_requests()
    try:
        # When teams get quotas and it recomputes
        cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=50))
        cluster.recalculate()
        calls = called(recording.requests)
    finally:
        adapter.close()
    # Then every call is one rbac.yaml grants, and none is one only rbac-headroom-all.yaml grants (no pod list)
    base = granted(roles_bound_to(names.K8S_GROUP, RBAC_MANIFEST))
    extra = granted(roles_bound_to(names.K8S_GROUP, RBAC_HEADROOM_ALL_MANIFEST))
    assert calls and set(calls) <= set(base), sorted(set(calls) - set(base))
    assert not set(calls) & set(extra) and ("", "pods", "list") in extra


def test_the_node_watcher_role_grants_exactly_what_the_watcher_calls(
    make_cluster: Any, kube: Kube, recording: FaultProxy
) -> None:
    # Given the watcher's own ServiceAccount (bound to its ClusterRole only), through the recording proxy
    cluster: Cluster = make_cluster(p5_nodes(2))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=50))
    token = kube.watcher_adapter(name=WATCHER_SA)._token
    adapter = LightkubeCluster(recording.url, token=token, timeout=60, name="recorded-watcher")
    recording.clear_requests()
    try:
        # When it watches the nodes (its bookmark expired: 410, so it lists them again; then one changes) and takes a
        # usage sample
        recording.inject("GET", r"^/api/v1/nodes$", status=410)  # its first request: the watch from the bookmark
        watcher = LocalWatcher(cluster.spec.cluster_id, adapter, cluster.pipeline.store, cluster.pipeline.route)
        watcher.pass_(seconds=1)
        kube.seed_nodes(p5_nodes(3))
        watcher.pass_(seconds=1)
        outcome = sample_usage(cluster.spec.cluster_id, adapter, cluster.pipeline.store, now=datetime.now(UTC))
        assert not outcome.failure, outcome.failure
        calls = called(recording.requests)
    finally:
        adapter.close()

    # Then the watcher's ClusterRole grants exactly that
    assert_exactly(names.K8S_WATCHER_GROUP, calls)


def test_on_headroom_all_without_rbac_headroom_all_the_recompute_fails_naming_the_manifest_and_writes_nothing(
    make_cluster: Any, kube_stack: KubeStack, kube: Kube
) -> None:
    # Given a cluster on headroom `all` whose rbac-headroom-all.yaml binding was never applied (removed here)
    (binding,) = [
        d for d in yaml.safe_load_all(RBAC_HEADROOM_ALL_MANIFEST.read_text()) if d and d["kind"] == "ClusterRoleBinding"
    ]
    path = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
    cluster: Cluster = make_cluster(p5_nodes(2), headroom=Headroom.ALL)
    cluster.pipeline.kube = LightkubeCluster(
        kube_stack.server, kube_stack.ca_pem, lambda: kube_stack.idleshare_token, timeout=10.0, name="local"
    )
    status, answer = kube_stack.request("DELETE", f"{path}/{binding['metadata']['name']}")
    assert status == 200, answer
    try:
        kube.wait_for(
            lambda: kube_stack.request("GET", "/api/v1/pods", token=kube_stack.idleshare_token)[0] == 403,
            "the pod list refused",
        )
        # When a team's quota arrives
        store, cid = cluster.pipeline.store, cluster.spec.cluster_id
        store.create_quota(cid, dict(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=50)))
        cluster.pipeline.tick()
        cluster.pipeline.deliver(
            _event(cluster.spec, "Compute Quota Changed", {"cluster": cid, "quotaName": "alpha-quota"})
        )
        # Then the recompute's failure names the list and the manifest that grants it, and no ClusterQueue exists
        pool = store.get_pool(cid)
        failure = (pool.read_failure or "") if pool else ""
        assert "rbac-headroom-all.yaml" in failure and "403" in failure, pool
        assert not kube.objects("ClusterQueue")
    finally:
        status, answer = kube_stack.request("POST", path, binding)
        assert status == 201, answer
        cluster.pipeline.kube.close()
