"""docs/spec.md §3 names: a team's namespace and queues must be valid Kubernetes names in its cluster."""

from __future__ import annotations

import pytest

from idleshare.domain.model import Settings, Snapshot
from idleshare.domain.naming import LABEL_VALUE_MAX, local_queue_name, max_team_name_length, team_name_problem
from idleshare.domain.pool import compute
from tests.builders import P5, entry, nodes, quota


@pytest.mark.parametrize(
    ("team", "prefix", "ok"),
    [
        ("t" * 40, "hyperpod-ns-", True),
        ("t" * 41, "hyperpod-ns-", False),
        ("t" * 49, "ns-", True),  # a shorter prefix leaves room for a longer team
        ("t" * 50, "hyperpod-ns-", False),
        ("team", "Upper-", False),  # the namespace would not be a DNS label
    ],
)
def test_team_name_problem(team, prefix, ok):
    problem = team_name_problem(team, Settings(namespace_prefix=prefix))
    assert problem is None if ok else problem  # a problem says what it is


def test_a_team_whose_queues_cannot_be_named_is_left_out_and_reported_not_fatal():
    long_team = "t" * 41
    quotas = (quota(long_team, entry(P5, accelerators=8)), quota("ok", entry(P5, accelerators=4)))
    result = compute(Snapshot(nodes=tuple(nodes("p5", P5, 2)), quotas=quotas))
    assert set(result.teams) == {"ok"}
    assert result.allocated[P5]["nvidia.com/gpu"] == 4  # the left-out team reserves nothing it cannot use
    issue = next(i for i in result.issues if i.code == "InvalidTeamName")
    # the default prefix leaves the 40 characters SageMaker's pattern was written for: hyperpod-ns-<team>-localqueue
    # is a label value on every job, 12 + 40 + 11 = 63
    assert max_team_name_length(Settings()) == 40 and len(local_queue_name("t" * 40, Settings())) == LABEL_VALUE_MAX
    assert issue.severity == "error" and issue.subject == long_team and "40" in issue.message
