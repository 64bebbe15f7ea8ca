"""The pool's named issues reach a metric (besides the API and the CLI): one gauge per (cluster, severity), so that
the number of metrics is bounded whatever the issues; the codes are in the pool document and the log line."""

from __future__ import annotations

import pytest

from idleshare import names
from idleshare.domain.kueue_config import KueueConfig, KueueConfigReading, with_kueue_config
from idleshare.domain.model import SchedulerConfig, Snapshot
from idleshare.domain.pool import compute
from idleshare.runtime.metrics import emit_recompute
from idleshare.service.recompute import Outcome
from infra.constructs.observability import ISSUE_DIMS
from tests.builders import node
from tests.fakes import emf_documents


@pytest.mark.parametrize(
    ("fair_share", "kueue_fair_sharing", "expected"),
    [
        (True, False, {"warning": [1.0]}),  # FairShareWithoutKueueFairSharing
        (False, True, {"warning": [1.0]}),  # KueueFairSharingWithFairShareDisabled
        (True, True, {}),
    ],
)
def test_the_pool_issues_are_a_gauge_per_severity(capsys, fair_share, kueue_fair_sharing, expected) -> None:
    scheduler = SchedulerConfig(fair_share=fair_share)
    result = compute(Snapshot(nodes=(node("n1"),), scheduler_config=scheduler))
    result = with_kueue_config(result, KueueConfigReading(KueueConfig(fair_sharing=kueue_fair_sharing)), scheduler)
    capsys.readouterr()
    emit_recompute(Outcome("c1", 1, True, result=result))
    emitted = emf_documents(capsys.readouterr().out)
    gauges = [r for r in emitted if names.METRIC_POOL_ISSUES in r]
    assert {r[names.METRIC_DIM_SEVERITY]: r[names.METRIC_POOL_ISSUES] for r in gauges} == expected
    for r in gauges:  # exactly the dimensions the dashboard's search names
        assert sorted(r["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]) == sorted(ISSUE_DIMS)
        assert r[names.METRIC_DIM_CLUSTER] == "c1" and r["service"] == names.SERVICE
