"""The CDK app's launcher (cdk.json: ``python3 infra/launch.py``): stdlib only, any Python 3.

``npx cdk deploy`` runs the app in a new shell, where the ``uv`` that ``make`` installed (``pip install
--user``: ``~/.local/bin``) need not be on PATH. This finds it — PATH, the user scripts directory, the
``uv`` Python package — puts its directory on PATH (the Docker-free bundling in ``infra/bundling.py``
calls it too) and runs ``uv run --no-sync python -m infra.app`` from the repository root.

The app's standard error passes through as text: jsii's Python runtime prints each line of node's standard error
that is not its protocol as ``print(bytes)`` (Node's end-of-life banner read ``b'!!  Node 20 is ...  !!\\n'``);
such a line is written as the text it holds. Standard output, every other line and the exit code are the app's.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
APP = ["run", "--no-sync", "python", "-m", "infra.app"]
_BYTES_LITERAL = re.compile(r"""b(['"]).*\1""")


def find_uv() -> str | None:
    found = shutil.which("uv")
    if found:
        return found
    candidates = [Path.home() / ".local" / "bin" / "uv"]
    for scheme in ("posix_user", "posix_prefix"):
        try:
            candidates.append(Path(sysconfig.get_path("scripts", scheme)) / "uv")
        except KeyError:
            continue
    try:
        from uv import find_uv_bin  # the PyPI package `uv` (what `make bootstrap` installs)

        candidates.append(Path(find_uv_bin()))
    except (ImportError, FileNotFoundError):
        pass
    return next((str(c) for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def readable(line: str) -> str:
    """``line`` (without its line break), or the text it holds when it is a bytes literal as ``print(bytes)``
    writes one (its own trailing line break dropped: print added one)."""
    if not _BYTES_LITERAL.fullmatch(line):
        return line
    try:
        value = ast.literal_eval(line)
    except (ValueError, SyntaxError):
        return line
    if not isinstance(value, bytes):
        return line
    text = value.decode("utf-8", errors="replace")
    return text[:-1] if text.endswith("\n") else text


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> int:
    """Run ``cmd``, its standard error relayed line by line through :func:`readable`; its exit code."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    try:
        for raw in iter(proc.stderr.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            body = line.rstrip("\r\n")
            sys.stderr.write(readable(body) + line[len(body) :])
            sys.stderr.flush()
    except KeyboardInterrupt:  # Ctrl-C reached the app too (one process group): let it end, say how
        pass
    finally:
        proc.stderr.close()
    return proc.wait()


def main() -> int:
    uv = find_uv()
    if uv is None:
        print("idleshare: `uv` not found (PATH, ~/.local/bin): run `make sync` first", file=sys.stderr)
        return 1
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(uv).parent), env.get("PATH", "")])
    return run([uv, *APP], cwd=REPO_ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main())
