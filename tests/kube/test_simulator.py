"""Tests of the kube-apiserver simulator over real HTTP (stdlib client and lightkube)."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkit.kubesim.simulator import KubeSimulator, parse_label_selector
from tests.kube.fixtures import make_node

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
APPLY = "application/apply-patch+yaml"


def call(
    sim: KubeSimulator,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
    timeout: float = 5.0,
    context: ssl.SSLContext | None = None,
) -> tuple[int, Any, dict[str, str]]:
    if sim.tls:
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            "127.0.0.1", sim.port, timeout=timeout, context=context
        )
    else:
        conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=timeout)
    data = body if isinstance(body, str | bytes) or body is None else json.dumps(body)
    try:
        conn.request(method, path, body=data, headers={"Content-Type": content_type, **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw else None), {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def apply(sim: KubeSimulator, obj: dict[str, Any], manager: str = "idleshare", force: bool = False, **kw: Any):
    meta = obj["metadata"]
    ns = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    plural = sim.resource_type(obj["kind"]).plural
    prefix = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
    q = f"?fieldManager={manager}" + ("&force=true" if force else "") + "".join(f"&{k}={v}" for k, v in kw.items())
    return call(sim, "PATCH", f"{prefix}{ns}/{plural}/{meta['name']}{q}", yaml.safe_dump(obj), content_type=APPLY)


def cq(name: str = "team-a", cohort: str | None = "shared-pool", **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "ml.p5.48xlarge",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "96"},
                            {"name": "nvidia.com/gpu", "nominalQuota": 4, "borrowingLimit": 2},
                        ],
                    }
                ],
            }
        ]
    }
    if cohort:
        s["cohortName"] = cohort
    s.update(spec)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "idleshare"}},
        "spec": s,
    }


def lq(ns: str = "hyperpod-ns-team-a") -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": f"{ns}-localqueue", "namespace": ns},
        "spec": {"clusterQueue": "team-a"},
    }


# ---------------------------------------------------------------------------------------------- discovery


def test_discovery_documents(kube_sim: KubeSimulator) -> None:
    code, version, _ = call(kube_sim, "GET", "/version")
    assert code == 200 and version["major"] == "1"
    _, api, _ = call(kube_sim, "GET", "/api")
    assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]
    _, core, _ = call(kube_sim, "GET", "/api/v1")
    assert {r["name"]: r["namespaced"] for r in core["resources"] if "/" not in r["name"]} == {
        "nodes": False,
        "namespaces": False,
    }
    _, groups, _ = call(kube_sim, "GET", "/apis")
    (kueue,) = [g for g in groups["groups"] if g["name"] == "kueue.x-k8s.io"]
    assert kueue["preferredVersion"]["version"] == "v1beta2"
    assert {v["version"] for v in kueue["versions"]} == {"v1beta1", "v1beta2"}
    _, rl, _ = call(kube_sim, "GET", KUEUE)
    main = {r["name"]: r for r in rl["resources"] if "/" not in r["name"]}
    assert {k: v["namespaced"] for k, v in main.items()} == {
        "clusterqueues": False,
        "cohorts": False,
        "localqueues": True,
        "resourceflavors": False,
        "workloadpriorityclasses": False,
    }
    assert main["clusterqueues"]["shortNames"] == ["cq"] and "patch" in main["clusterqueues"]["verbs"]
    _, index, _ = call(kube_sim, "GET", "/openapi/v3")
    url = index["paths"]["apis/kueue.x-k8s.io/v1beta2"]["serverRelativeURL"]
    _, doc, _ = call(kube_sim, "GET", url)
    patch_ops = [p["patch"] for p in doc["paths"].values() if "patch" in p]
    assert {op["x-kubernetes-group-version-kind"]["kind"] for op in patch_ops} == {
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "ResourceFlavor",
        "WorkloadPriorityClass",
    }
    assert all(any(p["name"] == "fieldValidation" for p in op["parameters"]) for op in patch_ops)
    assert call(kube_sim, "GET", "/openapi/v2")[0] == 404
    assert call(kube_sim, "GET", "/apis/example.com/v1/widgets")[0] == 404


# ---------------------------------------------------------------------------------------------- reads


def test_list_pagination_with_limit_and_continue(kube_sim: KubeSimulator) -> None:
    names = [f"node-{i:02d}" for i in range(7)]
    kube_sim.seed_nodes([make_node(n) for n in reversed(names)])
    seen, token, pages = [], None, 0
    while True:
        q = "?limit=3" + (f"&continue={token}" if token else "")
        code, page, _ = call(kube_sim, "GET", f"/api/v1/nodes{q}")
        assert code == 200 and page["kind"] == "NodeList"
        pages += 1
        seen += [n["metadata"]["name"] for n in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            assert "remainingItemCount" not in page["metadata"]
            break
        assert page["metadata"]["remainingItemCount"] == len(names) - len(seen)
    assert seen == names and pages == 3
    _, everything, _ = call(kube_sim, "GET", "/api/v1/nodes")
    assert [n["metadata"]["name"] for n in everything["items"]] == names
    code, body, _ = call(kube_sim, "GET", "/api/v1/nodes?limit=2&continue=not-a-token")
    assert code == 400 and body["reason"] == "BadRequest"


def test_get_and_not_found_status(kube_sim: KubeSimulator) -> None:
    kube_sim.set_node(make_node("n1"))
    code, node, _ = call(kube_sim, "GET", "/api/v1/nodes/n1")
    assert code == 200 and node["metadata"]["name"] == "n1" and node["metadata"]["uid"]
    code, body, headers = call(kube_sim, "GET", "/api/v1/nodes/missing")
    assert code == 404 and headers["content-type"] == "application/json"
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'nodes "missing" not found',
        "reason": "NotFound",
        "details": {"name": "missing", "group": "", "kind": "nodes"},
        "code": 404,
    }
    code, body, _ = call(kube_sim, "GET", f"{KUEUE}/clusterqueues/nope")
    assert code == 404 and body["message"] == 'clusterqueues.kueue.x-k8s.io "nope" not found'
    assert body["details"]["group"] == "kueue.x-k8s.io"


def test_label_selector_list(kube_sim: KubeSimulator) -> None:
    kube_sim.seed_nodes(
        [
            make_node("a", labels={"pool": "gpu", "zone": "z1"}),
            make_node("b", labels={"pool": "gpu"}),
            make_node("c", labels={"pool": "cpu", "zone": "z2"}),
            make_node("d", None),
        ]
    )

    def names(selector: str) -> list[str]:
        code, body, _ = call(kube_sim, "GET", f"/api/v1/nodes?labelSelector={selector}")
        assert code == 200, body
        return [n["metadata"]["name"] for n in body["items"]]

    assert names("pool=gpu") == ["a", "b"]
    assert names("pool==gpu,zone") == ["a"]
    assert names("pool!=gpu") == ["c", "d"]
    assert names("zone") == ["a", "c"]
    assert names("!zone") == ["b", "d"]
    assert names("node.kubernetes.io/instance-type") == ["a", "b", "c"]
    assert names("pool%20in%20(cpu,gpu),zone%20notin%20(z1)") == ["b", "c"]
    code, body, _ = call(kube_sim, "GET", "/api/v1/nodes?labelSelector=a=b=c")
    assert code == 400 and body["reason"] == "BadRequest"
    assert parse_label_selector("") == []


def test_field_selector_and_all_namespaces_list(kube_sim: KubeSimulator) -> None:
    for ns in ("hyperpod-ns-a", "hyperpod-ns-b"):
        kube_sim.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        assert apply(kube_sim, lq(ns))[0] == 201
    _, all_ns, _ = call(kube_sim, "GET", f"{KUEUE}/localqueues")
    assert [i["metadata"]["namespace"] for i in all_ns["items"]] == ["hyperpod-ns-a", "hyperpod-ns-b"]
    _, one, _ = call(kube_sim, "GET", f"{KUEUE}/namespaces/hyperpod-ns-b/localqueues")
    assert [i["metadata"]["name"] for i in one["items"]] == ["hyperpod-ns-b-localqueue"]
    _, sel, _ = call(kube_sim, "GET", f"{KUEUE}/localqueues?fieldSelector=metadata.namespace=hyperpod-ns-a")
    assert [i["metadata"]["namespace"] for i in sel["items"]] == ["hyperpod-ns-a"]


# ---------------------------------------------------------------------------------------------- apply


def test_server_side_apply_create_then_noop_keeps_resource_version(kube_sim: KubeSimulator) -> None:
    code, created, _ = apply(kube_sim, cq())
    assert code == 201
    rv, uid = created["metadata"]["resourceVersion"], created["metadata"]["uid"]
    assert created["metadata"]["generation"] == 1
    assert created["spec"]["queueingStrategy"] == "BestEffortFIFO"  # CRD defaults are stored and returned
    (mf,) = created["metadata"]["managedFields"]
    assert mf["manager"] == "idleshare" and mf["operation"] == "Apply" and mf["fieldsType"] == "FieldsV1"
    assert set(mf["fieldsV1"]["f:spec"]) == {"f:cohortName", "f:resourceGroups"}

    kube_sim.clear_requests()
    code, again, _ = apply(kube_sim, cq())
    assert code == 200
    assert again["metadata"]["resourceVersion"] == rv and again["metadata"]["uid"] == uid
    assert kube_sim.count("PATCH") == 1

    code, changed, _ = apply(kube_sim, cq(stopPolicy="Hold"))
    assert code == 200 and int(changed["metadata"]["resourceVersion"]) > int(rv)
    assert changed["metadata"]["generation"] == 2
    relabelled = cq(stopPolicy="Hold")
    relabelled["metadata"]["labels"]["idleshare/team"] = "a"
    code, labelled, _ = apply(kube_sim, relabelled)
    assert int(labelled["metadata"]["resourceVersion"]) > int(changed["metadata"]["resourceVersion"])
    assert labelled["metadata"]["generation"] == 2  # metadata-only change
    # a field no longer applied is removed (then re-defaulted by the schema)
    _, dropped, _ = apply(kube_sim, cq())
    assert dropped["spec"]["stopPolicy"] == "None" and "idleshare/team" not in dropped["metadata"]["labels"]
    assert [o["metadata"]["name"] for o in kube_sim.objects("ClusterQueue")] == ["team-a"]


def test_apply_conflict_between_two_managers(kube_sim: KubeSimulator) -> None:
    assert apply(kube_sim, cq(cohort="pool-a"), manager="idleshare")[0] == 201
    code, body, _ = apply(kube_sim, cq(cohort="pool-b"), manager="someone-else")
    assert code == 409 and body["reason"] == "Conflict" and body["status"] == "Failure"
    assert body["message"].startswith("Apply failed with 1 conflict:")
    assert 'conflict with "idleshare"' in body["message"]
    assert body["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "idleshare"', "field": ".spec.cohortName"}
    ]
    assert kube_sim.get("ClusterQueue", "team-a")["spec"]["cohortName"] == "pool-a"
    # same values: shared ownership, no conflict
    code, shared, _ = apply(kube_sim, cq(cohort="pool-a"), manager="someone-else")
    assert code == 200
    assert {m["manager"] for m in shared["metadata"]["managedFields"]} == {"idleshare", "someone-else"}
    # force takes ownership; the former owner now conflicts
    code, forced, _ = apply(kube_sim, cq(cohort="pool-b"), manager="someone-else", force=True)
    assert code == 200 and forced["spec"]["cohortName"] == "pool-b"
    code, body, _ = apply(kube_sim, cq(cohort="pool-a"), manager="idleshare")
    assert code == 409 and 'conflict with "someone-else"' in body["message"]
    assert apply(kube_sim, cq(cohort="pool-a"), manager="idleshare", force=True)[0] == 200


def test_apply_requires_field_manager_and_matching_name(kube_sim: KubeSimulator) -> None:
    code, body, _ = call(kube_sim, "PATCH", f"{KUEUE}/clusterqueues/team-a", yaml.safe_dump(cq()), content_type=APPLY)
    assert code == 422 and "fieldManager: Required value" in body["message"]
    code, body, _ = call(
        kube_sim, "PATCH", f"{KUEUE}/clusterqueues/other?fieldManager=x", json.dumps(cq()), content_type=APPLY
    )
    assert code == 400 and "does not match the name on the URL" in body["message"]
    code, _, _ = call(kube_sim, "PATCH", f"{KUEUE}/clusterqueues/team-a", "{}", content_type="application/json")
    assert code == 415


def test_invalid_cluster_queue_gets_422_with_causes(kube_sim: KubeSimulator) -> None:
    bad = cq(cohort=None)  # borrowingLimit without cohortName
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "96 cores"
    code, body, _ = apply(kube_sim, bad)
    assert code == 422
    assert body["kind"] == "Status" and body["reason"] == "Invalid" and body["code"] == 422
    assert body["details"]["kind"] == "ClusterQueue" and body["details"]["group"] == "kueue.x-k8s.io"
    assert body["details"]["name"] == "team-a"
    fields = {c["field"]: c for c in body["details"]["causes"]}
    assert set(fields) == {"spec", "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"}
    assert fields["spec"]["message"] == 'Invalid value: "object": borrowingLimit must be nil when cohort is empty'
    assert all(c["reason"] == "FieldValueInvalid" for c in fields.values())
    assert body["message"].startswith('ClusterQueue.kueue.x-k8s.io "team-a" is invalid: [')
    assert kube_sim.objects("ClusterQueue") == []
    # POST validates too
    code, body, _ = call(kube_sim, "POST", f"{KUEUE}/clusterqueues", bad)
    assert code == 422 and len(body["details"]["causes"]) == 2


def test_unknown_fields_strict_by_default_warn_and_ignore_prune(kube_sim: KubeSimulator) -> None:
    obj = cq()
    obj["spec"]["cohort"] = "v1beta1-name"
    code, body, _ = apply(kube_sim, obj)
    assert code == 400 and 'unknown field "spec.cohort"' in body["message"]
    code, stored, headers = apply(kube_sim, obj, fieldValidation="Warn")
    assert code == 201 and "cohort" not in stored["spec"] and "spec.cohort" in headers["warning"]
    code, stored, headers = apply(kube_sim, obj, fieldValidation="Ignore")
    assert code == 200 and "warning" not in headers and "cohort" not in stored["spec"]


def test_local_queue_needs_its_namespace(kube_sim: KubeSimulator) -> None:
    code, body, _ = apply(kube_sim, lq())
    assert code == 404 and body["reason"] == "NotFound"
    assert body["message"] == 'namespaces "hyperpod-ns-team-a" not found'
    assert body["details"] == {"name": "hyperpod-ns-team-a", "kind": "namespaces"}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hyperpod-ns-team-a"}}
    code, created, _ = call(kube_sim, "POST", "/api/v1/namespaces", ns)
    assert code == 201 and created["metadata"]["labels"] == {"kubernetes.io/metadata.name": "hyperpod-ns-team-a"}
    assert call(kube_sim, "POST", "/api/v1/namespaces", ns)[1]["reason"] == "AlreadyExists"
    code, stored, _ = apply(kube_sim, lq())
    assert code == 201 and stored["metadata"]["namespace"] == "hyperpod-ns-team-a"
    assert stored["spec"]["stopPolicy"] == "None"
    bad_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Team_A"}}
    assert call(kube_sim, "POST", "/api/v1/namespaces", bad_ns)[0] == 422
    # transition rule on update: spec.clusterQueue is immutable
    moved = lq()
    moved["spec"]["clusterQueue"] = "team-b"
    code, body, _ = apply(kube_sim, moved)
    assert code == 422 and body["details"]["causes"][0]["field"] == "spec.clusterQueue"
    assert "field is immutable" in body["message"]


def test_create_update_and_merge_patch(kube_sim: KubeSimulator) -> None:
    rf = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "ml.p5.48xlarge"},
        "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}},
    }
    code, created, _ = call(kube_sim, "POST", f"{KUEUE}/resourceflavors?fieldManager=test", rf)
    assert code == 201 and created["metadata"]["managedFields"][0]["operation"] == "Update"
    code, body, _ = call(kube_sim, "POST", f"{KUEUE}/resourceflavors", rf)
    assert code == 409 and body["reason"] == "AlreadyExists"
    assert body["message"] == 'resourceflavors.kueue.x-k8s.io "ml.p5.48xlarge" already exists'
    stale = {**created, "metadata": {**created["metadata"], "resourceVersion": "1"}}
    code, body, _ = call(kube_sim, "PUT", f"{KUEUE}/resourceflavors/ml.p5.48xlarge", stale)
    assert code == 409 and body["reason"] == "Conflict" and "the object has been modified" in body["message"]
    code, patched, _ = call(
        kube_sim,
        "PATCH",
        f"{KUEUE}/resourceflavors/ml.p5.48xlarge",
        {"spec": {"nodeLabels": {"extra": "1"}}},
        content_type="application/merge-patch+json",
    )
    assert code == 200 and patched["spec"]["nodeLabels"] == {
        "node.kubernetes.io/instance-type": "ml.p5.48xlarge",
        "extra": "1",
    }
    assert patched["metadata"]["generation"] == 2
    code, _, _ = call(
        kube_sim,
        "PATCH",
        f"{KUEUE}/resourceflavors/ml.p5.48xlarge",
        {"spec": {}},
        content_type="application/strategic-merge-patch+json",
    )
    assert code == 415  # not for custom resources


def test_v1beta1_is_served_without_conversion(kube_sim: KubeSimulator) -> None:
    assert apply(kube_sim, cq())[0] == 201
    code, old, headers = call(kube_sim, "GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a")
    assert code == 200 and old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert old["spec"]["cohortName"] == "shared-pool"  # no conversion webhook: fields are not renamed
    assert "deprecated" in headers["warning"] or "v1beta2" in headers["warning"]


def test_delete_finalizers_and_collections(kube_sim: KubeSimulator) -> None:
    assert apply(kube_sim, cq())[0] == 201
    code, deleted, _ = call(kube_sim, "DELETE", f"{KUEUE}/clusterqueues/team-a")
    assert code == 200 and deleted["metadata"]["name"] == "team-a"
    assert call(kube_sim, "GET", f"{KUEUE}/clusterqueues/team-a")[0] == 404
    assert call(kube_sim, "DELETE", f"{KUEUE}/clusterqueues/team-a")[0] == 404
    # finalizers hold the object until removed
    held = cq("held")
    held["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    assert apply(kube_sim, held)[0] == 201
    code, deleting, _ = call(kube_sim, "DELETE", f"{KUEUE}/clusterqueues/held")
    assert code == 200 and deleting["metadata"]["deletionTimestamp"]
    assert kube_sim.get("ClusterQueue", "held") is not None
    code, _, _ = call(
        kube_sim,
        "PATCH",
        f"{KUEUE}/clusterqueues/held",
        {"metadata": {"finalizers": None}},
        content_type="application/merge-patch+json",
    )
    assert code == 200 and kube_sim.get("ClusterQueue", "held") is None
    # deletecollection with a selector; namespace deletion takes its LocalQueues
    for name in ("x", "y"):
        apply(kube_sim, cq(name))
    other = cq("z")
    other["metadata"]["labels"] = {"owner": "someone"}
    apply(kube_sim, other)
    code, gone, _ = call(
        kube_sim, "DELETE", f"{KUEUE}/clusterqueues?labelSelector=app.kubernetes.io/managed-by=idleshare"
    )
    assert code == 200 and [i["metadata"]["name"] for i in gone["items"]] == ["x", "y"]
    assert [o["metadata"]["name"] for o in kube_sim.objects("cq")] == ["z"]
    kube_sim.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hyperpod-ns-team-a"}})
    apply(kube_sim, lq())
    assert call(kube_sim, "DELETE", "/api/v1/namespaces/hyperpod-ns-team-a")[0] == 200
    assert kube_sim.objects("LocalQueue") == []


# ---------------------------------------------------------------------------------------------- hooks


def test_node_hooks_bump_resource_versions(kube_sim: KubeSimulator, tmp_path: Path) -> None:
    node_list = {"apiVersion": "v1", "kind": "NodeList", "items": [make_node("n1"), make_node("n2")]}
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(node_list))
    kube_sim.seed_nodes(path)
    _, listed, _ = call(kube_sim, "GET", "/api/v1/nodes")
    rv0 = int(listed["metadata"]["resourceVersion"])
    assert [n["metadata"]["name"] for n in listed["items"]] == ["n1", "n2"]
    kube_sim.set_node(make_node("n2", ready=False))
    _, n2, _ = call(kube_sim, "GET", "/api/v1/nodes/n2")
    assert n2["status"]["conditions"][0]["status"] == "False" and int(n2["metadata"]["resourceVersion"]) > rv0
    kube_sim.delete_node("n1")
    assert [n["metadata"]["name"] for n in kube_sim.objects("Node")] == ["n2"]
    kube_sim.seed_nodes([])
    assert kube_sim.objects("nodes") == []


def test_fault_injection(kube_sim: KubeSimulator) -> None:
    kube_sim.set_node(make_node("n1"))
    kube_sim.inject("GET", r"^/api/v1/nodes$", status=500, times=2)
    kube_sim.inject("PATCH", r"/clusterqueues/", status=409, times=1)
    for _ in range(2):
        code, body, _ = call(kube_sim, "GET", "/api/v1/nodes")
        assert code == 500 and body["kind"] == "Status" and body["reason"] == "InternalError"
    assert call(kube_sim, "GET", "/api/v1/nodes")[0] == 200
    assert call(kube_sim, "GET", "/api/v1/nodes/n1")[0] == 200  # regex did not match
    code, body, _ = apply(kube_sim, cq())
    assert code == 409 and body["reason"] == "Conflict"
    assert kube_sim.objects("ClusterQueue") == []  # the injected failure did not write
    assert apply(kube_sim, cq())[0] == 201
    assert kube_sim.count("GET", r"^/api/v1/nodes$") == 3
    kube_sim.inject(status=429, times=None)
    code, body, headers = call(kube_sim, "GET", "/version")
    assert code == 429 and headers["retry-after"] == "1" and body["reason"] == "TooManyRequests"
    kube_sim.clear_faults()
    assert call(kube_sim, "GET", "/version")[0] == 200


def test_timeouts_drops_and_outages(kube_sim: KubeSimulator) -> None:
    kube_sim.inject_timeout("GET", "/api/v1/nodes", seconds=3)
    started = time.monotonic()
    with pytest.raises((TimeoutError, socket.timeout)):
        call(kube_sim, "GET", "/api/v1/nodes", timeout=0.3)
    assert time.monotonic() - started < 3  # the client gave up before the server's 3 s delay ended
    kube_sim.inject("GET", "/api/v1/nodes", drop_connection=True)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        call(kube_sim, "GET", "/api/v1/nodes")
    kube_sim.outage("503")
    code, body, _ = call(kube_sim, "GET", "/api/v1/nodes")
    assert code == 503 and body["reason"] == "ServiceUnavailable"
    kube_sim.restore()
    port = kube_sim.port
    kept_alive = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    kept_alive.request("GET", "/version")
    assert kept_alive.getresponse().read()
    kube_sim.outage("refuse")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):  # pooled connections fail too
        kept_alive.request("GET", "/version")
        kept_alive.getresponse()
    kept_alive.close()
    with pytest.raises(ConnectionRefusedError):
        call(kube_sim, "GET", "/api/v1/nodes", timeout=1)
    kube_sim.restore()
    assert kube_sim.port == port and call(kube_sim, "GET", "/api/v1/nodes")[0] == 200


def test_bearer_token_required(kube_sim: KubeSimulator) -> None:
    kube_sim.require_token("abc")
    code, body, _ = call(kube_sim, "GET", "/api/v1/nodes")
    assert code == 401 and body["reason"] == "Unauthorized"
    assert call(kube_sim, "GET", "/api/v1/nodes", headers={"Authorization": "Bearer old"})[0] == 401
    assert call(kube_sim, "GET", "/api/v1/nodes", headers={"Authorization": "Bearer abc"})[0] == 200
    kube_sim.require_token(None)
    assert call(kube_sim, "GET", "/api/v1/nodes")[0] == 200


def test_tls_is_verified_with_the_generated_ca(kube_sim_tls: KubeSimulator) -> None:
    assert kube_sim_tls.url.startswith("https://127.0.0.1:")
    assert kube_sim_tls.ca_pem and "BEGIN CERTIFICATE" in kube_sim_tls.ca_pem
    ctx = ssl.create_default_context(cadata=kube_sim_tls.ca_pem)
    assert call(kube_sim_tls, "GET", "/version", context=ctx)[0] == 200
    with pytest.raises(ssl.SSLCertVerificationError):
        call(kube_sim_tls, "GET", "/version", context=ssl.create_default_context())


def test_kubeconfig_written(kube_sim_tls: KubeSimulator, tmp_path: Path) -> None:
    kube_sim_tls.require_token("tok")
    cfg = yaml.safe_load(kube_sim_tls.write_kubeconfig(tmp_path / "kc", namespace="ns1").read_text())
    cluster = cfg["clusters"][0]["cluster"]
    assert cluster["server"] == kube_sim_tls.url and cluster["certificate-authority-data"]
    assert cfg["users"][0]["user"] == {"token": "tok"}
    assert cfg["contexts"][0]["context"]["namespace"] == "ns1"


# ---------------------------------------------------------------------------------------------- lightkube


def test_lightkube_client_against_the_simulator(kube_sim_tls: KubeSimulator, tmp_path: Path) -> None:
    lightkube = pytest.importorskip("lightkube")
    from lightkube.config.kubeconfig import KubeConfig
    from lightkube.generic_resource import create_global_resource, create_namespaced_resource
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import Namespace, Node

    kube_sim_tls.require_token("tok")
    kube_sim_tls.seed_nodes([make_node(f"n{i}") for i in range(5)])
    client = lightkube.Client(
        KubeConfig.from_file(str(kube_sim_tls.write_kubeconfig(tmp_path / "kc"))), field_manager="idleshare"
    )
    assert [n.metadata.name for n in client.list(Node, chunk_size=2)] == [f"n{i}" for i in range(5)]
    assert kube_sim_tls.count("GET", "/api/v1/nodes") == 3  # three pages
    ClusterQueue = create_global_resource("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues")
    LocalQueue = create_namespaced_resource("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues")
    body = cq()
    first = client.apply(ClusterQueue(metadata=body["metadata"], spec=body["spec"]), force=True)
    second = client.apply(ClusterQueue(metadata=body["metadata"], spec=body["spec"]), force=True)
    assert first.metadata.resourceVersion == second.metadata.resourceVersion
    assert client.get(ClusterQueue, "team-a").spec["cohortName"] == "shared-pool"
    with pytest.raises(lightkube.ApiError) as err:
        client.apply(LocalQueue(metadata=lq()["metadata"], spec=lq()["spec"]), force=True)
    assert err.value.status.code == 404
    client.apply(Namespace(metadata=ObjectMeta(name="hyperpod-ns-team-a")))
    assert (
        client.apply(LocalQueue(metadata=lq()["metadata"], spec=lq()["spec"]), force=True).spec["stopPolicy"] == "None"
    )
    bad = cq("bad", cohort=None)
    with pytest.raises(lightkube.ApiError) as err:
        client.apply(ClusterQueue(metadata=bad["metadata"], spec=bad["spec"]), force=True)
    assert err.value.status.code == 422 and err.value.status.details.causes[0].field == "spec"
    kube_sim_tls.require_token("rotated")
    with pytest.raises(lightkube.ApiError) as err:
        client.get(ClusterQueue, "team-a")
    assert err.value.status.code == 401
