"""Other quota writers (docs/spec.md §3): Kueue's Dynamic Quota Orchestration and HyperPod's own task governance,
named in the pool's issues, counted by the QuotaOverridden gauge, and never written to.

The DQO objects are shaped as Kueue v0.20 writes them (``status.effectiveQuotas`` = ``{orchestratorRef: {apiGroup,
kind, name}, resourceGroups}``, as in Kueue's scheduler integration test for the gate): the devkit stack's Kueue
v0.19.2 CRD has no such field and prunes it, so the adapter's projection is proven here on an API server answer of
that shape served over HTTP (docs/decisions.md)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from idleshare import names
from idleshare.adapters.kube import KINDS, LightkubeCluster
from idleshare.domain.coexistence import (
    DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE,
    HYPERPOD_MANAGED_NAMESPACE_LABEL,
    HYPERPOD_TASK_GOVERNANCE_ACTIVE,
    SAMPLE,
    other_writer_issues,
)
from idleshare.domain.kueue_diff import CREATED_BY_ANNOTATION
from idleshare.errors import RetryableError
from idleshare.names import FIELD_MANAGER
from idleshare.runtime.metrics import emit_recompute
from tests.fakes import emf_documents
from tests.loopback import QuietJsonHandler, serving

EFFECTIVE = {
    "orchestratorRef": {"apiGroup": "kueue.x-k8s.io", "kind": "DynamicQuotaOrchestrator", "name": "gpu-capacity"},
    "resourceGroups": [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "ml.p5.48xlarge", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4"}]}],
        }
    ],
}
DQO_STATUS_ENTRY = {
    "manager": "kueue-dqo-controller",
    "operation": "Apply",
    "subresource": "status",
    "fieldsV1": {"f:status": {"f:effectiveQuotas": {".": {}, "f:orchestratorRef": {}, "f:resourceGroups": {}}}},
}


def ours(kind: str, name: str, **extra: Any) -> dict[str, Any]:
    meta = {
        "name": name,
        "labels": {"app.kubernetes.io/managed-by": "idleshare"},
        "annotations": {CREATED_BY_ANNOTATION: "idleshare"},
        "managedFields": [{"manager": FIELD_MANAGER, "operation": "Apply", "fieldsV1": {"f:spec": {}}}],
    }
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": meta, **extra}


def codes(issues: list[Any]) -> list[str]:
    return [i.code for i in issues]


# -- the rules --------------------------------------------------------------------------------------


def test_a_queue_or_cohort_of_ours_with_effective_quotas_is_named_with_its_orchestrator():
    # Given idleshare's ClusterQueue and Cohort, each with status.effectiveQuotas written by an orchestrator
    cq = ours("ClusterQueue", "hyperpod-ns-a-clusterqueue", status={"effectiveQuotas": EFFECTIVE})
    cq["metadata"]["managedFields"].append(DQO_STATUS_ENTRY)
    cohort = ours("Cohort", "shared-pool", status={"effectiveQuotas": {**EFFECTIVE, "resourceGroups": []}})
    plain = ours("ClusterQueue", "hyperpod-ns-b-clusterqueue", status={})
    issues = other_writer_issues([cq, cohort, plain], [], [])
    # Then each is an error naming the object, the orchestrator and (when managedFields say) its field manager;
    # an empty resourceGroups is an override too (Kueue does not fall back to the spec); the plain one is not named
    assert [(i.severity, i.code, i.subject) for i in issues] == [
        ("error", DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE, "ClusterQueue/hyperpod-ns-a-clusterqueue"),
        ("error", DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE, "Cohort/shared-pool"),
    ]
    first, second = (i.message for i in issues)
    assert "DynamicQuotaOrchestrator gpu-capacity (kueue.x-k8s.io)" in first
    assert "field manager kueue-dqo-controller" in first and "field manager" not in second
    assert "not from the spec idleshare writes" in first and "stays after the orchestrator is deleted" in first
    assert "kubectl patch clusterqueue hyperpod-ns-a-clusterqueue --subresource=status" in first
    assert "kubectl patch cohort shared-pool --subresource=status" in second


def test_effective_quotas_on_an_object_idleshare_did_not_create_is_not_its_issue():
    theirs = ours("ClusterQueue", "platform-cq", status={"effectiveQuotas": EFFECTIVE})
    del theirs["metadata"]["annotations"]
    local = ours("LocalQueue", "hyperpod-ns-a-localqueue", status={"effectiveQuotas": EFFECTIVE})
    assert other_writer_issues([theirs, local], [], []) == []


def test_hyperpod_task_governance_is_named_by_each_sign_and_says_how_to_keep_one():
    # Given HyperPod's labelled team namespaces, its lender queues and its field manager on one of idleshare's queues
    cq = ours("ClusterQueue", "hyperpod-ns-a-clusterqueue")
    cq["metadata"]["managedFields"].append({"manager": "SageMaker-HyperPod-TaskGovernance", "operation": "Update"})
    gitops = ours("ClusterQueue", "hyperpod-ns-b-clusterqueue")
    gitops["metadata"]["managedFields"].append({"manager": "argocd-controller", "operation": "Apply"})
    namespaces = [f"hyperpod-ns-t{i}" for i in range(SAMPLE)]
    queues = ["hyperpod-ns-idle-resource-sharing-cq-2", "hyperpod-ns-idle-resource-sharing-cq-1", "platform-cq"]
    (issue,) = other_writer_issues([cq, gitops], namespaces, queues)
    # Then one error for the cluster names what was seen (a sample of namespaces, each lender queue, the manager
    # and where), and both ways out
    assert (issue.severity, issue.code) == ("error", HYPERPOD_TASK_GOVERNANCE_ACTIVE)
    assert f"namespaces labelled {HYPERPOD_MANAGED_NAMESPACE_LABEL}=true (hyperpod-ns-t0" in issue.message
    assert "hyperpod-ns-idle-resource-sharing-cq-1, hyperpod-ns-idle-resource-sharing-cq-2)" in issue.message
    assert "field manager SageMaker-HyperPod-TaskGovernance on ClusterQueue/hyperpod-ns-a-clusterqueue" in issue.message
    assert "platform-cq" not in issue.message and "argocd" not in issue.message
    assert "idleshare quota import" in issue.message and "delete-compute-quota" in issue.message
    assert "idleshare uninstall" in issue.message


@pytest.mark.parametrize(
    ("namespaces", "queues", "manager"),
    [(["hyperpod-ns-x"], [], ""), ([], ["hyperpod-ns-idle-resource-sharing-cq-1"], ""), ([], [], "hyperpod-tg")],
)
def test_each_sign_alone_is_enough(namespaces, queues, manager):
    cq = ours("ClusterQueue", "hyperpod-ns-a-clusterqueue")
    if manager:
        cq["metadata"]["managedFields"].append({"manager": manager, "operation": "Apply"})
    assert codes(other_writer_issues([cq], namespaces, queues)) == [HYPERPOD_TASK_GOVERNANCE_ACTIVE]


def test_a_cluster_without_other_writers_has_no_such_issue():
    # idleshare's own team queues are named hyperpod-ns-* too: a name alone is no sign
    cq = ours("ClusterQueue", "hyperpod-ns-idle-resource-sharing-clusterqueue")
    cq["metadata"]["managedFields"].append({"manager": "kueue", "operation": "Update", "subresource": "status"})
    assert other_writer_issues([cq], [], ["hyperpod-ns-idle-resource-sharing-clusterqueue"]) == []


# -- through the recompute, on fakes ------------------------------------------------------------------


def test_the_recompute_names_them_in_the_pool_counts_them_and_keeps_writing_its_spec(cluster, capsys):
    store, kube, _, r = cluster
    r.recompute("demo")
    # Given an orchestrator that wrote a's ClusterQueue's status, and a HyperPod-labelled namespace
    key = ("ClusterQueue", "", "hyperpod-ns-a-clusterqueue")
    kube.objects[key]["status"] = {"effectiveQuotas": EFFECTIVE}
    kube.objects[("Namespace", "", "hyperpod-ns-c")] = {
        "kind": "Namespace",
        "metadata": {"name": "hyperpod-ns-c", "labels": {HYPERPOD_MANAGED_NAMESPACE_LABEL: "true"}},
    }
    spec = copy.deepcopy(kube.objects[key]["spec"])
    kube.objects[key]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "0"
    capsys.readouterr()
    out = r.recompute("demo")
    # Then both are named in the pool (a new generation), idleshare still writes its spec, and the gauge counts one
    issues = {i["code"]: i for i in store.pools["demo"].pool["issues"]}
    assert issues[DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE]["subject"] == "ClusterQueue/hyperpod-ns-a-clusterqueue"
    assert "hyperpod-ns-c" in issues[HYPERPOD_TASK_GOVERNANCE_ACTIVE]["message"]
    assert out.changed and kube.objects[key]["spec"] == spec
    emit_recompute(out)
    (gauge,) = [d for d in emf_documents(capsys.readouterr().out) if names.METRIC_QUOTA_OVERRIDDEN in d]
    assert gauge[names.METRIC_QUOTA_OVERRIDDEN] == [1.0] and gauge[names.METRIC_DIM_CLUSTER] == "demo"
    assert sorted(gauge["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]) == sorted(
        [names.METRIC_DIM_CLUSTER, "service"]
    )
    # And the HyperPod namespace is left exactly as it was
    assert kube.objects[("Namespace", "", "hyperpod-ns-c")]["metadata"]["labels"] == {
        HYPERPOD_MANAGED_NAMESPACE_LABEL: "true"
    }


def test_a_failed_read_keeps_the_last_findings_and_the_gauge_is_gone_once_cleared(cluster, monkeypatch, capsys):
    _, kube, _, r = cluster
    r.recompute("demo")
    key = ("ClusterQueue", "", "hyperpod-ns-a-clusterqueue")
    kube.objects[key]["status"] = {"effectiveQuotas": EFFECTIVE}
    first = r.recompute("demo")
    # When the names read fails: no new generation, the finding stands (not observed is not observed absent)
    monkeypatch.setattr(kube, "list_cluster_queue_names", lambda s: (_ for _ in ()).throw(RetryableError("x")))
    again = r.recompute("demo")
    assert not again.changed and again.generation == first.generation
    assert DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE in {i.code for i in again.result.issues}
    # When it reads again and the status is cleared: the issue is gone and so is the gauge (a trouble gauge is
    # emitted only above 0; its alarm treats missing data as not breaching: it clears)
    monkeypatch.undo()
    del kube.objects[key]["status"]
    capsys.readouterr()
    cleared = r.recompute("demo")
    assert cleared.changed and DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE not in {i.code for i in cleared.result.issues}
    emit_recompute(cleared)
    assert [d for d in emf_documents(capsys.readouterr().out) if names.METRIC_QUOTA_OVERRIDDEN in d] == []
    emit_recompute(first)
    (gauge,) = [d for d in emf_documents(capsys.readouterr().out) if names.METRIC_QUOTA_OVERRIDDEN in d]
    assert gauge[names.METRIC_QUOTA_OVERRIDDEN] == [1.0]


# -- the adapter's projection, on an API server answer of v0.20's shape ----------------------------------


class _Canned(QuietJsonHandler):
    answers: ClassVar[dict[str, Any]] = {}
    seen: ClassVar[list[tuple[str, str]]] = []

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        self.seen.append((self.path, self.headers.get("Accept", "")))
        self.answer_json(self.answers.get(path, {"kind": "List", "items": [], "metadata": {}}))


DISCOVERY = {
    "/apis/kueue.x-k8s.io": {"kind": "APIGroup", "name": "kueue.x-k8s.io", "versions": [{"version": "v1beta2"}]},
    "/apis/kueue.x-k8s.io/v1beta2": {
        "kind": "APIResourceList",
        "resources": [{"name": k.lower() + "s", "kind": k} for k in (*KINDS, "Workload") if k != "Namespace"],
    },
}
"""A Kueue of v0.20's shape serves v1beta2 only."""


