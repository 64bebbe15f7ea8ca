"""A new operator's set-up, as the README states it: the tool versions in one sentence that says what the files
requiring them say (pyproject.toml, package.json, devkit/kube/go.mod), the licence where every tool looks for it,
and the config a deploy copies ignored by git."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).parents[2]
APACHE_2_0_MD5 = "3b83ef96387f14655fc854ddc3c6bd57"  # https://www.apache.org/licenses/LICENSE-2.0.txt, unmodified


def readme() -> str:
    return " ".join((REPO / "README.md").read_text().split())


def required() -> dict[str, str]:
    """What the files require: {tool: the version as the README writes it}."""
    python = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    node = json.loads((REPO / "package.json").read_text())["engines"]["node"]
    go = re.search(r"^go (\d+\.\d+)(?:\.\d+)?$", (REPO / "devkit/kube/go.mod").read_text(), re.MULTILINE)
    assert python.startswith(">=") and node.startswith(">=") and go, (python, node)
    return {"Python": f"≥ {python[2:]}", "Node.js": f"≥ {node[2:]}", "Go": go.group(1)}


def test_the_readme_states_each_tool_version_the_files_require():
    # Given the README's one **Tools** sentence
    tools = re.findall(r"\*\*Tools\*\*: (.*?)\. ", readme())
    assert len(tools) == 1, "one **Tools** sentence"
    stated = dict(re.findall(r"(Python|Node\.js|Go) ((?:≥ )?\d+(?:\.\d+)*)", tools[0]))
    # Then it says what pyproject.toml, package.json and go.mod require, and no other copy of a version is in it
    assert stated == required()
    assert "`go` (1." not in readme()


def test_the_licence_is_apache_2_0_everywhere_a_tool_reads_it():
    # LICENSE: the Apache License 2.0 as published, unmodified
    assert hashlib.md5((REPO / "LICENSE").read_bytes()).hexdigest() == APACHE_2_0_MD5
    # the package metadata (PEP 639) and package.json (npm) name it in SPDX
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert (project["license"], project["license-files"]) == ("Apache-2.0", ["LICENSE"])
    assert json.loads((REPO / "package.json").read_text())["license"] == "Apache-2.0"
    lock = json.loads((REPO / "package-lock.json").read_text())
    assert lock["packages"][""]["license"] == "Apache-2.0"
    # and the README says it
    assert "Apache License 2.0 ([LICENSE](LICENSE))" in readme()


def test_the_config_a_deploy_copies_is_ignored_by_git():
    # Given the deploy step (docs/getting-started.md) copying the example config to idleshare.config.json at the root
    assert "cp infra/config.example.json idleshare.config.json" in (REPO / "docs/getting-started.md").read_text()
    # Then git ignores that file (an operator's clusters are not committed), and not the example it copies
    ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "idleshare.config.json"], check=False)
    assert ignored.returncode == 0
    example = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "infra/config.example.json"], check=False)
    assert example.returncode == 1
