"""The memory benchmark at a tiny size (DynamoDB Local + the real kube-apiserver, recomputes in child
processes): it measures something plausible and checks its target. No figure is asserted."""

from __future__ import annotations

import pytest

from tests.bench import bench_common as bc
from tests.bench import bench_memory
from tests.integration.conftest import aws_fake_env, dynamodb_local, dynamodb_local_server  # noqa: F401

pytestmark = pytest.mark.integration


def test_a_small_recompute_is_measured_in_a_child_and_checked_against_the_lambda(dynamodb_local, kube_stack):  # noqa: F811
    # Given 40 nodes in the real apiserver and 3 teams, When the memory benchmark runs
    m = bench_memory.measure(40, dynamodb_local, n_teams=3, stack=kube_stack)
    # Then the child grew past its imports, the traced heap and the NodeList's size are positive
    assert m["initial"]["rss"] >= m["initial"]["rss_before"] > 10 * bc.MB
    assert m["traced"]["traced_peak"] > 0
    assert m["seed_ms"] > 0 and m["json"]["items"] == 40 and m["json"]["size"] > m["json"]["bytes"] / 10
    # and the rows check the RSS against half a 512 MB Lambda
    rows = {r.what: r for r in bench_memory.rows(m)}
    assert rows["recompute 40: max RSS"].ok is (m["initial"]["rss"] <= 256 * bc.MB)
    assert rows["recompute 40: max RSS"].target == "<= 256 MB"