@pytest.fixture
def canned() -> Iterator[tuple[type[_Canned], LightkubeCluster]]:
    _Canned.answers, _Canned.seen = {}, []
    with serving(_Canned) as url:
        adapter = LightkubeCluster(url, None, None, name="canned")
        try:
            yield _Canned, adapter
        finally:
            adapter.close()


def test_the_managed_list_keeps_effective_quotas_and_other_managers_by_name_only(canned):
    handler, adapter = canned
    cq = ours("ClusterQueue", "hyperpod-ns-a-clusterqueue")
    big = {"f:status": {"f:conditions": {f'k:{{"type":"T{i}"}}': {} for i in range(50)}}}
    cq["metadata"]["managedFields"] += [
        {"manager": "kueue", "operation": "Update", "subresource": "status", "fieldsV1": big},
        DQO_STATUS_ENTRY,
        {"manager": "sagemaker-tg", "operation": "Apply", "fieldsV1": {"f:spec": {"f:cohort": {}}}},
    ]
    cq["status"] = {"conditions": [{"type": "Active", "status": "True"}], "effectiveQuotas": EFFECTIVE}
    lq = ours("LocalQueue", "hyperpod-ns-a-localqueue", status={"effectiveQuotas": EFFECTIVE})
    handler.answers = {
        **DISCOVERY,
        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues": {"kind": "ClusterQueueList", "items": [cq], "metadata": {}},
        "/apis/kueue.x-k8s.io/v1beta2/localqueues": {"kind": "LocalQueueList", "items": [lq], "metadata": {}},
    }
    listed = {o["kind"]: o for o in adapter.list_managed()}
    got = listed["ClusterQueue"]
    # of the status only effectiveQuotas; a LocalQueue's status is not read at all
    assert got["status"] == {"effectiveQuotas": EFFECTIVE} and "status" not in listed["LocalQueue"]
    # idleshare's entry whole; the others by name, and the status writer of effectiveQuotas with that path only
    assert got["metadata"]["managedFields"] == [
        cq["metadata"]["managedFields"][0],
        {"manager": "kueue", "operation": "Update", "subresource": "status"},
        {**DQO_STATUS_ENTRY, "fieldsV1": {"f:status": {"f:effectiveQuotas": {}}}},
        {"manager": "sagemaker-tg", "operation": "Apply"},
    ]
    issues = other_writer_issues(listed.values(), [], [])
    assert codes(issues) == [DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE, HYPERPOD_TASK_GOVERNANCE_ACTIVE]
    assert "field manager kueue-dqo-controller" in issues[0].message


