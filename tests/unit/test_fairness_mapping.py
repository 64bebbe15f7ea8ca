"""The SchedulerConfig's fairness settings -> what idleshare writes into Kueue; the Kueue Configuration they need."""

from __future__ import annotations

import json
from typing import Any

import pytest

from idleshare.domain.kueue import desired_objects
from idleshare.domain.kueue_config import (
    FAIR_SHARE_WITHOUT_KUEUE_FAIR_SHARING,
    KUEUE_CONFIG_UNREADABLE,
    KUEUE_FAIR_SHARING_WITH_FAIR_SHARE_DISABLED,
    KUEUE_INTEGRATION_MISSING,
    KueueConfig,
    KueueConfigReading,
    kueue_config_issues,
    with_kueue_config,
)
from idleshare.domain.model import PriorityClass, SchedulerConfig, Settings, Snapshot
from idleshare.domain.pool import compute
from idleshare.errors import NotFoundError, PermanentError
from idleshare.parse.errors import InputError
from idleshare.parse.kueue_config import parse_kueue_config, read_kueue_config
from idleshare.parse.quotas import parse_quotas
from tests.builders import node, quota_body
from tests.fakes import KUEUE_CONFIG_FAIR_SHARING, FakeKube

KEY = "controller_manager_config.yaml"
V1BETA2 = "config.kueue.x-k8s.io/v1beta2"
FAIR_ON = KueueConfig(True, ("LessThanOrEqualToFinalShare", "LessThanInitialShare"), ("batch/job",))
FAIR_OFF = KueueConfig(False, (), ("batch/job",))


def cluster_queues(scheduler: SchedulerConfig, **quota: Any) -> dict[str, dict[str, Any]]:
    quotas = parse_quotas([quota_body("alpha", **quota)])
    result = compute(Snapshot(nodes=(node("n1"), node("n2")), quotas=quotas, scheduler_config=scheduler))
    objects = desired_objects(result, scheduler, Settings())
    return {o["metadata"]["name"]: o for o in objects}


# -- the mapping -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fair_share", "weight", "written", "preempt", "within"),
    [
        (True, 3, {"weight": "3"}, "LowerPriority", "LowerPriority"),  # FairShareWeight as is
        (True, 100, {"weight": "100"}, "Never", "Never"),
        (True, 1, {"weight": "1"}, None, "Never"),
        (True, 0, {"weight": "0"}, None, "Never"),  # HyperPod's lowest = Kueue's 0: borrows only what nobody wants
        (True, None, None, None, "Never"),  # no weight given: Kueue's default 1
        (False, 3, None, None, "Never"),  # FairShare Disabled: no weight (first come, first served)
        (False, 0, None, None, "Never"),
    ],
)
def test_fair_share_weight_and_preempt_team_tasks_map_to_the_cluster_queue(
    fair_share, weight, written, preempt, within
):
    objects = cluster_queues(SchedulerConfig(fair_share=fair_share), weight=weight, preempt=preempt)
    spec = objects["hyperpod-ns-alpha-clusterqueue"]["spec"]
    assert spec.get("fairSharing") == written
    assert spec["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": within}  # lenders always reclaim


@pytest.mark.parametrize(
    ("classes", "written"),
    [
        ((), {}),
        ((PriorityClass("inference", 100),), {"inference-priority": 100}),
        (
            (PriorityClass("inference", 100), PriorityClass("training", 10)),
            {"inference-priority": 100, "training-priority": 10},
        ),
        ((PriorityClass("batch", 0),), {"batch-priority": 0}),
    ],
)
def test_priority_classes_map_to_workload_priority_class_values(classes, written):
    objects = cluster_queues(SchedulerConfig(priority_classes=classes)).values()
    assert {o["metadata"]["name"]: o["value"] for o in objects if o["kind"] == "WorkloadPriorityClass"} == written


# -- Kueue's Configuration ---------------------------------------------------------------------------------------
def config_map(doc: Any) -> dict[str, str]:
    return {KEY: doc if isinstance(doc, str) else json.dumps(doc)}


