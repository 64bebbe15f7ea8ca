"""The pinned ``kubectl`` (built with the stack from the pinned Kubernetes module, never skipped) against the
real kube-apiserver with Kueue's CRDs and webhooks: through the recording proxy where the requests it makes
are checked, straight to the TLS server where TLS and tokens are."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkit.kube.proxy import FaultProxy
from devkit.kube.stack import KubeStack
from tests.kube.fixtures import ProxiedKube, make_node

V = "kueue.x-k8s.io/v1beta2"
TEAM_NS = "hyperpod-ns-team-a"


def manifests() -> list[dict[str, Any]]:
    flavor = "ml.p5.48xlarge"
    group = {
        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
        "flavors": [
            {
                "name": flavor,
                "resources": [
                    {"name": "cpu", "nominalQuota": "96"},
                    {"name": "memory", "nominalQuota": "1Ti"},
                    {"name": "nvidia.com/gpu", "nominalQuota": "4"},
                ],
            }
        ],
    }
    cq_group = json.loads(json.dumps(group))
    # quantities as strings: Kueue's webhook stores an integer quantity as a string on create, so a manifest
    # with integers would change the object (and its generation) each time it is applied again
    cq_group["flavors"][0]["resources"][2].update(borrowingLimit="2", lendingLimit="4")
    return [
        {
            "apiVersion": V,
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": flavor}},
        },
        {"apiVersion": V, "kind": "Cohort", "metadata": {"name": "shared-pool"}, "spec": {"resourceGroups": [group]}},
        {
            "apiVersion": V,
            "kind": "ClusterQueue",
            "metadata": {"name": f"{TEAM_NS}-clusterqueue"},
            "spec": {
                "cohortName": "shared-pool",
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": TEAM_NS}},
                "resourceGroups": [cq_group],
                "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                "fairSharing": {"weight": "1"},
            },
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM_NS}},
        {
            "apiVersion": V,
            "kind": "LocalQueue",
            "metadata": {"name": f"{TEAM_NS}-localqueue", "namespace": TEAM_NS},
            "spec": {"clusterQueue": f"{TEAM_NS}-clusterqueue"},
        },
        {"apiVersion": V, "kind": "WorkloadPriorityClass", "metadata": {"name": "training-priority"}, "value": 100},
    ]


Runner = Callable[..., subprocess.CompletedProcess[str]]


def _kubeconfig(path: Path, server: str, token: str, ca_pem: bytes | None = None) -> Path:
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


def _runner(stack: KubeStack, tmp_path: Path, server: str, token: str, ca_pem: bytes | None = None) -> Runner:
    kubeconfig = _kubeconfig(tmp_path / f"kubeconfig-{len(list(tmp_path.iterdir()))}", server, token, ca_pem)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(stack.binaries.kubectl), "--request-timeout=30s", f"--cache-dir={tmp_path / 'cache'}", *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)

    return run


@pytest.fixture
def kubectl(proxied_kube: ProxiedKube, tmp_path: Path) -> Iterator[Runner]:
    """kubectl as the cluster's admin, through a recording proxy (``proxied_kube.requests``). kubectl never
    sends its bearer token over plain HTTP: this proxy forwards its requests with the admin's."""
    stack = proxied_kube.stack
    with FaultProxy(stack.server, stack.ca_file, default_token=stack.admin_token) as proxy:
        proxied_kube.proxy = proxy
        yield _runner(stack, tmp_path, proxy.url, stack.admin_token)


