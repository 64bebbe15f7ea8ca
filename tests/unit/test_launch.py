"""infra/launch.py, the CDK app's launcher (cdk.json), passes the app's standard error through as text: jsii's Python
runtime prints each line of node's standard error that is not its own protocol as ``print(bytes)``, so Node's
end-of-life banner reached `npx cdk synth` as ``b'!!  Node 20 is end-of-life ...  !!\\n'``. The app's standard
output, exit code and every other line pass unchanged."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[2]
LAUNCH = REPO / "infra" / "launch.py"

# What jsii's stderr_sink does with a line of node's stderr that is not JSON: print(line, file=sys.stderr)
JSII_LIKE = r"""
import sys
print("synthesized", flush=True)
print(b'!!!!!!!!!!!!\n', file=sys.stderr, flush=True)
print(b'!!  Node 20 is end-of-life and not supported anymore by this software since 2026-10-30.  !!\n', file=sys.stderr)
print(b"it's \xc3\xa9 quoted\n", file=sys.stderr)
print("idleshare: a line of our own", file=sys.stderr)
print("b'not bytes", file=sys.stderr)
sys.exit(3)
"""


def fake_uv(directory: Path, program: str) -> Path:
    """A `uv` first on PATH that runs ``program`` whatever it is asked (launch.py runs `uv run ... infra.app`)."""
    (directory / "child.py").write_text(program)
    uv = directory / "uv"
    uv.write_text(f"#!/bin/sh\nexec {sys.executable} {directory / 'child.py'}\n")
    uv.chmod(uv.stat().st_mode | stat.S_IXUSR)
    return uv


def launch(directory: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = f"{directory}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        [sys.executable, str(LAUNCH)],
        env={**(env or os.environ), "PATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_apps_byte_lines_reach_the_terminal_as_text(tmp_path):
    # Given an app whose standard error carries lines as jsii prints them (bytes' repr), and lines of its own
    fake_uv(tmp_path, JSII_LIKE)
    # When the launcher runs it
    r = launch(tmp_path)
    # Then each of jsii's lines is its text, the others unchanged; stdout and the exit code are the app's
    assert r.stderr.splitlines() == [
        "!!!!!!!!!!!!",
        "!!  Node 20 is end-of-life and not supported anymore by this software since 2026-10-30.  !!",
        "it's é quoted",
        "idleshare: a line of our own",
        "b'not bytes",
    ]
    assert (r.stdout, r.returncode) == ("synthesized\n", 3)


def test_the_real_jsii_runtime_through_the_launcher_prints_no_bytes(tmp_path):
    # Given the CDK's jsii runtime started with Node's version warning not silenced (as a new shell runs `npx cdk`)
    fake_uv(tmp_path, "import constructs\nprint(constructs.Construct.__name__)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_SILENCE_WARNING")}
    # When the launcher runs it
    r = launch(tmp_path, env)
    # Then it worked, and whatever node said on its standard error is text, not a bytes literal
    assert (r.returncode, r.stdout) == (0, "Construct\n"), r.stderr
    assert not [line for line in r.stderr.splitlines() if line.startswith(("b'", 'b"'))], r.stderr
