"""The plain-EKS quick start (docs/getting-started.md, linked from the README), as written: the quota files it
writes by hand, the preview over the cluster's nodes and DaemonSets (``kubectl`` a stand-in printing a plain EKS cluster: EC2 instance-type labels, no SageMaker
label), the config it puts in ``idleshare.config.json``, the admin commands, and the Job a team submits — each read
out of the document and held to what the code does (the Job's admission by Kueue on the real stack is
tests/e2e/test_admission_policy.py's, with the same label)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from idleshare.domain.cluster_settings import engine_settings
from idleshare.domain.model import Settings
from idleshare.domain.naming import local_queue_name, namespace_name
from idleshare.parse.quotas import parse_quotas
from idleshare.parse.requests import CreateQuota, parse
from idleshare_cli.main import build_parser
from infra.config import parse_config

REPO = Path(__file__).parents[2]
SECTION = "## Plain EKS: from nothing to governed teams"


def section() -> str:
    readme = (REPO / "docs" / "getting-started.md").read_text()
    start = readme.index(SECTION)
    return readme[start : readme.index("\n## ", start + len(SECTION))]


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section(), re.S)


def quota_files() -> dict[str, dict[str, Any]]:
    """The files the preview block writes with ``cat > NAME.json <<'JSON'``."""
    found = re.findall(r"cat > (\S+\.json) <<'JSON'\n(.*?)\nJSON\n", blocks("bash")[0], re.S)
    return {name: json.loads(text) for name, text in found}


def plain_eks_cluster() -> dict[str, Any]:
    """The example cluster's nodes as plain EKS publishes them: EC2 names, no SageMaker label or taint, and a
    DaemonSet beside them (``kubectl get nodes,daemonsets -A -o json`` is one List)."""
    nodes = json.loads((REPO / "events/examples/nodes.json").read_text())
    for node in nodes["items"]:
        labels = node["metadata"]["labels"]
        for key in list(labels):
            if key.startswith("sagemaker.amazonaws.com/"):
                del labels[key]
            elif labels[key].startswith("ml."):
                labels[key] = labels[key].removeprefix("ml.")
        node["spec"]["taints"] = [t for t in node["spec"].get("taints", []) if "sagemaker" not in t["key"]]
        node["metadata"].pop("finalizers", None)
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "node-exporter", "namespace": "monitoring", "uid": "d1"},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "x", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]}
            }
        },
    }
    nodes["items"].append(daemonset)
    return nodes


def run_block(block: str, tmp_path: Path) -> Path:
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir(parents=True)
    work.mkdir()
    dump = tmp_path / "cluster-dump.json"
    dump.write_text(json.dumps(plain_eks_cluster()))
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(
        '#!/bin/bash\nif [ "$*" != "get nodes,daemonsets -A -o json" ]; then echo "unexpected: $*" >&2; exit 64; fi\n'
        f"cat {dump}\n"
    )
    kubectl.chmod(0o755)
    (work / "idleshare").write_text(f'#!/bin/bash\nexec {REPO / "idleshare"} "$@"\n')
    (work / "idleshare").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=work, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return work


def readme_settings() -> Settings:
    (cluster,) = parse_config(json.loads(blocks("json")[0])).clusters
    return engine_settings(cluster.settings)


def test_the_quota_files_are_createcomputequota_bodies_the_admin_api_and_plan_accept():
    files = quota_files()
    assert len(files) >= 2
    for name, body in files.items():
        accepted = parse(CreateQuota, body)
        assert accepted.fields.Name == body["Name"], name
        (quota,) = parse_quotas(body, name)
        assert quota.team == body["ComputeQuotaTarget"]["TeamName"]
        # EC2 names, as a plain EKS cluster's nodes carry them
        assert all(not r.instance_type.startswith("ml.") for r in quota.resources)


def test_the_preview_runs_as_written_and_plans_a_queue_per_team_in_the_prefixed_namespace(tmp_path):
    # Given the README's preview block, verbatim, on a plain EKS cluster
    work = run_block(blocks("bash")[0], tmp_path)
    page = (work / "pool.html").read_text()
    # Then the page names every team of the files it wrote, on the EC2-named flavors
    teams = {b["ComputeQuotaTarget"]["TeamName"] for b in quota_files().values()}
    assert page.startswith("<!DOCTYPE html>") and all(team in page for team in teams)
    assert "p5.48xlarge" in page and "ml.p5.48xlarge" not in page
    # And the same command as JSON gives each team its ClusterQueue and the LocalQueue in <prefix><team>
    command = next(line for line in blocks("bash")[0].splitlines() if line.startswith("./idleshare plan"))
    json_command = command.replace("--format html > pool.html", "--format json > plan.json")
    run_block(blocks("bash")[0].replace(command, json_command), tmp_path / "again")
    plan = json.loads((tmp_path / "again/work/plan.json").read_text())
    prefix = command.split("--namespace-prefix ")[1].split()[0]
    assert prefix == readme_settings().namespace_prefix  # the preview and the deployed config say the same
    queues = {
        (o["metadata"].get("namespace"), o["metadata"]["name"]) for o in plan["manifests"] if o["kind"] == "LocalQueue"
    }
    assert queues == {(f"{prefix}{t}", f"{prefix}{t}-localqueue") for t in teams}
    assert set(plan["teams"]) == teams and plan["issues"] == []
    research = plan["teams"]["research"]["nominal"]["p5.48xlarge"]["nvidia.com/gpu"]
    assert research == "16"  # Count 2 of p5.48xlarge: 16 GPUs guaranteed


def test_the_config_is_a_plain_eks_cluster_with_the_chosen_prefix():
    (cluster,) = parse_config(json.loads(blocks("json")[0])).clusters
    assert cluster.hyperpod_cluster_arn is None
    assert cluster.settings.namespace_prefix == "team-"


def test_every_admin_command_is_one_the_cli_accepts_for_the_configured_cluster_and_the_files_written():
    (cluster,) = parse_config(json.loads(blocks("json")[0])).clusters
    commands = [line.split() for line in blocks("bash")[1].splitlines() if line.startswith("./idleshare ")]
    assert [c[1:3] for c in commands][-2:] == [["recalc", "--cluster"], ["pool", "show"]]
    created = {c[c.index("--file") + 1] for c in commands if c[1:3] == ["quota", "create"]}
    assert created == set(quota_files())
    for words in commands:
        args = build_parser().parse_args(words[1:])
        assert args.cluster == cluster.id and callable(args.func)


def test_the_job_a_team_submits_goes_to_its_localqueue_in_its_namespace():
    (job,) = [yaml.safe_load(b) for b in blocks("yaml")]
    settings = readme_settings()
    team = next(b["ComputeQuotaTarget"]["TeamName"] for b in quota_files().values() if b["Name"] == "research")
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert job["metadata"]["namespace"] == namespace_name(team, settings)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == local_queue_name(team, settings)
    # on an instance type its quota names
    (instance_type,) = {
        r["InstanceType"] for r in quota_files()["research.json"]["ComputeQuotaConfig"]["ComputeQuotaResources"]
    }
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": instance_type}