def conf(api: str = V1BETA2, **sections: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": "Configuration", **sections}


V1BETA1 = "config.kueue.x-k8s.io/v1beta1"


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            conf(fairSharing={"preemptionStrategies": ["LessThanInitialShare"]}),
            KueueConfig(True, ("LessThanInitialShare",), ("batch/job",)),
        ),
        (conf(), FAIR_OFF),  # no section: off (v1beta2)
        (conf(fairSharing={}), KueueConfig(True, (), ("batch/job",))),
        (
            conf(integrations={"frameworks": ["kubeflow.org/pytorchjob"]}),
            KueueConfig(False, (), ("kubeflow.org/pytorchjob",)),
        ),
        (conf(integrations={"frameworks": []}), FAIR_OFF),  # the default frameworks
        (conf(V1BETA1, fairSharing={"enable": True}), KueueConfig(True, (), ("batch/job",))),
        (conf(V1BETA1, fairSharing={"enable": False}), FAIR_OFF),
        (
            "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing:\n  preemptionStrategies:"
            " [LessThanOrEqualToFinalShare]\nintegrations:\n  frameworks: [batch/job, pod]\n",
            KueueConfig(True, ("LessThanOrEqualToFinalShare",), ("batch/job", "pod")),
        ),
        (KUEUE_CONFIG_FAIR_SHARING, FAIR_ON),  # the devkit stack's
    ],
)
def test_the_configuration_says_whether_fair_sharing_is_on(doc, expected):
    assert parse_kueue_config(config_map(doc)) == expected


@pytest.mark.parametrize(
    "data",
    [
        {},
        {KEY: "a: [unclosed"},
        {KEY: "just a string"},
        config_map({"apiVersion": "v1", "kind": "ConfigMap"}),
        config_map(conf(fairSharing="yes")),
        config_map(conf(integrations={"frameworks": "batch/job"})),
        {"a.yaml": "x", "b.yaml": "y"},
    ],
)
def test_anything_but_a_configuration_is_refused(data):
    with pytest.raises(InputError):
        parse_kueue_config(data)


@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        (NotFoundError("configmaps not found", operation="get", status=404), "NotFoundError"),
        (PermanentError("HTTP 403: forbidden", operation="get", status=403), "PermanentError"),
        ({KEY: "garbage: ["}, "not YAML"),
        (None, None),  # a transient error is not read, so no issue comes and goes
    ],
)
def test_an_unreadable_configuration_is_a_reading_with_its_reason(stored, problem):
    kube = FakeKube([])
    kube.config_maps[("kueue-system", "kueue-manager-config")] = stored
    kube.down = stored is None
    reading = read_kueue_config(kube.get_config_map)
    if problem is None:
        assert reading is None
    else:
        assert reading is not None and reading.config is None and problem in reading.problem


# -- the named issues --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reading", "fair_share", "codes"),
    [
        (KueueConfigReading(FAIR_ON), True, []),
        (KueueConfigReading(FAIR_OFF), False, []),
        (KueueConfigReading(FAIR_OFF), True, [FAIR_SHARE_WITHOUT_KUEUE_FAIR_SHARING]),
        (KueueConfigReading(FAIR_ON), False, [KUEUE_FAIR_SHARING_WITH_FAIR_SHARE_DISABLED]),
        (KueueConfigReading(KueueConfig(True, (), ("pod",))), True, [KUEUE_INTEGRATION_MISSING]),
        (KueueConfigReading(None, "PermanentError: HTTP 403"), True, [KUEUE_CONFIG_UNREADABLE]),
        (None, True, []),  # not read
    ],
)
def test_what_kueue_will_not_do_is_a_named_issue(reading, fair_share, codes):
    issues = kueue_config_issues(reading, SchedulerConfig(fair_share=fair_share))
    assert [i.code for i in issues] == codes
    assert all(i.subject == "kueue-system/kueue-manager-config" for i in issues)


def test_unreadable_is_a_warning_a_missing_integration_an_error_and_both_join_the_pools_issues():
    result = compute(Snapshot(nodes=()))
    unreadable = with_kueue_config(result, KueueConfigReading(None, "NotFoundError: 404"), SchedulerConfig())
    missing = with_kueue_config(result, KueueConfigReading(KueueConfig(True, (), ())), SchedulerConfig())
    assert [(i.severity, i.code) for i in unreadable.issues] == [("warning", KUEUE_CONFIG_UNREADABLE)]
    assert "NotFoundError: 404" in unreadable.issues[0].message
    assert [(i.severity, i.code) for i in missing.issues] == [("error", KUEUE_INTEGRATION_MISSING)]
    assert with_kueue_config(result, KueueConfigReading(FAIR_ON), SchedulerConfig()) is result
