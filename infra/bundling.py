"""The Lambda asset, built without Docker.

`lambda_code()` returns one `Code` shared by every idleshare function: the `idleshare` package from
`functions/` plus its runtime dependencies as wheels for the Lambda platform (Python 3.12, arm64),
installed with `uv pip install --target` from the versions pinned in uv.lock (boto3/botocore/
s3transfer come with the Lambda runtime and are left out).

The dependency tree is cached in `.build/lambda-deps-<hash of uv.lock and the install command>/`, so
only a change of uv.lock reinstalls; the package source is copied fresh on every bundling. The asset
hash is computed from uv.lock and the source, so an unchanged asset is not rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

REPO_ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = REPO_ROOT / "functions"
PACKAGE = "idleshare"
LOCK_FILE = REPO_ROOT / "uv.lock"
BUILD_DIR = REPO_ROOT / ".build"

PYTHON_VERSION = "3.12"
PYTHON_PLATFORM = "aarch64-manylinux2014"
# In the Lambda Python runtime already.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer")
EXCLUDE = ("__pycache__", "*.pyc", "*.pyo", ".mypy_cache", ".pytest_cache", ".ruff_cache")

_EXPORT = [
    "export",
    "--frozen",
    "--no-default-groups",
    "--no-emit-project",
    "--no-hashes",
    "--format",
    "requirements-txt",
    *(arg for pkg in RUNTIME_PROVIDED for arg in ("--no-emit-package", pkg)),
]


def install_args(platform: str = PYTHON_PLATFORM) -> list[str]:
    """``uv pip install`` for the Lambda's Python on ``platform`` (wheels only, the locked versions)."""
    return [
        "pip",
        "install",
        "--no-deps",
        "--only-binary=:all:",
        "--python-platform",
        platform,
        "--python-version",
        PYTHON_VERSION,
    ]


class BundlingError(RuntimeError):
    """The Lambda dependencies could not be installed."""


def _source_files() -> list[Path]:
    root = FUNCTIONS_DIR / PACKAGE
    return sorted(
        p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix not in {".pyc", ".pyo"}
    )


def deps_hash(platform: str = PYTHON_PLATFORM) -> str:
    h = hashlib.sha256()
    h.update(LOCK_FILE.read_bytes())
    h.update("\0".join(_EXPORT + install_args(platform)).encode())
    return h.hexdigest()[:16]


def asset_hash() -> str:
    """Hash of what goes into the asset: the locked dependencies and the package source."""
    h = hashlib.sha256(deps_hash().encode())
    for path in _source_files():
        h.update(str(path.relative_to(FUNCTIONS_DIR)).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def _run(cmd: list[str]) -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise BundlingError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr.strip()}")


def uv_binary() -> str:
    uv = shutil.which("uv")
    if uv is None:
        raise BundlingError("`uv` is not on PATH: run the CDK app with `uv run` (see cdk.json)")
    return uv


def build_dependencies(platform: str = PYTHON_PLATFORM) -> Path:
    """Install the locked runtime dependencies for the Lambda's Python on ``platform`` (the Lambda's
    arm64 by default) into the cache (once per lock)."""
    suffix = "" if platform == PYTHON_PLATFORM else f"-{platform}"

    def install(uv: str, tmp: Path, staging: Path) -> None:
        requirements = tmp / "requirements.txt"
        _run([uv, *_EXPORT, "--output-file", str(requirements)])
        _run([uv, *install_args(platform), "--target", str(staging), "-r", str(requirements)])
        for cache in staging.rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)

    return cached_build(f"lambda-deps-{deps_hash(platform)}{suffix}", install)


def cached_build(name: str, install: Callable[[str, Path, Path], None]) -> Path:
    """``.build/<name>``, built once: ``install(uv, tmp, staging)`` fills ``staging`` (``tmp`` holds its
    scratch files), which is then published as the cached directory."""
    target = BUILD_DIR / name
    if target.is_dir():
        return target
    uv = uv_binary()
    BUILD_DIR.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD_DIR, prefix="tmp-build-") as tmp:
        staging = Path(tmp) / "site"
        install(uv, Path(tmp), staging)
        publish(staging, target)
    return target


def publish(staging: Path, target: Path) -> None:
    """Move a finished build into the cache; atomic: concurrent synths race harmlessly."""
    try:
        os.replace(staging, target)
    except OSError:
        if not target.is_dir():
            raise


def bundle_into(output_dir: Path, platform: str = PYTHON_PLATFORM) -> None:
    """Write the complete Lambda asset (dependencies + the idleshare package) into output_dir."""
    shutil.copytree(build_dependencies(platform), output_dir, dirs_exist_ok=True)
    shutil.copytree(
        FUNCTIONS_DIR / PACKAGE,
        output_dir / PACKAGE,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(*EXCLUDE),
    )


@jsii.implements(ILocalBundling)
class UvLocalBundling:
    """CDK local bundling with uv: no Docker needed."""

    def try_bundle(self, output_dir: str, *_: object, **__: object) -> bool:
        try:
            bundle_into(Path(output_dir))
        except BundlingError as exc:
            print(f"idleshare: local bundling failed: {exc}", file=sys.stderr)
            raise
        return True


def lambda_code(*, stub: bool = False) -> lambda_.Code:
    """The asset for every idleshare function (`stub`: the source alone, for fast unit tests)."""
    if stub:
        return lambda_.Code.from_asset(str(FUNCTIONS_DIR), exclude=list(EXCLUDE))
    return lambda_.Code.from_asset(
        str(FUNCTIONS_DIR),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=asset_hash(),
        bundling=BundlingOptions(
            # Never pulled: local bundling always succeeds or raises.
            image=DockerImage.from_registry("public.ecr.aws/sam/build-python3.12"),
            local=UvLocalBundling(),
        ),
    )
