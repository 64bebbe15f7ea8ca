"""`./idleshare`, the CLI the README shows, works in a shell where neither uv nor the venv is on PATH (what a
newcomer has after `make demo`), from any directory; in a checkout without the venv it says what to run."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).parents[2]
BARE_PATH = "/usr/bin:/bin"


def run(launcher: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(launcher), *args], cwd=cwd, env={"PATH": BARE_PATH, "HOME": str(cwd)}, capture_output=True, text=True
    )


def test_the_launcher_runs_plan_from_another_directory_with_nothing_on_path(tmp_path):
    # Given a shell whose PATH has neither uv nor the venv, in a directory outside the checkout
    assert shutil.which("uv", path=BARE_PATH) is None and shutil.which("idleshare", path=BARE_PATH) is None
    # When `./idleshare plan` is run on the example files
    r = run(
        REPO / "idleshare",
        "plan",
        "--nodes",
        str(REPO / "events/examples/nodes.json"),
        "--quotas",
        str(REPO / "events/examples/quotas.json"),
        "--format",
        "json",
        cwd=tmp_path,
    )
    # Then it computes the pool (the example's p5 flavor: 7 eligible nodes x 8 GPUs)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["capacity"]["ml.p5.48xlarge"]["nvidia.com/gpu"] == "56"


def test_the_launcher_without_the_venv_says_to_run_make_demo(tmp_path):
    # Given the launcher in a checkout where `make demo` has not run (no .venv)
    shutil.copy(REPO / "idleshare", tmp_path / "idleshare")
    # When it is run
    r = run(tmp_path / "idleshare", "plan", "--help", cwd=tmp_path)
    # Then it exits 1 naming the missing venv and what creates it, with no traceback
    assert r.returncode == 1
    assert f"{tmp_path}/.venv is not set up: run `make demo`" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_version_is_the_one_written_in_the_package(tmp_path):
    # Given the version written once, in functions/idleshare/__init__.py
    import idleshare

    declared = idleshare.__version__
    # When `./idleshare --version` runs
    r = run(REPO / "idleshare", "--version", cwd=tmp_path)
    # Then it prints that version on stdout and exits 0
    assert (r.returncode, r.stdout, r.stderr) == (0, f"idleshare {declared}\n", "")
