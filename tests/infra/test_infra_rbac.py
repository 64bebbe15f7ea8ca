"""The Kubernetes RBAC manifest documented for `kubectl apply`: the recompute's group and the node watcher's group, each
its own ClusterRole and binding (four documents, keyed by kind and name); and the stack's EKS access entries map each
function's role to its own group in every cluster. That each ClusterRole grants exactly what its code calls is
tests/e2e/test_rbac_calls.py's: derived from the requests the code sends to the real apiserver."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from devkit.kube import stack as kube_stack
from idleshare import names
from infra.constructs.eks_access import RBAC_HEADROOM_ALL_MANIFEST, RBAC_MANIFEST, RBAC_MANIFESTS

ROLES = [
    pytest.param(names.K8S_CLUSTER_ROLE, names.K8S_GROUP, id="recompute"),
    pytest.param(names.K8S_WATCHER_CLUSTER_ROLE, names.K8S_WATCHER_GROUP, id="node-watcher"),
]
GROUP_OF = {names.RECOMPUTE_HANDLER: names.K8S_GROUP, names.WATCHER_HANDLER: names.K8S_WATCHER_GROUP}


def _documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(RBAC_MANIFEST.read_text()) if d is not None]


def _docs() -> dict[tuple[str, str], dict[str, Any]]:
    docs = _documents()
    keyed = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert len(keyed) == len(docs), "two documents of the same kind and name"
    return keyed


@pytest.mark.parametrize(("role_name", "group"), ROLES)
def test_each_binding_ties_its_role_to_its_access_entry_group(role_name: str, group: str) -> None:
    (binding,) = [d for d in _documents() if d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"] == role_name]

    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]


def test_the_watcher_may_not_write_or_read_anything_but_nodes_kueues_accounting_and_pods() -> None:
    role = _docs()[("ClusterRole", names.K8S_WATCHER_CLUSTER_ROLE)]
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    resources = {r for rule in role["rules"] for r in rule["resources"]}

    assert verbs <= {"get", "list", "watch"} and resources == {"nodes", "clusterqueues", "workloads", "pods"}
    pods = [rule for rule in role["rules"] if "pods" in rule["resources"]]
    assert [rule["verbs"] for rule in pods] == [["list"]]
    kueue = [rule for rule in role["rules"] if rule["apiGroups"] == ["kueue.x-k8s.io"]]
    assert [set(rule["verbs"]) for rule in kueue] == [{"list"}]  # read-only: no watch, no write


def test_manifest_has_only_the_two_roles_and_their_bindings_and_the_kueue_config_role() -> None:
    assert sorted(_docs()) == sorted(
        [
            ("ClusterRole", names.K8S_CLUSTER_ROLE),
            ("ClusterRoleBinding", names.K8S_CLUSTER_ROLE),
            ("ClusterRole", names.K8S_WATCHER_CLUSTER_ROLE),
            ("ClusterRoleBinding", names.K8S_WATCHER_CLUSTER_ROLE),
            ("Role", "idleshare-recompute-kueue-config"),
            ("RoleBinding", "idleshare-recompute-kueue-config"),
        ]
    )


def test_the_kueue_config_is_read_by_a_role_in_kueues_namespace_of_that_one_configmap() -> None:
    from idleshare.parse.kueue_config import KUEUE_CONFIG_NAME, KUEUE_CONFIG_NAMESPACE

    docs = _docs()
    role, binding = (
        docs[("Role", "idleshare-recompute-kueue-config")],
        docs[("RoleBinding", "idleshare-recompute-kueue-config")],
    )
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == KUEUE_CONFIG_NAMESPACE
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [KUEUE_CONFIG_NAME], "verbs": ["get"]}
    ]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": names.K8S_GROUP}]
    # and no ClusterRole reads a ConfigMap anywhere
    assert not [
        r
        for (kind, _), d in docs.items()
        if kind == "ClusterRole"
        for r in d["rules"]
        if "configmaps" in r["resources"]
    ]


def test_pods_are_listed_by_the_recompute_only_where_headroom_all_is_applied() -> None:
    recompute = _docs()[("ClusterRole", names.K8S_CLUSTER_ROLE)]
    assert not [r for r in recompute["rules"] if {"pods", "workloads"} & set(r["resources"])]
    extra = {
        (d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(RBAC_HEADROOM_ALL_MANIFEST.read_text()) if d
    }
    (role,) = [d for (kind, _), d in extra.items() if kind == "ClusterRole"]
    (binding,) = [d for (kind, _), d in extra.items() if kind == "ClusterRoleBinding"]
    assert {(r["resources"][0], tuple(r["verbs"])) for r in role["rules"]} == {
        ("pods", ("list",)),
        ("workloads", ("list",)),
    }
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": names.K8S_GROUP}]


def test_the_real_stack_applies_the_manifests_the_deploy_documents() -> None:
    assert kube_stack.RBAC_MANIFESTS == RBAC_MANIFESTS


def test_each_function_that_talks_to_kubernetes_has_its_own_group_in_every_cluster(private: Any) -> None:
    # (test_deploy_check.py: every group an access entry names is bound by rbac.yaml; here: not the other's group)
    role_of = {
        fn["Properties"]["Role"]["Fn::GetAtt"][0]: fn["Properties"]["Handler"]
        for fn in private.resources("AWS::Lambda::Function").values()
    }
    entries = sorted(
        (e["Properties"]["ClusterName"], role_of[e["Properties"]["PrincipalArn"]["Fn::GetAtt"][0]], group)
        for e in private.resources("AWS::EKS::AccessEntry").values()
        for group in e["Properties"]["KubernetesGroups"]
    )
    clusters = [c.eks_cluster_name for c in private.stack.config.clusters]
    assert entries == sorted((c, handler, group) for c in clusters for handler, group in GROUP_OF.items())
