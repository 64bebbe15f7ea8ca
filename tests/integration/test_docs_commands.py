"""Every `--local` command events/README.md shows, run as written (globs expanded as a shell would) on the session's
real kube-apiserver + Kueue: each exits 0, the plain event file changes a node of the default fixture (never
"nothing changed"), the JSON one is JSON with every scenario. The `--bus` ones: tests/unit/test_docs_commands_bus.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devkit.embedded import Embedded
from idleshare_cli.main import main
from tests.unit.test_docs_commands_bus import ROOT, argv_of, readme_commands

pytestmark = pytest.mark.integration
LOCAL = [c for c in readme_commands() if "--local" in c]


@pytest.fixture(autouse=True)
def session_stack(kube, monkeypatch):
    monkeypatch.setattr(Embedded, "shared_kube", kube)
    monkeypatch.chdir(ROOT)
    return kube


def test_the_readme_shows_local_commands():
    assert len(LOCAL) >= 3


@pytest.mark.parametrize("command", LOCAL, ids=lambda c: c.split()[2].rsplit("/", 1)[-1])
def test_every_local_command_runs_as_written(command, capsys):
    argv = argv_of(command)
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "nothing changed" not in out
    if "--format" in argv and argv[argv.index("--format") + 1] == "json":
        runs = json.loads(out)
        runs = runs if isinstance(runs, list) else [runs]
        assert sorted(r["source"] for r in runs) == sorted(a for a in argv if a.endswith((".yaml", ".json")))
        assert all(r["steps"] for r in runs)
    elif "events/inbound/" in command:
        # the example event names a node of the default fixture, which the replay changes
        node = json.loads(Path(ROOT, argv[1]).read_text())["detail"]["node"]
        assert f"{node}" in out and "NotReady" in out
    else:
        assert "expectations hold" in out


def test_the_readmes_screenshot_page_is_the_demos_cluster_with_its_causes():
    # Given the demo's cluster after its third step, as devkit.screenshot renders it for docs/report.png
    from devkit.screenshot import page_of

    page = page_of(3)
    # Then it shows why each team waits, beside Kueue's words, and no test strings
    assert 'data-cause="absolute"' in page and 'data-cause="not in quota"' in page
    assert 'data-cause="percentage of quota"' in page
    assert "alert(" not in page and "&lt;script" not in page