def _write(tmp_path: Path, name: str, docs: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def test_get_nodes_json_returns_the_seeded_nodes(proxied_kube: ProxiedKube, kubectl: Runner) -> None:
    seeded = [make_node("gpu-1"), make_node("gpu-2", "ml.g5.8xlarge", ready=False)]
    proxied_kube.seed_nodes(seeded)
    r = kubectl("get", "nodes", "-o", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [n["metadata"]["name"] for n in out["items"]] == ["gpu-1", "gpu-2"]
    # the status as seeded (the real server adds its defaults: nodeInfo, daemonEndpoints, condition times)
    for got, want in zip(out["items"], seeded, strict=True):
        assert {k: got["status"][k] for k in ("allocatable", "capacity")} == {
            k: want["status"][k] for k in ("allocatable", "capacity")
        }
        assert [{k: c.get(k) for k in ("type", "status", "reason")} for c in got["status"]["conditions"]] == want[
            "status"
        ]["conditions"]
    assert out["items"][1]["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "ml.g5.8xlarge"


def test_server_side_apply_of_every_kind(proxied_kube: ProxiedKube, kubectl: Runner, tmp_path: Path) -> None:
    path = _write(tmp_path, "all.yaml", manifests())
    r = kubectl("apply", "--server-side", "--field-manager=idleshare", "-f", str(path))
    assert r.returncode == 0, r.stderr
    for line in (
        "resourceflavor.kueue.x-k8s.io/ml.p5.48xlarge serverside-applied",
        "cohort.kueue.x-k8s.io/shared-pool serverside-applied",
        f"clusterqueue.kueue.x-k8s.io/{TEAM_NS}-clusterqueue serverside-applied",
        f"namespace/{TEAM_NS} serverside-applied",
        f"localqueue.kueue.x-k8s.io/{TEAM_NS}-localqueue serverside-applied",
        "workloadpriorityclass.kueue.x-k8s.io/training-priority serverside-applied",
    ):
        assert line in r.stdout
    # kubectl asked the server to validate fields strictly (it found fieldValidation in OpenAPI v3)
    patches = [q for q in proxied_kube.requests if q.method == "PATCH"]
    assert len(patches) == 6
    assert all(p.query.get("fieldValidation") == "Strict" and p.query["fieldManager"] == "idleshare" for p in patches)
    assert all(p.content_type == "application/apply-patch+yaml" for p in patches)
    for kind in ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"):
        (obj,) = proxied_kube.objects(kind)
        # the object's own fields are idleshare's alone (Kueue writes only the status subresource)
        spec_managers = [m["manager"] for m in obj["metadata"]["managedFields"] if not m.get("subresource")]
        assert spec_managers == ["idleshare"], obj["metadata"]["managedFields"]

    def generations() -> dict[str, Any]:  # Kueue keeps writing status: resourceVersion moves, generation not
        return {o["metadata"]["name"]: o["metadata"]["generation"] for o in proxied_kube.objects("ClusterQueue")}

    before = generations()
    r = kubectl("apply", "--server-side", "--field-manager=idleshare", "-f", str(path))
    assert r.returncode == 0, r.stderr
    assert generations() == before  # re-applying the same manifests is a no-op

    r = kubectl("get", "clusterqueues", "-o", "json")
    assert r.returncode == 0, r.stderr
    (got,) = json.loads(r.stdout)["items"]
    assert got["spec"]["cohortName"] == "shared-pool"
    assert got["spec"]["resourceGroups"] == manifests()[2]["spec"]["resourceGroups"]
    r = kubectl("get", "lq", "-n", TEAM_NS, "-o", "jsonpath={.items[*].spec.clusterQueue}")
    assert r.returncode == 0 and r.stdout == f"{TEAM_NS}-clusterqueue"


def test_invalid_cluster_queue_is_refused(proxied_kube: ProxiedKube, kubectl: Runner, tmp_path: Path) -> None:
    bad = manifests()[2]
    del bad["spec"]["cohortName"]  # borrowingLimit without cohort: a CEL rule
    r = kubectl("apply", "--server-side", "--field-manager=idleshare", "-f", str(_write(tmp_path, "bad.yaml", [bad])))
    assert r.returncode != 0
    assert f'ClusterQueue "{TEAM_NS}-clusterqueue" is invalid' in r.stderr
    assert "borrowingLimit must be nil when cohort is empty" in r.stderr
    # a malformed quantity: Kueue's mutating webhook refuses it before the CRD's schema is checked
    bad = manifests()[2]
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] = "1 TiB"
    r = kubectl("apply", "--server-side", "--field-manager=idleshare", "-f", str(_write(tmp_path, "q.yaml", [bad])))
    assert r.returncode != 0
    assert 'admission webhook "mclusterqueue.kb.io" denied the request: quantities must match' in r.stderr
    assert proxied_kube.objects("ClusterQueue") == []

    unknown = manifests()[2]
    unknown["spec"]["cohort"] = "shared-pool"
    r = kubectl("apply", "--server-side", "--field-manager=idleshare", "-f", str(_write(tmp_path, "u.yaml", [unknown])))
    # server-side apply refuses a field the schema lacks while building the patch (not "unknown field")
    assert r.returncode != 0 and ".spec.cohort: field not declared in schema" in r.stderr


def test_conflicting_managers(proxied_kube: ProxiedKube, kubectl: Runner, tmp_path: Path) -> None:
    cq = manifests()[2]
    assert (
        kubectl(
            "apply", "--server-side", "--field-manager=idleshare", "-f", str(_write(tmp_path, "a.yaml", [cq]))
        ).returncode
        == 0
    )
    cq["spec"]["cohortName"] = "another-pool"
    path = _write(tmp_path, "b.yaml", [cq])
    r = kubectl("apply", "--server-side", "--field-manager=operator", "-f", str(path))
    assert r.returncode != 0 and 'conflict with "idleshare"' in r.stderr and ".spec.cohortName" in r.stderr
    r = kubectl("apply", "--server-side", "--field-manager=operator", "--force-conflicts", "-f", str(path))
    assert r.returncode == 0, r.stderr
    assert proxied_kube.objects("ClusterQueue")[0]["spec"]["cohortName"] == "another-pool"


def test_tls_token_and_delete(kube_stack: KubeStack, kube: Any, tmp_path: Path) -> None:
    # straight to the TLS apiserver, verified against its CA, with a bearer token the server knows
    kube.seed_nodes([make_node("n1")])
    run = _runner(kube_stack, tmp_path, kube_stack.server, kube_stack.admin_token, kube_stack.ca_pem)
    r = run("get", "nodes", "-o", "name")
    assert r.returncode == 0 and r.stdout.split() == ["node/n1"], r.stderr
    path = _write(tmp_path, "wpc.yaml", [manifests()[-1]])
    assert run("apply", "--server-side", "--field-manager=idleshare", "-f", str(path)).returncode == 0
    r = run("delete", "wpc", "training-priority")
    assert r.returncode == 0 and kube.objects("WorkloadPriorityClass") == []
    expired = _runner(kube_stack, tmp_path, kube_stack.server, "expired-token", kube_stack.ca_pem)("get", "nodes")
    assert expired.returncode != 0
    assert "Unauthorized" in expired.stderr or "provide credentials" in expired.stderr
