"""`idleshare plan --format table`'s footer names the API version it writes, from the one constant."""

from __future__ import annotations

import json
from pathlib import Path

from idleshare.domain.kueue import KUEUE_API
from idleshare_cli.main import main

EXAMPLES = Path(__file__).parents[2] / "events" / "examples"


def test_the_plan_footer_counts_the_objects_of_the_api_it_writes(capsys) -> None:
    argv = ["plan", "--nodes", str(EXAMPLES / "nodes.json"), "--quotas", str(EXAMPLES / "quotas.json")]
    assert main([*argv, "--format", "json"]) == 0
    everything = json.loads(capsys.readouterr().out)["manifests"]
    manifests = [m for m in everything if m.get("apiVersion") == KUEUE_API]
    namespaces = [m for m in everything if m.get("kind") == "Namespace"]
    admission = [m for m in everything if m.get("apiVersion") == "admissionregistration.k8s.io/v1"]
    assert len(manifests) + len(namespaces) + len(admission) == len(everything) and namespaces and len(admission) == 2
    assert main([*argv, "--format", "table"]) == 0
    footer = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert KUEUE_API == "kueue.x-k8s.io/v1beta2"
    assert (
        footer
        == f"{len(manifests)} kueue.x-k8s.io/v1beta2 objects, {len(namespaces)} Namespaces, 1 ValidatingAdmissionPolicy"
        " and 1 ValidatingAdmissionPolicyBinding (see --format json)"
    )


def test_plan_writes_the_version_asked_for_and_names_it(capsys) -> None:
    """`--kueue-api v1alpha1` (Kueue v0.12): the Cohort in v1alpha1, the rest in v1beta1 under its field names,
    and the pool names the release; the default stays v1beta2 with no kueueApi (no cluster was asked)."""
    argv = ["plan", "--nodes", str(EXAMPLES / "nodes.json"), "--quotas", str(EXAMPLES / "quotas.json")]
    assert main([*argv, "--format", "json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main([*argv, "--format", "json", "--kueue-api", "v1alpha1"]) == 0
    old = json.loads(capsys.readouterr().out)
    versions = {m["kind"]: m["apiVersion"] for m in old["manifests"]}
    assert versions["Cohort"] == "kueue.x-k8s.io/v1alpha1" and versions["ClusterQueue"] == "kueue.x-k8s.io/v1beta1"
    cq = next(m for m in old["manifests"] if m["kind"] == "ClusterQueue")
    assert "cohort" in cq["spec"] and "cohortName" not in cq["spec"]
    assert old["kueueApi"]["kueue"] == "v0.12" and "kueueApi" not in default
    assert len(old["manifests"]) == len(default["manifests"])
    assert main([*argv, "--format", "table", "--kueue-api", "v1alpha1"]) == 0
    footer = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert "kueue.x-k8s.io/v1alpha1, kueue.x-k8s.io/v1beta1 objects" in footer
