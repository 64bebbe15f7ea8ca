"""idleshare's version is written once, functions/idleshare/__init__.py's ``__version__``: the package metadata
(hatchling reads that file), ``idleshare --version`` and the CloudFormation stack's description read it, and no
other file keeps a copy (pyproject.toml declares it dynamic, uv.lock records none). The synthesized template's
description is checked in tests/infra/test_stack_version.py."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

import idleshare
from idleshare_cli.main import main
from infra.stack import stack_description

REPO = Path(__file__).parents[2]


def test_the_package_metadata_is_the_written_version():
    # Given the installed package (uv sync built it from this checkout), Then its metadata's version is __version__
    assert importlib.metadata.version("idleshare") == idleshare.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", idleshare.__version__)


def test_no_other_file_keeps_a_copy():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    # pyproject.toml: no static version, hatchling reads the package's file
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "functions/idleshare/__init__.py"
    # uv: a change of that file rebuilds the installed metadata (so --version and the metadata never differ)
    assert {"file": "functions/idleshare/__init__.py"} in project["tool"]["uv"]["cache-keys"]
    # uv.lock: idleshare's entry records no version
    lock = (REPO / "uv.lock").read_text()
    entry = lock[lock.index('name = "idleshare"\n') :].split("\n\n", 1)[0]
    assert "version =" not in entry.split("dependencies")[0], entry


@pytest.mark.parametrize("version", ["0.1.0", "7.8.9"])
def test_version_and_the_stack_description_read_it(monkeypatch, capsys, version):
    # Given a version (this checkout's, or another one set in its place)
    monkeypatch.setattr(idleshare, "__version__", version)
    # When `idleshare --version` runs
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    # Then it prints that version, and the stack's description names it
    assert exited.value.code in (0, None)
    assert capsys.readouterr().out == f"idleshare {version}\n"
    assert stack_description() == f"idleshare {version}: lendable GPU pool for EKS / HyperPod + Kueue"
