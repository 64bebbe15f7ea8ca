"""The CDK app's launcher (cdk.json: ``python3 infra/launch.py``): stdlib only, any Python 3.

``npx cdk deploy`` runs the app in a new shell, where the ``uv`` that ``make`` installed (``pip install
--user``: ``~/.local/bin``) need not be on PATH. This finds it — PATH, the user scripts directory, the
``uv`` Python package — puts its directory on PATH (the Docker-free bundling in ``infra/bundling.py``
calls it too) and runs ``uv run --no-sync python -m infra.app`` from the repository root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
APP = ["run", "--no-sync", "python", "-m", "infra.app"]


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


def main() -> int:
    uv = find_uv()
    if uv is None:
        print("idleshare: `uv` not found (PATH, ~/.local/bin): run `make sync` first", file=sys.stderr)
        return 1
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(uv).parent), env.get("PATH", "")])
    return subprocess.call([uv, *APP], cwd=REPO_ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main())
