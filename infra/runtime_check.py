"""Does the Lambda asset run on the Lambda's Python? Build it as ``infra/bundling.py`` does, for this
machine's architecture, and import every handler on CPython 3.12 with nothing on ``sys.path`` but the
asset, boto3 (what the runtime provides) and the standard library.

``python -m infra.runtime_check`` prints each handler's cold import time and exits 1 on a missing
dependency, a module loaded from anywhere else, or a dev-only package in the asset. Python 3.12 is
found by ``$IDLESHARE_PYTHON312``, ``uv python find 3.12``, pyenv's versions, or ``python3.12`` on PATH.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from idleshare import names
from infra.bundling import (
    _EXPORT,
    PYTHON_VERSION,
    RUNTIME_PROVIDED,
    BundlingError,
    _run,
    bundle_into,
    cached_build,
    deps_hash,
    uv_binary,
)

HANDLER_MODULES = tuple(h.rsplit(".", 1)[0] for h in names.FUNCTION_ENV)
"""The module of every function's handler: ``names.FUNCTION_ENV`` has one entry per function (deploy_check's
environment check fails on a function without one), so a new function is rehearsed without a list to extend."""
# Imported lazily by the handlers on their first event: must be in the asset too.
LAZY_MODULES = (
    "idleshare.adapters.aws",
    "idleshare.adapters.store",
    "idleshare.adapters.eks_auth",
    "idleshare.adapters.kube",
    "idleshare.service.recompute",
    "idleshare.service.registry",
    "idleshare.service.usage",
    "lightkube.utils.quantity",
    "aws_lambda_powertools.utilities.idempotency",
    "aws_lambda_powertools.utilities.batch",
)
# Packages of the dev / infra dependency groups (and ours that are never deployed): none may be imported.
DEV_ONLY = (
    "devkit", "tests", "moto", "pytest", "_pytest", "xdist", "hypothesis", "jsonschema",
    "mypy", "ruff", "importlinter", "aws_cdk", "constructs", "cdk_nag", "cfnlint", "jsii", "mypy_boto3_dynamodb",
)  # fmt: skip
ENV_PYTHON = "IDLESHARE_PYTHON312"

CHILD = r"""
import json, sys, time
asset, boto, modules, lazy = sys.argv[1], sys.argv[2], [m for m in sys.argv[3].split(",") if m], [m for m in sys.argv[4].split(",") if m]
sys.path[:0] = [asset, boto]
stdlib = [p for p in sys.path[2:]]
out = {"python": sys.version.split()[0], "imports": {}, "errors": {}}
t0 = time.perf_counter(); import boto3; out["boto3_ms"] = (time.perf_counter() - t0) * 1000
for name in modules + lazy:
    t = time.perf_counter()
    try:
        __import__(name)
    except BaseException as exc:
        out["errors"][name] = f"{type(exc).__name__}: {exc}"
        continue
    out["imports"][name] = (time.perf_counter() - t) * 1000
