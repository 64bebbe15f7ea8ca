"""The Lambda asset holds the Lambda package only: the operator CLI (``cli/idleshare_cli``, its HTML report
included) lives beside it, so a change to the report leaves the functions' asset hash — what CDK names the uploaded
zip by, and so what redeploys the five functions — unchanged, while a change to the Lambda package changes it.

The hash is read as CDK computes it: ``infra.bundling.lambda_code()`` bound to a stack, its S3 key (bundling skipped
through the ``aws:cdk:bundling-stacks`` context, as the CDK CLI does for a stack it does not deploy: the deployed
asset's hash is ``bundling.asset_hash()``, known before bundling), on a copy of the source tree whose files the test
edits (never the checkout's). On the layout before the CLI moved out (``functions/idleshare/cli``) the same edit
changed both keys."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from aws_cdk import App, Stack

from idleshare_cli import report_html
from infra import bundling

REPO_ROOT = Path(__file__).resolve().parents[2]
REPORT = Path(report_html.__file__).resolve().relative_to(REPO_ROOT)  # where the report's HTML is written


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the Lambda package's directory and of the report's, with the asset built from the copy."""
    root = tmp_path / "repo"
    for top in sorted({bundling.FUNCTIONS_DIR.relative_to(REPO_ROOT).parts[0], REPORT.parts[0]}):
        shutil.copytree(REPO_ROOT / top, root / top, ignore=shutil.ignore_patterns(*bundling.EXCLUDE))
    monkeypatch.setattr(bundling, "FUNCTIONS_DIR", root / bundling.FUNCTIONS_DIR.relative_to(REPO_ROOT))
    return root


def functions_asset_key(*, stub: bool) -> str:
    """The S3 key of the functions' code as CDK synthesizes it (``<asset hash>.zip``)."""
    app = App(context={"aws:cdk:bundling-stacks": []})  # no stack is bundled: the key is the asset's hash alone
    code = bundling.lambda_code(stub=stub).bind(Stack(app, "AssetProbe"))
    assert code.s3_location is not None
    return code.s3_location.object_key


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path}: {old!r} is not there once"
    path.write_text(text.replace(old, new), encoding="utf-8")


@pytest.mark.parametrize("stub", [False, True], ids=["deployed-asset", "stub-asset"])
def test_a_change_to_the_reports_html_leaves_the_functions_asset_unchanged(tree: Path, stub: bool) -> None:
    # Given the functions' asset as CDK names it
    before = functions_asset_key(stub=stub)
    # When the CLI's report writes different HTML
    edit(tree / REPORT, '<html lang="en">', '<html lang="en" data-edited="report">')
    # Then the functions' asset hash is the same: nothing of the CLI is in the asset, no function redeploys
    assert functions_asset_key(stub=stub) == before
    # ...while a change to the Lambda package (a module every function imports) changes it
    timings = tree / "functions" / "idleshare" / "timings.py"
    timings.write_text(timings.read_text(encoding="utf-8") + "EDITED = True\n", encoding="utf-8")
    assert functions_asset_key(stub=stub) != before


def test_the_cli_is_outside_the_lambda_package() -> None:
    # The asset is FUNCTIONS_DIR's idleshare package (bundle_into copies it, asset_hash reads it): no CLI module in it
    in_asset = bundling.FUNCTIONS_DIR / bundling.PACKAGE
    assert not Path(report_html.__file__).resolve().is_relative_to(bundling.FUNCTIONS_DIR)
    assert not (in_asset / "cli").exists()
    # and the stub asset (all of FUNCTIONS_DIR) holds the Lambda package alone
    assert [p.name for p in bundling.FUNCTIONS_DIR.iterdir() if p.name not in bundling.EXCLUDE] == [bundling.PACKAGE]
