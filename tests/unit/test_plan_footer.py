"""`idleshare plan --format table`'s footer names the API version it writes, from the one constant."""

from __future__ import annotations

import json
from pathlib import Path

from idleshare.cli.main import main
from idleshare.domain.kueue import KUEUE_API

EXAMPLES = Path(__file__).parents[2] / "events" / "examples"


def test_the_plan_footer_counts_the_objects_of_the_api_it_writes(capsys) -> None:
    argv = ["plan", "--nodes", str(EXAMPLES / "nodes.json"), "--quotas", str(EXAMPLES / "quotas.json")]
    assert main([*argv, "--format", "json"]) == 0
    everything = json.loads(capsys.readouterr().out)["manifests"]
    manifests = [m for m in everything if m.get("apiVersion") == KUEUE_API]
    namespaces = [m for m in everything if m.get("kind") == "Namespace"]
    assert len(manifests) + len(namespaces) == len(everything) and namespaces
    assert main([*argv, "--format", "table"]) == 0
    footer = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert KUEUE_API == "kueue.x-k8s.io/v1beta2"
    assert (
        footer
        == f"{len(manifests)} kueue.x-k8s.io/v1beta2 objects and {len(namespaces)} Namespaces (see --format json)"
    )