out["files"] = sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())} - {""})
out["modules"] = sorted(sys.modules)
print(json.dumps(out))
"""


class RuntimeCheckError(RuntimeError):
    """The runtime check could not run (no Python 3.12, no asset)."""


def machine_platform() -> str:
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{arch}-manylinux2014"


def _works(python: str) -> bool:
    try:
        proc = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    except OSError:
        return False
    return proc.returncode == 0 and proc.stdout.strip() == "(3, 12)"


def find_python312() -> str:
    tried: list[str] = []
    candidates: list[str] = []
    if os.environ.get(ENV_PYTHON):
        candidates.append(os.environ[ENV_PYTHON])
    try:
        uv = uv_binary()
        proc = subprocess.run([uv, "python", "find", "--no-project", PYTHON_VERSION], capture_output=True, text=True)
        if proc.returncode == 0:
            candidates.append(proc.stdout.strip())
        else:
            tried.append(
                f"uv python find {PYTHON_VERSION}: {proc.stderr.strip().splitlines()[0] if proc.stderr else ''}"
            )
    except BundlingError as exc:
        tried.append(str(exc))
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/{PYTHON_VERSION}*/bin/python{PYTHON_VERSION}"), reverse=True)
    candidates += [p for p in (shutil.which(f"python{PYTHON_VERSION}"), f"/usr/bin/python{PYTHON_VERSION}") if p]
    for candidate in candidates:
        if _works(candidate):
            return candidate
        tried.append(f"{candidate}: not a working Python {PYTHON_VERSION}")
    raise RuntimeCheckError(
        f"no Python {PYTHON_VERSION} (the Lambda runtime's version) on this machine; tried: "
        + "; ".join(tried or ["nothing found"])
        + f". Set {ENV_PYTHON}, or install one (pyenv install {PYTHON_VERSION}; Debian bookworm has no python3.12)"
    )


def build_boto3(platform_tag: str) -> Path:
    """boto3 and its dependencies at the locked versions, for Python 3.12 on ``platform_tag`` (cached)."""

    def install(uv: str, tmp: Path, staging: Path) -> None:
        constraints = tmp / "constraints.txt"
        export = [a for a in _EXPORT if a not in RUNTIME_PROVIDED and a != "--no-emit-package"]
        _run([uv, *export, "--output-file", str(constraints)])
        _run(
            [uv, "pip", "install", "--only-binary=:all:", "--python-platform", platform_tag, "--python-version",
             PYTHON_VERSION, "--target", str(staging), "-c", str(constraints), *RUNTIME_PROVIDED]
        )  # fmt: skip

    return cached_build(f"lambda-boto3-{deps_hash(platform_tag)}-{platform_tag}", install)


@dataclass
class RuntimeReport:
    python: str
    version: str
    boto3_ms: float
    imports: dict[str, float]
    problems: list[str]

    def lines(self) -> list[str]:
        out = [f"Lambda asset on Python {self.version} ({self.python}), {machine_platform()} wheels:"]
        out.append(f"  import boto3 (the floor; no bytecode cache, as in the read-only asset): {self.boto3_ms:.0f} ms")
        for module in HANDLER_MODULES:
            if module in self.imports:
                out.append(f"  cold import {module} (after boto3): {self.imports[module]:.0f} ms")
        return out + [f"  PROBLEM: {p}" for p in self.problems]


def _child(python: str, asset: Path, boto: Path, modules: list[str], lazy: list[str]) -> dict:
    proc = subprocess.run(
        [python, "-I", "-S", "-B", "-c", CHILD, str(asset), str(boto), ",".join(modules), ",".join(lazy)],
        capture_output=True, text=True, timeout=300, env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeCheckError(f"the import child failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def check_runtime(asset: Path | None = None, python: str | None = None) -> RuntimeReport:
    python = python or find_python312()
    tag = machine_platform()
    boto = build_boto3(tag)
    with tempfile.TemporaryDirectory(prefix="idleshare-asset-") as tmp:
        if asset is None:
            asset = Path(tmp) / "asset"
            bundle_into(asset, tag)
        # one child per handler (its cold import alone), then one importing everything (what is loaded from where)
        cold = {m: _child(python, asset, boto, [m], [])["imports"].get(m, -1.0) for m in HANDLER_MODULES}
        out = _child(python, asset, boto, list(HANDLER_MODULES), list(LAZY_MODULES))
        problems = [f"import {m}: {e}" for m, e in out["errors"].items()]
        stdlib_prefix = subprocess.run(
            [python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
            capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        allowed = (str(asset), str(boto), stdlib_prefix)
        problems += [f"loaded from outside the asset: {f}" for f in out["files"] if not f.startswith(allowed)]
        problems += [f"dev-only module imported: {m}" for m in out["modules"] if m.split(".")[0] in DEV_ONLY]
        problems += [f"dev-only package in the asset: {p.name}" for p in asset.iterdir() if p.name in DEV_ONLY]
        problems += [f"{p} is in the asset (the runtime provides it)" for p in RUNTIME_PROVIDED if (asset / p).exists()]
    return RuntimeReport(python, out["python"], out["boto3_ms"], cold, problems)


def main() -> int:
    try:
        report = check_runtime()
    except (RuntimeCheckError, BundlingError) as exc:
        print(f"idleshare runtime check: {exc}", file=sys.stderr)
        return 1
    print("\n".join(report.lines()))
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
