"""The Kubernetes RBAC manifest documented for `kubectl apply` grants exactly what idleshare needs."""

from __future__ import annotations

import yaml

from idleshare import names
from infra.constructs.eks_access import RBAC_MANIFEST

KUEUE_KINDS = ["resourceflavors", "cohorts", "clusterqueues", "localqueues", "workloadpriorityclasses"]


def _docs() -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(RBAC_MANIFEST.read_text())}


def test_cluster_role_grants_exactly() -> None:
    role = _docs()["ClusterRole"]

    assert role["metadata"]["name"] == names.K8S_CLUSTER_ROLE
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "create", "patch"]},
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": KUEUE_KINDS,
            "verbs": ["get", "list", "patch", "create", "delete"],
        },
    ]


def test_binding_ties_the_role_to_the_access_entry_group() -> None:
    binding = _docs()["ClusterRoleBinding"]

    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": names.K8S_CLUSTER_ROLE,
    }
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": names.K8S_GROUP}]


def test_manifest_has_only_the_role_and_binding() -> None:
    assert sorted(_docs()) == ["ClusterRole", "ClusterRoleBinding"]
