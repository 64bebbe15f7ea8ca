"""The README's read-only preview runs exactly as written: its shell blocks, verbatim, with `kubectl`, `aws` and
`open` standing in for the real ones (they check their arguments and print fixture files: the example cluster's
nodes, and its quotas as `aws sagemaker list-compute-quotas` prints them per botocore's real model)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from idleshare_cli.plan import plan
from tests import sagemaker_stub

REPO = Path(__file__).parents[2]
SECTION = "## Preview your cluster, read-only"


def preview_blocks() -> list[str]:
    readme = (REPO / "README.md").read_text()
    start = readme.index(SECTION)
    end = readme.index("\n## ", start + len(SECTION))
    return re.findall(r"```bash\n(.*?)```", readme[start:end], re.S)


AGENT = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "node-agent", "namespace": "kube-system"},
    "spec": {
        "selector": {"matchLabels": {"app": "node-agent"}},
        "template": {
            "metadata": {"labels": {"app": "node-agent"}},
            "spec": {"containers": [{"name": "agent", "image": "agent", "resources": {"requests": {"cpu": "500m"}}}]},
        },
    },
}
"""A DaemonSet on every node that does not taint it away (the m5s): what the deployed default subtracts."""


def cluster_dump() -> dict[str, object]:
    """``kubectl get nodes,daemonsets -A -o json`` of the example cluster with one DaemonSet."""
    items = json.loads((REPO / "events/examples/nodes.json").read_text())["items"]
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [*items, AGENT]}


def fake(bin_dir: Path, name: str, expected_args: str, then: str) -> None:
    """An executable ``name`` that fails loudly unless called with ``expected_args``, and else runs ``then``."""
    script = bin_dir / name
    script.write_text(
        "#!/bin/bash\n"
        f'if [ "$*" != "{expected_args}" ]; then echo "fake {name}: unexpected arguments: $*" >&2; exit 64; fi\n'
        f"{then}\n"
    )
    script.chmod(0o755)


@pytest.fixture
def shell(tmp_path: Path):
    """Runs a README block in an empty directory, as a newcomer's shell in this checkout would."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    work.mkdir()
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps(cluster_dump()))
    (tmp_path / "quotas.json").write_text(sagemaker_stub.list_compute_quotas_output())
    fake(bin_dir, "kubectl", "get nodes,daemonsets -A -o json", f"cat {nodes}")
    arn = sagemaker_stub.CLUSTER_ARN
    fake(bin_dir, "aws", f"sagemaker list-compute-quotas --cluster-arn {arn}", f"cat {tmp_path / 'quotas.json'}")
    for opener in ("open", "xdg-open"):
        fake(bin_dir, opener, "pool.html", f'echo "$PWD/$1" >> {tmp_path / "opened"}')
    (work / "idleshare").write_text(f'#!/bin/bash\nexec {REPO / "idleshare"} "$@"\n')  # `./idleshare`, this checkout's
    (work / "idleshare").chmod(0o755)

    def run(block: str) -> Path:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "HYPERPOD_CLUSTER_ARN": arn}
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block], cwd=work, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "opened").read_text().split() == [str(work / "pool.html")]
        (tmp_path / "opened").unlink()
        return work / "pool.html"

    return run


def test_the_readme_shows_the_hyperpod_preview_and_the_plain_eks_one():
    hyperpod, plain = preview_blocks()
    assert "list-compute-quotas" in hyperpod and "--quotas" in hyperpod
    assert "aws " not in plain and "--quotas" not in plain


def test_the_hyperpod_preview_runs_as_written_and_shows_the_teams_of_the_imported_quotas(shell):
    # Given the cluster's nodes and its quotas as the AWS CLI lists them
    hyperpod, _ = preview_blocks()
    # When the README's commands run, verbatim
    page = shell(hyperpod).read_text()
    # Then the page is the report of that cluster: every team of the listed quotas is on it
    teams = {q["ComputeQuotaTarget"]["TeamName"] for q in sagemaker_stub.example_quotas()}
    assert page.startswith("<!DOCTYPE html>") and teams and all(team in page for team in teams)


def test_the_plain_eks_preview_runs_without_quotas_and_shows_the_capacity_alone(shell):
    _, plain = preview_blocks()
    page = shell(plain).read_text()
    teams = {q["ComputeQuotaTarget"]["TeamName"] for q in sagemaker_stub.example_quotas()}
    assert "ml.p5.48xlarge" in page and not any(team in page for team in teams)


def test_plan_reads_list_compute_quotas_output_as_it_reads_the_described_quotas():
    # Given the same quotas described (DescribeComputeQuota shape) and listed by the AWS CLI (ComputeQuotaSummary)
    nodes = (REPO / "events/examples/nodes.json").read_bytes()
    described = (REPO / "events/examples/quotas.json").read_bytes()
    listed = sagemaker_stub.list_compute_quotas_output()
    assert json.loads(listed)["ComputeQuotaSummaries"]  # botocore's model accepted the stubbed response
    # Then the plan of each is the same: the same teams with the same grants, the same pool
    from_list, from_described = plan(nodes, listed)[0], plan(nodes, described)[0]
    assert from_list.teams and from_list.teams == from_described.teams
    assert from_list.unallocated == from_described.unallocated


def test_plan_without_quotas_lends_the_whole_capacity_and_grants_nothing():
    nodes = (REPO / "events/examples/nodes.json").read_bytes()
    result, manifests = plan(nodes, None)
    assert result.teams == {} and result.capacity and result.unallocated == result.capacity
    assert not any(m["kind"] == "ClusterQueue" for m in manifests)


def test_the_deploy_steps_end_with_governed_teams_through_commands_the_cli_has():
    # Given the deploy block the README links to (docs/getting-started.md)
    readme = (REPO / "docs/getting-started.md").read_text()
    start = readme.index("## Deploying (`cdk deploy`)")
    block = re.findall(r"```bash\n(.*?)```", readme[start:], re.S)[0]
    commands = [line.split("#")[0].split() for line in block.splitlines() if line.startswith("./idleshare ")]
    # Then it ends with importing the quotas, a recompute and the pool, after the RBAC
    assert [c[1:3] for c in commands] == [
        ["quota", "import"],
        ["quota", "import"],
        ["recalc", "--cluster"],
        ["pool", "show"],
    ]
    assert block.index("kubectl apply -f infra/k8s/rbac.yaml") < block.index("./idleshare quota import")
    # and each one, its placeholders filled in, is a command line the CLI accepts
    from idleshare_cli.main import build_parser

    fill = {"<id>": "ml-cluster", "<arn>": sagemaker_stub.CLUSTER_ARN}
    for words in commands:
        args = build_parser().parse_args([fill.get(w, w) for w in words[1:]])
        assert args.cluster == "ml-cluster" and callable(args.func)


def test_the_recipes_dump_is_read_with_its_daemonsets_as_the_deployed_default_reads_them():
    # Given the nodes and DaemonSets as the README's recipe dumps them
    dump = json.dumps(cluster_dump()).encode()
    nodes_only = (REPO / "events/examples/nodes.json").read_bytes()
    # Then plan subtracts what the DaemonSet requests on each node it runs on (two m5s: 2 x 500m), as the recompute
    with_agent, without = plan(dump, None)[0], plan(nodes_only, None)[0]
    m5 = "ml.m5.2xlarge"
    assert without.capacity[m5]["cpu"] - with_agent.capacity[m5]["cpu"] == 1
    assert all(preview_blocks()[i].startswith("kubectl get nodes,daemonsets -A -o json > nodes.json") for i in (0, 1))
