"""Fidelity check: the real ``kubectl`` binary against the simulator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkit.kubesim.simulator import KubeSimulator
from tests.kube.fixtures import make_node

KUBECTL = shutil.which("kubectl")
if KUBECTL is None:
    print("test_kubectl: skipped, no kubectl binary on PATH")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not found on PATH (shutil.which)")

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
                    {"name": "nvidia.com/gpu", "nominalQuota": 4},
                ],
            }
        ],
    }
    cq_group = json.loads(json.dumps(group))
    cq_group["flavors"][0]["resources"][2].update(borrowingLimit=2, lendingLimit=4)
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


def _runner(sim: KubeSimulator, tmp_path: Path, **kubeconfig_kw: Any) -> Runner:
    kubeconfig = sim.write_kubeconfig(tmp_path / f"kubeconfig-{len(list(tmp_path.iterdir()))}", **kubeconfig_kw)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        cmd = [KUBECTL, "--request-timeout=10s", f"--cache-dir={tmp_path / 'cache'}", *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)

    return run


@pytest.fixture
def kubectl(kube_sim: KubeSimulator, tmp_path: Path) -> Runner:
    return _runner(kube_sim, tmp_path)


def _write(tmp_path: Path, name: str, docs: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def test_get_nodes_json_returns_the_seeded_nodes(kube_sim: KubeSimulator, kubectl: Runner) -> None:
    seeded = [make_node("gpu-1"), make_node("gpu-2", "ml.g5.8xlarge", ready=False)]
    kube_sim.seed_nodes(seeded)
    r = kubectl("get", "nodes", "-o", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [n["metadata"]["name"] for n in out["items"]] == ["gpu-1", "gpu-2"]
    assert [n["status"] for n in out["items"]] == [n["status"] for n in seeded]
    assert out["items"][1]["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "ml.g5.8xlarge"


def test_server_side_apply_of_every_kind(kube_sim: KubeSimulator, kubectl: Runner, tmp_path: Path) -> None:
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
    patches = [q for q in kube_sim.requests if q.method == "PATCH"]
    assert len(patches) == 6
    assert all(p.query.get("fieldValidation") == "Strict" and p.query["fieldManager"] == "idleshare" for p in patches)
    assert all(p.content_type == "application/apply-patch+yaml" for p in patches)
    for kind in ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"):
        (obj,) = kube_sim.objects(kind)
        assert [m["manager"] for m in obj["metadata"]["managedFields"]] == ["idleshare"]

    before = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in kube_sim.objects("ClusterQueue")}
    r = kubectl("apply", "--server-side", "--field-manager=idleshare", "-f", str(path))
    assert r.returncode == 0, r.stderr
    after = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in kube_sim.objects("ClusterQueue")}
    assert before == after  # re-applying the same manifests is a no-op

    r = kubectl("get", "clusterqueues", "-o", "json")
    assert r.returncode == 0, r.stderr
    (got,) = json.loads(r.stdout)["items"]
    assert got["spec"]["cohortName"] == "shared-pool"
    assert got["spec"]["resourceGroups"] == manifests()[2]["spec"]["resourceGroups"]
    r = kubectl("get", "lq", "-n", TEAM_NS, "-o", "jsonpath={.items[*].spec.clusterQueue}")
    assert r.returncode == 0 and r.stdout == f"{TEAM_NS}-clusterqueue"


def test_invalid_cluster_queue_is_refused(kube_sim: KubeSimulator, kubectl: Runner, tmp_path: Path) -> None:
    bad = manifests()[2]
    del bad["spec"]["cohortName"]  # borrowingLimit without cohort: a CEL rule
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] = "1 TiB"
    r = kubectl("apply", "--server-side", "--field-manager=idleshare", "-f", str(_write(tmp_path, "bad.yaml", [bad])))
    assert r.returncode != 0
    assert f'ClusterQueue "{TEAM_NS}-clusterqueue" is invalid' in r.stderr
    assert "borrowingLimit must be nil when cohort is empty" in r.stderr
    assert "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota" in r.stderr
    assert kube_sim.objects("ClusterQueue") == []

    unknown = manifests()[2]
    unknown["spec"]["cohort"] = "shared-pool"
    r = kubectl("apply", "--server-side", "--field-manager=idleshare", "-f", str(_write(tmp_path, "u.yaml", [unknown])))
    assert r.returncode != 0 and 'unknown field "spec.cohort"' in r.stderr


def test_conflicting_managers(kube_sim: KubeSimulator, kubectl: Runner, tmp_path: Path) -> None:
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
    assert kube_sim.objects("ClusterQueue")[0]["spec"]["cohortName"] == "another-pool"


def test_tls_token_and_delete(kube_sim_tls: KubeSimulator, tmp_path: Path) -> None:
    kube_sim_tls.require_token("secret-token")
    kube_sim_tls.seed_nodes([make_node("n1")])
    run = _runner(kube_sim_tls, tmp_path)
    r = run("get", "nodes", "-o", "name")
    assert r.returncode == 0 and r.stdout.split() == ["node/n1"], r.stderr
    path = _write(tmp_path, "wpc.yaml", [manifests()[-1]])
    assert run("apply", "--server-side", "--field-manager=idleshare", "-f", str(path)).returncode == 0
    r = run("delete", "wpc", "training-priority")
    assert r.returncode == 0 and kube_sim_tls.objects("WorkloadPriorityClass") == []
    expired = _runner(kube_sim_tls, tmp_path, token="expired-token")("get", "nodes")
    assert expired.returncode != 0
    assert "Unauthorized" in expired.stderr or "provide credentials" in expired.stderr
