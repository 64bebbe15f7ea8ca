"""Issue 40: `idleshare plan` runs the recompute's check of Kueue's schema limits: on 2 p5 nodes and 66 CPU nodes of
distinct instance types it emits 64 flavors in the one resource group, not 67, and shows the issue naming the rest;
``--kueue-api`` picks the Kueue whose limits apply."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from idleshare.domain import kueue_versions as kv
from idleshare.domain.kueue import limit_problems, webhook_violations
from idleshare_cli.main import main
from tests.builders import EC2_CPU_TYPES

P5 = "ml.p5.48xlarge"


def _node(name: str, instance_type: str, allocatable: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": instance_type}},
        "spec": {},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _files(tmp_path: Path) -> list[str]:
    p5 = {"cpu": "191450m", "memory": "2027264Mi", "nvidia.com/gpu": "8", "pods": "737"}
    items = [_node(f"p5-{i}", P5, p5) for i in range(2)]
    items += [
        _node(f"cpu-{i}", t, {"cpu": f"{v * 1000 - 90}m", "memory": f"{g * 1024 - 600}Mi", "pods": "110"})
        for i, (t, v, g) in enumerate(EC2_CPU_TYPES[:66])
    ]
    quotas = [
        {
            "Name": "alpha-quota",
            "ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": P5, "Count": 1}]},
            "ComputeQuotaTarget": {"TeamName": "alpha"},
            "ActivationState": "Enabled",
        }
    ]
    (tmp_path / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    (tmp_path / "quotas.json").write_text(json.dumps(quotas))
    return ["plan", "--nodes", str(tmp_path / "nodes.json"), "--quotas", str(tmp_path / "quotas.json")]


def test_plan_emits_64_flavors_and_names_the_rest(tmp_path: Path, capsys) -> None:
    argv = _files(tmp_path)
    assert main([*argv, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    kinds = Counter(m["kind"] for m in out["manifests"])
    assert kinds["ResourceFlavor"] == 64 and len(out["flavors"]) == 64
    assert [p for m in out["manifests"] for p in limit_problems(m, kv.HUB_ONLY.limits) + webhook_violations(m)] == []
    (issue,) = [i for i in out["issues"] if i["code"] == "FlavorsNotGoverned"]
    assert "3 not governed" in issue["message"] and "c5.large (1 node)" in issue["message"]
    assert out["ungoverned"]["flavors"] == ["c5.large", "c6i.large", "c7i.large"]
    # the table shows it too
    assert main([*argv, "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert "FlavorsNotGoverned" in table and "3 not governed" in table


def test_plan_for_an_older_kueue_holds_its_limits(tmp_path: Path, capsys) -> None:
    argv = _files(tmp_path)
    assert main([*argv, "--format", "json", "--kueue-api", "v1alpha1"]) == 0  # Kueue v0.12: 16 per group
    out = json.loads(capsys.readouterr().out)
    assert Counter(m["kind"] for m in out["manifests"])["ResourceFlavor"] == 16
    assert P5 in out["flavors"]
    limits = kv.release_limits("v0.12")
    assert [p for m in out["manifests"] for p in limit_problems(m, limits)] == []