def test_the_queue_names_are_read_as_a_table_without_the_objects_page_by_page(canned):
    handler, adapter = canned
    path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
    columns = [{"name": "Name"}, {"name": "Cohort"}]
    pages = [
        {"kind": "Table", "columnDefinitions": columns, "rows": [{"cells": ["a", "x"]}], "metadata": {"continue": "t"}},
        {"kind": "Table", "columnDefinitions": columns, "rows": [{"cells": ["b", "y"]}], "metadata": {}},
    ]

    class Paged(dict):
        def get(self, key, default=None):  # the first request answers page 1, the one with continue=t page 2
            if key != path:
                return DISCOVERY.get(key, default)
            return pages[1] if "continue=t" in handler.seen[-1][0] else pages[0]

    handler.answers = Paged()
    assert adapter.list_cluster_queue_names("app.kubernetes.io/managed-by!=idleshare") == ["a", "b"]
    first, _ = [(url, accept) for url, accept in handler.seen if url.startswith(path)]
    assert "as=Table" in first[1] and "includeObject=None" in first[0] and "managed-by%21%3Didleshare" in first[0]


def test_the_docs_name_the_issues_the_metric_and_the_alarm_as_the_code_does():
    from pathlib import Path

    from infra.constructs import observability

    docs = Path(__file__).resolve().parents[2] / "docs"
    operations, spec, decisions = ((docs / f).read_text() for f in ("operations.md", "spec.md", "decisions.md"))
    for code in (DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE, HYPERPOD_TASK_GOVERNANCE_ACTIVE):
        assert f"`{code}`" in operations and f"`{code}`" in spec
    metric = names.METRIC_QUOTA_OVERRIDDEN
    assert f"`{metric}` > 0" in operations and f"| `{metric}` |" in operations and f"`{metric}`" in spec
    assert f"| `QuotaOverriddenAlarm-<c>` | `{metric}` > 0 |" in operations
    assert '"QuotaOverriddenAlarm"' in Path(observability.__file__).read_text()
    assert HYPERPOD_MANAGED_NAMESPACE_LABEL in operations and HYPERPOD_MANAGED_NAMESPACE_LABEL in decisions
    assert "IDLESHARE_KUEUE_VERSION=v0.20" in operations
