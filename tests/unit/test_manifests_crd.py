"""Every object the engine emits passes the Kueue v0.19.2 CRDs (schema + CEL) and the webhook-only rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.kubesim.crds import validate, webhook_errors
from idleshare.cli.plan import plan
from tests.bench.synthetic import make_cluster

EXAMPLES = Path(__file__).parents[2] / "events" / "examples"


def example_objects(scheduler: bool = True):
    _, manifests = plan(
        (EXAMPLES / "nodes.json").read_bytes(),
        (EXAMPLES / "quotas.json").read_bytes(),
        (EXAMPLES / "scheduler-config.json").read_bytes() if scheduler else None,
    )
    return manifests


@pytest.mark.parametrize("scheduler", [True, False])
def test_example_cluster_objects_are_accepted(scheduler):
    manifests = example_objects(scheduler)
    kinds = {m["kind"] for m in manifests}
    assert {"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "Namespace"} <= kinds
    for m in manifests:
        if m["apiVersion"].startswith("kueue.x-k8s.io"):
            assert validate(m) == [], m["metadata"]["name"]
            assert webhook_errors(m) == [], m["metadata"]["name"]


def test_synthetic_cluster_with_many_teams_and_mig_objects_are_accepted():
    nodes, quotas = make_cluster(300, n_teams=40, seed=3)
    _, manifests = plan(nodes, quotas)
    checked = 0
    for m in manifests:
        if m["apiVersion"].startswith("kueue.x-k8s.io"):
            assert validate(m) == [], m["metadata"]["name"]
            assert webhook_errors(m) == [], m["metadata"]["name"]
            checked += 1
    assert checked > 80


def test_the_validator_would_catch_a_broken_engine_object():
    cq = next(m for m in example_objects() if m["kind"] == "ClusterQueue")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()  # fewer resources than coveredResources
    assert validate(cq) != []
