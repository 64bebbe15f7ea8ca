"""The real thing: `npx cdk synth` with the pinned CLI and the Docker-free local bundling."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from idleshare import names
from infra.bundling import RUNTIME_PROVIDED, asset_hash, bundle_into, deps_hash
from infra.config import CONTEXT_CONFIG_FILE, rehearsal_config

REPO_ROOT = Path(__file__).resolve().parents[2]
AARCH64_CORE = "pydantic_core/_pydantic_core.cpython-312-aarch64-linux-gnu.so"


def _assert_lambda_asset(asset: Path) -> None:
    assert (asset / "idleshare" / "names.py").is_file()
    assert not (asset / "idleshare" / "cli").exists() and not (asset / "idleshare_cli").exists(), (
        "the CLI is not deployed"
    )
    assert (asset / AARCH64_CORE).is_file(), "wheels must be the Lambda platform's (cp312, aarch64)"
    for module in ("aws_lambda_powertools", "pydantic", "lightkube"):
        assert (asset / module).is_dir(), module
    for provided in RUNTIME_PROVIDED:
        assert not (asset / provided).exists(), f"{provided} is in the Lambda runtime"
    assert not list(asset.rglob("__pycache__"))


def test_local_bundling_builds_the_lambda_platform_asset(tmp_path: Path) -> None:
    bundle_into(tmp_path)

    _assert_lambda_asset(tmp_path)


def test_asset_hash_is_stable_and_keyed_by_lock_and_source() -> None:
    assert asset_hash() == asset_hash()
    assert len(deps_hash()) == 16


@pytest.mark.skipif(shutil.which("npx") is None or shutil.which("node") is None, reason="node/npx not installed")
def test_npx_cdk_synth_offline_with_real_bundling(tmp_path: Path) -> None:
    cli = REPO_ROOT / "node_modules" / ".bin" / "cdk"
    assert cli.exists(), "run `npm ci` first (the CDK CLI is pinned in package-lock.json)"
    env = {
        **os.environ,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "CDK_DEFAULT_ACCOUNT": "111111111111",
        "CDK_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    out = tmp_path / "cdk.out"
    config = tmp_path / "config.json"  # cdk.json names the example, refused as it stands: the example's clusters
    config.write_text(json.dumps(rehearsal_config()))

    proc = subprocess.run(
        [
            "npx",
            "--no-install",
            "cdk",
            "synth",
            "--quiet",
            "--no-notices",
            "--no-version-reporting",
            "-o",
            str(out),
            "-c",
            f"{CONTEXT_CONFIG_FILE}={config}",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert proc.returncode == 0, proc.stderr[-4000:]
    template = json.loads((out / f"{names.STACK_NAME}.template.json").read_text())
    handlers = {
        r["Properties"]["Handler"]: r["Properties"]["Code"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }
    assert set(handlers) >= {names.ROUTER_HANDLER, names.RECOMPUTE_HANDLER, names.API_HANDLER, names.REGISTRAR_HANDLER}
    assert len({json.dumps(c, sort_keys=True) for c in handlers.values()}) == 1, "one shared asset"
    assets = json.loads((out / f"{names.STACK_NAME}.assets.json").read_text())["files"]
    (code,) = {json.dumps(c, sort_keys=True) for c in handlers.values()}
    asset_id = json.loads(code)["S3Key"].removesuffix(".zip")
    _assert_lambda_asset(out / assets[asset_id]["source"]["path"])
